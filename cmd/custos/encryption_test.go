package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// keygen --use enc, envelope new --encrypt-to and verify --decrypt-key: a
// request encrypted to the receiver's published key, then signed, whose
// payload only the receiver's private key reads.
func TestEnvelopeEncryptTo(t *testing.T) {
	dir := t.TempDir()
	gw, adv := filepath.Join(dir, "gw"), filepath.Join(dir, "adv")
	if code, _, errOut := custos(t, "", "keygen", "--agent", "agent:acme.gateway", "--use", "enc", "--label", "enc-1", "--out", gw); code != 0 {
		t.Fatalf("keygen --use enc: %d %s", code, errOut)
	}
	if code, _, errOut := custos(t, "", "keygen", "--agent", "agent:acme.advisor", "--out", adv); code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut)
	}
	if code, _, errOut := custos(t, "", "keygen", "--agent", "agent:acme.gateway", "--use", "both", "--out", gw); code != 2 || !strings.Contains(errOut, "--use") {
		t.Errorf("keygen --use both: %d %s", code, errOut)
	}
	newArgs := []string{"envelope", "new", "--from", "agent:acme.advisor", "--to", "agent:acme.gateway", "--capability", "demo.echo",
		"--type", "com.acme/echo", "--args", `{"text":"secret"}`, "--encrypt-to", filepath.Join(gw, "jwks.json")}
	code, req, errOut := custos(t, "", append(newArgs, "--key", filepath.Join(adv, "key-1.private.jwk.json"))...)
	if code != 0 {
		t.Fatalf("envelope new --encrypt-to: %d %s", code, errOut)
	}
	var env map[string]any
	if err := json.Unmarshal([]byte(req), &env); err != nil {
		t.Fatal(err)
	}
	sec, _ := env["security"].(map[string]any)
	if _, isJWE := env["payload"].(string); !isJWE || strings.Contains(req, "secret") || sec["encrypted"] != true ||
		sec["enc_alg"] != "ECDH-ES" || sec["enc_method"] != "A256GCM" || sec["sig"] == nil {
		t.Fatalf("not an encrypted, signed request: %s", req)
	}
	jwks := filepath.Join(adv, "jwks.json")
	if code, out, _ := custos(t, req, "verify", "--jwks", jwks); code != 0 || !strings.Contains(out, "the payload is encrypted") {
		t.Errorf("verify: %d %s", code, out)
	}
	code, out, errOut := custos(t, req, "verify", "--jwks", jwks, "--decrypt-key", filepath.Join(gw, "enc-1.private.jwk.json"))
	if code != 0 || !strings.Contains(out, `{"args":{"text":"secret"},"type":"com.acme/echo"}`) {
		t.Errorf("verify --decrypt-key: %d %s %s", code, out, errOut)
	}
	// Another key does not decrypt it.
	if code, _, _ := custos(t, "", "keygen", "--agent", "agent:acme.gateway", "--use", "enc", "--label", "enc-2", "--out", filepath.Join(dir, "other")); code != 0 {
		t.Fatal("keygen enc-2")
	}
	if code, _, errOut := custos(t, req, "verify", "--jwks", jwks, "--decrypt-key", filepath.Join(dir, "other", "enc-2.private.jwk.json")); code != 1 ||
		!strings.Contains(errOut, "JWE decryption failed") {
		t.Errorf("verify with another key: %d %s", code, errOut)
	}
	// A receiver that publishes no encryption key: a precise refusal.
	if code, _, errOut := custos(t, "", append(newArgs[:len(newArgs)-1], jwks)...); code != 1 || !strings.Contains(errOut, "lists no encryption key of agent:acme.gateway") {
		t.Errorf("--encrypt-to a JWKS without the receiver's enc key: %d %s", code, errOut)
	}
}
