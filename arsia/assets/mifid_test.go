package assets

import (
	"errors"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/arsia/schema"
)

func TestEnforceMiFIDRetention(t *testing.T) {
	env := func(comp map[string]any) map[string]any { return map[string]any{"compliance": comp} }
	tests := []struct {
		name string
		env  map[string]any
		ok   bool
	}{
		{"365 days", env(map[string]any{"retention_days": 365}), false},
		{"1824 days", env(map[string]any{"retention_days": 1824}), false},
		{"1825 days", env(map[string]any{"retention_days": 1825}), true},
		{"MIFID-II 1825", env(map[string]any{"profile": "MIFID-II", "retention_days": 1825}), true},
		{"MIFID-II default", env(map[string]any{"profile": "MIFID-II"}), true},
		{"GDPR without retention", env(map[string]any{"profile": "GDPR-STANDARD"}), false},
		{"no compliance", map[string]any{}, false},
		{"compliance not an object", map[string]any{"compliance": "MIFID-II"}, false},
	}
	for _, tt := range tests {
		err := EnforceMiFIDRetention(tt.env, nil)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
		if err != nil && (!errors.Is(err, ErrMiFIDRetention) || !strings.Contains(err.Error(), "MiFID")) {
			t.Errorf("%s: error %v", tt.name, err)
		}
	}
}

func TestBuildMiFIDAuditRecord(t *testing.T) {
	request := map[string]any{
		"id": "f47ac10b-58cc-4372-a567-0e02b2c3d479", "ts": "2026-03-24T14:30:00.000Z",
		"compliance": map[string]any{"profile": "MIFID-II", "data_residency": "EU", "retention_days": 1825},
		"payload":    map[string]any{"type": PayloadTransferRequest, "args": with(validRequest(), "amount", 1500.00)},
	}
	receipt := map[string]any{
		"id": "b2c3d4e5-6789-4bcd-a012-ef4567890123",
		"payload": map[string]any{"type": PayloadTransferReceipt, "result": with(validReceipt(), "amount", 1500.00,
			"provider_reference", "SEPA-UETR-1")},
	}
	in := MiFIDAuditInput{AuditID: "c3d4e5f6-7890-4cde-b123-f56789012345", Request: request, Receipt: receipt,
		HumanOversightStatus: OversightApproved, ApproverID: "agent:acme.senior-compliance",
		ApprovalTimestamp: ts("2026-03-24T14:30:03Z"), CreatedAt: ts("2026-03-24T14:30:01Z"), UpdatedAt: ts("2026-03-24T14:30:12Z")}
	rec, err := BuildMiFIDAuditRecord(in)
	if err != nil {
		t.Fatal(err)
	}
	if rec["status"] != "completed" || rec["compliance_profile"] != "MIFID-II" || rec["amount"].(interface{ String() string }).String() != "1500" ||
		rec["receipt_message_id"] != receipt["id"] || rec["provider_reference"] != "SEPA-UETR-1" || len(rec["payload_hash"].(string)) != 64 {
		t.Errorf("record %v", rec)
	}
	if errs, verr := schema.Validate(rec, schemaMiFID); verr != nil || len(errs) > 0 {
		t.Errorf("schema: %v %v", verr, errs)
	}
	pending := in
	pending.Receipt, pending.ApproverID, pending.ApprovalTimestamp, pending.HumanOversightStatus = nil, "", ts("0001-01-01T00:00:00Z"), ""
	rec, err = BuildMiFIDAuditRecord(pending)
	if err != nil || rec["status"] != "pending" || rec["human_oversight_status"] != "not_required" || rec["initiated_at"] != request["ts"] {
		t.Errorf("pending record %v, %v", rec, err)
	}

	bad := []func(*MiFIDAuditInput){
		func(m *MiFIDAuditInput) { m.AuditID = "nope" },
		func(m *MiFIDAuditInput) { m.CreatedAt = ts("0001-01-01T00:00:00Z") },
		func(m *MiFIDAuditInput) { m.ApproverID = "" },
		func(m *MiFIDAuditInput) { m.HumanOversightStatus = "maybe" },
		func(m *MiFIDAuditInput) { m.Request = map[string]any{} },
		func(m *MiFIDAuditInput) {
			m.Receipt = map[string]any{"payload": map[string]any{"result": with(validReceipt(), "payment_reference", "other")}}
		},
	}
	for i, mutate := range bad {
		x := in
		mutate(&x)
		if _, err := BuildMiFIDAuditRecord(x); err == nil {
			t.Errorf("bad input %d accepted", i)
		}
	}
}
