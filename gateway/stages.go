package gateway

import (
	"context"
	"time"
)

// begin starts timing a pipeline stage; the function it returns ends it.
// The context is the one the stage's calls run with.
func (g *Gateway) begin(ctx context.Context, stage string) (context.Context, func()) {
	start := time.Now()
	return ctx, func() { observe(g.metrics.stages[stage], time.Since(start), traceOf(ctx)) }
}

// stageClock times the stages of a request one after the other: next ends
// the stage running and starts another, done ends the one running (again
// is nothing).
type stageClock struct {
	g   *Gateway
	ctx context.Context
	end func()
}

func (s *stageClock) next(stage string) context.Context {
	s.done()
	var ctx context.Context
	ctx, s.end = s.g.begin(s.ctx, stage)
	return ctx
}

func (s *stageClock) done() {
	if s.end != nil {
		s.end()
		s.end = nil
	}
}
