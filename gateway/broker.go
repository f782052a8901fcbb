package gateway

import (
	"context"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/relay"
)

// relayRoute returns the route of a verified request addressed to another
// agent, when the gateway is a Compliance Broker for it. A request for an
// agent without a route is the gateway's, and authorize refuses it (/to).
func (g *Gateway) relayRoute(a *admission) (relay.Route, bool) {
	to, _ := a.env["to"].(string)
	if g.o.Relay == nil || to == g.o.Agent {
		return relay.Route{}, false
	}
	return g.o.Relay.Route(to)
}

// relayed is the broker's pipeline for a request addressed to an agent it
// routes for (ARSIA-Routing §7). The signature verified and the sender is
// within its rate (identify). Then: the message is fresh; the sender's
// key is trusted enough (TrustPolicy, for the capability
// arsiaprotocol.broker.relay) and the sender holds a grant for that
// capability (the gateway relays only for senders it knows, whatever the
// recipient would allow); those refusals are audited as any other. The
// access token, if any, is for the recipient and is neither checked nor
// passed on. The Relayer then checks the relay preconditions and forwards
// the body as received; its relay audit record is written, for a refusal
// as for a forward, before the sender is answered: the recipient's reply
// as it came, or a signed error.
func (g *Gateway) relayed(ctx context.Context, a *admission, who *requestInfo, route relay.Route) Reply {
	a.stages.done()
	a.rec.Recipient, a.rec.Capability = route.Agent, arsia.CapBrokerRelay
	who.capability = arsia.CapBrokerRelay
	a.rec.Profile, _ = profileName(a.env, g.o.Profiles)
	if e := arsia.CheckFreshness(a.env, g.o.Profiles, a.now); e != nil {
		return g.reject(ctx, a, e)
	}
	if trust := a.pol.Trust; trust != nil {
		if e := trust.Check(ctx, TrustQuery{Sender: a.from, KID: a.kid, Capability: arsia.CapBrokerRelay, Profile: a.rec.Profile}); e != nil {
			return g.reject(ctx, a, e)
		}
	}
	if !arsia.MatchCapabilities(a.pol.Grants[a.from], []string{arsia.CapBrokerRelay}) {
		return g.reject(ctx, a, &arsia.Error{Code: arsia.CodeForbidden,
			Description: "This gateway relays only for senders it grants " + arsia.CapBrokerRelay + "; the sender holds no such grant.",
			Details: map[string]any{"reason": "capability_not_granted", "capability": arsia.CapBrokerRelay,
				"required_capabilities": []any{arsia.CapBrokerRelay}}})
	}
	out := g.o.Relay.Relay(ctx, relay.Request{Route: route, Body: a.in.Body, Envelope: a.env, Via: a.in.RelayVia,
		TraceParent: a.in.TraceParent, TraceState: a.in.TraceState, IdempotencyKey: a.in.IdempotencyKey,
		Received: a.now, Now: g.o.Now()})
	// What happened is recorded even when the sender has hung up.
	ctx = context.WithoutCancel(ctx)
	if out.Record == nil {
		// A message that can have no relay record (no residency zone, an
		// id that is no UUID v4) was not relayed: an ordinary refusal.
		return g.reject(ctx, a, out.Err)
	}
	relayedAt, _ := arsia.ParseTimestamp(out.Record.RelayedAt)
	rec := audit.BrokerRelay(audit.Subject{MessageID: a.rec.MessageID, Sender: a.from, Recipient: route.Agent,
		Capability: arsia.CapBrokerRelay, Profile: a.rec.Profile, TraceID: a.rec.TraceID},
		out.Record.Map(), string(out.Record.ForwardingResult), relayedAt)
	rec.PayloadHash = a.rec.PayloadHash
	if out.Err != nil {
		rec.ASCCode = int(out.Err.AsASC().Code())
	}
	if _, err := g.o.Audit.Append(ctx, rec); err != nil {
		return g.internal(ctx, a.from, a.msgID, a.now, err)
	}
	g.metrics.inc("custos_relays_total", string(out.Record.ForwardingResult))
	if out.Err != nil {
		if out.Err.Err != nil {
			g.log(ctx).WarnContext(ctx, "relay failed", "sender", a.from, "message_id", who.msgID, "to", route.Agent,
				"relay_id", out.Record.RelayID, "result", out.Record.ForwardingResult, "err", out.Err.Err)
		}
		return g.errorReply(ctx, a.from, a.msgID, out.Err, g.o.Now())
	}
	return Reply{Status: out.Status, Envelope: out.Body, ContentType: out.ContentType, RetryAfter: out.RetryAfter}
}
