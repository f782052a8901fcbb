package gateway

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/custos-runtime/custos/internal/telemetry"
)

// discard is a span exporter that drops what it gets.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkReceiveTelemetry is one request that runs at once (echo),
// received with tracing off, on and sampled (spans batched to an exporter
// that drops them), and on with nothing sampled. docs/benchmarks.md gives
// the ratios.
func BenchmarkReceiveTelemetry(b *testing.B) {
	for _, mode := range []string{"off", "sampled", "unsampled"} {
		b.Run("tracing="+mode, func(b *testing.B) {
			r := newPipeRig(b, func(o *Options, _ *pipeRig) {
				switch mode {
				case "sampled":
					tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithIDGenerator(telemetry.IDs{}))
					b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
					o.Tracer = tp
				case "unsampled":
					tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSyncer(tracetest.NewNoopExporter()))
					b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
					o.Tracer = tp
				}
			})
			for b.Loop() {
				b.StopTimer()
				body, _ := r.build(b, req{trace: "5bf92f3577b34da6a3ce929d0e0e4737"})
				b.StartTimer()
				if rep := r.g.Receive(context.Background(), Inbound{Body: body}); rep.Status != 200 {
					b.Fatalf("status %d", rep.Status)
				}
			}
		})
	}
}

// BenchmarkInstrumentationOff is what the telemetry adds to one request
// with tracing off, alone: the request's trace, the stage timers of a call
// that runs at once (verify, validate, authorize, two commits, the
// handler) and the latency observation.
func BenchmarkInstrumentationOff(b *testing.B) {
	r := newPipeRig(b)
	g := r.g
	ctx0 := withTrace(context.Background(), "5bf92f3577b34da6a3ce929d0e0e4737")
	for b.Loop() {
		var who requestInfo
		start := time.Now()
		ctx := g.startRequest(ctx0, Inbound{}, start, &who)
		st := stageClock{g: g, ctx: ctx}
		st.next(stageVerify)
		st.done()
		st.next(stageValidate)
		st.next(stageAuthorize)
		st.done()
		for _, s := range [...]string{stageCommit, stageHandler, stageCommit} {
			_, st := g.begin(ctx, s)
			st.end()
		}
		observe(ctx, g.metrics.latency.WithLabelValues("ok", g.metrics.sender(&who)), time.Since(start))
		g.metrics.inc("custos_requests_total", "ok")
	}
}
