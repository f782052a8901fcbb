package compliance

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/custos-runtime/custos/jcs"
)

// encodeRegistry writes reg back in the profiles file format.
func encodeRegistry(tb testing.TB, reg *Registry) []byte {
	tb.Helper()
	profiles := map[string]any{}
	for _, name := range reg.Names() {
		p, _ := reg.Get(name)
		defs := p.Defaults.inheritable()
		if p.Defaults.ClockSkewSeconds != 0 {
			defs[fieldClockSkewSecond] = p.Defaults.ClockSkewSeconds
		}
		obj := map[string]any{"name": p.Name, "description": p.Description, "status": string(p.Status), "defaults": defs}
		if p.RegulatoryReferences != nil {
			refs := make([]any, len(p.RegulatoryReferences))
			for i, r := range p.RegulatoryReferences {
				refs[i] = r
			}
			obj["regulatory_references"] = refs
		}
		profiles[name] = obj
	}
	out, err := jcs.CanonicalizeValue(map[string]any{"version": reg.Version(), "profiles": profiles})
	if err != nil {
		tb.Fatalf("a loaded registry does not encode: %v", err)
	}
	return out
}

// FuzzLoad feeds arbitrary custom profiles files to Load. A refusal wraps
// ErrInvalidProfiles; an accepted file defines GDPR-STANDARD, and every
// profile in it keeps the documented limits (its key as name, a known
// status, oversight mode, legal basis and residency, retention_days in
// 1..36525, clock_skew_seconds 0 or in 10..300, which ClockSkew then
// applies); load → encode → load is a fixed point; and a message declaring
// a profile inherits every default the file gives it.
func FuzzLoad(f *testing.F) {
	f.Add(bundledProfiles)
	for _, s := range []string{
		`{"profiles":{"GDPR-STANDARD":{"defaults":{}}}}`,
		`{"version":"2","profiles":{"GDPR-STANDARD":{"name":"GDPR-STANDARD","status":"draft","regulatory_references":["GDPR"],"defaults":{"audit_required":true,"retention_days":30,"human_oversight":"required","explainability_required":false,"pii_involved":true,"legal_basis":"consent","data_residency":"EU","clock_skew_seconds":10,"x-risk":{"a":[1,"b",null]}}}}}`,
		`{"profiles":{"GDPR-STANDARD":{"defaults":{"clock_skew_seconds":301}}}}`,
		`{"profiles":{"GDPR-STANDARD":{"defaults":{"retention_days":0}}}}`,
		`{"profiles":{"GDPR-STANDARD":{"defaults":{"retention_days":1.5e1}},"X":{"name":"Y","defaults":{}}}}`,
		`{"profiles":{"GDPR-STANDARD":{"defaults":{"profile":"MIFID-II","human_oversight":null}},"":{"defaults":{}}}}`,
		`{"profiles":{"GDPR-STANDARD":{"defaults":{}}},"profiles":{}}`,
		`{"profiles":{"CUSTOM":{"status":"retired","defaults":{}}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reg, err := Load(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidProfiles) || reg != nil {
				t.Fatalf("refusal %v (registry %v) does not wrap ErrInvalidProfiles", err, reg)
			}
			return
		}
		names := reg.Names()
		if !slices.Contains(names, DefaultProfile) || !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
			t.Fatalf("names %q", names)
		}
		for _, name := range names {
			p, ok := reg.Get(name)
			d := p.Defaults
			switch {
			case !ok || p.Name != name || name == "":
				t.Fatalf("profile %q named %q", name, p.Name)
			case p.Status != StatusActive && p.Status != StatusDraft && p.Status != StatusDeprecated:
				t.Fatalf("%s: status %q", name, p.Status)
			case d.RetentionDays != nil && (*d.RetentionDays < 1 || *d.RetentionDays > maxRetentionDays):
				t.Fatalf("%s: retention_days %d", name, *d.RetentionDays)
			case d.ClockSkewSeconds != 0 && (d.ClockSkewSeconds < 10 || d.ClockSkewSeconds > DefaultClockSkew):
				t.Fatalf("%s: clock_skew_seconds %d", name, d.ClockSkewSeconds)
			case d.HumanOversight != "" && !d.HumanOversight.Valid(),
				d.LegalBasis != "" && !d.LegalBasis.Valid(),
				d.DataResidency != "" && !validResidency(d.DataResidency):
				t.Fatalf("%s: defaults %+v", name, d)
			}
			env := map[string]any{"compliance": map[string]any{fieldProfile: name}}
			want := time.Duration(DefaultClockSkew) * time.Second
			if d.ClockSkewSeconds != 0 {
				want = time.Duration(d.ClockSkewSeconds) * time.Second
			}
			if got := ClockSkew(env, reg); got != want {
				t.Fatalf("%s: ClockSkew %v, want %v", name, got, want)
			}
			out, _, err := Apply(env, reg, true)
			if err != nil {
				t.Fatalf("%s: Apply: %v", name, err)
			}
			comp, _ := out["compliance"].(map[string]any)
			if comp[fieldProfile] != name {
				t.Fatalf("%s: Apply rewrote the profile: %v", name, comp)
			}
			for k := range d.inheritable() {
				if _, ok := comp[k]; !ok {
					t.Fatalf("%s: default %s not inherited: %v", name, k, comp)
				}
			}
			if _, ok := comp[fieldClockSkewSecond]; ok {
				t.Fatalf("%s: clock_skew_seconds copied into the message: %v", name, comp)
			}
		}
		enc := encodeRegistry(t, reg)
		again, err := Load(enc)
		if err != nil {
			t.Fatalf("the encoding of an accepted file does not load: %v\n%s", err, enc)
		}
		if enc2 := encodeRegistry(t, again); !bytes.Equal(enc, enc2) {
			t.Fatalf("load → encode → load is not stable:\n%s\n%s", enc, enc2)
		}
	})
}
