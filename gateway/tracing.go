package gateway

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/internal/telemetry"
)

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/custos-runtime/custos/gateway"

// Span names: one per received request, one per resumed exchange, one per
// stage (custos.verify, custos.handler, ...).
const (
	spanReceive = "custos.receive"
	spanResume  = "custos.resume"
)

// inboundParent is the span context of the W3C traceparent and tracestate
// the request came with (invalid when none or malformed).
func inboundParent(in Inbound) trace.SpanContext {
	if in.TraceParent == "" {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{"traceparent": in.TraceParent}
	if in.TraceState != "" {
		carrier["tracestate"] = in.TraceState
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

// startRequest gives a received request its trace: the envelope's
// context.trace_id, else the inbound traceparent's. With tracing on, it
// starts the request's span, a child of the inbound traceparent, or a
// root in the envelope's trace.
func (g *Gateway) startRequest(ctx context.Context, in Inbound, start time.Time, who *requestInfo) context.Context {
	parent := inboundParent(in)
	if traceOf(ctx) == "" && parent.IsValid() {
		ctx = withTrace(ctx, parent.TraceID().String())
	}
	if g.tracer == nil {
		return ctx
	}
	sctx := ctx
	if parent.IsValid() {
		sctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else if id, err := trace.TraceIDFromHex(traceOf(ctx)); err == nil {
		sctx = telemetry.WithTraceID(ctx, id)
	}
	sctx, span := g.tracer.Start(sctx, spanReceive, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
	if t := traceOf(ctx); t != "" && t != span.SpanContext().TraceID().String() {
		// The envelope names another trace than the transport's.
		span.SetAttributes(attribute.String("arsia.trace_id", t))
	}
	who.span = span
	return sctx
}

// endRequest ends a request's span with its outcome and ASC status.
func (g *Gateway) endRequest(span trace.Span, rep Reply, result string, who *requestInfo) {
	if !span.IsRecording() {
		span.End()
		return
	}
	attrs := []attribute.KeyValue{attribute.String("custos.result", result), attribute.Int("http.response.status_code", rep.Status)}
	if who.verified {
		attrs = append(attrs, attribute.String("arsia.sender", who.agent), attribute.String("arsia.message_id", who.msgID))
	}
	if who.capability != "" {
		attrs = append(attrs, attribute.String("arsia.capability", who.capability))
	}
	if rep.ExchangeID != "" {
		attrs = append(attrs, attribute.String("custos.exchange_id", rep.ExchangeID))
	}
	span.SetAttributes(attrs...)
	st := replyStatus(rep)
	if st != nil && st.Status.Code == asc.HumanApprovalRequired {
		// The wait for a human: the exchange resumes in a custos.resume
		// span, a child of this one, once decided.
		span.AddEvent("approval.pending", trace.WithAttributes(attribute.String("custos.exchange_id", rep.ExchangeID)))
	}
	setStatus(span, st)
	span.End()
}

// setStatus puts the ASC binding's attributes on a span, and its status.
func setStatus(span trace.Span, e *asc.Envelope) {
	if e == nil || !span.IsRecording() {
		return
	}
	for _, a := range asc.SpanAttributes(e) {
		switch v := a.Value.(type) {
		case string:
			span.SetAttributes(attribute.String(a.Key, v))
		case int64:
			span.SetAttributes(attribute.Int64(a.Key, v))
		case bool:
			span.SetAttributes(attribute.Bool(a.Key, v))
		}
	}
	if asc.SpanIsError(e) {
		span.SetStatus(codes.Error, e.Status.Name)
	}
}

// replyStatus is the ASC status of a reply: its problem's, success, the
// wait for a human of a pending_approval, or the agent_status of an ARSIA
// error.
func replyStatus(rep Reply) *asc.Envelope {
	now := time.Now()
	switch {
	case rep.Problem != nil:
		return &rep.Problem.Envelope
	case rep.Status == 200:
		return asc.New(asc.Success, asc.ScopeTask, true, now)
	case rep.Status == 202 && rep.Envelope == nil:
		return asc.New(asc.Running, asc.ScopeTask, false, now)
	}
	var env struct {
		Intent  string `json:"intent"`
		Payload struct {
			Error struct {
				Details struct {
					AgentStatus struct {
						Code int `json:"code"`
					} `json:"agent_status"`
				} `json:"details"`
			} `json:"error"`
		} `json:"payload"`
	}
	if json.Unmarshal(rep.Envelope, &env) != nil {
		return nil
	}
	if env.Intent == "pending_approval" {
		return asc.New(asc.HumanApprovalRequired, asc.ScopeTask, false, now)
	}
	if c := env.Payload.Error.Details.AgentStatus.Code; c != 0 {
		return asc.New(asc.Code(c), asc.ScopeTask, true, now)
	}
	return nil
}

// startResume starts the span of an exchange moved on after its approval
// was decided: a child of the request's span (recorded in the approval's
// exchange reference), or a root in its trace.
func (g *Gateway) startResume(ctx context.Context, ref ExchangeRef, exchangeID string) (context.Context, trace.Span) {
	if g.tracer == nil {
		return ctx, nil
	}
	tid, err := trace.TraceIDFromHex(ref.TraceID)
	if err == nil {
		if sid, err := trace.SpanIDFromHex(ref.SpanID); err == nil {
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
		} else {
			ctx = telemetry.WithTraceID(ctx, tid)
		}
	}
	return g.tracer.Start(ctx, spanResume, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("custos.exchange_id", exchangeID)))
}

// resolved notes on a resume span how the approval ended and how long it
// took.
func resolved(span trace.Span, req *aais.Request, res *aais.Resolution) {
	if span == nil || !span.IsRecording() || res == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("aais.request_id", res.RequestID), attribute.String("aais.outcome", string(res.Outcome))}
	if req != nil && !req.CreatedAt.IsZero() && !res.ResolvedAt.IsZero() {
		attrs = append(attrs, attribute.Float64("aais.decision_seconds", res.ResolvedAt.Time().Sub(req.CreatedAt.Time()).Seconds()))
	}
	span.AddEvent("approval.resolved", trace.WithAttributes(attrs...))
}

// spanIDOf is the id of the request's span when it is sampled, for the
// resume span to name as its parent ("" otherwise).
func spanIDOf(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.IsRemote() || !sc.IsSampled() {
		return ""
	}
	return sc.SpanID().String()
}

// exemplarOf is the exemplar of an observation made within ctx: its
// span's trace and span ids when the span is sampled (a trace the backend
// has), nothing otherwise: with tracing off, observations carry none, at
// no cost.
func exemplarOf(ctx context.Context) (traceID, spanID string) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !sc.IsRemote() && sc.IsSampled() {
		return sc.TraceID().String(), sc.SpanID().String()
	}
	return "", ""
}
