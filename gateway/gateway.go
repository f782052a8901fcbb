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
//	6 execute      the handler runs the call; an approved one only after its
//	               action digest is recomputed (handler.Dispatch): a changed
//	               call never runs. A call that needs no approval builds no
//	               AAIS action and no digest (handler.Check, handler.Run)
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
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

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
	Exchanges exchange.Backend
	Audit     *audit.Log
	// Units, when set, makes the writes of one pipeline step (the
	// exchange's state, its approval request or resolution, the audit
	// record that describes them) one transaction: store.State on one
	// SQLite file or one PostgreSQL pool. Nil writes each on its own, and
	// the pipeline recovers from a crash between them (reconcile).
	Units UnitOfWork
	// Profiles are the compliance profiles (the bundled ones when nil).
	Profiles *compliance.Registry
	// ApprovalTTL is how long a reviewer has (10 minutes when zero).
	ApprovalTTL time.Duration
	// AllowSession offers "approve for this session", limited to the
	// capability and the sender.
	AllowSession bool
	// Quorums say which calls need several approvals (M-of-N, two-person
	// rules); see QuorumRule. A call needs the largest ApprovalsRequired
	// of the rules that match it and of its descriptor's
	// RequiredApprovals.
	Quorums []QuorumRule
	// StatusURL is where a sender polls an exchange (put in
	// pending_approval replies).
	StatusURL func(exchangeID string) string
	// Trust, when set, decides whether a verified sender's key is trusted
	// enough for the call (certificate trust levels, revocation).
	Trust TrustPolicy
	// Authorizer, when set, checks the access token (bearer or DPoP) of
	// every request; its scope bounds the capabilities granted.
	Authorizer Authorizer
	// RateLimit bounds each sender's requests (no limit when zero);
	// refused requests get rate_limited (429) with a Retry-After.
	RateLimit RateLimit
	// Limiter, when set, replaces the in-process limiter RateLimit
	// configures (a shared one for several replicas).
	Limiter RateLimiter
	// Callbacks maps a sender to the URL the gateway POSTs its
	// approval_decision and final reply to, once an approval resolves
	// (the status URL serves them too).
	Callbacks map[string]string
	// ReviewWithin is the deadline of the review required_post_execution
	// demands (24 h when zero); required_within_24h is never later than
	// 24 h.
	ReviewWithin time.Duration
	// Client delivers callbacks (a client with a 10 s timeout that
	// follows no redirects when nil).
	Client *http.Client
	// Poll is how often Run looks for decisions (200 ms when zero).
	Poll time.Duration
	// ClaimLease, when set, is how long the claims of a replica sharing
	// the exchange store outlive its last heartbeat: Run records this
	// process's heartbeat every third of it, and ends the calls another
	// replica left executing once that replica's heartbeat is older (it
	// was killed, or lost its host), answered ASC 6005 and never run
	// again. Zero sends no heartbeats and ends no other process's claims:
	// one gateway process per store, which Recover covers at start.
	ClaimLease time.Duration
	// CheckpointEvery, when set, is how often Run signs a checkpoint of
	// the audit chain with the gateway's key (audit.Log.Checkpoint), when
	// records were added since the last one; Checkpoint signs one at
	// once (at shutdown, say).
	CheckpointEvery time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger receives diagnostics (slog.Default when nil).
	Logger *slog.Logger
	// Tracer, when set, traces every request: a span per request, per
	// stage and per handler call, propagated to the upstreams (W3C
	// traceparent, MCP _meta). Nil traces nothing, at no cost.
	Tracer trace.TracerProvider
	// Metrics is the registry the gateway registers its metrics on (one
	// of its own, with the Go runtime and process collectors, when nil);
	// Gateway.Metrics returns it.
	Metrics *prometheus.Registry
}

// UnitOfWork runs fn so that every write of the gateway's stores it makes
// with fn's context commits together, or none does. fn may run more than
// once (a retried transaction): it only reads and writes the stores.
type UnitOfWork interface {
	Unit(ctx context.Context, fn func(ctx context.Context) error) error
	// Atomic reports whether Unit commits the writes together; false
	// means each write commits on its own, as without a unit.
	Atomic() bool
}

// separate is the UnitOfWork of stores that share no transaction.
type separate struct{}

func (separate) Unit(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }

func (separate) Atomic() bool { return false }

// atomic reports whether a unit of work commits its writes together.
func (g *Gateway) atomic() bool { return g.o.Units.Atomic() }

// Gateway runs the pipeline. It is safe for concurrent use.
type Gateway struct {
	o       Options
	limiter RateLimiter
	// lastPurge is when housekeeping last purged idempotency keys (Unix
	// ns).
	lastPurge atomic.Int64
	// resuming holds the ids of the exchanges a goroutine of this process
	// is moving on (resumeOne).
	resuming sync.Map
	// reconciling holds the ids of the exchanges in received a goroutine
	// of this process is advancing (reconcile). Apart from resuming: an
	// advance that finds its approval decided already resumes the
	// exchange at once, which a marker shared with reconcile would refuse.
	reconciling sync.Map
	// running holds the ids of the exchanges claimed by this process
	// whose call a goroutine of it is running or recording.
	running sync.Map
	metrics metrics
	// tracer is nil when tracing is off.
	tracer trace.Tracer
	// logSample counts unauthenticated refusals, for sampled logging.
	logSample atomic.Uint64
}

// DefaultClaimLease is the ClaimLease of replicas sharing a store (custos
// serve on PostgreSQL): the calls of a replica that stopped are ended
// within about 45 s (30 s after its last heartbeat, sent every 10 s,
// seen by the next scan).
const DefaultClaimLease = 30 * time.Second

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
	if err := checkQuorums(o.Quorums); err != nil {
		return nil, err
	}
	if o.Algorithms == nil {
		o.Algorithms = []string{sig.EdDSA, sig.ES256, sig.RS256}
	}
	if o.Units == nil {
		o.Units = separate{}
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
	if o.ReviewWithin <= 0 {
		o.ReviewWithin = 24 * time.Hour
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	for sender, u := range o.Callbacks {
		if err := exchange.CheckCallbackURL(u); err != nil {
			return nil, fmt.Errorf("gateway: callback of %s: %w", sender, err)
		}
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
	lim := o.Limiter
	if lim == nil {
		lim = NewMemoryRateLimiter(o.RateLimit)
	}
	g := &Gateway{o: o, limiter: lim}
	if o.Tracer != nil {
		g.tracer = o.Tracer.Tracer(tracerName)
	}
	var err error
	if g.metrics, err = newMetrics(g, o.Metrics); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	return g, nil
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

// Inbound is one request as the transport received it.
type Inbound struct {
	// Body is the ARSIA envelope.
	Body []byte
	// Authorization and DPoP are the HTTP headers of those names ("" when
	// absent).
	Authorization, DPoP string
	// IdempotencyKey is the Idempotency-Key header ("" when absent); it
	// wins over the envelope's idempotency.key.
	IdempotencyKey string
	// Method and URL are the HTTP method and the absolute URL the request
	// was sent to (DPoP's htm and htu).
	Method, URL string
	// TraceParent and TraceState are the W3C Trace Context headers ("" when
	// absent): the request's span is their child, and its trace id the
	// request's when the envelope names none.
	TraceParent, TraceState string
}

// TrustPolicy decides whether a sender whose signature verified may make a
// call: certificate trust levels, revoked keys.
type TrustPolicy interface {
	// Check returns nil, or the ARSIA error to answer (certificate_*,
	// key_mismatch, forbidden for a trust level below the minimum).
	Check(ctx context.Context, q TrustQuery) *arsia.Error
}

// TrustQuery is what a TrustPolicy decides on.
type TrustQuery struct {
	// Sender is the verified "from"; KID the key that signed.
	Sender, KID string
	// Capability is the call; Profile the effective compliance profile
	// ("" when none).
	Capability, Profile string
}

// Authorizer checks the access token that accompanies a request.
type Authorizer interface {
	// Authorize returns the token's grant, or the ARSIA error to answer
	// (unauthorized for a missing, invalid, expired or replayed token or
	// proof).
	Authorize(ctx context.Context, q AuthzQuery) (*Grant, *arsia.Error)
}

// AuthzQuery is what an Authorizer decides on.
type AuthzQuery struct {
	// Sender and Recipient are the envelope's from and to (the token's
	// sub and aud).
	Sender, Recipient string
	// Capabilities are the ones requested, in request order.
	Capabilities []string
	// Authorization, DPoP, Method and URL come from the transport.
	Authorization, DPoP, Method, URL string
	Now                              time.Time
}

// Grant is what a valid access token allows.
type Grant struct {
	// Scope are the capabilities the token covers (exact strings).
	Scope []string
	// TokenID is the token's jti, Issuer its iss; Bound says a DPoP
	// proof bound it to the sender's key.
	TokenID, Issuer string
	Bound           bool
}

// Receive runs the pipeline for one request.
func (g *Gateway) Receive(ctx context.Context, in Inbound) Reply {
	start := time.Now()
	var who requestInfo
	rep := g.receive(ctx, in, start, &who)
	result := resultLabel(rep)
	g.metrics.inc("custos_requests_total", result)
	if who.span != nil {
		observe(trace.ContextWithSpan(ctx, who.span), g.metrics.latency.WithLabelValues(result, g.metrics.sender(&who)), time.Since(start))
		g.endRequest(who.span, rep, result, &who)
	} else {
		observe(withTrace(ctx, who.trace), g.metrics.latency.WithLabelValues(result, g.metrics.sender(&who)), time.Since(start))
	}
	if g.o.Logger.Enabled(ctx, slog.LevelInfo) {
		attrs := []slog.Attr{slog.Int("status", rep.Status), slog.String("result", result),
			slog.Duration("took", time.Since(start))}
		if !who.verified {
			// Unauthenticated traffic is counted, and logged sampled
			// (unauthenticated), not a line each.
			return rep
		}
		var spanID string
		if who.span != nil && who.span.SpanContext().TraceID().String() == who.trace {
			spanID = who.span.SpanContext().SpanID().String()
		}
		for _, a := range [][2]string{{"sender", who.from}, {"message_id", who.msgID}, {"exchange", rep.ExchangeID}, {"trace_id", who.trace}, {"span_id", spanID}} {
			if a[1] != "" {
				attrs = append(attrs, slog.String(a[0], a[1]))
			}
		}
		g.o.Logger.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
	}
	return rep
}

// requestInfo is what the request log says of a request: the claimed
// sender and message id, bounded and escaped (logText), and whether the
// signature verified.
type requestInfo struct {
	from, msgID, trace string
	verified           bool
	// agent is the verified sender's agent id (the metrics' sender label
	// when the configuration names it); capability the call's.
	agent, capability string
	// span is the request's span (nil when tracing is off).
	span trace.Span
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

func (g *Gateway) receive(ctx context.Context, in Inbound, start time.Time, who *requestInfo) Reply {
	now := g.o.Now()
	env, err := sig.DecodeEnvelope(in.Body)
	if err == nil {
		ctx = withTrace(ctx, envelopeTrace(env))
	}
	ctx = g.startRequest(ctx, in, start, who)
	if err != nil {
		// The decoder's words may quote the body: none of it goes back.
		g.metrics.inc("custos_unauthenticated_total", "malformed")
		return Reply{Status: 400, Problem: asc.Errorf(asc.InvalidRequest, asc.ScopeTask,
			"The body is not an ARSIA envelope (strict JSON, one object, no duplicate keys).")}
	}
	from, _ := env["from"].(string)
	msgID, _ := env["id"].(string)
	who.from, who.msgID, who.trace = logText(from), logText(msgID), traceOf(ctx)
	if !arsia.ValidAgentID(from) {
		g.metrics.inc("custos_unauthenticated_total", "malformed")
		return Reply{Status: 400, Problem: asc.Errorf(asc.InvalidRequest, asc.ScopeTask, "The envelope names no valid sender.")}
	}

	// 2 identity: until the signature verifies, the request is nobody's.
	// Nothing durable is written for it, and the answer is neither signed
	// nor addressed to the claimed sender, nor says which check failed
	// (unknown key, bad signature, revoked key): see docs/security.md.
	stages := stageClock{g: g, ctx: ctx}
	defer stages.done()
	v, err := sig.Verify(stages.next(stageVerify), env, g.o.Keys, sig.VerifyOptions{Algorithms: g.o.Algorithms, Now: g.o.Now})
	stages.done()
	if err != nil {
		return g.unauthenticated(ctx, who, err)
	}
	env = v.Envelope
	who.verified, who.agent = true, from
	if msgID == "" {
		return g.errorReply(ctx, from, msgID, &arsia.Error{Code: arsia.CodeInvalidRequest, Description: "The message has no id.",
			Details: map[string]any{"field": "/id"}}, now)
	}
	// Limited per verified sender: a forged "from" cannot use up another
	// agent's allowance. A refusal is counted, not audited.
	ok, wait, err := g.limiter.Allow(ctx, from, now)
	if err != nil {
		return g.errorReply(ctx, from, msgID, &arsia.Error{Code: arsia.CodeServiceUnavailable, Description: "The rate limiter is unavailable; retry later.", Err: err}, now)
	}
	if !ok {
		rep := g.errorReply(ctx, from, msgID, &arsia.Error{Code: arsia.CodeRateLimited, Description: "Too many requests from this sender; retry later.",
			Details: map[string]any{"retry_after_seconds": math.Ceil(wait.Seconds())}}, now)
		rep.RetryAfter = wait
		return rep
	}

	// The message id is bounded here: validation, which bounds it, comes
	// after freshness.
	rec := audit.Record{Kind: audit.KindReceived, MessageID: cut(msgID, maxLogged), Sender: from, Recipient: g.o.Agent, TraceID: traceOf(ctx)}
	if h, err := compliance.PayloadHash(env); err == nil {
		rec.PayloadHash = "sha256:" + h
	}
	fail := func(e *arsia.Error) Reply {
		stages.done()
		rec.Outcome = audit.OutcomeRejected
		rec.ASCCode = int(e.AsASC().Code())
		if rec.Details == nil {
			rec.Details = map[string]any{}
		}
		rec.Details["arsia_code"] = e.Code
		if _, err := g.o.Audit.Append(ctx, rec); err != nil {
			return g.internal(ctx, from, msgID, now, err)
		}
		return g.errorReply(ctx, from, msgID, e, now)
	}

	// 3 structure: freshness first (Core §8.3: a stale or future message
	// is refused before anything else is read of it), then the version
	// (Core §7.4, so a newer agent learns which versions this one speaks).
	stages.next(stageValidate)
	if e := arsia.CheckFreshness(env, g.o.Profiles, now); e != nil {
		return fail(e)
	}
	if v, ok := env["v"].(string); ok {
		minV, _ := env["min_v"].(string)
		if err := arsia.Negotiate(v, minV, arsia.SupportedVersions()); err != nil {
			var ae *arsia.Error
			if !errors.As(err, &ae) {
				ae = &arsia.Error{Code: arsia.CodeInvalidRequest, Description: "Unsupported protocol version."}
			}
			return fail(ae)
		}
	}
	if issues := arsia.ErrorIssues(arsia.Validate(env, arsia.ValidateOptions{Profiles: g.o.Profiles})); len(issues) > 0 {
		return fail(issueError(issues[0]))
	}
	rec.Profile, _ = profileName(env, g.o.Profiles)
	comp := compliance.EffectiveOf(env, g.o.Profiles)
	oversight := comp.Oversight
	rec.Oversight = string(oversight)
	// 4 authorize
	actx := stages.next(stageAuthorize)
	if to, _ := env["to"].(string); to != g.o.Agent {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: "This gateway is " + g.o.Agent + "; the message is addressed to another agent.",
			Details: map[string]any{"field": "/to"}})
	}
	if intent, _ := env["intent"].(string); intent != string(arsia.IntentRequest) {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: "Only request messages are accepted here.", Details: map[string]any{"field": "/intent"}})
	}
	call, err := callOf(env)
	if err != nil {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: err.Error()})
	}
	call.ExplanationRequired = comp.ExplainabilityRequired
	rec.Capability = call.Capability
	who.capability = call.Capability
	if call.TraceID == "" {
		// The trace of the inbound traceparent.
		call.TraceID = traceOf(ctx)
	}
	if g.o.Trust != nil {
		if e := g.o.Trust.Check(actx, TrustQuery{Sender: from, KID: v.KeyID, Capability: call.Capability, Profile: rec.Profile}); e != nil {
			return fail(e)
		}
	}
	requested := stringsOf(env["capabilities"])
	scope := g.o.Grants[from]
	if g.o.Authorizer != nil {
		grant, e := g.o.Authorizer.Authorize(actx, AuthzQuery{Sender: from, Recipient: g.o.Agent, Capabilities: requested,
			Authorization: in.Authorization, DPoP: in.DPoP, Method: in.Method, URL: in.URL, Now: now})
		if e != nil {
			return fail(e)
		}
		rec.Details = map[string]any{"token_id": grant.TokenID, "token_issuer": grant.Issuer, "dpop_bound": grant.Bound}
		scope = intersectScope(scope, grant.Scope)
	}
	// Downgrade: the call runs with the requested capabilities the sender
	// holds; the first one, the call itself, must be among them.
	effective, _ := arsia.DowngradeCapabilities(requested, scope)
	if len(effective) == 0 || effective[0] != call.Capability {
		return fail(&arsia.Error{Code: arsia.CodeForbidden, Description: "The sender holds no grant for " + quoteText(call.Capability) + ".",
			Details: map[string]any{"reason": "capability_not_granted", "capability": call.Capability}})
	}
	var downgraded []string
	if len(effective) < len(requested) {
		downgraded = effective
	}
	h, ok := g.o.Handlers[call.Capability]
	if !ok {
		return fail(&arsia.Error{Code: arsia.CodeNotFound, Description: "No handler serves " + quoteText(call.Capability) + "."})
	}
	desc, err := h.Describe(call)
	if err != nil {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: err.Error()})
	}
	// The AAIS action and its digest are built only for a call a human
	// must approve: the digest binds the approval to the call that runs.
	var action json.RawMessage
	var digest string
	if oversight == compliance.OversightRequiredBeforeExecution {
		action, digest, err = handler.Action(call, desc)
	} else {
		err = handler.Check(call, desc)
	}
	if err != nil {
		return fail(&arsia.Error{Code: arsia.CodeInvalidRequest, Description: err.Error()})
	}
	stages.done()

	x := exchange.Exchange{Sender: from, MessageID: msgID, CorrelationID: msgID, Capability: call.Capability,
		ActionDigest: digest, State: exchange.Received, TraceID: traceOf(ctx)}
	// Idempotency-Key (or the envelope's idempotency.key): a retry with a
	// new message id gets the first request's answer; the key reused for
	// another request is a conflict (ARSIA Core §10).
	idem, err := arsia.PrepareIdempotency(env, in.IdempotencyKey, now)
	if err != nil {
		e := &arsia.Error{Code: arsia.CodeInvalidRequest, Description: "Idempotency: " + err.Error()}
		var ae *arsia.Error
		if errors.As(err, &ae) {
			e.Description, e.Details = ae.Description, map[string]any{"reason": ae.Code}
		}
		return fail(e)
	}
	if idem != nil {
		x.Idempotency = &exchange.Idempotency{From: idem.Scope.From, To: idem.Scope.To, PayloadType: idem.Scope.PayloadType,
			Key: idem.Scope.Key, Fingerprint: idem.Fingerprint, ExpiresAt: idem.ExpiresAt}
		call.IdempotencyKey = idem.Scope.Key
	}
	// The replay window: the (sender, message id) of an exchange is kept
	// for good, so the same signed bytes never run twice, whatever becomes
	// of an idempotency key; freshness bounds how long they are accepted.
	var approval *aais.Request
	if oversight == compliance.OversightRequiredBeforeExecution {
		// The approval request is built before anything is written and
		// recorded with the exchange: a gateway that stops before it is
		// submitted finishes the submission (reconcile, or the retry).
		x.ID = exchange.NewID()
		x.ApprovalID = ApprovalOf(x.ID)
		x.Request, approval, err = g.approvalRequest(x, call, desc, action, rec.Profile, downgraded, spanIDOf(ctx), now)
		if err != nil {
			return g.internal(ctx, from, msgID, now, err)
		}
	} else {
		// Nothing to wait for: recorded already claimed, one write
		// instead of two.
		x.State = exchange.Executing
	}
	if x.ID == "" {
		x.ID = exchange.NewID()
	}
	accepted := rec
	accepted.Outcome, accepted.ASCCode = audit.OutcomeAccepted, int(asc.Accepted)
	accepted.Details = map[string]any{"exchange_id": x.ID}
	if digest != "" {
		accepted.Details["action_digest"] = digest
	}
	for k, v := range rec.Details {
		accepted.Details[k] = v
	}
	// A request that waits for approval is answered pending_approval:
	// that reply is signed before anything is written.
	var pending json.RawMessage
	if approval != nil {
		if pending, err = g.pendingReply(ctx, x, approval, now); err != nil {
			return g.internal(ctx, from, msgID, now, err)
		}
	}
	// The reception record is checked and encoded before the unit: what
	// runs inside it is the writes alone.
	prepared, err := g.o.Audit.Prepare(accepted)
	if err != nil {
		return g.internal(ctx, from, msgID, now, err)
	}
	// One step: the exchange, the record of its reception and, when it
	// waits for a human, its approval request and pending state commit
	// together (Options.Units), or none does.
	var created bool
	var auditErr, submitErr error
	var sw submitted
	// fn may run again (a retried batch): it starts from x0 each time.
	x0 := x
	cctx, endCommit := g.begin(ctx, stageCommit)
	err = g.o.Units.Unit(cctx, func(ctx context.Context) error {
		var err error
		sw, submitErr, auditErr = submitted{}, nil, nil
		x, created, err = g.o.Exchanges.Create(ctx, x0)
		if err != nil || !created {
			return err
		}
		if _, auditErr = g.o.Audit.AppendPrepared(ctx, prepared); auditErr != nil {
			return auditErr
		}
		if approval != nil {
			// Written on their own (no shared transaction), an exchange
			// whose submission fails stays received, for its retry or
			// reconcile.
			sw, submitErr = g.submit(ctx, x, approval, pending, true)
			if !g.atomic() {
				return nil
			}
			if submitErr == nil && sw.ruled {
				// A remembered rule approved it: recorded in the same
				// step, before it runs (apart, advanced records it, and
				// ends the exchange if it cannot).
				if auditErr = g.auditApproval(ctx, call, rec.Profile, approval.ID, sw.sub.Receipt); auditErr != nil {
					return auditErr
				}
				sw.recorded = true
			}
			return submitErr
		}
		return nil
	})
	endCommit.end()
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
		return rep
	case errors.Is(err, exchange.ErrKeyReused):
		return fail(&arsia.Error{Code: arsia.CodeConflict, Description: "The idempotency key was already used for another request.",
			Details: map[string]any{"reason": "idempotency_key_reused"}})
	case errors.Is(err, exchange.ErrConflict):
		return fail(&arsia.Error{Code: arsia.CodeConflict, Description: "The message id was already used for another request.",
			Details: map[string]any{"reason": "message_id_reused", "field": "/id"}})
	case err != nil:
		return g.internal(ctx, from, msgID, now, err)
	}
	// From here on the request is the gateway's: a sender that hangs up
	// changes nothing of what is recorded, run or answered.
	ctx = context.WithoutCancel(ctx)
	if !created {
		return g.retried(ctx, x, msgID, idem != nil, now)
	}
	if x.State == exchange.Executing {
		// Created claimed: this process runs it (see execute).
		g.running.Store(x.ID, true)
		defer g.running.Delete(x.ID)
	}
	rec = accepted

	// 5 oversight
	if oversight != compliance.OversightRequiredBeforeExecution {
		return g.execute(ctx, x, h, call, digest, exchange.Executing, execMeta{Oversight: string(oversight), Profile: rec.Profile, Effective: downgraded})
	}
	return g.advanced(ctx, x, approval, pending, &inline{req: approval, h: h, call: call, digest: digest, profile: rec.Profile, effective: downgraded}, sw, submitErr)
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

// unauthenticated answers a request whose signature did not verify: an
// unsigned problem with the ASC status and fixed words, counted and
// logged (sampled), nothing stored.
func (g *Gateway) unauthenticated(ctx context.Context, who *requestInfo, err error) Reply {
	reason, code := "signature", asc.IntegrityCheckFailed
	var ae *arsia.Error
	if errors.As(err, &ae) && ae.Code == arsia.CodeCertificateRevoked {
		reason = "revoked"
	}
	g.metrics.inc("custos_unauthenticated_total", reason)
	if g.logSample.Add(1)%unauthLogEvery == 1 {
		g.log(ctx).WarnContext(ctx, "refused an unauthenticated request (1 in "+strconv.Itoa(unauthLogEvery)+" logged)",
			"claimed_sender", who.from, "message_id", who.msgID, "reason", reason)
	}
	return Reply{Status: 401, Problem: asc.Errorf(code, asc.ScopeTask, "The request could not be authenticated.")}
}

// unauthLogEvery: one refused unauthenticated request in this many is
// logged; all are counted.
const unauthLogEvery = 100

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
