package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func good() entry {
	return entry{Code: 5001, Name: "RATE_LIMITED", Class: "transient_failure", Meaning: "m",
		Terminal: "contextual", Retry: "After delay", Severity: []string{"warning"}, HTTP: []int{429}}
}

func event() entry {
	return entry{Code: 8003, Name: "RETRY_ATTEMPTED", Class: "event", Meaning: "m",
		Terminal: "not_applicable", Retry: "N/A", EventOnly: true, Severity: []string{"notice"}}
}

func TestValidateRejects(t *testing.T) {
	with := func(f func(*entry)) entry { e := good(); f(&e); return e }
	tests := []struct {
		name  string
		codes []entry
		want  string
	}{
		{"duplicate code", []entry{good(), with(func(e *entry) { e.Name = "OTHER" })}, "duplicate code 5001 (also codes[0])"},
		{"duplicate name", []entry{good(), with(func(e *entry) { e.Code = 5002 })}, "duplicate name RATE_LIMITED (also codes[0])"},
		{"lower-case name", []entry{with(func(e *entry) { e.Name = "rate_limited" })}, `name "rate_limited" does not match`},
		{"leading digit", []entry{with(func(e *entry) { e.Name = "1RATE" })}, "does not match"},
		{"hyphen", []entry{with(func(e *entry) { e.Name = "RATE-LIMITED" })}, "does not match"},
		{"empty name", []entry{with(func(e *entry) { e.Name = "" })}, "does not match"},
		{"code below range", []entry{with(func(e *entry) { e.Code = 999 })}, "code 999 outside the core range 1000-8999"},
		{"extension code", []entry{with(func(e *entry) { e.Code = 9001 })}, "code 9001 outside the core range"},
		{"class digit mismatch", []entry{with(func(e *entry) { e.Code = 6001 })}, `class "transient_failure" disagrees with first digit 6 (want "fatal_or_indeterminate")`},
		{"unknown class", []entry{with(func(e *entry) { e.Class = "oops" })}, `class "oops" disagrees`},
		{"event code not event-only", []entry{with(func(e *entry) { *e = event(); e.EventOnly = false })}, "event_only must be true"},
		{"non-event code event-only", []entry{with(func(e *entry) { e.EventOnly = true })}, "event_only must be false"},
		{"bad terminal", []entry{with(func(e *entry) { e.Terminal = "maybe" })}, `terminal "maybe"`},
		{"terminal n/a on status code", []entry{with(func(e *entry) { e.Terminal = "not_applicable" })}, "not_applicable is for event-only"},
		{"empty meaning", []entry{with(func(e *entry) { e.Meaning = " " })}, "meaning is empty"},
		{"bad severity", []entry{with(func(e *entry) { e.Severity = []string{"Warning"} })}, `severity "Warning"`},
		{"no severity", []entry{with(func(e *entry) { e.Severity = nil })}, "severity is empty"},
		{"bad http", []entry{with(func(e *entry) { e.HTTP = []int{42} })}, "HTTP status 42"},
		{"identifier collision", []entry{with(func(e *entry) { e.Name = "RATE__LIMITED"; e.Code = 5009 }), good()}, "Go identifier RateLimited collides"},
		{"no codes", nil, "no codes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validate(&registry{SpecVersion: "0.1.0", Codes: tt.codes})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate() = %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	if err := validate(&registry{SpecVersion: "0.1.0", Codes: []entry{good(), event()}}); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRejectsUnknownMember(t *testing.T) {
	_, err := decode(strings.NewReader(`{"spec_version":"0.1.0","codes":[{"code":1000,"nmae":"X"}]}`))
	if err == nil || !strings.Contains(err.Error(), "nmae") {
		t.Fatalf("decode() = %v, want unknown field error", err)
	}
}

// TestRunFailsOnBadRegistry checks the exit path CI depends on: nothing is
// written when the registry is refused.
func TestRunFailsOnBadRegistry(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "registry.json")
	out := filepath.Join(dir, "out.go")
	bad := `{"spec_version":"0.1.0","codes":[
	 {"code":1000,"name":"ACCEPTED","class":"lifecycle","meaning":"m","terminal":"no","retry":"N/A","severity":["info"]},
	 {"code":1000,"name":"RUNNING","class":"lifecycle","meaning":"m","terminal":"no","retry":"N/A","severity":["info"]}]}`
	if err := os.WriteFile(in, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(in, out)
	if err == nil || !strings.Contains(err.Error(), "duplicate code 1000") {
		t.Fatalf("run() = %v", err)
	}
	if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
		t.Fatalf("output written despite error: %v", statErr)
	}
}

// TestGenerateDeterministic regenerates from the real registry twice and
// compares with the checked-in file.
func TestGenerateDeterministic(t *testing.T) {
	data, err := os.ReadFile("../../registry.json")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(reg); err != nil {
		t.Fatal(err)
	}
	a, err := generate(reg, "registry.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := generate(reg, "registry.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("generate is not deterministic")
	}
	checked, err := os.ReadFile("../../registry_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, checked) {
		t.Fatal("registry_gen.go is stale: run go generate ./asc")
	}
}
