package onboarding_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia/onboarding"
)

func ExampleEvaluate() {
	policy, err := onboarding.ParsePolicy([]byte(`{
		"policy_version": "finco-2026-q2",
		"token_lifetime_seconds": 3600,
		"capabilities": [
			{"capability": "notes.read", "status": "allowed"},
			{"capability": "notes.write", "status": "oversight_required"},
			{"capability": "payments.charge", "status": "allowed", "max_risk_level": 3}
		]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	d := onboarding.Evaluate(policy, []string{"notes.read", "notes.write", "mail.send"}, nil)
	fmt.Println(d.Approved, d.FreelyAllowed, d.OversightRequired, d.Denied)

	// The charge action is risk level 5, above the rule's limit of 3.
	d = onboarding.Evaluate(policy, []string{"payments.charge"}, map[string]int{"payments.charge": 5})
	fmt.Println(d.Approved, d.Denied, d.DenialReason)
	// Output:
	// true [notes.read] [notes.write] [mail.send]
	// false [payments.charge] [no_permitted_capabilities]
}

func ExampleParsePolicy_duplicate() {
	_, err := onboarding.ParsePolicy([]byte(`{"policy_version": "v1", "token_lifetime_seconds": 3600,
		"capabilities": [
			{"capability": "notes.read", "status": "allowed"},
			{"capability": "notes.read", "status": "prohibited"}
		]}`))
	fmt.Println(errors.Is(err, onboarding.ErrDuplicateCapability))
	fmt.Println(err)
	// Output:
	// true
	// onboarding: invalid capability policy: /capabilities/1/capability: duplicate capability "notes.read" (first at /capabilities/0)
}

func ExampleCheckProfileRequirement() {
	fmt.Println(onboarding.CheckProfileRequirement(nil, "high-risk", "EU-AI-ACT-HIGH-RISK", ""))
	fmt.Println(onboarding.CheckProfileRequirement(nil, "high-risk", "", ""))
	fmt.Println(onboarding.CheckProfileRequirement(nil, "unacceptable-risk", "EU-AI-ACT-HIGH-RISK", ""))
	// Output:
	// <nil>
	// onboarding: high-risk agent MUST declare a compliance profile (ARSIA-Identity §4.2)
	// onboarding: unacceptable-risk agent MUST NOT be onboarded (ARSIA-Identity §4.2)
}

func ExamplePhaseTracker() {
	var flow onboarding.PhaseTracker
	fmt.Println(flow.Enter(onboarding.PhaseDiscoveryAndIdentity))
	fmt.Println(flow.Enter(onboarding.PhaseCapabilityScoping)) // skips Phase 2
	fmt.Println(flow.Enter(onboarding.PhaseComplianceConformance))
	fmt.Println(flow.Fail())
	// Output:
	// <nil>
	// onboarding: phase out of order: phase "capability_scoping" would skip "compliance_conformance"
	// <nil>
	// compliance_conformance
}

func ExampleBuildDecisionPayload() {
	policy := &onboarding.CapabilityPolicy{
		PolicyVersion:        "finco-2026-q2",
		TokenLifetimeSeconds: 3600,
		Capabilities: []onboarding.CapabilityRule{
			{Capability: "notes.read", Status: onboarding.StatusAllowed},
		},
	}
	p, err := onboarding.BuildDecisionPayload(onboarding.DecisionInput{
		AgentID:   "agent:acme.echo-client",
		Policy:    policy,
		Requested: []string{"notes.read"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := p.MarshalJSON()
	fmt.Println(string(out))

	// A Phase 1 failure wins over a clean evaluation.
	p, _ = onboarding.BuildDecisionPayload(onboarding.DecisionInput{
		AgentID:       "agent:acme.echo-client",
		Policy:        policy,
		Requested:     []string{"notes.read"},
		DenialReasons: []string{onboarding.ReasonDiscoveryFailed},
	})
	fmt.Println(p.Decision, p.Phase, p.DenialReason)
	// Output:
	// {"agent_id":"agent:acme.echo-client","decision":"approved","freely_allowed":["notes.read"],"oversight_required":[],"phase":"decision","policy_version":"finco-2026-q2","token_lifetime_seconds":3600}
	// denied discovery_and_identity [discovery_failed]
}

func ExampleVerifyProvenance() {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	p := onboarding.VerifyProvenance("2026-03-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z", now)
	fmt.Println(p.Verified)
	fmt.Println(p.Notes[0])
	// Output:
	// false
	// audit predates identity: earliest audit record 2026-01-01T00:00:00.000Z is before identity_created_at 2026-03-01T00:00:00.000Z
}
