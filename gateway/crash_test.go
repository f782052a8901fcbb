package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store"
	"github.com/custos-runtime/custos/store/memstore"
	"github.com/custos-runtime/custos/store/pgexchange"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

// The tests of this file break the pipeline the way a crash, a failed
// write, a retrying sender or a sender that hangs up would, and check that
// nothing acknowledged is lost and nothing runs twice (docs/gateway.md,
// "What moves each state on").

// faultyExchanges fails the first Apply from received to pending_approval,
// as a gateway killed between submitting an approval and recording that
// its exchange waits would leave it.
type faultyExchanges struct {
	exchange.Backend
	failPending atomic.Int32
}

func (f *faultyExchanges) Apply(ctx context.Context, id string, from, to exchange.State, c exchange.Change) (exchange.Exchange, bool, error) {
	if from == exchange.Received && to == exchange.PendingApproval && f.failPending.Add(-1) >= 0 {
		return exchange.Exchange{}, false, errors.New("disk I/O error (injected)")
	}
	return f.Backend.Apply(ctx, id, from, to, c)
}

func withFaultyExchanges(fails int32) rigOption {
	return func(o *Options, r *pipeRig) {
		f := &faultyExchanges{Backend: o.Exchanges}
		f.failPending.Store(fails)
		o.Exchanges = f
	}
}

// faultyApprovals fails the first submissions of approval requests, as a
// gateway killed between recording an exchange and submitting its approval
// would leave it.
type faultyApprovals struct {
	aais.Store
	failCreate atomic.Int32
}

func (f *faultyApprovals) CreateRequestIfAbsent(ctx context.Context, rec aais.RequestRecord) (aais.RequestRecord, bool, error) {
	if f.failCreate.Add(-1) >= 0 {
		return aais.RequestRecord{}, false, errors.New("database is locked (injected)")
	}
	return f.Store.CreateRequestIfAbsent(ctx, rec)
}

func withFaultyApprovals(fails int32) rigOption {
	return func(o *Options, r *pipeRig) {
		f := &faultyApprovals{Store: memstore.New()}
		f.failCreate.Store(fails)
		auth, err := aais.NewAuthority(f, &aais.AuthorityOptions{Now: r.clk.Now})
		if err != nil {
			panic(err)
		}
		o.Authority, r.auth = auth, auth
	}
}

// withPostgres keeps the rig's exchanges in PostgreSQL (a fresh schema);
// the test skips without CUSTOS_TEST_POSTGRES_DSN.
func withPostgres(t *testing.T) rigOption {
	schema := pgtest.Schema(t)
	return func(o *Options, r *pipeRig) {
		s, err := pgexchange.Open(t.Context(), pgtest.DSN(t), &pgexchange.Options{Schema: schema, Now: r.clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		o.Exchanges, r.xs = s, s
	}
}

// withState keeps the rig's approvals, exchanges and audit log in one
// state file (store.Open), each step in one unit of work, as custos serve
// does by default.
func withState(t *testing.T) rigOption {
	return func(o *Options, r *pipeRig) {
		st, err := store.Open(t.Context(), store.Location{Kind: store.KindSQLite, Path: filepath.Join(t.TempDir(), store.StateFile)},
			&store.StateOptions{Now: r.clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		if r.auth, err = aais.NewAuthority(st.Approvals, &aais.AuthorityOptions{Now: r.clk.Now}); err != nil {
			t.Fatal(err)
		}
		o.Authority, o.Exchanges, o.Audit, o.Units = r.auth, st.Exchanges, audit.New(st.Audit, nil), st
		r.xs, r.ab = st.Exchanges, st.Audit
	}
}

// backends runs f on the rig's SQLite exchange store, on one state file
// with units of work, and on PostgreSQL.
func backends(t *testing.T, f func(t *testing.T, opts ...rigOption)) {
	t.Run("sqlite", func(t *testing.T) { f(t) })
	t.Run("state", func(t *testing.T) { f(t, withState(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, withPostgres(t)) })
}

func (r *pipeRig) state(t *testing.T, msgID string) exchange.Exchange {
	t.Helper()
	x, err := r.xs.BySender(t.Context(), pipeSender, msgID)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Killed after the approval was submitted and before the exchange recorded
// that it waits: the reviewer approves, and the call runs, once.
func TestOrphanAfterSubmitRuns(t *testing.T) {
	for _, how := range []string{"reconcile", "retry", "restart"} {
		t.Run(how, func(t *testing.T) {
			r := newPipeRig(t, withFaultyExchanges(1))
			high := req{compliance: profile("EU-AI-ACT-HIGH-RISK"), args: map[string]any{"text": "orphan"}}
			body, id := r.build(t, high)
			if rep := r.g.Receive(t.Context(), Inbound{Body: body}); rep.Status != 500 {
				t.Fatalf("first attempt: %d, want the injected 500", rep.Status)
			}
			x := r.state(t, id)
			if x.State != exchange.Received {
				t.Fatalf("state %s, want received", x.State)
			}
			// The approval exists: a reviewer sees it and approves it.
			r.decide(t, x.ID, aais.Approve, "")
			switch how {
			case "reconcile":
				step(t, r.g.resume) // too young: a live request may still own it
				if got := r.state(t, id); got.State != exchange.Received {
					t.Fatalf("reconciled a fresh exchange: %s", got.State)
				}
				r.clk.Advance(ReconcileAfter + time.Second)
				step(t, r.g.resume)
			case "retry":
				rep := r.g.Receive(t.Context(), Inbound{Body: body})
				if rep.Status != 202 || rep.ExchangeID != x.ID {
					t.Fatalf("retry: %d %s %v", rep.Status, rep.Envelope, rep.Problem)
				}
				r.verified(t, rep.Envelope)
			case "restart":
				if _, err := r.g.Recover(t.Context(), ""); err != nil {
					t.Fatal(err)
				}
			}
			waitState(t, r, id, exchange.Done)
			if n := r.echo.n.Load(); n != 1 {
				t.Fatalf("the approved call ran %d times", n)
			}
			step(t, r.g.resume)
			if n := r.echo.n.Load(); n != 1 {
				t.Fatalf("the approved call ran %d times after another scan", n)
			}
		})
	}
}

// Killed after the exchange was recorded and before its approval was
// submitted: the sender's retry, or the next start, submits it; nobody is
// told "in progress" until a key expires.
func TestOrphanBeforeSubmitIsSubmitted(t *testing.T) {
	for _, how := range []string{"retry", "retry with key", "restart"} {
		t.Run(how, func(t *testing.T) {
			r := newPipeRig(t, withFaultyApprovals(1))
			high := req{compliance: profile("EU-AI-ACT-HIGH-RISK")}
			body, id := r.build(t, high)
			key := ""
			if how == "retry with key" {
				key = "order-7"
			}
			if rep := r.g.Receive(t.Context(), Inbound{Body: body, IdempotencyKey: key}); rep.Status != 500 {
				t.Fatalf("first attempt: %d, want the injected 500", rep.Status)
			}
			x := r.state(t, id)
			if x.State != exchange.Received {
				t.Fatalf("state %s, want received", x.State)
			}
			if _, err := r.auth.State(t.Context(), x.ApprovalID); !errors.Is(err, aais.ErrUnknownRequest) {
				t.Fatalf("approval before the retry: %v", err)
			}
			if how == "restart" {
				if _, err := r.g.Recover(t.Context(), ""); err != nil {
					t.Fatal(err)
				}
				got := r.state(t, id)
				if got.State != exchange.PendingApproval {
					t.Fatalf("after restart: %s", got.State)
				}
			} else {
				rep := r.g.Receive(t.Context(), Inbound{Body: body, IdempotencyKey: key})
				if rep.Status != 202 || rep.ExchangeID != x.ID {
					t.Fatalf("retry: %d %s %v", rep.Status, rep.Envelope, rep.Problem)
				}
				if m := r.verified(t, rep.Envelope); m["intent"] != "pending_approval" || m["correlation_id"] != id {
					t.Fatalf("retry reply: %s", rep.Envelope)
				}
			}
			st, err := r.auth.State(t.Context(), x.ApprovalID)
			if err != nil || st.Resolution != nil {
				t.Fatalf("approval after the retry: %v %+v", err, st)
			}
			r.decide(t, x.ID, aais.Approve, "")
			step(t, r.g.resume)
			waitState(t, r, id, exchange.Done)
			if n := r.echo.n.Load(); n != 1 {
				t.Fatalf("ran %d times", n)
			}
		})
	}
}

// A retry of the same signed request gets the first reply, in every state;
// another request under the same message id is still refused.
func TestRetryGetsTheFirstReplyInEveryState(t *testing.T) {
	high := profile("EU-AI-ACT-HIGH-RISK")
	type check func(t *testing.T, r *pipeRig, first, again Reply)
	same := func(t *testing.T, r *pipeRig, first, again Reply) {
		t.Helper()
		if again.Status != first.Status || string(again.Envelope) != string(first.Envelope) || again.ExchangeID != first.ExchangeID {
			t.Fatalf("retry: %d %s, want the first reply %d %s", again.Status, again.Envelope, first.Status, first.Envelope)
		}
	}
	final := func(status int, intent string) check {
		return func(t *testing.T, r *pipeRig, first, again Reply) {
			t.Helper()
			x, err := r.xs.Get(t.Context(), first.ExchangeID)
			if err != nil {
				t.Fatal(err)
			}
			if again.Status != status || string(again.Envelope) != string(x.Reply) {
				t.Fatalf("retry: %d %s, want %d and the recorded %s", again.Status, again.Envelope, status, x.Reply)
			}
			if m := r.verified(t, again.Envelope); m["intent"] != intent {
				t.Fatalf("intent %v, want %s", m["intent"], intent)
			}
		}
	}
	tests := []struct {
		name  string
		q     req
		key   string
		after func(t *testing.T, r *pipeRig, first Reply)
		want  check
	}{
		{"pending", req{compliance: high}, "", nil, same},
		{"pending, with the key", req{compliance: high}, "k-1", nil, same},
		{"approved, not yet run", req{compliance: high}, "", func(t *testing.T, r *pipeRig, first Reply) {
			r.decide(t, first.ExchangeID, aais.Approve, "")
			x, err := r.xs.Get(t.Context(), first.ExchangeID)
			if err != nil {
				t.Fatal(err)
			}
			// The approval recorded on the exchange, the call not claimed yet.
			dec := json.RawMessage(`{"intent":"approval_decision"}`)
			if _, ok, err := r.xs.Apply(t.Context(), x.ID, exchange.PendingApproval, exchange.Approved, exchange.Change{Decision: dec}); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}, same},
		{"done", req{compliance: high}, "k-2", func(t *testing.T, r *pipeRig, first Reply) {
			r.decide(t, first.ExchangeID, aais.Approve, "")
			step(t, r.g.resume)
			waitState(t, r, "", exchange.Done, first.ExchangeID)
		}, final(200, "response")},
		{"denied", req{compliance: high}, "", func(t *testing.T, r *pipeRig, first Reply) {
			r.decide(t, first.ExchangeID, aais.Deny, "")
			step(t, r.g.resume)
		}, final(403, "error")},
		{"expired", req{compliance: high}, "", func(t *testing.T, r *pipeRig, first Reply) {
			r.clk.Advance(11 * time.Minute)
			step(t, r.g.resume)              // expires the approval
			step(t, r.g.resume)              // answers the exchange
			r.clk.Advance(-11 * time.Minute) // the retry itself is fresh
		}, final(403, "error")},
		{"interrupted", req{compliance: high}, "", func(t *testing.T, r *pipeRig, first Reply) {
			r.decide(t, first.ExchangeID, aais.Approve, "")
			dec := json.RawMessage(`{"intent":"approval_decision"}`)
			if _, ok, err := r.xs.Apply(t.Context(), first.ExchangeID, exchange.PendingApproval, exchange.Approved, exchange.Change{Decision: dec}); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if _, ok, err := r.xs.Claim(t.Context(), first.ExchangeID, exchange.Approved); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if _, err := r.g.Recover(t.Context(), ""); err != nil { // the claim's process died
				t.Fatal(err)
			}
		}, final(500, "error")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backends(t, func(t *testing.T, opts ...rigOption) {
				r := newPipeRig(t, opts...)
				tc.q.id = uuid.NewString()
				body, _ := r.build(t, tc.q)
				first := r.g.Receive(t.Context(), Inbound{Body: body, IdempotencyKey: tc.key})
				if first.Status != 202 {
					t.Fatalf("first: %d %s %v", first.Status, first.Envelope, first.Problem)
				}
				if tc.after != nil {
					tc.after(t, r, first)
				}
				ran := r.echo.n.Load()
				// The same request again, signed again (a fresh ts, as a sender
				// that retries after a while does), and the same bytes.
				again, _ := r.build(t, tc.q)
				for _, b := range [][]byte{again, body} {
					rep := r.g.Receive(t.Context(), Inbound{Body: b, IdempotencyKey: tc.key})
					tc.want(t, r, first, rep)
				}
				if n := r.echo.n.Load(); n != ran {
					t.Fatalf("a retry ran the call: %d -> %d", ran, n)
				}
				// Another request under the same message id is refused.
				other := tc.q
				other.args = map[string]any{"text": "something else"}
				ob, _ := r.build(t, other)
				if rep := r.g.Receive(t.Context(), Inbound{Body: ob}); rep.Status != 409 {
					t.Fatalf("another request under the same id: %d %s", rep.Status, rep.Envelope)
				}
			})
		})
	}
}

// A sender that hangs up while its call runs changes nothing: the call is
// recorded, audited and answered as if it had stayed.
func TestClientHangUpChangesNothing(t *testing.T) {
	backends(t, func(t *testing.T, opts ...rigOption) {
		r := newPipeRig(t, opts...)
		r.echo.started = make(chan struct{}, 1)
		r.echo.block = make(chan struct{})
		body, id := r.build(t, req{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan Reply, 1)
		go func() { done <- r.g.Receive(ctx, Inbound{Body: body}) }()
		<-r.echo.started
		cancel() // the client is gone
		close(r.echo.block)
		rep := <-done
		if rep.Status != 200 {
			t.Fatalf("reply: %d %s", rep.Status, rep.Envelope)
		}
		x := r.state(t, id)
		if x.State != exchange.Done || string(x.Reply) != string(rep.Envelope) {
			t.Fatalf("exchange %s, reply recorded %v", x.State, len(x.Reply) > 0)
		}
		if recs := r.recordsOf(t, audit.KindExecution, id); len(recs) != 1 || recs[0].Outcome != audit.OutcomeSucceeded {
			t.Fatalf("execution records: %+v", recs)
		}
	})
}

// waitState waits until the exchange of msgID (or the exchange id given)
// is in state want: a resumed call runs in its own goroutine.
func waitState(t *testing.T, r *pipeRig, msgID string, want exchange.State, id ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var x exchange.Exchange
		var err error
		if len(id) > 0 {
			x, err = r.xs.Get(t.Context(), id[0])
		} else {
			x, err = r.xs.BySender(t.Context(), pipeSender, msgID)
		}
		if err == nil && x.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("exchange %s%v: state %s (err %v), want %s", msgID, id, x.State, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// barrierExchanges holds every move from pending_approval to approved until
// two have arrived (or a second passed): two replicas acting on one
// resolution at the same moment.
type barrierExchanges struct {
	exchange.Backend
	arrived atomic.Int32
	both    chan struct{}
}

func (b *barrierExchanges) Apply(ctx context.Context, id string, from, to exchange.State, c exchange.Change) (exchange.Exchange, bool, error) {
	if from == exchange.PendingApproval && to == exchange.Approved {
		if b.arrived.Add(1) == 2 {
			close(b.both)
		}
		select {
		case <-b.both:
		case <-time.After(time.Second):
		}
	}
	return b.Backend.Apply(ctx, id, from, to, c)
}

// Two replicas that learn of one approval at once record it once, and run
// the call once.
func TestReplicasRecordAnApprovalOnce(t *testing.T) {
	bar := &barrierExchanges{both: make(chan struct{})}
	r := newPipeRig(t, func(o *Options, _ *pipeRig) { bar.Backend = o.Exchanges; o.Exchanges = bar })
	rep, id := r.pending(t, req{})
	r.decide(t, rep.ExchangeID, aais.Approve, "")
	other, err := New(r.g.o) // a second replica on the same stores
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, g := range []*Gateway{r.g, other} {
		go func() { errs <- g.resumeOne(t.Context(), rep.ExchangeID) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, r, id, exchange.Done)
	if n := len(r.recordsOf(t, audit.KindApproval, id)); n != 1 {
		t.Fatalf("%d approval records, want 1", n)
	}
	if n := r.echo.n.Load(); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// An exchange approved by another process is left to it while it records
// and claims the call; approved for longer, its approver stopped in
// between, and the exchange is taken over: recorded, then run, once.
func TestApprovedByAStoppedReplicaIsTakenOver(t *testing.T) {
	r := newPipeRig(t)
	rep, id := r.pending(t, req{})
	r.decide(t, rep.ExchangeID, aais.Approve, "")
	dec := json.RawMessage(`{"intent":"approval_decision"}`)
	if _, ok, err := r.xs.Apply(t.Context(), rep.ExchangeID, exchange.PendingApproval, exchange.Approved, exchange.Change{Decision: dec}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	step(t, r.g.resume)
	if n := len(r.recordsOf(t, audit.KindApproval, id)); n != 0 || r.echo.n.Load() != 0 {
		t.Fatalf("took over a fresh approval: %d records, ran %d", n, r.echo.n.Load())
	}
	r.clk.Advance(ReconcileAfter + time.Second)
	step(t, r.g.resume)
	waitState(t, r, id, exchange.Done)
	if n := len(r.recordsOf(t, audit.KindApproval, id)); n != 1 || r.echo.n.Load() != 1 {
		t.Fatalf("after the takeover: %d approval records, ran %d", n, r.echo.n.Load())
	}
}

// failFinal fails the first write that records a call's result, as a disk
// that fails once (not a crash: the process goes on).
type failFinal struct {
	exchange.Backend
	fails atomic.Int32
}

func (f *failFinal) Apply(ctx context.Context, id string, from, to exchange.State, c exchange.Change) (exchange.Exchange, bool, error) {
	if from == exchange.Executing && f.fails.Add(-1) >= 0 {
		return exchange.Exchange{}, false, errors.New("disk I/O error (injected)")
	}
	return f.Backend.Apply(ctx, id, from, to, c)
}

// A claim whose result could not be recorded does not stay executing until
// a restart: the live process ends it with 6005, and the sender's retry
// gets that.
func TestUnrecordedResultIsEndedByTheLiveProcess(t *testing.T) {
	f := &failFinal{}
	f.fails.Store(1)
	r := newPipeRig(t, func(o *Options, _ *pipeRig) { f.Backend = o.Exchanges; o.Exchanges = f })
	body, id := r.build(t, req{})
	if rep := r.g.Receive(t.Context(), Inbound{Body: body}); rep.Status != 200 {
		t.Fatalf("first: %d", rep.Status)
	}
	if x := r.state(t, id); x.State != exchange.Executing {
		t.Fatalf("state %s, want executing after the failed write", x.State)
	}
	step(t, r.g.resume) // too young to tell from a running call
	if x := r.state(t, id); x.State != exchange.Executing {
		t.Fatalf("ended a fresh claim: %s", x.State)
	}
	r.clk.Advance(ReconcileAfter + time.Second)
	step(t, r.g.resume)
	x := r.state(t, id)
	if x.State != exchange.Failed {
		t.Fatalf("state %s, want failed", x.State)
	}
	again := r.g.Receive(t.Context(), Inbound{Body: r.mutate(t, body, true, func(m map[string]any) { m["ts"] = arsia.FormatTimestamp(r.clk.Now()) })})
	m := r.verified(t, again.Envelope)
	if again.Status != 500 || get(m, "payload", "error", "details", "agent_status", "code") != float64(6005) {
		t.Fatalf("retry: %d %s", again.Status, again.Envelope)
	}
	if r.echo.n.Load() != 1 {
		t.Fatalf("ran %d times", r.echo.n.Load())
	}
}

// failFirstAppend fails the first audit write.
type failFirstAppend struct {
	*audit.Memory
	fails atomic.Int32
}

func (f *failFirstAppend) Append(ctx context.Context, build func(*audit.Record) (audit.Record, error)) (audit.Record, error) {
	if f.fails.Add(-1) >= 0 {
		return audit.Record{}, errors.New("disk full (injected)")
	}
	return f.Memory.Append(ctx, build)
}

func (f *failFirstAppend) AppendSealed(ctx context.Context, build func(*audit.Record) (audit.Sealed, error)) (audit.Record, error) {
	if f.fails.Add(-1) >= 0 {
		return audit.Record{}, errors.New("disk full (injected)")
	}
	return f.Memory.AppendSealed(ctx, build)
}

// A request that waits for approval whose reception could not be recorded
// stays received, for its retry (or reconcile) to move on: ending it there
// raced a retry that submitted its approval, which then approved nothing.
func TestUnrecordedReceptionWaitsForItsRetry(t *testing.T) {
	r := newPipeRig(t, func(o *Options, r *pipeRig) {
		f := &failFirstAppend{Memory: r.mem}
		f.fails.Store(1)
		o.Audit = audit.New(f, nil)
	})
	body, id := r.build(t, req{compliance: profile("EU-AI-ACT-HIGH-RISK")})
	if rep := r.g.Receive(t.Context(), Inbound{Body: body}); rep.Status != 500 {
		t.Fatalf("first: %d", rep.Status)
	}
	if x := r.state(t, id); x.State != exchange.Received {
		t.Fatalf("state %s, want received", x.State)
	}
	rep := r.g.Receive(t.Context(), Inbound{Body: body})
	if rep.Status != 202 {
		t.Fatalf("retry: %d %s", rep.Status, rep.Envelope)
	}
	r.decide(t, rep.ExchangeID, aais.Approve, "")
	step(t, r.g.resume)
	waitState(t, r, id, exchange.Done)
	if r.echo.n.Load() != 1 {
		t.Fatalf("ran %d times", r.echo.n.Load())
	}
}

// failingAudit fails the first n audit writes of a backend.
type failingAudit struct {
	audit.Backend
	fails atomic.Int32
}

func (f *failingAudit) Append(ctx context.Context, build func(*audit.Record) (audit.Record, error)) (audit.Record, error) {
	if f.fails.Add(-1) >= 0 {
		return audit.Record{}, errors.New("disk full (injected)")
	}
	return f.Backend.Append(ctx, build)
}

// On one state file, a step is all or nothing: a request whose reception
// record fails leaves no exchange and no approval behind (nothing for
// reconcile to finish), and its retry goes through once.
func TestUnitReceptionAllOrNothing(t *testing.T) {
	for _, prof := range []string{"GDPR-STANDARD", "EU-AI-ACT-HIGH-RISK"} {
		t.Run(prof, func(t *testing.T) {
			r := newPipeRig(t, withState(t), func(o *Options, r *pipeRig) {
				f := &failingAudit{Backend: r.ab}
				f.fails.Store(1)
				o.Audit = audit.New(f, nil)
			})
			body, id := r.build(t, req{compliance: profile(prof)})
			if rep := r.g.Receive(t.Context(), Inbound{Body: body}); rep.Status != 500 {
				t.Fatalf("first: %d", rep.Status)
			}
			r.noExchange(t, id)
			if snap, err := r.auth.Snapshot(t.Context()); err != nil || len(snap.Snapshot.Pending) != 0 {
				t.Fatalf("pending approvals after a failed step: %+v, %v", snap, err)
			}
			rep := r.g.Receive(t.Context(), Inbound{Body: body})
			if prof == "EU-AI-ACT-HIGH-RISK" {
				if rep.Status != 202 {
					t.Fatalf("retry: %d %s", rep.Status, rep.Envelope)
				}
				r.decide(t, rep.ExchangeID, aais.Approve, "")
				step(t, r.g.resume)
				waitState(t, r, id, exchange.Done)
			} else if rep.Status != 200 {
				t.Fatalf("retry: %d %s", rep.Status, rep.Envelope)
			}
			if r.echo.n.Load() != 1 {
				t.Fatalf("ran %d times", r.echo.n.Load())
			}
			if got := r.recordsOf(t, audit.KindReceived, id); len(got) != 1 {
				t.Fatalf("%d reception records, want 1", len(got))
			}
		})
	}
}

// barrierGet holds Get until two callers have read the exchange: both
// then act on the same state.
type barrierGet struct {
	exchange.Backend
	on      atomic.Bool
	arrived atomic.Int32
	both    chan struct{}
}

func (b *barrierGet) Get(ctx context.Context, id string) (exchange.Exchange, error) {
	x, err := b.Backend.Get(ctx, id)
	if !b.on.Load() {
		return x, err
	}
	if b.arrived.Add(1) == 2 {
		close(b.both)
	}
	select {
	case <-b.both:
	case <-time.After(time.Second):
	}
	return x, err
}

// On one state file, two processes that learn of one denial at once
// record it once: the one that loses the compare-and-set undoes its
// record with it (apart, each replica records it, marked as a repeat).
func TestReplicasRecordADenialOnce(t *testing.T) {
	bar := &barrierGet{both: make(chan struct{})}
	r := newPipeRig(t, withState(t), func(o *Options, _ *pipeRig) { bar.Backend = o.Exchanges; o.Exchanges = bar })
	rep, id := r.pending(t, req{})
	r.decide(t, rep.ExchangeID, aais.Deny, "")
	bar.on.Store(true)
	other, err := New(r.g.o)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, g := range []*Gateway{r.g, other} {
		go func() { errs <- g.resumeOne(t.Context(), rep.ExchangeID) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, r, id, exchange.Failed)
	if n := len(r.recordsOf(t, audit.KindApproval, id)); n != 1 {
		t.Fatalf("%d denial records, want 1", n)
	}
	if r.echo.n.Load() != 0 {
		t.Fatal("a denied call ran")
	}
}

// On one state file a call that needs no approval makes two durable
// commits: one before the handler runs (the exchange, claimed, with its
// reception record), one after (the execution record with the reply).
func TestPassThroughCommitsTwice(t *testing.T) {
	var st *store.State
	r := newPipeRig(t, withState(t), func(o *Options, _ *pipeRig) { st = o.Units.(*store.State) })
	const n = 5
	before, _ := st.Commits()
	for range n {
		if rep, _ := r.send(t, req{}, ""); rep.Status != 200 {
			t.Fatalf("status %d %s", rep.Status, rep.Envelope)
		}
	}
	after, _ := st.Commits()
	if got := after - before; got != 2*n {
		t.Fatalf("%d commits for %d calls, want %d", got, n, 2*n)
	}
	if r.echo.n.Load() != n {
		t.Fatalf("ran %d", r.echo.n.Load())
	}
}

// A replica killed while it runs a call stops sending heartbeats; once
// its last one is older than the claim lease, a live replica ends the call
// with 6005 (recorded once, never run again). A claim of a replica whose
// heartbeat is fresh, and one of a replica that never sent any (an older
// build), are left to their owners.
func TestCallOfAStoppedReplicaIsEnded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	var dead, old exchange.Backend
	r := newPipeRig(t, func(o *Options, r *pipeRig) {
		o.ClaimLease = 30 * time.Second
		_ = r.xs.Close()
		open := func(instance string) exchange.Backend {
			xs, err := sqliteexchange.Open(t.Context(), path, &sqliteexchange.Options{Instance: instance, Now: r.clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = xs.Close() })
			return xs
		}
		r.xs = open("gw-live")
		o.Exchanges = r.xs
		dead, old = open("gw-dead"), open("gw-old")
	})
	ctx := t.Context()
	claim := func(xs exchange.Backend, msgID string) {
		t.Helper()
		if _, created, err := xs.Create(ctx, exchange.Exchange{Sender: pipeSender, MessageID: msgID, Capability: "demo.echo", State: exchange.Executing}); err != nil || !created {
			t.Fatal(created, err)
		}
	}
	claim(dead, "m-dead")
	claim(old, "m-old")
	if err := dead.Heartbeat(ctx, r.clk.Now()); err != nil {
		t.Fatal(err)
	}
	step(t, r.g.heartbeat)
	step(t, r.g.resume)
	if x := r.state(t, "m-dead"); x.State != exchange.Executing {
		t.Fatalf("a claim with a fresh heartbeat was ended: %s", x.State)
	}
	r.clk.Advance(31 * time.Second)
	step(t, r.g.heartbeat)
	step(t, r.g.resume)
	x := r.state(t, "m-dead")
	if x.State != exchange.Failed || x.ReplyStatus != 500 {
		t.Fatalf("after the lease: %s %d, want failed 500", x.State, x.ReplyStatus)
	}
	m := r.verified(t, x.Reply)
	if code := get(m, "payload", "error", "details", "agent_status", "code"); code != float64(6005) {
		t.Fatalf("answered %v, want ASC 6005", code)
	}
	if recs := r.recordsOf(t, audit.KindExecution, "m-dead"); len(recs) != 1 || recs[0].ASCCode != 6005 {
		t.Fatalf("execution records: %+v", recs)
	}
	if r.echo.n.Load() != 0 {
		t.Fatal("the abandoned call ran")
	}
	if x := r.state(t, "m-old"); x.State != exchange.Executing {
		t.Fatalf("a claim of a replica without heartbeats was ended: %s", x.State)
	}
	// A second scan, or a second replica, changes nothing more.
	step(t, r.g.resume)
	if recs := r.recordsOf(t, audit.KindExecution, "m-dead"); len(recs) != 1 {
		t.Fatalf("recorded %d times", len(recs))
	}
}
