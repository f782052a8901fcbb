package aais

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

// Builders take every time explicitly (nothing here reads a clock) and draw
// generated ids from Options.Rand. Each returns a value that has passed the
// same checks as Parse, or an error; issue paths are those of the value
// inside a message ("/request/choices/0", "/decision/scope", ...).

// RequestParams describes a request to build.
type RequestParams struct {
	// ID is the request id; "" generates "apr_" + 32 hex digits.
	ID string
	// CreatedAt is required.
	CreatedAt time.Time
	// ExpiresAt is optional (zero: the request never expires); it must be
	// after CreatedAt. Blocking requests should expire.
	ExpiresAt time.Time
	Origin    Origin
	// Action is the exact action: a json.RawMessage object, a generic
	// decoded value (map[string]any, ...) or an Action. Go structs are
	// refused (ErrUnsupportedValue); see NewAction.
	Action     any
	Risk       Risk
	Choices    []Choice
	Extensions Extensions
}

// NewRequest builds a pending request whose action_digest is computed over
// the action's raw JSON.
func NewRequest(p RequestParams) (*Request, error) {
	return (*Options)(nil).NewRequest(p)
}

// NewRequest is the package-level NewRequest with o's randomness and limits.
func (o *Options) NewRequest(p RequestParams) (*Request, error) {
	var a Action
	switch v := p.Action.(type) {
	case Action:
		a = v
	case *Action:
		if v != nil {
			a = *v
		}
	case nil:
	default:
		var err error
		if a, err = o.NewAction(v); err != nil {
			return nil, withPrefix(err, "/request/action")
		}
	}
	if a.IsZero() {
		return nil, fmt.Errorf("%w: request has no action", ErrBuild)
	}
	digest, err := a.Digest()
	if err != nil {
		return nil, err
	}
	created, err := NewTimestamp(p.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("%w: created_at: %w", ErrBuild, err)
	}
	var expires Timestamp
	if !p.ExpiresAt.IsZero() {
		if expires, err = NewTimestamp(p.ExpiresAt); err != nil {
			return nil, fmt.Errorf("%w: expires_at: %w", ErrBuild, err)
		}
	}
	id, err := o.idOr(p.ID, "apr")
	if err != nil {
		return nil, err
	}
	r := &Request{
		ID:           id,
		CreatedAt:    created,
		ExpiresAt:    expires,
		Origin:       p.Origin,
		Action:       a,
		ActionDigest: digest,
		Risk:         p.Risk,
		Choices:      p.Choices,
		Extensions:   p.Extensions,
	}
	m, err := o.checkPayload(r, created)
	if err != nil {
		return nil, err
	}
	return m.Request, nil
}

// DecisionParams describes a reviewer's answer to build.
type DecisionParams struct {
	// ID is the decision id; "" generates "dec_" + 32 hex digits.
	ID       string
	Decision Verdict
	Scope    Scope
	// Actor should come from the presenter's authenticated channel.
	Actor Actor
	// DecidedAt is required (the presenter's clock).
	DecidedAt  time.Time
	Extensions Extensions
}

// NewDecision builds a decision on req: request_id and action_digest are
// copied from req, and the (decision, scope) pair must be one req offers
// (ErrNotOffered otherwise).
func NewDecision(req *Request, p DecisionParams) (*Decision, error) {
	return (*Options)(nil).NewDecision(req, p)
}

// NewDecision is the package-level NewDecision with o's randomness.
func (o *Options) NewDecision(req *Request, p DecisionParams) (*Decision, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: decision without a request", ErrBuild)
	}
	if _, ok := req.Choice(p.Decision, p.Scope); !ok {
		return nil, fmt.Errorf("%w: (%s, %s) on request %s", ErrNotOffered, p.Decision, p.Scope, req.ID)
	}
	decided, err := NewTimestamp(p.DecidedAt)
	if err != nil {
		return nil, fmt.Errorf("%w: decided_at: %w", ErrBuild, err)
	}
	id, err := o.idOr(p.ID, "dec")
	if err != nil {
		return nil, err
	}
	d := &Decision{
		ID:           id,
		RequestID:    req.ID,
		ActionDigest: req.ActionDigest,
		DecidedAt:    decided,
		Decision:     p.Decision,
		Scope:        p.Scope,
		Actor:        p.Actor,
		Extensions:   p.Extensions,
	}
	m, err := o.checkPayload(d, decided)
	if err != nil {
		return nil, err
	}
	return m.Decision, nil
}

// ResolutionParams describes a receipt to build.
type ResolutionParams struct {
	// ID is the resolution id; "" generates "res_" + 32 hex digits.
	ID string
	// Request is required: request_id and action_digest come from it.
	Request *Request
	// Decision is the decision that caused the resolution, if any; it must
	// be for Request. Its id becomes decision_id.
	Decision *Decision
	Outcome  Outcome
	// Message is the explanation shown to people; "" uses a stock sentence
	// for the outcome.
	Message string
	// EffectiveScope "" means: the decision's scope when the outcome is
	// approved or denied, and absent otherwise.
	EffectiveScope Scope
	// ResolvedAt is required (the authority's clock).
	ResolvedAt time.Time
	Extensions Extensions
}

var stockMessages = map[Outcome]string{
	OutcomeApproved:  "Approval accepted.",
	OutcomeDenied:    "The action was denied.",
	OutcomeCancelled: "The approval request was cancelled.",
	OutcomeExpired:   "The approval request expired before a decision arrived.",
	OutcomeStale:     "The action changed after it was presented; it was not approved.",
	OutcomeConflict:  "Another decision had already resolved this request.",
	OutcomeInvalid:   "The decision was not one the request offered, or policy refused it.",
}

// NewResolution builds a receipt. When a Decision is given and the outcome
// is approved, denied or cancelled, the outcome must be what the decision
// said, and an approved receipt's effective scope must be the scope
// approved: a receipt cannot widen what was decided.
func NewResolution(p ResolutionParams) (*Resolution, error) {
	return (*Options)(nil).NewResolution(p)
}

// NewResolution is the package-level NewResolution with o's randomness.
func (o *Options) NewResolution(p ResolutionParams) (*Resolution, error) {
	r, resolved, err := o.buildResolution(p)
	if err != nil {
		return nil, err
	}
	m, err := o.checkPayload(r, resolved)
	if err != nil {
		return nil, err
	}
	return m.Resolution, nil
}

// buildResolution is NewResolution without the final validation, for
// callers that validate the receipt anyway when they wrap it in a message
// (the Authority, through NewMessage).
func (o *Options) buildResolution(p ResolutionParams) (*Resolution, Timestamp, error) {
	if p.Request == nil {
		return nil, Timestamp{}, fmt.Errorf("%w: resolution without a request", ErrBuild)
	}
	scope := p.EffectiveScope
	var decisionID string
	if d := p.Decision; d != nil {
		if d.RequestID != p.Request.ID {
			return nil, Timestamp{}, fmt.Errorf("%w: decision %s is for request %s, not %s", ErrBuild, d.ID, d.RequestID, p.Request.ID)
		}
		decisionID = d.ID
		if want, ok := verdictOutcome[d.Decision]; ok && isVerdictOutcome(p.Outcome) && p.Outcome != want {
			return nil, Timestamp{}, fmt.Errorf("%w: a %s decision cannot resolve as %s", ErrBuild, d.Decision, p.Outcome)
		}
		switch p.Outcome {
		case OutcomeApproved, OutcomeDenied:
			if scope == "" {
				scope = d.Scope
			} else if scope != d.Scope {
				return nil, Timestamp{}, fmt.Errorf("%w: effective_scope %s differs from the decided scope %s", ErrBuild, scope, d.Scope)
			}
		}
	}
	msg := p.Message
	if msg == "" {
		msg = stockMessages[p.Outcome]
	}
	resolved, err := NewTimestamp(p.ResolvedAt)
	if err != nil {
		return nil, Timestamp{}, fmt.Errorf("%w: resolved_at: %w", ErrBuild, err)
	}
	id, err := o.idOr(p.ID, "res")
	if err != nil {
		return nil, Timestamp{}, err
	}
	r := &Resolution{
		ID:             id,
		RequestID:      p.Request.ID,
		DecisionID:     decisionID,
		ActionDigest:   p.Request.ActionDigest,
		ResolvedAt:     resolved,
		Outcome:        p.Outcome,
		Message:        msg,
		EffectiveScope: scope,
		Extensions:     p.Extensions,
	}
	return r, resolved, nil
}

var verdictOutcome = map[Verdict]Outcome{
	Approve: OutcomeApproved,
	Deny:    OutcomeDenied,
	Cancel:  OutcomeCancelled,
}

func isVerdictOutcome(o Outcome) bool {
	return o == OutcomeApproved || o == OutcomeDenied || o == OutcomeCancelled
}

// Header is the envelope of a message to build.
type Header struct {
	// ID is the event id; "" generates "evt_" + 32 hex digits.
	ID string
	// OccurredAt is required.
	OccurredAt time.Time
	// Sequence is the next number in the producer's own stream.
	Sequence uint64
	// Stream is the producer-owned stream id; durable bindings need one.
	Stream     string
	Extensions Extensions
}

// NewMessage wraps a payload (*Request, *Decision, *Resolution, *Snapshot
// or *Activity) in an envelope. The returned message is a deep copy that
// has passed Parse: later changes to the payload do not reach it.
func NewMessage(h Header, p Payload) (*Message, error) {
	return (*Options)(nil).NewMessage(h, p)
}

// NewMessage is the package-level NewMessage with o's randomness and limits.
func (o *Options) NewMessage(h Header, p Payload) (*Message, error) {
	occurred, err := NewTimestamp(h.OccurredAt)
	if err != nil {
		return nil, fmt.Errorf("%w: occurred_at: %w", ErrBuild, err)
	}
	id, err := o.idOr(h.ID, "evt")
	if err != nil {
		return nil, err
	}
	m := &Message{
		ID:         id,
		OccurredAt: occurred,
		Sequence:   h.Sequence,
		Stream:     h.Stream,
		Extensions: h.Extensions,
	}
	if err := m.set(p); err != nil {
		return nil, err
	}
	return o.Copy(m)
}

// set stores p as m's payload and sets m.Type.
func (m *Message) set(p Payload) error {
	if isNilPayload(p) {
		return fmt.Errorf("%w: no payload", ErrBuild)
	}
	m.Type = p.messageType()
	switch v := p.(type) {
	case *Request:
		m.Request = v
	case *Decision:
		m.Decision = v
	case *Resolution:
		m.Resolution = v
	case *Snapshot:
		m.Snapshot = v
	case *Activity:
		m.Activity = v
	}
	return nil
}

func isNilPayload(p Payload) bool {
	switch v := p.(type) {
	case *Request:
		return v == nil
	case *Decision:
		return v == nil
	case *Resolution:
		return v == nil
	case *Snapshot:
		return v == nil
	case *Activity:
		return v == nil
	}
	return true
}

// checkPayload validates a payload by wrapping it in a throwaway envelope
// and parsing the result, and returns the parsed copy.
func (o *Options) checkPayload(p Payload, at Timestamp) (*Message, error) {
	m := &Message{ID: "check", OccurredAt: at}
	if err := m.set(p); err != nil {
		return nil, err
	}
	return o.Copy(m)
}

// idOr returns id, or a new one with the prefix when id is "".
func (o *Options) idOr(id, prefix string) (string, error) {
	if id != "" {
		return id, nil
	}
	var r io.Reader = rand.Reader
	if o != nil && o.Rand != nil {
		r = o.Rand
	}
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("%w: reading randomness for an id: %w", ErrBuild, err)
	}
	return prefix + "_" + hex.EncodeToString(b[:]), nil
}

// withPrefix moves the issue paths of a *ValidationError under prefix.
func withPrefix(err error, prefix string) error {
	ve, ok := err.(*ValidationError)
	if !ok {
		return err
	}
	out := &ValidationError{Issues: make([]Issue, len(ve.Issues)), cause: ve.cause}
	for i, is := range ve.Issues {
		is.Path = prefix + is.Path
		out.Issues[i] = is
	}
	return out
}
