package conformance

import (
	"path/filepath"
	"testing"
)

func TestArsiaState(t *testing.T) { checkArsiaCategory(t, "state", execState) }

// TestArsiaStateStorageCases runs the cases upstream gates behind
// skip_until: state-storage against the in-memory store.
func TestArsiaStateStorageCases(t *testing.T) {
	dir := sharedArsia(t)
	cases, err := loadArsiaSuite(filepath.Join(dir, "suites", "state.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range cases {
		if c.SkipUntil == "" || c.Category != "state" {
			continue
		}
		ran++
		if err := execState(nil, c); err != nil {
			t.Errorf("%s: %v", c.ID, err)
		}
	}
	if ran == 0 {
		t.Fatal("no skip-gated state case found")
	}
	t.Logf("%d skip-gated state cases pass", ran)
}
