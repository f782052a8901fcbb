package handler_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/gatewaytest"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

const (
	e2eSender  = "agent:acme.advisor"
	e2eGateway = "agent:acme.gateway"
	e2eCap     = "acme.crm.lookup"
)

// mcpRig is a real gateway serving e2eCap with an mcp handler on an
// in-process MCP server.
type mcpRig struct {
	g      *gateway.Gateway
	xs     *sqliteexchange.Store
	auth   *aais.Authority
	signer sig.Signer
	kid    string
	gwKeys sig.KeySource
	h      *handler.MCP
}

func newMCPRig(t *testing.T) (*mcpRig, func() int64) {
	t.Helper()
	h, runs, _ := inMemoryMCP(t, func(c *handler.MCPConfig) { c.Tools = []string{"add"} })
	r := &mcpRig{h: h, kid: e2eSender + "#key-1"}
	var priv ed25519.PrivateKey
	r.signer, priv = gatewaytest.Signer(t)
	senders := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: priv.Public(), KeyID: r.kid, Algorithm: "EdDSA", Use: "sig"}}})
	gwSigner, gwPriv := gatewaytest.Signer(t)
	gwKID := e2eGateway + "#gw-1"
	r.gwKeys = sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: gwPriv.Public(), KeyID: gwKID, Algorithm: "EdDSA", Use: "sig"}}})
	var auditLog *audit.Log
	r.auth, r.xs, auditLog = gatewaytest.State(t)
	var err error
	r.g, err = gateway.New(gateway.Options{
		Agent: e2eGateway, Signer: gwSigner, KID: gwKID, Keys: senders,
		Grants:    map[string][]string{e2eSender: {e2eCap}},
		Handlers:  map[string]handler.Handler{e2eCap: h},
		Authority: r.auth, Exchanges: r.xs, Audit: auditLog,
		Poll: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, runs.Load
}

// send signs an ARSIA request carrying the MCP tools/call rpc.
func (r *mcpRig) send(t *testing.T, rpc, profile string) gateway.Reply {
	t.Helper()
	var args any
	if err := json.Unmarshal([]byte(rpc), &args); err != nil {
		t.Fatal(err)
	}
	e, err := arsia.NewRequest(e2eSender, e2eGateway, []string{e2eCap}, handler.PayloadTypeMCPToolCall, args,
		arsia.BuildOptions{Now: time.Now(), Compliance: map[string]any{"profile": profile}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.Map()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sig.Sign(env, r.signer, r.kid)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(signed)
	if err != nil {
		t.Fatal(err)
	}
	return r.g.Receive(t.Context(), gateway.Inbound{Body: body})
}

func (r *mcpRig) verified(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("envelope %s: %v", raw, err)
	}
	if _, err := sig.Verify(t.Context(), m, r.gwKeys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}}); err != nil {
		t.Fatalf("the gateway's envelope does not verify: %v\n%s", err, raw)
	}
	return m
}

// wantSum checks a signed response carrying the add tool's result.
func (r *mcpRig) wantSum(t *testing.T, raw []byte, sum string) {
	t.Helper()
	m := r.verified(t, raw)
	if m["intent"] != "response" {
		t.Fatalf("reply %s", raw)
	}
	p, _ := m["payload"].(map[string]any)
	res, _ := p["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if p["type"] != handler.PayloadTypeMCPToolCall || len(content) != 1 || content[0].(map[string]any)["text"] != sum {
		t.Fatalf("payload %v", p)
	}
}

const addRPC = `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","arguments":{"a":20,"b":22}},"id":1}`

func TestGatewayMCPDirect(t *testing.T) {
	r, runs := newMCPRig(t)
	rep := r.send(t, addRPC, "GDPR-STANDARD")
	if rep.Status != 200 {
		t.Fatalf("status %d %s %v", rep.Status, rep.Envelope, rep.Problem)
	}
	r.wantSum(t, rep.Envelope, "42")
	if n := runs(); n != 1 {
		t.Errorf("the tool ran %d times", n)
	}
	// A tool outside the handler's list is refused before anything runs.
	rep = r.send(t, strings.Replace(addRPC, `"add"`, `"pid"`, 1), "GDPR-STANDARD")
	if rep.Status < 400 {
		t.Fatalf("refused tool: %d %s", rep.Status, rep.Envelope)
	}
	if n := runs(); n != 1 {
		t.Errorf("the tool ran %d times", n)
	}
}

func TestGatewayMCPApproval(t *testing.T) {
	r, runs := newMCPRig(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	rep := r.send(t, addRPC, "EU-AI-ACT-HIGH-RISK")
	if rep.Status != 202 {
		t.Fatalf("status %d %s", rep.Status, rep.Envelope)
	}
	if m := r.verified(t, rep.Envelope); m["intent"] != "pending_approval" {
		t.Fatalf("reply %s", rep.Envelope)
	}
	time.Sleep(60 * time.Millisecond) // a few Run polls: nothing runs while pending
	if n := runs(); n != 0 {
		t.Fatalf("the tool ran %d times before approval", n)
	}
	x, err := r.xs.Get(ctx, rep.ExchangeID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.auth.State(ctx, x.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	req := st.Request.Event.Request
	a := req.Action
	var args struct {
		Method string `json:"method"`
		Params struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(a.Arguments(), &args); err != nil {
		t.Fatal(err)
	}
	if a.Kind() != "tool.call" || a.Name() != e2eCap || args.Method != "tools/call" || args.Params.Name != "add" ||
		args.Params.Arguments["a"] != 20.0 || args.Params.Arguments["b"] != 22.0 || !strings.Contains(a.Summary(), `"add"`) {
		t.Fatalf("the reviewer sees %s", a.Raw())
	}
	alice := aais.Actor{ID: "alice", Type: aais.ActorHuman, AuthenticatedBy: "api_token"}
	d, err := aais.NewDecision(req, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeOnce, Actor: alice, DecidedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.auth.Decide(ctx, d, alice, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := r.g.Exchange(ctx, rep.ExchangeID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == 200 {
			r.wantSum(t, got.Envelope, "42")
			break
		}
		if got.Status != 202 || time.Now().After(deadline) {
			t.Fatalf("exchange %d %s", got.Status, got.Envelope)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(60 * time.Millisecond)
	if n := runs(); n != 1 {
		t.Errorf("the approved tool ran %d times, want 1", n)
	}
}
