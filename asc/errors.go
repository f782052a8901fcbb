package asc

import "errors"

// Sentinel errors. Errors returned by this package wrap one of them, so
// callers test with errors.Is.
var (
	// ErrMalformed: the document is not strict JSON (duplicate member,
	// invalid UTF-8, too deep, too large) or a known member has the wrong
	// JSON type.
	ErrMalformed = errors.New("asc: malformed document")
	// ErrInvalid: the envelope breaks at least one rule at error level.
	ErrInvalid = errors.New("asc: invalid envelope")
	// ErrNameMismatch: a registered code travels with another name. ASC
	// requires consumers to treat this as an implementation or integrity
	// error.
	ErrNameMismatch = errors.New("asc: code and name disagree")
	// ErrEventOnly: an 8xxx code was used other than as an event.
	ErrEventOnly = errors.New("asc: event-only code used as a status")
	// ErrReservedCode: a 9900-9999 code was emitted.
	ErrReservedCode = errors.New("asc: reserved code")
	// ErrCauseTree: the cause tree is too deep, too large or cyclic.
	ErrCauseTree = errors.New("asc: cause tree exceeds limits")
	// ErrUnknownCode: a string names no code.
	ErrUnknownCode = errors.New("asc: unknown code")
	// ErrBinding: a protocol binding (Problem Details, MCP, A2A) does not
	// carry a consistent ASC status.
	ErrBinding = errors.New("asc: binding mismatch")
)
