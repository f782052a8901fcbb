package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway/exchange"
)

func TestExchangeOfApproval(t *testing.T) {
	for in, want := range map[string]string{
		"apr_0123abcd":    "exc_0123abcd",
		"apr_0123abcd-e1": "exc_0123abcd",
		"apr_0123abcd-e2": "exc_0123abcd",
		"apr_":            "",
		"req_0123":        "",
		"":                "",
	} {
		got, ok := ExchangeOfApproval(in)
		if got != want || ok != (want != "") {
			t.Errorf("ExchangeOfApproval(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// The approval stream alone moves a decided exchange on: with no scan
// running, an approved call runs (once) and a denied one is answered.
func TestFollowActsOnDecisions(t *testing.T) {
	r := newPipeRig(t, func(o *Options, _ *pipeRig) { o.Poll = 10 * time.Millisecond })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.g.follow(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	approved, _ := r.pending(t, req{args: map[string]any{"n": 1}})
	denied, _ := r.pending(t, req{args: map[string]any{"n": 2}})
	r.decide(t, approved.ExchangeID, aais.Approve, "")
	r.decide(t, denied.ExchangeID, aais.Deny, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err1 := r.xs.Get(t.Context(), approved.ExchangeID)
		d, err2 := r.xs.Get(t.Context(), denied.ExchangeID)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if a.State == exchange.Done && d.State == exchange.Failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not move them on: %s, %s", a.State, d.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := r.echo.n.Load(); n != 1 {
		t.Fatalf("the approved call ran %d times", n)
	}
}

// resumeOne skips an exchange another goroutine of the process is moving.
func TestResumeOneOnceAtATime(t *testing.T) {
	r := newPipeRig(t)
	rep, _ := r.pending(t, req{})
	r.decide(t, rep.ExchangeID, aais.Approve, "")
	x, err := r.xs.Get(t.Context(), rep.ExchangeID)
	if err != nil {
		t.Fatal(err)
	}
	r.g.resuming.Store(x.ID, true)
	if err := r.g.resumeOne(context.Background(), x.ID); err != nil || r.echo.n.Load() != 0 {
		t.Fatalf("a busy exchange was moved: %v, ran %d", err, r.echo.n.Load())
	}
	r.g.resuming.Delete(x.ID)
	if err := r.g.resumeOne(context.Background(), x.ID); err != nil || r.echo.n.Load() != 1 {
		t.Fatalf("resumeOne: %v, ran %d", err, r.echo.n.Load())
	}
}
