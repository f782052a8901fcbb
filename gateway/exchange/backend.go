package exchange

import (
	"context"
	"encoding/json"
	"time"
)

// Exchanges is the life of received requests: each one recorded once
// per sender and message id (and idempotency key), moved through the
// state machine by compare-and-set, claimed by exactly one runner.
type Exchanges interface {
	Create(ctx context.Context, x Exchange) (Exchange, bool, error)
	Get(ctx context.Context, id string) (Exchange, error)
	BySender(ctx context.Context, sender, messageID string) (Exchange, error)
	Claim(ctx context.Context, id string, from ...State) (Exchange, bool, error)
	Transition(ctx context.Context, id string, from, to State, reply json.RawMessage, status int) (Exchange, bool, error)
	Apply(ctx context.Context, id string, from, to State, c Change) (Exchange, bool, error)
	Waiting(ctx context.Context, states ...State) ([]Exchange, error)
	Interrupted(ctx context.Context) ([]Exchange, error)
	// Heartbeat records that this handle's Instance is alive at now.
	Heartbeat(ctx context.Context, now time.Time) error
	// Abandoned returns the exchanges in executing claimed by another
	// instance whose last heartbeat is before before, oldest first: its
	// process is taken for dead, and whether their actions ran is
	// unknown. An instance that never sent a heartbeat (a build before
	// them) is never taken for dead.
	Abandoned(ctx context.Context, before time.Time) ([]Exchange, error)
	// Instance is this handle's name in ClaimedBy.
	Instance() string
	PurgeIdempotency(ctx context.Context, now time.Time) (int, error)
}

// Reviews are the post-execution reviews a compliance profile demands,
// queued by Apply (Change.Review) and completed by a reviewer.
type Reviews interface {
	Reviews(ctx context.Context, f ReviewFilter) ([]Review, error)
	GetReview(ctx context.Context, exchangeID string) (Review, error)
	CompleteReview(ctx context.Context, exchangeID, reviewer string, v Verdict, justification string) (Review, bool, error)
	MarkTimedOut(ctx context.Context, exchangeID string) (bool, error)
	ReviewCounts(ctx context.Context, now time.Time) (open, overdue int, err error)
}

// Deliveries are the envelopes queued (Change.Deliveries) for a sender's
// callback URL, handed to one deliverer at a time.
type Deliveries interface {
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]Delivery, error)
	Delivered(ctx context.Context, seq int64) error
	DeliveryFailed(ctx context.Context, seq int64, failure string, next time.Time, giveUp bool) error
}

// Steps are the once-only steps the runtime takes on its own about a
// request or a review (a reminder, an escalation, a deadline: package
// notify's Escalator), each named by a key ("apr_1/remind"). Every replica
// sharing the store claims a step before it takes it, so that one takes
// it; a claim not marked done within its lease (the process stopped in
// between) may be claimed again, so a step is taken at least once and,
// unless a process stops between taking it and StepDone, once.
type Steps interface {
	// ClaimStep claims key for this handle's Instance at now. It is true
	// when the step was never claimed, or when it is not done and its
	// last claim is lease old or older; false when it is done or claimed
	// more recently (by any instance).
	ClaimStep(ctx context.Context, key string, now time.Time, lease time.Duration) (bool, error)
	// StepDone records that a claimed step was taken: it is never claimed
	// again.
	StepDone(ctx context.Context, key string, now time.Time) error
	// PurgeSteps deletes the steps claimed before before, and returns how
	// many.
	PurgeSteps(ctx context.Context, before time.Time) (int, error)
}

// MaxStepKey bounds a step's key.
const MaxStepKey = 512

// Backend is an exchange store: what the gateway needs of one.
// store/sqliteexchange (SQLite) and store/pgexchange (PostgreSQL, shared
// by replicas) implement it, and the kit exchangetest holds both to the
// guarantees the package documentation states: atomic compare-and-set
// transitions, exactly one winner of a Claim across processes,
// idempotency keys, decisions, reviews and deliveries written in the same
// transaction as the state they belong to, and nothing acknowledged lost.
type Backend interface {
	Exchanges
	Reviews
	Deliveries
	Steps
	Close() error
}
