package asc

import "time"

// SpecVersion is the envelope specification version this package emits.
const SpecVersion = "0.1.0"

// Media types of the standalone envelope and of RFC 9457 Problem Details.
const (
	MediaType        = "application/agent-status+json"
	ProblemMediaType = "application/problem+json"
)

// Kind says how a status object is used.
type Kind string

// The closed kind enumeration.
const (
	KindStatus    Kind = "status"
	KindCondition Kind = "condition"
	KindEvent     Kind = "event"
)

// Scope is the unit a status describes. Besides the eight registered scopes,
// a namespaced extension scope is allowed: see ValidScope.
type Scope string

// The registered scopes.
const (
	ScopeTask           Scope = "task"
	ScopeStep           Scope = "step"
	ScopeToolCall       Scope = "tool_call"
	ScopeModelCall      Scope = "model_call"
	ScopeHandoff        Scope = "handoff"
	ScopePolicyDecision Scope = "policy_decision"
	ScopeEvaluation     Scope = "evaluation"
	ScopeArtefact       Scope = "artefact"
)

// Phase is the coarse lifecycle position of the scope. It never replaces the
// primary status.
type Phase string

// The closed phase enumeration.
const (
	PhaseQueued    Phase = "QUEUED"
	PhaseExecuting Phase = "EXECUTING"
	PhaseWaiting   Phase = "WAITING"
	PhaseFinished  Phase = "FINISHED"
	PhaseUnknown   Phase = "UNKNOWN"
)

// Severity is advisory operational metadata; deployments may override it
// without changing the code.
type Severity string

// The severity enumeration (lower case on the wire).
const (
	SeverityCritical Severity = "critical"
	SeverityError    Severity = "error"
	SeverityWarning  Severity = "warning"
	SeverityNotice   Severity = "notice"
	SeverityInfo     Severity = "info"
	SeverityDebug    Severity = "debug"
)

// SideEffectState says what is known about side effects of the attempt.
type SideEffectState string

// The side-effect states of ASC 0.1.
const (
	SideEffectNone      SideEffectState = "none"
	SideEffectPossible  SideEffectState = "possible"
	SideEffectConfirmed SideEffectState = "confirmed"
	SideEffectUnknown   SideEffectState = "unknown"
)

// Envelope is an ASC status report (application/agent-status+json).
//
// Every object type in this package keeps the members it does not know in
// Extra, so a consumer that parses and re-marshals an envelope forwards
// extensions unchanged. Extra never overrides a known member.
type Envelope struct {
	SpecVersion string
	Status      Status
	Message     *Message
	Retry       *Retry
	Remediation []Remediation
	Provenance  *Provenance
	Confidence  *Confidence
	Causes      []Cause
	Conditions  []Condition
	Events      []Event
	Details     map[string]any
	// OccurredAt is an RFC 3339 timestamp with an explicit offset. It is
	// kept as text so that a parsed envelope re-marshals byte for byte; use
	// Time to read it.
	OccurredAt string

	// The authenticity block for reports that cross a trust boundary. ASC
	// does not say where it sits; Custos puts it at the top level.
	Issuer     string
	ObservedBy string
	Authority  string
	Integrity  *Integrity

	Extra map[string]any
}

// Status is the status object: the primary status of an envelope, or a
// condition in its compact form.
type Status struct {
	Code     Code
	Name     string
	Kind     Kind
	Scope    Scope
	Terminal bool
	// Class is informative; Custos derives the class from the code and only
	// warns when a sent class disagrees.
	Class    Class
	Phase    Phase
	Severity Severity
	Extra    map[string]any
}

// Message holds human-readable text. Consumers must never parse it for
// control flow.
type Message struct {
	// User must be safe to show the intended user.
	User string
	// Developer is a short diagnostic, never a stack trace.
	Developer string
	Locale    string
	Extra     map[string]any
}

// Retry is the retry contract.
type Retry struct {
	Retryable bool
	Safe      bool
	// AfterMS is the minimum delay before the next attempt, in milliseconds.
	AfterMS     int64
	Strategy    string
	Attempt     int64
	MaxAttempts int64
	// Deadline is an RFC 3339 timestamp after which no attempt is allowed.
	Deadline        string
	IdempotencyKey  string
	SideEffectState SideEffectState
	// ReconciliationAction is the machine-readable action resolving an
	// uncertain state. Its shape is open, so it is kept as decoded JSON.
	ReconciliationAction any
	Extra                map[string]any
}

// Remediation is one suggested action. The vocabulary is open: Params holds
// every member other than action.
type Remediation struct {
	Action string
	Params map[string]any
}

// Provenance identifies what was involved. TraceID and SpanID are W3C Trace
// Context identifiers.
type Provenance struct {
	RunID        string
	StepID       string
	AgentID      string
	ToolCallID   string
	ProviderCode string
	TraceID      string
	SpanID       string
	PolicyID     string
	EvaluatorID  string
	Extra        map[string]any
}

// Confidence says what was measured and how. A bare number is not
// interoperable and is refused.
type Confidence struct {
	Metric           string
	Value            float64
	Method           string
	Range            *ConfidenceRange
	Threshold        *float64
	EvaluatorVersion string
	Calibrated       *bool
	EvidenceSetID    string
	Extra            map[string]any
}

// ConfidenceRange is the range a confidence value is measured in.
type ConfidenceRange struct {
	Minimum float64
	Maximum float64
	Extra   map[string]any
}

// Integrity describes how a report crossing a trust boundary was protected.
type Integrity struct {
	Method   string
	KeyID    string
	Verified bool
	Extra    map[string]any
}

// Condition is one entry of conditions[]: a fact that holds at the same time
// as the primary status. ASC leaves its shape open; Custos accepts both a
// bare status object (Status) and a full envelope (Envelope). Exactly one is
// set.
type Condition struct {
	Status   *Status
	Envelope *Envelope
}

// StatusObject returns the condition's status object, whichever form it has.
func (c Condition) StatusObject() *Status {
	if c.Envelope != nil {
		return &c.Envelope.Status
	}
	return c.Status
}

// Event is a point-in-time occurrence such as RETRY_ATTEMPTED. Its kind is
// implicitly event; Kind and Scope are optional.
type Event struct {
	Code       Code
	Name       string
	OccurredAt string
	Kind       Kind
	Scope      Scope
	Extra      map[string]any
}

// New returns a minimum envelope for a primary status of a registered or
// extension code. The name is filled in from the registry when code is
// registered.
func New(code Code, scope Scope, terminal bool, at time.Time) *Envelope {
	return &Envelope{
		SpecVersion: SpecVersion,
		Status: Status{
			Code:     code,
			Name:     code.Name(),
			Kind:     KindStatus,
			Scope:    scope,
			Terminal: terminal,
		},
		OccurredAt: FormatTime(at),
	}
}

// NewCondition returns a condition in the compact status-object form.
func NewCondition(code Code, scope Scope, terminal bool) Condition {
	return Condition{Status: &Status{Code: code, Name: code.Name(), Kind: KindCondition, Scope: scope, Terminal: terminal}}
}

// NewEvent returns an event of a registered or extension code.
func NewEvent(code Code, at time.Time) Event {
	return Event{Code: code, Name: code.Name(), OccurredAt: FormatTime(at)}
}

// FormatTime renders t as the RFC 3339 UTC timestamp ASC envelopes carry.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Time parses OccurredAt.
func (e *Envelope) Time() (time.Time, error) { return parseTime(e.OccurredAt) }

// Registered reports whether the envelope's primary code is registered.
func (e *Envelope) Registered() bool { return e.Status.Code.Registered() }

// UserMessage returns message.user, or a generic text from the registry (or
// the class) so that something safe can always be shown.
func (e *Envelope) UserMessage() string {
	if e.Message != nil && e.Message.User != "" {
		return e.Message.User
	}
	return genericMessage(e.Status.Code)
}

func genericMessage(c Code) string {
	if entry, ok := lookupCode(c); ok {
		return entry.Meaning
	}
	return "The agent reported a status of class " + string(ClassOf(c)) + "."
}
