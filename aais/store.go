package aais

import (
	"context"
	"errors"
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
)

// RequestRecord is a request as a Store keeps it.
type RequestRecord struct {
	// Event is the approval.requested message. The store assigns its
	// Sequence when it records it; whatever the caller set is ignored.
	Event *Message
	// Fingerprint identifies the request's content (the Authority uses
	// the JCS digest of the request payload). Two records with the same
	// request id and fingerprint are the same request.
	Fingerprint string
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
	Latest uint64
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
	// a different Fingerprint yields ErrConflict.
	CreateRequestIfAbsent(ctx context.Context, rec RequestRecord) (stored RequestRecord, created bool, err error)

	// RequestState returns the request with the given id and its
	// resolution, if any, or ErrUnknownRequest.
	RequestState(ctx context.Context, id string) (RequestState, error)

	// ResolveIfPending atomically records rec as the resolution of the
	// request its receipt names, and appends its event, if that request is
	// still pending. Otherwise it changes nothing and returns the
	// resolution already recorded (resolved false). Exactly one call ever
	// succeeds per request. An unknown request yields ErrUnknownRequest.
	ResolveIfPending(ctx context.Context, rec ResolutionRecord) (stored ResolutionRecord, resolved bool, err error)

	// Pending returns the unresolved requests in the order they were
	// created, together with the sequence of the last event recorded when
	// the list was taken (the snapshot's as_of_sequence). It does not look
	// at expiry: that needs the authority's clock.
	Pending(ctx context.Context) (pending []RequestRecord, asOf uint64, err error)

	// EventsAfter returns the recorded events with a sequence greater than
	// after.
	EventsAfter(ctx context.Context, after uint64) (EventPage, error)
}
