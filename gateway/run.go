package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
)

// ExchangeExtension is the AAIS request extension naming the exchange an
// approval belongs to, with what the call needs besides the action.
const ExchangeExtension = "custos.dev/exchange"

// exchangeRef is the value of ExchangeExtension.
type exchangeRef struct {
	ExchangeID  string `json:"exchange_id"`
	Sender      string `json:"sender"`
	MessageID   string `json:"message_id"`
	PayloadType string `json:"payload_type"`
	TraceID     string `json:"trace_id,omitempty"`
	// SpanID is the request's span, sampled, when tracing was on: the
	// parent of the span that resumes the exchange.
	SpanID  string `json:"span_id,omitempty"`
	Profile string `json:"profile,omitempty"`
	// IdempotencyKey is the request's key, forwarded to the handler.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Effective are the capabilities granted when fewer than requested.
	Effective []string `json:"effective_capabilities,omitempty"`
	// Explain: the request's effective profile requires an explanation
	// with the result (handler.Call.ExplanationRequired).
	Explain bool `json:"explanation_required,omitempty"`
}

// execute claims the exchange (from state from; from executing means the
// caller created it claimed), runs the call and records the reply.
// Exactly one caller ever runs a given exchange.
// execMeta is what the audit records of a call carry besides the call.
type execMeta struct {
	Oversight, Profile, ApprovalID string
	// Effective are the granted capabilities of a downgraded request.
	Effective []string
	// Waited says the sender was answered pending_approval: the final
	// reply goes to its callback too.
	Waited bool
	// Details are added to the execution record's details (an edited
	// call's executed_arguments).
	Details map[string]any
}

func (g *Gateway) execute(ctx context.Context, x exchange.Exchange, h handler.Handler, call handler.Call,
	digest string, from exchange.State, meta execMeta) Reply {
	now := g.o.Now()
	var err error
	if from != exchange.Executing {
		var claimed bool
		x, claimed, err = g.o.Exchanges.Claim(ctx, x.ID, from)
		if err != nil {
			return g.internal(ctx, call.From, call.MessageID, now, err)
		}
		if !claimed {
			return g.replyOf(x)
		}
		// Claimed: this process runs it (reconcile leaves it alone; one
		// created claimed is marked by receive).
		g.running.Store(x.ID, true)
		defer g.running.Delete(x.ID)
	}
	rec := audit.Record{Kind: audit.KindExecution, MessageID: call.MessageID, Sender: call.From, Recipient: g.o.Agent,
		Capability: call.Capability, Profile: meta.Profile, Oversight: meta.Oversight, RequestID: meta.ApprovalID, TraceID: call.TraceID,
		Details: map[string]any{"exchange_id": x.ID}}
	for k, v := range meta.Details {
		rec.Details[k] = v
	}
	var res handler.Result
	var runErr error
	if meta.ApprovalID != "" || from != exchange.Executing {
		// Approved: only the action approved runs (a missing digest
		// fails closed in Dispatch).
		rec.Details["action_digest"] = digest
		hctx, st := g.beginHandler(ctx, call)
		res, runErr = handler.Dispatch(hctx, h, call, digest)
		st.end()
	} else {
		hctx, st := g.beginHandler(ctx, call)
		res, runErr = handler.Run(hctx, h, call)
		st.end()
	}
	// What records the call runs whatever became of the request that
	// brought it (a sender that hung up, a gateway shutting down), within
	// its own deadline.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	var reply json.RawMessage
	status := 200
	g.metrics.inc("custos_executions_total", map[bool]string{true: "failed", false: "succeeded"}[runErr != nil])
	if runErr != nil {
		// The handler's ASC status, told to the sender through the one
		// table of docs/arsia-errors.md: what happened and what to do.
		ae := asc.FromError(runErr)
		rec.Outcome, rec.ASCCode = audit.OutcomeFailed, int(ae.Status.Code)
		if errors.Is(runErr, handler.ErrStale) {
			rec.Details["stale"] = true
		}
		e := arsia.FromASC(ae)
		// The sender gets the table's words; the operator the handler's.
		g.log(ctx).WarnContext(ctx, "the handler failed", "exchange", x.ID, "capability", call.Capability,
			"asc_code", int(ae.Status.Code), "err", logText(runErr.Error()))
		reply, err = g.signError(ctx, call.From, call.MessageID, e, now)
		status = e.HTTPStatus()
	} else {
		rec.Outcome, rec.ASCCode = audit.OutcomeSucceeded, int(asc.Success)
		var result any = res.Data
		if meta.Effective != nil {
			// A downgraded response names what was granted (ARSIA Core
			// §4: payload.result.effective_capabilities).
			var m map[string]any
			if json.Unmarshal(res.Data, &m) == nil && m != nil {
				m["effective_capabilities"] = meta.Effective
				result = m
			}
		}
		o := g.build(ctx, now)
		if exp := g.explanation(ctx, call, meta, res, now); exp != nil {
			o.Explanation = exp
			rec.Details["explanation"] = map[bool]string{true: "handler", false: "gateway"}[len(res.Explanation) != 0]
		}
		reply, err = g.sign(arsia.NewResponse(g.o.Agent, call.From, call.MessageID, res.PayloadType, result, o))
	}
	if err != nil {
		return g.internal(ctx, call.From, call.MessageID, now, err)
	}
	final := exchange.Done
	if status >= 400 {
		final = exchange.Failed
	}
	change := exchange.Change{Reply: reply, ReplyStatus: status}
	if due, ok := g.reviewDue(meta.Oversight, now); ok {
		change.Review = &exchange.Review{Mode: meta.Oversight, Profile: meta.Profile, DueAt: due}
	}
	if meta.Waited {
		// The sender was told to wait: the answer goes to its callback too.
		change.Deliveries = g.deliveries(x.Sender, reply)
	}
	// One step: the execution record and the reply commit together
	// (Options.Units).
	prepared, auditErr := g.o.Audit.Prepare(rec)
	if auditErr == nil {
		cctx, st := g.begin(ctx, stageCommit)
		err = g.o.Units.Unit(cctx, func(ctx context.Context) error {
			if _, auditErr = g.o.Audit.AppendPrepared(ctx, prepared); auditErr != nil {
				return auditErr
			}
			_, _, err := g.o.Exchanges.Apply(ctx, x.ID, exchange.Executing, final, change)
			return err
		})
		st.end()
	}
	if auditErr != nil {
		// The action ran; its record failed. Fail closed: the sender is
		// told the result is unknown, never that it succeeded unrecorded.
		g.log(ctx).ErrorContext(ctx, "audit write failed after execution", "exchange", x.ID, "err", auditErr)
		reply, _ = g.signError(ctx, call.From, call.MessageID,
			resultUnknown("The action ran but could not be recorded; its result is withheld."), now)
		status = 500
		change = exchange.Change{Reply: reply, ReplyStatus: status, Review: change.Review}
		if meta.Waited {
			change.Deliveries = g.deliveries(x.Sender, reply)
		}
		_, _, err = g.o.Exchanges.Apply(ctx, x.ID, exchange.Executing, exchange.Failed, change)
	}
	if err != nil {
		// Left executing: reconcile ends it with an unknown result.
		g.log(ctx).ErrorContext(ctx, "recording an exchange's reply", "exchange", x.ID, "err", err)
	}
	return Reply{Status: status, Envelope: reply, ExchangeID: x.ID}
}

func (g *Gateway) auditApproval(ctx context.Context, call handler.Call, profile, requestID string, receipt *aais.Message) error {
	res := receipt.Resolution
	g.metrics.inc("custos_approvals_total", string(res.Outcome))
	rec := audit.Record{Kind: audit.KindApproval, MessageID: call.MessageID, Sender: call.From, Recipient: g.o.Agent,
		Capability: call.Capability, Profile: profile, Oversight: "required_before_execution", RequestID: requestID, ResolutionID: res.ID,
		Outcome: string(res.Outcome), TraceID: call.TraceID}
	if res.Outcome == aais.OutcomeApproved {
		rec.ASCCode = int(asc.Success)
	} else {
		rec.ASCCode = int(asc.PermissionDenied)
	}
	if actor, words, ok := aais.DecidedBy(res); ok {
		rec.Actor = audit.Actor{ID: actor.ID, Type: string(actor.Type), AuthenticatedBy: actor.AuthenticatedBy}
		if words != "" {
			rec.Details = map[string]any{"justification": words}
		}
	} else if rule, ok := res.Extensions[aais.RuleExtension]; ok {
		rec.Actor = audit.Actor{ID: "custos.rules", Type: string(aais.ActorPolicy), AuthenticatedBy: "authority"}
		rec.Details = map[string]any{"rule": json.RawMessage(rule)}
	} else {
		rec.Actor = audit.Actor{ID: aais.RuntimeActor.ID, Type: string(aais.RuntimeActor.Type), AuthenticatedBy: aais.RuntimeActor.AuthenticatedBy}
	}
	if t, ok := aais.TallyOf(receipt); ok {
		// A quorum: every vote, not only the one that resolved it.
		if rec.Details == nil {
			rec.Details = map[string]any{}
		}
		rec.Details["approvals_required"] = t.ApprovalsRequired
		rec.Details["approvers"] = auditVotes(t.Approvals)
		if len(t.Denials) > 0 {
			rec.Details["deniers"] = auditVotes(t.Denials)
		}
	}
	_, err := g.o.Audit.Append(ctx, rec)
	return err
}

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
	var ref exchangeRef
	if err := json.Unmarshal(req.Extensions[ExchangeExtension], &ref); err != nil || ref.ExchangeID != x.ID {
		return fmt.Errorf("approval %s does not name exchange %s", req.ID, x.ID)
	}
	call := handler.Call{Capability: req.Action.Name(), PayloadType: ref.PayloadType, Args: req.Action.Arguments(),
		From: x.Sender, To: g.o.Agent, MessageID: x.MessageID, CorrelationID: x.MessageID, TraceID: ref.TraceID,
		IdempotencyKey: ref.IdempotencyKey, ExplanationRequired: ref.Explain}
	xctx := withTrace(ctx, ref.TraceID)
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
	h, ok := g.o.Handlers[call.Capability]
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
	rep := g.execute(xctx, x, h, call, req.ActionDigest, exchange.Approved, execMeta{Oversight: "required_before_execution", Profile: ref.Profile, ApprovalID: req.ID, Effective: ref.Effective, Waited: true,
		Details: editDetails(edits, call)})
	if g.tracer != nil {
		setStatus(trace.SpanFromContext(xctx), replyStatus(rep))
	}
	return nil
}

// beginHandler starts the handler stage of a call: a client span naming
// the capability when tracing is on.
func (g *Gateway) beginHandler(ctx context.Context, call handler.Call) (context.Context, stageTimer) {
	if g.tracer == nil {
		return g.begin(ctx, stageHandler)
	}
	return g.begin(ctx, stageHandler, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("arsia.capability", call.Capability)))
}

// errMovedMeanwhile undoes a unit of work whose exchange another process
// moved first.
var errMovedMeanwhile = errors.New("gateway: the exchange was moved meanwhile")

// recordApproval records the edits of an approval (supersede.go) and its
// resolution.
func (g *Gateway) recordApproval(ctx context.Context, call handler.Call, profile, requestID string, receipt *aais.Message, edits []edit) error {
	if err := g.auditEdits(ctx, call, profile, edits); err != nil {
		return err
	}
	return g.auditApproval(ctx, call, profile, requestID, receipt)
}

// refuse answers an exchange whose approval was not granted.
func (g *Gateway) refuse(ctx context.Context, x exchange.Exchange, call handler.Call, profile string, receipt *aais.Message, edits []edit) {
	now := g.o.Now()
	res := receipt.Resolution
	code := asc.PermissionDenied
	switch res.Outcome {
	case aais.OutcomeExpired:
		code = asc.Timeout
	case aais.OutcomeCancelled:
		code = asc.Cancelled
	case aais.OutcomeStale:
		code = asc.FailedPrecondition
	}
	e := &arsia.Error{Code: arsia.CodeForbidden, Description: "The action was not approved: " + string(res.Outcome) + ".",
		Details: map[string]any{"reason": "approval_" + string(res.Outcome), "approval_request_id": res.RequestID,
			"resolution_id": res.ID, "agent_status": map[string]any{"code": int(code)}}}
	if g.tracer != nil {
		setStatus(trace.SpanFromContext(ctx), asc.New(code, asc.ScopeTask, true, now))
	}
	reply, err := g.signError(ctx, x.Sender, x.MessageID, e, now)
	if err != nil {
		g.log(ctx).ErrorContext(ctx, "signing a refusal", "exchange", x.ID, "err", err)
		return
	}
	decision, err := g.decisionEnvelope(ctx, x, receipt)
	if err != nil {
		g.log(ctx).ErrorContext(ctx, "signing a decision", "exchange", x.ID, "err", err)
		return
	}
	// One step: the refusal is recorded and the exchange ends, in one
	// unit of work. Recorded first, so that no exchange ends refused with
	// its refusal unrecorded where the two are written apart; on one
	// state file, a process that lost the compare-and-set to another
	// undoes its record.
	err = g.o.Units.Unit(ctx, func(ctx context.Context) error {
		if err := g.recordApproval(ctx, call, profile, res.RequestID, receipt, edits); err != nil {
			return err
		}
		_, ok, err := g.o.Exchanges.Apply(ctx, x.ID, exchange.PendingApproval, exchange.Failed, exchange.Change{
			Reply: reply, ReplyStatus: e.HTTPStatus(), Decision: decision,
			Deliveries: append(g.deliveries(x.Sender, decision), g.deliveries(x.Sender, reply)...)})
		if err == nil && !ok && g.atomic() {
			return errMovedMeanwhile
		}
		return err
	})
	if err != nil && !errors.Is(err, errMovedMeanwhile) {
		g.log(ctx).ErrorContext(ctx, "recording a refusal", "exchange", x.ID, "err", err)
	}
}

// Exchange returns the current reply of an exchange, for the status URL.
func (g *Gateway) Exchange(ctx context.Context, id string) (Reply, error) {
	x, err := g.o.Exchanges.Get(ctx, id)
	if err != nil {
		return Reply{}, err
	}
	return g.replyOf(x), nil
}

func (g *Gateway) replyOf(x exchange.Exchange) Reply {
	if len(x.Reply) == 0 {
		// Accepted, not answered yet (running, or approved and queued).
		return Reply{Status: 202, ExchangeID: x.ID,
			Problem: asc.Errorf(asc.Running, asc.ScopeTask, "The request is being processed.")}
	}
	return Reply{Status: x.ReplyStatus, Envelope: x.Reply, ExchangeID: x.ID}
}

// errorReply signs an ARSIA error to the sender.
func (g *Gateway) errorReply(ctx context.Context, to, correlationID string, e *arsia.Error, now time.Time) Reply {
	b, err := g.signError(ctx, to, correlationID, e, now)
	if err != nil {
		return Reply{Status: e.HTTPStatus(), Problem: e.AsASC()}
	}
	return Reply{Status: e.HTTPStatus(), Envelope: b}
}

// internal answers a failure of the gateway itself: nothing ran.
func (g *Gateway) internal(ctx context.Context, to, correlationID string, now time.Time, err error) Reply {
	g.log(ctx).ErrorContext(ctx, "the gateway failed before running anything", "sender", to, "message_id", correlationID, "err", err)
	return g.errorReply(ctx, to, correlationID, &arsia.Error{Code: arsia.CodeInternalError,
		Description: "The gateway failed before running anything; retry later.", Err: err}, now)
}

// sign signs a built envelope and returns its JSON.
func (g *Gateway) sign(env *arsia.Envelope, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	m, err := env.Map()
	if err != nil {
		return nil, err
	}
	signed, err := sig.Sign(m, g.o.Signer, g.o.KID)
	if err != nil {
		return nil, err
	}
	return json.Marshal(signed)
}

// resultUnknown is the error of a call whose outcome the gateway cannot
// know (ASC 6005 RESULT_STATE_UNKNOWN, side effects unknown: reconcile
// before repeating it), in words of its own.
func resultUnknown(what string) *arsia.Error {
	e := arsia.FromASC(asc.Errorf(asc.ResultStateUnknown, asc.ScopeTask, "%s", what).Envelope)
	e.Description = what + " Check whether it took effect before sending it again."
	return e
}

// recordTimeout bounds the writes that record a call once it ran.
const recordTimeout = 30 * time.Second

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

// Checkpoint signs a checkpoint of the audit chain with the gateway's key
// (audit.Log.Checkpoint): every record up to the last one is then vouched
// for by the gateway, and `custos audit verify` detects a rewrite of them.
// Nothing is written when the chain already ends with a checkpoint.
func (g *Gateway) Checkpoint(ctx context.Context) error {
	_, _, err := g.o.Audit.Checkpoint(ctx, CheckpointSigner{Signer: g.o.Signer, KID: g.o.KID})
	return err
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
	prepared, err := g.o.Audit.Prepare(audit.Record{Kind: audit.KindExecution, MessageID: x.MessageID, Sender: x.Sender,
		Recipient: g.o.Agent, Capability: x.Capability, RequestID: x.ApprovalID, Outcome: audit.OutcomeFailed, TraceID: x.TraceID,
		ASCCode: int(asc.ResultStateUnknown), Details: map[string]any{"exchange_id": x.ID, "interrupted": true}})
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

// explanation is the payload.explanation of a call's response: the
// handler's, when it gave a valid one; else, when the request's profile
// requires one (Call.ExplanationRequired), the gateway's own account of
// why the call ran, which says that it is not the model's (see
// docs/handlers.md, "Explanations"); else nil.
func (g *Gateway) explanation(ctx context.Context, call handler.Call, meta execMeta, res handler.Result, now time.Time) json.RawMessage {
	if len(res.Explanation) != 0 {
		return res.Explanation
	}
	if res.ExplanationIssue != "" {
		g.log(ctx).WarnContext(ctx, "the handler's explanation is not a valid ARSIA explanation; the gateway gives its own",
			"capability", call.Capability, "issue", logText(res.ExplanationIssue))
	}
	if !call.ExplanationRequired {
		return nil
	}
	why := "the sender holds a grant for it"
	inputs := []string{"message:" + call.MessageID, "grant:" + call.From + "/" + call.Capability}
	if meta.ApprovalID != "" {
		why += " and a human reviewer approved exactly this call (approval " + meta.ApprovalID + ")"
		inputs = append(inputs, "approval:"+meta.ApprovalID)
	}
	profile := meta.Profile
	if profile == "" {
		profile = "the one its compliance fields set"
	}
	gave := "gave no explanation of its own"
	if res.ExplanationIssue != "" {
		gave = "gave an explanation that is not a valid ARSIA explanation"
	}
	inputs = append(inputs, "handler:"+call.Capability)
	reasoning := "This account is the Custos gateway's, not the model's: the handler of " + call.Capability + " " + gave +
		". The gateway ran the call for " + call.From + " because " + why + ", under the compliance profile " + profile +
		", and the handler reported success; the result is the handler's, unchanged."
	if n := len([]rune(reasoning)); n > arsia.MaxReasoningLength {
		reasoning = string([]rune(reasoning)[:arsia.MaxReasoningLength])
	}
	// The confidence is the gateway's in its own account, which it reads
	// from its records: certain, not a model's estimate.
	exp, err := json.Marshal(map[string]any{"reasoning": reasoning, "confidence": 1, "inputs_used": inputs,
		"decision_timestamp": arsia.FormatTimestamp(now)})
	if err != nil {
		return nil
	}
	return exp
}

// reviewDue is the deadline of the review an oversight mode demands after
// execution; ok is false when it demands none.
func (g *Gateway) reviewDue(mode string, now time.Time) (time.Time, bool) {
	switch compliance.Oversight(mode) {
	case compliance.OversightRequiredPostExecution:
		return now.Add(g.o.ReviewWithin), true
	case compliance.OversightRequiredWithin24h:
		return now.Add(min(g.o.ReviewWithin, 24*time.Hour)), true
	}
	return time.Time{}, false
}

// deliveries queues env for the sender's callback URL, if it has one.
func (g *Gateway) deliveries(sender string, env json.RawMessage) []exchange.Delivery {
	u, ok := g.o.Callbacks[sender]
	if !ok || len(env) == 0 {
		return nil
	}
	return []exchange.Delivery{{URL: u, Envelope: env}}
}

// decisionEnvelope is the signed ARSIA approval_decision telling the sender
// how the approval of its request ended: approved, or denied (a denial,
// an expiry, a cancellation, a stale action), with who decided and why.
func (g *Gateway) decisionEnvelope(ctx context.Context, x exchange.Exchange, receipt *aais.Message) (json.RawMessage, error) {
	res := receipt.Resolution
	d := arsia.ApprovalDecision{Decision: arsia.DecisionDenied, ApproverID: aais.RuntimeActor.ID}
	if res.Outcome == aais.OutcomeApproved {
		d.Decision = arsia.DecisionApproved
	}
	reason := res.Message
	if actor, words, ok := aais.DecidedBy(res); ok {
		d.ApproverID = actor.ID
		if words != "" {
			reason = words
		}
	} else if _, ok := res.Extensions[aais.RuleExtension]; ok {
		d.ApproverID = "custos.rules"
	}
	if res.Outcome != aais.OutcomeApproved && res.Outcome != aais.OutcomeDenied {
		reason = string(res.Outcome) + ": " + reason
	}
	if r := []rune(reason); len(r) > 512 {
		reason = string(r[:511]) + "…"
	}
	d.Reason = reason
	return g.sign(arsia.NewApprovalDecision(g.o.Agent, x.Sender, x.MessageID, d, nil, g.build(ctx, g.o.Now())))
}

// abandon ends an exchange nothing ran for, after a failure of the gateway
// itself, with the error the sender got. Its idempotency key is released:
// the sender was told to retry, and the retry must not replay the failure.
func (g *Gateway) abandon(ctx context.Context, x exchange.Exchange, rep Reply) {
	if _, _, err := g.o.Exchanges.Apply(ctx, x.ID, x.State, exchange.Failed,
		exchange.Change{Reply: rep.Envelope, ReplyStatus: rep.Status, ReleaseKey: true}); err != nil {
		g.log(ctx).ErrorContext(ctx, "ending an exchange after a failure", "exchange", x.ID, "err", err)
	}
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

// auditVotes is how an approval record lists a quorum's votes.
func auditVotes(votes []aais.Vote) []map[string]any {
	out := make([]map[string]any, 0, len(votes))
	for _, v := range votes {
		e := map[string]any{"id": v.Actor.ID, "type": string(v.Actor.Type), "authenticated_by": v.Actor.AuthenticatedBy,
			"decision_id": v.DecisionID, "decided_at": v.DecidedAt.String()}
		if len(v.Roles) > 0 {
			e["roles"] = v.Roles
		}
		if v.Justification != "" {
			e["justification"] = v.Justification
		}
		out = append(out, e)
	}
	return out
}
