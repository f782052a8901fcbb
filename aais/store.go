package aais

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Errors a Store or an Authority returns, besides the message errors above.
var (
	// ErrUnknownRequest: no request with that id was ever created in the
	// store.
	ErrUnknownRequest = errors.New("aais: unknown request")
	// ErrConflict: a request id is already taken by a request with
	// different content. Request ids are never reused, not even after the
	// request is resolved.
	ErrConflict = errors.New("aais: request id already used by a different request")
	// ErrSequenceExhausted: the store has handed out MaxSequence and cannot
	// order another event. It refuses the write rather than wrap around.
	ErrSequenceExhausted = errors.New("aais: event sequence exhausted")
	// ErrRuleInactive: an automatic approval names a rule that has been
	// revoked since it was matched. Nothing was written; match again.
	ErrRuleInactive = errors.New("aais: rule revoked")
	// ErrOwnerStopped: the process that created the request, and would
	// run the action, is no longer running, so nobody would act on an
	// approval. The request stays pending; deny or cancel it, or
	// CancelOrphaned withdraws it.
	ErrOwnerStopped = errors.New("aais: the requesting process has stopped")
)

// ProcessIdentity names the process that created a request and waits to run
// its action: a PID alone is not enough, because PIDs are reused, so the
// process's start time and the host (and PID namespace) are part of it.
type ProcessIdentity struct {
	// PID is the process id, > 0.
	PID int `json:"pid"`
	// StartTime is when the process started, in seconds since the Unix
	// epoch rounded to 0.01 s; 0 when it could not be read.
	StartTime float64 `json:"process_start_time,omitempty"`
	// HostID identifies the host and PID namespace the PID belongs to.
	HostID string `json:"host_id"`
}

// Liveness is what can be said about a ProcessIdentity from here.
type Liveness int

const (
	// LivenessUnknown: it cannot be checked from this host (another host
	// or PID namespace, or the check failed). Unknown owners are treated
	// as alive: nothing is withdrawn on a guess.
	LivenessUnknown Liveness = iota
	// LivenessAlive: the process is running.
	LivenessAlive
	// LivenessDead: the process has exited, or its PID now belongs to a
	// process that started at another time.
	LivenessDead
)

// String returns "unknown", "alive" or "dead".
func (l Liveness) String() string {
	switch l {
	case LivenessAlive:
		return "alive"
	case LivenessDead:
		return "dead"
	}
	return "unknown"
}

// RequestRecord is a request as a Store keeps it.
type RequestRecord struct {
	// Event is the approval.requested message. The store assigns its
	// Sequence when it records it; whatever the caller set is ignored.
	Event *Message
	// Fingerprint identifies the request's content (the Authority uses
	// the JCS digest of the request payload). Two records with the same
	// request id and fingerprint are the same request.
	Fingerprint string
	// Owner is the process that created the request and waits to run its
	// action; nil when not tracked. It is not part of the fingerprint.
	Owner *ProcessIdentity
	// Resolution, when set on a record given to CreateRequestIfAbsent, is
	// recorded in the same write: the request is created already resolved
	// (an automatic approval by a rule). Stores return it nil.
	Resolution *ResolutionRecord
}

// ResolutionRecord is a request's one resolution as a Store keeps it.
type ResolutionRecord struct {
	// Event is the approval.resolved message carrying the receipt. The
	// store assigns its Sequence when it records it.
	Event *Message
	// DecisionFingerprint identifies the decision that caused the
	// resolution (the Authority uses the JCS digest of the decision body);
	// "" when no decision did (expiry sweep, cancellation by the runtime).
	// A later decision with the same non-empty fingerprint is a replay and
	// gets this receipt back.
	DecisionFingerprint string
	// Rule, when set, is a rule this approval creates (an approved session
	// or persistent choice). The store saves it in the same write as the
	// resolution, and only if the resolution is recorded.
	Rule *Rule
	// ByRule is the id of the rule that approved the request
	// automatically, "" when a decision or the runtime resolved it. The
	// store refuses the write (ErrRuleInactive, ErrUnknownRule) unless
	// that rule is saved and not revoked when it writes.
	ByRule string
}

// RequestState is everything a Store knows about one request.
type RequestState struct {
	Request RequestRecord
	// Resolution is nil while the request is pending.
	Resolution *ResolutionRecord
}

// Pending reports whether the request is still waiting for a resolution.
func (s RequestState) Pending() bool { return s.Resolution == nil }

// EventPage is what Store.EventsAfter returns.
type EventPage struct {
	// Events are the recorded events with a sequence greater than the one
	// asked for, in increasing sequence order, with no gaps.
	Events []*Message
	// Gap is true when the page cannot be applied on top of what the
	// caller has: it asked for events after a sequence the store never
	// reached (the store was reset) or no longer holds. The caller must
	// take a new snapshot and resume from its AsOfSequence.
	Gap bool
	// Latest is the sequence of the last event recorded (0 when none).
	// When the last event of Events is before Latest, the page was cut at
	// the limit asked for: ask again after it.
	Latest uint64
	// CompactedThrough is the highest sequence removed from the log by
	// compaction (0 when nothing was). Asking for events after a sequence
	// below it is a Gap.
	CompactedThrough uint64
	// StoreID identifies this store's event history. It changes when the
	// history is reset, so a client can detect the reset by comparing it
	// with the StoreID it saw before.
	StoreID string
}

// Store keeps requests, their one resolution each, and the ordered log of
// the events that recorded them. It is the Authority's only state; every
// backend must pass the conformance kit in package aaistest.
//
// Sequences are per store: every write appends exactly one event and gives
// it the next number (1, 2, 3, ...), and one store is one authority stream.
// A write is visible to readers (RequestState, Pending) no later than its
// event is visible to EventsAfter, so a presenter that sees an
// approval.requested event can always read the request.
//
// Implementations must be safe for concurrent use, must return copies the
// caller may modify, must fail closed (refuse a write they cannot record
// whole) and must honour ctx cancellation before they write.
type Store interface {
	// CreateRequestIfAbsent records rec and its approval.requested event
	// unless a request with the same id exists. It returns the record as
	// stored and whether this call created it. An existing request with
	// the same Fingerprint is returned unchanged (created false); one with
	// a different Fingerprint yields ErrConflict. When rec.Resolution is
	// set, the request, its resolution and both events (requested, then
	// resolved) are recorded in one write, under the conditions of
	// ResolveIfPending on ByRule.
	CreateRequestIfAbsent(ctx context.Context, rec RequestRecord) (stored RequestRecord, created bool, err error)

	// RequestState returns the request with the given id and its
	// resolution, if any, or ErrUnknownRequest.
	RequestState(ctx context.Context, id string) (RequestState, error)

	// ResolveIfPending atomically records rec as the resolution of the
	// request its receipt names, and appends its event, if that request is
	// still pending. Otherwise it changes nothing and returns the
	// resolution already recorded (resolved false). Exactly one call ever
	// succeeds per request. An unknown request yields ErrUnknownRequest.
	// rec.Rule, if any, is saved in the same write; a rule id already
	// saved yields ErrConflict and nothing is written.
	ResolveIfPending(ctx context.Context, rec ResolutionRecord) (stored ResolutionRecord, resolved bool, err error)

	// Pending returns the unresolved requests in the order they were
	// created, together with the sequence of the last event recorded when
	// the list was taken (the snapshot's as_of_sequence). It does not look
	// at expiry: that needs the authority's clock.
	Pending(ctx context.Context) (pending []RequestRecord, asOf uint64, err error)

	// EventsAfter returns the recorded events with a sequence greater than
	// after, at most limit of them (limit <= 0: all).
	EventsAfter(ctx context.Context, after uint64, limit int) (EventPage, error)

	// Rules returns every saved rule, revoked ones included, ordered by
	// creation time and then id (RuleSet.Sorted).
	Rules(ctx context.Context) (RuleSet, error)

	// RevokeRule records that the rule with the given id was revoked at
	// at by by, and returns it. A rule already revoked is returned as it
	// is (revoked false). An unknown id yields ErrUnknownRule.
	RevokeRule(ctx context.Context, id string, at time.Time, by Actor) (rule *Rule, revoked bool, err error)
}

// CheckRequestRecord reports whether rec is a record a Store may write: an
// approval.requested event with a fingerprint, and when rec.Resolution is
// set, a resolution CheckResolutionRecord accepts for that request. Stores
// call it before they write anything.
func CheckRequestRecord(rec RequestRecord) error {
	if rec.Event == nil || rec.Event.Type != TypeRequested || rec.Event.Request == nil {
		return fmt.Errorf("%w: not an approval.requested event", ErrInvalid)
	}
	if rec.Fingerprint == "" {
		return fmt.Errorf("%w: request record without a fingerprint", ErrInvalid)
	}
	if rec.Owner != nil && (rec.Owner.PID <= 0 || rec.Owner.HostID == "") {
		return fmt.Errorf("%w: owner without a pid or host", ErrInvalid)
	}
	if rec.Resolution != nil {
		if err := CheckResolutionRecord(*rec.Resolution); err != nil {
			return err
		}
		if rec.Resolution.Event.Resolution.RequestID != rec.Event.Request.ID {
			return fmt.Errorf("%w: the resolution is for another request", ErrInvalid)
		}
		if rec.Resolution.ByRule == "" {
			return fmt.Errorf("%w: only a rule resolves a request as it is created", ErrInvalid)
		}
	}
	return nil
}

// CheckResolutionRecord reports whether rec is a resolution a Store may
// write: an approval.resolved event that is not a conflict answer; a Rule
// or ByRule only on an approval, a Rule only for the request it came from.
func CheckResolutionRecord(rec ResolutionRecord) error {
	if rec.Event == nil || rec.Event.Type != TypeResolved || rec.Event.Resolution == nil {
		return fmt.Errorf("%w: not an approval.resolved event", ErrInvalid)
	}
	res := rec.Event.Resolution
	if res.Outcome == OutcomeConflict {
		return fmt.Errorf("%w: a conflict receipt never resolves a request", ErrInvalid)
	}
	if (rec.Rule != nil || rec.ByRule != "") && res.Outcome != OutcomeApproved {
		return fmt.Errorf("%w: a rule goes with an approval only", ErrInvalid)
	}
	if rec.Rule != nil && rec.ByRule != "" {
		return fmt.Errorf("%w: an automatic approval creates no rule", ErrInvalid)
	}
	if r := rec.Rule; r != nil {
		if _, ok := r.Parsed(); !ok || r.RequestID != res.RequestID || r.ResolutionID != res.ID {
			return fmt.Errorf("%w: the rule does not come from this approval", ErrInvalid)
		}
	}
	return nil
}

// The helpers below turn what a durable store keeps (JSON) back into
// records, the same way in every store, so that a damaged row is refused
// with the same errors everywhere.

// StoredRequest rebuilds a RequestRecord from a store's row: the event's
// JSON (parsed and checked to be approval.requested), its fingerprint and
// its owner's JSON (nil: none).
func StoredRequest(event []byte, fingerprint string, owner []byte) (RequestRecord, error) {
	m, err := Parse(event)
	if err != nil {
		return RequestRecord{}, fmt.Errorf("stored request: %w", err)
	}
	if m.Type != TypeRequested || m.Request == nil {
		return RequestRecord{}, fmt.Errorf("%w: stored request is a %s message", ErrInvalid, m.Type)
	}
	rec := RequestRecord{Event: m, Fingerprint: fingerprint}
	if owner != nil {
		rec.Owner = new(ProcessIdentity)
		if err := json.Unmarshal(owner, rec.Owner); err != nil {
			return RequestRecord{}, fmt.Errorf("%w: stored owner: %w", ErrInvalid, err)
		}
	}
	return rec, nil
}

// StoredResolution rebuilds a ResolutionRecord from a store's row: the
// receipt's JSON (checked to be approval.resolved) and the fingerprint of
// the decision that caused it.
func StoredResolution(event []byte, decisionFingerprint string) (ResolutionRecord, error) {
	m, err := Parse(event)
	if err != nil {
		return ResolutionRecord{}, fmt.Errorf("stored resolution: %w", err)
	}
	if m.Type != TypeResolved || m.Resolution == nil {
		return ResolutionRecord{}, fmt.Errorf("%w: stored resolution is a %s message", ErrInvalid, m.Type)
	}
	return ResolutionRecord{Event: m, DecisionFingerprint: decisionFingerprint}, nil
}

// StoredRule reads a rule a store kept as its JSON.
func StoredRule(data []byte) (*Rule, error) {
	r := new(Rule)
	if err := r.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("stored rule: %w", err)
	}
	return r, nil
}

// RevokeStoredRule revokes a rule a store kept as its JSON: it returns the
// revoked rule and the JSON to store instead, or, when the rule was
// already revoked, the rule as it is and nil JSON (nothing to write).
func RevokeStoredRule(data []byte, at time.Time, by Actor) (*Rule, []byte, error) {
	r, err := StoredRule(data)
	if err != nil {
		return nil, nil, err
	}
	if r.Revoked() {
		return r, nil, nil
	}
	c, err := r.Revoke(at, by)
	if err != nil {
		return nil, nil, err
	}
	b, err := c.MarshalJSON()
	if err != nil {
		return nil, nil, err
	}
	return c, b, nil
}

// IsStoreError reports whether err is one a Store returns as it is: an
// aais sentinel a caller branches on, or the context's error. Stores wrap
// every other error (a database's) with their name.
func IsStoreError(err error) bool {
	for _, target := range []error{ErrConflict, ErrUnknownRequest, ErrSequenceExhausted, ErrInvalid,
		ErrUnknownRule, ErrRuleInactive, ErrAlreadyVoted, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
