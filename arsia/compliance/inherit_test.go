package compliance

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// asJSON normalizes a value through encoding/json so that 1827, 1827.0 and
// json.Number("1827") compare equal.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestApplyPriority walks the Core §4.3.7 priority table.
func TestApplyPriority(t *testing.T) {
	cases := []struct {
		name, in, want string // compliance objects; in "" means no compliance member
	}{
		{"message value wins",
			`{"profile":"EU-AI-ACT-HIGH-RISK","retention_days":400,"audit_required":false,"human_oversight":"required_within_24h"}`,
			`{"profile":"EU-AI-ACT-HIGH-RISK","retention_days":400,"audit_required":false,"human_oversight":"required_within_24h","explainability_required":true,"pii_involved":false}`},
		{"profile defaults fill absent keys",
			`{"profile":"MIFID-II"}`,
			`{"profile":"MIFID-II","audit_required":true,"retention_days":1827,"human_oversight":"required_before_execution","explainability_required":true,"pii_involved":true,"legal_basis":"contract","data_residency":"EU"}`},
		{"null counts as absent",
			`{"profile":"DORA","data_residency":null,"retention_days":null}`,
			`{"profile":"DORA","audit_required":true,"retention_days":1827,"human_oversight":"required_within_24h","explainability_required":false,"pii_involved":false,"data_residency":"EU"}`},
		{"no profile inherits GDPR-STANDARD without naming it",
			`{"legal_basis":"consent"}`,
			`{"legal_basis":"consent","audit_required":false,"human_oversight":"not_required","explainability_required":false,"pii_involved":false}`},
		{"null defaults are not filled",
			`{"profile":"GDPR-STANDARD","data_residency":null}`,
			`{"profile":"GDPR-STANDARD","data_residency":null,"audit_required":false,"human_oversight":"not_required","explainability_required":false,"pii_involved":false}`},
		{"unknown fields kept",
			`{"profile":"GDPR-STANDARD","x-acme":{"a":[1]}}`,
			`{"profile":"GDPR-STANDARD","x-acme":{"a":[1]},"audit_required":false,"human_oversight":"not_required","explainability_required":false,"pii_involved":false}`},
	}
	for _, c := range cases {
		env := mustJSON(t, `{"id":"x","compliance":`+c.in+`}`)
		out, _, err := Apply(env, nil, true)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, want := asJSON(t, out["compliance"]), asJSON(t, mustJSON(t, c.want)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %v\n want %v", c.name, got, want)
		}
		if out["id"] != "x" {
			t.Errorf("%s: other members lost", c.name)
		}
	}
}

func TestApplyWithoutCompliance(t *testing.T) {
	for _, in := range []string{`{"id":"x"}`, `{"id":"x","compliance":null}`} {
		env := mustJSON(t, in)
		out, warnings, err := Apply(env, nil, true)
		if err != nil || len(warnings) > 0 || !reflect.DeepEqual(out, env) {
			t.Errorf("%s: got %v %v %v", in, out, warnings, err)
		}
	}
	if _, _, err := Apply(mustJSON(t, `{"compliance":"GDPR"}`), nil, false); !errors.Is(err, ErrInvalidCompliance) {
		t.Errorf("string compliance: err = %v", err)
	}
}

func TestApplyUnknownProfile(t *testing.T) {
	env := mustJSON(t, `{"compliance":{"profile":"NOT-A-REAL-PROFILE","retention_days":5}}`)
	if _, _, err := Apply(env, nil, true); !errors.Is(err, ErrUnknownProfile) || !strings.Contains(err.Error(), "NOT-A-REAL-PROFILE") {
		t.Errorf("strict: err = %v", err)
	}
	out, warnings, err := Apply(env, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || warnings[0] != "unknown compliance profile 'NOT-A-REAL-PROFILE' — falling back to GDPR-STANDARD" {
		t.Errorf("warnings %q", warnings)
	}
	comp := out["compliance"].(map[string]any)
	if comp["profile"] != "NOT-A-REAL-PROFILE" || comp["human_oversight"] != "not_required" || comp["retention_days"] != json.Number("5") {
		t.Errorf("lenient fallback: %v", comp)
	}
	for _, p := range []string{`""`, `42`} {
		if _, _, err := Apply(mustJSON(t, `{"compliance":{"profile":`+p+`}}`), nil, true); !errors.Is(err, ErrUnknownProfile) {
			t.Errorf("profile %s: err = %v", p, err)
		}
	}
}

func TestApplyRetentionFloor(t *testing.T) {
	cases := []struct {
		in       any
		want     any
		warnings []string
	}{
		{90, 1827, []string{"retention_days 90 is below profile MIFID-II minimum 1827 — using profile minimum"}},
		{json.Number("1826"), 1827, []string{"retention_days 1826 is below profile MIFID-II minimum 1827 — using profile minimum"}},
		{1826.5, 1827, []string{"retention_days 1826.5 is below profile MIFID-II minimum 1827 — using profile minimum"}},
		{1827, 1827, nil},
		{3000.0, 3000.0, nil},
		{"90", "90", nil}, // wrong type: left for the L1 schema (and R4) to reject
	}
	for _, c := range cases {
		env := map[string]any{"compliance": map[string]any{"profile": "MIFID-II", "retention_days": c.in}}
		out, warnings, err := Apply(env, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := out["compliance"].(map[string]any)["retention_days"]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: retention %#v, want %#v", c.in, got, c.want)
		}
		if !reflect.DeepEqual(warnings, c.warnings) {
			t.Errorf("%v: warnings %q, want %q", c.in, warnings, c.warnings)
		}
	}
}

func TestApplyPIIForcesAudit(t *testing.T) {
	env := mustJSON(t, `{"compliance":{"profile":"GDPR-STANDARD","pii_involved":true,"audit_required":false,"legal_basis":"consent"}}`)
	out, warnings, err := Apply(env, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if out["compliance"].(map[string]any)["audit_required"] != true {
		t.Error("audit_required not forced")
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "pii_involved=true forces audit_required=true") {
		t.Errorf("warnings %q", warnings)
	}
	// Inherited: DSA-VLOP has pii_involved and audit_required both true.
	_, warnings, _ = Apply(mustJSON(t, `{"compliance":{"profile":"DSA-VLOP"}}`), nil, true)
	if len(warnings) != 0 {
		t.Errorf("no forcing needed, got %q", warnings)
	}
}

func TestApplyDoesNotMutate(t *testing.T) {
	const src = `{"id":"x","payload":{"type":"a/b","args":{"list":[1,{"k":"v"}]}},
		"compliance":{"profile":"MIFID-II","retention_days":1,"pii_involved":true,"audit_required":false,"tags":["a"]}}`
	env := mustJSON(t, src)
	before := asJSON(t, env)
	out, _, err := Apply(env, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(asJSON(t, env), before) {
		t.Fatal("Apply modified its input")
	}
	// The output shares no container with the input.
	out["payload"].(map[string]any)["args"].(map[string]any)["list"].([]any)[1].(map[string]any)["k"] = "changed"
	out["compliance"].(map[string]any)["tags"].([]any)[0] = "changed"
	if !reflect.DeepEqual(asJSON(t, env), before) {
		t.Fatal("Apply's output aliases its input")
	}
	// Validate and the other readers do not modify it either.
	Validate(env, nil, Options{Strict: true, IdentityClassification: "minimal-risk"})
	ClockSkew(env, nil)
	EffectiveRetentionDays(env, nil)
	ValidateExplainability(env, env, nil)
	if !reflect.DeepEqual(asJSON(t, env), before) {
		t.Fatal("a reader modified its input")
	}
}

func TestEffectiveRetentionDays(t *testing.T) {
	cases := []struct {
		env  string
		want int
		ok   bool
	}{
		{`{}`, 0, false},
		{`{"compliance":{}}`, 0, false},
		{`{"compliance":{"retention_days":30}}`, 30, true},
		{`{"compliance":{"profile":"EU-AI-ACT-HIGH-RISK"}}`, 180, true},
		{`{"compliance":{"profile":"EU-AI-ACT-HIGH-RISK","retention_days":30}}`, 180, true},
		{`{"compliance":{"profile":"EU-AI-ACT-HIGH-RISK","retention_days":2555}}`, 2555, true},
		{`{"compliance":{"profile":"MIFID-II","retention_days":"x"}}`, 1827, true},
		{`{"compliance":{"retention_days":10.2}}`, 11, true},
	}
	for _, c := range cases {
		got, ok := EffectiveRetentionDays(mustJSON(t, c.env), nil)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %d %v, want %d %v", c.env, got, ok, c.want, c.ok)
		}
	}
}
