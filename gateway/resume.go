package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
)

// Run does the gateway's background work until ctx ends, in three loops:
//
//   - resume: an exchange whose approval was decided runs (once, if
//     approved) or is answered with an error, as soon as the approval
//     stream announces the resolution; a periodic scan also expires
//     approvals past their deadline and catches up after a restart;
//   - reviews: an open post-execution review past its deadline raises an
//     oversight_timeout (an audit record, a warning, a metric), once;
//     expired idempotency keys are purged;
//   - deliveries: approval decisions and final replies are POSTed to the
//     senders' callback URLs, retried with backoff.
//
// Start it once per gateway process; several processes may run it on one
// store.
func (g *Gateway) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	loop := func(name string, every time.Duration, step func(context.Context) error) {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if err := step(ctx); err != nil && ctx.Err() == nil {
				g.log(ctx).ErrorContext(ctx, name, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
	if g.o.ClaimLease > 0 {
		wg.Add(1)
		go loop("recording a heartbeat", g.o.ClaimLease/3, g.heartbeat)
	}
	if g.o.CheckpointEvery > 0 {
		// The first after an interval: at start, the caller signs one
		// before serving (custos serve does), when the chain is quiet.
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(g.o.CheckpointEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if err := g.Checkpoint(ctx); err != nil && ctx.Err() == nil {
					g.log(ctx).ErrorContext(ctx, "signing an audit checkpoint", "err", err)
				}
			}
		}()
	}
	wg.Add(4)
	// Decisions are acted on as the approval stream announces them; the
	// scan catches what the stream cannot (deadlines, a restart, an event
	// missed while reconnecting).
	go loop("following approvals", g.o.Poll, g.follow)
	go loop("resuming exchanges", max(10*g.o.Poll, 2*time.Second), g.resume)
	go loop("checking reviews", max(g.o.Poll, time.Second), g.housekeeping)
	go loop("delivering callbacks", g.o.Poll, g.deliver)
	wg.Wait()
	return ctx.Err()
}

func (g *Gateway) resume(ctx context.Context) error {
	if _, err := g.reconcile(ctx, false); err != nil {
		return err
	}
	waiting, err := g.o.Exchanges.Waiting(ctx, exchange.PendingApproval, exchange.Approved)
	if err != nil {
		return err
	}
	for _, x := range waiting {
		if err := g.resumeOne(ctx, x.ID); err != nil {
			return err
		}
	}
	return nil
}

// resumeOne moves one exchange waiting for its approval on: nothing while
// the approval is pending (it is expired past its deadline), the call run
// once when approved, an error answered otherwise. One exchange is moved
// by one goroutine of a process at a time: the periodic scan and the
// approval stream may both bring it.
func (g *Gateway) resumeOne(ctx context.Context, id string) error {
	if _, busy := g.resuming.LoadOrStore(id, true); busy {
		return nil
	}
	defer g.resuming.Delete(id)
	x, err := g.o.Exchanges.Get(ctx, id)
	if errors.Is(err, exchange.ErrNotFound) {
		return nil // not an exchange of this gateway's
	}
	if err != nil {
		return err
	}
	if x.State != exchange.PendingApproval && x.State != exchange.Approved {
		return nil // finished meanwhile
	}
	if x.State == exchange.Approved && g.o.Now().Sub(x.UpdatedAt) < ReconcileAfter {
		// Approved a moment ago, by a process that is recording and
		// claiming it now (another replica that learnt of the approval at
		// the same time): left to it. Older, its approver stopped before
		// claiming it, and this one takes over.
		return nil
	}
	// The approval, or the request that superseded it when a reviewer
	// edited the arguments (supersede.go).
	st, edits, err := g.approvalChain(ctx, x.ApprovalID)
	if err != nil {
		return err
	}
	if st.Resolution == nil {
		// Only this exchange's approval is swept, not every pending
		// request of the store on every poll.
		if !x.Deadline.IsZero() && !g.o.Now().Before(x.Deadline) {
			if _, err := g.o.Authority.Expire(ctx, st.Request.Event.Request.ID); err != nil {
				return err
			}
		}
		return nil
	}
	req := st.Request.Event.Request
	ref, ok := ExchangeRefOf(req)
	if !ok || ref.ExchangeID != x.ID {
		return fmt.Errorf("approval %s does not name exchange %s", req.ID, x.ID)
	}
	call := handler.Call{Capability: req.Action.Name(), PayloadType: ref.PayloadType, Args: req.Action.Arguments(),
		From: x.Sender, To: g.o.Agent, MessageID: x.MessageID, CorrelationID: x.MessageID, TraceID: ref.TraceID,
		IdempotencyKey: ref.IdempotencyKey, ExplanationRequired: ref.Explain, Compliance: ref.Compliance, Timestamp: ref.Timestamp}
	xctx := withTrace(ctx, ref.TraceID)
	if ref.EncryptedReply {
		// The request was encrypted: so are the decision and the reply.
		var e *arsia.Error
		if xctx, e = g.resealed(xctx, x.Sender); e != nil {
			return g.unsealable(xctx, x, e)
		}
	}
	receipt := st.Resolution.Event
	if x.State == exchange.PendingApproval || x.State == exchange.Approved {
		var span trace.Span
		if xctx, span = g.startResume(xctx, ref, x.ID); span != nil {
			defer span.End()
			span.SetAttributes(attribute.String("arsia.capability", call.Capability))
			resolved(span, req, receipt.Resolution)
		}
	}
	if x.State == exchange.PendingApproval {
		// Decided: how long the reviewer took, and how long the exchange
		// waited for it, up to this process moving it on.
		g.metrics.decided(xctx, req, receipt.Resolution)
		if !x.CreatedAt.IsZero() {
			observe(xctx, g.metrics.stages[stageOversight], max(g.o.Now().Sub(x.CreatedAt), 0))
		}
		if receipt.Resolution.Outcome != aais.OutcomeApproved {
			g.refuse(xctx, x, call, ref.Profile, receipt, edits)
			return nil
		}
		decision, err := g.editedDecisionEnvelope(xctx, x, receipt, edits)
		if err != nil {
			return err
		}
		// One step: the exchange moves to approved and the approval is
		// recorded, in one unit of work. The exchange moves first: of the
		// replicas that learn of the approval at once, the one whose
		// compare-and-set wins records it, and the others do nothing (on
		// one state file, what they would have written is undone).
		moved := false
		err = g.o.Units.Unit(xctx, func(ctx context.Context) error {
			_, ok, err := g.o.Exchanges.Apply(ctx, x.ID, exchange.PendingApproval, exchange.Approved,
				exchange.Change{Decision: decision, Deliveries: g.deliveries(x.Sender, decision)})
			if moved = ok; err != nil || !ok {
				return err
			}
			return g.recordApproval(ctx, call, ref.Profile, req.ID, receipt, edits)
		})
		if err != nil || !moved {
			return err
		}
	} else {
		// Approved by a process that stopped before it claimed the call:
		// the approval is recorded again, just before the claim. If the
		// write fails, the exchange stays approved and a later round tries
		// again: nothing runs with its approval unrecorded. The repeat
		// carries the same approval and resolution ids, and custos audit
		// verify counts it as such.
		if err := g.recordApproval(xctx, call, ref.Profile, req.ID, receipt, edits); err != nil {
			return err
		}
	}
	h, ok := g.policy().Handlers[call.Capability]
	if !ok {
		// Approved, but the configuration no longer serves it.
		now := g.o.Now()
		reply, err := g.signError(xctx, x.Sender, x.MessageID, &arsia.Error{Code: arsia.CodeNotFound,
			Description: "No handler serves " + call.Capability + " any more; the approved call did not run."}, now)
		if err != nil {
			return err
		}
		if _, _, err := g.o.Exchanges.Apply(xctx, x.ID, exchange.Approved, exchange.Failed,
			exchange.Change{Reply: reply, ReplyStatus: 404, Deliveries: g.deliveries(x.Sender, reply)}); err != nil {
			return err
		}
		return nil
	}
	rep := g.execute(xctx, x, h, call, req.ActionDigest, exchange.Approved, execMeta{Oversight: string(compliance.OversightRequiredBeforeExecution), Profile: ref.Profile, ApprovalID: req.ID, Effective: ref.Effective, Waited: true,
		Details: editDetails(edits, call)})
	if g.tracer != nil {
		setStatus(trace.SpanFromContext(xctx), replyStatus(rep))
	}
	return nil
}

// unsealable ends an exchange whose replies cannot be encrypted to the
// sender any more (it withdrew its encryption key while the approval was
// pending): the call does not run, and the sender is told why, in clear
// words that say nothing of the call. A key that cannot be obtained now
// leaves the exchange for a later round.
func (g *Gateway) unsealable(ctx context.Context, x exchange.Exchange, e *arsia.Error) error {
	if e.Code == arsia.CodeServiceUnavailable {
		return e
	}
	reply, err := g.signError(ctx, x.Sender, x.MessageID, e, g.o.Now())
	if err != nil {
		return err
	}
	_, _, err = g.o.Exchanges.Apply(ctx, x.ID, x.State, exchange.Failed,
		exchange.Change{Reply: reply, ReplyStatus: e.HTTPStatus(), Deliveries: g.deliveries(x.Sender, reply)})
	return err
}

// Recover ends the exchanges a previous gateway process left running (it
// stopped between claiming an action and recording its result): whether
// the action ran is unknown, so it is never run again; the sender gets an
// error with ASC 6005 RESULT_STATE_UNKNOWN. Call it once at start, before
// serving. With instance "", every exchange left executing is ended: only
// when this process is the only gateway on its exchange store. Replicas
// sharing a store each pass their own stable instance name (the exchange
// store's Instance) and end only the claims their predecessor made.
// Exchanges left in received are moved on first (with instance "", all of
// them; replicas leave them to the periodic scan, see ReconcileAfter).
func (g *Gateway) Recover(ctx context.Context, instance string) (int, error) {
	if instance == "" {
		if _, err := g.reconcile(ctx, true); err != nil {
			return 0, err
		}
	}
	xs, err := g.o.Exchanges.Interrupted(ctx)
	if err != nil {
		return 0, err
	}
	return g.interruptAll(ctx, xs, "The gateway stopped while running this action; whether it ran is unknown, and it is not run again.",
		func(x exchange.Exchange) bool { return instance == "" || x.ClaimedBy == instance }) // not another replica's, perhaps running now
}

// heartbeat records that this process is alive, for the replicas that
// would otherwise take its claims for abandoned (Options.ClaimLease).
func (g *Gateway) heartbeat(ctx context.Context) error {
	return g.o.Exchanges.Heartbeat(ctx, g.o.Now())
}

// endAbandoned ends the calls other replicas left executing and stopped
// sending heartbeats for (Options.ClaimLease), and returns how many.
func (g *Gateway) endAbandoned(ctx context.Context) (int, error) {
	if g.o.ClaimLease <= 0 {
		return 0, nil
	}
	xs, err := g.o.Exchanges.Abandoned(ctx, g.o.Now().Add(-g.o.ClaimLease))
	if err != nil {
		return 0, err
	}
	for _, x := range xs {
		g.log(ctx).WarnContext(ctx, "ending a call whose replica stopped", "exchange", x.ID, "replica", x.ClaimedBy)
	}
	return g.interruptAll(ctx, xs, "The gateway replica running this action stopped; whether it ran is unknown, and it is not run again.", nil)
}

// interruptAll interrupts the exchanges of xs that take accepts (all, when
// nil), each with why, and returns how many it ended.
func (g *Gateway) interruptAll(ctx context.Context, xs []exchange.Exchange, why string, take func(exchange.Exchange) bool) (int, error) {
	n := 0
	for _, x := range xs {
		if take != nil && !take(x) {
			continue
		}
		ended, err := g.interrupt(ctx, x, why)
		if err != nil {
			return n, err
		}
		if ended {
			n++
		}
	}
	return n, nil
}

// interrupt ends an exchange left executing whose outcome nobody will
// record: audited as interrupted, answered ASC 6005, never run again. The
// record and the end are one unit of work: of the processes that end it
// at once, the one whose compare-and-set wins records it (where the two
// are written apart, the record comes first, so that no exchange ends
// unrecorded).
func (g *Gateway) interrupt(ctx context.Context, x exchange.Exchange, why string) (bool, error) {
	reply, err := g.signError(withTrace(ctx, x.TraceID), x.Sender, x.MessageID, resultUnknown(why), g.o.Now())
	if err != nil {
		return false, err
	}
	rec := audit.Execution(g.subjectOfExchange(x, "", ""), x.ApprovalID, x.ID)
	rec.Outcome, rec.ASCCode = audit.OutcomeFailed, int(asc.ResultStateUnknown)
	rec.Details["interrupted"] = true
	prepared, err := g.o.Audit.Prepare(rec)
	if err != nil {
		return false, err
	}
	ended := false
	err = g.o.Units.Unit(ctx, func(ctx context.Context) error {
		if _, err := g.o.Audit.AppendPrepared(ctx, prepared); err != nil {
			return err
		}
		_, ok, err := g.o.Exchanges.Transition(ctx, x.ID, exchange.Executing, exchange.Failed, reply, 500)
		if ended = ok; err == nil && !ok && g.atomic() {
			return errMovedMeanwhile
		}
		return err
	})
	if errors.Is(err, errMovedMeanwhile) {
		return false, nil
	}
	return ended, err
}

// follow reads the approval stream and moves on the exchange of every
// approval resolved, each in its own goroutine (a slow handler does not
// hold the others up). It returns when ctx ends or the stream fails (Run
// then starts it again).
func (g *Gateway) follow(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	return g.o.Authority.Follow(ctx, 0, false, g.o.Poll, aais.Follower{Message: func(m *aais.Message) error {
		if m.Type != aais.TypeResolved || m.Resolution == nil {
			return nil
		}
		id, ok := ExchangeOfApproval(m.Resolution.RequestID)
		if !ok {
			return nil
		}
		wg.Go(func() {
			if err := g.resumeOne(ctx, id); err != nil && ctx.Err() == nil {
				g.log(ctx).ErrorContext(ctx, "resuming an exchange", "exchange", id, "err", err)
			}
		})
		return nil
	}})
}
