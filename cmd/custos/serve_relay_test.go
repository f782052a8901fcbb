package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/relay"
)

// relayRecipient is an agent behind the broker: it verifies the sender's
// own signature on what the broker forwards, and answers with a response
// signed by its own key.
type relayRecipient struct {
	*httptest.Server
	verified, refused atomic.Int64
	via               atomic.Value
}

const ledger = "agent:acme.ledger"

func newRelayRecipient(t *testing.T, senderKeys sig.KeySource) *relayRecipient {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sig.NewEd25519Signer(priv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	r := &relayRecipient{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.via.Store(req.Header.Get(relay.HeaderVia))
		b, _ := io.ReadAll(req.Body)
		env, err := sig.DecodeEnvelope(b)
		if err == nil {
			_, err = sig.Verify(req.Context(), env, senderKeys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}})
		}
		if err != nil {
			r.refused.Add(1)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(401)
			_, _ = io.WriteString(w, `{"status":401,"detail":"signature"}`)
			return
		}
		r.verified.Add(1)
		id, _ := env["id"].(string)
		resp, err := arsia.NewResponse(ledger, sender, id, "com.acme/result", map[string]any{"balance": 42}, arsia.BuildOptions{Now: time.Now()})
		if err != nil {
			t.Error(err)
			return
		}
		m, _ := resp.Map()
		signed, err := sig.Sign(m, signer, ledger+"#key-1")
		if err != nil {
			t.Error(err)
			return
		}
		out, _ := json.Marshal(signed)
		w.Header().Set("Content-Type", "application/arsia+json; v=1")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// startRelayGateway runs serve as a broker in PT relaying to the ledger
// and to an agent whose inbox is down, with sender granted
// arsiaprotocol.broker.relay.
func startRelayGateway(t *testing.T) (*gatewayUnderTest, *relayRecipient) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatewayUnderTest{kid: sender + "#key-1", upstream: new(atomic.Int64), upstreamTrace: new(atomic.Value)}
	if g.signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: g.kid, Algorithm: "EdDSA", Use: "sig"}}}
	jwks, _ := json.Marshal(set)
	g.sendersJWKS = filepath.Join(t.TempDir(), "senders.jwks.json")
	if err := os.WriteFile(g.sendersJWKS, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	rcpt := newRelayRecipient(t, sig.NewStaticJWKS(set))
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read first: the server notices a client gone only after the body.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(slow.Close)
	data := filepath.Join(t.TempDir(), "data")
	cfg := "listen: 127.0.0.1:0\ndata: " + data + "\nagent: agent:acme.gateway\n" +
		"trust:\n  jwks_files: [" + g.sendersJWKS + "]\n" +
		"senders:\n  - agent: " + sender + "\n    capabilities: [arsiaprotocol.broker.relay, demo.*]\n" +
		"handlers:\n  demo.echo:\n    type: echo\n" +
		"relay:\n  enabled: true\n  jurisdiction: PT\n  residency_zones: [PT, EU]\n  forward_timeout: 300ms\n  routes:\n" +
		"    - agent: " + ledger + "\n      inbox: " + rcpt.URL + "/v1/arsia/inbox\n" +
		"    - agent: agent:acme.down\n      inbox: " + downURL + "/v1/arsia/inbox\n" +
		"    - agent: agent:acme.slow\n      inbox: " + slow.URL + "/v1/arsia/inbox\n"
	g.configPath = filepath.Join(t.TempDir(), "custos.yaml")
	if err := os.WriteFile(g.configPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startGateway(t, data, g), rcpt
}

// sendTo signs a request to to with residency zone and posts it; it
// returns the status, the raw reply and the message id.
func (g *gatewayUnderTest) sendTo(t *testing.T, to, zone string, headers ...string) (int, []byte, string) {
	t.Helper()
	e, err := arsia.NewRequest(sender, to, []string{"ledger.read"}, "com.acme/call", map[string]any{"account": "secret-account"},
		arsia.BuildOptions{Now: time.Now(), Compliance: map[string]any{"profile": "GDPR-STANDARD", "data_residency": zone}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := e.Map()
	signed, err := sig.Sign(m, g.signer, g.kid)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(signed)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/v1/arsia/inbox", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/arsia+json; v=1")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, e.ID
}

func TestServeRelay(t *testing.T) {
	g, rcpt := startRelayGateway(t)
	stopped := false
	defer func() {
		if !stopped {
			g.stop()
		}
	}()

	// Discovery: the gateway declares arsiaprotocol.broker.relay and
	// lists itself for the zones it serves.
	var md map[string]any
	if err := json.Unmarshal(fetchBody(t, g.url+"/.well-known/arsia"), &md); err != nil {
		t.Fatal(err)
	}
	if caps, _ := md["capabilities_supported"].([]any); !containsAny(caps, arsia.CapBrokerRelay) {
		t.Fatalf("capabilities_supported = %v", md["capabilities_supported"])
	}
	for zone, want := range map[string]int{"PT": 1, "EU": 1, "DE": 0} {
		var list []any
		if err := json.Unmarshal(fetchBody(t, g.url+"/.well-known/arsia/brokers?residency="+zone), &list); err != nil || len(list) != want {
			t.Fatalf("brokers for %s: %v %v", zone, list, err)
		}
		for _, e := range list {
			b, err := arsia.ParseBrokerEntry(e)
			if err != nil || b.AgentID != "agent:acme.gateway" || b.Inbox != g.url+"/v1/arsia/inbox" || b.Jurisdiction != "PT" {
				t.Fatalf("broker entry %v: %v", e, err)
			}
		}
	}

	// Relayed: the ledger verified the sender's own signature, and its
	// signed response came back as it sent it.
	code, raw, okID := g.sendTo(t, ledger, "PT")
	if code != 200 || rcpt.verified.Load() != 1 || rcpt.refused.Load() != 0 {
		t.Fatalf("relay: %d %s (verified %d, refused %d)", code, raw, rcpt.verified.Load(), rcpt.refused.Load())
	}
	var reply map[string]any
	if err := json.Unmarshal(raw, &reply); err != nil || reply["from"] != ledger || reply["correlation_id"] != okID {
		t.Fatalf("reply %s: %v", raw, err)
	}
	if via := rcpt.via.Load(); via != "agent:acme.gateway" {
		t.Fatalf("%s = %q", relay.HeaderVia, via)
	}

	// The recipient is down: the gateway answers service_unavailable,
	// signed, with the relay's details.
	code, raw, downID := g.sendTo(t, "agent:acme.down", "PT")
	var failed map[string]any
	_ = json.Unmarshal(raw, &failed)
	g.verifyReply(t, failed)
	ecode, d := errorOf(failed)
	if code != 503 || ecode != "service_unavailable" || d["relay_failed"] != true || d["reason"] != relay.ReasonUnreachable ||
		d["to_agent"] != "agent:acme.down" || d["broker_agent_id"] != "agent:acme.gateway" || d["forwarding_result"] != "failure" ||
		d["residency_zone"] != "PT" || d["relay_id"] == nil {
		t.Fatalf("down: %d %s", code, raw)
	}

	// The recipient does not answer within forward_timeout.
	start := time.Now()
	code, raw, slowID := g.sendTo(t, "agent:acme.slow", "EU")
	var late map[string]any
	_ = json.Unmarshal(raw, &late)
	if ecode, d := errorOf(late); code != 503 || ecode != "service_unavailable" || d["reason"] != relay.ReasonTimeout || d["forwarding_result"] != "timeout" || time.Since(start) > 5*time.Second {
		t.Fatalf("slow: %d %s after %s", code, raw, time.Since(start))
	}

	// A message that has passed through this broker already: a loop,
	// refused before forwarding.
	code, raw, loopID := g.sendTo(t, ledger, "PT", relay.HeaderVia+": agent:acme.other", relay.HeaderVia+": agent:acme.gateway")
	var loop map[string]any
	_ = json.Unmarshal(raw, &loop)
	if ecode, d := errorOf(loop); code != 503 || ecode != "service_unavailable" || d["reason"] != relay.ReasonLoop || rcpt.verified.Load() != 1 {
		t.Fatalf("loop: %d %s", code, raw)
	}

	// A zone the broker does not serve: refused before forwarding.
	code, raw, deID := g.sendTo(t, ledger, "DE")
	var refused map[string]any
	_ = json.Unmarshal(raw, &refused)
	if ecode, d := errorOf(refused); code != 503 || ecode != "service_unavailable" || d["required_zone"] != "DE" || rcpt.verified.Load() != 1 {
		t.Fatalf("zone: %d %s", code, raw)
	}

	// An agent without a route is refused as before.
	code, raw, _ = g.sendTo(t, "agent:acme.stranger", "PT")
	var stranger map[string]any
	_ = json.Unmarshal(raw, &stranger)
	if ecode, d := errorOf(stranger); code != 400 || ecode != "invalid_request" || d["field"] != "/to" {
		t.Fatalf("no route: %d %s", code, raw)
	}

	g.stop()
	stopped = true
	// One broker_relay record per attempt, each the 11-field relay
	// record, none with the payload.
	out := mustCustos(t, "", "audit", "export", "--data", g.dataDir)
	if strings.Contains(out, "secret-account") {
		t.Fatal("the audit log holds the payload")
	}
	results := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if m["kind"] != "broker_relay" {
			continue
		}
		details, _ := m["details"].(map[string]any)
		if len(details) != 11 {
			t.Fatalf("relay record details %v: want the 11 members", details)
		}
		r := arsia.RelayAuditRecord{AuditType: str(details["audit_type"]), RelayID: str(details["relay_id"]), MessageID: str(details["message_id"]),
			FromAgent: str(details["from_agent"]), ToAgent: str(details["to_agent"]), BrokerAgentID: str(details["broker_agent_id"]),
			ResidencyZone: str(details["residency_zone"]), RelayedAt: str(details["relayed_at"]), PayloadHash: str(details["payload_hash"]),
			ForwardingResult: arsia.ForwardingResult(str(details["forwarding_result"]))}
		if n, ok := details["relay_latency_ms"].(float64); ok {
			r.RelayLatencyMS = int64(n)
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("relay record %v: %v", details, err)
		}
		results[r.MessageID] = string(r.ForwardingResult)
	}
	if len(results) != 5 || results[okID] != "success" || results[downID] != "failure" || results[deID] != "failure" ||
		results[slowID] != "timeout" || results[loopID] != "failure" {
		t.Fatalf("relay records: %v", results)
	}
}

func str(v any) string { s, _ := v.(string); return s }

func fetchBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

func containsAny(list []any, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
