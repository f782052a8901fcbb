package arsia

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestRiskClassification(t *testing.T) {
	want := map[int]RiskClass{0: MinimalRisk, 2: MinimalRisk, 3: LimitedRisk, 4: LimitedRisk, 5: ElevatedRisk,
		6: ElevatedRisk, 7: HighRisk, 8: HighRisk, 9: CriticalRisk, 10: CriticalRisk}
	for level, class := range want {
		got, err := RiskClassification(level)
		if err != nil || got != class {
			t.Errorf("RiskClassification(%d) = %q, %v; want %q", level, got, err, class)
		}
	}
	for _, level := range []int{-1, 11, 1 << 40} {
		if _, err := RiskClassification(level); !errors.Is(err, ErrRiskLevel) {
			t.Errorf("RiskClassification(%d) error %v", level, err)
		}
	}
}

func TestIsValidTransition(t *testing.T) {
	states := []ExecutionState{StateRequested, StatePendingApproval, StateExecuting, StateCompleted, StateFailed, StateRolledBack, "unknown"}
	allowed := map[[2]ExecutionState]bool{
		{StateRequested, StatePendingApproval}: true, {StateRequested, StateExecuting}: true, {StateRequested, StateFailed}: true,
		{StatePendingApproval, StateExecuting}: true, {StatePendingApproval, StateFailed}: true,
		{StateExecuting, StateCompleted}: true, {StateExecuting, StateFailed}: true,
		{StateCompleted, StateRolledBack}: true,
	}
	for _, from := range states {
		for _, to := range states {
			if got := IsValidTransition(from, to); got != allowed[[2]ExecutionState{from, to}] {
				t.Errorf("IsValidTransition(%s, %s) = %v", from, to, got)
			}
		}
	}
	for s, want := range map[ExecutionState]bool{StateFailed: true, StateRolledBack: true, StateCompleted: false, "x": false} {
		if IsTerminalState(s) != want {
			t.Errorf("IsTerminalState(%s) != %v", s, want)
		}
	}
}

func descriptor(mod func(map[string]any)) map[string]any {
	d := map[string]any{
		"action_id": "com.example.notes/read", "category": "data", "description": "Read notes.",
		"risk_level": 2, "reversible": false, "idempotent": true, "required_capabilities": []any{"notes.read"},
		"human_oversight_required": false, "audit_required": false, "explainability_required": false,
	}
	if mod != nil {
		mod(d)
	}
	return d
}

func TestValidateActionDescriptor(t *testing.T) {
	if issues := ValidateActionDescriptor(descriptor(nil)); len(issues) != 0 {
		t.Fatalf("minimal descriptor: %v", issues)
	}
	full := descriptor(func(d map[string]any) {
		d["risk_level"] = json.Number("9")
		d["audit_required"], d["explainability_required"], d["human_oversight_required"] = true, true, true
		d["optional_capabilities"] = []any{"notes.*"}
		d["retention_days"], d["max_execution_ms"], d["required_approvals"] = 1825, 30000, 2
	})
	if issues := ValidateActionDescriptor(full); len(issues) != 0 {
		t.Fatalf("full descriptor: %v", issues)
	}
	tests := []struct {
		name string
		mod  func(map[string]any)
		want string // substring of an error message
	}{
		{"missing risk", func(d map[string]any) { delete(d, "risk_level") }, "<root>: 'risk_level' is a required property"},
		{"risk too high", func(d map[string]any) { d["risk_level"] = 11 }, "/risk_level: 11 is greater than the maximum of 10"},
		{"risk negative", func(d map[string]any) { d["risk_level"] = -1 }, "-1 is less than the minimum of 0"},
		{"risk float", func(d map[string]any) { d["risk_level"] = 2.5 }, "2.5 is not of type 'integer'"},
		{"risk bool", func(d map[string]any) { d["risk_level"] = true }, "True is not of type 'integer'"},
		{"risk 5 no audit", func(d map[string]any) { d["risk_level"] = 5 }, "/audit_required: True was expected"},
		{"risk 7 no explainability", func(d map[string]any) { d["risk_level"], d["audit_required"] = 7, true }, "/explainability_required: True was expected"},
		{"risk 9 no oversight", func(d map[string]any) {
			d["risk_level"], d["audit_required"], d["explainability_required"] = 9, true, true
		}, "/human_oversight_required: True was expected"},
		{"bad category", func(d map[string]any) { d["category"] = "misc" }, "'misc' is not one of ['data', 'communication', 'financial', 'system', 'oversight']"},
		{"bad action id", func(d map[string]any) { d["action_id"] = "9bad" }, "'9bad' does not match"},
		{"long description", func(d map[string]any) { d["description"] = strings.Repeat("x", 513) }, "is too long"},
		{"bool type", func(d map[string]any) { d["reversible"] = "no" }, "'no' is not of type 'boolean'"},
		{"empty caps", func(d map[string]any) { d["required_capabilities"] = []any{} }, "[] should be non-empty"},
		{"dup caps", func(d map[string]any) { d["required_capabilities"] = []any{"a.b", "a.b"} }, "has non-unique elements"},
		{"bad cap", func(d map[string]any) { d["required_capabilities"] = []any{"read"} }, "'read' does not match"},
		{"caps not list", func(d map[string]any) { d["required_capabilities"] = "a.b" }, "is not of type 'array'"},
		{"retention 0", func(d map[string]any) { d["retention_days"] = 0 }, "0 is less than the minimum of 1"},
		{"max_execution_ms", func(d map[string]any) { d["max_execution_ms"] = 99 }, "99 is less than the minimum of 100"},
		{"extra", func(d map[string]any) { d["zzz"] = 1 }, "Additional properties are not allowed ('zzz' was unexpected)"},
	}
	for _, tc := range tests {
		issues := ErrorIssues(ValidateActionDescriptor(descriptor(tc.mod)))
		found := false
		for _, is := range issues {
			found = found || strings.Contains(is.Message, tc.want)
		}
		if !found {
			t.Errorf("%s: no issue contains %q: %v", tc.name, tc.want, issues)
		}
	}
	if issues := ValidateActionDescriptor("x"); len(issues) != 1 {
		t.Errorf("non-object: %v", issues)
	}
	// Risk 3-4 without audit: a warning only.
	issues := ValidateActionDescriptor(descriptor(func(d map[string]any) { d["risk_level"] = 3 }))
	if len(issues) != 1 || issues[0].Code != IssueRisk34AuditRecommended || issues[0].Severity != SeverityWarning || len(ErrorIssues(issues)) != 0 {
		t.Errorf("risk 3 warning: %v", issues)
	}
	if issues := ValidateActionDescriptor(descriptor(func(d map[string]any) { d["risk_level"], d["audit_required"] = 4, true })); len(issues) != 0 {
		t.Errorf("risk 4 with audit: %v", issues)
	}
}

func explanation(mod func(map[string]any)) map[string]any {
	e := map[string]any{"reasoning": "Matched the scope.", "confidence": json.Number("0.93"), "inputs_used": []any{"state:notes/42"}}
	if mod != nil {
		mod(e)
	}
	return e
}

func TestValidateExplanation(t *testing.T) {
	ok := explanation(func(e map[string]any) {
		e["alternatives_considered"] = []any{map[string]any{"option": "a", "reason_rejected": "b", "confidence": 0.1}}
		e["model_version"] = "m-1"
		e["decision_timestamp"] = "2026-05-07T10:30:00.000Z"
		e["confidence"] = 1
	})
	if issues := ValidateExplanation(ok); len(issues) != 0 {
		t.Fatalf("valid explanation: %v", issues)
	}
	tests := []struct {
		name string
		mod  func(map[string]any)
		want string
	}{
		{"no reasoning", func(e map[string]any) { delete(e, "reasoning") }, "'reasoning' is a required property"},
		{"empty reasoning", func(e map[string]any) { e["reasoning"] = "" }, "'' should be non-empty"},
		{"long reasoning", func(e map[string]any) { e["reasoning"] = strings.Repeat("é", 4097) }, "is too long"},
		{"no confidence", func(e map[string]any) { delete(e, "confidence") }, "'confidence' is a required property"},
		{"confidence > 1", func(e map[string]any) { e["confidence"] = 1.5 }, "1.5 is greater than the maximum of 1.0"},
		{"confidence < 0", func(e map[string]any) { e["confidence"] = json.Number("-0.5") }, "-0.5 is less than the minimum of 0.0"},
		{"confidence str", func(e map[string]any) { e["confidence"] = "high" }, "'high' is not of type 'number'"},
		{"confidence bool", func(e map[string]any) { e["confidence"] = true }, "True is not of type 'number'"},
		{"no inputs", func(e map[string]any) { delete(e, "inputs_used") }, "'inputs_used' is a required property"},
		{"empty inputs", func(e map[string]any) { e["inputs_used"] = []any{} }, "[] should be non-empty"},
		{"dup inputs", func(e map[string]any) { e["inputs_used"] = []any{"a", "a"} }, "has non-unique elements"},
		{"inputs type", func(e map[string]any) { e["inputs_used"] = []any{1} }, "1 is not of type 'string'"},
		{"alt missing", func(e map[string]any) { e["alternatives_considered"] = []any{map[string]any{"option": "a"}} }, "'reason_rejected' is a required property"},
		{"alt conf", func(e map[string]any) {
			e["alternatives_considered"] = []any{map[string]any{"option": "a", "reason_rejected": "b", "confidence": 2}}
		}, "2 is greater than the maximum of 1.0"},
		{"bad ts", func(e map[string]any) { e["decision_timestamp"] = "2026-05-07T10:30:00Z" }, "does not match"},
		{"extra", func(e map[string]any) { e["raw_logits"] = []any{} }, "Additional properties are not allowed"},
	}
	for _, tc := range tests {
		issues := ValidateExplanation(explanation(tc.mod))
		found := false
		for _, is := range issues {
			found = found || strings.Contains(is.Message, tc.want)
		}
		if !found {
			t.Errorf("%s: no issue contains %q: %v", tc.name, tc.want, issues)
		}
	}
}

func TestCheckDecisionTimestamp(t *testing.T) {
	if err := CheckDecisionTimestamp("2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"); err != nil {
		t.Errorf("equal: %v", err)
	}
	err := CheckDecisionTimestamp("2026-01-01T00:00:00.001Z", "2026-01-01T00:00:00.000Z")
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != IssueDecisionTimestampAfterEnvelope || !errors.Is(err, ErrDecisionAfterEnvelope) {
		t.Errorf("after: %v", err)
	}
	if err := CheckDecisionTimestamp("yesterday", "2026-01-01T00:00:00.000Z"); !errors.Is(err, ErrInvalidTimestamp) {
		t.Errorf("bad: %v", err)
	}
}
