package arsia

import (
	"strings"
)

// Severity says whether an Issue rejects the document.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Issue is one finding of a validator.
type Issue struct {
	// Code is a stable machine-readable code (invalid_from_agent_id,
	// schema_violation, ...); WireCode and ToASC map it.
	Code string
	// Pointer is the RFC 6901 JSON Pointer of the offending member ("" for
	// the document).
	Pointer string
	// Message is English text in the reference SDK's wording.
	Message string
	// Severity is SeverityError or SeverityWarning.
	Severity Severity
	// Keyword and Params are set for structural (L1) issues: the JSON
	// Schema keyword that failed (required, pattern, enum, ...) and its
	// parameters (the missing property, the pattern, the allowed values).
	Keyword string
	Params  map[string]any
}

// String returns "code: message".
func (i Issue) String() string { return i.Code + ": " + i.Message }

// ErrorIssues returns the issues of error severity.
func ErrorIssues(issues []Issue) []Issue {
	var out []Issue
	for _, i := range issues {
		if i.Severity != SeverityWarning {
			out = append(out, i)
		}
	}
	return out
}

// IssuesError turns the error-severity issues into an *Error whose code is
// the first issue's code and whose description lists every message. It
// returns nil when there is no error-severity issue.
func IssuesError(issues []Issue) error {
	errs := ErrorIssues(issues)
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Message
	}
	return &Error{Code: errs[0].Code, Description: strings.Join(msgs, "; "), Err: ErrInvalidEnvelope}
}

// issueList accumulates issues.
type issueList []Issue

func (l *issueList) add(code, pointer string, sev Severity, msg string) {
	*l = append(*l, Issue{Code: code, Pointer: pointer, Message: msg, Severity: sev})
}

func (l *issueList) err(code, pointer, msg string) { l.add(code, pointer, SeverityError, msg) }

// schemaErr adds a structural finding in the reference validator's format,
// "<pointer>: <message>" with "<root>" for the document itself.
func (l *issueList) schemaErr(pointer, msg string) {
	at := pointer
	if at == "" {
		at = "<root>"
	}
	l.err("schema_violation", pointer, at+": "+msg)
}
