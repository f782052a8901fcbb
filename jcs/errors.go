package jcs

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors; every error returned by this package wraps one of them in
// an *Error.
var (
	ErrSyntax          = errors.New("jcs: invalid JSON")
	ErrDuplicateKey    = errors.New("jcs: duplicate member name")
	ErrInvalidUTF8     = errors.New("jcs: invalid UTF-8")
	ErrLoneSurrogate   = errors.New("jcs: lone surrogate in string escape")
	ErrNumber          = errors.New("jcs: number not interoperable")
	ErrDepth           = errors.New("jcs: nesting too deep")
	ErrSize            = errors.New("jcs: document too large")
	ErrUnsupportedType = errors.New("jcs: unsupported Go type")
)

// Error describes why a document was rejected and where.
type Error struct {
	// Err is one of the package's sentinel errors.
	Err error
	// Path is the RFC 6901 JSON Pointer of the offending value ("" is the
	// document itself).
	Path string
	// Offset is the byte offset in the input, or -1 for decoded values.
	Offset int
	// Detail says what exactly was wrong.
	Detail string

	// segments collects the path innermost first while the error unwinds
	// through the parser; Path is built from it once, at the top.
	segments []string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	b.WriteString(" at ")
	if e.Path == "" {
		b.WriteString("document root")
	} else {
		b.WriteString(strconv.Quote(e.Path))
	}
	if e.Offset >= 0 {
		b.WriteString(" (byte ")
		b.WriteString(strconv.Itoa(e.Offset))
		b.WriteString(")")
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// within records that the error happened inside the member or element seg.
func (e *Error) within(seg string) *Error {
	e.segments = append(e.segments, seg)
	return e
}

func (e *Error) finish() *Error {
	if len(e.segments) == 0 {
		return e
	}
	var b strings.Builder
	for i := len(e.segments) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(escapePointer(e.segments[i]))
	}
	// An error finished inside an embedded fragment (json.RawMessage)
	// already has the fragment-relative path; the segments go in front.
	e.Path = b.String() + e.Path
	e.segments = nil
	return e
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
