package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/authz"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/store"
)

// A user makes an issuer key and an agent key with keygen, issues a
// DPoP-bound token and a proof, and the gateway's Authorizer accepts them
// once.
func TestTokenIssueAndDPoP(t *testing.T) {
	dir := t.TempDir()
	issuer, agent := filepath.Join(dir, "issuer"), filepath.Join(dir, "keys")
	mustRun(t, "", "keygen", "--agent", "agent:local.issuer", "--out", issuer)
	mustRun(t, "", "keygen", "--agent", "agent:acme.advisor", "--out", agent)
	issuerKey, agentKey := filepath.Join(issuer, "key-1.private.jwk.json"), filepath.Join(agent, "key-1.private.jwk.json")
	const inbox = "http://127.0.0.1:8080/v1/arsia/inbox"

	tok := strings.TrimSpace(mustRun(t, "", "token", "issue", "--key", issuerKey, "--iss", "https://as.example.com",
		"--sub", "agent:acme.advisor", "--aud", "agent:local.custos", "--scope", "demo.echo demo.other", "--ttl", "5m",
		"--dpop-key", agentKey))
	if strings.Count(tok, ".") != 2 || strings.ContainsAny(tok, " \n") {
		t.Fatalf("token %q", tok)
	}
	proof := strings.TrimSpace(mustRun(t, "", "token", "dpop", "--key", agentKey, "--method", "POST", "--url", inbox+"?x=1", "--token", tok))
	proof2 := strings.TrimSpace(mustRun(t, tok+"\n", "token", "dpop", "--key", agentKey, "--url", inbox, "--token", "-"))

	var cfg config.Config = config.Default()
	cfg.Tokens = config.Tokens{Mode: "dpop", MaxLifetime: 5 * time.Minute,
		Issuers: []config.TokenIssuer{{Issuer: "https://as.example.com", JWKSFile: filepath.Join(issuer, "jwks.json")}}}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	az, err := newAuthorizer(cfg, nil, nil, nil)
	if err != nil || az == nil {
		t.Fatalf("newAuthorizer = %v, %v", az, err)
	}
	q := gateway.AuthzQuery{Sender: "agent:acme.advisor", Recipient: "agent:local.custos", Capabilities: []string{"demo.echo"},
		Authorization: "DPoP " + tok, DPoP: proof, Method: "POST", URL: inbox, Now: time.Now()}
	g, e := az.Authorize(t.Context(), q)
	if e != nil || !g.Bound || strings.Join(g.Scope, " ") != "demo.echo demo.other" {
		t.Fatalf("Authorize = %+v, %v (%v)", g, e, errOf(e))
	}
	if _, e := az.Authorize(t.Context(), q); e == nil || e.Details["reason"] != authz.ReasonDPoPReplay {
		t.Fatalf("replayed proof: %v", e)
	}
	q.DPoP = proof2
	if _, e := az.Authorize(t.Context(), q); e != nil {
		t.Fatalf("proof made from standard input: %v (%v)", e, errOf(e))
	}

	// --dpop-jkt binds as --dpop-key does; without either the token is a
	// bearer token, refused in dpop mode.
	jkt, err := jwkFileThumbprint(agentKey)
	if err != nil {
		t.Fatal(err)
	}
	tok2 := strings.TrimSpace(mustRun(t, "", "token", "issue", "--key", issuerKey, "--iss", "https://as.example.com",
		"--sub", "agent:acme.advisor", "--aud", "agent:local.custos", "--scope", "demo.echo", "--dpop-jkt", jkt))
	q.Authorization, q.DPoP = "DPoP "+tok2, strings.TrimSpace(mustRun(t, "", "token", "dpop", "--key", agentKey, "--url", inbox, "--token", tok2))
	if _, e := az.Authorize(t.Context(), q); e != nil {
		t.Fatalf("--dpop-jkt token: %v (%v)", e, errOf(e))
	}
	bearer := strings.TrimSpace(mustRun(t, "", "token", "issue", "--key", issuerKey, "--iss", "https://as.example.com",
		"--sub", "agent:acme.advisor", "--aud", "agent:local.custos", "--scope", "demo.echo"))
	claims, errs := auth.ValidateAccessToken(t.Context(), bearer, sig.NewJWKSFile(filepath.Join(issuer, "jwks.json")), auth.TokenOptions{
		Now: time.Now(), ExpectedSubject: "agent:acme.advisor", ExpectedAudience: "agent:local.custos"})
	if len(errs) > 0 || claims.SenderConstrained() || claims.ExpiresAt-claims.IssuedAt != 300 {
		t.Fatalf("bearer token: %+v %v", claims, errs)
	}
	q.Authorization, q.DPoP = "Bearer "+bearer, ""
	if _, e := az.Authorize(t.Context(), q); e == nil || e.Details["reason"] != authz.ReasonSchemeNotAllowed {
		t.Fatalf("bearer in dpop mode: %v", e)
	}
}

func errOf(e interface{ Unwrap() error }) error {
	if e == nil {
		return nil
	}
	return e.Unwrap()
}

func TestTokenCommandErrors(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "keygen", "--agent", "agent:local.issuer", "--out", dir)
	key := filepath.Join(dir, "key-1.private.jwk.json")
	ok := []string{"token", "issue", "--key", key, "--iss", "https://as", "--sub", "agent:a.b", "--aud", "agent:c.d", "--scope", "x.y"}
	for name, tc := range map[string]struct {
		args []string
		code int
		msg  string
	}{
		"no key":           {[]string{"token", "issue", "--iss", "i", "--sub", "agent:a.b", "--aud", "agent:c.d", "--scope", "x.y"}, 2, "--key"},
		"no iss":           {[]string{"token", "issue", "--key", key, "--sub", "agent:a.b", "--aud", "agent:c.d", "--scope", "x.y"}, 2, "--iss"},
		"bad sub":          {append(ok[:6:6], "--sub", "advisor", "--aud", "agent:c.d", "--scope", "x.y"), 2, "--sub"},
		"no scope":         {append(ok[:10:10], "--scope", " "), 2, "--scope"},
		"wildcard":         {append(ok[:10:10], "--scope", "x.*"), 2, "wildcard"},
		"bad ttl":          {append(ok, "--ttl", "-1m"), 2, "--ttl"},
		"both bindings":    {append(ok, "--dpop-jkt", "abc", "--dpop-key", key), 2, "alternatives"},
		"public key":       {[]string{"token", "issue", "--key", filepath.Join(dir, "jwks.json"), "--iss", "i", "--sub", "agent:a.b", "--aud", "agent:c.d", "--scope", "x.y"}, 1, ""},
		"dpop no url":      {[]string{"token", "dpop", "--key", key, "--token", "a.b.c"}, 2, "--url"},
		"dpop no token":    {[]string{"token", "dpop", "--key", key, "--url", "http://h/x"}, 2, "--token"},
		"dpop bad url":     {[]string{"token", "dpop", "--key", key, "--url", "/inbox", "--token", "a.b.c"}, 2, "URL"},
		"dpop both":        {[]string{"token", "dpop", "--key", key, "--url", "http://h/x", "--token", "a.b.c", "--token-request"}, 2, "alternatives"},
		"assertion no aud": {[]string{"token", "assertion", "--key", key}, 2, "--aud"},
		"assertion long":   {[]string{"token", "assertion", "--key", key, "--aud", "http://h/oauth/token", "--ttl", "1h"}, 2, "--ttl"},
		"assertion bad id": {[]string{"token", "assertion", "--key", key, "--aud", "http://h/oauth/token", "--client-id", "x"}, 2, "agent identifier"},
	} {
		code, _, errOut := custos(t, "", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%s: exit %d, stderr %q; want %d with %q", name, code, errOut, tc.code, tc.msg)
		}
	}
}

// With tokens off, newAuthorizer returns a nil interface, not a typed nil.
func TestNewAuthorizerOff(t *testing.T) {
	cfg := config.Default()
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	az, err := newAuthorizer(cfg, nil, nil, nil)
	if err != nil || az != nil {
		t.Fatalf("newAuthorizer(off, nil) = %#v, %v", az, err)
	}
	cfg.Tokens = config.Tokens{Mode: "any", Issuers: []config.TokenIssuer{{Issuer: "https://as", JWKSURL: "https://as.example/jwks.json"}}}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	if az, err := newAuthorizer(cfg, nil, nil, nil); err != nil || az == nil {
		t.Fatalf("newAuthorizer(any, nil) = %v, %v", az, err)
	}
}

// A DPoP proof accepted by a gateway is refused by the same gateway
// restarted on its data directory: the replay set is in the state file.
func TestDPoPReplayAfterRestart(t *testing.T) {
	dir := t.TempDir()
	issuer, agent := filepath.Join(dir, "issuer"), filepath.Join(dir, "keys")
	mustRun(t, "", "keygen", "--agent", "agent:local.issuer", "--out", issuer)
	mustRun(t, "", "keygen", "--agent", "agent:acme.advisor", "--out", agent)
	agentKey := filepath.Join(agent, "key-1.private.jwk.json")
	const inbox = "http://127.0.0.1:8080/v1/arsia/inbox"
	tok := strings.TrimSpace(mustRun(t, "", "token", "issue", "--key", filepath.Join(issuer, "key-1.private.jwk.json"),
		"--iss", "https://as.example.com", "--sub", "agent:acme.advisor", "--aud", "agent:local.custos",
		"--scope", "demo.echo", "--ttl", "5m", "--dpop-key", agentKey))
	proof := strings.TrimSpace(mustRun(t, "", "token", "dpop", "--key", agentKey, "--url", inbox, "--token", tok))
	cfg := config.Default()
	cfg.Tokens = config.Tokens{Mode: "dpop", MaxLifetime: 5 * time.Minute,
		Issuers: []config.TokenIssuer{{Issuer: "https://as.example.com", JWKSFile: filepath.Join(issuer, "jwks.json")}}}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	q := gateway.AuthzQuery{Sender: "agent:acme.advisor", Recipient: "agent:local.custos", Capabilities: []string{"demo.echo"},
		Authorization: "DPoP " + tok, DPoP: proof, Method: "POST", URL: inbox, Now: time.Now()}
	loc := store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, "data", store.StateFile)}
	for i, want := range []string{"", authz.ReasonDPoPReplay} {
		st, err := store.Open(t.Context(), loc, nil)
		if err != nil {
			t.Fatal(err)
		}
		az, err := newAuthorizer(cfg, st.Replay, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, e := az.Authorize(t.Context(), q)
		switch {
		case want == "" && e != nil:
			t.Fatalf("start %d: %v (%v)", i, e, errOf(e))
		case want != "" && (e == nil || e.Details["reason"] != want):
			t.Fatalf("start %d: the proof was accepted again after a restart: %v", i, e)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// custos token assertion and custos token dpop --token-request make what
// the authorization server accepts.
func TestTokenAssertionAndRequestProof(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "", "keygen", "--agent", "agent:acme.advisor", "--out", dir)
	key := filepath.Join(dir, "key-1.private.jwk.json")
	const tokenURL = "http://127.0.0.1:8080/oauth/token"
	a := strings.TrimSpace(mustRun(t, "", "token", "assertion", "--key", key, "--aud", tokenURL))
	jwks, err := os.ReadFile(filepath.Join(dir, "jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.ParseStaticKeys(jwks)
	if err != nil {
		t.Fatal(err)
	}
	cache := auth.NewMemoryReplayCache(nil)
	got, errs := auth.ValidateClientAssertion(t.Context(), a, auth.AssertionOptions{Now: time.Now(), Audiences: []string{tokenURL}, Keys: keys, Replay: cache})
	if len(errs) > 0 || got.ClientID != "agent:acme.advisor" {
		t.Fatalf("%v %+v", errs, got)
	}
	p := strings.TrimSpace(mustRun(t, "", "token", "dpop", "--key", key, "--url", tokenURL, "--token-request"))
	if _, errs := auth.ValidateDPoP(t.Context(), p, auth.DPoPOptions{Method: "POST", URL: tokenURL, Now: time.Now(), Replay: cache, TokenRequest: true}); len(errs) > 0 {
		t.Fatal(errs)
	}
}
