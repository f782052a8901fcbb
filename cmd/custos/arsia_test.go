package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArsiaRoundTrip drives the ARSIA commands as a user would: generate
// keys, build a request, sign it, verify and validate it, and see a
// tampered copy refused.
func TestArsiaRoundTrip(t *testing.T) {
	for _, alg := range []string{"EdDSA", "ES256", "RS256"} {
		t.Run(alg, func(t *testing.T) {
			dir := t.TempDir()
			keys := filepath.Join(dir, "keys")
			mustRun(t, "", "keygen", "--agent", "agent:acme.advisor", "--alg", alg, "--out", keys)
			info, err := os.Stat(filepath.Join(keys, "key-1.private.jwk.json"))
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o600 {
				t.Errorf("private key mode %v, want 0600", info.Mode().Perm())
			}
			if code, _, errOut := custos(t, "", "keygen", "--agent", "agent:acme.advisor", "--out", keys); code == 0 || !strings.Contains(errOut, "exists") {
				t.Errorf("second keygen overwrote the private key: exit %d, stderr %q", code, errOut)
			}

			req := mustRun(t, "", "envelope", "new", "--from", "agent:acme.advisor", "--to", "agent:acme.billing",
				"--capability", "billing.invoice.create", "--type", "com.acme.billing/create-invoice",
				"--args", `{"amount":"100.00","lines":[],"draft":false}`, "--profile", "EU-AI-ACT-HIGH-RISK")
			if !strings.Contains(req, `"lines":[]`) || !strings.Contains(req, `"draft":false`) {
				t.Errorf("request lost empty or false args: %s", req)
			}
			if code, _, _ := custos(t, req, "validate"); code != 1 {
				t.Errorf("unsigned request validated (exit %d); a request needs security", code)
			}

			signed := mustRun(t, req, "sign", "--key", filepath.Join(keys, "key-1.private.jwk.json"))
			jwks := filepath.Join(keys, "jwks.json")
			if out := mustRun(t, signed, "verify", "--jwks", jwks); !strings.Contains(out, "signature verified ("+alg) {
				t.Errorf("verify: %q", out)
			}
			if out := mustRun(t, signed, "validate"); !strings.Contains(out, "valid ARSIA envelope") {
				t.Errorf("validate: %q", out)
			}

			tampered := strings.Replace(signed, "100.00", "999.00", 1)
			if code, _, errOut := custos(t, tampered, "verify", "--jwks", jwks); code != 1 || !strings.Contains(errOut, "signature not verified") {
				t.Errorf("tampered envelope: exit %d, stderr %q", code, errOut)
			}
			if code, _, errOut := custos(t, signed, "verify", "--jwks", jwks, "--alg", "ES256K"); code != 1 || !strings.Contains(errOut, "not verified") {
				t.Errorf("disallowed algorithm: exit %d, stderr %q", code, errOut)
			}
		})
	}
}

func TestArsiaCommandErrors(t *testing.T) {
	tests := []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"keygen bad agent", "", []string{"keygen", "--agent", "acme"}, 2, "not an ARSIA agent identifier"},
		{"keygen bad alg", "", []string{"keygen", "--agent", "agent:a.b", "--alg", "HS256", "--out", "%TMP%"}, 2, "want EdDSA, ES256 or RS256"},
		{"sign without key", "{}", []string{"sign"}, 2, "--key is required"},
		{"verify without jwks", "{}", []string{"verify"}, 2, "--jwks is required"},
		{"validate duplicate key", `{"v":"1.0","v":"1.0"}`, []string{"validate"}, 1, "duplicate member name"},
		{"validate not object", `[1]`, []string{"validate", "--json"}, 1, "not a JSON object"},
		{"profile unknown", "", []string{"profile", "show", "NOPE"}, 1, "unknown compliance profile"},
		{"envelope bad capability", "", []string{"envelope", "new", "--from", "agent:a.b", "--to", "agent:c.d", "--capability", "x", "--type", "a.b/c"}, 1, "capabilit"},
		{"envelope unknown profile", "", []string{"envelope", "new", "--from", "agent:a.b", "--to", "agent:c.d", "--capability", "a.b", "--type", "a.b/c", "--profile", "NOPE"}, 2, "unknown"},
		{"envelope bad args", "", []string{"envelope", "new", "--from", "agent:a.b", "--to", "agent:c.d", "--capability", "a.b", "--type", "a.b/c", "--args", "{"}, 2, "--args"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				args[i] = strings.ReplaceAll(a, "%TMP%", t.TempDir())
			}
			code, out, errOut := custos(t, tt.stdin, args...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q (want %q)", code, tt.wantCode, out, errOut, tt.wantErr)
			}
		})
	}
}

func TestProfileCommands(t *testing.T) {
	out := mustRun(t, "", "profile", "list")
	for _, want := range []string{"GDPR-STANDARD", "MIFID-II ", "required_before_execution", "1827d"} {
		if !strings.Contains(out, want) {
			t.Errorf("profile list lacks %q:\n%s", want, out)
		}
	}
	out = mustRun(t, "", "profile", "show", "DORA")
	for _, want := range []string{"Profile:                 DORA", "required_within_24h", "Clock skew:              60s", "References:"} {
		if !strings.Contains(out, want) {
			t.Errorf("profile show lacks %q:\n%s", want, out)
		}
	}
}

// mustRun runs a command that must succeed and returns its standard output.
func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	code, out, errOut := custos(t, stdin, args...)
	if code != 0 {
		t.Fatalf("custos %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
	}
	return out
}
