package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
)

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

// receive runs one request through the pipeline's steps, in the order of
// docs/architecture.md: identify (decode, verify, rate limit), check its
// structure, authorize it, accept it (one durable step), then run it or
// wait for its approval. Each step hands the next what it established (an
// admission); a refusal after the signature verified is audited (reject).
func (g *Gateway) receive(ctx context.Context, in Inbound, start time.Time, who *requestInfo) Reply {
	ctx, a, rep := g.identify(ctx, in, start, who)
	if a == nil {
		return rep
	}
	defer a.stages.done()
	// A request for an agent the gateway relays for goes on as it came:
	// an encrypted payload is the recipient's to decrypt.
	if route, ok := g.relayRoute(a); ok {
		return g.relayed(ctx, a, who, route)
	}
	ctx, e := g.decrypt(ctx, a)
	if e != nil {
		return g.reject(ctx, a, e)
	}
	if e := g.checkStructure(a); e != nil {
		return g.reject(ctx, a, e)
	}
	au, e := g.authorize(ctx, a, who)
	if e != nil {
		return g.reject(ctx, a, e)
	}
	acc, rep := g.accept(ctx, a, au)
	if acc == nil {
		return rep
	}
	// From here on the request is the gateway's: a sender that hangs up
	// changes nothing of what is recorded, run or answered.
	ctx = context.WithoutCancel(ctx)
	if !acc.created {
		return g.retried(ctx, acc.x, a.msgID, acc.keyed, a.now)
	}
	return g.oversee(ctx, a, au, acc)
}

// admission is what the pipeline has established about a request, carried
// from one step to the next.
type admission struct {
	in  Inbound
	now time.Time
	// env is the verified envelope (decrypted, after decrypt); from and
	// msgID its sender and message id, kid the key that verified it.
	env map[string]any
	// verified is what the signature established (the envelope as
	// signed: an encrypted payload is the JWE).
	verified         *sig.Verified
	from, msgID, kid string
	// rec is the request's reception record as the steps fill it in
	// (profile, oversight, capability, token): a refusal is audited with
	// it, an acceptance records it.
	rec audit.Record
	// comp is the message's effective compliance (oversight mode,
	// explainability).
	comp compliance.Effective
	// stages times the steps.
	stages *stageClock
	// pol is the policy in force when the request arrived (trust, grants,
	// handlers): the one every step of it uses.
	pol *Policy
}

// identify is steps 1 and 2: the body decodes as an envelope with a valid
// sender, its signature verifies, and the verified sender is within its
// rate. Until the signature verifies, the request is nobody's: nothing
// durable is written for it, and the answer is neither signed nor
// addressed to the claimed sender, nor says which check failed (unknown
// key, bad signature, revoked key): see docs/security.md. A nil admission
// comes with the reply that ends the request.
func (g *Gateway) identify(ctx context.Context, in Inbound, start time.Time, who *requestInfo) (context.Context, *admission, Reply) {
	now := g.o.Now()
	env, err := sig.DecodeEnvelope(in.Body)
	if err == nil {
		ctx = withTrace(ctx, envelopeTrace(env))
	}
	ctx = g.startRequest(ctx, in, start, who)
	if err != nil {
		// The decoder's words may quote the body: none of it goes back.
		g.metrics.inc("custos_unauthenticated_total", "malformed")
		return ctx, nil, Reply{Status: 400, Problem: asc.Errorf(asc.InvalidRequest, asc.ScopeTask,
			"The body is not an ARSIA envelope (strict JSON, one object, no duplicate keys).")}
	}
	from, _ := env["from"].(string)
	msgID, _ := env["id"].(string)
	who.from, who.msgID, who.trace = logText(from), logText(msgID), traceOf(ctx)
	if !arsia.ValidAgentID(from) {
		g.metrics.inc("custos_unauthenticated_total", "malformed")
		return ctx, nil, Reply{Status: 400, Problem: asc.Errorf(asc.InvalidRequest, asc.ScopeTask, "The envelope names no valid sender.")}
	}
	// One policy for the whole request, whatever a reload does meanwhile:
	// the keys that verified it are those its grants and handler come from.
	pol := g.policy()
	stages := &stageClock{g: g, ctx: ctx}
	v, err := sig.Verify(stages.next(stageVerify), env, pol.Keys, sig.VerifyOptions{Algorithms: g.o.Algorithms, Now: g.o.Now})
	stages.done()
	if err != nil {
		return ctx, nil, g.unauthenticated(ctx, who, err)
	}
	who.verified, who.agent = true, from
	if msgID == "" {
		return ctx, nil, g.errorReply(ctx, from, msgID, &arsia.Error{Code: arsia.CodeInvalidRequest, Description: "The message has no id.",
			Details: map[string]any{"field": "/id"}}, now)
	}
	// Limited per verified sender: a forged "from" cannot use up another
	// agent's allowance. A refusal is counted, not audited.
	ok, wait, err := g.limiter.Allow(ctx, from, now)
	if err != nil {
		return ctx, nil, g.errorReply(ctx, from, msgID, &arsia.Error{Code: arsia.CodeServiceUnavailable, Description: "The rate limiter is unavailable; retry later.", Err: err}, now)
	}
	if !ok {
		rep := g.errorReply(ctx, from, msgID, &arsia.Error{Code: arsia.CodeRateLimited, Description: "Too many requests from this sender; retry later.",
			Details: map[string]any{"retry_after_seconds": math.Ceil(wait.Seconds())}}, now)
		rep.RetryAfter = wait
		return ctx, nil, rep
	}
	a := &admission{in: in, now: now, env: v.Envelope, verified: v, from: from, msgID: msgID, kid: v.KeyID, stages: stages, pol: pol,
		// The message id is bounded here: validation, which bounds it,
		// comes after freshness.
		rec: audit.Received(audit.Subject{MessageID: cut(msgID, maxLogged), Sender: from, Recipient: g.o.Agent, TraceID: traceOf(ctx)})}
	if h, err := compliance.PayloadHash(a.env); err == nil {
		a.rec.PayloadHash = "sha256:" + h
	}
	return ctx, a, Reply{}
}

// reject refuses an authenticated request: the refusal is audited with
// what the steps established, and answered to the sender, signed.
func (g *Gateway) reject(ctx context.Context, a *admission, e *arsia.Error) Reply {
	a.stages.done()
	a.rec.Outcome = audit.OutcomeRejected
	a.rec.ASCCode = int(e.AsASC().Code())
	if a.rec.Details == nil {
		a.rec.Details = map[string]any{}
	}
	a.rec.Details["arsia_code"] = e.Code
	if _, err := g.o.Audit.Append(ctx, a.rec); err != nil {
		return g.internal(ctx, a.from, a.msgID, a.now, err)
	}
	return g.errorReply(ctx, a.from, a.msgID, e, a.now)
}

// checkStructure is step 3: freshness first (Core §8.3: a stale or future
// message is refused before anything else is read of it), then the version
// (Core §7.4, so a newer agent learns which versions this one speaks),
// then the schema and the semantic rules. It resolves the message's
// compliance profile for the steps after it.
func (g *Gateway) checkStructure(a *admission) *arsia.Error {
	a.stages.next(stageValidate)
	if e := arsia.CheckFreshness(a.env, g.o.Profiles, a.now); e != nil {
		return e
	}
	if v, ok := a.env["v"].(string); ok {
		minV, _ := a.env["min_v"].(string)
		if err := arsia.Negotiate(v, minV, arsia.SupportedVersions()); err != nil {
			var ae *arsia.Error
			if !errors.As(err, &ae) {
				ae = &arsia.Error{Code: arsia.CodeInvalidRequest, Description: "Unsupported protocol version."}
			}
			return ae
		}
	}
	if issues := arsia.ErrorIssues(arsia.Validate(a.env, arsia.ValidateOptions{Profiles: g.o.Profiles})); len(issues) > 0 {
		return issueError(issues[0])
	}
	a.rec.Profile, _ = profileName(a.env, g.o.Profiles)
	a.comp = compliance.EffectiveOf(a.env, g.o.Profiles)
	a.rec.Oversight = string(a.comp.Oversight)
	return nil
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
