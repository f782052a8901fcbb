package compliance

import (
	"reflect"
	"strings"
	"testing"
)

func rulesOf(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Rule+" "+v.Code)
	}
	return out
}

func TestValidateRules(t *testing.T) {
	// A registry where R3 is reachable: HIGH has no human_oversight default.
	custom, err := Load([]byte(`{"profiles": {` + gdprOnly + `, "HIGH": {"defaults": {"audit_required": true}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		env    string
		reg    *Registry
		opts   Options
		want   []string // "Rule code"
		prefix string   // start of the first message
	}{
		// R1
		{"R1 strict unknown", `{"compliance":{"profile":"NOT-A-REAL-PROFILE","pii_involved":false}}`, nil, Options{Strict: true},
			[]string{"R1 unknown_profile"}, "R1: unknown compliance profile 'NOT-A-REAL-PROFILE'"},
		{"R1 lenient unknown", `{"compliance":{"profile":"NOT-A-REAL-PROFILE","pii_involved":false}}`, nil, Options{}, nil, ""},
		{"R1 strict known", `{"compliance":{"profile":"DORA"}}`, nil, Options{Strict: true}, nil, ""},
		{"R1 strict empty name", `{"compliance":{"profile":""}}`, nil, Options{Strict: true}, []string{"R1 unknown_profile"}, "R1: unknown compliance profile ''"},
		// R2
		{"R2 missing", `{"compliance":{"profile":"GDPR-STANDARD","pii_involved":true}}`, nil, Options{},
			[]string{"R2 missing_legal_basis"}, "R2: compliance.legal_basis is required when pii_involved=true"},
		{"R2 empty", `{"compliance":{"pii_involved":true,"legal_basis":""}}`, nil, Options{}, []string{"R2 missing_legal_basis"}, "R2: "},
		{"R2 not a ground", `{"compliance":{"pii_involved":true,"legal_basis":"because"}}`, nil, Options{},
			[]string{"R2 missing_legal_basis"}, "R2: compliance.legal_basis 'because' is not a GDPR"},
		{"R2 present", `{"compliance":{"profile":"GDPR-STANDARD","pii_involved":true,"legal_basis":"consent"}}`, nil, Options{}, nil, ""},
		{"R2 Art. 9 ground", `{"compliance":{"pii_involved":true,"legal_basis":"health_medicine"}}`, nil, Options{}, nil, ""},
		{"R2 inherited", `{"compliance":{"profile":"DSA-VLOP"}}`, nil, Options{}, nil, ""},
		{"R2 string pii is not true", `{"compliance":{"pii_involved":"true"}}`, nil, Options{}, nil, ""},
		// R3
		{"R3 missing", `{"intent":"event","compliance":{"profile":"HIGH","ai_system_classification":"high-risk"}}`, custom, Options{},
			[]string{"R3 missing_human_oversight"}, "R3: compliance.human_oversight is required when ai_system_classification='high-risk'"},
		{"R3 unknown mode", `{"intent":"event","compliance":{"profile":"HIGH","ai_system_classification":"high-risk","human_oversight":"later"}}`, custom, Options{},
			[]string{"R3 missing_human_oversight"}, "R3: "},
		{"R3 present", `{"intent":"event","compliance":{"profile":"HIGH","ai_system_classification":"high-risk","human_oversight":"required_post_execution"}}`, custom, Options{}, nil, ""},
		{"R3 limited-risk", `{"intent":"event","compliance":{"profile":"HIGH","ai_system_classification":"limited-risk"}}`, custom, Options{}, nil, ""},
		// R7
		{"R7 no profile", `{"intent":"request","compliance":{"ai_system_classification":"high-risk"}}`, nil, Options{},
			[]string{"R7 missing_profile"}, "R7: compliance profile required when ai_system_classification='high-risk' (Identity §4.2)"},
		{"R7 no intent", `{"compliance":{"ai_system_classification":"high-risk"}}`, nil, Options{}, []string{"R7 missing_profile"}, "R7: "},
		{"R7 unknown profile", `{"intent":"response","compliance":{"profile":"X","ai_system_classification":"high-risk"}}`, nil, Options{},
			[]string{"R7 missing_profile"}, "R7: "},
		{"R7 unacceptable-risk", `{"intent":"request","compliance":{"ai_system_classification":"unacceptable-risk"}}`, nil, Options{},
			[]string{"R7 missing_profile"}, "R7: compliance profile required when ai_system_classification='unacceptable-risk'"},
		{"R7 event exempt", `{"intent":"event","compliance":{"ai_system_classification":"high-risk"}}`, nil, Options{}, nil, ""},
		{"R7 error exempt", `{"intent":"error","compliance":{"ai_system_classification":"high-risk"}}`, nil, Options{}, nil, ""},
		{"R7 declared", `{"intent":"request","compliance":{"profile":"EU-AI-ACT-HIGH-RISK","ai_system_classification":"high-risk"}}`, nil, Options{}, nil, ""},
		// R4
		{"R4 MIFID-II raw too low", `{"compliance":{"profile":"MIFID-II","retention_days":90,"legal_basis":"contract"}}`, nil, Options{},
			[]string{"R4 insufficient_retention"}, "R4: MIFID-II requires retention_days >= 1827, got 90"},
		{"R4 MIFID-II exact floor", `{"compliance":{"profile":"MIFID-II","retention_days":1827,"legal_basis":"contract"}}`, nil, Options{}, nil, ""},
		{"R4 MIFID-II inherited", `{"compliance":{"profile":"MIFID-II"}}`, nil, Options{}, nil, ""},
		{"R4 DORA", `{"compliance":{"profile":"DORA","retention_days":1826}}`, nil, Options{},
			[]string{"R4 insufficient_retention"}, "R4: DORA requires retention_days >= 1827, got 1826"},
		{"R4 not a number", `{"compliance":{"profile":"PAC-AGRICULTURE","retention_days":"5000"}}`, nil, Options{},
			[]string{"R4 insufficient_retention"}, "R4: PAC-AGRICULTURE requires retention_days >= 1096, got '5000'"},
		{"R4 no floor", `{"compliance":{"profile":"EU-AI-ACT-HIGH-RISK","retention_days":30}}`, nil, Options{}, nil, ""},
		// R5
		{"R5 BRAZIL", `{"compliance":{"profile":"GDPR-STANDARD","data_residency":"BRAZIL"}}`, nil, Options{},
			[]string{"R5 invalid_data_residency"}, "R5: compliance.data_residency 'BRAZIL' must be"},
		{"R5 lower case", `{"compliance":{"data_residency":"eu"}}`, nil, Options{}, []string{"R5 invalid_data_residency"}, "R5: "},
		{"R5 number", `{"compliance":{"data_residency":49}}`, nil, Options{}, []string{"R5 invalid_data_residency"}, "R5: compliance.data_residency 49"},
		{"R5 EU", `{"compliance":{"profile":"GDPR-STANDARD","data_residency":"EU"}}`, nil, Options{}, nil, ""},
		// R6
		{"R6 escalation", `{"intent":"request","compliance":{"profile":"EU-AI-ACT-HIGH-RISK","ai_system_classification":"high-risk","human_oversight":"required_before_execution"}}`,
			nil, Options{IdentityClassification: "minimal-risk"},
			[]string{"R6 classification_escalation"}, "R6: per-message classification 'high-risk' escalates above agent-level 'minimal-risk'"},
		{"R6 equal", `{"compliance":{"ai_system_classification":"limited-risk"}}`, nil, Options{IdentityClassification: "limited-risk"}, nil, ""},
		{"R6 lower", `{"compliance":{"ai_system_classification":"minimal-risk"}}`, nil, Options{IdentityClassification: "high-risk"}, nil, ""},
		{"R6 no identity", `{"intent":"event","compliance":{"ai_system_classification":"high-risk"}}`, nil, Options{}, nil, ""},
		{"R6 unknown message value", `{"compliance":{"ai_system_classification":"huge"}}`, nil, Options{IdentityClassification: "high-risk"},
			[]string{"R6 classification_escalation"}, "R6: per-message classification 'huge' is not"},
		{"R6 unknown agent value", `{"compliance":{"ai_system_classification":"minimal-risk"}}`, nil, Options{IdentityClassification: "huge"},
			[]string{"R6 classification_escalation"}, "R6: agent-level classification 'huge' is not"},
		{"R6 no message value", `{"compliance":{}}`, nil, Options{IdentityClassification: "minimal-risk"}, nil, ""},
		// Order R1, R2, R3, R7, R4, R5, R6.
		{"all rules in order", `{"intent":"request","compliance":{"profile":"NOPE","pii_involved":true,"ai_system_classification":"high-risk","data_residency":"Europe"}}`,
			nil, Options{Strict: true, IdentityClassification: "minimal-risk"},
			[]string{"R1 unknown_profile", "R2 missing_legal_basis", "R7 missing_profile", "R5 invalid_data_residency", "R6 classification_escalation"}, "R1: "},
		{"R3 before R7 before R4", `{"intent":"request","compliance":{"profile":"HIGH","ai_system_classification":"high-risk"}}`, custom, Options{},
			[]string{"R3 missing_human_oversight"}, "R3: "},
		// Outside the rules.
		{"no compliance", `{"intent":"request"}`, nil, Options{Strict: true, IdentityClassification: "minimal-risk"}, nil, ""},
		{"null compliance", `{"compliance":null}`, nil, Options{Strict: true}, nil, ""},
		{"compliance not an object", `{"compliance":[1]}`, nil, Options{}, []string{" invalid_compliance"}, "compliance: compliance is not a JSON object"},
	}
	for _, c := range cases {
		got := Validate(mustJSON(t, c.env), c.reg, c.opts)
		if !reflect.DeepEqual(rulesOf(got), c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
			continue
		}
		for _, v := range got {
			if v.Rule != "" && !strings.HasPrefix(v.Message, v.Rule+": ") {
				t.Errorf("%s: message %q does not start with its rule tag", c.name, v.Message)
			}
		}
		if c.prefix != "" && !strings.HasPrefix(got[0].Message, c.prefix) {
			t.Errorf("%s: message %q, want prefix %q", c.name, got[0].Message, c.prefix)
		}
	}
}

// TestValidateNumberForms checks that R4 reads every number representation
// a decoder may produce.
func TestValidateNumberForms(t *testing.T) {
	for _, n := range []any{90, int64(90), 90.0, float32(90), uint8(90), mustJSON(t, `{"n":90}`)["n"]} {
		env := map[string]any{"compliance": map[string]any{"profile": "MIFID-II", "retention_days": n}}
		if got := rulesOf(Validate(env, nil, Options{})); !reflect.DeepEqual(got, []string{"R4 insufficient_retention"}) {
			t.Errorf("%T: got %v", n, got)
		}
	}
}

// TestValidateNilEnvelope: a nil map has no compliance.
func TestValidateNilEnvelope(t *testing.T) {
	if v := Validate(nil, nil, Options{Strict: true}); v != nil {
		t.Errorf("got %v", v)
	}
	if out, w, err := Apply(nil, nil, true); out != nil || w != nil || err != nil {
		t.Errorf("Apply(nil) = %v %v %v", out, w, err)
	}
}

func TestZeroRegistryIsDefault(t *testing.T) {
	env := mustJSON(t, `{"compliance":{"profile":"MIFID-II","retention_days":1}}`)
	if got := rulesOf(Validate(env, &Registry{}, Options{})); !reflect.DeepEqual(got, []string{"R4 insufficient_retention"}) {
		t.Errorf("got %v", got)
	}
	if v := (Violation{Message: "R1: x"}).String(); v != "R1: x" {
		t.Errorf("String() = %q", v)
	}
}
