package conformance

import (
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/jcs"
)

func TestArsiaActions(t *testing.T)  { checkArsiaCategory(t, "actions", execActions) }
func TestArsiaVersion(t *testing.T)  { checkArsiaCategory(t, "version", execVersion) }
func TestArsiaErrors(t *testing.T)   { checkArsiaCategory(t, "errors", execErrors) }
func TestArsiaIdentity(t *testing.T) { checkArsiaCategory(t, "identity", execIdentity) }

// TestArsiaSemanticOnVectors checks arsia.ValidateSemantic (L2 alone)
// against the upstream vectors: no envelope vector marked valid may have an
// L2 error, and the invalid vectors L2 is responsible for must be caught
// with the suite's keyword. The validate_envelope executor itself (L1 + L2
// + compliance) belongs to the validation category runner.
func TestArsiaSemanticOnVectors(t *testing.T) {
	dir := sharedArsia(t)
	env := loadArsiaEnv(filepath.Join(dir, "shared"))
	if env.loadErr != nil {
		t.Skipf("vectors unavailable: %v", env.loadErr)
	}
	checked := 0
	for id, v := range env.vectors {
		msg, ok := v["message"].(map[string]any)
		if !ok || v["valid"] != true {
			continue
		}
		checked++
		if errs := arsia.ErrorIssues(arsia.ValidateSemantic(msg, arsia.SemanticOptions{})); len(errs) > 0 {
			t.Errorf("%s: valid vector has L2 errors: %v", id, errs)
		}
	}
	t.Logf("%d valid envelope vectors: no L2 errors", checked)

	// The validation-invalid cases, with what L2 alone must say. L2 is not
	// responsible for id/ts format (L1) or compliance (INV-06/07/08); of
	// these ten, INV-07 and INV-11 are L1-valid.
	l2Catches := map[string]bool{"INV-01": true, "INV-04": true, "INV-05": true, "INV-10": true, "INV-11": true}
	cases, err := loadArsiaSuite(filepath.Join(dir, "suites", "validation-invalid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		v, err := env.vector(c)
		if err != nil {
			t.Fatal(err)
		}
		id := v["id"].(string)
		msg, _ := v["message"].(map[string]any)
		errs := issueStrings(arsia.ErrorIssues(arsia.ValidateSemantic(msg, arsia.SemanticOptions{})))
		verdict := expectValidity(c, errs)
		switch {
		case l2Catches[id] && verdict != nil:
			t.Errorf("%s: %v", id, verdict)
		case !l2Catches[id] && len(errs) > 0:
			t.Errorf("%s: L2 reports %v, but this vector is not an L2 concern", id, errs)
		}
		t.Logf("%s: L2 %v", id, errs)
	}
}

// TestArsiaEnvelopeRoundTrip converts every vector message to arsia.Envelope
// and back: the canonical bytes (what is signed) must not change.
func TestArsiaEnvelopeRoundTrip(t *testing.T) {
	dir := sharedArsia(t)
	env := loadArsiaEnv(filepath.Join(dir, "shared"))
	if env.loadErr != nil {
		t.Skipf("vectors unavailable: %v", env.loadErr)
	}
	converted, refused := 0, 0
	for id, v := range env.vectors {
		msg, ok := v["message"].(map[string]any)
		if !ok {
			continue
		}
		e, err := arsia.EnvelopeFromMap(msg)
		if err != nil {
			// Only structurally broken (invalid) vectors may be refused.
			if v["valid"] == true {
				t.Errorf("%s: valid vector refused: %v", id, err)
			}
			refused++
			continue
		}
		back, err := e.Map()
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		want, err1 := jcs.CanonicalizeValue(msg)
		got, err2 := jcs.CanonicalizeValue(back)
		if err1 != nil || err2 != nil || string(got) != string(want) {
			t.Errorf("%s: round trip changed the message (%v, %v)", id, err1, err2)
		}
		converted++
	}
	t.Logf("%d vector messages round-tripped, %d invalid ones refused by EnvelopeFromMap", converted, refused)
}
