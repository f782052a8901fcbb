package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/exchange"
)

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

// sign signs a built envelope and returns its JSON. When ctx carries the
// key of a sender that encrypted its request (withReplyKey), the payload
// is encrypted to it first (ARSIA-Core §5.3: encrypt, then sign); a reply
// that cannot be encrypted is an error, never sent in clear.
func (g *Gateway) sign(ctx context.Context, env *arsia.Envelope, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	m, err := env.Map()
	if err != nil {
		return nil, err
	}
	if k := replyKeyOf(ctx); k != nil {
		if m, err = sig.EncryptPayload(m, k, sig.ECDHES); err != nil {
			return nil, err
		}
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

// deliveries queues env for the sender's callback URL, if it has one.
func (g *Gateway) deliveries(sender string, env json.RawMessage) []exchange.Delivery {
	u, ok := g.policy().Callbacks[sender]
	if !ok || len(env) == 0 {
		return nil
	}
	return []exchange.Delivery{{URL: u, Envelope: env}}
}

// decisionEnvelope is the signed ARSIA approval_decision telling the sender
// how the approval of its request ended: approved, or denied (a denial,
// an expiry, a cancellation, a stale action), with who decided and why.
func (g *Gateway) decisionEnvelope(ctx context.Context, x exchange.Exchange, receipt *aais.Message) (json.RawMessage, error) {
	return g.signDecision(ctx, x, approvalDecision(receipt.Resolution))
}

func (g *Gateway) signDecision(ctx context.Context, x exchange.Exchange, d arsia.ApprovalDecision) (json.RawMessage, error) {
	env, err := arsia.NewApprovalDecision(g.o.Agent, x.Sender, x.MessageID, d, nil, g.build(ctx, g.o.Now()))
	return g.sign(ctx, env, err)
}

// approvalDecision is the approval_decision of res: approved or denied,
// by whom (the reviewer, a remembered rule, or the runtime) and why.
func approvalDecision(res *aais.Resolution) arsia.ApprovalDecision {
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
		d.ApproverID = aais.RulesActor.ID
	}
	if res.Outcome != aais.OutcomeApproved && res.Outcome != aais.OutcomeDenied {
		reason = string(res.Outcome) + ": " + reason
	}
	if r := []rune(reason); len(r) > 512 {
		reason = string(r[:511]) + "…"
	}
	d.Reason = reason
	return d
}

// build returns the options of a reply: its time and the request's trace.
func (g *Gateway) build(ctx context.Context, now time.Time) arsia.BuildOptions {
	o := arsia.BuildOptions{Now: now}
	if t := traceOf(ctx); t != "" {
		o.Context = &arsia.Context{TraceID: t}
	}
	return o
}

func (g *Gateway) buildTTL(ctx context.Context, now time.Time, ttl time.Duration) arsia.BuildOptions {
	o := g.build(ctx, now)
	o.TTL = ttl
	return o
}

// agentStatus puts the ASC status in an ARSIA error's details
// (details.agent_status): its code, unless already set, and the
// provenance — this gateway and the request's trace.
func (g *Gateway) agentStatus(ctx context.Context, e *arsia.Error) {
	e.SetProvenance(asc.Provenance{AgentID: g.o.Agent, TraceID: traceOf(ctx)})
}

// signError signs an ARSIA error to the sender, with its ASC status.
func (g *Gateway) signError(ctx context.Context, to, correlationID string, e *arsia.Error, now time.Time) (json.RawMessage, error) {
	g.agentStatus(ctx, e)
	// ARSIA errors carry printable ASCII: a description that is not (a
	// handler's or validator's words) is escaped, never a reason to
	// answer unsigned.
	e.Description = asciiDescription(e.Description)
	// Nor are missing required details (a validator's not_implemented
	// without supported_versions, a certificate refusal without a reason).
	switch arsia.WireCode(e.Code) {
	case arsia.CodeNotImplemented:
		if _, ok := e.Details["supported_versions"]; !ok {
			e.Details["supported_versions"] = arsia.SupportedVersions().Details()
		}
	case arsia.CodeCertificateInvalid, arsia.CodeCertificateExpired, arsia.CodeKeyMismatch, arsia.CodeCertificateRevoked:
		if _, ok := e.Details["reason"]; !ok {
			e.Details["reason"] = e.Code
		}
	}
	// Nor is a message id that is no UUID: the error correlates to one
	// derived from it (correlationOf), and says so.
	if !arsia.ValidMessageID(strings.ToLower(correlationID)) {
		correlationID = correlationOf(correlationID)
		e.Details["correlation_id_derived_from"] = "/id"
	}
	env, err := arsia.NewError(g.o.Agent, to, correlationID, e, g.build(ctx, now))
	return g.sign(ctx, env, err)
}

// correlationOf is the correlation id of an error answering a message
// whose id is not a UUID v4 (ARSIA correlation ids must be): the first 16
// bytes of the SHA-256 of the id, formatted as a UUID v4 (version and
// variant bits set), so that the sender can compute it too.
func correlationOf(id string) string {
	h := sha256.Sum256([]byte(id))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}
