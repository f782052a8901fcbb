package gateway

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// stageTimer times one pipeline stage, and its span (custos.STAGE) when
// tracing is on.
type stageTimer struct {
	g     *Gateway
	ctx   context.Context
	stage string
	start time.Time
	span  trace.Span
}

// begin starts timing a stage; ctx is the one the stage's calls run with,
// end ends it.
func (g *Gateway) begin(ctx context.Context, stage string, opts ...trace.SpanStartOption) (context.Context, stageTimer) {
	st := stageTimer{g: g, ctx: ctx, stage: stage, start: time.Now()}
	if g.tracer != nil {
		st.ctx, st.span = g.tracer.Start(ctx, "custos."+stage, opts...)
	}
	return st.ctx, st
}

func (st stageTimer) end() {
	observe(st.ctx, st.g.metrics.stages[st.stage], time.Since(st.start))
	if st.span != nil {
		st.span.End()
	}
}

// stageClock times the stages of a request one after the other: next ends
// the stage running and starts another, done ends the one running (again
// is nothing).
type stageClock struct {
	g       *Gateway
	ctx     context.Context
	cur     stageTimer
	running bool
}

func (s *stageClock) next(stage string) context.Context {
	s.done()
	var ctx context.Context
	ctx, s.cur = s.g.begin(s.ctx, stage)
	s.running = true
	return ctx
}

func (s *stageClock) done() {
	if s.running {
		s.cur.end()
		s.running = false
	}
}
