package aais

import (
	"encoding/json"
	"slices"
)

// Version is the AAIS document-model version this package reads and writes
// (the "aais" member of every message).
const Version = "1.0"

// MaxSequence is the largest sequence number accepted: 2^53-1, the largest
// integer every JSON peer reads exactly (RFC 7493 §2.2). The schema allows
// any non-negative integer; larger ones would change value in a peer that
// reads numbers as doubles, so two peers would disagree about event order.
const MaxSequence = 1<<53 - 1

// Type says which payload a message carries.
type Type string

// The five message types of AAIS 1.0.
const (
	TypeRequested Type = "approval.requested" // carries a Request
	TypeDecided   Type = "approval.decided"   // carries a Decision
	TypeResolved  Type = "approval.resolved"  // carries a Resolution (receipt)
	TypeSnapshot  Type = "approval.snapshot"  // carries a Snapshot
	TypeActivity  Type = "approval.activity"  // carries an Activity
)

// Valid reports whether t is one of the five message types.
func (t Type) Valid() bool {
	switch t {
	case TypeRequested, TypeDecided, TypeResolved, TypeSnapshot, TypeActivity:
		return true
	}
	return false
}

// Verdict is what a choice or a decision answers: approve, deny or cancel.
type Verdict string

// The three verdicts.
const (
	Approve Verdict = "approve"
	Deny    Verdict = "deny"
	Cancel  Verdict = "cancel"
)

// Valid reports whether v is one of the three verdicts.
func (v Verdict) Valid() bool { return v == Approve || v == Deny || v == Cancel }

// Exits reports whether v lets the reviewer say no (deny or cancel). Such a
// verdict is only ever given with ScopeOnce.
func (v Verdict) Exits() bool { return v == Deny || v == Cancel }

// Scope says how far an approval reaches.
type Scope string

// The three scopes.
const (
	// ScopeOnce authorizes only the exact pending request.
	ScopeOnce Scope = "once"
	// ScopeSession authorizes future matching actions in the same
	// origin.session_id, under the choice's scope_constraints.
	ScopeSession Scope = "session"
	// ScopePersistent authorizes future matching actions under an explicit,
	// revocable rule the authority keeps.
	ScopePersistent Scope = "persistent"
)

// Valid reports whether s is one of the three scopes.
func (s Scope) Valid() bool { return s == ScopeOnce || s == ScopeSession || s == ScopePersistent }

// Bounded reports whether s reaches beyond the one request and so needs
// scope_constraints.
func (s Scope) Bounded() bool { return s == ScopeSession || s == ScopePersistent }

// Outcome is how a request ended, as recorded in its receipt.
type Outcome string

// The seven outcomes.
const (
	OutcomeApproved  Outcome = "approved"  // authorization accepted (not "executed")
	OutcomeDenied    Outcome = "denied"    // the reviewer said no
	OutcomeCancelled Outcome = "cancelled" // the reviewer or the runtime withdrew the request
	OutcomeExpired   Outcome = "expired"   // decided at or after expires_at
	OutcomeStale     Outcome = "stale"     // the action changed after presentation
	OutcomeConflict  Outcome = "conflict"  // a different decision lost to an earlier one
	OutcomeInvalid   Outcome = "invalid"   // not offered, or refused by policy
)

// Valid reports whether o is one of the seven outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeApproved, OutcomeDenied, OutcomeCancelled, OutcomeExpired,
		OutcomeStale, OutcomeConflict, OutcomeInvalid:
		return true
	}
	return false
}

// RiskLevel is the advisory risk the authority assigns to a request.
// Presenters display it; nothing may be auto-approved because of it.
type RiskLevel string

// The four risk levels.
const (
	RiskLow      RiskLevel = "low"
	RiskMedium   RiskLevel = "medium"
	RiskHigh     RiskLevel = "high"
	RiskCritical RiskLevel = "critical"
)

// ActorType says whether a human or a policy decided.
type ActorType string

// The two actor types.
const (
	ActorHuman  ActorType = "human"
	ActorPolicy ActorType = "policy"
)

// StatusPending is the only request status on the wire; how a request ended
// lives in its receipt's Outcome. Request has no Status field: it is always
// this value and Marshal writes it.
const StatusPending = "pending"

// Extensions holds namespaced extension members: each name is a URI
// ("https://...") or a domain followed by a slash ("com.example/x"). Values
// are kept as compact raw JSON and passed through unread. A nil map means the
// member is absent; an empty non-nil map is written as {}.
//
// Extensions never carry authority: a peer that needs one to be enforced
// must negotiate it out of band and fail closed when the other side cannot.
type Extensions map[string]json.RawMessage

// UnmarshalJSON keeps each value as compact raw JSON.
func (e *Extensions) UnmarshalJSON(data []byte) error {
	m, err := decodeRawObject(data)
	if err != nil {
		return err
	}
	*e = m
	return nil
}

// Constraints are a choice's scope_constraints: opaque data only the
// authority interprets (action name, resource boundary, argument matcher,
// expiry, ...). Values are compact raw JSON. Presenters must show them and
// must never edit, merge or invent them; an authority must treat a
// constraint it does not understand as not matching.
type Constraints map[string]json.RawMessage

// UnmarshalJSON keeps each value as compact raw JSON.
func (c *Constraints) UnmarshalJSON(data []byte) error {
	m, err := decodeRawObject(data)
	if err != nil {
		return err
	}
	*c = m
	return nil
}

// Origin says where a request comes from. Only Harness and SessionID are
// required; an empty string means the member is absent (the schema requires
// every present one to be non-empty).
type Origin struct {
	Harness       string `json:"harness"`
	SessionID     string `json:"session_id"`
	RunID         string `json:"run_id,omitempty"`
	TaskID        string `json:"task_id,omitempty"`
	GraphID       string `json:"graph_id,omitempty"`
	NodeID        string `json:"node_id,omitempty"`
	AgentID       string `json:"agent_id,omitempty"`
	Profile       string `json:"profile,omitempty"`
	SubagentRunID string `json:"subagent_run_id,omitempty"`
	ParentRunID   string `json:"parent_run_id,omitempty"`
	// Project is a free-form project or resource label (1..4096 chars).
	Project string `json:"project,omitempty"`
}

// Presentation is the optional presentation member of an action. It is part
// of the hashed action.
type Presentation struct {
	// Redacted is nil when the member is absent, so an explicit false is
	// kept. When true, BindingHint must say what identity is bound.
	Redacted    *bool  `json:"redacted,omitempty"`
	BindingHint string `json:"binding_hint,omitempty"`
	Details     string `json:"details,omitempty"`
}

// Risk is the authority's advisory risk assessment.
type Risk struct {
	Level RiskLevel `json:"level"`
	// Reasons are 1..20 display-safe strings.
	Reasons []string `json:"reasons"`
}

// Choice is one (decision, scope) pair a request offers the reviewer.
type Choice struct {
	Decision Verdict `json:"decision"`
	Scope    Scope   `json:"scope"`
	Label    string  `json:"label"`
	// ScopeConstraints is required (non-empty) for session and persistent
	// scopes; nil means absent.
	ScopeConstraints Constraints `json:"scope_constraints,omitzero"`
}

// Request is the payload of approval.requested, and each entry of a
// snapshot: an authority asks for a decision on exactly Action.
type Request struct {
	ID        string
	CreatedAt Timestamp
	// ExpiresAt is the zero Timestamp when the request does not expire.
	ExpiresAt Timestamp
	Origin    Origin
	// Action is the exact action under review, kept as the raw JSON it
	// arrived as.
	Action Action
	// ActionDigest is "sha256:" + hex(SHA-256(JCS(action))).
	ActionDigest string
	Risk         Risk
	// Choices are 1..10 offered (decision, scope) pairs, at least one of
	// which is deny or cancel.
	Choices    []Choice
	Extensions Extensions
}

// Choice returns the offered choice with the given decision and scope.
func (r *Request) Choice(v Verdict, s Scope) (Choice, bool) {
	if r == nil {
		return Choice{}, false
	}
	i := slices.IndexFunc(r.Choices, func(c Choice) bool { return c.Decision == v && c.Scope == s })
	if i < 0 {
		return Choice{}, false
	}
	return r.Choices[i], true
}

// OfferedChoice returns the choice of req whose (decision, scope) pair is
// the one d selected, and false when req did not offer it. It compares only
// the pair: whether d is for req (request_id), reviewed the same action
// (action_digest) or came in time is for the authority to check, because
// each of those failures has its own outcome.
func OfferedChoice(req *Request, d *Decision) (Choice, bool) {
	if req == nil || d == nil {
		return Choice{}, false
	}
	return req.Choice(d.Decision, d.Scope)
}

// Actor is who decided. An authority must derive it from the authenticated
// channel; an actor claimed in a message body proves nothing.
type Actor struct {
	ID              string    `json:"id"`
	Type            ActorType `json:"type"`
	DisplayName     string    `json:"display_name,omitempty"`
	AuthenticatedBy string    `json:"authenticated_by,omitempty"`
}

// Decision is the payload of approval.decided: a presenter's answer to one
// request.
type Decision struct {
	ID        string
	RequestID string
	// ActionDigest is the digest of the action the actor reviewed.
	ActionDigest string
	// DecidedAt is the presenter's clock; it is advisory and never used for
	// expiry.
	DecidedAt  Timestamp
	Decision   Verdict
	Scope      Scope
	Actor      Actor
	Extensions Extensions
}

// Resolution is the payload of approval.resolved: the authority's receipt
// saying how a request ended. It carries no signature (AAIS 1.0 has none).
type Resolution struct {
	ID        string
	RequestID string
	// DecisionID is the decision that caused the resolution; "" when none
	// did (expiry, cancellation by the runtime).
	DecisionID string
	// ActionDigest is the request's action digest.
	ActionDigest string
	// ResolvedAt is the authority's clock.
	ResolvedAt Timestamp
	Outcome    Outcome
	// Message is a safe, human-readable explanation.
	Message string
	// EffectiveScope is "" when absent.
	EffectiveScope Scope
	Extensions     Extensions
}

// Snapshot is the payload of approval.snapshot: every request still pending
// for the presenter as of AsOfSequence. A reconnecting presenter replaces
// its set with Pending and then applies only events with a greater
// sequence.
type Snapshot struct {
	AsOfSequence uint64
	// Pending is never written as null: a nil slice is written as [].
	Pending []Request
}

// Activity is the payload of approval.activity: display-only progress about
// a request. It never changes approval state.
type Activity struct {
	RequestID string `json:"request_id"`
	Message   string `json:"message"`
	Stage     string `json:"stage,omitempty"`
}

// Message is one AAIS envelope. Exactly one payload pointer is set, the one
// Type names. Build messages with NewMessage or read them with Parse; both
// return only valid messages.
type Message struct {
	Type Type
	// ID identifies this event.
	ID         string
	OccurredAt Timestamp
	// Sequence orders events within one producer's Stream.
	Sequence uint64
	// Stream is the producer-owned stream id; "" when absent.
	Stream     string
	Extensions Extensions

	Request    *Request
	Decision   *Decision
	Resolution *Resolution
	Snapshot   *Snapshot
	Activity   *Activity
}

// Payload is implemented by *Request, *Decision, *Resolution, *Snapshot and
// *Activity: the values NewMessage wraps.
type Payload interface {
	messageType() Type
}

func (*Request) messageType() Type    { return TypeRequested }
func (*Decision) messageType() Type   { return TypeDecided }
func (*Resolution) messageType() Type { return TypeResolved }
func (*Snapshot) messageType() Type   { return TypeSnapshot }
func (*Activity) messageType() Type   { return TypeActivity }

// Payload returns the payload Type names, or nil.
func (m *Message) Payload() Payload {
	if m == nil {
		return nil
	}
	switch m.Type {
	case TypeRequested:
		if m.Request != nil {
			return m.Request
		}
	case TypeDecided:
		if m.Decision != nil {
			return m.Decision
		}
	case TypeResolved:
		if m.Resolution != nil {
			return m.Resolution
		}
	case TypeSnapshot:
		if m.Snapshot != nil {
			return m.Snapshot
		}
	case TypeActivity:
		if m.Activity != nil {
			return m.Activity
		}
	}
	return nil
}
