package handler

import (
	"context"
	"errors"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/custos-runtime/custos/asc"
)

// outcome is what a failed execution tells the caller about retrying: the
// retry contract of the ASC envelope. The built-ins always say what is known
// about side effects, because that decides whether a retry is safe.
type outcome struct {
	retryable bool
	safe      bool
	after     time.Duration
	effects   asc.SideEffectState
}

var (
	// nothingHappened: the upstream refused or was never reached; the same
	// call may be sent again (after a delay, if one is set).
	nothingHappened = outcome{retryable: true, safe: true, effects: asc.SideEffectNone}
	// refused: the upstream refused the call as it is; sending it again
	// unchanged will not help.
	refused = outcome{effects: asc.SideEffectNone}
	// mayHaveRun: the call reached the upstream and may have acted; the
	// caller must reconcile before repeating it.
	mayHaveRun = outcome{effects: asc.SideEffectPossible}
	// unknown: the call may or may not have reached the upstream; the
	// failure is transient, but only reconciliation makes a retry safe.
	unknown = outcome{retryable: true, effects: asc.SideEffectUnknown}
	// resultUnknown: the call may have reached the upstream and no final
	// answer came (a timeout or cancellation after sending, a task still
	// working). It goes with 6005 RESULT_STATE_UNKNOWN (ASC §5): not
	// retryable, not safe; the caller must reconcile first.
	resultUnknown = outcome{effects: asc.SideEffectUnknown}
)

// unanswered is the status of a call whose context ended (its timeout, or
// the caller's context) after the request may have reached the upstream:
// 6005 RESULT_STATE_UNKNOWN, never 5004 TIMEOUT, because nobody can tell
// whether it committed. why is a developer diagnostic.
func unanswered(ctx context.Context, format string, args ...any) *asc.Error {
	e := fail(asc.ResultStateUnknown, resultUnknown, format, args...)
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.Envelope.Message.Developer += " (the caller cancelled)"
	}
	return e
}

// notSent is the status of a call whose context ended before its request
// could have left: 5004 TIMEOUT (retryable and safe: nothing reached the
// upstream) for a deadline, 3004 CANCELLED otherwise.
func notSent(ctx context.Context, format string, args ...any) *asc.Error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fail(asc.Cancelled, refused, format, args...)
	}
	return fail(asc.Timeout, nothingHappened, format, args...)
}

// sendTrace records, through net/http's client trace, whether an HTTP
// request may have reached the server: once a connection was obtained for
// it, bytes may have left. A request for which no connection attempt was
// seen at all (a client library that does not pass the context on, say)
// counts as possibly sent: the unsafe answer is the conservative one.
type sendTrace struct {
	attempted atomic.Bool
	connected atomic.Bool
}

// withSendTrace returns ctx with a client trace feeding a new sendTrace.
// Traces already in ctx keep working (httptrace composes them).
func withSendTrace(ctx context.Context) (context.Context, *sendTrace) {
	st := &sendTrace{}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) { st.attempted.Store(true) },
		GotConn: func(httptrace.GotConnInfo) { st.connected.Store(true) },
	}), st
}

// mayHaveSent reports whether the traced request may have reached the
// server.
func (st *sendTrace) mayHaveSent() bool {
	return st.connected.Load() || !st.attempted.Load()
}

// fail returns an *asc.Error for code in the tool_call scope carrying o as
// its retry contract. The formatted text is a developer diagnostic.
func fail(code asc.Code, o outcome, format string, args ...any) *asc.Error {
	e := asc.Errorf(code, asc.ScopeToolCall, format, args...)
	r := &asc.Retry{Retryable: o.retryable, Safe: o.safe, SideEffectState: o.effects}
	if o.after > 0 {
		r.AfterMS = o.after.Milliseconds()
		if o.after%time.Millisecond != 0 {
			r.AfterMS++
		}
	}
	e.Envelope.Retry = r
	return e
}

// maxDiagnostic caps the text of a program's stderr quoted in an error.
const maxDiagnostic = 512

// sanitize turns untrusted bytes (a program's stderr) into a short one-line
// diagnostic: invalid UTF-8 and control characters become spaces or U+FFFD,
// runs of white space collapse, and the text is cut to maxDiagnostic
// characters.
func sanitize(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	var sb strings.Builder
	space := false
	n := 0
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' ||
			unicode.Is(unicode.Cf, r) { // format characters can reorder text (bidi overrides)
			space = true
			continue
		}
		if space && sb.Len() > 0 {
			sb.WriteByte(' ')
			n++
		}
		space = false
		if n >= maxDiagnostic {
			sb.WriteString("…")
			return sb.String()
		}
		sb.WriteRune(r)
		n++
	}
	return sb.String()
}

// capBuffer keeps the first max bytes written to it and counts the rest.
// It never fails a write, so a program writing too much is not disturbed by
// a broken pipe; onOverflow, when set, is called once when max is exceeded.
type capBuffer struct {
	max        int
	buf        []byte
	overflow   bool
	onOverflow func()
}

func (c *capBuffer) Write(p []byte) (int, error) {
	room := c.max - len(c.buf)
	if room >= len(p) {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if room > 0 {
		c.buf = append(c.buf, p[:room]...)
	}
	if !c.overflow {
		c.overflow = true
		if c.onOverflow != nil {
			c.onOverflow()
		}
	}
	return len(p), nil
}

// validHeaderValue reports whether s can be sent as an HTTP header value
// without being refused or reinterpreted: printable, no CR, LF or NUL.
func validHeaderValue(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}
