package conformance

import (
	"errors"
	"testing"
)

func TestArsiaAssets(t *testing.T) { checkArsiaCategory(t, "assets", execAssets) }

// TestArsiaAssetsExecutorFails checks that the assets executor reports
// mismatches instead of passing everything; it needs no ../shared.
func TestArsiaAssetsExecutorFails(t *testing.T) {
	args := map[string]any{"amount": 100.5, "currency_or_unit": "EUR", "asset_type": "currency",
		"from_agent": "agent:acme.alpha", "to_agent": "agent:acme.beta", "payment_reference": "p",
		"description": "d", "idempotency_key": "k"}
	cases := []*arsiaCase{
		{ID: "valid wanted invalid", Input: map[string]any{"operation": "validate_transfer_request", "args": args},
			Expected: map[string]any{"valid": false}},
		{ID: "keyword", Input: map[string]any{"operation": "validate_transfer_request", "args": map[string]any{}},
			Expected: map[string]any{"valid": false, "error_contains": "precision"}},
		{ID: "error_code", Input: map[string]any{"operation": "validate_escrow_dispute", "args": map[string]any{}},
			Expected: map[string]any{"valid": false, "error_code": "forbidden"}},
		{ID: "transition", Input: map[string]any{"operation": "escrow_transition", "from_state": "RELEASED", "to_state": "RETURNED"},
			Expected: map[string]any{"valid": true}},
		{ID: "sca", Input: map[string]any{"operation": "requires_psd2_sca", "risk_level": 7},
			Expected: map[string]any{"required": false}},
		{ID: "dora", Input: map[string]any{"operation": "classify_dora_incident", "failure_reason": "weird"},
			Expected: map[string]any{"incident_type": "unknown"}},
		{ID: "levels", Input: map[string]any{"operation": "capability_risk_levels"},
			Expected: map[string]any{"levels": map[string]any{"arsiaprotocol.assets.audit.read": 3}}},
		{ID: "exempt", Input: map[string]any{"operation": "is_sca_exempt", "amount": 31.0, "currency": "EUR"},
			Expected: map[string]any{"exempt": true}},
		{ID: "required_keys", Input: map[string]any{"operation": "build_reversal_audit", "fields": map[string]any{
			"audit_id": "55555555-5555-4555-8555-555555555555", "created_at": "2026-04-13T12:00:00.000Z",
			"original_audit_id": "11111111-1111-4111-8111-111111111111", "original_payment_reference": "pay-001",
			"reversal_payment_reference": "pay-001-REV-1", "reversal_reason": "r", "requested_by": "agent:acme.alpha"}},
			Expected: map[string]any{"required_keys": []any{"nope"}}},
		{ID: "unknown field", Input: map[string]any{"operation": "build_escrow_audit", "sub_type": "escrow_created",
			"fields": map[string]any{"bogus": 1}}, Expected: map[string]any{}},
		{ID: "missing vector", Input: map[string]any{"operation": "validate_transfer_request", "vector_id": "INV-09"},
			Expected: map[string]any{"valid": false}},
	}
	env := &arsiaEnv{vectors: map[string]map[string]any{}}
	for _, c := range cases {
		if err := execAssets(env, c); err == nil {
			t.Errorf("%s: passed, want a failure", c.ID)
		}
	}
	err := execAssets(env, &arsiaCase{Input: map[string]any{"operation": "nope"}, Expected: map[string]any{}})
	if !errors.Is(err, errUnsupported) {
		t.Errorf("unknown operation: %v", err)
	}
}
