package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The whole L2 path through a running gateway: a capability that needs L2
// is refused to the sender at L1; the gateway's CA issues it a
// certificate, which it publishes in its identity record; the same call
// then runs; once revoked through the API, the next call is refused with
// certificate_revoked. L3 is never issued.
func TestServeCertificateAuthorityMakesL2(t *testing.T) {
	// The sender as a discoverable agent (conformance_live.go).
	peer, err := newLivePeer(sender)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.srv.Close() })
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := "listen: 127.0.0.1:0\ndata: " + dataDir + "\nagent: agent:acme.gateway\n" +
		"trust:\n  peers:\n    - {agent: \"" + sender + "\", url: \"" + peer.url + "\"}\n  identity_ttl: 1ms\n" +
		"  min_trust_level:\n    capabilities: {\"billing.*\": L2}\n" +
		"senders:\n  - agent: " + sender + "\n    capabilities: [\"billing.*\", \"demo.*\"]\n" +
		"handlers:\n  demo.echo:\n    type: echo\n  billing.invoice.create:\n    type: echo\n" +
		"certificate_authority:\n  enabled: true\n  validity: 720h\n"
	prev := &gatewayUnderTest{signer: peer.signer, kid: peer.kid, upstream: new(atomic.Int64), upstreamTrace: new(atomic.Value),
		configPath: filepath.Join(t.TempDir(), "custos.yaml")}
	if err := os.WriteFile(prev.configPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGatewayIn(t, context.Background(), dataDir, prev)
	defer g.stop()

	if code, reply, _ := g.send(t, "demo.echo", "", map[string]any{"x": 1}, nil); code != 200 {
		t.Fatalf("L1 call: %d %v", code, reply)
	}
	code, reply, _ := g.send(t, "billing.invoice.create", "", map[string]any{"x": 1}, nil)
	if code != 403 || !strings.Contains(mustJSON(t, reply), "insufficient_trust_level") {
		t.Fatalf("L2 capability at L1: %d %v", code, reply)
	}

	api := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, g.url+path, rd)
		req.Header.Set("Authorization", "Bearer "+g.token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		code, m, _ := g.do(t, req)
		return code, m
	}
	if code, m := api("POST", "/v1/arsia/ca/certificates", map[string]any{"agent_id": sender, "public_key": peer.jwk(), "trust_level": "L3"}); code != 403 || m["reason"] != "qualified_certificate_not_issued" {
		t.Fatalf("L3: %d %v", code, m)
	}
	code, cert := api("POST", "/v1/arsia/ca/certificates", map[string]any{"agent_id": sender, "public_key": peer.jwk()})
	if code != 201 {
		t.Fatalf("issue: %d %v", code, cert)
	}
	var chain []string
	for _, c := range cert["certificate_chain"].([]any) {
		chain = append(chain, c.(string))
	}
	peer.mu.Lock()
	peer.chain = chain
	peer.mu.Unlock()
	time.Sleep(5 * time.Millisecond) // past identity_ttl
	if code, reply, _ := g.send(t, "billing.invoice.create", "", map[string]any{"x": 1}, nil); code != 200 {
		t.Fatalf("L2 capability with the CA's certificate: %d %v", code, reply)
	}

	// The root the API serves is the one that vouches for the chain.
	resp, err := http.Get(g.url + "/v1/arsia/ca/root.pem")
	if err != nil {
		t.Fatal(err)
	}
	var root bytes.Buffer
	_, _ = root.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(strings.Join(chain, ""), root.String()) {
		t.Fatal("the chain does not end in the served root")
	}

	if code, m := api("POST", "/v1/arsia/ca/certificates/"+cert["serial"].(string)+"/revoke", map[string]any{"reason": "key compromise"}); code != 200 || m["revoked"] != true {
		t.Fatalf("revoke: %d %v", code, m)
	}
	code, reply, _ = g.send(t, "billing.invoice.create", "", map[string]any{"x": 1}, nil)
	if code < 400 || !strings.Contains(mustJSON(t, reply), "certificate_revoked") {
		t.Fatalf("after revocation: %d %v", code, reply)
	}
}

// custos ca drives the same API from the command line: issue from the
// agent's JWKS file, list, revoke; a non-operator and a missing reason
// are refused.
func TestCACommand(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, dataDir, nil, "certificate_authority:\n  enabled: true\n")
	defer g.stop()
	t.Setenv("CUSTOS_SERVER", g.url)
	t.Setenv("CUSTOS_TOKEN", g.token)
	code, out, errOut := custos(t, "", "ca", "issue", "--agent", sender, "--jwks", g.sendersJWKS, "--validity", "48h")
	var cert struct {
		Serial    string    `json:"serial"`
		NotBefore time.Time `json:"not_before"`
		NotAfter  time.Time `json:"not_after"`
		Chain     []string  `json:"certificate_chain"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &cert) != nil || cert.Serial == "" || len(cert.Chain) != 2 || cert.NotAfter.Sub(cert.NotBefore) != 48*time.Hour {
		t.Fatalf("ca issue: %d %s %s", code, out, errOut)
	}
	if code, out, _ := custos(t, "", "ca", "list", "--agent", sender); code != 0 || !strings.Contains(out, cert.Serial) {
		t.Fatalf("ca list: %d %s", code, out)
	}
	if code, _, _ := custos(t, "", "ca", "revoke", cert.Serial); code != exitUsage {
		t.Fatalf("ca revoke without --reason: %d", code)
	}
	if code, out, _ := custos(t, "", "ca", "revoke", cert.Serial, "--reason", "rotated"); code != 0 || !strings.Contains(out, `"revoked":true`) {
		t.Fatalf("ca revoke: %d %s", code, out)
	}
	if code, out, _ := custos(t, "", "ca", "root"); code != 0 || !strings.Contains(out, "BEGIN CERTIFICATE") {
		t.Fatalf("ca root: %d %s", code, out)
	}
	if code, _, errOut := custos(t, "", "ca", "list", "--token", "not-a-token"); code != exitFailure || !strings.Contains(errOut, "401") {
		t.Fatalf("ca list with a bad token: %d %s", code, errOut)
	}
	if code, _, errOut := custos(t, "", "ca", "issue", "--agent", "agent:acme.nobody", "--jwks", g.sendersJWKS); code != exitFailure || !strings.Contains(errOut, "no signing key") {
		t.Fatalf("ca issue of a key not in the file: %d %s", code, errOut)
	}
}
