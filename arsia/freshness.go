package arsia

import (
	"errors"
	"strconv"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
)

// ErrNotFresh is the cause of every CheckFreshness error: the message is
// outside the window in which a receiver may accept it.
var ErrNotFresh = errors.New("arsia: message is not fresh")

// Freshness issue codes (internal; all answer invalid_request, ASC 4000).
const (
	// IssueMessageExpired: expires_at plus the clock skew has passed
	// (Core §4.2.2: "Recipients MUST reject messages whose expires_at is in
	// the past (after accounting for skew) with invalid_request").
	IssueMessageExpired = "message_expired"
	// IssueClockSkewExceeded: ts differs from the receiver's clock by more
	// than the clock skew (Core §8.3; the conformance vectors' code
	// CLOCK_SKEW_EXCEEDED, answered invalid_request).
	IssueClockSkewExceeded = "clock_skew_exceeded"
	// IssueMissingTS / IssueInvalidTS: ts is absent, or not a wire
	// timestamp, so freshness cannot be judged: refused (fail closed).
	IssueMissingTS = "missing_ts"
	IssueInvalidTS = "invalid_ts"
	// IssueInvalidExpiresAt: expires_at is present but not a wire
	// timestamp (the code ARSIA-Routing uses for the same fault).
	IssueInvalidExpiresAt = "invalid_expires_at"
)

// CheckFreshness is the receiver's time check of a message (Core §4.2.2,
// §8.3), with skew the tolerance of the message's effective compliance
// profile (compliance.ClockSkew: EU-AI-ACT-HIGH-RISK 120 s, MIFID-II and
// DORA 60 s, otherwise 300 s; a nil profiles means the bundled ones). A
// message is refused when
//
//   - expires_at is present and now > expires_at + skew (message_expired),
//     or it is not a wire timestamp (invalid_expires_at);
//   - ts is missing or not a wire timestamp (missing_ts, invalid_ts), or
//     |now - ts| > skew (clock_skew_exceeded): older than the skew, or
//     from the future.
//
// Both bounds are inclusive: a message exactly skew old, or exactly skew
// past its expiry, is accepted. expires_at is judged first, since ARSIA
// makes that refusal a MUST.
//
// Every error answers invalid_request. Its details name the field by JSON
// pointer ({"field": "/ts"}) with the skew applied and the receiver's time,
// and never repeat the message's values. It returns nil for a fresh
// message.
//
// Run it at receipt, after the signature (so that the skew comes from a
// compliance block the sender signed) and before anything is stored. A
// message kept and processed later (an approved request resumed hours
// after receipt) must not be checked again against the later clock.
func CheckFreshness(env map[string]any, profiles *compliance.Registry, now time.Time) *Error {
	skew := compliance.ClockSkew(env, profiles)
	refuse := func(code, field, format string, args ...any) *Error {
		e := newError(code, ErrNotFresh, format, args...)
		e.Details = map[string]any{
			"field":              field,
			"clock_skew_seconds": int64(skew / time.Second),
			"receiver_time":      FormatTimestamp(now),
		}
		return e
	}
	if raw, present := env["expires_at"]; present {
		exp, ok := timestampOf(raw)
		if !ok {
			return refuse(IssueInvalidExpiresAt, "/expires_at", "expires_at is not a timestamp of the form YYYY-MM-DDTHH:MM:SS.mmmZ.")
		}
		if now.After(exp.Add(skew)) {
			return refuse(IssueMessageExpired, "/expires_at",
				"The message has expired: expires_at is more than the allowed clock skew of %s s before the receiver's time %s.",
				seconds(skew), FormatTimestamp(now))
		}
	}
	raw, present := env["ts"]
	if !present {
		return refuse(IssueMissingTS, "/ts", "The message has no ts, so its freshness cannot be checked.")
	}
	ts, ok := timestampOf(raw)
	if !ok {
		return refuse(IssueInvalidTS, "/ts", "ts is not a timestamp of the form YYYY-MM-DDTHH:MM:SS.mmmZ.")
	}
	switch {
	case now.Sub(ts) > skew:
		return refuse(IssueClockSkewExceeded, "/ts",
			"The message is stale: ts is more than the allowed clock skew of %s s before the receiver's time %s.",
			seconds(skew), FormatTimestamp(now))
	case ts.Sub(now) > skew:
		return refuse(IssueClockSkewExceeded, "/ts",
			"The message is from the future: ts is more than the allowed clock skew of %s s after the receiver's time %s.",
			seconds(skew), FormatTimestamp(now))
	}
	return nil
}

// AcceptanceWindowEnd is the last instant at which CheckFreshness can
// accept env: ts + skew, or expires_at + skew when that is earlier (it is
// not, for a message that passed L2, whose expires_at is after ts). A
// receiver that remembers the message id of every accepted message until
// this instant can never accept the same signed bytes twice: after it,
// CheckFreshness refuses them on its own. The window never depends on the
// receiver's clock at the time of the call, nor on any idempotency expiry.
//
// ok is false when ts is missing or unreadable, or expires_at is present
// and unreadable: CheckFreshness never accepts such a message, so there is
// nothing to remember.
func AcceptanceWindowEnd(env map[string]any, profiles *compliance.Registry) (end time.Time, ok bool) {
	ts, ok := timestampOf(env["ts"])
	if !ok {
		return time.Time{}, false
	}
	skew := compliance.ClockSkew(env, profiles)
	end = ts.Add(skew)
	if raw, present := env["expires_at"]; present {
		exp, ok := timestampOf(raw)
		if !ok {
			return time.Time{}, false
		}
		if e := exp.Add(skew); e.Before(end) {
			end = e
		}
	}
	return end, true
}

// timestampOf reads a wire timestamp member.
func timestampOf(v any) (time.Time, bool) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := parseTimestamp(s)
	return t, err == nil
}

func seconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }
