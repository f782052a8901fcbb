// Package exchangetest is the conformance kit every exchange.Backend runs
// from its own tests:
//
//	func TestConformance(t *testing.T) {
//		exchangetest.Run(t, exchangetest.Backend{
//			New: func(t *testing.T, c exchangetest.Config) exchange.Backend {
//				return open(t, c) // a new, empty store
//			},
//			Reopen: func(t *testing.T, b exchange.Backend, c exchangetest.Config) exchange.Backend {
//				return reopen(t, b, c) // another handle on b's storage
//			},
//		})
//	}
//
// It checks what the gateway relies on, whatever keeps the exchanges: the
// state machine (illegal transitions refused, compare and set, a stale
// transition changing nothing), Create idempotent by (sender, message id)
// and by idempotency key, exactly one winner of concurrent Claims (in
// goroutines and across two handles), the resumer's lists (Waiting,
// Interrupted), decisions recorded once, reviews, callback deliveries in
// order, once-only steps (claimed by one handle of several), durability
// across a restart, cancelled contexts writing nothing,
// and validation (ErrInvalid). What only one implementation has (SQLite
// files and processes, PostgreSQL replicas and triggers) is tested by that
// implementation.
package exchangetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/internal/manualclock"
)

// Config is what the kit asks of a new store or handle.
type Config struct {
	// Instance is the store's Instance (its ClaimedBy); "" lets the
	// implementation choose a random one.
	Instance string
	// Now is the store's clock; nil means time.Now.
	Now func() time.Time
}

// Backend is how the kit makes and reopens the stores it checks.
type Backend struct {
	// New returns a new, empty store configured by c each time it is
	// called (required). The test owns it: close it with t.Cleanup
	// (closing twice must be harmless: some cases close it themselves).
	New func(t *testing.T, c Config) exchange.Backend
	// Reopen returns a second, independent handle, configured by c, on
	// the storage b keeps its state in, as another process or replica,
	// or a restarted one, would open it. b may be open or closed. Nil
	// means the storage does not outlive its handle: the cases about
	// second handles and restarts are then skipped.
	Reopen func(t *testing.T, b exchange.Backend, c Config) exchange.Backend
}

// Start is the instant the kit's clocks start at.
var Start = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Clock is a manual clock (pass its Now as Config.Now): it moves only when
// told to.
type Clock = manualclock.Clock

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return manualclock.New(t) }

// Run runs the conformance kit against the stores b makes.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.New == nil {
		t.Fatal("exchangetest.Backend.New is nil")
	}
	tests := []struct {
		name   string
		fn     func(*testing.T, Backend)
		reopen bool
	}{
		{"StateMachine", testStateMachine, false},
		{"TransitionStale", testTransitionStale, false},
		{"Validation", testValidation, false},
		{"CreateIdempotent", testCreateIdempotent, false},
		{"CreateWithRequest", testCreateWithRequest, true},
		{"CreateConcurrent", testCreateConcurrent, false},
		{"CreateClaimed", testCreateClaimed, false},
		{"ClaimGoroutines", testClaimGoroutines, false},
		{"ClaimTwoHandles", testClaimTwoHandles, true},
		{"CreateTwoHandles", testCreateTwoHandles, true},
		{"Restart", testRestart, true},
		{"Abandoned", testAbandoned, true},
		{"WaitingOrder", testWaitingOrder, false},
		{"CancelledContext", testCancelledContext, false},
		{"IdempotencyKey", testIdempotencyKey, false},
		{"ReleaseKey", testReleaseKey, false},
		{"DecisionRecordedOnce", testDecisionRecordedOnce, false},
		{"Reviews", testReviews, false},
		{"ReviewsConcurrent", testReviewsConcurrent, false},
		{"DeliveriesInOrder", testDeliveriesInOrder, false},
		{"DeliveriesFailedGiveUp", testDeliveriesGiveUp, false},
		{"Steps", testSteps, false},
		{"StepsRace", testStepsRace, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.reopen && b.Reopen == nil {
				t.Skip("the backend cannot be reopened")
			}
			tc.fn(t, b)
		})
	}
}

// Request is a valid new exchange, numbered n: sender agent://a, message
// id msg_n, with an approval id and an action digest.
func Request(n string) exchange.Exchange {
	return exchange.Exchange{Sender: "agent://a", MessageID: "msg_" + n, CorrelationID: "corr_" + n,
		Capability: "fs.write", ApprovalID: "apr_" + n, ActionDigest: "sha256:" + n}
}

// Replies the kit records.
var (
	PendingReply = json.RawMessage(`{"status":"pending_approval"}`)
	FinalReply   = json.RawMessage(`{"status":"done","result":{"ok":true}}`)
)

// Reply is a reply valid for entering state to, nil when none is needed.
func Reply(to exchange.State) (json.RawMessage, int) {
	switch to {
	case exchange.PendingApproval:
		return PendingReply, 202
	case exchange.Done, exchange.Failed:
		return FinalReply, 200
	}
	return nil, 0
}

// Create creates Request(n) and fails the test unless it was created.
func Create(t testing.TB, s exchange.Backend, n string) exchange.Exchange {
	t.Helper()
	x, created, err := s.Create(t.Context(), Request(n))
	if err != nil || !created {
		t.Fatalf("Create %s: created=%v err=%v", n, created, err)
	}
	return x
}

// Move makes the transition from -> to with Reply(to), and fails the test
// unless it succeeded.
func Move(t testing.TB, s exchange.Backend, id string, from, to exchange.State) exchange.Exchange {
	t.Helper()
	r, st := Reply(to)
	x, ok, err := s.Transition(t.Context(), id, from, to, r, st)
	if err != nil || !ok {
		t.Fatalf("Transition %s %s->%s: ok=%v err=%v", id, from, to, ok, err)
	}
	return x
}

// InState creates Request(n) and brings it to state st along legal
// transitions.
func InState(t testing.TB, s exchange.Backend, n string, st exchange.State) exchange.Exchange {
	t.Helper()
	x := Create(t, s, n)
	path := map[exchange.State][]exchange.State{
		exchange.Received:        nil,
		exchange.PendingApproval: {exchange.PendingApproval},
		exchange.Approved:        {exchange.PendingApproval, exchange.Approved},
		exchange.Executing:       {exchange.Executing},
		exchange.Done:            {exchange.Executing, exchange.Done},
		exchange.Failed:          {exchange.Failed},
	}[st]
	cur := exchange.Received
	for _, next := range path {
		x = Move(t, s, x.ID, cur, next)
		cur = next
	}
	if x.State != st {
		t.Fatalf("state %s, want %s", x.State, st)
	}
	return x
}

func name(i int) string { return fmt.Sprint(i) }
