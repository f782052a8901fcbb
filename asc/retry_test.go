package asc

import (
	"strings"
	"testing"
	"time"
)

func TestDecideRetry(t *testing.T) {
	safe := func() *Retry {
		return &Retry{Retryable: true, Safe: true, AfterMS: 2000, Attempt: 2, MaxAttempts: 5,
			IdempotencyKey: "k", SideEffectState: SideEffectNone, Deadline: "2026-08-08T12:05:00Z"}
	}
	env := func(code Code, r *Retry) *Envelope {
		e := New(code, ScopeToolCall, false, t0)
		e.Retry = r
		return e
	}
	ctx := RetryContext{Now: t0}
	tests := []struct {
		name   string
		env    *Envelope
		ctx    RetryContext
		want   RetryOutcome
		reason string
	}{
		{"safe contract", env(RateLimited, safe()), ctx, RetryAllowed, "allows"},
		{"nil envelope", nil, ctx, NoRetry, "no status"},
		{"5xxx without contract", env(RateLimited, nil), ctx, NoRetry, "class alone"},
		{"6005 reconcile even if declared safe", env(ResultStateUnknown, safe()), ctx, ReconcileFirst, "RESULT_STATE_UNKNOWN"},
		{"side effect possible", env(Timeout, func() *Retry { r := safe(); r.SideEffectState = SideEffectPossible; return r }()), ctx, ReconcileFirst, "possible"},
		{"side effect unknown", env(Timeout, func() *Retry { r := safe(); r.SideEffectState = SideEffectUnknown; return r }()), ctx, ReconcileFirst, "unknown"},
		{"not retryable", env(RateLimited, func() *Retry { r := safe(); r.Retryable = false; return r }()), ctx, NoRetry, "not retryable"},
		{"not safe", env(RateLimited, func() *Retry { r := safe(); r.Safe = false; return r }()), ctx, NoRetry, "safe"},
		{"producer budget", env(RateLimited, func() *Retry { r := safe(); r.Attempt = 5; return r }()), ctx, NoRetry, "producer budget"},
		{"consumer attempts", env(RateLimited, safe()), RetryContext{Now: t0, AttemptsUsed: 5}, NoRetry, "exhausted"},
		{"local budget", env(RateLimited, safe()), RetryContext{Now: t0, MaxAttempts: 2}, NoRetry, "local budget"},
		{"past deadline", env(RateLimited, safe()), RetryContext{Now: t0.Add(time.Hour)}, NoRetry, "deadline"},
		{"delay crosses deadline", env(RateLimited, safe()), RetryContext{Now: t0.Add(5*time.Minute - time.Second)}, NoRetry, "deadline"},
		{"unreadable deadline", env(RateLimited, func() *Retry { r := safe(); r.Deadline = "soon"; return r }()), ctx, NoRetry, "deadline"},
		{"no idempotency", env(RateLimited, func() *Retry { r := safe(); r.IdempotencyKey = ""; return r }()), ctx, NoRetry, "idempotency"},
		{"idempotent operation", env(RateLimited, func() *Retry { r := safe(); r.IdempotencyKey = ""; return r }()), RetryContext{Now: t0, Idempotent: true}, RetryAllowed, "allows"},
		{"approval without transition", env(HumanApprovalRequired, safe()), ctx, NoRetry, "named state transition"},
		{"approval after transition", env(HumanApprovalRequired, safe()), RetryContext{Now: t0, Transition: "approval_granted"}, RetryAllowed, "allows"},
		{"precondition without transition", env(FailedPrecondition, safe()), ctx, NoRetry, "transition"},
		{"authentication without transition", env(AuthenticationRequired, safe()), ctx, NoRetry, "transition"},
		{"input without transition", env(HumanInputRequired, safe()), ctx, NoRetry, "transition"},
		{"unknown code with safe contract", env(5999, safe()), ctx, RetryAllowed, "allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideRetry(tt.env, tt.ctx)
			if d.Outcome != tt.want {
				t.Fatalf("outcome = %s (%s), want %s", d.Outcome, d.Reason, tt.want)
			}
			if !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("reason %q lacks %q", d.Reason, tt.reason)
			}
		})
	}
}

func TestDecideRetryHonoursAfterMS(t *testing.T) {
	e := New(RateLimited, ScopeToolCall, false, t0)
	e.Retry = &Retry{Retryable: true, Safe: true, AfterMS: 2500}
	d := DecideRetry(e, RetryContext{Now: t0, Idempotent: true})
	if d.Outcome != RetryAllowed || d.After != 2500*time.Millisecond || !d.NotBefore.Equal(t0.Add(2500*time.Millisecond)) {
		t.Fatalf("%+v", d)
	}
	e.Retry.AfterMS = 1 << 62
	if d := DecideRetry(e, RetryContext{Now: t0, Idempotent: true}); d.After <= 0 {
		t.Fatalf("huge after_ms overflowed: %+v", d)
	}
}

func TestRetryOutcomeString(t *testing.T) {
	for o, want := range map[RetryOutcome]string{NoRetry: "no_retry", RetryAllowed: "retry", ReconcileFirst: "reconcile_first"} {
		if o.String() != want {
			t.Errorf("%d: %s", o, o)
		}
	}
}
