package conformance

import (
	"errors"
	"testing"
)

func TestArsiaCompliance(t *testing.T) { checkArsiaCategory(t, "compliance", execCompliance) }

// TestArsiaComplianceExecutorFails checks that the executor reports
// mismatches instead of passing everything.
func TestArsiaComplianceExecutorFails(t *testing.T) {
	mifid := map[string]any{"compliance": map[string]any{"profile": "MIFID-II", "retention_days": 90}}
	cases := []*arsiaCase{
		{ID: "exists", Input: map[string]any{"operation": "get_profile", "profile_name": "NOPE"},
			Expected: map[string]any{"exists": true}},
		{ID: "names", Input: map[string]any{"operation": "get_profile_names"},
			Expected: map[string]any{"names": []any{"DORA"}}},
		{ID: "valid", Input: map[string]any{"operation": "validate_compliance", "envelope": mifid},
			Expected: map[string]any{"valid": true}},
		{ID: "keyword", Input: map[string]any{"operation": "validate_compliance", "envelope": mifid},
			Expected: map[string]any{"valid": false, "error_contains": "R5"}},
		{ID: "after", Input: map[string]any{"operation": "apply_profile", "envelope": mifid},
			Expected: map[string]any{"compliance_after": map[string]any{"retention_days": 90}}},
		{ID: "warning", Input: map[string]any{"operation": "apply_profile", "envelope": mifid},
			Expected: map[string]any{"warning_contains": "profile unknown"}},
		{ID: "raises", Input: map[string]any{"operation": "apply_profile", "envelope": mifid},
			Expected: map[string]any{"raises": true}},
		{ID: "audit", Input: map[string]any{"operation": "audit_from_envelope", "envelope": mifid, "event_type": "request",
			"operator_id": "op"}, Expected: map[string]any{"audit": map[string]any{"compliance_profile": "MIFID-II"}}},
		{ID: "no envelope", Input: map[string]any{"operation": "validate_compliance"}, Expected: map[string]any{}},
	}
	for _, c := range cases {
		if err := execCompliance(nil, c); err == nil {
			t.Errorf("%s: passed, want a failure", c.ID)
		}
	}
	err := execCompliance(nil, &arsiaCase{Input: map[string]any{"operation": "nope"}, Expected: map[string]any{}})
	if !errors.Is(err, errUnsupported) {
		t.Errorf("unknown operation: %v", err)
	}
}
