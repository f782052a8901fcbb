package aais

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors. Every error this package returns wraps one of them, so
// callers branch with errors.Is. A *ValidationError wraps ErrInvalid and,
// depending on its issues, ErrMalformed, ErrSchema, ErrDigestMismatch and
// ErrSemantic; when strict decoding failed it also wraps the *jcs.Error.
var (
	// ErrInvalid: the document or value is not a valid AAIS 1.0 message.
	ErrInvalid = errors.New("aais: invalid message")
	// ErrMalformed: the bytes are not strict I-JSON (duplicate member,
	// invalid UTF-8, lone surrogate, non-interoperable number, too deep, too
	// large, syntax).
	ErrMalformed = errors.New("aais: malformed JSON")
	// ErrSchema: the document breaks the AAIS 1.0 JSON Schema.
	ErrSchema = errors.New("aais: schema violation")
	// ErrDigestMismatch: action_digest is not the digest of the action that
	// travels with it.
	ErrDigestMismatch = errors.New("aais: action digest mismatch")
	// ErrSemantic: the document breaks a rule the schema cannot express.
	ErrSemantic = errors.New("aais: semantic rule violated")
	// ErrNotOffered: a decision names a (decision, scope) pair the request
	// did not offer.
	ErrNotOffered = errors.New("aais: choice not offered")
	// ErrUnsupportedValue: an action was given as a Go value this package
	// refuses to hash (a struct, a pointer, a channel, ...). Structs are
	// refused on purpose: re-encoding one drops empty arrays and false
	// values under omitempty and changes the digest.
	ErrUnsupportedValue = errors.New("aais: unsupported action value")
	// ErrBuild: a builder was called without something it needs (a time, a
	// request, a payload) or its randomness source failed.
	ErrBuild = errors.New("aais: cannot build message")
)

// Rules name what an Issue is about. Issues found by the JSON Schema carry
// "schema." followed by the failing keyword ("schema.required",
// "schema.additionalProperties", "schema.format", ...).
const (
	// RuleJSON: strict decoding failed (see jcs).
	RuleJSON = "json"
	// RuleType: the document is not an object, or "type" names none of the
	// five message types.
	RuleType = "type"
	// RuleTimestamp: a timestamp is not RFC 3339 with an upper-case "T" and
	// an explicit "Z" or ±hh:mm offset, or names an instant Go cannot hold
	// (a leap second).
	RuleTimestamp = "timestamp"
	// RuleSequence: a sequence number is not an integer in 0..MaxSequence.
	RuleSequence = "sequence"
	// RuleExpiry: expires_at is not strictly after created_at.
	RuleExpiry = "expiry"
	// RuleActionDigest: action_digest differs from the digest recomputed
	// over the received action.
	RuleActionDigest = "action_digest"
	// RuleExitChoice: no choice lets the reviewer say no (deny or cancel).
	RuleExitChoice = "exit_choice"
	// RuleUniqueChoice: two choices share a (decision, scope) pair.
	RuleUniqueChoice = "unique_choice"
	// RuleOnceOnly: deny or cancel with a scope other than once.
	RuleOnceOnly = "once_only"
	// RuleScopeConstraints: a session or persistent choice without
	// scope_constraints (an unbounded approval).
	RuleScopeConstraints = "scope_constraints"
	// RuleBindingHint: presentation.redacted is true without binding_hint.
	RuleBindingHint = "binding_hint"
	// RuleEffectiveScope: a receipt's effective_scope contradicts its
	// outcome.
	RuleEffectiveScope = "effective_scope"
	// RuleUniquePending: a snapshot lists the same request id twice.
	RuleUniquePending = "unique_pending"
	// RuleValue: a value handed to a builder or to Marshal cannot be
	// encoded at all (an empty action, an unknown message type).
	RuleValue = "value"
)

// Issue is one reason a document was rejected.
type Issue struct {
	// Path is the RFC 6901 JSON Pointer of the offending value in the
	// document ("" is the document itself).
	Path string
	// Rule is one of the Rule constants, or "schema." + a JSON Schema
	// keyword.
	Rule string
	// Message says what is wrong, in English. It may quote the document.
	Message string
}

func (i Issue) String() string {
	var b strings.Builder
	if i.Path == "" {
		b.WriteString("(document)")
	} else {
		b.WriteString(i.Path)
	}
	b.WriteString(": ")
	b.WriteString(i.Rule)
	b.WriteString(": ")
	b.WriteString(i.Message)
	return b.String()
}

// ValidationError lists every issue found in one document. Issues are in
// document order for the semantic rules; schema issues come in the order the
// validator reports them.
type ValidationError struct {
	Issues []Issue

	// cause is the error strict decoding returned, if any (a *jcs.Error).
	cause error
}

func (e *ValidationError) Error() string {
	if len(e.Issues) == 0 {
		return ErrInvalid.Error()
	}
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	b.WriteString(": ")
	b.WriteString(e.Issues[0].String())
	if n := len(e.Issues) - 1; n > 0 {
		b.WriteString(" (and ")
		b.WriteString(strconv.Itoa(n))
		if n == 1 {
			b.WriteString(" more issue)")
		} else {
			b.WriteString(" more issues)")
		}
	}
	return b.String()
}

// Unwrap returns ErrInvalid, the class sentinel of every issue and the
// strict-decoding error, so errors.Is(err, ErrDigestMismatch) and
// errors.As(err, &jcsErr) both work.
func (e *ValidationError) Unwrap() []error {
	out := []error{ErrInvalid}
	seen := map[error]bool{}
	for _, is := range e.Issues {
		s := ruleClass(is.Rule)
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

// Has reports whether any issue carries rule.
func (e *ValidationError) Has(rule string) bool {
	for _, is := range e.Issues {
		if is.Rule == rule {
			return true
		}
	}
	return false
}

func ruleClass(rule string) error {
	switch {
	case rule == RuleJSON:
		return ErrMalformed
	case rule == RuleType || strings.HasPrefix(rule, schemaRulePrefix):
		return ErrSchema
	case rule == RuleActionDigest:
		return ErrDigestMismatch
	default:
		return ErrSemantic
	}
}

const schemaRulePrefix = "schema."

// issues accumulates Issues under a path prefix.
type issues struct {
	list []Issue
}

func (s *issues) add(path, rule, msg string) {
	s.list = append(s.list, Issue{Path: path, Rule: rule, Message: msg})
}

func (s *issues) err() error {
	if len(s.list) == 0 {
		return nil
	}
	return &ValidationError{Issues: s.list}
}

// pointer appends reference tokens to a JSON Pointer, escaping them.
func pointer(base string, tokens ...string) string {
	var b strings.Builder
	b.WriteString(base)
	for _, t := range tokens {
		b.WriteByte('/')
		if strings.ContainsAny(t, "~/") {
			t = strings.NewReplacer("~", "~0", "/", "~1").Replace(t)
		}
		b.WriteString(t)
	}
	return b.String()
}

func index(base string, i int) string {
	return base + "/" + strconv.Itoa(i)
}
