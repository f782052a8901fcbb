package onboarding

import (
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/schema"
)

// The wire names of onboarding over ARSIA messages (ARSIA-Identity §7.1,
// §7.6).
const (
	// PayloadTypeRequest is the payload type of an onboarding request: a
	// request whose capabilities are those the agent asks to be granted.
	// (ARSIA-Identity §7.1.1 has the gateway declare a capability
	// arsiaprotocol.onboarding.evaluate, but it is not one of the 16
	// reserved capabilities of ARSIA-Actions §1.4, so every validator,
	// this one's included, refuses it: see docs/onboarding.md.)
	PayloadTypeRequest = "arsiaprotocol.onboarding/request"
	// PayloadTypeDecision is the payload type of the decision message
	// (intent approval_decision).
	PayloadTypeDecision = "arsiaprotocol.onboarding/decision"
	// DecisionSchema is the schema of the decision payload.
	DecisionSchema = "arsia-onboarding-decision.schema.json"
)

// Check statuses of a Phase 2 conformance check (§7.3).
const (
	CheckPass = "pass"
	CheckFail = "fail"
	CheckSkip = "skip"
)

// ConformanceCheck is one Phase 2 check (CHECK-01 to CHECK-05).
type ConformanceCheck struct {
	TestID, Status, Details string
	Duration                time.Duration
}

// ConformanceResult is the outcome of Phase 2: it passes when no check
// failed.
type ConformanceResult struct {
	Checks []ConformanceCheck
}

// Passed reports whether every check passed or was skipped.
func (r ConformanceResult) Passed() bool {
	for _, c := range r.Checks {
		if c.Status != CheckPass && c.Status != CheckSkip {
			return false
		}
	}
	return len(r.Checks) > 0
}

// Failed lists the ids of the checks that failed.
func (r ConformanceResult) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status != CheckPass && c.Status != CheckSkip {
			out = append(out, c.TestID)
		}
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Map returns the conformance_result member of a decision.
func (r ConformanceResult) Map() map[string]any {
	checks := make([]any, len(r.Checks))
	var total time.Duration
	for i, c := range r.Checks {
		m := map[string]any{"test_id": c.TestID, "status": c.Status}
		if c.Details != "" {
			m["details"] = c.Details
		}
		if c.Status != CheckSkip {
			m["duration_ms"] = millis(c.Duration)
		}
		total += c.Duration
		checks[i] = m
	}
	return map[string]any{"checks": checks, "all_passed": r.Passed(), "total_duration_ms": millis(total)}
}

// Issued is the access token of an approval, as the decision carries it.
type Issued struct {
	Token     string
	ExpiresAt time.Time
}

// Result returns the result member of the decision message of p
// (ARSIA-Identity §7.6, arsia-onboarding-decision.schema.json): an
// approval with its capabilities, token, conformance result and
// provenance; a denial with its first denial reason, the conformance
// result and provenance when those phases ran, and never a token. A nil
// conformance or provenance is omitted (a phase that did not run).
func (p *Payload) Result(tok *Issued, conf *ConformanceResult, prov *Provenance) (map[string]any, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: no decision", ErrInvalidDecision)
	}
	m := map[string]any{"decision": p.Decision}
	if p.PolicyVersion != "" {
		m["policy_version"] = p.PolicyVersion
	}
	if conf != nil {
		m["conformance_result"] = conf.Map()
	}
	if prov != nil && !prov.IdentityCreatedAt.IsZero() {
		m["provenance"] = prov.Map()
	}
	if !p.Approved() {
		if len(p.DenialReason) == 0 {
			return nil, fmt.Errorf("%w: a denial without a reason", ErrInvalidDecision)
		}
		m["denial_reason"] = p.DenialReason[0]
		return m, nil
	}
	if tok == nil || tok.Token == "" || tok.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("%w: an approval needs its token", ErrInvalidDecision)
	}
	m["effective_capabilities"] = anyList(p.Effective())
	m["freely_allowed"] = anyList(p.FreelyAllowed)
	m["oversight_required"] = anyList(p.OversightRequired)
	m["token"] = tok.Token
	m["token_expires_at"] = tok.ExpiresAt.UTC().Format(TimeLayout)
	return m, nil
}

// ValidateDecision checks a decision payload ({type, result}) against
// its schema; the error wraps ErrInvalidDecision.
func ValidateDecision(payload map[string]any) error {
	errs, err := schema.Validate(payload, DecisionSchema)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidDecision, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidDecision, schema.Join(errs))
	}
	return nil
}

// NewDecisionMessage builds the unsigned decision message from gateway
// to agent answering request correlationID, with result (Payload.Result)
// validated against the schema first, under the compliance member comp.
func NewDecisionMessage(gateway, agent, correlationID string, result map[string]any, comp map[string]any, now time.Time) (*arsia.Envelope, error) {
	if err := ValidateDecision(map[string]any{"type": PayloadTypeDecision, "result": result}); err != nil {
		return nil, err
	}
	return arsia.NewDecision(gateway, agent, correlationID, PayloadTypeDecision, result,
		[]string{arsia.CapOversightApprove}, arsia.BuildOptions{Now: now, Compliance: comp})
}
