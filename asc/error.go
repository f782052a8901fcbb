package asc

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Error is a Go error that carries an ASC status, so that any package can
// return one and every transport can render it (Problem Details, MCP, A2A).
// Find it in a chain with errors.As, or use FromError.
type Error struct {
	Envelope Envelope
	// Err is the underlying cause, for logs and errors.Is; it is never
	// rendered to users.
	Err error
}

// Error returns a diagnostic for logs: code, name, scope and the developer
// message or underlying error. It is not user-safe text; use
// Envelope.UserMessage for that.
func (e *Error) Error() string {
	s := e.Envelope.Status
	msg := "asc: " + s.Name + " (" + strconv.Itoa(int(s.Code)) + ", " + string(s.Scope) + ")"
	switch {
	case e.Envelope.Message != nil && e.Envelope.Message.Developer != "":
		msg += ": " + e.Envelope.Message.Developer
	case e.Err != nil:
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Code returns the status code.
func (e *Error) Code() Code { return e.Envelope.Status.Code }

// Errorf returns an *Error for code in scope. The formatted text becomes
// message.developer (a diagnostic for developers; keep secrets out of it) and,
// when the format wraps an error with %w, Unwrap reaches it. message.user is
// the registry's generic meaning, which is safe to show. occurred_at is the
// time of the call; terminal is the registry default, with contextual and
// unregistered codes read as terminal (an error returned means the scope
// ended), and severity is the registry's first advisory severity.
func Errorf(code Code, scope Scope, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	e := newError(code, scope, time.Now())
	e.Envelope.Message.Developer = err.Error()
	e.Err = err
	return e
}

// Wrap returns an *Error for code in scope whose cause is err. err's text is
// kept out of the envelope entirely (it may hold internal detail); it is
// reachable only through Unwrap and Error, for logs.
func Wrap(err error, code Code, scope Scope) *Error {
	e := newError(code, scope, time.Now())
	e.Err = err
	return e
}

func newError(code Code, scope Scope, at time.Time) *Error {
	entry, registered := lookupCode(code)
	env := New(code, scope, !registered || entry.DefaultTerminal != TerminalNo, at)
	if registered && len(entry.Severities) > 0 {
		env.Status.Severity = entry.Severities[0]
	}
	env.Message = &Message{User: genericMessage(code)}
	return &Error{Envelope: *env}
}

// FromError returns the ASC envelope for err: the envelope of the first
// *Error in its chain, or else 6001 INTERNAL_ERROR for the task scope with
// a generic user message; the internal error text is never copied into the
// envelope. A nil error yields 2000 SUCCESS.
//
// The returned envelope is a copy whose Message is not shared with err, so
// a transport may redact it freely.
func FromError(err error) Envelope {
	if err == nil {
		return *New(Success, ScopeTask, true, time.Now())
	}
	var ae *Error
	if errors.As(err, &ae) {
		env := ae.Envelope
		if env.Message != nil {
			m := *env.Message
			env.Message = &m
		}
		return env
	}
	return newError(InternalError, ScopeTask, time.Now()).Envelope
}

// CodeOf returns FromError(err).Status.Code.
func CodeOf(err error) Code { return FromError(err).Status.Code }
