package compliance_test

import (
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
)

func ExampleApply() {
	env := map[string]any{
		"intent": "request",
		"compliance": map[string]any{
			"profile":        "MIFID-II",
			"retention_days": 90,
		},
	}
	out, warnings, err := compliance.Apply(env, nil, true)
	if err != nil {
		panic(err)
	}
	comp := out["compliance"].(map[string]any)
	fmt.Println(comp["retention_days"], comp["legal_basis"], comp["data_residency"], comp["human_oversight"])
	fmt.Println(warnings[0])
	// Output:
	// 1827 contract EU required_before_execution
	// retention_days 90 is below profile MIFID-II minimum 1827 — using profile minimum
}

func ExampleValidate() {
	env := map[string]any{
		"intent": "request",
		"compliance": map[string]any{
			"pii_involved":             true,
			"ai_system_classification": "high-risk",
		},
	}
	for _, v := range compliance.Validate(env, nil, compliance.Options{IdentityClassification: "limited-risk"}) {
		fmt.Println(v.Code)
		fmt.Println("  " + v.Message)
	}
	// Output:
	// missing_legal_basis
	//   R2: compliance.legal_basis is required when pii_involved=true (GDPR Art. 6)
	// missing_profile
	//   R7: compliance profile required when ai_system_classification='high-risk' (Identity §4.2)
	// classification_escalation
	//   R6: per-message classification 'high-risk' escalates above agent-level 'limited-risk' (Identity §1.2)
}

func ExampleRegistry_Get() {
	p, ok := compliance.Default().Get("DORA")
	fmt.Println(ok, *p.Defaults.RetentionDays, p.Defaults.HumanOversight, p.Defaults.ClockSkewSeconds)
	fmt.Println(compliance.Default().Names())
	// Output:
	// true 1827 required_within_24h 60
	// [DORA DSA-VLOP EU-AI-ACT-HIGH-RISK EU-AI-ACT-LIMITED-RISK GDPR-STANDARD MIFID-II PAC-AGRICULTURE]
}

func ExampleClockSkew() {
	env := map[string]any{"compliance": map[string]any{"profile": "EU-AI-ACT-HIGH-RISK"}}
	fmt.Println(compliance.ClockSkew(env, nil), compliance.ClockSkew(map[string]any{}, nil))
	// Output: 2m0s 5m0s
}

func ExampleCheckOversightTimeout() {
	env := map[string]any{"compliance": map[string]any{"profile": "DSA-VLOP"}}
	received := time.Date(2026, 4, 16, 12, 0, 0, 0, time.UTC)
	now := received.Add(25 * time.Hour)
	for _, v := range compliance.CheckOversightTimeout(env, nil, nil, received, now) {
		fmt.Println(v.Message)
	}
	// Output:
	// oversight_timeout: human_oversight=required_within_24h but not reviewed by the deadline 2026-04-17T12:00:00.000Z (received 2026-04-16T12:00:00.000Z)
}

func ExampleNewAuditRecord() {
	env := map[string]any{
		"id": "12345678-0000-4000-8000-0000000c0c03", "from": "agent:acme.sender", "to": "agent:acme.receiver",
		"intent":     "request",
		"payload":    map[string]any{"type": "arsiaprotocol.mcp/tool-call", "tool": "example"},
		"compliance": map[string]any{"profile": "EU-AI-ACT-HIGH-RISK"},
	}
	rec, err := compliance.NewAuditRecord(env, nil, compliance.AuditInput{
		RecordID:    "00000000-0000-4000-8000-000000000001",
		EventType:   "request",
		OperatorID:  "agent:acme.operator",
		ProcessedAt: time.Date(2026, 4, 16, 12, 0, 0, 0, time.UTC),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.ComplianceProfile, rec.PayloadType, rec.HumanOversightStatus, rec.RetainedUntil)
	// Output: EU-AI-ACT-HIGH-RISK arsiaprotocol.mcp/tool-call pending 2026-10-13T12:00:00.000Z
}
