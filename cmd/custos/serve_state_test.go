package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
)

// startStateGateway runs serve with state enabled and the sender granted
// arsiaprotocol.state.* (read and write) and, by name, snapshot: not
// purge.
func startStateGateway(t *testing.T, dataDir string) *gatewayUnderTest {
	t.Helper()
	return startStateGatewayAs(t, dataDir, sender)
}

// startStateGatewayAs is startStateGateway with agent as the sender and
// extra configuration appended.
func startStateGatewayAs(t *testing.T, dataDir, agent string, extraYAML ...string) *gatewayUnderTest {
	t.Helper()
	return startStateGatewayWith(t, dataDir, agent, strings.Join(extraYAML, ""))
}

func startStateGatewayWith(t *testing.T, dataDir, agent, extraYAML string) *gatewayUnderTest {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatewayUnderTest{kid: agent + "#key-1", upstream: new(atomic.Int64), upstreamTrace: new(atomic.Value)}
	if g.signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: g.kid, Algorithm: "EdDSA", Use: "sig"}}})
	g.sendersJWKS = filepath.Join(t.TempDir(), "senders.jwks.json")
	if err := os.WriteFile(g.sendersJWKS, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "listen: 127.0.0.1:0\ndata: " + dataDir + "\nagent: agent:acme.gateway\n" +
		"trust:\n  jwks_files: [" + g.sendersJWKS + "]\n" +
		"senders:\n  - agent: " + agent + "\n    capabilities: [\"arsiaprotocol.state.*\", \"arsiaprotocol.state.snapshot\", \"demo.*\"]\n" +
		"handlers:\n  demo.echo:\n    type: echo\n" +
		"state:\n  enabled: true\n  zones: [EU]\n" + extraYAML
	g.configPath = filepath.Join(t.TempDir(), "custos.yaml")
	if err := os.WriteFile(g.configPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startGateway(t, dataDir, g)
}

// sendState signs and posts a state operation under capability.
func (g *gatewayUnderTest) sendState(t *testing.T, capability, op string, args map[string]any, comp map[string]any) (int, map[string]any) {
	t.Helper()
	code, reply, _ := g.sendStateH(t, capability, op, args, comp)
	return code, reply
}

// sendStateH is sendState that also returns the reply's headers.
func (g *gatewayUnderTest) sendStateH(t *testing.T, capability, op string, args map[string]any, comp map[string]any) (int, map[string]any, http.Header) {
	t.Helper()
	from, _, _ := strings.Cut(g.kid, "#")
	e, err := arsia.NewRequest(from, "agent:acme.gateway", []string{capability}, "arsiaprotocol.state/"+op, args,
		arsia.BuildOptions{Now: time.Now(), Compliance: comp})
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.Map()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sig.Sign(env, g.signer, g.kid)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(signed)
	code, reply, hdr := g.post(t, body, "application/arsia+json; v=1")
	if reply != nil {
		g.verifyReply(t, reply)
	}
	return code, reply, hdr
}

func payloadOf(reply map[string]any) map[string]any {
	p, _ := reply["payload"].(map[string]any)
	return p
}

// errorOf is the ARSIA error of a reply.
func errorOf(reply map[string]any) (code string, details map[string]any) {
	e, _ := payloadOf(reply)["error"].(map[string]any)
	code, _ = e["code"].(string)
	details, _ = e["details"].(map[string]any)
	return code, details
}

// What a live conformance runner plays against serve: SET, GET, a stale
// expected_version, DELETE of a missing key, GET after DELETE, QUERY,
// SNAPSHOT; the capability model; and the state surviving a restart.
func TestServeState(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	g := startStateGateway(t, data)
	stopped := false
	defer func() {
		if !stopped {
			g.stop()
		}
	}()
	gdpr := map[string]any{"profile": "GDPR-STANDARD"}
	key := sender + "/agent/rt.key"
	set := map[string]any{"key": key, "value": map[string]any{"n": 1}, "scope": "agent", "pii_classification": "none"}

	code, reply := g.sendState(t, "arsiaprotocol.state.write", "set", set, gdpr)
	p := payloadOf(reply)
	if code != 200 || p["type"] != "arsiaprotocol.state/set" {
		t.Fatalf("SET: %d %v", code, reply)
	}
	if r, _ := p["result"].(map[string]any); r["version"] != 1.0 || r["owner_agent_id"] != sender || r["key"] != key {
		t.Fatalf("SET result %v", p["result"])
	}

	code, reply = g.sendState(t, "arsiaprotocol.state.read", "get", map[string]any{"key": key}, gdpr)
	if r, _ := payloadOf(reply)["result"].(map[string]any); code != 200 || r["version"] != 1.0 || r["value"].(map[string]any)["n"] != 1.0 {
		t.Fatalf("GET: %d %v", code, reply)
	}

	stale := map[string]any{"key": key, "value": 2, "scope": "agent", "pii_classification": "none", "expected_version": 5}
	code, reply = g.sendState(t, "arsiaprotocol.state.write", "set", stale, gdpr)
	if c, d := errorOf(reply); code != 409 || c != "conflict" || d["current_version"] != 1.0 || d["expected_version"] != 5.0 {
		t.Fatalf("stale SET: %d %v", code, reply)
	}

	ghost := map[string]any{"key": sender + "/agent/ghost"}
	code, reply = g.sendState(t, "arsiaprotocol.state.write", "delete", ghost, gdpr)
	if c, _ := errorOf(reply); code != 404 || c != "not_found" {
		t.Fatalf("DELETE of a missing key: %d %v", code, reply)
	}
	code, reply = g.sendState(t, "arsiaprotocol.state.read", "get", ghost, gdpr)
	if r, ok := payloadOf(reply)["result"]; code != 200 || !ok || r != nil {
		t.Fatalf("GET of a missing key: %d %v (want result null)", code, reply)
	}

	other := map[string]any{"key": sender + "/shared/doc", "value": "x", "scope": "shared", "pii_classification": "none"}
	if code, reply = g.sendState(t, "arsiaprotocol.state.write", "set", other, gdpr); code != 200 {
		t.Fatalf("SET shared: %d %v", code, reply)
	}
	code, reply = g.sendState(t, "arsiaprotocol.state.read", "query", map[string]any{"key_prefix": sender + "/agent/", "scope": "agent"}, gdpr)
	r, _ := payloadOf(reply)["result"].(map[string]any)
	if entries, _ := r["entries"].([]any); code != 200 || r["total"] != 1.0 || len(entries) != 1 || entries[0].(map[string]any)["key"] != key {
		t.Fatalf("QUERY: %d %v", code, reply)
	}

	code, reply = g.sendState(t, "arsiaprotocol.state.snapshot", "snapshot", map[string]any{"as_of": arsia.FormatTimestamp(time.Now())}, gdpr)
	r, _ = payloadOf(reply)["result"].(map[string]any)
	if entries, _ := r["entries"].([]any); code != 200 || len(entries) != 2 || r["hash"] == nil {
		t.Fatalf("SNAPSHOT: %d %v", code, reply)
	}

	if code, reply = g.sendState(t, "arsiaprotocol.state.write", "delete", map[string]any{"key": key}, gdpr); code != 200 {
		t.Fatalf("DELETE: %d %v", code, reply)
	}
	code, reply = g.sendState(t, "arsiaprotocol.state.read", "get", map[string]any{"key": key}, gdpr)
	if r, ok := payloadOf(reply)["result"]; code != 200 || !ok || r != nil {
		t.Fatalf("GET after DELETE: %d %v", code, reply)
	}

	// The capability model: an operation under another capability, and
	// purge, which the wildcard does not grant.
	code, reply = g.sendState(t, "arsiaprotocol.state.read", "set", set, gdpr)
	if c, d := errorOf(reply); code != 403 || c != "forbidden" || d["required_capabilities"] == nil {
		t.Fatalf("SET under state.read: %d %v", code, reply)
	}
	code, reply = g.sendState(t, "arsiaprotocol.state.purge", "purge", map[string]any{"key": key}, gdpr)
	if c, _ := errorOf(reply); code != 403 || c != "forbidden" {
		t.Fatalf("PURGE without its grant: %d %v", code, reply)
	}
	// Residency: the store lies in the EU.
	us := map[string]any{"key": sender + "/agent/us", "value": 1, "scope": "agent", "pii_classification": "none", "data_residency": "US"}
	code, reply = g.sendState(t, "arsiaprotocol.state.write", "set", us, gdpr)
	if c, d := errorOf(reply); code != 400 || c != "invalid_request" || d["data_residency_violation"] != true {
		t.Fatalf("US data in an EU store: %d %v", code, reply)
	}

	// A reload (the configuration file changed) keeps state served.
	cfg, err := os.ReadFile(g.configPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.configPath, append(cfg, "# edited\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, g.log, "the reload", func(s string) bool { return strings.Contains(s, `msg="configuration reloaded"`) })
	code, reply = g.sendState(t, "arsiaprotocol.state.read", "get", map[string]any{"key": other["key"]}, gdpr)
	if r, _ := payloadOf(reply)["result"].(map[string]any); code != 200 || r["value"] != "x" {
		t.Fatalf("GET after a reload: %d %v", code, reply)
	}

	// The state is in the data directory: a restarted gateway has it.
	g.stop()
	stopped = true
	// The mutations' ARSIA-State audit records are in the audit log,
	// in the execution records' details.
	out := mustCustos(t, "", "audit", "export", "--log", data)
	for _, want := range []string{`"state_audit"`, `"event_type":"state_set"`, `"event_type":"state_delete"`, `"payload_hash"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the audit export lacks %s", want)
		}
	}
	g2 := startGateway(t, data, g)
	defer g2.stop()
	code, reply = g2.sendState(t, "arsiaprotocol.state.read", "get", map[string]any{"key": other["key"]}, gdpr)
	if r, _ := payloadOf(reply)["result"].(map[string]any); code != 200 || r["value"] != "x" {
		t.Fatalf("GET after the restart: %d %v", code, reply)
	}
}

// The five cases the upstream state suite gates behind skip_until:
// state-storage, played as a live runner plays them: signed requests from
// agent:external.demo (the owner of the cases' keys) to serve.
func TestServeStateStorageCases(t *testing.T) {
	const demo = "agent:external.demo"
	g := startStateGatewayAs(t, filepath.Join(t.TempDir(), "data"), demo)
	defer g.stop()
	gdpr := map[string]any{"profile": "GDPR-STANDARD"}
	set := func(key string, v any, expected int) (int, map[string]any) {
		args := map[string]any{"key": key, "value": v, "scope": strings.Split(key, "/")[1], "pii_classification": "none"}
		if expected > 0 {
			args["expected_version"] = expected
		}
		return g.sendState(t, "arsiaprotocol.state.write", "set", args, gdpr)
	}
	t.Run("STATE-RT-01", func(t *testing.T) {
		key := demo + "/agent/rt.key"
		if code, reply := set(key, map[string]any{"n": 1}, 0); code != 200 {
			t.Fatalf("SET: %d %v", code, reply)
		}
		code, reply := g.sendState(t, "arsiaprotocol.state.read", "get", map[string]any{"key": key}, gdpr)
		if r, _ := payloadOf(reply)["result"].(map[string]any); code != 200 || r["value"].(map[string]any)["n"] != 1.0 {
			t.Fatalf("GET: %d %v", code, reply)
		}
	})
	t.Run("STATE-VERSION-01", func(t *testing.T) {
		key := demo + "/agent/v.key"
		for i := range 2 {
			if code, reply := set(key, i, 0); code != 200 {
				t.Fatalf("SET %d: %d %v", i, code, reply)
			}
		}
		code, reply := set(key, "stale", 1)
		if c, _ := errorOf(reply); code != 409 || c != "conflict" {
			t.Fatalf("stale SET: %d %v", code, reply)
		}
	})
	t.Run("STATE-QUERY-01", func(t *testing.T) {
		prefix := demo + "/agent/"
		for _, k := range []string{prefix + "a", prefix + "b", demo + "/shared/c", demo + "/session/d"} {
			if code, reply := set(k, k, 0); code != 200 {
				t.Fatalf("SET %s: %d %v", k, code, reply)
			}
		}
		code, reply := g.sendState(t, "arsiaprotocol.state.read", "query", map[string]any{"key_prefix": prefix, "scope": "agent"}, gdpr)
		r, _ := payloadOf(reply)["result"].(map[string]any)
		// a, b and the keys of the two cases before.
		if code != 200 || r["total"] != 4.0 {
			t.Fatalf("QUERY: %d %v", code, reply)
		}
	})
	t.Run("STATE-SNAPSHOT-01", func(t *testing.T) {
		key := demo + "/agent/snap"
		if code, reply := set(key, "before", 0); code != 200 {
			t.Fatalf("SET: %d %v", code, reply)
		}
		asOf := arsia.FormatTimestamp(time.Now())
		time.Sleep(5 * time.Millisecond)
		if code, reply := set(key, "after", 0); code != 200 {
			t.Fatalf("SET: %d %v", code, reply)
		}
		code, reply := g.sendState(t, "arsiaprotocol.state.snapshot", "snapshot",
			map[string]any{"as_of": asOf, "filter": map[string]any{"key_prefix": key}}, gdpr)
		r, _ := payloadOf(reply)["result"].(map[string]any)
		entries, _ := r["entries"].([]any)
		if code != 200 || len(entries) != 1 || entries[0].(map[string]any)["value"] != "before" {
			t.Fatalf("SNAPSHOT: %d %v", code, reply)
		}
	})
	t.Run("STATE-DELETE-01", func(t *testing.T) {
		ghost := map[string]any{"key": demo + "/agent/ghost"}
		if code, reply := g.sendState(t, "arsiaprotocol.state.write", "delete", ghost, gdpr); code != 404 {
			t.Fatalf("DELETE: %d %v", code, reply)
		}
		code, reply := g.sendState(t, "arsiaprotocol.state.read", "get", ghost, gdpr)
		if r, ok := payloadOf(reply)["result"]; code != 200 || !ok || r != nil {
			t.Fatalf("GET: %d %v (want result null)", code, reply)
		}
	})
}

// A SET of personal data under a profile that puts calls before a human
// runs, once approved, with the request's compliance object: its legal
// basis and residency still apply.
func TestServeStateAfterApproval(t *testing.T) {
	g := startStateGateway(t, filepath.Join(t.TempDir(), "data"))
	defer g.stop()
	comp := map[string]any{"profile": "EU-AI-ACT-HIGH-RISK", "legal_basis": "consent", "data_residency": "EU"}
	key := sender + "/agent/client"
	args := map[string]any{"key": key, "value": map[string]any{"name": "Ana"}, "scope": "agent", "pii_classification": "personal", "data_residency": "EU"}
	code, reply, hdr := g.sendStateH(t, "arsiaprotocol.state.write", "set", args, comp)
	if code != 202 {
		t.Fatalf("SET under EU-AI-ACT-HIGH-RISK: %d %v", code, reply)
	}
	g.decide(t, aais.Approve)
	code, reply = g.awaitFinal(t, hdr.Get("Custos-Exchange"))
	r, _ := payloadOf(reply)["result"].(map[string]any)
	if code != 200 || r["pii_classification"] != "personal" || r["data_residency"] != "EU" || r["version"] != 1.0 {
		t.Fatalf("approved SET: %d %v", code, reply)
	}
}

// Two replicas on one PostgreSQL schema serve one state: what one writes
// the other reads, and a SET expecting a version the other replica
// already moved past is a conflict.
func TestServeStateOnPostgres(t *testing.T) {
	storeURL := pgtest.SchemaDSN(t, pgtest.Schema(t))
	a := startStateGatewayAs(t, filepath.Join(t.TempDir(), "data0"), sender, "store: "+storeURL+"\ninstance: a\n")
	defer a.stop()
	b := startStateGatewayAs(t, filepath.Join(t.TempDir(), "data1"), sender, "store: "+storeURL+"\ninstance: b\n")
	defer b.stop()
	// Each replica trusts its own sender key (its own JWKS file): the
	// sender is one agent id either way.
	gdpr := map[string]any{"profile": "GDPR-STANDARD"}
	key := sender + "/shared/counter"
	args := map[string]any{"key": key, "value": 1, "scope": "shared", "pii_classification": "none"}
	if code, reply := a.sendState(t, "arsiaprotocol.state.write", "set", args, gdpr); code != 200 {
		t.Fatalf("SET on a: %d %v", code, reply)
	}
	args["expected_version"] = 1
	if code, reply := b.sendState(t, "arsiaprotocol.state.write", "set", args, gdpr); code != 200 {
		t.Fatalf("SET on b expecting 1: %d %v", code, reply)
	}
	code, reply := a.sendState(t, "arsiaprotocol.state.write", "set", args, gdpr)
	if c, d := errorOf(reply); code != 409 || c != "conflict" || d["current_version"] != 2.0 {
		t.Fatalf("stale SET on a: %d %v", code, reply)
	}
	code, reply = a.sendState(t, "arsiaprotocol.state.read", "get", map[string]any{"key": key}, gdpr)
	if r, _ := payloadOf(reply)["result"].(map[string]any); code != 200 || r["version"] != 2.0 {
		t.Fatalf("GET on a: %d %v", code, reply)
	}
}
