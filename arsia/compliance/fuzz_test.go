package compliance

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzValidate feeds arbitrary JSON to every entry point that reads an
// envelope: none may panic, and none may modify its input.
func FuzzValidate(f *testing.F) {
	seeds := []string{
		`{}`,
		`{"compliance":null}`,
		`{"compliance":"x"}`,
		`{"compliance":{"profile":"MIFID-II","retention_days":90}}`,
		`{"compliance":{"profile":"NOPE","pii_involved":true,"legal_basis":7}}`,
		`{"intent":"request","compliance":{"ai_system_classification":"high-risk","data_residency":"BRAZIL"}}`,
		`{"compliance":{"profile":"DSA-VLOP","retention_days":1e308,"human_oversight":["x"]}}`,
		`{"compliance":{"profile":"PAC-AGRICULTURE","retention_days":-5}}`,
		`{"id":"i","from":"f","to":"t","intent":"event","payload":"jwe","security":{"encrypted":true},"compliance":{}}`,
		`{"payload":{"explanation":{"reasoning":"r","confidence":2,"inputs_used":[1,1]}},"compliance":{"explainability_required":true}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), "minimal-risk")
	}
	received := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte, identity string) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var env map[string]any
		if dec.Decode(&env) != nil {
			return
		}
		before, err := json.Marshal(env)
		if err != nil {
			return
		}
		for _, strict := range []bool{false, true} {
			for _, v := range Validate(env, nil, Options{Strict: strict, IdentityClassification: identity}) {
				if v.Code == "" || v.Message == "" {
					t.Fatalf("empty violation %+v", v)
				}
			}
			if out, _, err := Apply(env, nil, strict); err == nil && out != nil {
				// Inheritance is idempotent: its output is a fixed point.
				again, _, err := Apply(out, nil, false)
				if err != nil {
					t.Fatalf("Apply(Apply(env)) failed: %v", err)
				}
				a, _ := json.Marshal(out)
				b, _ := json.Marshal(again)
				if !bytes.Equal(a, b) {
					t.Fatalf("Apply is not idempotent:\n%s\n%s", a, b)
				}
			}
		}
		ClockSkew(env, nil)
		EffectiveRetentionDays(env, nil)
		ValidateExplainability(env, env, nil)
		CheckOversightTimeout(env, nil, nil, received, received.Add(48*time.Hour))
		NewAuditRecord(env, nil, AuditInput{RecordID: "00000000-0000-4000-8000-000000000000",
			EventType: "request", OperatorID: "op", ProcessedAt: received, RetentionDays: 1})
		after, _ := json.Marshal(env)
		if !bytes.Equal(before, after) {
			t.Fatalf("input modified:\n%s\n%s", before, after)
		}
	})
}
