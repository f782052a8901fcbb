package asc

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Level says whether an Issue breaks the specification (LevelError: a MUST)
// or only a recommendation (LevelWarning: a SHOULD, or a consistency check
// the specification does not mandate).
type Level string

// Issue levels.
const (
	LevelError   Level = "error"
	LevelWarning Level = "warning"
)

// Rule identifiers of Issue.Rule. They are stable and safe to match on.
const (
	RuleJSON               = "json"                 // not strict I-JSON, too large or too deep
	RuleType               = "type"                 // a known member has the wrong JSON type
	RuleRequired           = "required"             // a required member is missing or empty
	RuleSpecVersion        = "spec_version"         // not a SemVer string
	RuleSpecVersionUnknown = "spec_version.unknown" // SemVer, but not 0.1.x (warning)
	RuleCodeRange          = "code.range"           // outside 1000-9999
	RuleCodeReserved       = "code.reserved"        // 9900-9999 must not be emitted
	RuleNameFormat         = "name.format"          // not upper-case SNAKE_CASE
	RuleNameMismatch       = "name.mismatch"        // registered code/name pair broken
	RuleKind               = "kind"                 // not status, condition or event
	RuleEventOnly          = "kind.event_only"      // 8xxx used other than as an event
	RuleConditionKind      = "kind.condition"       // conditions[] entry whose kind is not condition
	RuleEventKind          = "kind.event"           // events[] entry whose kind is not event
	RuleScope              = "scope"                // neither registered nor namespaced
	RulePhase              = "phase"                // not in the phase enumeration
	RuleSeverity           = "severity"             // not in the severity enumeration
	RuleClassMismatch      = "class.mismatch"       // sent class disagrees with the first digit (warning)
	RulePhaseTerminal      = "phase.terminal"       // FINISHED without terminal or vice versa (warning)
	RuleTimestamp          = "timestamp"            // not RFC 3339 with an explicit offset
	RuleTraceID            = "provenance.trace_id"  // not 32 lower-case hex digits, or all zero
	RuleSpanID             = "provenance.span_id"   // not 16 lower-case hex digits, or all zero
	RuleDetailsNamespace   = "details.namespace"    // public details key not reverse-domain (warning)
	RuleConfidenceObject   = "confidence.object"    // confidence sent as a bare number
	RuleConfidence         = "confidence"           // metric, value or method missing or not finite
	RuleConfidenceRange    = "confidence.range"     // inconsistent range or value outside it
	RuleSideEffectState    = "retry.side_effect_state"
	RuleRetryNumbers       = "retry.numbers"        // negative delay or attempt counts
	RuleRetryAttempts      = "retry.attempts"       // attempt beyond max_attempts (warning)
	RuleRetryUnknownResult = "retry.unknown_result" // RESULT_STATE_UNKNOWN declared safe (warning)
	RuleRemediationAction  = "remediation.action"   // remediation entry without an action
	RuleCauseShape         = "causes.shape"         // neither nested envelope nor compact reference
	RuleCauseDepth         = "causes.depth"         // deeper than MaxCauseDepth
	RuleCauseNodes         = "causes.nodes"         // more than MaxCauseNodes
	RuleCauseCycle         = "causes.cycle"         // an envelope is its own ancestor
	RuleCauseRepeated      = "causes.repeated"      // an envelope appears twice
	RuleConditionShape     = "conditions.shape"     // neither status object nor envelope
	RuleIntegrity          = "integrity.method"     // integrity block without a method
	RuleBinding            = "binding"              // a protocol binding disagrees with itself
)

// Issue is one problem found in a document or value.
type Issue struct {
	// Path is the JSON Pointer (RFC 6901) of the offending member; "" is
	// the whole document.
	Path  string
	Rule  string
	Level Level
	// Message explains the problem in English.
	Message string
	// Err is the sentinel the issue counts as (ErrMalformed, ErrInvalid,
	// ErrNameMismatch, ...).
	Err error
}

func (i Issue) String() string {
	path := i.Path
	if path == "" {
		path = "/"
	}
	return fmt.Sprintf("%s %s [%s]: %s", i.Level, path, i.Rule, i.Message)
}

// ValidationError carries every issue found, warnings included. errors.Is
// reports true for ErrInvalid, and for the sentinel of any error-level issue.
type ValidationError struct {
	Issues []Issue
}

func (e *ValidationError) Error() string {
	errs := e.Errors()
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	fmt.Fprintf(&b, ": %d error(s), %d warning(s)", len(errs), len(e.Issues)-len(errs))
	for i, is := range errs {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(errs)-3)
			break
		}
		b.WriteString("; ")
		b.WriteString(is.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrMalformed) and friends work.
func (e *ValidationError) Is(target error) bool {
	for _, is := range e.Issues {
		if is.Level == LevelError && (target == ErrInvalid || errors.Is(is.Err, target)) {
			return true
		}
	}
	return false
}

// Errors returns the error-level issues.
func (e *ValidationError) Errors() []Issue { return filterLevel(e.Issues, LevelError) }

// Warnings returns the warning-level issues.
func (e *ValidationError) Warnings() []Issue { return filterLevel(e.Issues, LevelWarning) }

func filterLevel(in []Issue, l Level) []Issue {
	var out []Issue
	for _, is := range in {
		if is.Level == l {
			out = append(out, is)
		}
	}
	return out
}

// issues collects Issues.
type issues struct{ list []Issue }

func (s *issues) add(l Level, path, rule string, err error, format string, args ...any) {
	if err == nil {
		err = ErrInvalid
	}
	s.list = append(s.list, Issue{Path: path, Rule: rule, Level: l, Message: fmt.Sprintf(format, args...), Err: err})
}

func (s *issues) hasErrors() bool {
	return slices.ContainsFunc(s.list, func(i Issue) bool { return i.Level == LevelError })
}

// err returns a *ValidationError with every issue when any is an error.
func (s *issues) err() error {
	if !s.hasErrors() {
		return nil
	}
	return &ValidationError{Issues: slices.Clone(s.list)}
}

// Check returns every issue of e, warnings included, in document order. It
// applies the producer rules: the strict counterpart of Parse.
func Check(e *Envelope) []Issue {
	var c checker
	if e == nil {
		c.iss.add(LevelError, "", RuleRequired, nil, "no envelope")
		return c.iss.list
	}
	c.walk.root(e)
	c.envelope(e, "", posRoot)
	return c.iss.list
}

// Validate applies the producer rules to e. It returns nil when no issue is
// an error; otherwise a *ValidationError listing every issue, warnings
// included.
func Validate(e *Envelope) error {
	iss := issues{list: Check(e)}
	return iss.err()
}

// CheckJSON decodes data strictly and returns every issue: decoding issues
// (ErrMalformed) and rule issues. A rule issue at or below the path of a
// decoding issue is dropped, so one mistake is reported once.
func CheckJSON(data []byte) []Issue {
	env, iss := decodeEnvelope(data)
	if env == nil {
		return iss.list
	}
	decoded := slices.Clone(iss.list)
	for _, is := range Check(env) {
		if !slices.ContainsFunc(decoded, func(d Issue) bool { return under(is.Path, d.Path) }) {
			iss.list = append(iss.list, is)
		}
	}
	return iss.list
}

// ValidateJSON is CheckJSON as an error: nil when no issue is an error.
func ValidateJSON(data []byte) error {
	iss := issues{list: CheckJSON(data)}
	return iss.err()
}

// under reports whether path equals base or lies below it.
func under(path, base string) bool {
	return path == base || strings.HasPrefix(path, base+"/")
}

type position int

const (
	posRoot      position = iota // the document's envelope
	posCause                     // a nested envelope in causes[]
	posCondition                 // an entry of conditions[]
)

type checker struct {
	iss  issues
	walk treeWalk
}

var (
	semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
		`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
		`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)
	nameRE      = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	extScopeRE  = regexp.MustCompile(`^[A-Za-z0-9_-]+([.:][A-Za-z0-9_-]+)+$`)
	reverseDNRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$`)
	timeRE      = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`)
	traceIDRE   = regexp.MustCompile(`^[0-9a-f]{32}$`)
	spanIDRE    = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// ValidScope reports whether s is a registered scope or a namespaced
// extension scope. Custos' rule for the latter: segments of letters, digits,
// "_" and "-" joined by at least one "." or ":", such as org.example.batch or
// urn:example:batch. An unnamespaced unknown word (for example
// "conversation") is refused, because two extensions could give it different
// meanings.
func ValidScope(s Scope) bool {
	switch s {
	case ScopeTask, ScopeStep, ScopeToolCall, ScopeModelCall, ScopeHandoff,
		ScopePolicyDecision, ScopeEvaluation, ScopeArtefact:
		return true
	}
	return extScopeRE.MatchString(string(s))
}

// parseTime parses an RFC 3339 timestamp that has an explicit offset ("Z"
// or ±hh:mm) and an upper-case "T"; fractional seconds are allowed.
func parseTime(s string) (time.Time, error) {
	if !timeRE.MatchString(s) {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 timestamp with an offset", s)
	}
	return time.Parse(time.RFC3339Nano, s)
}

func (c *checker) timestamp(path, value string, required bool) {
	if value == "" {
		if required {
			c.iss.add(LevelError, path, RuleRequired, nil, "timestamp is required")
		}
		return
	}
	if _, err := parseTime(value); err != nil {
		c.iss.add(LevelError, path, RuleTimestamp, nil, "%v", err)
	}
}

func (c *checker) envelope(e *Envelope, path string, pos position) {
	if e.SpecVersion == "" {
		if pos == posRoot {
			c.iss.add(LevelError, path+"/spec_version", RuleRequired, nil, "spec_version is required")
		}
	} else if m := semverRE.FindStringSubmatch(e.SpecVersion); m == nil {
		c.iss.add(LevelError, path+"/spec_version", RuleSpecVersion, nil, "%q is not a semantic version", e.SpecVersion)
	} else if m[1] != "0" || m[2] != "1" {
		c.iss.add(LevelWarning, path+"/spec_version", RuleSpecVersionUnknown, nil,
			"%s is not the 0.1 series this implementation knows; read as 0.1", e.SpecVersion)
	}
	c.status(&e.Status, path+"/status", pos)
	c.timestamp(path+"/occurred_at", e.OccurredAt, pos == posRoot)
	if e.Retry != nil {
		c.retry(e.Retry, path+"/retry")
		if e.Status.Code == ResultStateUnknown && e.Retry.Safe {
			c.iss.add(LevelWarning, path+"/retry/safe", RuleRetryUnknownResult, nil,
				"RESULT_STATE_UNKNOWN cannot be safe to replay before reconciliation")
		}
	}
	for i, r := range e.Remediation {
		if r.Action == "" {
			c.iss.add(LevelError, path+"/remediation/"+strconv.Itoa(i)+"/action", RuleRemediationAction, nil,
				"every remediation needs a string action")
		}
	}
	if p := e.Provenance; p != nil {
		checkID(&c.iss, path+"/provenance/trace_id", p.TraceID, traceIDRE, RuleTraceID, "32")
		checkID(&c.iss, path+"/provenance/span_id", p.SpanID, spanIDRE, RuleSpanID, "16")
	}
	if e.Confidence != nil {
		c.confidence(e.Confidence, path+"/confidence")
	}
	c.details(e.Details, path+"/details")
	if e.Integrity != nil && e.Integrity.Method == "" {
		c.iss.add(LevelError, path+"/integrity/method", RuleIntegrity, nil, "integrity needs a method")
	}
	for i := range e.Causes {
		c.cause(&e.Causes[i], path+"/causes/"+strconv.Itoa(i))
	}
	for i := range e.Conditions {
		c.condition(&e.Conditions[i], path+"/conditions/"+strconv.Itoa(i))
	}
	for i := range e.Events {
		c.event(&e.Events[i], path+"/events/"+strconv.Itoa(i))
	}
}

// codeName checks a code/name pair wherever one travels: statuses,
// conditions, events, compact references and bindings.
func (c *checker) codeName(path string, code Code, name string) {
	checkCodeName(&c.iss, path, code, name)
}

func checkCodeName(iss *issues, path string, code Code, name string) {
	switch {
	case code == 0:
		iss.add(LevelError, path+"/code", RuleRequired, nil, "code is required")
	case code < 1000 || code > 9999:
		iss.add(LevelError, path+"/code", RuleCodeRange, nil, "code %d is not in 1000-9999", code)
	case ExtensionRangeOf(code) == RangeReserved:
		iss.add(LevelError, path+"/code", RuleCodeReserved, ErrReservedCode,
			"code %d is reserved for future specification work and must not be emitted", code)
	}
	if name == "" {
		iss.add(LevelError, path+"/name", RuleRequired, nil, "name is required")
		return
	}
	if !nameRE.MatchString(name) {
		iss.add(LevelError, path+"/name", RuleNameFormat, nil, "name %q is not upper-case SNAKE_CASE", name)
		return
	}
	if e, ok := lookupCode(code); ok && e.Name != name {
		iss.add(LevelError, path+"/name", RuleNameMismatch, ErrNameMismatch,
			"code %d is registered as %s, not %s", code, e.Name, name)
	} else if other, ok := lookupName(name); ok && other != code {
		iss.add(LevelError, path+"/name", RuleNameMismatch, ErrNameMismatch,
			"%s is registered as code %d, not %d", name, other, code)
	}
}

func checkID(iss *issues, path, v string, re *regexp.Regexp, rule, digits string) {
	if v == "" {
		return
	}
	if !re.MatchString(v) || strings.Trim(v, "0") == "" {
		iss.add(LevelError, path, rule, nil, "must be %s lower-case hex digits, not all zero", digits)
	}
}

func (c *checker) status(s *Status, path string, pos position) {
	c.codeName(path, s.Code, s.Name)
	switch s.Kind {
	case "":
		c.iss.add(LevelError, path+"/kind", RuleRequired, nil, "kind is required")
	case KindStatus, KindCondition, KindEvent:
	default:
		c.iss.add(LevelError, path+"/kind", RuleKind, nil, "kind %q is not status, condition or event", s.Kind)
	}
	if pos == posCondition && s.Kind != "" && s.Kind != KindCondition {
		c.iss.add(LevelError, path+"/kind", RuleConditionKind, nil, "a condition must have kind condition, not %q", s.Kind)
	}
	if ClassOf(s.Code) == ClassEvent && s.Kind != KindEvent {
		c.iss.add(LevelError, path+"/kind", RuleEventOnly, ErrEventOnly,
			"%d is an event-only code: it may only appear as an event, never as a status or condition", s.Code)
	}
	c.scope(path+"/scope", s.Scope, true)
	switch s.Phase {
	case "", PhaseQueued, PhaseExecuting, PhaseWaiting, PhaseFinished, PhaseUnknown:
	default:
		c.iss.add(LevelError, path+"/phase", RulePhase, nil, "phase %q is not QUEUED, EXECUTING, WAITING, FINISHED or UNKNOWN", s.Phase)
	}
	switch s.Severity {
	case "", SeverityCritical, SeverityError, SeverityWarning, SeverityNotice, SeverityInfo, SeverityDebug:
	default:
		c.iss.add(LevelError, path+"/severity", RuleSeverity, nil, "severity %q is not in the severity enumeration", s.Severity)
	}
	if s.Class != "" && s.Class != ClassOf(s.Code) {
		c.iss.add(LevelWarning, path+"/class", RuleClassMismatch, nil,
			"class %q disagrees with the code's first digit (%s); the code wins", s.Class, ClassOf(s.Code))
	}
	if s.Phase == PhaseFinished && !s.Terminal {
		c.iss.add(LevelWarning, path+"/phase", RulePhaseTerminal, nil, "phase FINISHED but terminal is false")
	} else if s.Phase != "" && s.Phase != PhaseFinished && s.Phase != PhaseUnknown && s.Terminal {
		c.iss.add(LevelWarning, path+"/phase", RulePhaseTerminal, nil, "terminal is true but phase is %s", s.Phase)
	}
}

func (c *checker) scope(path string, s Scope, required bool) {
	if s == "" {
		if required {
			c.iss.add(LevelError, path, RuleRequired, nil, "scope is required")
		}
		return
	}
	if !ValidScope(s) {
		c.iss.add(LevelError, path, RuleScope, nil,
			"scope %q is neither a registered scope nor a namespaced extension (such as org.example.%s)", s, s)
	}
}

func (c *checker) retry(r *Retry, path string) {
	switch r.SideEffectState {
	case "", SideEffectNone, SideEffectPossible, SideEffectConfirmed, SideEffectUnknown:
	default:
		c.iss.add(LevelError, path+"/side_effect_state", RuleSideEffectState, nil,
			"side_effect_state %q is not none, possible, confirmed or unknown", r.SideEffectState)
	}
	c.timestamp(path+"/deadline", r.Deadline, false)
	for _, n := range []struct {
		name string
		v    int64
	}{{"after_ms", r.AfterMS}, {"attempt", r.Attempt}, {"max_attempts", r.MaxAttempts}} {
		if n.v < 0 {
			c.iss.add(LevelError, path+"/"+n.name, RuleRetryNumbers, nil, "%s must not be negative", n.name)
		}
	}
	if r.MaxAttempts > 0 && r.Attempt > r.MaxAttempts {
		c.iss.add(LevelWarning, path+"/attempt", RuleRetryAttempts, nil,
			"attempt %d exceeds max_attempts %d", r.Attempt, r.MaxAttempts)
	}
}

func (c *checker) confidence(conf *Confidence, path string) {
	if conf.Metric == "" {
		c.iss.add(LevelError, path+"/metric", RuleConfidence, nil, "confidence must name its metric")
	}
	if conf.Method == "" {
		c.iss.add(LevelError, path+"/method", RuleConfidence, nil, "confidence must name its method")
	}
	if math.IsNaN(conf.Value) || math.IsInf(conf.Value, 0) {
		c.iss.add(LevelError, path+"/value", RuleConfidence, nil, "value must be a finite number")
	}
	if r := conf.Range; r != nil {
		if r.Minimum > r.Maximum {
			c.iss.add(LevelError, path+"/range", RuleConfidenceRange, nil, "minimum %v exceeds maximum %v", r.Minimum, r.Maximum)
		} else if conf.Value < r.Minimum || conf.Value > r.Maximum {
			c.iss.add(LevelWarning, path+"/value", RuleConfidenceRange, nil, "value %v outside its range [%v, %v]", conf.Value, r.Minimum, r.Maximum)
		}
	}
}

// details warns about keys without a reverse-domain namespace: ASC says
// public extension keys SHOULD use one, so it is a warning, not an error.
func (c *checker) details(d map[string]any, path string) {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !reverseDNRE.MatchString(k) {
			c.iss.add(LevelWarning, path+"/"+pointerEscape(k), RuleDetailsNamespace, nil,
				"public details keys should use a reverse-domain namespace such as org.example.%s", k)
		}
	}
}

// nested validates an envelope below the root under the tree limits.
func (c *checker) nested(env *Envelope, path string, pos position) {
	if !c.enter(env, path) {
		return
	}
	defer c.walk.leave(env)
	c.envelope(env, path, pos)
}

func (c *checker) enter(env *Envelope, path string) bool {
	if err := c.walk.enter(env); err != nil {
		var le *treeLimitError
		errors.As(err, &le)
		c.iss.add(LevelError, path, le.rule, ErrCauseTree, "%s", le.msg)
		return false
	}
	return true
}

func (c *checker) cause(cause *Cause, path string) {
	switch {
	case cause.Envelope != nil && cause.Ref != nil:
		c.iss.add(LevelError, path, RuleCauseShape, nil, "a cause is either a nested envelope or a compact reference, not both")
	case cause.Envelope != nil:
		c.nested(cause.Envelope, path, posCause)
	case cause.Ref != nil:
		if !c.enter(nil, path) {
			return
		}
		c.walk.leave(nil)
		c.causeRef(cause.Ref, path)
	default:
		c.iss.add(LevelError, path, RuleCauseShape, nil, "empty cause")
	}
}

func (c *checker) causeRef(r *CauseRef, path string) {
	if r.Ref == "" && r.Code == 0 && r.Name == "" {
		c.iss.add(LevelError, path, RuleCauseShape, nil,
			"a compact causal reference needs a ref, a code and name, or both")
		return
	}
	if r.Code != 0 || r.Name != "" {
		c.codeName(path, r.Code, r.Name)
	}
	c.scope(path+"/scope", r.Scope, false)
}

func (c *checker) condition(cond *Condition, path string) {
	switch {
	case cond.Envelope != nil && cond.Status != nil:
		c.iss.add(LevelError, path, RuleConditionShape, nil, "a condition is either a status object or an envelope, not both")
	case cond.Envelope != nil:
		c.nested(cond.Envelope, path, posCondition)
	case cond.Status != nil:
		c.status(cond.Status, path, posCondition)
	default:
		c.iss.add(LevelError, path, RuleConditionShape, nil, "empty condition")
	}
}

func (c *checker) event(ev *Event, path string) {
	c.codeName(path, ev.Code, ev.Name)
	if ev.Kind != "" && ev.Kind != KindEvent {
		c.iss.add(LevelError, path+"/kind", RuleEventKind, nil, "an event must have kind event, not %q", ev.Kind)
	}
	c.scope(path+"/scope", ev.Scope, false)
	c.timestamp(path+"/occurred_at", ev.OccurredAt, true)
}
