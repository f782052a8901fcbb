package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/authz"
)

// The whole flow against custos serve: metadata, a DPoP-bound token for a
// client assertion, the inbox call it authorizes, introspection,
// revocation, and the same call refused with token_revoked.
func TestServeAuthorizationServer(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, data, nil,
		"tokens: {mode: dpop}\nauthorization_server: {enabled: true, token_lifetime: 2m}\n")
	defer g.stop()

	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/.well-known/oauth-authorization-server", nil)
	code, md, _ := g.do(t, req)
	if code != 200 || md["issuer"] != g.url || md["token_endpoint"] != g.url+"/oauth/token" ||
		md["jwks_uri"] != g.url+"/.well-known/arsia/jwks.json" {
		t.Fatalf("metadata %d %v", code, md)
	}
	tokenURL := g.url + "/oauth/token"
	assertion := func() string {
		signer, err := cryptoSigner(g.signer)
		if err != nil {
			t.Fatal(err)
		}
		a, err := auth.NewClientAssertion(signer, g.kid, auth.ClientAssertionOptions{ClientID: sender, Audience: tokenURL, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	form := func(path string, v url.Values, dpop string) (int, map[string]any) {
		v.Set("client_assertion_type", auth.ClientAssertionType)
		v.Set("client_assertion", assertion())
		req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if dpop != "" {
			req.Header.Set("DPoP", dpop)
		}
		code, body, _ := g.do(t, req)
		return code, body
	}
	_, dpopKey, _ := ed25519.GenerateKey(rand.Reader)
	proof, err := auth.NewTokenRequestProof(dpopKey, "POST", tokenURL, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	code, tr := form("/oauth/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"demo.echo"}}, proof)
	if code != 200 || tr["token_type"] != "DPoP" || tr["expires_in"] != float64(120) {
		t.Fatalf("token: %d %v", code, tr)
	}
	tok := tr["access_token"].(string)
	// Scope beyond the sender's grants is refused.
	if code, e := form("/oauth/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"ops.restart"}}, ""); code != 400 || e["error"] != "invalid_scope" {
		t.Fatalf("ungranted scope: %d %v", code, e)
	}

	inbox := g.url + "/v1/arsia/inbox"
	call := func() (int, map[string]any) {
		e, err := arsia.NewRequest(sender, "agent:acme.gateway", []string{"demo.echo"}, "com.acme/call", map[string]any{"text": "hi"}, arsia.BuildOptions{Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		env, _ := e.Map()
		signed, err := sig.Sign(env, g.signer, g.kid)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(signed)
		p, err := authz.NewProof(dpopKey, "POST", inbox, tok, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), "POST", inbox, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/arsia+json; v=1")
		req.Header.Set("Authorization", "DPoP "+tok)
		req.Header.Set("DPoP", p)
		code, reply, _ := g.do(t, req)
		return code, reply
	}
	if code, reply := call(); code != 200 {
		t.Fatalf("inbox with the issued token: %d %v", code, reply)
	}
	if code, m := form("/oauth/introspect", url.Values{"token": {tok}}, ""); code != 200 || m["active"] != true || m["sub"] != sender {
		t.Fatalf("introspect: %d %v", code, m)
	}
	if code, _ := form("/oauth/revoke", url.Values{"token": {tok}}, ""); code != 200 {
		t.Fatalf("revoke: %d", code)
	}
	if code, m := form("/oauth/introspect", url.Values{"token": {tok}}, ""); code != 200 || m["active"] != false {
		t.Fatalf("introspect after revoke: %d %v", code, m)
	}
	code, reply := call()
	if code != 401 || !strings.Contains(mustJSON(t, reply), authz.ReasonTokenRevoked) {
		t.Fatalf("inbox after revocation: %d %v", code, reply)
	}
	// Both ends of the token's life are in the audit log (Identity §9.3).
	code, out, errOut := custos(t, "", "audit", "export", "--data", data)
	if code != 0 || strings.Count(out, `"kind":"token_issued"`) != 1 || strings.Count(out, `"kind":"token_revoked"`) != 1 ||
		strings.Contains(out, tok) {
		t.Fatalf("audit export: %d %s %s", code, out, errOut)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
