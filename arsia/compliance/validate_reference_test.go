package compliance

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// referenceValidate is Validate as it was before it stopped building the
// effective compliance object: the differential tests below hold the
// current Validate to it.
func referenceValidate(env map[string]any, reg *Registry, opts Options) []Violation {
	reg = reg.orDefault()
	comp, present, err := complianceOf(env)
	if err != nil {
		return []Violation{{Code: CodeInvalidCompliance, Message: err.Error()}}
	}
	if !present {
		return nil
	}
	r := resolve(comp, reg)
	eff := r.effective
	var out []Violation
	add := func(rule, code, format string, args ...any) {
		out = append(out, Violation{Rule: rule, Code: code, Message: rule + ": " + fmt.Sprintf(format, args...)})
	}

	if r.declared && !r.known && opts.Strict {
		add("R1", CodeUnknownProfile, "unknown compliance profile %s", render(comp[fieldProfile]))
	}

	if isTrue(eff[fieldPIIInvolved]) {
		switch lb := eff[fieldLegalBasis]; {
		case lb == nil || lb == "":
			add("R2", CodeMissingLegalBasis,
				"compliance.legal_basis is required when pii_involved=true (GDPR Art. 6)")
		case !isLegalBasis(lb):
			add("R2", CodeMissingLegalBasis,
				"compliance.legal_basis %s is not a GDPR Art. 6 or Art. 9 ground (pii_involved=true)", render(lb))
		}
	}

	cls, hasCls := eff[fieldClassification].(string)
	atLeastHigh := hasCls && Classification(cls).Rank() >= HighRisk.Rank()
	if atLeastHigh {
		switch ho := eff[fieldHumanOversight]; {
		case ho == nil:
			add("R3", CodeMissingHumanOversight,
				"compliance.human_oversight is required when ai_system_classification=%s", render(cls))
		case !isOversight(ho):
			add("R3", CodeMissingHumanOversight,
				"compliance.human_oversight %s is not a known mode (ai_system_classification=%s)", render(ho), render(cls))
		}
		if intent, _ := env["intent"].(string); intent != "error" && intent != "event" && !r.known {
			add("R7", CodeMissingProfile,
				"compliance profile required when ai_system_classification=%s (Identity §4.2)", render(cls))
		}
	}

	if floor, ok := RetentionFloor(r.profile.Name); ok {
		if v := comp[fieldRetentionDays]; v != nil {
			if n, isNum := number(v); !isNum || n < float64(floor) {
				add("R4", CodeInsufficientRetention,
					"%s requires retention_days >= %d, got %s", r.profile.Name, floor, render(v))
			}
		}
	}

	if v := eff[fieldDataResidency]; v != nil {
		if s, ok := v.(string); !ok || !validResidency(s) {
			add("R5", CodeInvalidDataResidency,
				"compliance.data_residency %s must be an ISO 3166-1 alpha-2 code or supranational zone (^[A-Z]{2}$, e.g. 'EU')", render(v))
		}
	}

	if agent := opts.IdentityClassification; agent != "" {
		if v := eff[fieldClassification]; v != nil {
			msg, _ := v.(string)
			switch {
			case !Classification(msg).Valid():
				add("R6", CodeClassificationEscalation,
					"per-message classification %s is not a known ai_system_classification", render(v))
			case !Classification(agent).Valid():
				add("R6", CodeClassificationEscalation,
					"agent-level classification %s is not a known ai_system_classification", render(agent))
			case Classification(msg).Rank() > Classification(agent).Rank():
				add("R6", CodeClassificationEscalation,
					"per-message classification %s escalates above agent-level %s (Identity §1.2)", render(msg), render(agent))
			}
		}
	}
	return out
}

// complianceValues are member values that reach every rule.
var complianceValues = map[string][]any{
	"profile": {nil, "", "GDPR-STANDARD", "EU-AI-ACT-HIGH-RISK", "MIFID-II", "DORA", "DSA-VLOP", "PAC-AGRICULTURE",
		"NOT-A-PROFILE", 1, true},
	"pii_involved":             {nil, true, false, "true", 1},
	"legal_basis":              {nil, "", "contract", "explicit_consent", "bogus", 3},
	"ai_system_classification": {nil, "minimal-risk", "limited-risk", "high-risk", "unacceptable-risk", "bogus", 2},
	"human_oversight":          {nil, "not_required", "required_before_execution", "bogus", false},
	"retention_days":           {nil, json.Number("1"), json.Number("730"), json.Number("1827"), json.Number("1826.5"), 2000, 1.5, "x"},
	"data_residency":           {nil, "EU", "eu", "EUR", 7},
	"audit_required":           {nil, true, false, "no"},
	"explainability_required":  {nil, true, false},
	"x-extension":              {nil, map[string]any{"a": []any{1}}},
}

func TestValidateMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	names := make([]string, 0, len(complianceValues))
	for k := range complianceValues {
		names = append(names, k)
	}
	regs := []*Registry{nil}
	if custom, err := Load([]byte(`{"profiles": {` + gdprOnly + `, "HIGH": {"defaults": {"audit_required": true}}}}`)); err == nil {
		regs = append(regs, custom)
	}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := range n {
		comp := map[string]any{}
		for _, k := range names {
			if rng.IntN(2) == 0 {
				vals := complianceValues[k]
				comp[k] = vals[rng.IntN(len(vals))]
			}
		}
		env := map[string]any{"intent": []any{"request", "error", "event", "response", nil}[rng.IntN(5)], "compliance": comp}
		if rng.IntN(50) == 0 {
			env["compliance"] = []any{"not an object"}
		}
		if rng.IntN(50) == 0 {
			delete(env, "compliance")
		}
		opts := Options{Strict: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			opts.IdentityClassification = []string{"minimal-risk", "high-risk", "bogus"}[rng.IntN(3)]
		}
		reg := regs[rng.IntN(len(regs))]
		got, want := Validate(env, reg, opts), referenceValidate(env, reg, opts)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d %v %+v:\ngot  %v\nwant %v", i, env, opts, got, want)
		}
	}
}

// TestInheritedValueMatchesInheritable checks the single-member lookup
// against the map it replaces, for every bundled profile.
func TestInheritedValueMatchesInheritable(t *testing.T) {
	for _, reg := range []*Registry{Default()} {
		for _, name := range reg.Names() {
			p, _ := reg.Get(name)
			all := p.Defaults.inheritable()
			keys := append(slicesOfKeys(complianceValues), "clock_skew_seconds", "nothing")
			for k := range all {
				keys = append(keys, k)
			}
			for _, k := range keys {
				got, ok := p.Defaults.inheritedValue(k)
				want, wantOK := all[k]
				if ok != wantOK || !reflect.DeepEqual(got, want) {
					t.Errorf("%s/%s: got %v %v, want %v %v", name, k, got, ok, want, wantOK)
				}
			}
		}
	}
}

func slicesOfKeys(m map[string][]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
