package gateway

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// traceKey carries a request's W3C trace id through the pipeline, so that
// replies, ASC provenance and logs name the trace the sender started.
type traceKey struct{}

func withTrace(ctx context.Context, traceID string) context.Context {
	if !validTraceID(traceID) {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, traceID)
}

func traceOf(ctx context.Context) string {
	t, _ := ctx.Value(traceKey{}).(string)
	return t
}

// envelopeTrace is the trace id of a decoded envelope's context, "" when it
// has none or a malformed one (L1 validation refuses the latter later).
func envelopeTrace(env map[string]any) string {
	c, _ := env["context"].(map[string]any)
	t, _ := c["trace_id"].(string)
	if !validTraceID(t) {
		return ""
	}
	return t
}

// validTraceID: 32 lower-case hex digits, not all zero (W3C Trace Context).
func validTraceID(t string) bool {
	if len(t) != 32 {
		return false
	}
	zero := true
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '0':
		case c >= '1' && c <= '9', c >= 'a' && c <= 'f':
			zero = false
		default:
			return false
		}
	}
	return !zero
}

// log is the logger with the request's trace id, and the id of the span
// the record is written in when tracing is on.
func (g *Gateway) log(ctx context.Context) *slog.Logger {
	t := traceOf(ctx)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !sc.IsRemote() {
		if st := sc.TraceID().String(); t == "" || t == st {
			return g.o.Logger.With("trace_id", st, "span_id", sc.SpanID().String())
		}
	}
	if t != "" {
		return g.o.Logger.With("trace_id", t)
	}
	return g.o.Logger
}
