package jcs_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.canonical from the current implementation")

// TestAAISKnownAnswer checks the published digest of the AAIS shell action.
func TestAAISKnownAnswer(t *testing.T) {
	const want = "sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8"
	const wantCanonical = `{"arguments":{"command":"node --check script.js"},"effects":["Starts a local Node.js process","Reads script.js"],"kind":"process.exec","name":"shell.exec","summary":"Run the JavaScript syntax check","working_directory":"/workspace/example"}`
	data, err := os.ReadFile(filepath.Join("testdata", "aais-shell-action.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("\n  \"kind\": ")) {
		t.Fatalf("testdata/aais-shell-action.json is expected to be pretty-printed")
	}
	checkCanonical(t, string(data), wantCanonical)
	got, err := jcs.Digest(data)
	if err != nil || got != want {
		t.Fatalf("Digest(aais-shell-action.json) = %q, %v; want %q", got, err, want)
	}
	if d := jcs.DigestCanonical([]byte(wantCanonical)); d != want {
		t.Fatalf("DigestCanonical = %q, want %q", d, want)
	}
	v, err := jcs.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := jcs.DigestValue(v); err != nil || d != want {
		t.Fatalf("DigestValue(Decode) = %q, %v; want %q", d, err, want)
	}
	// The same action built in Go.
	d, err := jcs.DigestValue(map[string]any{
		"kind":              "process.exec",
		"name":              "shell.exec",
		"summary":           "Run the JavaScript syntax check",
		"arguments":         map[string]any{"command": "node --check script.js"},
		"working_directory": "/workspace/example",
		"effects":           []any{"Starts a local Node.js process", "Reads script.js"},
	})
	if err != nil || d != want {
		t.Fatalf("DigestValue(map) = %q, %v; want %q", d, err, want)
	}
}

// TestGolden canonicalizes testdata/golden/*.json and compares the result
// with the matching *.canonical file. Run with -update to rewrite them.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < 8 {
		t.Fatalf("found %d golden inputs, want at least 8", len(inputs))
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := jcs.Canonicalize(data)
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", in, err)
			}
			goldenPath := strings.TrimSuffix(in, ".json") + ".canonical"
			if *update {
				if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run go test ./jcs -run Golden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Canonicalize(%s) differs from %s\n%s", in, goldenPath, diff(string(got), string(want)))
			}
			// A canonical file is its own canonical form.
			if again := mustCanonicalize(t, want); !bytes.Equal(again, want) {
				t.Fatalf("%s is not canonical\n%s", goldenPath, diff(string(again), string(want)))
			}
			v, err := jcs.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if c, err := jcs.CanonicalizeValue(v); err != nil || !bytes.Equal(c, want) {
				t.Fatalf("CanonicalizeValue(Decode(%s)) = %s, %v", in, clip(string(c)), err)
			}
		})
	}
	// Every golden output has an input.
	outs, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.canonical"))
	for _, out := range outs {
		if _, err := os.Stat(strings.TrimSuffix(out, ".canonical") + ".json"); err != nil {
			t.Errorf("orphan golden file %s", out)
		}
	}
}
