package main

import (
	"errors"
	"testing"

	"github.com/custos-runtime/custos/conformance"
)

// The live runner against the gateway it starts, on cases written here in
// the upstream suites' shape: each passes, and each fails when its
// expectation is changed to what the gateway does not do.
func TestLiveTarget(t *testing.T) {
	target, err := startLiveTarget(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	state := func(id string, input, expected map[string]any) conformance.LiveCase {
		return conformance.LiveCase{ID: id, Category: "state", SkipUntil: "state-storage", Input: input, Expected: expected}
	}
	cert := func(level string) conformance.LiveCase {
		return conformance.LiveCase{ID: "CERT-" + level, Category: "certificates", SkipUntil: "certificate-authority",
			Input: map[string]any{"operation": "compute_trust_level"}, Expected: map[string]any{"trust_level": level}}
	}
	as := func(op string, expected map[string]any) conformance.LiveCase {
		return conformance.LiveCase{ID: "AS-" + op, Category: "authorization", SkipUntil: "authorization-server",
			Input: map[string]any{"operation": op, "agent_id": liveAgent}, Expected: expected}
	}
	flow := func(op string, expected map[string]any) conformance.LiveCase {
		return conformance.LiveCase{ID: "ONBOARD-" + op, Category: "onboarding", SkipUntil: "multi-agent-flow",
			Input: map[string]any{"operation": op, "agent_id": liveAgent}, Expected: expected}
	}
	const demo = "agent:external.demo"
	for _, tc := range []struct {
		c    conformance.LiveCase
		pass bool
	}{
		{state("RT", map[string]any{"operation": "set_then_get", "key": demo + "/agent/rt"}, map[string]any{"valid": true}), true},
		{state("RT-neg", map[string]any{"operation": "set_then_get", "key": demo + "/agent/rt"}, map[string]any{"valid": false}), false},
		{state("VERSION", map[string]any{"operation": "version_conflict", "key": demo + "/agent/v"}, map[string]any{"error_code": "conflict"}), true},
		{state("VERSION-neg", map[string]any{"operation": "version_conflict", "key": demo + "/agent/v"}, map[string]any{"error_code": "not_found"}), false},
		{state("QUERY", map[string]any{"operation": "query", "key_prefix": demo + "/agent/", "scope": "agent"}, map[string]any{"valid": true}), true},
		{state("QUERY-neg", map[string]any{"operation": "query", "key_prefix": demo + "/agent/", "scope": "shared"}, map[string]any{"valid": true}), false},
		{state("SNAPSHOT", map[string]any{"operation": "snapshot", "as_of": "2026-04-13T12:00:00.000Z"}, map[string]any{"valid": true}), true},
		{state("DELETE", map[string]any{"operation": "delete_missing", "key": demo + "/agent/ghost"}, map[string]any{"result": nil}), true},
		{state("DELETE-neg", map[string]any{"operation": "delete_missing", "key": demo + "/agent/ghost"}, map[string]any{"result": "x"}), false},
		{cert("L2"), true},
		{cert("L3"), true},
		{as("live_as_metadata", map[string]any{"valid": true}), true},
		{as("live_as_metadata", map[string]any{"valid": false}), false},
		{as("live_token_request", map[string]any{"valid": true}), true},
		{as("live_token_introspection", map[string]any{"valid": true}), true},
		{as("issue_token", map[string]any{"status": 200}), true},
		{as("issue_token", map[string]any{"status": 401}), false},
		{flow("phase1_step_order", map[string]any{"steps_in_order": true}), true},
		{flow("phase1_step_order", map[string]any{"steps_in_order": false}), false},
	} {
		err := target.Run(tc.c)
		if tc.pass && err != nil {
			t.Errorf("%s: %v", tc.c.ID, err)
		}
		if !tc.pass && (err == nil || errors.Is(err, conformance.ErrLiveUnsupported)) {
			t.Errorf("%s passed (or was skipped): %v", tc.c.ID, err)
		}
	}
	// What it cannot run stays skipped.
	for _, c := range []conformance.LiveCase{
		flow("teleport", nil),
		state("OTHER", map[string]any{"operation": "teleport"}, nil),
		cert("L9"),
	} {
		if err := target.Run(c); !errors.Is(err, conformance.ErrLiveUnsupported) {
			t.Errorf("%s: %v, want ErrLiveUnsupported", c.ID, err)
		}
	}
}
