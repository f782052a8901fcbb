package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/onboarding"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/onboard"
)

// asPeer signs a request of p to the test gateway and posts it to path.
func asPeer(t *testing.T, g *gatewayUnderTest, p *livePeer, path, payloadType string, caps []string, args any) (int, map[string]any) {
	t.Helper()
	return asPeerWith(t, g, p, path, payloadType, caps, args, nil)
}

// asPeerWith is asPeer with extra request headers.
func asPeerWith(t *testing.T, g *gatewayUnderTest, p *livePeer, path, payloadType string, caps []string, args any, headers map[string]string) (int, map[string]any) {
	t.Helper()
	e, err := arsia.NewRequest(p.agent, "agent:acme.gateway", caps, payloadType, args, arsia.BuildOptions{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := e.Map()
	signed, err := sig.Sign(env, p.signer, p.kid)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(signed)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/arsia+json; v=1")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	code, m, _ := g.do(t, req)
	return code, m
}

// An agent onboarded over HTTP is a sender of the running gateway at once,
// is kept in the data directory, and is trusted again after a restart
// without onboarding again; an agent the configuration names is not
// onboarded over it.
func TestOnboardingActivatesAndSurvivesRestart(t *testing.T) {
	peer, err := newLivePeer("agent:partner.assistant")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.srv.Close()
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"policy_version": "t-1", "token_lifetime_seconds": 900, "capabilities": [
		{"capability": "demo.echo", "status": "allowed"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, data, nil, "authorization_server: {enabled: true}\n",
		"onboarding:\n  enabled: true\n  policy_file: "+policy+"\n  discovery_urls: [\""+peer.url+"/\"]\n")
	call := func(g *gatewayUnderTest) int {
		code, _ := asPeer(t, g, peer, "/v1/arsia/inbox", "com.acme/call", []string{"demo.echo"}, map[string]any{"n": 1})
		return code
	}
	if code := call(g); code != 401 {
		t.Fatalf("before onboarding the agent's call: %d, want 401", code)
	}
	code, m := asPeer(t, g, peer, onboard.Path, onboarding.PayloadTypeRequest, []string{"demo.echo"}, map[string]any{"discovery_url": peer.url})
	if code != 200 {
		t.Fatalf("onboarding: %d %v", code, m)
	}
	g.verifyReply(t, m)
	if r := m["payload"].(map[string]any)["result"].(map[string]any); r["decision"] != "approved" {
		t.Fatalf("decision %v", r)
	}
	if code := call(g); code != 200 {
		t.Fatalf("the onboarded agent's call: %d, want 200 (no restart)", code)
	}
	kept, err := os.ReadFile(filepath.Join(data, onboardedFile))
	if err != nil || !strings.Contains(string(kept), `"agent:partner.assistant"`) || strings.Contains(string(kept), "token") {
		t.Fatalf("onboarded.json: %s %v", kept, err)
	}
	// A configured sender is not onboarded over its configuration.
	configuredPeer := &livePeer{agent: sender, kid: sender + "#key-1", signer: peer.signer}
	if code, m := asPeer(t, g, configuredPeer, onboard.Path, onboarding.PayloadTypeRequest, []string{"demo.echo"},
		map[string]any{"discovery_url": peer.url}); code != 409 {
		t.Errorf("onboarding a configured sender: %d %v, want 409", code, m)
	}
	// With a DPoP proof, the token is bound to the proof's key (RFC 9449
	// cnf.jkt), and the proof is good for one request.
	proof, err := auth.NewTokenRequestProof(peer.priv, "POST", g.url+onboard.Path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dpop := map[string]string{"DPoP": proof}
	code, m = asPeerWith(t, g, peer, onboard.Path, onboarding.PayloadTypeRequest, []string{"demo.echo"}, map[string]any{"discovery_url": peer.url}, dpop)
	if code != 200 {
		t.Fatalf("onboarding with a DPoP proof: %d %v", code, m)
	}
	tok, _ := m["payload"].(map[string]any)["result"].(map[string]any)["token"].(string)
	parts := strings.Split(tok, ".")
	var claims struct {
		Cnf struct {
			JKT string `json:"jkt"`
		} `json:"cnf"`
	}
	if len(parts) != 3 {
		t.Fatalf("token %q", tok)
	}
	if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err != nil || json.Unmarshal(b, &claims) != nil {
		t.Fatalf("token claims: %v", err)
	}
	jwk, _ := auth.PublicJWK(peer.priv.Public())
	if want, _ := auth.Thumbprint(jwk); claims.Cnf.JKT != want || want == "" {
		t.Errorf("cnf.jkt %q, want the proof key's thumbprint %q", claims.Cnf.JKT, want)
	}
	if code, m = asPeerWith(t, g, peer, onboard.Path, onboarding.PayloadTypeRequest, []string{"demo.echo"}, map[string]any{"discovery_url": peer.url}, dpop); code != 400 {
		t.Errorf("the same proof again: %d %v, want 400", code, m)
	}
	g.stop()
	g = startGateway(t, data, g)
	defer func() { g.stop() }()
	if code := call(g); code != 200 {
		t.Fatalf("after a restart the onboarded agent's call: %d, want 200", code)
	}
	// Removed from onboarded.json, the agent is trusted no more after a
	// reload (SIGHUP).
	if err := os.WriteFile(filepath.Join(data, onboardedFile), []byte(`{"agents": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, g.log, "the reload on SIGHUP", func(s string) bool {
		return strings.Contains(s, `msg="configuration reloaded" trigger=SIGHUP`)
	})
	if code := call(g); code != 401 {
		t.Fatalf("after its removal and a reload the agent's call: %d, want 401", code)
	}
}

// Two agents onboarding at once are both in force afterwards: neither
// activation undoes the other's.
func TestOnboardingConcurrent(t *testing.T) {
	var peers []*livePeer
	var prefixes []string
	for _, id := range []string{"agent:partner.one", "agent:partner.two", "agent:partner.three"} {
		p, err := newLivePeer(id)
		if err != nil {
			t.Fatal(err)
		}
		defer p.srv.Close()
		peers = append(peers, p)
		prefixes = append(prefixes, `"`+p.url+`/"`)
	}
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"policy_version": "t-1", "token_lifetime_seconds": 900, "capabilities": [
		{"capability": "demo.echo", "status": "allowed"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil, "authorization_server: {enabled: true}\n",
		"onboarding:\n  enabled: true\n  policy_file: "+policy+"\n  discovery_urls: ["+strings.Join(prefixes, ", ")+"]\n")
	defer g.stop()
	var wg sync.WaitGroup
	codes := make([]int, len(peers))
	for i, p := range peers {
		wg.Go(func() {
			codes[i], _ = asPeer(t, g, p, onboard.Path, onboarding.PayloadTypeRequest, []string{"demo.echo"}, map[string]any{"discovery_url": p.url})
		})
	}
	wg.Wait()
	for i, p := range peers {
		if codes[i] != 200 {
			t.Errorf("%s onboarding: %d", p.agent, codes[i])
		}
		if code, m := asPeer(t, g, p, "/v1/arsia/inbox", "com.acme/call", []string{"demo.echo"}, map[string]any{"n": i}); code != 200 {
			t.Errorf("%s afterwards: %d %v", p.agent, code, m)
		}
	}
}
