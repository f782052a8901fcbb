package authserver

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/authz"
)

const (
	gwAgent = "agent:local.custos"
	client  = "agent:acme.advisor"
	evil    = "agent:evil.client"
)

func seeded(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

var (
	gwKey     = seeded(1)
	clientKey = seeded(2)
	evilKey   = seeded(3)
	dpopKey   = seeded(4)
)

type fixture struct {
	srv    *Server
	ts     *httptest.Server
	replay *auth.MemoryReplayCache
	grants map[string][]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{replay: auth.NewMemoryReplayCache(nil), grants: map[string][]string{client: {"demo.*"}, evil: {"demo.echo"}}}
	mux := http.NewServeMux()
	f.ts = httptest.NewServer(mux)
	t.Cleanup(f.ts.Close)
	keys := auth.NewStaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: clientKey.Public(), KeyID: client + "#key-1", Use: "sig"},
		{Key: evilKey.Public(), KeyID: evil + "#key-1", Use: "sig"},
	}})
	s, err := New(Options{Issuer: f.ts.URL, Agent: gwAgent, Signer: gwKey, KID: gwAgent + "#gateway-1",
		JWKSURL: f.ts.URL + "/.well-known/arsia/jwks.json", SenderKeys: func() auth.TokenKeys { return keys },
		Grants:       func(a string) []string { return f.grants[a] },
		Capabilities: func() []string { return []string{"demo.echo", "demo.other", "ops.restart"} },
		Replay:       f.replay})
	if err != nil {
		t.Fatal(err)
	}
	s.Mount(mux)
	f.srv = s
	return f
}

func (f *fixture) assertion(t *testing.T, key crypto.Signer, agent string) string {
	t.Helper()
	a, err := auth.NewClientAssertion(key, agent+"#key-1", auth.ClientAssertionOptions{ClientID: agent, Audience: f.srv.TokenURL(), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f *fixture) post(t *testing.T, path string, form url.Values, dpop string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", f.ts.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if dpop != "" {
		req.Header.Set("DPoP", dpop)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%s: %q", path, body)
		}
	}
	return resp.StatusCode, m
}

func (f *fixture) tokenForm(t *testing.T, scope string) url.Values {
	return url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {auth.ClientAssertionType},
		"client_assertion": {f.assertion(t, clientKey, client)}, "scope": {scope}}
}

// The whole flow: a DPoP-bound token the gateway's authorizer accepts,
// introspected active, revoked, then inactive and refused.
func TestTokenIntrospectRevoke(t *testing.T) {
	f := newFixture(t)
	proof, err := auth.NewTokenRequestProof(dpopKey, "POST", f.srv.TokenURL(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	status, body := f.post(t, TokenPath, f.tokenForm(t, "demo.echo"), proof)
	if status != 200 || body["token_type"] != "DPoP" || body["scope"] != "demo.echo" || body["expires_in"] != float64(300) {
		t.Fatalf("%d %v", status, body)
	}
	tok := body["access_token"].(string)

	// The token is in the format gateway/authz validates.
	a, err := authz.NewAuthorizer(authz.Config{Mode: authz.ModeDPoP, Revocations: f.replay, Replay: f.replay,
		Issuers: []authz.Issuer{{Issuer: f.ts.URL, Keys: f.srv.own}}})
	if err != nil {
		t.Fatal(err)
	}
	inbox := "http://gw.test/v1/arsia/inbox"
	call := func() map[string]any {
		p, _ := authz.NewProof(dpopKey, "POST", inbox, tok, time.Now())
		_, e := a.Authorize(context.Background(), gatewayQuery(tok, p, inbox))
		if e == nil {
			return nil
		}
		return e.Details
	}
	if d := call(); d != nil {
		t.Fatalf("gateway refused the issued token: %v", d)
	}

	intro := func(key crypto.Signer, agent string) map[string]any {
		_, m := f.post(t, IntrospectPath, url.Values{"token": {tok}, "client_assertion_type": {auth.ClientAssertionType},
			"client_assertion": {f.assertion(t, key, agent)}}, "")
		return m
	}
	if m := intro(clientKey, client); m["active"] != true || m["sub"] != client || m["token_type"] != "DPoP" {
		t.Fatalf("introspection %v", m)
	}
	// Another agent learns nothing about it, and cannot revoke it.
	if m := intro(evilKey, evil); m["active"] != false || len(m) != 1 {
		t.Fatalf("introspection by another agent %v", m)
	}
	revokeAs := func(key crypto.Signer, agent, token string) int {
		st, _ := f.post(t, RevokePath, url.Values{"token": {token}, "client_assertion_type": {auth.ClientAssertionType},
			"client_assertion": {f.assertion(t, key, agent)}}, "")
		return st
	}
	if st := revokeAs(evilKey, evil, tok); st != 200 {
		t.Fatal(st)
	}
	if d := call(); d != nil {
		t.Fatalf("another agent revoked the token: %v", d)
	}
	if st := revokeAs(clientKey, client, "not-a-token"); st != 200 {
		t.Fatalf("unknown token: %d", st)
	}
	if st := revokeAs(clientKey, client, tok); st != 200 {
		t.Fatal(st)
	}
	if d := call(); d["reason"] != authz.ReasonTokenRevoked {
		t.Fatalf("after revocation: %v", d)
	}
	if m := intro(clientKey, client); m["active"] != false {
		t.Fatalf("introspection after revocation %v", m)
	}
}

// The refusals of the token endpoint, and that none of them writes.
func TestTokenRefusals(t *testing.T) {
	f := newFixture(t)
	form := func(edit func(url.Values)) url.Values {
		v := f.tokenForm(t, "demo.echo")
		edit(v)
		return v
	}
	cases := []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"no grant", form(func(v url.Values) { v.Del("grant_type") }), 400, "invalid_request"},
		{"password grant", form(func(v url.Values) { v.Set("grant_type", "password") }), 400, "unsupported_grant_type"},
		{"no assertion", form(func(v url.Values) { v.Del("client_assertion"); v.Del("client_assertion_type") }), 401, "invalid_client"},
		{"wrong assertion type", form(func(v url.Values) { v.Set("client_assertion_type", "urn:x") }), 401, "invalid_client"},
		{"assertion by another key", form(func(v url.Values) {
			a, _ := auth.NewClientAssertion(evilKey, client+"#key-1", auth.ClientAssertionOptions{ClientID: client, Audience: f.srv.TokenURL(), Now: time.Now()})
			v.Set("client_assertion", a)
		}), 401, "invalid_client"},
		{"assertion for another server", form(func(v url.Values) {
			a, _ := auth.NewClientAssertion(clientKey, client+"#key-1", auth.ClientAssertionOptions{ClientID: client, Audience: "https://other/oauth/token", Now: time.Now()})
			v.Set("client_assertion", a)
		}), 401, "invalid_client"},
		{"client_id mismatch", form(func(v url.Values) { v.Set("client_id", evil) }), 401, "invalid_client"},
		{"ungranted scope", form(func(v url.Values) { v.Set("scope", "ops.restart") }), 400, "invalid_scope"},
		{"wildcard scope", form(func(v url.Values) { v.Set("scope", "demo.*") }), 400, "invalid_scope"},
		{"other audience", form(func(v url.Values) { v.Set("audience", "agent:other.gw") }), 400, "invalid_target"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.replay.Len()
			status, body := f.post(t, TokenPath, c.form, "")
			if status != c.status || body["error"] != c.code || body["error_description"] == "" {
				t.Fatalf("%d %v, want %d %s", status, body, c.status, c.code)
			}
			if c.status == 401 && f.replay.Len() != before {
				t.Fatal("an unauthenticated request wrote to the replay set")
			}
		})
	}
	// A replayed assertion is refused.
	v := f.tokenForm(t, "demo.echo")
	if st, _ := f.post(t, TokenPath, v, ""); st != 200 {
		t.Fatal(st)
	}
	if st, body := f.post(t, TokenPath, v, ""); st != 401 {
		t.Fatalf("replayed assertion: %d %v", st, body)
	}
	// A bad DPoP proof, a duplicated parameter, a JSON body.
	if st, body := f.post(t, TokenPath, f.tokenForm(t, "demo.echo"), "not.a.proof"); st != 400 || body["error"] != "invalid_dpop_proof" {
		t.Fatalf("bad proof: %d %v", st, body)
	}
	dup := f.tokenForm(t, "demo.echo")
	dup.Add("scope", "demo.other")
	if st, body := f.post(t, TokenPath, dup, ""); st != 400 || body["error"] != "invalid_request" {
		t.Fatalf("duplicate scope: %d %v", st, body)
	}
	resp, err := http.Post(f.ts.URL+TokenPath, "application/json", strings.NewReader(`{"grant_type":"client_credentials"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("JSON body: %d", resp.StatusCode)
	}
	// Without scope: what the grants cover among the served capabilities;
	// a Bearer token without a proof.
	v = f.tokenForm(t, "")
	if st, body := f.post(t, TokenPath, v, ""); st != 200 || body["scope"] != "demo.echo demo.other" || body["token_type"] != "Bearer" {
		t.Fatalf("default scope: %d %v", st, body)
	}
	// Grants are read per request: a reload that withdraws them applies.
	f.grants[client] = nil
	if st, body := f.post(t, TokenPath, f.tokenForm(t, "demo.echo"), ""); st != 400 || body["error"] != "invalid_scope" {
		t.Fatalf("after withdrawing grants: %d %v", st, body)
	}
}

func TestMetadata(t *testing.T) {
	f := newFixture(t)
	resp, err := http.Get(f.ts.URL + MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	if md["issuer"] != f.ts.URL || md["token_endpoint"] != f.ts.URL+"/oauth/token" ||
		md["jwks_uri"] != f.ts.URL+"/.well-known/arsia/jwks.json" ||
		md["introspection_endpoint"] != f.ts.URL+"/oauth/introspect" || md["revocation_endpoint"] != f.ts.URL+"/oauth/revoke" {
		t.Fatalf("%v", md)
	}
	for k, want := range map[string]string{"grant_types_supported": "client_credentials",
		"token_endpoint_auth_methods_supported": "private_key_jwt", "token_endpoint_auth_signing_alg_values_supported": "EdDSA",
		"dpop_signing_alg_values_supported": "EdDSA"} {
		l, _ := md[k].([]any)
		if len(l) == 0 || l[0] != want {
			t.Errorf("%s = %v", k, md[k])
		}
	}
}

func TestIssueBounds(t *testing.T) {
	f := newFixture(t)
	tk, err := f.srv.Issue(context.Background(), client, []string{"demo.echo"}, "", 48*time.Hour)
	if err != nil || tk.ExpiresAt.Sub(tk.IssuedAt) != DefaultMaxTokenLifetime || tk.TokenType != "Bearer" {
		t.Fatalf("%+v %v", tk, err)
	}
	if _, err := f.srv.Issue(context.Background(), "agent:nobody.here", []string{"demo.echo"}, "", 0); err == nil {
		t.Fatal("issued to an agent without grants")
	}
	if _, err := New(Options{Issuer: "https://x", Agent: gwAgent, Signer: gwKey, KID: "k", SenderKeys: f.srv.o.SenderKeys,
		Grants: f.srv.o.Grants, Replay: f.replay, MaxTokenLifetime: 25 * time.Hour}); err == nil {
		t.Fatal("max lifetime above 24h accepted")
	}
}

// FuzzParseForm: no panic; what parses has no repeated parameter.
func FuzzParseForm(f *testing.F) {
	f.Add("grant_type=client_credentials&scope=demo.echo")
	f.Add("a=1&a=2")
	f.Add("%zz")
	f.Fuzz(func(t *testing.T, body string) {
		v, err := parseFormBody(body)
		if err != nil {
			return
		}
		for k, vals := range v {
			if len(vals) != 1 {
				t.Fatalf("%q repeated", k)
			}
		}
	})
}

// FuzzTokenEndpoint: arbitrary bodies and proofs get a 4xx, never a
// token, a 5xx or a write to the replay set.
func FuzzTokenEndpoint(f *testing.F) {
	fx := newFixture(&testing.T{})
	f.Add("grant_type=client_credentials&client_assertion_type="+url.QueryEscape(auth.ClientAssertionType)+"&client_assertion=a.b.c", "")
	f.Add("grant_type=client_credentials", "x.y.z")
	f.Fuzz(func(t *testing.T, body, dpop string) {
		req := httptest.NewRequest("POST", fx.ts.URL+TokenPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if dpop != "" && !strings.ContainsAny(dpop, "\r\n\x00") {
			req.Header.Set("DPoP", dpop)
		}
		before := fx.replay.Len()
		w := httptest.NewRecorder()
		fx.srv.token(w, req)
		if w.Code < 400 || w.Code >= 500 {
			t.Fatalf("status %d for %q", w.Code, body)
		}
		if fx.replay.Len() != before {
			t.Fatal("wrote to the replay set")
		}
	})
}

func gatewayQuery(tok, proof, inbox string) gateway.AuthzQuery {
	return gateway.AuthzQuery{Sender: client, Recipient: gwAgent, Capabilities: []string{"demo.echo"},
		Authorization: "DPoP " + tok, DPoP: proof, Method: "POST", URL: inbox, Now: time.Now()}
}
