package gateway

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/custos-runtime/custos/arsia"
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
		d["field"] = cut(i.Pointer, maxQuoted)
		at = " at " + quoteText(i.Pointer)
	}
	return &arsia.Error{Code: i.Code, Description: "The message is invalid" + at + " (" + quoteText(i.Code) + ").", Details: d}
}
