package gateway

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
)

// What the gateway says of request-controlled text: in its replies and its
// logs, a value a sender chose is bounded and escaped, never copied.
const (
	// maxQuoted bounds a value quoted in a reply's description.
	maxQuoted = 64
	// maxLogged bounds a value written to the log.
	maxLogged = 128
	// maxDescription bounds a signed reply's description.
	maxDescription = 400
)

// quoteText is s as a Go-quoted ASCII string of at most maxQuoted runes
// ("…" marks a cut), for naming a sender's value in a description.
func quoteText(s string) string { return strconv.QuoteToASCII(cut(s, maxQuoted)) }

// logText is s cut to maxLogged runes, for the log (whose handler
// escapes it).
func logText(s string) string { return cut(s, maxLogged) }

func cut(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// asciiDescription makes a description an ARSIA error may carry
// (printable ASCII, bounded): anything else is escaped, so that a signed
// request is always answered with a signed error, whatever its text.
func asciiDescription(s string) string {
	ok := s != "" && len(s) <= maxDescription
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] >= 0x20 && s[i] <= 0x7e
	}
	if ok {
		return s
	}
	q := strconv.QuoteToASCII(cut(s, maxDescription/2))
	q = q[1 : len(q)-1] // the quotes
	if q == "" {
		return "The request was refused."
	}
	if len(q) > maxDescription {
		q = q[:maxDescription-3] + "..."
	}
	return q
}

// issueError is the ARSIA error for a validation issue: its code and the
// JSON pointer of the member at fault, in fixed words; the validator's
// own message may quote the sender's values, and stays out.
func issueError(i arsia.Issue) *arsia.Error {
	d := map[string]any{"reason": i.Code}
	at := ""
	if i.Pointer != "" {
		d["pointer"] = cut(i.Pointer, maxQuoted)
		at = " at " + quoteText(i.Pointer)
	}
	return &arsia.Error{Code: i.Code, Description: "The message is invalid" + at + " (" + quoteText(i.Code) + ").", Details: d}
}

// checkFreshness refuses a message outside its acceptance window: ts
// further than the effective profile's clock skew from now, or expires_at
// (plus the skew) passed (ARSIA Core §8.3). The wire code is
// invalid_request; details name the member by JSON pointer.
func checkFreshness(env map[string]any, reg *compliance.Registry, now time.Time) *arsia.Error {
	skew := compliance.ClockSkew(env, reg)
	at := func(name string) (time.Time, bool) {
		s, _ := env[name].(string)
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	ts, ok := at("ts")
	if !ok {
		return &arsia.Error{Code: "invalid_ts", Description: "The message has no valid ts.", Details: map[string]any{"pointer": "/ts", "reason": "missing_ts"}}
	}
	if d := ts.Sub(now); d > skew || d < -skew {
		return &arsia.Error{Code: "invalid_ts", Description: "The message's ts is outside the accepted clock skew of " + skew.String() + ".",
			Details: map[string]any{"pointer": "/ts", "reason": "ts_outside_clock_skew", "clock_skew_seconds": int(skew.Seconds())}}
	}
	if exp, ok := at("expires_at"); ok && now.After(exp.Add(skew)) {
		return &arsia.Error{Code: "invalid_expires_at", Description: "The message expired.",
			Details: map[string]any{"pointer": "/expires_at", "reason": "expired", "clock_skew_seconds": int(skew.Seconds())}}
	}
	return nil
}
