package asc

import (
	"fmt"
	"math"
	"time"
)

// RetryOutcome is what a consumer may do next.
type RetryOutcome int

// Retry outcomes. The zero value refuses.
const (
	// NoRetry: do not repeat the operation.
	NoRetry RetryOutcome = iota
	// RetryAllowed: the operation may be repeated once
	// RetryDecision.NotBefore has passed.
	RetryAllowed
	// ReconcileFirst: the outcome of the previous attempt is uncertain; find
	// out whether it committed (idempotency key, external reference,
	// domain lookup) before anything is repeated. No generic retry policy may
	// override this.
	ReconcileFirst
)

func (o RetryOutcome) String() string {
	switch o {
	case RetryAllowed:
		return "retry"
	case ReconcileFirst:
		return "reconcile_first"
	}
	return "no_retry"
}

// RetryContext is what the consumer knows beyond the envelope.
type RetryContext struct {
	// Now is the current time; the decision never reads the clock itself.
	Now time.Time
	// Idempotent is true when the operation is idempotent by nature.
	Idempotent bool
	// AttemptsUsed is how many attempts the consumer has made so far.
	AttemptsUsed int64
	// MaxAttempts is the consumer's own budget (0 means none); it applies in
	// addition to the producer's max_attempts.
	MaxAttempts int64
	// Transition names the state transition that has happened since the
	// status was reported, such as "approval_granted" or "reauthenticated".
	// FAILED_PRECONDITION, HUMAN_INPUT_REQUIRED, HUMAN_APPROVAL_REQUIRED and
	// AUTHENTICATION_REQUIRED allow another attempt only after one: waiting
	// and resending the same request is not a retry strategy.
	Transition string
}

// RetryDecision is the result of DecideRetry.
type RetryDecision struct {
	Outcome RetryOutcome
	// Reason explains the outcome in English, for logs.
	Reason string
	// After is the delay the producer asked for (retry.after_ms).
	After time.Duration
	// NotBefore is Now + After; only meaningful for RetryAllowed.
	NotBefore time.Time
}

// DecideRetry applies the ASC retry contract. It is conservative by design:
// a 5xxx class alone never implies safety, RESULT_STATE_UNKNOWN and a
// possible or unknown side effect require reconciliation, and every one of
// these must hold before RetryAllowed is returned: a retry contract with retryable
// and safe both true, attempts left under both budgets, the deadline not
// passed (including the after_ms delay), and an idempotent operation or an
// idempotency key.
func DecideRetry(e *Envelope, ctx RetryContext) RetryDecision {
	no := func(format string, args ...any) RetryDecision {
		return RetryDecision{Outcome: NoRetry, Reason: fmt.Sprintf(format, args...)}
	}
	if e == nil {
		return no("no status")
	}
	code := e.Status.Code
	if code == ResultStateUnknown {
		return RetryDecision{Outcome: ReconcileFirst,
			Reason: "RESULT_STATE_UNKNOWN: reconcile whether the operation committed before repeating it"}
	}
	r := e.Retry
	if r != nil && (r.SideEffectState == SideEffectPossible || r.SideEffectState == SideEffectUnknown) {
		return RetryDecision{Outcome: ReconcileFirst,
			Reason: fmt.Sprintf("side_effect_state is %s: reconcile before repeating", r.SideEffectState)}
	}
	switch code {
	case FailedPrecondition, HumanInputRequired, HumanApprovalRequired, AuthenticationRequired:
		if ctx.Transition == "" {
			return no("%s allows another attempt only after a named state transition", e.Status.Name)
		}
	}
	if r == nil {
		return no("no retry contract: the %s class alone never implies a safe retry", ClassOf(code))
	}
	if !r.Retryable {
		return no("retry contract says not retryable")
	}
	if !r.Safe {
		return no("retry contract does not declare replay safe")
	}
	used := max(ctx.AttemptsUsed, r.Attempt)
	if r.MaxAttempts > 0 && used >= r.MaxAttempts {
		return no("attempts exhausted: %d of %d (producer budget)", used, r.MaxAttempts)
	}
	if ctx.MaxAttempts > 0 && used >= ctx.MaxAttempts {
		return no("attempts exhausted: %d of %d (local budget)", used, ctx.MaxAttempts)
	}
	after := afterDuration(r.AfterMS)
	notBefore := ctx.Now.Add(after)
	if r.Deadline != "" {
		deadline, err := parseTime(r.Deadline)
		if err != nil {
			return no("unreadable deadline: %v", err)
		}
		if notBefore.After(deadline) {
			return no("deadline %s passed (or passes before the %v delay ends)", r.Deadline, after)
		}
	}
	if !ctx.Idempotent && r.IdempotencyKey == "" {
		return no("operation is not idempotent and carries no idempotency key")
	}
	return RetryDecision{Outcome: RetryAllowed, Reason: "retry contract allows a safe retry", After: after, NotBefore: notBefore}
}

// afterDuration converts after_ms, clamping values a Duration cannot hold.
func afterDuration(ms int64) time.Duration {
	const maxMS = int64(math.MaxInt64 / time.Millisecond)
	return time.Duration(min(max(ms, 0), maxMS)) * time.Millisecond
}
