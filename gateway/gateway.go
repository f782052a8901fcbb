// Package gateway is the pipeline of custos serve, independent of HTTP: one
// signed ARSIA request in, one signed ARSIA reply out (a response, an error
// or a pending_approval), with every step recorded in the audit log.
//
//	1 decode       strict JSON, size cap (the HTTP adapter checks the media type)
//	2 identity     the sender's key by kid from the trust store; signature
//	3 structure    L1 (JSON Schema), L2 (semantics), compliance rules
//	4 authorize    the recipient is this gateway; the sender holds a grant
//	               for the capability; a handler serves it
//	5 oversight    the effective profile's human_oversight: not_required and
//	               the post-execution modes run now; required_before_execution
//	               creates an AAIS request for exactly the call that would run
//	               and answers pending_approval (202)
//	6 execute      the handler runs the call, after the action digest is
//	               recomputed (handler.Dispatch): a changed call never runs
//	7 record       audit records for the reception, the decision and the
//	               execution; a failed audit write fails the request
//	8 report       every reply carries an ASC status (for errors, in the
//	               ARSIA error's details)
//
// A request waiting for approval is an exchange in the exchange store; Run
// resumes it when the authority records the decision, after a restart too,
// and the approved call runs exactly once (Exchanges.Claim).
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/jcs"
)

// Options configures a Gateway.
type Options struct {
	// Agent is the gateway's agent id; Signer and KID sign its replies.
	Agent  string
	Signer sig.Signer
	KID    string
	// Keys resolves senders' keys; Algorithms is the accepted list
	// (EdDSA, ES256, RS256 when nil).
	Keys       sig.KeySource
	Algorithms []string
	// Grants maps a sender agent id to the capability patterns it may
	// call ("billing.*").
	Grants map[string][]string
	// Handlers runs each capability.
	Handlers map[string]handler.Handler
	// Authority, Exchanges and Audit are the gateway's state.
	Authority *aais.Authority
	Exchanges *exchange.Store
	Audit     *audit.Log
	// Profiles are the compliance profiles (the bundled ones when nil).
	Profiles *compliance.Registry
	// ApprovalTTL is how long a reviewer has (10 minutes when zero).
	ApprovalTTL time.Duration
	// AllowSession offers "approve for this session", limited to the
	// capability and the sender.
	AllowSession bool
	// StatusURL is where a sender polls an exchange (put in
	// pending_approval replies).
	StatusURL func(exchangeID string) string
	// RateLimit bounds each sender's requests (no limit when zero);
	// refused requests get rate_limited (429) with a Retry-After.
	RateLimit RateLimit
	// Poll is how often Run looks for decisions (200 ms when zero).
	Poll time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger receives diagnostics (slog.Default when nil).
	Logger *slog.Logger
}

// Gateway runs the pipeline. It is safe for concurrent use.
type Gateway struct {
	o       Options
	limiter *limiter
	metrics metrics
}

// New checks o and returns a Gateway.
func New(o Options) (*Gateway, error) {
	switch {
	case !arsia.ValidAgentID(o.Agent):
		return nil, fmt.Errorf("gateway: agent %q is not an ARSIA agent id", o.Agent)
	case o.Signer == nil || o.KID == "":
		return nil, errors.New("gateway: no signing key")
	case o.Keys == nil:
		return nil, errors.New("gateway: no trust store")
	case o.Authority == nil || o.Exchanges == nil || o.Audit == nil:
		return nil, errors.New("gateway: the authority, the exchange store and the audit log are required")
	}
	if o.Algorithms == nil {
		o.Algorithms = []string{sig.EdDSA, sig.ES256, sig.RS256}
	}
	if o.Profiles == nil {
		o.Profiles = compliance.Default()
	}
	if o.ApprovalTTL <= 0 {
		o.ApprovalTTL = 10 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StatusURL == nil {
		o.StatusURL = func(id string) string { return "/v1/arsia/exchanges/" + id }
	}
	return &Gateway{o: o, limiter: &limiter{rate: o.RateLimit}}, nil
}

// Reply is what the gateway answers: the HTTP status and the signed ARSIA
// envelope (nil only when no reply can be signed for the sender, then
// Problem is set).
type Reply struct {
	Status     int
	Envelope   json.RawMessage
	ExchangeID string
	// RetryAfter, when set, is how long the sender should wait (429).
	RetryAfter time.Duration
	// Problem is an ASC status for answers that cannot be an ARSIA reply
	// (the body is not an envelope, so there is nobody to answer to).
	Problem *asc.Error
}

// Receive runs the pipeline for one request body.
func (g *Gateway) Receive(ctx context.Context, body []byte) Reply {
	rep := g.receive(ctx, body)
	g.metrics.inc("custos_requests_total", resultLabel(rep))
	return rep
}

// resultLabel names how a request was answered, for the metrics.
func resultLabel(r Reply) string {
	switch {
	case r.Status == 200:
		return "ok"
	case r.Status == 202:
		return "pending_approval"
	case r.Status == 429:
		return "rate_limited"
	case r.Status >= 500:
		return "error"
	}
	return "refused"
}

func (g *Gateway) receive(ctx context.Context, body []byte) Reply {
	now := g.o.Now()
	env, err := sig.DecodeEnvelope(body)
	if err != nil {
		return Reply{Status: 400, Problem: asc.Errorf(asc.InvalidRequest, asc.ScopeTask, "The body is not an ARSIA envelope: %v", err)}
	}
	from, _ := env["from"].(string)
	msgID, _ := env["id"].(string)
	if !arsia.ValidAgentID(from) || msgID == "" {
		return Reply{Status: 400, Problem: asc.Errorf(asc.InvalidRequest, asc.ScopeTask, "The envelope names no valid sender or message id.")}
	}
	rec := audit.Record{Kind: audit.KindReceived, MessageID: msgID, Sender: from, Recipient: g.o.Agent}
	if h, err := compliance.PayloadHash(env); err == nil {
		rec.PayloadHash = "sha256:" + h
	}
	fail := func(e *arsia.Error) Reply {
		rec.Outcome = audit.OutcomeRejected
		rec.ASCCode = int(e.AsASC().Code())
		rec.Details = map[string]any{"arsia_code": e.Code}
		if _, err := g.o.Audit.Append(ctx, rec); err != nil {
			return g.internal(from, msgID, now, err)
		}
		return g.errorReply(from, msgID, e, now)
	}

	// 2 identity
	v, err := sig.Verify(ctx, env, g.o.Keys, sig.VerifyOptions{Algorithms: g.o.Algorithms, Now: g.o.Now})
	if err != nil {
		return fail(&arsia.Error{Code: arsia.CodeUnauthorized, Description: "The signature could not be verified: " + err.Error(), Err: err})
	}
	env = v.Envelope
	// Limited per verified sender: a forged "from" cannot use up another
	// agent's allowance.
	if ok, wait := g.limiter.allow(from, now); !ok {
		rep := fail(&arsia.Error{Code: arsia.CodeRateLimited, Description: "Too many requests from " + from + "; retry later.",
			Details: map[string]any{"retry_after_seconds": math.Ceil(wait.Seconds())}})
		rep.RetryAfter = wait
		return rep
	}
	// 3 structure
	if issues := arsia.ErrorIssues(arsia.Validate(env, arsia.ValidateOptions{Profiles: g.o.Profiles})); len(issues) > 0 {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: issues[0].Message})
	}
	rec.Profile, _ = profileName(env, g.o.Profiles)
	oversight := compliance.EffectiveOversight(env, g.o.Profiles)
	rec.Oversight = string(oversight)
	// 4 authorize
	if to, _ := env["to"].(string); to != g.o.Agent {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: "This gateway is " + g.o.Agent + ", not " + to + "."})
	}
	if intent, _ := env["intent"].(string); intent != string(arsia.IntentRequest) {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: "Only request messages are accepted here."})
	}
	call, err := callOf(env)
	if err != nil {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: err.Error()})
	}
	rec.Capability = call.Capability
	if !arsia.MatchCapabilities(g.o.Grants[from], []string{call.Capability}) {
		return fail(&arsia.Error{Code: arsia.CodeForbidden, Description: "The sender holds no grant for " + call.Capability + ".",
			Details: map[string]any{"reason": "capability_not_granted", "capability": call.Capability}})
	}
	h, ok := g.o.Handlers[call.Capability]
	if !ok {
		return fail(&arsia.Error{Code: arsia.CodeNotFound, Description: "No handler serves " + call.Capability + "."})
	}
	desc, err := h.Describe(call)
	if err != nil {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: err.Error()})
	}
	action, digest, err := handler.Action(call, desc)
	if err != nil {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: err.Error()})
	}

	x := exchange.Exchange{Sender: from, MessageID: msgID, CorrelationID: msgID, Capability: call.Capability,
		ActionDigest: digest, State: exchange.Received}
	if oversight == compliance.OversightRequiredBeforeExecution {
		// The approval's id is known before anything is written, so a
		// crash between the two writes leaves them linked.
		x.ID = exchange.NewID()
		x.ApprovalID = "apr_" + strings.TrimPrefix(x.ID, "exc_")
	}
	x, created, err := g.o.Exchanges.Create(ctx, x)
	if errors.Is(err, exchange.ErrConflict) {
		return fail(&arsia.Error{Code: arsia.CodeConflict, Description: "Message id " + msgID + " was already used for another request."})
	}
	if err != nil {
		return g.internal(from, msgID, now, err)
	}
	if !created {
		// A retried request: answer what the first one got, or its
		// current state.
		return g.replyOf(x)
	}
	rec.Outcome = audit.OutcomeAccepted
	rec.ASCCode = int(asc.Accepted)
	rec.Details = map[string]any{"exchange_id": x.ID, "action_digest": digest}
	if _, err := g.o.Audit.Append(ctx, rec); err != nil {
		// Nothing runs unrecorded: the exchange ends failed.
		rep := g.internal(from, msgID, now, err)
		_, _, _ = g.o.Exchanges.Transition(ctx, x.ID, exchange.Received, exchange.Failed, rep.Envelope, rep.Status)
		return rep
	}

	// 5 oversight
	if oversight != compliance.OversightRequiredBeforeExecution {
		return g.execute(ctx, x, h, call, digest, exchange.Received, execMeta{Oversight: string(oversight), Profile: rec.Profile})
	}
	return g.askApproval(ctx, x, h, call, desc, action, digest, rec.Profile)
}

// callOf reads the handler call out of a verified request.
func callOf(env map[string]any) (handler.Call, error) {
	caps, _ := env["capabilities"].([]any)
	if len(caps) != 1 {
		return handler.Call{}, errors.New("a request must name exactly one capability")
	}
	capability, _ := caps[0].(string)
	payload, _ := env["payload"].(map[string]any)
	if payload == nil {
		return handler.Call{}, errors.New("the payload must be a plain (unencrypted) object")
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
	return c, nil
}

func profileName(env map[string]any, reg *compliance.Registry) (string, bool) {
	p, ok := compliance.EffectiveProfile(env, reg)
	if !ok || p == nil {
		return "", false
	}
	return p.Name, true
}
