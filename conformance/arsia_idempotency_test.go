package conformance

import (
	"errors"
	"testing"
)

func TestArsiaIdempotency(t *testing.T) { checkArsiaCategory(t, "idempotency", execIdempotency) }

// TestArsiaRouting is strict: every routing case passes.
func TestArsiaRouting(t *testing.T) { checkArsiaCategory(t, "routing", execRouting) }

// TestArsiaIdempotencyExecutorFails checks that the executors report
// mismatches instead of passing everything.
func TestArsiaIdempotencyExecutorFails(t *testing.T) {
	env := map[string]any{"v": "1.0", "id": "11111111-1111-4111-9111-111111111111", "ts": "2026-04-14T12:00:00.000Z",
		"from": "agent:acme.alpha", "to": "agent:acme.beta", "intent": "request",
		"payload": map[string]any{"type": "arsiaprotocol.state/set"}}
	cases := []*arsiaCase{
		{ID: "key valid", Input: map[string]any{"operation": "validate_key", "key": ""}, Expected: map[string]any{"valid": true}},
		{ID: "key keyword", Input: map[string]any{"operation": "validate_key", "key": ""},
			Expected: map[string]any{"valid": false, "error_contains": "at most"}},
		{ID: "scope", Input: map[string]any{"operation": "scope_tuple", "envelope": env},
			Expected: map[string]any{"from": "agent:acme.beta"}},
		{ID: "resolve", Input: map[string]any{"operation": "resolve_key", "envelope": env, "header_key": "h"},
			Expected: map[string]any{"key": nil}},
		{ID: "expired", Input: map[string]any{"operation": "is_record_expired", "expires_at": "x", "now": "2026-04-14T12:00:00.000Z"},
			Expected: map[string]any{"expired": false}},
		{ID: "floor", Input: map[string]any{"operation": "compute_expiry", "header_only": true, "now": "2026-04-14T12:00:00.000Z"},
			Expected: map[string]any{"min_expires_at": "2026-04-16T12:00:00.000Z"}},
		{ID: "lifecycle", Input: map[string]any{"operation": "in_progress_lifecycle", "envelope": env, "key": "k"},
			Expected: map[string]any{"second_mark": true}},
		{ID: "no envelope", Input: map[string]any{"operation": "scope_tuple"}, Expected: map[string]any{}},
	}
	for _, c := range cases {
		if err := execIdempotency(nil, c); err == nil {
			t.Errorf("%s: passed, want a failure", c.ID)
		}
	}
	err := execIdempotency(nil, &arsiaCase{Input: map[string]any{"operation": "nope"}, Expected: map[string]any{}})
	if !errors.Is(err, errUnsupported) {
		t.Errorf("unknown operation: %v", err)
	}
}

// TestArsiaRoutingExecutorFails is the same check for execRouting.
func TestArsiaRoutingExecutorFails(t *testing.T) {
	env := map[string]any{"v": "1.0", "id": "11111111-1111-4111-9111-111111111111", "ts": "2026-04-14T12:00:00.000Z",
		"from": "agent:acme.alpha", "to": "agent:acme.beta", "intent": "request",
		"payload": map[string]any{"type": "arsiaprotocol.state/set"}, "compliance": map[string]any{"data_residency": "EU"}}
	broker := map[string]any{"agent_id": "agent:b.one", "inbox": "https://b1/inbox", "jurisdiction": "PT",
		"residency_zones": []any{"EU"}, "health": "healthy", "last_health_check": "2026-04-14T12:00:00.000Z"}
	cases := []*arsiaCase{
		{ID: "topology", Input: map[string]any{"operation": "select_topology", "envelope": env},
			Expected: map[string]any{"topology": "direct"}},
		{ID: "topology error", Input: map[string]any{"operation": "select_topology", "envelope": env, "brokers": []any{broker}},
			Expected: map[string]any{"error": map[string]any{"code": "service_unavailable"}}},
		{ID: "entry", Input: map[string]any{"operation": "validate_broker_entry", "entry": broker},
			Expected: map[string]any{"valid": false}},
		{ID: "member", Input: map[string]any{"operation": "is_eu_eea_member", "country_code": "CH"},
			Expected: map[string]any{"is_member": true}},
		{ID: "priority", Input: map[string]any{"operation": "select_broker_by_priority", "zone": "US", "brokers": []any{broker}},
			Expected: map[string]any{"selected_agent_id": "agent:b.one"}},
		{ID: "lifecycle", Input: map[string]any{"operation": "lifecycle_transition", "from_state": "responded", "to_state": "expired"},
			Expected: map[string]any{"valid": true}},
		{ID: "rate", Input: map[string]any{"operation": "parse_rate_limit_headers", "headers": map[string]any{"retry-after": "7"}},
			Expected: map[string]any{"retry_after_seconds": 8}},
		{ID: "prio", Input: map[string]any{"operation": "resolve_priority", "envelope": env},
			Expected: map[string]any{"priority": 7}},
		{ID: "retry", Input: map[string]any{"operation": "compute_retry_delay", "attempt": 7},
			Expected: map[string]any{"delay_seconds": 64.0}},
		{ID: "audit", Input: map[string]any{"operation": "build_relay_audit_record", "envelope": env,
			"broker_agent_id": "agent:b.one", "forwarding_result": "success"},
			Expected: map[string]any{"fields": map[string]any{"forwarding_result": "failure"}}},
	}
	for _, c := range cases {
		if err := execRouting(nil, c); err == nil {
			t.Errorf("%s: passed, want a failure", c.ID)
		}
	}
}
