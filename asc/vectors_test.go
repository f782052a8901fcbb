package asc

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

// vectors returns the files of testdata/<dir>, sorted.
func vectors(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors in testdata/%s: %v", dir, err)
	}
	slices.Sort(files)
	return files
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// expectedRule reads the rule id an invalid vector is named after:
// "name.mismatch--why.json" expects RuleNameMismatch.
func expectedRule(path string) string {
	rule, _, _ := strings.Cut(filepath.Base(path), "--")
	return rule
}

// golden compares got with testdata/golden/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\ngot:  %s\nwant: %s", name, got, want)
	}
}

func TestValidVectors(t *testing.T) {
	for _, path := range vectors(t, "valid") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data := readFile(t, path)
			for _, is := range CheckJSON(data) {
				if is.Level == LevelError {
					t.Errorf("unexpected %s", is)
				}
			}
			env, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(env); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestInvalidVectors(t *testing.T) {
	for _, path := range vectors(t, "invalid") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := expectedRule(path)
			err := ValidateJSON(readFile(t, path))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("ValidateJSON() = %v, want *ValidationError", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("errors.Is(err, ErrInvalid) = false")
			}
			found := slices.ContainsFunc(ve.Errors(), func(is Issue) bool { return is.Rule == want })
			if !found {
				t.Errorf("no error with rule %q in %v", want, ve.Issues)
			}
		})
	}
}

// TestRoundTripPreservesEverything: every valid vector survives
// Parse → Marshal → Parse → Marshal unchanged, unknown members included.
func TestRoundTripPreservesEverything(t *testing.T) {
	for _, path := range vectors(t, "valid") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data := readFile(t, path)
			env, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			first, err := Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse(first)
			if err != nil {
				t.Fatal(err)
			}
			second, err := Marshal(again)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first, second) {
				t.Fatalf("round trip changed the document:\n%s\n%s", first, second)
			}
			// Nothing but nulls may be lost: compare member counts loosely by
			// checking that every unknown member name is still present.
			for _, name := range []string{"x-top-ext", "x-status-ext", "x-retry-ext", "x-prov-ext", "operation", "<kept & unescaped>"} {
				if bytes.Contains(data, []byte(name)) && !bytes.Contains(first, []byte(name)) {
					t.Errorf("%s lost in round trip", name)
				}
			}
		})
	}
}

func TestParseKeepsUnknownMembers(t *testing.T) {
	env, err := Parse(readFile(t, "testdata/valid/full.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := env.Extra["x-top-ext"]; !ok {
		t.Error("top-level unknown member lost")
	}
	if _, ok := env.Status.Extra["x-status-ext"]; !ok {
		t.Error("status unknown member lost")
	}
	if env.Retry.Extra["x-retry-ext"] != "kept" {
		t.Error("retry unknown member lost")
	}
	if _, ok := env.Provenance.Extra["x-prov-ext"]; !ok {
		t.Error("provenance unknown member lost")
	}
	if env.Remediation[1].Params["queue"] != "travel-ops" {
		t.Error("remediation parameter lost")
	}
	if env.Causes[2].Ref == nil || env.Causes[2].Ref.Extra["operation"] != "read_order" {
		t.Error("compact reference member lost")
	}
	if env.Conditions[0].Status == nil || env.Conditions[1].Envelope == nil {
		t.Error("conditions: want one status object and one envelope")
	}
	if env.Issuer != "booking-agent" || env.Integrity == nil || !env.Integrity.Verified {
		t.Error("authenticity block lost")
	}
}

func TestParseReportsAllDecodingIssues(t *testing.T) {
	doc := `{"spec_version":1,"status":{"code":"x","name":2,"kind":"status","scope":"task","terminal":"no"},"occurred_at":"2026-08-08T12:00:00Z","retry":{"safe":"yes"}}`
	_, err := Parse([]byte(doc))
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("Parse() = %v", err)
	}
	var paths []string
	for _, is := range ve.Issues {
		paths = append(paths, is.Path)
	}
	want := []string{"/spec_version", "/status/code", "/status/name", "/status/terminal", "/retry/safe"}
	for _, p := range want {
		if !slices.Contains(paths, p) {
			t.Errorf("no issue at %s; got %v", p, paths)
		}
	}
}

func TestCheckJSONReportsOnce(t *testing.T) {
	// terminal is the wrong type: one type issue, no second issue at the
	// same path from the rule layer.
	issues := CheckJSON([]byte(`{"spec_version":"0.1.0","status":{"code":5001,"name":"RATE_LIMITED","kind":"status","scope":"tool_call","terminal":1},"occurred_at":"2026-08-08T12:00:00Z"}`))
	if len(issues) != 1 || issues[0].Rule != RuleType || issues[0].Path != "/status/terminal" {
		t.Fatalf("CheckJSON() = %v", issues)
	}
}

func TestParseRejectsNonObjects(t *testing.T) {
	for _, doc := range []string{``, `null`, `42`, `"x"`, `[]`, `{"a":1}{}`, "{\"status\":\"\xff\"}"} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", doc, err)
		}
	}
}

func TestParseRejectsOversizedDocument(t *testing.T) {
	doc := `{"details":{"org.example.pad":"` + strings.Repeat("a", MaxDocumentSize) + `"}}`
	if _, err := Parse([]byte(doc)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Parse() = %v, want ErrMalformed", err)
	}
}
