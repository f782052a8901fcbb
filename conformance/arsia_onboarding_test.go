package conformance

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestArsiaOnboarding(t *testing.T) { checkArsiaCategory(t, "onboarding", execOnboarding) }

// TestArsiaOnboardingGated runs the suite's gated cases (issue_token,
// phase1_step_order) with their gates lifted: Custos implements both in
// process.
func TestArsiaOnboardingGated(t *testing.T) {
	dir := sharedArsia(t)
	cases, err := loadArsiaSuite(filepath.Join(dir, "suites", "onboarding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range cases {
		if c.SkipUntil == "" {
			continue
		}
		c.SkipUntil = ""
		if err := execOnboarding(nil, c); err != nil {
			t.Errorf("%s: %v", c.ID, err)
		}
		ran++
	}
	if ran == 0 {
		t.Fatal("no gated case found")
	}
}

// TestExecOnboardingOwnCases needs no ../shared.
func TestExecOnboardingOwnCases(t *testing.T) {
	policy := map[string]any{
		"policy_version": "p", "token_lifetime_seconds": 600,
		"capabilities": []any{
			map[string]any{"capability": "notes.read", "status": "allowed"},
			map[string]any{"capability": "notes.write", "status": "oversight_required"},
		},
	}
	tests := []struct {
		name        string
		input       map[string]any
		expected    map[string]any
		unsupported bool
		fail        bool
	}{
		{name: "token approved", input: map[string]any{"operation": "issue_token", "agent_id": "agent:acme.client",
			"policy": policy, "requested_capabilities": []any{"notes.read", "notes.write"}, "now": "2026-05-01T10:00:00Z"},
			expected: map[string]any{"status": 200}},
		{name: "token default policy", input: map[string]any{"operation": "issue_token", "agent_id": "agent:external.demo"},
			expected: map[string]any{"status": 200}},
		{name: "token denied", input: map[string]any{"operation": "issue_token", "agent_id": "agent:acme.client",
			"policy": policy, "requested_capabilities": []any{"payments.charge"}},
			expected: map[string]any{"status": 403}},
		{name: "steps", input: map[string]any{"operation": "phase1_step_order"}, expected: map[string]any{"steps_in_order": true}},
		{name: "unchecked expectation", input: map[string]any{"operation": "get_audit_events"},
			expected: map[string]any{"count": 7}, unsupported: true},
		{name: "unknown operation", input: map[string]any{"operation": "nope"}, unsupported: true},
		{name: "wrong events", input: map[string]any{"operation": "get_audit_events"},
			expected: map[string]any{"event_names": []any{"approval_decision"}}, fail: true},
		{name: "payload wrong phase", input: map[string]any{"operation": "build_decision_payload", "agent_id": "agent:acme.client",
			"policy": policy, "requested_capabilities": []any{"notes.read"}},
			expected: map[string]any{"decision": "approved", "phase": "capability_scoping"}, fail: true},
		{name: "payload absent key", input: map[string]any{"operation": "build_decision_payload", "agent_id": "agent:acme.client",
			"policy": policy, "requested_capabilities": []any{"notes.read"}},
			expected: map[string]any{"absent_keys": []any{"phase"}}, fail: true},
		{name: "provenance future", input: map[string]any{"operation": "verify_provenance", "now": "2026-01-01T00:00:00Z",
			"identity_created_at": "2025-01-01T00:00:00.000Z", "earliest_audit_record": "2027-01-01T00:00:00.000Z"},
			expected: map[string]any{"verified": false, "notes_contain": "in the future"}},
		{name: "invalid policy input", input: map[string]any{"operation": "evaluate_policy", "policy": map[string]any{}},
			expected: map[string]any{"approved": false}, fail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.expected == nil {
				tt.expected = map[string]any{}
			}
			err := execOnboarding(nil, &arsiaCase{ID: tt.name, Input: tt.input, Expected: tt.expected})
			switch {
			case tt.unsupported && !errors.Is(err, errUnsupported):
				t.Fatalf("want unsupported, got %v", err)
			case tt.fail && (err == nil || errors.Is(err, errUnsupported)):
				t.Fatalf("want a failure, got %v", err)
			case !tt.unsupported && !tt.fail && err != nil:
				t.Fatal(err)
			}
		})
	}
}
