package compliance

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func intp(n int) *int { return &n }

// TestBundledProfiles pins every default of the seven bundled profiles to
// the table of the ARSIA digest §5.
func TestBundledProfiles(t *testing.T) {
	type want struct {
		audit     bool
		retention *int
		oversight Oversight
		explain   bool
		pii       bool
		basis     LegalBasis
		residency string
		skew      int
	}
	table := map[string]want{
		"GDPR-STANDARD":          {false, nil, OversightNotRequired, false, false, "", "", 0},
		"EU-AI-ACT-HIGH-RISK":    {true, intp(180), OversightRequiredBeforeExecution, true, false, "", "", 120},
		"EU-AI-ACT-LIMITED-RISK": {true, intp(90), OversightNotRequired, true, false, "", "", 0},
		"MIFID-II":               {true, intp(1827), OversightRequiredBeforeExecution, true, true, LegalBasisContract, "EU", 60},
		"PAC-AGRICULTURE":        {true, intp(1096), OversightRequiredPostExecution, true, false, "", "EU", 0},
		"DSA-VLOP":               {true, intp(730), OversightRequiredWithin24h, true, true, LegalBasisLegalObligation, "", 0},
		"DORA":                   {true, intp(1827), OversightRequiredWithin24h, false, false, "", "EU", 60},
	}
	reg := Default()
	if reg.Version() != "1.0.0" {
		t.Errorf("version %q", reg.Version())
	}
	names := reg.Names()
	if len(names) != len(table) || !slices.IsSorted(names) {
		t.Fatalf("names %v", names)
	}
	for _, name := range names {
		w, ok := table[name]
		if !ok {
			t.Errorf("unexpected profile %s", name)
			continue
		}
		p, _ := reg.Get(name)
		d := p.Defaults
		if p.Name != name || p.Status != StatusActive || p.Description == "" || len(p.RegulatoryReferences) == 0 {
			t.Errorf("%s: header %+v", name, p)
		}
		if d.AuditRequired != w.audit || d.HumanOversight != w.oversight || d.ExplainabilityRequired != w.explain ||
			d.PIIInvolved != w.pii || d.LegalBasis != w.basis || d.DataResidency != w.residency ||
			d.ClockSkewSeconds != w.skew || len(d.Extra) != 0 {
			t.Errorf("%s: defaults %+v, want %+v", name, d, w)
		}
		if (d.RetentionDays == nil) != (w.retention == nil) || d.RetentionDays != nil && *d.RetentionDays != *w.retention {
			t.Errorf("%s: retention %v, want %v", name, d.RetentionDays, w.retention)
		}
	}
	if _, ok := reg.Get("gdpr-standard"); ok {
		t.Error("profile names must be case-sensitive")
	}
}

// TestEmbeddedFileIsUpstream checks the embedded copy byte for byte against
// the shared upstream file when it is present.
func TestEmbeddedFileIsUpstream(t *testing.T) {
	path := filepath.Join("..", "..", "..", "shared", "conformance", "arsia", "shared", "profiles", "arsia-compliance-profiles.json")
	upstream, err := os.ReadFile(path)
	if err != nil {
		t.Skip("upstream profiles file not present")
	}
	if !bytes.Equal(upstream, bundledProfiles) {
		t.Error("embedded arsia-compliance-profiles.json differs from upstream")
	}
}

func TestNamesIsACopy(t *testing.T) {
	n := Default().Names()
	n[0] = "X"
	if Default().Names()[0] == "X" {
		t.Error("Names exposes the registry's slice")
	}
}

const gdprOnly = `"GDPR-STANDARD": {"name": "GDPR-STANDARD", "status": "active", "regulatory_references": ["x"],
  "defaults": {"audit_required": false, "retention_days": null, "human_oversight": "not_required",
  "explainability_required": false, "pii_involved": false, "data_residency": null}}`

func TestLoadRejects(t *testing.T) {
	bad := map[string]string{
		"not json":            `{`,
		"array":               `[]`,
		"no profiles":         `{"version": "1.0.0"}`,
		"duplicate key":       `{"profiles": {` + gdprOnly + `, ` + gdprOnly + `}}`,
		"no fallback":         `{"profiles": {"X": {"defaults": {}}}}`,
		"name mismatch":       `{"profiles": {` + gdprOnly + `, "X": {"name": "Y", "defaults": {}}}}`,
		"empty name":          `{"profiles": {` + gdprOnly + `, "": {"defaults": {}}}}`,
		"bad status":          `{"profiles": {` + gdprOnly + `, "X": {"status": "gone", "defaults": {}}}}`,
		"no defaults":         `{"profiles": {` + gdprOnly + `, "X": {}}}`,
		"bad oversight":       `{"profiles": {` + gdprOnly + `, "X": {"defaults": {"human_oversight": "sometimes"}}}}`,
		"bad legal basis":     `{"profiles": {` + gdprOnly + `, "X": {"defaults": {"legal_basis": "because"}}}}`,
		"retention zero":      `{"profiles": {` + gdprOnly + `, "X": {"defaults": {"retention_days": 0}}}}`,
		"retention fraction":  `{"profiles": {` + gdprOnly + `, "X": {"defaults": {"retention_days": 1.5}}}}`,
		"skew too small":      `{"profiles": {` + gdprOnly + `, "X": {"defaults": {"clock_skew_seconds": 5}}}}`,
		"skew too large":      `{"profiles": {` + gdprOnly + `, "X": {"defaults": {"clock_skew_seconds": 301}}}}`,
		"bool as string":      `{"profiles": {` + gdprOnly + `, "X": {"defaults": {"audit_required": "true"}}}}`,
		"residency lowercase": `{"profiles": {` + gdprOnly + `, "X": {"defaults": {"data_residency": "eu"}}}}`,
		"references":          `{"profiles": {` + gdprOnly + `, "X": {"regulatory_references": [1], "defaults": {}}}}`,
	}
	for name, data := range bad {
		if _, err := Load([]byte(data)); !errors.Is(err, ErrInvalidProfiles) {
			t.Errorf("%s: err = %v, want ErrInvalidProfiles", name, err)
		}
	}
}

func TestLoadCustom(t *testing.T) {
	reg, err := Load([]byte(`{"version": "2.0.0", "profiles": {` + gdprOnly + `,
	  "ACME": {"name": "ACME", "status": "draft", "defaults": {"audit_required": true,
	    "retention_days": 10.0, "clock_skew_seconds": 30, "acme_ticket_required": true}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := reg.Get("ACME")
	if !ok || p.Status != StatusDraft || *p.Defaults.RetentionDays != 10 || p.Defaults.ClockSkewSeconds != 30 ||
		p.Defaults.HumanOversight != "" || p.Defaults.Extra["acme_ticket_required"] != true {
		t.Fatalf("ACME = %+v", p)
	}
	out, _, err := Apply(map[string]any{"compliance": map[string]any{"profile": "ACME"}}, reg, true)
	if err != nil {
		t.Fatal(err)
	}
	comp := out["compliance"].(map[string]any)
	if comp["acme_ticket_required"] != true || comp["retention_days"] != 10 {
		t.Errorf("extension defaults not inherited: %v", comp)
	}
	if _, ok := comp["human_oversight"]; ok {
		t.Error("absent default was inherited")
	}
	if _, ok := comp["clock_skew_seconds"]; ok {
		t.Error("clock_skew_seconds is a receiver parameter, not a message field")
	}
}

func TestEnums(t *testing.T) {
	for _, b := range []LegalBasis{"consent", "contract", "legal_obligation", "vital_interests", "public_task", "legitimate_interests"} {
		if !b.IsArticle6() || b.IsArticle9() || !b.Valid() {
			t.Errorf("%s should be Art. 6 only", b)
		}
	}
	for _, b := range []LegalBasis{"explicit_consent", "employment_social_security", "vital_interests_incapacity",
		"legitimate_activities", "manifestly_public", "legal_claims", "substantial_public_interest",
		"health_medicine", "public_health", "archiving_research"} {
		if b.IsArticle6() || !b.IsArticle9() {
			t.Errorf("%s should be Art. 9 only", b)
		}
	}
	if LegalBasis("Consent").Valid() || Oversight("NOT_REQUIRED").Valid() || Classification("high").Valid() {
		t.Error("enums must be exact")
	}
	ranks := []Classification{MinimalRisk, LimitedRisk, HighRisk, UnacceptableRisk}
	for i := 1; i < len(ranks); i++ {
		if ranks[i-1].Rank() >= ranks[i].Rank() {
			t.Errorf("%s must rank below %s", ranks[i-1], ranks[i])
		}
	}
	if Classification("").Rank() != 0 {
		t.Error("unknown classification must rank 0")
	}
}

func TestEffectiveRetentionOfProfile(t *testing.T) {
	reg := Default()
	cases := []struct {
		profile   string
		requested *int
		want      *int
	}{
		{"EU-AI-ACT-HIGH-RISK", nil, intp(180)},
		{"EU-AI-ACT-HIGH-RISK", intp(2555), intp(2555)},
		{"MIFID-II", intp(30), intp(1827)},
		{"GDPR-STANDARD", nil, nil},
		{"GDPR-STANDARD", intp(7), intp(7)},
	}
	for _, c := range cases {
		p, _ := reg.Get(c.profile)
		got := p.EffectiveRetention(c.requested)
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s %v: got %v, want %v", c.profile, c.requested, got, c.want)
		}
	}
	if d, ok := RetentionFloor("DSA-VLOP"); !ok || d != 730 {
		t.Error("DSA-VLOP floor")
	}
	if _, ok := RetentionFloor("EU-AI-ACT-HIGH-RISK"); ok {
		t.Error("EU-AI-ACT-HIGH-RISK has no schema floor")
	}
}

func TestRender(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{"BRAZIL", "'BRAZIL'"}, {"it's", `'it\'s'`}, {`a"b`, `'a"b'`}, {90, "90"}, {90.0, "90"},
		{json.Number("90"), "90"}, {1.5, "1.5"}, {nil, "null"}, {true, "true"},
		{map[string]any{"a": 1}, `{"a":1}`},
	}
	for _, c := range cases {
		if got := render(c.v); got != c.want {
			t.Errorf("render(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
	if got := render(strings.Repeat("x", 1000)); len(got) > 80 {
		t.Errorf("long value not cut: %d bytes", len(got))
	}
}
