package conformance

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/custos-runtime/custos/arsia/schema"
)

func TestArsiaSchemaValidation(t *testing.T) {
	checkArsiaCategory(t, "schema-validation", execSchemaValidation)
}

// TestArsiaSchemaInvalidEnvelopes runs the L1 half of validate_envelope on
// the validation-invalid suite: an envelope that fails L1 must fail with an
// error containing the case's error_contains, since the reference SDK then
// skips L2 and returns the L1 errors alone. The envelopes that pass L1 are
// for the L2 semantic rules, and are listed here so that a change in L1
// shows up.
func TestArsiaSchemaInvalidEnvelopes(t *testing.T) {
	dir := sharedArsia(t)
	cases, err := loadArsiaSuite(filepath.Join(dir, "suites", "validation-invalid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := loadArsiaEnv(filepath.Join(dir, "shared"))
	// INV-07 (unknown compliance profile, rule R1) and INV-11 (security.kid
	// not prefixed by from, kid_prefix_mismatch) are structurally valid.
	wantL1Valid := []string{"INV-07", "INV-11"}
	var gotL1Valid []string
	for _, c := range cases {
		v, err := env.vector(c)
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		errs := schema.ValidateEnvelope(v["message"])
		if len(errs) == 0 {
			gotL1Valid = append(gotL1Valid, c.Input["vector_id"].(string))
			continue
		}
		texts := make([]string, len(errs))
		for i, e := range errs {
			texts[i] = e.String()
		}
		if err := expectValidity(c, texts); err != nil {
			t.Errorf("%s (%s): %v", c.ID, c.Input["vector_id"], err)
		}
	}
	if !slices.Equal(gotL1Valid, wantL1Valid) {
		t.Errorf("L1-valid vectors: got %v, want %v", gotL1Valid, wantL1Valid)
	}
}
