package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
)

// approvalRequest builds the AAIS request for exactly the call that would
// run, and the JSON of an AAIS request message holding it: what Create
// records with the exchange and advance submits.
func (g *Gateway) approvalRequest(x exchange.Exchange, call handler.Call, desc handler.Descriptor,
	action json.RawMessage, profile string, effective []string, spanID string, encrypted bool, now time.Time) (json.RawMessage, *aais.Request, error) {
	ext, err := json.Marshal(ExchangeRef{ExchangeID: x.ID, Sender: call.From, MessageID: call.MessageID,
		PayloadType: call.PayloadType, TraceID: call.TraceID, SpanID: spanID, Profile: profile, IdempotencyKey: call.IdempotencyKey, Effective: effective,
		Explain: call.ExplanationRequired, EncryptedReply: encrypted, Compliance: call.Compliance, Timestamp: call.Timestamp})
	if err != nil {
		return nil, nil, err
	}
	choices := []aais.Choice{
		{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow this call once"},
		{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
	}
	quorum := g.quorumOf(call.Capability, profile, desc)
	exts := aais.Extensions{ExchangeExtension: ext}
	var remembered []aais.Choice
	if quorum.Multi() {
		q, err := quorum.Extension()
		if err != nil {
			return nil, nil, err
		}
		exts[aais.QuorumExtension] = q
		// A remembered approval would stand in for the quorum: none is
		// offered.
	} else if remembered, err = g.rememberChoices(call.Capability, call.From, profile); err != nil {
		return nil, nil, err
	}
	choices = append(choices, remembered...)
	req, err := aais.NewRequest(aais.RequestParams{
		ID:         x.ApprovalID,
		CreatedAt:  now,
		ExpiresAt:  now.Add(g.o.ApprovalTTL),
		Origin:     aais.Origin{Harness: "custos", SessionID: call.From, AgentID: call.From},
		Action:     action,
		Risk:       desc.AAISRisk(),
		Choices:    choices,
		Extensions: exts,
	})
	if err != nil {
		return nil, nil, err
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: now}, req)
	if err != nil {
		return nil, nil, err
	}
	b, err := m.MarshalJSON()
	return b, req, err
}

// rememberChoices are the session and persistent choices a call's
// approval offers: with Options.Remember those its entry allows, each
// bound to the capability (and, persistent, to the sender) with the
// constraints the entry requires; without it, a session choice when
// AllowSession is set.
func (g *Gateway) rememberChoices(capability, sender, profile string) ([]aais.Choice, error) {
	name, _ := json.Marshal(capability)
	if g.o.Remember == nil {
		if !g.o.AllowSession {
			return nil, nil
		}
		return []aais.Choice{{Decision: aais.Approve, Scope: aais.ScopeSession,
			Label:            "Allow " + capability + " from this agent for the session",
			ScopeConstraints: aais.Constraints{aais.ConstraintActionName: name}}}, nil
	}
	entry, _, ok := g.o.Remember.Entry(capability, profile)
	if !ok {
		return nil, nil
	}
	lim := aais.RememberLimits{MaxAge: entry.MaxAge, Required: entry.Constraints}
	var out []aais.Choice
	for _, scope := range []aais.Scope{aais.ScopeSession, aais.ScopePersistent} {
		if !slices.Contains(entry.Scopes, scope) {
			continue
		}
		base := aais.Constraints{aais.ConstraintActionName: name}
		label := "Allow " + capability + " from this agent for the session"
		if scope == aais.ScopePersistent {
			from, _ := json.Marshal(sender)
			base[aais.ConstraintOriginHarness] = json.RawMessage(`"custos"`)
			base[aais.ConstraintOriginSession] = from
			label = "Always allow " + capability + " from this agent, until revoked"
		}
		c, err := lim.Choice(scope, label, "Remember this approval ("+string(scope)+")", base)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// inline is what the receiving request knows of its call: the approval
// request it built (not parsed again from the exchange), and what a call
// a remembered rule approves at once needs to run while the sender waits.
type inline struct {
	req       *aais.Request
	h         handler.Handler
	call      handler.Call
	digest    string
	profile   string
	effective []string
}

// advance moves an exchange in received on: it submits the approval
// request recorded with it (again, if a previous attempt did: submitting
// the same request is idempotent) and records pending_approval with the
// signed pending reply. Every step is idempotent or a compare-and-set, so
// the receiving request, its retry and reconcile may all run it, in any
// process: one of them moves the exchange, the others answer what it
// recorded. With in (the receiving request), a call a remembered rule
// approves in the same write runs at once.
func (g *Gateway) advance(ctx context.Context, x exchange.Exchange, in *inline) Reply {
	now := g.o.Now()
	req, err := recordedRequest(x, in)
	if err != nil {
		return g.internal(ctx, x.Sender, x.MessageID, now, err)
	}
	if ref, ok := ExchangeRefOf(req); ok && ref.EncryptedReply && !encryptsReplies(ctx) {
		// Reconciled: the replies are encrypted as the request was.
		var e *arsia.Error
		if ctx, e = g.resealed(ctx, x.Sender); e != nil {
			rep := g.errorReply(ctx, x.Sender, x.MessageID, e, now)
			if e.Code != arsia.CodeServiceUnavailable {
				g.abandon(ctx, x, rep)
			}
			return rep
		}
	}
	pending, err := g.pendingReply(ctx, x, req, now)
	if err != nil {
		return g.internal(ctx, x.Sender, x.MessageID, now, err)
	}
	var sw submitted
	err = g.o.Units.Unit(ctx, func(ctx context.Context) error {
		var err error
		sw, err = g.submit(ctx, x, req, pending, in != nil)
		return err
	})
	return g.advanced(ctx, x, req, pending, in, sw, err)
}

// pendingReply signs the pending_approval reply of an exchange waiting
// for req, before anything is written.
func (g *Gateway) pendingReply(ctx context.Context, x exchange.Exchange, req *aais.Request, now time.Time) (json.RawMessage, error) {
	env, err := arsia.NewPendingApproval(g.o.Agent, x.Sender, x.MessageID, arsia.PendingApproval{
		ActionID:          req.ID,
		OriginalRequestID: x.MessageID,
		Context:           "A human must approve " + req.Action.Name() + " before it runs. Poll " + g.o.StatusURL(x.ID) + " for the outcome.",
		RiskLevel:         riskOf(req.Risk.Level),
	}, g.buildTTL(withTrace(ctx, x.TraceID), now, max(req.ExpiresAt.Time().Sub(now), time.Second)))
	return g.sign(ctx, env, err)
}

// submitted is what submit wrote.
type submitted struct {
	sub aais.Submission
	// ruled: a remembered rule approved the request in the same write;
	// the exchange stays received, for the caller to run. recorded: the
	// approval's audit record was written in the same step.
	ruled, recorded bool
	// moved is the exchange after the compare-and-set, ok whether this
	// call made it.
	moved exchange.Exchange
	ok    bool
}

// submit is the writes of the step received → pending_approval: the
// approval request (again, if a previous attempt submitted it: that is
// idempotent) and the exchange's compare-and-set, with the signed pending
// reply. It runs inside a unit of work, the receiving request's own or
// advance's; inline: the caller can run a call a rule approves at once.
func (g *Gateway) submit(ctx context.Context, x exchange.Exchange, req *aais.Request, pending json.RawMessage, inline bool) (submitted, error) {
	sub, err := g.o.Authority.Submit(ctx, req)
	if err != nil {
		return submitted{}, err
	}
	if inline && sub.Created && sub.Receipt != nil && sub.Receipt.Resolution.Outcome == aais.OutcomeApproved {
		return submitted{sub: sub, ruled: true}, nil
	}
	moved, ok, err := g.o.Exchanges.Apply(ctx, x.ID, exchange.Received, exchange.PendingApproval,
		exchange.Change{Reply: pending, ReplyStatus: 202, ApprovalID: req.ID, Deadline: req.ExpiresAt.Time()})
	if err != nil {
		return submitted{}, fmt.Errorf("exchange %s: %w", x.ID, err)
	}
	return submitted{sub: sub, moved: moved, ok: ok}, nil
}

// advanced answers the step submit wrote (err: it failed; the exchange
// stays received, for its retry or reconcile).
func (g *Gateway) advanced(ctx context.Context, x exchange.Exchange, req *aais.Request, pending json.RawMessage, in *inline, sw submitted, err error) Reply {
	now := g.o.Now()
	if err != nil {
		return g.internal(ctx, x.Sender, x.MessageID, now, err)
	}
	if sw.ruled {
		// A remembered rule approved it in the same write: record that
		// (unless done in the same step), then run it as received (the
		// sender waits for the answer).
		if sw.recorded {
			return g.execute(ctx, x, in.h, in.call, in.digest, exchange.Received,
				execMeta{Oversight: string(compliance.OversightRequiredBeforeExecution), Profile: in.profile, ApprovalID: req.ID, Effective: in.effective})
		}
		if err := g.auditApproval(ctx, in.call, in.profile, req.ID, sw.sub.Receipt); err != nil {
			rep := g.internal(ctx, x.Sender, x.MessageID, now, err)
			g.abandon(ctx, x, rep)
			return rep
		}
		return g.execute(ctx, x, in.h, in.call, in.digest, exchange.Received,
			execMeta{Oversight: string(compliance.OversightRequiredBeforeExecution), Profile: in.profile, ApprovalID: req.ID, Effective: in.effective})
	}
	if !sw.ok {
		// Moved meanwhile by a retry or reconcile: answer what it
		// recorded (a claim made by a rule's approval has no reply yet).
		return g.replyOf(sw.moved)
	}
	if sw.sub.Receipt != nil {
		// Decided before the exchange recorded that it waits (a reviewer
		// was quicker than a restart): move it on now.
		go func() {
			if err := g.resumeOne(context.WithoutCancel(ctx), x.ID); err != nil {
				g.log(ctx).ErrorContext(ctx, "resuming an exchange", "exchange", x.ID, "err", err)
			}
		}()
	}
	return Reply{Status: 202, Envelope: pending, ExchangeID: sw.moved.ID}
}

// recordedRequest is the approval request of an exchange in received: the
// one the receiving request built, or the one recorded with the exchange.
func recordedRequest(x exchange.Exchange, in *inline) (*aais.Request, error) {
	if in != nil && in.req != nil {
		return in.req, nil
	}
	m, err := aais.Parse(x.Request)
	if err != nil || m.Request == nil || m.Request.ID != x.ApprovalID {
		return nil, fmt.Errorf("exchange %s: its recorded approval request is unreadable: %v", x.ID, err)
	}
	return m.Request, nil
}

// ReconcileAfter is how long an exchange may stay in received before
// reconcile takes it for abandoned (the process that received it stopped
// before submitting its approval); a live request takes milliseconds.
const ReconcileAfter = 10 * time.Second

// reconcile finds the exchanges left in received — by a gateway that
// stopped between recording a request and submitting its approval, or by
// a write that failed — and moves each on (advance); and, unless every,
// the claims of this process whose result could not be recorded and those
// of replicas that stopped (endAbandoned), which it ends with ASC 6005. One received older
// than ReconcileAfter, or any at all when every is set (at start, when this
// process is the only gateway on its store), has no live owner. One
// without a recorded approval request (written by an earlier version) is
// ended with an error telling the sender to send it again under a new
// message id. It returns how many it moved.
func (g *Gateway) reconcile(ctx context.Context, every bool) (int, error) {
	xs, err := g.o.Exchanges.Waiting(ctx, exchange.Received)
	if err != nil {
		return 0, err
	}
	n := 0
	now := g.o.Now()
	for _, x := range xs {
		if !every && now.Sub(x.UpdatedAt) < ReconcileAfter {
			continue
		}
		if _, busy := g.reconciling.LoadOrStore(x.ID, true); busy {
			continue
		}
		func() {
			defer g.reconciling.Delete(x.ID)
			xctx := withTrace(ctx, x.TraceID)
			if len(x.Request) == 0 {
				rep := g.errorReply(xctx, x.Sender, x.MessageID, &arsia.Error{Code: arsia.CodeInternalError,
					Description: "The gateway stopped before this request was processed; nothing ran. Send it again with a new message id."}, now)
				g.abandon(xctx, x, rep)
				n++
				return
			}
			if rep := g.advance(xctx, x, nil); rep.Status < 500 {
				n++
			}
		}()
	}
	if every {
		return n, nil // at start: Recover ends what was executing
	}
	// A claim of this process that no goroutine of it runs any more (the
	// write recording its result failed) would stay executing until a
	// restart: it is ended as Recover would.
	ended, err := g.endAbandoned(ctx)
	n += ended
	if err != nil {
		return n, err
	}
	xs, err = g.o.Exchanges.Interrupted(ctx)
	if err != nil {
		return n, err
	}
	ended, err = g.interruptAll(ctx, xs, "The gateway could not record the outcome of this action; whether it ran is unknown, and it is not run again.",
		func(x exchange.Exchange) bool {
			_, running := g.running.Load(x.ID)
			return x.ClaimedBy == g.o.Exchanges.Instance() && now.Sub(x.UpdatedAt) >= ReconcileAfter && !running
		})
	return n + ended, err
}

func riskOf(level aais.RiskLevel) int {
	switch level {
	case aais.RiskLow:
		return 1
	case aais.RiskMedium:
		return 2
	case aais.RiskHigh:
		return 3
	case aais.RiskCritical:
		return 4
	}
	return 2
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
