package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
)

// acceptance is what accept wrote: the exchange (created now, or found:
// a retry), and for a call that waits for a human its approval request,
// the signed pending reply and how its submission went.
type acceptance struct {
	x       exchange.Exchange
	created bool
	// keyed: the request carried an idempotency key.
	keyed     bool
	approval  *aais.Request
	pending   json.RawMessage
	sw        submitted
	submitErr error
}

// accept is the step that makes the request the gateway's: one durable
// step (Options.Units) writes the exchange, the record of its reception
// and, when it waits for a human, its approval request and pending state,
// or none of them. An idempotency key or message id reused for another
// request is refused here. A nil acceptance comes with the reply that
// ends the request.
func (g *Gateway) accept(ctx context.Context, a *admission, au *authorized) (*acceptance, Reply) {
	now, from, msgID := a.now, a.from, a.msgID
	acc := &acceptance{}
	x := exchange.Exchange{Sender: from, MessageID: msgID, CorrelationID: msgID, Capability: au.call.Capability,
		ActionDigest: au.digest, State: exchange.Received, TraceID: traceOf(ctx)}
	// Idempotency-Key (or the envelope's idempotency.key): a retry with a
	// new message id gets the first request's answer; the key reused for
	// another request is a conflict (ARSIA Core §10).
	idem, err := arsia.PrepareIdempotency(a.env, a.in.IdempotencyKey, now)
	if err != nil {
		e := &arsia.Error{Code: arsia.CodeInvalidRequest, Description: "Idempotency: " + err.Error()}
		var ae *arsia.Error
		if errors.As(err, &ae) {
			e.Description, e.Details = ae.Description, map[string]any{"reason": ae.Code}
		}
		return nil, g.reject(ctx, a, e)
	}
	if idem != nil {
		x.Idempotency = &exchange.Idempotency{From: idem.Scope.From, To: idem.Scope.To, PayloadType: idem.Scope.PayloadType,
			Key: idem.Scope.Key, Fingerprint: idem.Fingerprint, ExpiresAt: idem.ExpiresAt}
		au.call.IdempotencyKey = idem.Scope.Key
		acc.keyed = true
	}
	// The replay window: the (sender, message id) of an exchange is kept
	// for good, so the same signed bytes never run twice, whatever becomes
	// of an idempotency key; freshness bounds how long they are accepted.
	if a.comp.Oversight == compliance.OversightRequiredBeforeExecution {
		// The approval request is built before anything is written and
		// recorded with the exchange: a gateway that stops before it is
		// submitted finishes the submission (reconcile, or the retry).
		x.ID = exchange.NewID()
		x.ApprovalID = ApprovalOf(x.ID)
		x.Request, acc.approval, err = g.approvalRequest(x, au.call, au.desc, au.action, a.rec.Profile, au.downgraded, spanIDOf(ctx), encryptsReplies(ctx), now)
		if err != nil {
			return nil, g.internal(ctx, from, msgID, now, err)
		}
	} else {
		// Nothing to wait for: recorded already claimed, one write
		// instead of two.
		x.State = exchange.Executing
	}
	if x.ID == "" {
		x.ID = exchange.NewID()
	}
	recorded := a.rec
	recorded.Outcome, recorded.ASCCode = audit.OutcomeAccepted, int(asc.Accepted)
	recorded.Details = map[string]any{"exchange_id": x.ID}
	if au.digest != "" {
		recorded.Details["action_digest"] = au.digest
	}
	for k, v := range a.rec.Details {
		recorded.Details[k] = v
	}
	// A request that waits for approval is answered pending_approval:
	// that reply is signed before anything is written.
	if acc.approval != nil {
		if acc.pending, err = g.pendingReply(ctx, x, acc.approval, now); err != nil {
			return nil, g.internal(ctx, from, msgID, now, err)
		}
	}
	// The reception record is checked and encoded before the unit: what
	// runs inside it is the writes alone.
	prepared, err := g.o.Audit.Prepare(recorded)
	if err != nil {
		return nil, g.internal(ctx, from, msgID, now, err)
	}
	var auditErr error
	// fn may run again (a retried batch): it starts from x0 each time.
	x0 := x
	cctx, endCommit := g.begin(ctx, stageCommit)
	err = g.o.Units.Unit(cctx, func(ctx context.Context) error {
		var err error
		acc.sw, acc.submitErr, auditErr = submitted{}, nil, nil
		x, acc.created, err = g.o.Exchanges.Create(ctx, x0)
		if err != nil || !acc.created {
			return err
		}
		if _, auditErr = g.o.Audit.AppendPrepared(ctx, prepared); auditErr != nil {
			return auditErr
		}
		if acc.approval != nil {
			// Written on their own (no shared transaction), an exchange
			// whose submission fails stays received, for its retry or
			// reconcile.
			acc.sw, acc.submitErr = g.submit(ctx, x, acc.approval, acc.pending, true)
			if !g.atomic() {
				return nil
			}
			if acc.submitErr == nil && acc.sw.ruled {
				// A remembered rule approved it: recorded in the same
				// step, before it runs (apart, advanced records it, and
				// ends the exchange if it cannot).
				if auditErr = g.auditApproval(ctx, au.call, a.rec.Profile, acc.approval.ID, acc.sw.sub.Receipt); auditErr != nil {
					return auditErr
				}
				acc.sw.recorded = true
			}
			return acc.submitErr
		}
		return nil
	})
	endCommit.end()
	acc.x = x
	switch {
	case auditErr != nil:
		// Nothing runs unrecorded. Where the exchange was written on
		// its own, a call that would run now ends failed; one that waits
		// for approval stays received, for its retry or reconcile to
		// move on (ending it here would race them: an approval submitted
		// for an exchange that had ended).
		rep := g.internal(ctx, from, msgID, now, auditErr)
		if x.State == exchange.Executing && !g.atomic() {
			g.abandon(context.WithoutCancel(ctx), x, rep)
		}
		return nil, rep
	case errors.Is(err, exchange.ErrKeyReused):
		return nil, g.reject(ctx, a, &arsia.Error{Code: arsia.CodeConflict, Description: "The idempotency key was already used for another request.",
			Details: map[string]any{"reason": "idempotency_key_reused"}})
	case errors.Is(err, exchange.ErrConflict):
		return nil, g.reject(ctx, a, &arsia.Error{Code: arsia.CodeConflict, Description: "The message id was already used for another request.",
			Details: map[string]any{"reason": "message_id_reused", "field": "/id"}})
	case err != nil:
		return nil, g.internal(ctx, from, msgID, now, err)
	}
	a.rec = recorded
	return acc, Reply{}
}

// oversee is step 6 for an accepted request: a call nobody must approve
// first runs now (its review, if its profile wants one, is queued when it
// has run); one that needs approval waits for it, or runs at once when a
// remembered rule approved it.
func (g *Gateway) oversee(ctx context.Context, a *admission, au *authorized, acc *acceptance) Reply {
	x := acc.x
	if x.State == exchange.Executing {
		// Created claimed: this process runs it (see execute).
		g.running.Store(x.ID, true)
		defer g.running.Delete(x.ID)
	}
	if a.comp.Oversight != compliance.OversightRequiredBeforeExecution {
		return g.execute(ctx, x, au.h, au.call, au.digest, exchange.Executing,
			execMeta{Oversight: string(a.comp.Oversight), Profile: a.rec.Profile, Effective: au.downgraded})
	}
	return g.advanced(ctx, x, acc.approval, acc.pending,
		&inline{req: acc.approval, h: au.h, call: au.call, digest: au.digest, profile: a.rec.Profile, effective: au.downgraded}, acc.sw, acc.submitErr)
}

// retried answers a request recorded before (the same sender and message
// id, or the same idempotency key): what the first attempt was answered,
// or its current state. One left in received by a gateway that stopped
// before submitting its approval is finished now, as reconcile would.
func (g *Gateway) retried(ctx context.Context, x exchange.Exchange, msgID string, keyed bool, now time.Time) Reply {
	if x.State == exchange.Received && len(x.Request) != 0 {
		return g.advance(ctx, x, nil)
	}
	if keyed && len(x.Reply) == 0 {
		// Core §10.4: a request with this key is in progress.
		rep := g.errorReply(ctx, x.Sender, msgID, &arsia.Error{Code: arsia.CodeConflict,
			Description: "The request with this idempotency key is still being processed; retry later.",
			Details:     map[string]any{"reason": "idempotency_in_progress", "exchange_id": x.ID}}, now)
		rep.ExchangeID = x.ID
		return rep
	}
	return g.replyOf(x)
}
