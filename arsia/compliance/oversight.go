package compliance

import (
	"fmt"
	"time"
)

// ReviewWindow is how long a required_within_24h action may wait for its
// human review.
const ReviewWindow = 24 * time.Hour

// timeLayout is ARSIA's timestamp form (RFC 3339, milliseconds, UTC).
const timeLayout = "2006-01-02T15:04:05.000Z"

// ClockSkew returns the timestamp tolerance for env: its effective profile's
// clock_skew_seconds (EU-AI-ACT-HIGH-RISK 120 s, MIFID-II and DORA 60 s),
// else the Core §8.3 default of 300 s. A clock_skew_seconds inside the
// message is ignored: the tolerance is the receiver's to set, and profiles
// may only tighten it. A nil reg means Default().
func ClockSkew(env map[string]any, reg *Registry) time.Duration {
	if p, ok := EffectiveProfile(env, reg); ok && p.Defaults.ClockSkewSeconds > 0 {
		return time.Duration(p.Defaults.ClockSkewSeconds) * time.Second
	}
	return DefaultClockSkew * time.Second
}

// EffectiveOversight returns env's human_oversight mode after inheritance,
// or "" when none applies (no compliance object, or a value that is not a
// known mode).
func EffectiveOversight(env map[string]any, reg *Registry) Oversight {
	return EffectiveOf(env, reg).Oversight
}

// Effective is what a receiver acts on of a message's compliance after
// inheritance.
type Effective struct {
	// Oversight is EffectiveOversight.
	Oversight Oversight
	// ExplainabilityRequired is ExplainabilityRequired.
	ExplainabilityRequired bool
}

// EffectiveOf resolves env's compliance once for everything Effective
// holds (the zero Effective without a compliance object). A nil reg means
// Default().
func EffectiveOf(env map[string]any, reg *Registry) Effective {
	comp, present, err := complianceOf(env)
	if err != nil || !present {
		return Effective{}
	}
	eff := resolve(comp, reg.orDefault()).effective
	var e Effective
	if s, _ := eff[fieldHumanOversight].(string); Oversight(s).Valid() {
		e.Oversight = Oversight(s)
	}
	e.ExplainabilityRequired = isTrue(eff[fieldExplainability])
	return e
}

// OversightDeadline returns when the human review of env, received at
// receivedAt, is due:
//
//   - required_within_24h: receivedAt + 24 h (the action may run first).
//   - required_post_execution: the mode sets no period, so the review is due
//     before the audit record may be deleted: receivedAt + the effective
//     retention_days. Without a retention period there is no deadline.
//   - required_before_execution: none here; the action waits for approval
//     and the pending_approval deadline (≤ 24 h) bounds the wait.
//   - not_required, or no compliance: none.
//
// ok is false when there is no deadline.
func OversightDeadline(env map[string]any, reg *Registry, receivedAt time.Time) (deadline time.Time, ok bool) {
	switch EffectiveOversight(env, reg) {
	case OversightRequiredWithin24h:
		return receivedAt.Add(ReviewWindow), true
	case OversightRequiredPostExecution:
		if days, ok := EffectiveRetentionDays(env, reg); ok {
			return receivedAt.AddDate(0, 0, days), true
		}
	}
	return time.Time{}, false
}

// CheckOversightTimeout reports an oversight_timeout violation when env's
// human review is overdue (see OversightDeadline for the deadlines). A
// review that happened (reviewedAt non-nil) is overdue when it came after
// the deadline; a pending one (reviewedAt nil) when now is after it. A
// review at exactly the deadline is in time. Times are injected so the
// check is deterministic. A nil reg means Default().
func CheckOversightTimeout(env map[string]any, reg *Registry, reviewedAt *time.Time, receivedAt, now time.Time) []Violation {
	deadline, ok := OversightDeadline(env, reg, receivedAt)
	if !ok {
		return nil
	}
	mode := EffectiveOversight(env, reg)
	at, what := now, "not reviewed by"
	if reviewedAt != nil {
		at, what = *reviewedAt, "reviewed at "+reviewedAt.UTC().Format(timeLayout)+", after"
	}
	if !at.After(deadline) {
		return nil
	}
	return []Violation{{
		Code: CodeOversightTimeout,
		Message: fmt.Sprintf("oversight_timeout: human_oversight=%s but %s the deadline %s (received %s)",
			mode, what, deadline.UTC().Format(timeLayout), receivedAt.UTC().Format(timeLayout)),
	}}
}
