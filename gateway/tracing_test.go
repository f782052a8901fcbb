package gateway

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/internal/telemetry"
)

// The request's trace: the envelope's context.trace_id, else the inbound
// traceparent's, whether tracing is on or off; a malformed traceparent is
// ignored. With tracing on, the request's span is in that trace: the
// traceparent's child, or a root in the envelope's trace.
func TestRequestTrace(t *testing.T) {
	const (
		envTrace = "5bf92f3577b34da6a3ce929d0e0e4737"
		tpTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		tpSpan   = "00f067aa0ba902b7"
	)
	tp := "00-" + tpTrace + "-" + tpSpan + "-01"
	for _, tc := range []struct {
		name, envelope, traceparent string
		want, wantSpanTrace         string
		wantParent                  string
	}{
		{"none", "", "", "", "", ""},
		{"envelope", envTrace, "", envTrace, envTrace, ""},
		{"traceparent", "", tp, tpTrace, tpTrace, tpSpan},
		{"both", envTrace, tp, envTrace, tpTrace, tpSpan},
		{"malformed traceparent", "", "00-" + tpTrace + "-0000000000000000-01", "", "", ""},
	} {
		for _, on := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{true: " traced", false: ""}[on], func(t *testing.T) {
				exp := tracetest.NewInMemoryExporter()
				r := newPipeRig(t, func(o *Options, _ *pipeRig) {
					if on {
						tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(telemetry.IDs{}))
						t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
						o.Tracer = tp
					}
				})
				body, id := r.build(t, req{trace: tc.envelope})
				rep := r.g.Receive(t.Context(), Inbound{Body: body, TraceParent: tc.traceparent, TraceState: "k=v"})
				if rep.Status != 200 {
					t.Fatalf("status %d", rep.Status)
				}
				m := r.verified(t, rep.Envelope)
				if got, _ := get(m, "context", "trace_id").(string); got != tc.want {
					t.Errorf("reply trace %q, want %q", got, tc.want)
				}
				for _, rec := range r.recordsOf(t, audit.KindReceived, id) {
					if rec.TraceID != tc.want {
						t.Errorf("audit trace %q, want %q", rec.TraceID, tc.want)
					}
				}
				spans := exp.GetSpans()
				if !on {
					if len(spans) != 0 {
						t.Errorf("%d spans with tracing off", len(spans))
					}
					return
				}
				var recv []tracetest.SpanStub
				for _, s := range spans {
					if s.Name == spanReceive {
						recv = append(recv, s)
					}
				}
				if len(recv) != 1 {
					t.Fatalf("%d receive spans", len(recv))
				}
				s := recv[0]
				if tc.wantSpanTrace != "" && s.SpanContext.TraceID().String() != tc.wantSpanTrace {
					t.Errorf("span trace %s, want %s", s.SpanContext.TraceID(), tc.wantSpanTrace)
				}
				if got := s.Parent.SpanID(); tc.wantParent == "" && got.IsValid() || tc.wantParent != "" && got.String() != tc.wantParent {
					t.Errorf("parent %s, want %q", got, tc.wantParent)
				}
				if tc.wantParent != "" && s.SpanContext.TraceState().Get("k") != "v" {
					t.Errorf("tracestate %q", s.SpanContext.TraceState())
				}
				for _, c := range spans {
					if c.Name != spanReceive && c.Parent.SpanID() != s.SpanContext.SpanID() {
						t.Errorf("%s is not a child of the request's span", c.Name)
					}
				}
				arsiaTrace := ""
				for _, a := range s.Attributes {
					if a.Key == "arsia.trace_id" {
						arsiaTrace = a.Value.AsString()
					}
				}
				if want := map[bool]string{true: envTrace}[tc.name == "both"]; arsiaTrace != want {
					t.Errorf("arsia.trace_id %q, want %q", arsiaTrace, want)
				}
			})
		}
	}
}
