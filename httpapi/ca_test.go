package httpapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/identity"
	"github.com/custos-runtime/custos/gateway/ca"
)

type caFixture struct {
	srv   *httptest.Server
	ca    *ca.CA
	reg   *ca.MemoryRegistry
	audit []string
}

func newCAFixture(t *testing.T) *caFixture {
	t.Helper()
	c, err := ca.Open(t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := NewTokens(map[string]aais.Actor{
		TokenHash("op-token"):  {ID: "admin", Type: aais.ActorHuman},
		TokenHash("rev-token"): {ID: "bob", Type: aais.ActorHuman},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &caFixture{ca: c, reg: ca.NewMemoryRegistry()}
	h, err := NewCA(CAOptions{CA: c, Registry: f.reg, Auth: toks, Operators: func() []string { return []string{"admin"} },
		OnIssue: func(_ context.Context, c ca.Certificate, by aais.Actor) {
			f.audit = append(f.audit, "issued "+c.Serial+" by "+by.ID)
		},
		OnRevoke: func(_ context.Context, c ca.Certificate, by aais.Actor) {
			f.audit = append(f.audit, "revoked "+c.Serial+" by "+by.ID)
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *caFixture) do(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func agentJWK(t *testing.T, kid string) (string, ed25519.PublicKey) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := arsia.NewSigningJWK(kid, pub)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(k)
	return string(b), pub
}

func TestCAIssueListRevoke(t *testing.T) {
	f := newCAFixture(t)
	jwk, pub := agentJWK(t, "agent:acme.bot#key-1")
	body := `{"agent_id":"agent:acme.bot","public_key":` + jwk + `}`

	// Refusals change nothing.
	for _, tc := range []struct {
		name, token, body string
		status            int
		reason            string
	}{
		{"no credentials", "", body, 401, ""},
		{"wrong token", "nope", body, 401, ""},
		{"reviewer, not operator", "rev-token", body, 403, "not_an_operator"},
		{"L3", "op-token", `{"agent_id":"agent:acme.bot","public_key":` + jwk + `,"trust_level":"L3"}`, 403, ReasonQualifiedNotIssued},
		{"L9", "op-token", `{"agent_id":"agent:acme.bot","public_key":` + jwk + `,"trust_level":"L9"}`, 400, ""},
		{"kid of another agent", "op-token", `{"agent_id":"agent:acme.other","public_key":` + jwk + `}`, 400, ""},
		{"not an agent id", "op-token", `{"agent_id":"acme","public_key":` + jwk + `}`, 400, ""},
		{"unknown member", "op-token", `{"agent_id":"agent:acme.bot","public_key":` + jwk + `,"x":1}`, 400, ""},
		{"duplicate member", "op-token", `{"agent_id":"agent:acme.bot","agent_id":"agent:acme.bot","public_key":` + jwk + `}`, 400, ""},
		{"validity too long", "op-token", `{"agent_id":"agent:acme.bot","public_key":` + jwk + `,"validity_seconds":99999999999}`, 400, ""},
		{"bad key", "op-token", `{"agent_id":"agent:acme.bot","public_key":{"kty":"OKP","crv":"Ed25519","kid":"agent:acme.bot#k","x":"AAAA"}}`, 400, ""},
		{"not json", "op-token", `{`, 400, ""},
		{"alg of another key type", "op-token", `{"agent_id":"agent:acme.bot","public_key":` + strings.Replace(jwk, `{`, `{"alg":"ES256",`, 1) + `}`, 400, ""},
		{"private member", "op-token", `{"agent_id":"agent:acme.bot","public_key":` + strings.Replace(jwk, `{`, `{"d":"AAAA",`, 1) + `}`, 400, ""},
	} {
		status, out := f.do(t, "POST", CACertificatesPath, tc.token, tc.body)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d (%v)", tc.name, status, tc.status, out)
		}
		if tc.reason != "" && out["reason"] != tc.reason {
			t.Errorf("%s: reason %v, want %s", tc.name, out["reason"], tc.reason)
		}
	}
	if got, _ := f.reg.List(t.Context(), "", "", 10); len(got) != 0 || len(f.audit) != 0 {
		t.Fatalf("refusals recorded %d certificates, audit %v", len(got), f.audit)
	}

	status, out := f.do(t, "POST", CACertificatesPath, "op-token", `{"agent_id":"agent:acme.bot","public_key":`+jwk+`,"validity_seconds":86400}`)
	if status != 201 {
		t.Fatalf("issue: %d %v", status, out)
	}
	serial, _ := out["serial"].(string)
	var chain []string
	for _, c := range out["certificate_chain"].([]any) {
		chain = append(chain, c.(string))
	}
	level, err := identity.VerifyChain(chain, identity.VerifyOptions{Roots: rootPool(f.ca), Now: time.Now(), AgentID: "agent:acme.bot", SigningKey: pub,
		CheckRevocation: f.ca.RevocationChecker(f.reg)})
	if err != nil || level != identity.L2 {
		t.Fatalf("issued chain: %v %v", level, err)
	}
	nb, _ := time.Parse(time.RFC3339, out["not_before"].(string))
	na, _ := time.Parse(time.RFC3339, out["not_after"].(string))
	if na.Sub(nb) != 24*time.Hour || out["issued_by"] != "admin" || out["trust_level"] != "L2" {
		t.Fatalf("issued: %v", out)
	}
	// A second one, to page.
	jwk2, _ := agentJWK(t, "agent:acme.bot#key-2")
	if status, out := f.do(t, "POST", CACertificatesPath, "op-token", `{"agent_id":"agent:acme.bot","public_key":`+jwk2+`}`); status != 201 {
		t.Fatalf("issue 2: %d %v", status, out)
	}
	status, page := f.do(t, "GET", CACertificatesPath+"?limit=1", "op-token", "")
	if status != 200 || len(page["certificates"].([]any)) != 1 || page["next"] == nil {
		t.Fatalf("page 1: %d %v", status, page)
	}
	status, page = f.do(t, "GET", CACertificatesPath+"?limit=1&before="+page["next"].(string), "op-token", "")
	if status != 200 || page["certificates"].([]any)[0].(map[string]any)["serial"] != serial || page["next"] != nil {
		t.Fatalf("page 2: %d %v", status, page)
	}
	for _, q := range []string{"?limit=0", "?limit=9999", "?before=XYZ", "?agent_id=bad", "?sort=asc", "?limit=1&limit=2"} {
		if status, _ := f.do(t, "GET", CACertificatesPath+q, "op-token", ""); status != 400 {
			t.Errorf("list %s: %d, want 400", q, status)
		}
	}
	if status, _ := f.do(t, "GET", CACertificatesPath, "rev-token", ""); status != 403 {
		t.Errorf("list by a non-operator: %d", status)
	}

	// Revocation: refusals first, then the real one, then again.
	if status, _ := f.do(t, "POST", CACertificatesPath+"/"+serial+"/revoke", "rev-token", `{"reason":"x"}`); status != 403 {
		t.Fatalf("revoke by a non-operator: %d", status)
	}
	if status, _ := f.do(t, "POST", CACertificatesPath+"/"+serial+"/revoke", "op-token", `{"reason":""}`); status != 400 {
		t.Fatalf("revoke without a reason: %d", status)
	}
	if status, _ := f.do(t, "POST", CACertificatesPath+"/abc/revoke", "op-token", `{"reason":"x"}`); status != 404 {
		t.Fatalf("revoke unknown: %d", status)
	}
	if status, _ := f.do(t, "POST", CACertificatesPath+"/0abc/revoke", "op-token", `{"reason":"x"}`); status != 400 {
		t.Fatalf("revoke malformed serial: %d", status)
	}
	if c, _ := f.reg.Get(t.Context(), serial); c.Revoked() {
		t.Fatal("a refused revocation revoked")
	}
	status, out = f.do(t, "POST", CACertificatesPath+"/"+serial+"/revoke", "op-token", `{"reason":"key compromise"}`)
	if status != 200 || out["revoked"] != true || out["revocation_reason"] != "key compromise" {
		t.Fatalf("revoke: %d %v", status, out)
	}
	if _, err := identity.VerifyChain(chain, identity.VerifyOptions{Roots: rootPool(f.ca), Now: time.Now(), AgentID: "agent:acme.bot", SigningKey: pub,
		CheckRevocation: f.ca.RevocationChecker(f.reg)}); err == nil {
		t.Fatal("revoked chain still verifies")
	}
	status, again := f.do(t, "POST", CACertificatesPath+"/"+serial+"/revoke", "op-token", `{"reason":"again"}`)
	if status != 200 || again["revocation_reason"] != "key compromise" || again["revoked_at"] != out["revoked_at"] {
		t.Fatalf("revoke again: %d %v", status, again)
	}
	if status, got := f.do(t, "GET", CACertificatesPath+"/"+serial, "op-token", ""); status != 200 || got["revoked"] != true {
		t.Fatalf("get: %d %v", status, got)
	}
	if len(f.audit) != 3 || !strings.HasPrefix(f.audit[2], "revoked "+serial) {
		t.Fatalf("audit: %v", f.audit)
	}

	// The root is public.
	resp, err := http.Get(f.srv.URL + CARootPath)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(buf.Bytes(), f.ca.RootPEM()) {
		t.Fatalf("root.pem: %d", resp.StatusCode)
	}
}

func rootPool(c *ca.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Root())
	return p
}

func FuzzParseCAListQuery(f *testing.F) {
	for _, s := range []string{"", "limit=5", "before=ab&agent_id=agent:a.b", "limit=0", "x=1", "limit=1&limit=2", "before=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		got, err := ParseCAListQuery(q)
		if err != nil {
			return
		}
		if got.Limit < 1 || got.Limit > MaxCAListLimit || (got.Before != "" && !ca.ValidSerial(got.Before)) || (got.AgentID != "" && !arsia.ValidAgentID(got.AgentID)) {
			t.Fatalf("accepted %q as %+v", raw, got)
		}
	})
}

func FuzzParseIssueRequest(f *testing.F) {
	f.Add([]byte(`{"agent_id":"agent:acme.bot","public_key":{"kty":"OKP","crv":"Ed25519","kid":"agent:acme.bot#k","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}}`))
	f.Add([]byte(`{"agent_id":"agent:acme.bot","trust_level":"L3"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, pub, err := parseIssueRequest(body)
		if err != nil {
			return
		}
		if len(pub) != ed25519.PublicKeySize || !arsia.ValidAgentID(req.AgentID) || !strings.HasPrefix(req.PublicKey.Kid, req.AgentID+"#") {
			t.Fatalf("accepted %q", body)
		}
	})
}
