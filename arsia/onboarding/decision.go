package onboarding

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/custos-runtime/custos/arsia"
)

// The two outcomes of onboarding.
const (
	DecisionApproved = "approved"
	DecisionDenied   = "denied"
)

// DecisionInput is what the gateway knows when it decides (Phase 5).
type DecisionInput struct {
	// AgentID is the external agent's identifier.
	AgentID string
	// Policy is the capability policy of Phase 3. It may be nil only
	// when an earlier phase denied the agent.
	Policy *CapabilityPolicy
	// Requested are the capabilities the agent asked for, and
	// ActionRiskLevels their actions' risk levels when known (see
	// Evaluate).
	Requested        []string
	ActionRiskLevels map[string]int
	// DenialReasons are the reasons an earlier phase denied the agent;
	// they win over a clean evaluation. Phase is the phase that denied;
	// when empty it is inferred from the first reason. Every reason must
	// be one that phase produces.
	DenialReasons []string
	Phase         Phase
}

// Payload is the onboarding decision the gateway records and reports: the
// outcome, the granted capabilities and the policy that applied. It never
// carries a token: IssueToken makes one from an approved Payload, and the
// token travels separately.
type Payload struct {
	// Decision is DecisionApproved or DecisionDenied.
	Decision string
	AgentID  string
	// PolicyVersion is the applied policy's version, "" when no policy
	// was reached.
	PolicyVersion string
	// FreelyAllowed and OversightRequired are the granted capabilities;
	// both are empty when denied.
	FreelyAllowed     []string
	OversightRequired []string
	// TokenLifetimeSeconds is the longest lifetime of the access token
	// the approval allows; 0 when denied.
	TokenLifetimeSeconds int
	// Phase is the phase that decided: PhaseDecision on approval, the
	// failing phase on denial.
	Phase Phase
	// DenialReason lists why the agent was denied; empty when approved.
	DenialReason []string
}

// BuildDecisionPayload decides, from the outcome of the earlier phases
// and the evaluation of in.Requested against in.Policy:
//
//   - upstream denial reasons win: the payload is denied, tagged with the
//     phase that produced them;
//   - otherwise the request is evaluated (Evaluate) and the payload is
//     approved with its grants, tagged PhaseDecision, or denied in
//     PhaseCapabilityScoping with the evaluation's reason.
//
// A denied payload grants nothing and allows no token. The error wraps
// ErrInvalidDecision: an invalid agent id, an unknown phase or reason, a
// phase that does not produce the reason given, a phase without reasons,
// or no policy when no earlier phase denied. The gateway must then deny;
// nothing can be approved from such input.
func BuildDecisionPayload(in DecisionInput) (*Payload, error) {
	if err := checkAgentID(in.AgentID); err != nil {
		return nil, err
	}
	if len(in.DenialReasons) > 0 || in.Phase != "" {
		return upstreamDenial(in)
	}
	if in.Policy == nil {
		return nil, fmt.Errorf("%w: no capability policy and no upstream denial", ErrInvalidDecision)
	}
	d := Evaluate(in.Policy, in.Requested, in.ActionRiskLevels)
	p := &Payload{
		AgentID:           in.AgentID,
		PolicyVersion:     in.Policy.PolicyVersion,
		FreelyAllowed:     []string{},
		OversightRequired: []string{},
	}
	if !d.Approved {
		p.Decision, p.Phase, p.DenialReason = DecisionDenied, PhaseCapabilityScoping, slices.Clone(d.DenialReason)
		return p, nil
	}
	p.Decision, p.Phase = DecisionApproved, PhaseDecision
	p.FreelyAllowed, p.OversightRequired = d.FreelyAllowed, d.OversightRequired
	p.TokenLifetimeSeconds = in.Policy.TokenLifetimeSeconds
	return p, nil
}

func upstreamDenial(in DecisionInput) (*Payload, error) {
	if len(in.DenialReasons) == 0 {
		return nil, fmt.Errorf("%w: phase %q given without a denial reason", ErrInvalidDecision, in.Phase)
	}
	phase := in.Phase
	if phase != "" && !phase.Valid() {
		return nil, fmt.Errorf("%w: unknown phase %q", ErrInvalidDecision, phase)
	}
	var reasons []string
	for _, r := range in.DenialReasons {
		rp, ok := reasonPhase[r]
		if !ok {
			return nil, fmt.Errorf("%w: unknown denial reason %q", ErrInvalidDecision, r)
		}
		if phase == "" {
			phase = rp
		}
		if rp != phase {
			return nil, fmt.Errorf("%w: phase %q does not produce denial reason %q", ErrInvalidDecision, phase, r)
		}
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	p := &Payload{
		Decision:          DecisionDenied,
		AgentID:           in.AgentID,
		FreelyAllowed:     []string{},
		OversightRequired: []string{},
		Phase:             phase,
		DenialReason:      reasons,
	}
	if in.Policy != nil {
		p.PolicyVersion = in.Policy.PolicyVersion
	}
	return p, nil
}

func checkAgentID(id string) error {
	if _, err := arsia.ParseAgentID(id); err != nil {
		return fmt.Errorf("%w: agent_id: %w", ErrInvalidDecision, err)
	}
	return nil
}

// Approved reports whether p approves the agent.
func (p *Payload) Approved() bool { return p != nil && p.Decision == DecisionApproved }

// Effective returns the granted capabilities, FreelyAllowed then
// OversightRequired; empty unless approved.
func (p *Payload) Effective() []string {
	if !p.Approved() {
		return []string{}
	}
	return append(slices.Clone(p.FreelyAllowed), p.OversightRequired...)
}

// Map returns the payload in the generic JSON form: decision, agent_id,
// policy_version (null when no policy was reached), freely_allowed,
// oversight_required, token_lifetime_seconds, phase, and denial_reason
// when denied. It has no token member of any name.
func (p *Payload) Map() map[string]any {
	if p == nil {
		return nil
	}
	m := map[string]any{
		"decision":               p.Decision,
		"agent_id":               p.AgentID,
		"policy_version":         nil,
		"freely_allowed":         anyList(p.FreelyAllowed),
		"oversight_required":     anyList(p.OversightRequired),
		"token_lifetime_seconds": p.TokenLifetimeSeconds,
		"phase":                  string(p.Phase),
	}
	if p.PolicyVersion != "" {
		m["policy_version"] = p.PolicyVersion
	}
	if p.Decision != DecisionApproved {
		m["denial_reason"] = anyList(p.DenialReason)
	}
	return m
}

// MarshalJSON encodes Map.
func (p *Payload) MarshalJSON() ([]byte, error) { return json.Marshal(p.Map()) }

// AuditEvents returns the audit events the decision calls for, in order:
// approval_decision, then agent_onboarded and capability_granted, or
// agent_rejected. token_issued is logged by whoever issues the token.
func (p *Payload) AuditEvents() []string {
	if p.Approved() {
		return []string{EventApprovalDecision, EventAgentOnboarded, EventCapabilityGranted}
	}
	return []string{EventApprovalDecision, EventAgentRejected}
}

func anyList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
