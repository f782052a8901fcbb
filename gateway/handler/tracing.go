package handler

import (
	"context"
	"maps"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The gateway's spans travel to the upstreams as W3C Trace Context: the
// traceparent and tracestate headers over HTTP (http, and the HTTP
// transports of mcp and a2a), params._meta of an MCP tool call. Only a
// span the gateway started is propagated: without tracing the context
// holds none and nothing changes.

// localSpan is the span context of ctx when it is a span of this process.
func localSpan(ctx context.Context) (trace.SpanContext, bool) {
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid() && !sc.IsRemote()
}

// injectTrace sets traceparent (and tracestate) on h from ctx's span; it
// reports whether there was one.
func injectTrace(ctx context.Context, h http.Header) bool {
	if _, ok := localSpan(ctx); !ok {
		return false
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	return true
}

// traceTransport adds the request context's span to every request.
type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, ok := localSpan(r.Context()); ok {
		r = r.Clone(r.Context())
		injectTrace(r.Context(), r.Header)
	}
	return t.base.RoundTrip(r)
}

// traceMeta returns an MCP tool call's _meta with traceparent (and
// tracestate) of ctx's span, the others kept; meta itself when there is no
// span.
func traceMeta(ctx context.Context, meta map[string]any) map[string]any {
	if _, ok := localSpan(ctx); !ok {
		return meta
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	out := make(map[string]any, len(meta)+len(carrier))
	maps.Copy(out, meta)
	for k, v := range carrier {
		out[k] = v
	}
	return out
}
