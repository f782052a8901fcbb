package gateway

import (
	"context"
	"encoding/json"
	"errors"
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

// execute claims the exchange (from state from; from executing means the
// caller created it claimed), runs the call and records the reply.
// Exactly one caller ever runs a given exchange.
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
	rec := audit.Execution(g.subjectOf(call, meta.Profile, meta.Oversight), meta.ApprovalID, x.ID)
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
	if runErr != nil {
		g.metrics.inc("custos_executions_total", "failed")
		// The handler's ASC status, told to the sender through the one
		// table of docs/arsia-errors.md: what happened and what to do.
		ae := asc.FromError(runErr)
		rec.Outcome, rec.ASCCode = audit.OutcomeFailed, int(ae.Status.Code)
		if errors.Is(runErr, handler.ErrStale) {
			rec.Details["stale"] = true
		}
		e := arsia.FromASC(ae)
		if pe := (*handler.ARSIAError)(nil); errors.As(runErr, &pe) && pe.E != nil {
			// A handler that speaks ARSIA (state): its error as it is.
			e = pe.E
		}
		// The sender gets the table's words; the operator the handler's.
		g.log(ctx).WarnContext(ctx, "the handler failed", "exchange", x.ID, "capability", call.Capability,
			"asc_code", int(ae.Status.Code), "err", logText(runErr.Error()))
		reply, err = g.signError(ctx, call.From, call.MessageID, e, now)
		status = e.HTTPStatus()
	} else {
		g.metrics.inc("custos_executions_total", "succeeded")
		rec.Outcome, rec.ASCCode = audit.OutcomeSucceeded, int(asc.Success)
		var result any = res.Data
		if res.Null {
			result = json.RawMessage("null")
		}
		for k, v := range res.Audit {
			rec.Details[k] = v
		}
		if meta.Effective != nil && !res.Null {
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
			rec.Details["explanation"] = "gateway"
			if len(res.Explanation) != 0 {
				rec.Details["explanation"] = "handler"
			}
		}
		env, berr := arsia.NewResponse(g.o.Agent, call.From, call.MessageID, res.PayloadType, result, o)
		reply, err = g.sign(ctx, env, berr)
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
	rec := audit.Approval(g.subjectOf(call, profile, string(compliance.OversightRequiredBeforeExecution)), requestID, res.ID)
	rec.Outcome = string(res.Outcome)
	if res.Outcome == aais.OutcomeApproved {
		rec.ASCCode = int(asc.Success)
	} else {
		rec.ASCCode = int(asc.PermissionDenied)
	}
	if actor, words, ok := aais.DecidedBy(res); ok {
		rec.Actor = auditActor(actor)
		if words != "" {
			rec.Details = map[string]any{"justification": words}
		}
	} else if rule, ok := res.Extensions[aais.RuleExtension]; ok {
		rec.Actor = auditActor(aais.RulesActor)
		rec.Details = map[string]any{"rule": json.RawMessage(rule)}
	} else {
		rec.Actor = auditActor(aais.RuntimeActor)
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
			"resolution_id": res.ID, "agent_status": arsia.AgentStatus{Code: code}.Value()}}
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

// subjectOf is what the audit records of call are about.
func (g *Gateway) subjectOf(call handler.Call, profile, oversight string) audit.Subject {
	return audit.Subject{MessageID: call.MessageID, Sender: call.From, Recipient: g.o.Agent, Capability: call.Capability,
		Profile: profile, Oversight: oversight, TraceID: call.TraceID}
}

// subjectOfExchange is what the audit records of exchange x are about.
func (g *Gateway) subjectOfExchange(x exchange.Exchange, profile, oversight string) audit.Subject {
	return audit.Subject{MessageID: x.MessageID, Sender: x.Sender, Recipient: g.o.Agent, Capability: x.Capability,
		Profile: profile, Oversight: oversight, TraceID: x.TraceID}
}

// auditActor is the audit record's actor for an AAIS actor.
func auditActor(a aais.Actor) audit.Actor {
	return audit.Actor{ID: a.ID, Type: string(a.Type), AuthenticatedBy: a.AuthenticatedBy}
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

// recordTimeout bounds the writes that record a call once it ran.
const recordTimeout = 30 * time.Second

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
