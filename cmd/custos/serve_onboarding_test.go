package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/onboarding"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/onboard"
)

// asPeer signs a request of p to the test gateway and posts it to path.
func asPeer(t *testing.T, g *gatewayUnderTest, p *livePeer, path, payloadType string, caps []string, args any) (int, map[string]any) {
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
	g.stop()
	g = startGateway(t, data, g)
	defer g.stop()
	if code := call(g); code != 200 {
		t.Fatalf("after a restart the onboarded agent's call: %d, want 200", code)
	}
}
