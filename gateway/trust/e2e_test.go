package trust_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/custos-runtime/custos/arsia/identity"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/gatewaytest"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/gateway/trust"
)

// A real gateway with the Store as its keys and trust policy: a discovered
// L1 peer is refused (403 insufficient_trust_level) under a profile that
// demands L2, an L2 peer's request runs, and a revoked key is refused at
// signature verification and runs nothing.
func TestGatewayEndToEnd(t *testing.T) {
	pki := newTestPKI(t)
	kL2 := newAgentKey(t, billing+"#key-1")
	l2 := newFakePeer(t, billing, kL2)
	l2.set(func(p *fakePeer) { p.chain = pki.chain(t, kL2.pub, leafOpts{agent: billing}) })
	kL1 := newAgentKey(t, advisor+"#key-1")
	kRevoked := newAgentKey(t, advisor+"#key-old")
	l1 := newFakePeer(t, advisor, kL1, kRevoked)

	store, err := trust.New(trust.Config{
		Peers:       []trust.Peer{{Agent: billing, URL: l2.srv.URL}, {Agent: advisor, URL: l1.srv.URL}},
		CAFiles:     []string{pki.rootFile},
		RevokedKIDs: []string{kRevoked.kid},
		Policy: identity.Policy{Default: identity.L1, ByProfile: map[string]identity.TrustLevel{
			"GDPR-STANDARD": identity.L2, "EU-AI-ACT-HIGH-RISK": identity.L2}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}

	var runs atomic.Int64
	signer, _ := gatewaytest.Signer(t)
	authority, xs, auditLog := gatewaytest.State(t)
	g, err := gateway.New(gateway.Options{
		Agent: gw, Signer: signer, KID: gw + "#k",
		Keys: store, Trust: store,
		Grants:    map[string][]string{billing: {"demo.*"}, advisor: {"demo.*"}},
		Handlers:  map[string]handler.Handler{"demo.echo": counting{handler.NewEcho(), &runs}},
		Authority: authority, Exchanges: xs, Audit: auditLog,
	})
	if err != nil {
		t.Fatal(err)
	}

	send := func(from, profile string, k agentKey) (int, map[string]any) {
		t.Helper()
		body, err := json.Marshal(signedRequest(t, from, gw, "demo.echo", profile, k))
		if err != nil {
			t.Fatal(err)
		}
		rep := g.Receive(t.Context(), gateway.Inbound{Body: body, Method: "POST", URL: "http://127.0.0.1/v1/arsia/inbox"})
		if rep.Envelope == nil {
			t.Fatalf("no envelope: %d %+v", rep.Status, rep.Problem)
		}
		var env map[string]any
		if err := json.Unmarshal(rep.Envelope, &env); err != nil {
			t.Fatal(err)
		}
		return rep.Status, env
	}
	errorOf := func(env map[string]any) (string, map[string]any) {
		payload, _ := env["payload"].(map[string]any)
		e, _ := payload["error"].(map[string]any)
		code, _ := e["code"].(string)
		details, _ := e["details"].(map[string]any)
		return code, details
	}

	for _, profile := range []string{"GDPR-STANDARD", "EU-AI-ACT-HIGH-RISK"} {
		status, env := send(advisor, profile, kL1)
		code, details := errorOf(env)
		if status != 403 || code != "forbidden" || details["reason"] != "insufficient_trust_level" ||
			details["required"] != "L2" || details["actual"] != "L1" {
			t.Fatalf("L1 peer under %s: %d %v %v", profile, status, code, details)
		}
	}
	// The L2 peer's request runs (GDPR-STANDARD needs no approval)...
	if status, env := send(billing, "GDPR-STANDARD", kL2); status != 200 || env["intent"] != "response" {
		t.Fatalf("L2 peer: %d %v", status, env)
	}
	// ...and passes the trust stage under EU-AI-ACT-HIGH-RISK, where it
	// waits for a human.
	if status, env := send(billing, "EU-AI-ACT-HIGH-RISK", kL2); status != 202 || env["intent"] != "pending_approval" {
		t.Fatalf("L2 peer, high risk: %d %v", status, env)
	}
	// The L1 peer may still make calls that need only L1.
	if status, _ := send(advisor, "", kL1); status != 200 {
		t.Fatalf("L1 peer without a profile: %d", status)
	}
	// A revoked key is refused by the key source during signature
	// verification (the Store hands out no revoked key): 401, and nothing
	// runs. Which ARSIA code the reply names (certificate_revoked, found
	// with errors.As in sig.Verify's error, or unauthorized) is the
	// gateway's to decide.
	before := runs.Load()
	body, err := json.Marshal(signedRequest(t, advisor, gw, "demo.echo", "", kRevoked))
	if err != nil {
		t.Fatal(err)
	}
	rep := g.Receive(t.Context(), gateway.Inbound{Body: body, Method: "POST", URL: "http://127.0.0.1/v1/arsia/inbox"})
	if rep.Status != 401 || runs.Load() != before {
		t.Fatalf("revoked key: %d, %d runs", rep.Status, runs.Load()-before)
	}
	if rep.Envelope != nil {
		var env map[string]any
		if err := json.Unmarshal(rep.Envelope, &env); err != nil {
			t.Fatal(err)
		}
		if code, _ := errorOf(env); code != "certificate_revoked" && code != "unauthorized" {
			t.Fatalf("revoked key answered %q", code)
		}
	}
}

// counting counts the calls its handler executes.
type counting struct {
	handler.Handler
	n *atomic.Int64
}

func (c counting) Execute(ctx context.Context, call handler.Call) (handler.Result, error) {
	c.n.Add(1)
	return c.Handler.Execute(ctx, call)
}
