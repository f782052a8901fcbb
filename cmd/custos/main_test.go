package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// custos runs one command line in-process, as the binary would.
func custos(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

const actionDigest = "sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8"

func TestCanonAndDigest(t *testing.T) {
	action := filepath.Join("testdata", "action.json")
	raw, err := os.ReadFile(action)
	if err != nil {
		t.Fatal(err)
	}
	request := `{"type":"approval.requested","request":{"id":"apr_1","action":` + string(raw) + `}}`

	tests := []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"file", "", []string{"digest", action}, 0, actionDigest + "\n", ""},
		{"stdin dash", string(raw), []string{"digest", "-"}, 0, actionDigest + "\n", ""},
		{"stdin implicit", string(raw), []string{"digest"}, 0, actionDigest + "\n", ""},
		{"pointer", request, []string{"digest", "--pointer", "/request/action"}, 0, actionDigest + "\n", ""},
		{"canon", `{ "b": [1.0, 1e21], "a": "\u00e9" }`, []string{"canon"}, 0, `{"a":"é","b":[1,1e+21]}`, ""},
		{"canon pointer into array", `{"a":[{"x":1},{"z":2, "y":1e-7}]}`, []string{"canon", "--pointer", "/a/1"}, 0, `{"y":1e-7,"z":2}`, ""},
		{"canon pointer escapes", `{"a/b":{"~":true}}`, []string{"canon", "--pointer", "/a~1b/~0"}, 0, `true`, ""},
		{"pointer missing member", request, []string{"digest", "--pointer", "/request/nope"}, 1, "", `no member "nope"`},
		{"pointer leading zero", `{"a":[1,2]}`, []string{"digest", "--pointer", "/a/01"}, 1, "", `no element "01"`},
		{"pointer plus sign", `{"a":[1,2]}`, []string{"digest", "--pointer", "/a/+1"}, 1, "", `no element "+1"`},
		{"pointer without slash", `{}`, []string{"digest", "--pointer", "a"}, 2, "", "must start with '/'"},
		{"duplicate outside pointer", `{"request":{"action":{}},"request":1}`, []string{"digest", "--pointer", "/request/action"}, 1, "", "duplicate member name"},
		{"duplicate key", `{"a":1,"a":2}`, []string{"digest"}, 1, "", `duplicate member name at "/a"`},
		{"missing file", "", []string{"digest", "does-not-exist.json"}, 1, "", "does-not-exist.json"},
		{"too many args", "", []string{"digest", "a", "b"}, 2, "", "accepts at most 1 arg"},
		{"too large", `[1,2,3]`, []string{"digest", "--max-size", "3"}, 1, "", "larger than 3 bytes"},
		{"too deep", `[[[1]]]`, []string{"digest", "--max-depth", "2"}, 1, "", "nesting too deep"},
		{"bad limit", `[]`, []string{"digest", "--max-depth", "0"}, 2, "", "must be positive"},
		{"unknown flag", `[]`, []string{"digest", "--nope"}, 2, "", "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := custos(t, tt.stdin, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if tt.wantOut != "" && out != tt.wantOut {
				t.Errorf("stdout %q, want %q", out, tt.wantOut)
			}
			if tt.wantErr != "" && !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q does not mention %q", errOut, tt.wantErr)
			}
			if tt.wantCode != 0 && out != "" {
				t.Errorf("failed command wrote to stdout: %q", out)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, errOut := custos(t, "", "version")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"custos ", "go go1.", "ASC 0.1.0", "RFC 8785"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output %q lacks %q", out, want)
		}
	}
	if code, _, _ := custos(t, "", "version", "extra"); code != 2 {
		t.Errorf("version with an argument: exit %d, want 2", code)
	}
}

func TestCompletion(t *testing.T) {
	code, out, errOut := custos(t, "", "completion", "bash")
	if code != 0 || !strings.Contains(out, "custos") {
		t.Fatalf("exit %d, stderr %q, %d bytes out", code, errOut, len(out))
	}
}

func TestUnknownCommand(t *testing.T) {
	code, _, errOut := custos(t, "", "no-such-command")
	if code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestStatus(t *testing.T) {
	valid := `{"spec_version":"0.1.0","status":{"code":5001,"name":"RATE_LIMITED","kind":"status","scope":"tool_call","terminal":false},"occurred_at":"2026-08-08T12:00:00Z"}`
	mismatch := strings.Replace(valid, `"RATE_LIMITED"`, `"TIMEOUT"`, 1)
	tests := []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		{"explain by number", "", []string{"status", "explain", "6005"}, 0, []string{"RESULT_STATE_UNKNOWN", "Never blindly"}, ""},
		{"explain by name", "", []string{"status", "explain", "rate_limited"}, 0, []string{"ASC-5001", "429"}, ""},
		{"explain ASC notation", "", []string{"status", "explain", "ASC-3002"}, 0, []string{"HUMAN_APPROVAL_REQUIRED"}, ""},
		{"explain unregistered by class", "", []string{"status", "explain", "9555"}, 0, []string{"not registered", "private use", "assume neither retry safety nor terminality"}, ""},
		{"explain unknown name", "", []string{"status", "explain", "NOPE"}, 2, nil, "NOPE"},
		{"explain three digits", "", []string{"status", "explain", "999"}, 2, nil, "four-digit"},
		{"explain no argument", "", []string{"status", "explain"}, 2, nil, "accepts 1 arg"},
		{"validate valid", valid, []string{"status", "validate"}, 0, []string{"valid ASC envelope (0 warning(s))"}, ""},
		{"validate name mismatch", mismatch, []string{"status", "validate", "-"}, 1, []string{"/status/name", "RATE_LIMITED"}, "not a valid ASC envelope"},
		{"validate json", mismatch, []string{"status", "validate", "--json"}, 1, []string{`"valid": false`, `"pointer": "/status/name"`}, "1 error(s)"},
		{"validate duplicate key", `{"spec_version":"0.1.0","spec_version":"0.1.0"}`, []string{"status", "validate"}, 1, []string{"duplicate member name"}, "not a valid"},
		{"validate not json", `hello`, []string{"status", "validate"}, 1, nil, "not a valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := custos(t, tt.stdin, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stdout %q, stderr %q)", code, tt.wantCode, out, errOut)
			}
			for _, want := range tt.wantOut {
				if !strings.Contains(out, want) {
					t.Errorf("stdout %q lacks %q", out, want)
				}
			}
			if tt.wantErr != "" && !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut, tt.wantErr)
			}
		})
	}
}

func TestConformanceASC(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good.json", `{"spec_version":"0.1.0","status":{"code":2000,"name":"SUCCESS","kind":"status","scope":"task","terminal":true},"occurred_at":"2026-08-08T12:00:00Z"}`)
	code, out, errOut := custos(t, "", "conformance", "asc", dir)
	if code != 0 || out != "asc conformance: 1 passed, 0 failed, 0 skipped\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	write("bad.json", `{"spec_version":"0.1.0","status":{"code":2000,"name":"FAILURE","kind":"status","scope":"task","terminal":true},"occurred_at":"2026-08-08T12:00:00Z"}`)
	code, out, errOut = custos(t, "", "conformance", "asc", dir)
	if code != 1 || !strings.Contains(out, "asc conformance: 1 passed, 1 failed, 0 skipped") || !strings.Contains(out, "bad.json") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	if code, _, errOut := custos(t, "", "conformance", "asc", filepath.Join(dir, "missing")); code != 1 || errOut == "" {
		t.Fatalf("missing directory: exit %d, stderr %q", code, errOut)
	}
}

func TestConformanceArsia(t *testing.T) {
	dir := t.TempDir()
	suite := `name: own
level: core
cases:
  - id: OWN-SKIP
    description: gated
    category: canonicalization
    skip_until: some-gate
    input: {}
    expected: {}
  - id: OWN-MISSING-VECTOR
    description: the vector file is absent
    category: canonicalization
    input:
      vector_id: "CTV-01"
    expected:
      match_vector_field: canonical_bytes_hex
`
	if err := os.WriteFile(filepath.Join(dir, "own.yaml"), []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.json")
	code, out, errOut := custos(t, "", "conformance", "arsia", "--suites", dir, "--shared", dir, "--category", "claimed", "--json", report)
	if code != 1 || !strings.HasSuffix(out, "arsia conformance: 0 passed, 1 failed, 1 skipped\n") || !strings.Contains(out, "OWN-MISSING-VECTOR") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"summary"`, `"skip": 1`, `"test_id": "OWN-SKIP"`, `"status": "fail"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("report lacks %s", want)
		}
	}
	if code, _, _ := custos(t, "", "conformance", "arsia", "--suites", dir); code != 2 {
		t.Errorf("without --shared: exit %d, want 2", code)
	}
}
