package asc

//go:generate go run ./internal/gen -in registry.json -out registry_gen.go

import (
	"fmt"
	"strconv"
	"strings"
)

// Code is an ASC status code: an unsigned four-digit decimal integer whose
// first digit is its class. The registered codes are constants such as
// RateLimited (5001).
type Code int

// String renders the code as ASC-5001, the notation the specification uses.
func (c Code) String() string { return "ASC-" + strconv.Itoa(int(c)) }

// Name returns the registered name of c, or "" when c is not registered.
func (c Code) Name() string {
	e, _ := lookupCode(c)
	return e.Name
}

// Registered reports whether c is one of the registered codes.
func (c Code) Registered() bool {
	_, ok := lookupCode(c)
	return ok
}

// Class is the informative first-digit class slug of a code.
type Class string

// The class slugs of ASC 0.1. ClassUnknown is the fallback for numbers outside
// 1000-9999.
const (
	ClassLifecycle             Class = "lifecycle"
	ClassSuccess               Class = "success"
	ClassInterrupted           Class = "interrupted"
	ClassRequestOrPolicy       Class = "request_or_policy"
	ClassTransientFailure      Class = "transient_failure"
	ClassFatalOrIndeterminate  Class = "fatal_or_indeterminate"
	ClassQualityOrVerification Class = "quality_or_verification"
	ClassEvent                 Class = "event"
	ClassExtension             Class = "extension"
	ClassUnknown               Class = "unknown"
)

// ClassOf returns the class of any code, registered or not. This is how an
// unknown code degrades safely: by its first digit.
func ClassOf(c Code) Class {
	if c < 1000 || c > 9999 {
		return ClassUnknown
	}
	switch c / 1000 {
	case 1:
		return ClassLifecycle
	case 2:
		return ClassSuccess
	case 3:
		return ClassInterrupted
	case 4:
		return ClassRequestOrPolicy
	case 5:
		return ClassTransientFailure
	case 6:
		return ClassFatalOrIndeterminate
	case 7:
		return ClassQualityOrVerification
	case 8:
		return ClassEvent
	default:
		return ClassExtension
	}
}

// Title is the normative heading of the class.
func (c Class) Title() string {
	switch c {
	case ClassLifecycle:
		return "Lifecycle and progress"
	case ClassSuccess:
		return "Successful outcomes"
	case ClassInterrupted:
		return "Interrupted, deferred, or human-dependent"
	case ClassRequestOrPolicy:
		return "Request, authorisation, capability, and policy"
	case ClassTransientFailure:
		return "Transient operational failures"
	case ClassFatalOrIndeterminate:
		return "Fatal, indeterminate, or integrity-threatening failures"
	case ClassQualityOrVerification:
		return "Trust, quality, grounding, and verification"
	case ClassEvent:
		return "Operational and efficiency events (event-only)"
	case ClassExtension:
		return "Extension space"
	}
	return "Unknown (not a four-digit ASC code)"
}

// Terminality is a registered code's default terminal flag. It is only a
// default: consumers must use the terminal flag the envelope carries.
type Terminality string

// Default terminal values of the registry.
const (
	TerminalYes           Terminality = "yes"
	TerminalNo            Terminality = "no"
	TerminalContextual    Terminality = "contextual"
	TerminalNotApplicable Terminality = "not_applicable" // 8xxx events
)

// Entry is one registered code. Severities and HTTP are advisory (taken from
// the non-normative research source); the first element of each is the
// default.
type Entry struct {
	Code            Code
	Name            string
	Class           Class
	Meaning         string
	DefaultTerminal Terminality
	// RetryHint is the registry's default retry indication. It is a hint and
	// never overrides an explicit retry contract.
	RetryHint string
	// EventOnly is true for 8xxx codes, which may only appear as events.
	EventOnly bool
	// GRPC is the canonical gRPC status the bindings project the code to, or
	// "" when ASC defines none.
	GRPC       string
	Severities []Severity
	HTTP       []int
	// HTTPNote is the advisory HTTP suggestion as worded upstream.
	HTTPNote string
}

// Lookup returns the registry entry of a registered code.
func Lookup(c Code) (Entry, bool) { return lookupCode(c) }

// LookupName returns the registry entry of a registered name.
func LookupName(name string) (Entry, bool) {
	c, ok := lookupName(name)
	if !ok {
		return Entry{}, false
	}
	return lookupCode(c)
}

// Registry returns every registered entry in ascending code order. The slice
// is freshly allocated on each call.
func Registry() []Entry {
	codes := registeredCodes()
	out := make([]Entry, 0, len(codes))
	for _, c := range codes {
		e, _ := lookupCode(c)
		out = append(out, e)
	}
	return out
}

// ExtensionRange names the allocation policy of a 9xxx code.
type ExtensionRange string

// The 9xxx sub-ranges. RangeCore is every code outside 9000-9999.
const (
	RangeCore                ExtensionRange = ""
	RangeRegisteredExtension ExtensionRange = "registered_extension" // 9000-9499
	RangePrivate             ExtensionRange = "private"              // 9500-9799, not portable
	RangeExperimental        ExtensionRange = "experimental"         // 9800-9899, time-limited
	RangeReserved            ExtensionRange = "reserved"             // 9900-9999, never emitted
)

// ExtensionRangeOf returns the 9xxx sub-range of c.
func ExtensionRangeOf(c Code) ExtensionRange {
	switch {
	case c >= 9000 && c <= 9499:
		return RangeRegisteredExtension
	case c >= 9500 && c <= 9799:
		return RangePrivate
	case c >= 9800 && c <= 9899:
		return RangeExperimental
	case c >= 9900 && c <= 9999:
		return RangeReserved
	}
	return RangeCore
}

// ParseCode reads a code as a CLI user types it: "5001", "ASC-5001" or a
// registered name such as "RATE_LIMITED" (case-insensitive).
func ParseCode(s string) (Code, error) {
	t := strings.TrimSpace(s)
	digits := strings.TrimPrefix(strings.ToUpper(t), "ASC-")
	if n, err := strconv.Atoi(digits); err == nil {
		if n < 1000 || n > 9999 {
			return 0, fmt.Errorf("%w: %d is not a four-digit code", ErrUnknownCode, n)
		}
		return Code(n), nil
	}
	if c, ok := lookupName(strings.ToUpper(t)); ok {
		return c, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownCode, s)
}

// Explain returns a multi-line, human-readable description of c for
// "custos status explain". Unregistered codes are described by their class,
// with the generic guidance the specification requires.
func Explain(c Code) string {
	var b strings.Builder
	line := func(k, v string) {
		if k != "" {
			k += ":"
		}
		fmt.Fprintf(&b, "%-16s %s\n", k, v)
	}
	e, ok := lookupCode(c)
	if !ok {
		class := ClassOf(c)
		line("Code", c.String()+" (not registered in ASC "+RegistryVersion+")")
		line("Class", string(class)+" - "+class.Title())
		if r := ExtensionRangeOf(c); r != RangeCore {
			line("Range", extensionRangeText(r))
		}
		line("HTTP", strconv.Itoa(HTTPStatus(c))+" (by class)")
		line("Guidance", "handle by class; assume neither retry safety nor terminality;")
		line("", "use the envelope's own terminal flag and retry contract; show a generic message")
		return b.String()
	}
	line("Code", c.String())
	line("Name", e.Name)
	line("Class", string(e.Class)+" - "+e.Class.Title())
	line("Meaning", e.Meaning)
	line("Terminal", string(e.DefaultTerminal)+" (default; the envelope's flag wins)")
	line("Retry hint", e.RetryHint+" (hint only; the retry contract decides)")
	if e.EventOnly {
		line("Kind", "event only (never a primary status or condition)")
	} else {
		line("Kind", "status, condition or event")
	}
	http := "same as the enclosing report"
	if len(e.HTTP) > 0 {
		http = strconv.Itoa(e.HTTP[0]) + " (advisory: " + e.HTTPNote + ")"
	}
	line("HTTP", http)
	grpc := "none defined"
	if e.GRPC != "" {
		grpc = e.GRPC
	}
	line("gRPC", grpc)
	sev := make([]string, len(e.Severities))
	for i, s := range e.Severities {
		sev[i] = string(s)
	}
	line("Severity", strings.Join(sev, " or ")+" (advisory)")
	return b.String()
}

func extensionRangeText(r ExtensionRange) string {
	switch r {
	case RangeRegisteredExtension:
		return "9000-9499 registered extension (allocation policy TBD)"
	case RangePrivate:
		return "9500-9799 private use; not portable between organisations"
	case RangeExperimental:
		return "9800-9899 time-limited experiment; not a permanent contract"
	case RangeReserved:
		return "9900-9999 reserved for future specification work; must not be emitted"
	}
	return ""
}
