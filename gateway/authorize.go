package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/jcs"
)

// authorized is what authorize established: the call, the handler that
// serves it and what it will do (desc), and, for a call a human must
// approve first, the AAIS action and its digest.
type authorized struct {
	call   handler.Call
	h      handler.Handler
	desc   handler.Descriptor
	action json.RawMessage
	digest string
	// downgraded are the granted capabilities when fewer than requested
	// (nil when all were granted).
	downgraded []string
}

// authorize is steps 4 and 5: the request is for this gateway and is a
// request; the sender's trust level allows the call (TrustPolicy); its
// access token and DPoP proof hold (Authorizer); the sender holds a grant
// for the call (capabilities downgraded to those granted); a handler
// serves it and describes exactly what it will do.
func (g *Gateway) authorize(ctx context.Context, a *admission, who *requestInfo) (*authorized, *arsia.Error) {
	actx := a.stages.next(stageAuthorize)
	if to, _ := a.env["to"].(string); to != g.o.Agent {
		return nil, &arsia.Error{Code: arsia.CodeInvalidRequest, Description: "This gateway is " + g.o.Agent + "; the message is addressed to another agent.",
			Details: map[string]any{"field": "/to"}}
	}
	if intent, _ := a.env["intent"].(string); intent != string(arsia.IntentRequest) {
		return nil, &arsia.Error{Code: arsia.CodeInvalidRequest, Description: "Only request messages are accepted here.", Details: map[string]any{"field": "/intent"}}
	}
	call, err := callOf(a.env)
	if err != nil {
		return nil, &arsia.Error{Code: arsia.CodeInvalidRequest, Description: err.Error()}
	}
	call.ExplanationRequired = a.comp.ExplainabilityRequired
	a.rec.Capability = call.Capability
	who.capability = call.Capability
	if call.TraceID == "" {
		// The trace of the inbound traceparent.
		call.TraceID = traceOf(ctx)
	}
	if trust := a.pol.Trust; trust != nil {
		if e := trust.Check(actx, TrustQuery{Sender: a.from, KID: a.kid, Capability: call.Capability, Profile: a.rec.Profile}); e != nil {
			return nil, e
		}
	}
	requested := stringsOf(a.env["capabilities"])
	scope := a.pol.Grants[a.from]
	if g.o.Authorizer != nil {
		in := a.in
		grant, e := g.o.Authorizer.Authorize(actx, AuthzQuery{Sender: a.from, Recipient: g.o.Agent, Capabilities: requested,
			Authorization: in.Authorization, DPoP: in.DPoP, Method: in.Method, URL: in.URL, Now: a.now})
		if e != nil {
			return nil, e
		}
		a.rec.Details = withDetail(a.rec.Details, "token_id", grant.TokenID)
		a.rec.Details["token_issuer"], a.rec.Details["dpop_bound"] = grant.Issuer, grant.Bound
		scope = intersectScope(scope, grant.Scope)
	}
	// Downgrade: the call runs with the requested capabilities the sender
	// holds; the first one, the call itself, must be among them.
	effective, _ := arsia.DowngradeCapabilities(requested, scope)
	if len(effective) == 0 || effective[0] != call.Capability {
		return nil, &arsia.Error{Code: arsia.CodeForbidden, Description: "The sender holds no grant for " + quoteText(call.Capability) + ".",
			Details: map[string]any{"reason": "capability_not_granted", "capability": call.Capability}}
	}
	if o := a.pol.Oversight[a.from]; len(o) > 0 && arsia.MatchCapabilities(o, []string{call.Capability}) &&
		a.comp.Oversight != compliance.OversightRequiredBeforeExecution {
		// The sender's grant says a human approves each call of it.
		a.comp.Oversight = compliance.OversightRequiredBeforeExecution
		a.rec.Oversight = string(a.comp.Oversight)
		a.rec.Details = withDetail(a.rec.Details, "oversight_by", "sender_grant")
	}
	au := &authorized{call: call}
	if len(effective) < len(requested) {
		au.downgraded = effective
	}
	h, ok := a.pol.Handlers[call.Capability]
	if !ok {
		return nil, &arsia.Error{Code: arsia.CodeNotFound, Description: "No handler serves " + quoteText(call.Capability) + "."}
	}
	au.h = h
	if au.desc, err = h.Describe(call); err != nil {
		return nil, &arsia.Error{Code: arsia.CodeInvalidRequest, Description: err.Error()}
	}
	// The AAIS action and its digest are built only for a call a human
	// must approve: the digest binds the approval to the call that runs.
	if a.comp.Oversight == compliance.OversightRequiredBeforeExecution {
		au.action, au.digest, err = handler.Action(call, au.desc)
	} else {
		err = handler.Check(call, au.desc)
	}
	if err != nil {
		return nil, &arsia.Error{Code: arsia.CodeInvalidRequest, Description: err.Error()}
	}
	a.stages.done()
	return au, nil
}

// callOf reads the handler call out of a verified request.
func callOf(env map[string]any) (handler.Call, error) {
	caps, _ := env["capabilities"].([]any)
	if len(caps) == 0 {
		return handler.Call{}, errors.New("a request must name the capability it calls")
	}
	// The first capability is the call; the others are optional extras
	// the sender may be granted (downgrade).
	capability, _ := caps[0].(string)
	payload, _ := env["payload"].(map[string]any)
	if payload == nil {
		return handler.Call{}, errors.New("the payload must be an object")
	}
	pt, _ := payload["type"].(string)
	args, ok := payload["args"].(map[string]any)
	if !ok {
		return handler.Call{}, errors.New("payload.args must be an object")
	}
	raw, err := jcs.CanonicalizeValue(args)
	if err != nil {
		return handler.Call{}, err
	}
	c := handler.Call{Capability: capability, PayloadType: pt, Args: raw}
	c.From, _ = env["from"].(string)
	c.To, _ = env["to"].(string)
	c.MessageID, _ = env["id"].(string)
	c.CorrelationID = c.MessageID
	if ctx, ok := env["context"].(map[string]any); ok {
		c.TraceID, _ = ctx["trace_id"].(string)
	}
	c.Compliance, _ = env["compliance"].(map[string]any)
	c.Timestamp, _ = env["ts"].(string)
	return c, nil
}

func profileName(env map[string]any, reg *compliance.Registry) (string, bool) {
	p, ok := compliance.EffectiveProfile(env, reg)
	if !ok || p == nil {
		return "", false
	}
	return p.Name, true
}

func stringsOf(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// intersectScope keeps the granted patterns a token's scope names exactly
// (token scopes are exact strings, no wildcards: ARSIA Core §6).
func intersectScope(granted, token []string) []string {
	var out []string
	for _, t := range token {
		if arsia.MatchCapabilities(granted, []string{t}) {
			out = append(out, t)
		}
	}
	return out
}
