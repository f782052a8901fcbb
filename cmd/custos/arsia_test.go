package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
			if code, _, errOut := custos(t, "", "keygen", "--agent", "agent:acme.advisor", "--out", keys); code != 1 ||
				!strings.Contains(errOut, "key-1.private.jwk.json already exists and is kept") || !strings.Contains(errOut, "--label") || !strings.Contains(errOut, "--force") {
				t.Errorf("second keygen: exit %d, stderr %q; want the file kept and --label, --force named", code, errOut)
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
			if out := mustRun(t, signed, "validate"); !strings.Contains(out, "valid ARSIA envelope") ||
				!strings.Contains(out, "the signature was not checked;") || !strings.Contains(out, " verify --jwks KEYS - checks it") {
				t.Errorf("validate: %q", out)
			}
			// A tampered envelope is still valid: validate says it did not
			// look at the signature, and verify refuses it.
			forged := strings.Replace(signed, `"100.00"`, `"900.00"`, 1)
			if out := mustRun(t, forged, "validate"); !strings.Contains(out, "the signature was not checked") {
				t.Errorf("validate a tampered envelope: %q", out)
			}
			if code, _, _ := custos(t, forged, "verify", "--jwks", jwks); code != 1 {
				t.Errorf("verify a tampered envelope: exit %d", code)
			}
			// Malformed input is named as such, not as a signature error.
			if code, _, errOut := custos(t, `{"a":`, "validate"); code != 1 || !strings.HasPrefix(errOut, "custos: standard input: malformed envelope: ") {
				t.Errorf("validate malformed: exit %d, %q", code, errOut)
			}

			// The same bytes an hour later have expired; a day earlier
			// they come from the future (EU-AI-ACT-HIGH-RISK: 120 s skew).
			later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			if code, out, _ := custos(t, signed, "validate", "--now", later); code != 1 || !strings.Contains(out, "message_expired") {
				t.Errorf("validate an hour later: exit %d, %q", code, out)
			}
			earlier := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
			if code, out, _ := custos(t, signed, "validate", "--now", earlier); code != 1 || !strings.Contains(out, "clock_skew_exceeded") ||
				!strings.Contains(out, "120 s") {
				t.Errorf("validate a day earlier: exit %d, %q", code, out)
			}

			tampered := strings.Replace(signed, "100.00", "999.00", 1)
			if code, _, errOut := custos(t, tampered, "verify", "--jwks", jwks); code != 1 || !strings.Contains(errOut, "signature not verified") {
				t.Errorf("tampered envelope: exit %d, stderr %q", code, errOut)
			}
			if code, _, errOut := custos(t, signed, "verify", "--jwks", jwks, "--alg", "ES256K"); code != 2 || !strings.Contains(errOut, "want EdDSA, ES256 or RS256") {
				t.Errorf("unknown algorithm: exit %d, stderr %q", code, errOut)
			}
			other := map[string]string{"EdDSA": "ES256", "ES256": "RS256", "RS256": "EdDSA"}[alg]
			if code, _, errOut := custos(t, signed, "verify", "--jwks", jwks, "--alg", other); code != 1 || !strings.Contains(errOut, "not verified") {
				t.Errorf("disallowed algorithm: exit %d, stderr %q", code, errOut)
			}
		})
	}
}

// TestValidateFreshness: validate judges ts and expires_at against the
// current time, or the time --now pins, with the profile's skew
// (MIFID-II: 60 s), inclusive at the boundary.
func TestValidateFreshness(t *testing.T) {
	event := filepath.Join("testdata", "event-2026-04-30.json") // ts 2026-04-30T10:00:00.000Z, MIFID-II
	for _, tc := range []struct {
		now      string // "" for the current time
		wantCode int
		want     string
	}{
		{"", 1, "clock_skew_exceeded: The message is stale"},
		{"2026-04-30T10:00:00Z", 0, "valid ARSIA envelope"},
		{"2026-04-30T10:01:00Z", 0, "valid ARSIA envelope"},
		{"2026-04-30T12:01:00+02:00", 0, "valid ARSIA envelope"},
		{"2026-04-30T10:01:00.001Z", 1, "more than the allowed clock skew of 60 s before"},
		{"2026-04-30T09:58:59Z", 1, "clock_skew_exceeded: The message is from the future"},
		{"2025-04-30T10:00:00Z", 1, "from the future"},
	} {
		args := []string{"validate", event}
		if tc.now != "" {
			args = []string{"validate", "--now", tc.now, event}
		}
		code, out, _ := custos(t, "", args...)
		if code != tc.wantCode || !strings.Contains(out, tc.want) {
			t.Errorf("--now %q: exit %d, %q; want %d, %q", tc.now, code, out, tc.wantCode, tc.want)
		}
	}
	code, out, _ := custos(t, "", "validate", "--json", "--now", "2026-05-01T10:00:00Z", event)
	if code != 1 || !strings.Contains(out, `"pointer": "/ts"`) || !strings.Contains(out, `"code": "clock_skew_exceeded"`) {
		t.Errorf("--json: exit %d, %s", code, out)
	}
	// An expired request names expires_at.
	req := `{"v":"1.0","id":"7c1e2d40-5b8a-4f3e-9a61-0d2b4c6e8f11","ts":"2026-04-30T10:00:00.000Z","from":"agent:acme.billing",` +
		`"to":"agent:acme.ledger","intent":"request","expires_at":"2026-04-30T10:01:00.000Z","capabilities":["acme.ledger.post"],` +
		`"payload":{"type":"com.acme.ledger/post","args":{}},"security":{"alg":"EdDSA","kid":"agent:acme.billing#k","sig":"AAAA"}}`
	if code, out, _ := custos(t, req, "validate", "--json", "--now", "2026-04-30T10:06:00.001Z"); code != 1 ||
		!strings.Contains(out, `"pointer": "/expires_at"`) || !strings.Contains(out, "message_expired") {
		t.Errorf("expired request: exit %d, %s", code, out)
	}
	// At ts + skew (the end of its acceptance window) it is still valid.
	if code, out, _ := custos(t, req, "validate", "--now", "2026-04-30T10:05:00Z"); code != 0 {
		t.Errorf("request at ts + skew: exit %d, %s", code, out)
	}
	// A structural error is reported alone, not once more as freshness.
	bad := strings.Replace(req, `"2026-04-30T10:00:00.000Z"`, `"yesterday"`, 1)
	if code, out, _ := custos(t, bad, "validate", "--now", "2026-04-30T10:00:00Z"); code != 1 || strings.Contains(out, "invalid_ts") ||
		!strings.Contains(out, "schema_violation") {
		t.Errorf("bad ts: exit %d, %s", code, out)
	}
	for _, now := range []string{"yesterday", "2026-04-30", "2026-04-30T10:00:00"} {
		if code, _, errOut := custos(t, "", "validate", "--now", now, event); code != 2 || !strings.Contains(errOut, "--now") {
			t.Errorf("--now %q: exit %d, %q", now, code, errOut)
		}
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
		{"profile unknown", "", []string{"profile", "show", "NOPE"}, 2, "unknown compliance profile"},
		{"envelope bad capability", "", []string{"envelope", "new", "--from", "agent:a.b", "--to", "agent:c.d", "--capability", "x", "--type", "a.b/c"}, 2, "capabilit"},
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
