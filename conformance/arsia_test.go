package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedArsia returns ../shared/conformance/arsia, or skips.
func sharedArsia(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "conformance", "arsia")
	if _, err := os.Stat(filepath.Join(dir, "suites")); err != nil {
		t.Skip("../shared/conformance/arsia not present")
	}
	return dir
}

func TestArsiaSuites(t *testing.T) {
	checkArsiaCategories(t, ArsiaClaimed(), arsiaExecutorFor)
}

// checkArsiaCategory runs every upstream case of one category through exec
// and fails on any case that does not pass or skip.
func checkArsiaCategory(t *testing.T, category string, exec arsiaExecutor) {
	t.Helper()
	checkArsiaCategories(t, []string{category}, func(string) arsiaExecutor { return exec })
}

func checkArsiaCategories(t *testing.T, categories []string, executorFor func(string) arsiaExecutor) {
	t.Helper()
	dir := sharedArsia(t)
	report, err := runArsia(ArsiaOptions{
		SuitesDir:  filepath.Join(dir, "suites"),
		SharedDir:  filepath.Join(dir, "shared"),
		Categories: categories,
	}, executorFor)
	if err != nil {
		t.Fatal(err)
	}
	if report.Summary.Total == 0 {
		t.Fatal("no cases ran")
	}
	for _, r := range report.Results {
		if r.Status == "fail" || r.Status == "error" {
			t.Errorf("%s (%s): %s: %s", r.TestID, r.Category, r.Status, r.Message)
		}
	}
	t.Log(report.String())
}

func TestArsiaRunnerOnOwnSuite(t *testing.T) {
	dir := t.TempDir()
	suite := `name: mine
level: core
cases:
  - id: A
    description: skipped case
    category: canonicalization
    level: core
    skip_until: some-gate
    input: {}
    expected: {}
  - id: B
    description: unknown category
    category: no-such-category
    level: compliance
    input: {}
    expected: {}
  - id: C
    description: vector missing
    category: canonicalization
    input:
      vector_id: "NOPE-01"
    expected:
      match_vector_field: canonical_bytes_hex
`
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	report, err := Arsia(ArsiaOptions{SuitesDir: dir, SharedDir: filepath.Join(dir, "absent")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "skip", "B": "error", "C": "fail"}
	for _, r := range report.Results {
		if want[r.TestID] != r.Status {
			t.Errorf("%s: status %s (%s), want %s", r.TestID, r.Status, r.Message, want[r.TestID])
		}
	}
	if got := report.String(); got != "arsia conformance: 0 passed, 2 failed, 1 skipped" {
		t.Errorf("summary %q", got)
	}
	if r := report.Results[2]; !strings.Contains(r.Message, "NOPE-01") {
		t.Errorf("missing-vector message %q does not name the vector", r.Message)
	}

	levelOnly, err := Arsia(ArsiaOptions{SuitesDir: dir, Level: "compliance"})
	if err != nil {
		t.Fatal(err)
	}
	if levelOnly.Summary.Total != 1 || levelOnly.Results[0].TestID != "B" {
		t.Errorf("level filter kept %+v", levelOnly.Results)
	}
}
