package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/gatewaytest"
	"github.com/custos-runtime/custos/gateway/relay"
)

const relayRecipient = "agent:acme.ledger"

// relayRig is a pipeRig whose gateway relays for relayRecipient to a
// recipient that answers with a fixed reply.
type relayRig struct {
	*pipeRig
	hits atomic.Int64
	got  atomic.Pointer[[]byte]
}

const relayReply = `{"from":"agent:acme.ledger",  "signed":"by the recipient"}`

func newRelayRig(t *testing.T, grants []string, opts ...rigOption) *relayRig {
	rr := &relayRig{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rr.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		rr.got.Store(&b)
		w.Header().Set("Content-Type", "application/arsia+json; v=1")
		_, _ = io.WriteString(w, relayReply)
	}))
	t.Cleanup(srv.Close)
	rl, err := relay.New(relay.Options{Broker: arsia.BrokerEntry{AgentID: pipeGateway, Inbox: "https://gw.example/v1/arsia/inbox",
		Jurisdiction: "PT", ResidencyZones: []string{"PT"}, Health: arsia.BrokerHealthy, LastHealthCheck: arsia.FormatTimestamp(time.Now())},
		Routes: []relay.Route{{Agent: relayRecipient, Inbox: srv.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, func(o *Options, _ *pipeRig) {
		o.Relay = rl
		o.Grants = map[string][]string{pipeSender: grants}
	})
	rr.pipeRig = newPipeRig(t, opts...)
	return rr
}

// message signs a request to to, with residency zone (none when "").
func (r *relayRig) message(t *testing.T, to, zone string) ([]byte, string) {
	t.Helper()
	comp := map[string]any{"profile": "GDPR-STANDARD"}
	if zone != "" {
		comp["data_residency"] = zone
	}
	e, err := arsia.NewRequest(pipeSender, to, []string{"ledger.read"}, "com.acme/call", map[string]any{"text": "secret"},
		arsia.BuildOptions{Now: r.clk.Now(), Compliance: comp})
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
	b, err := json.Marshal(signed)
	if err != nil {
		t.Fatal(err)
	}
	return b, e.ID
}

func errorCode(t *testing.T, r *pipeRig, raw []byte) (string, map[string]any) {
	t.Helper()
	m := r.verified(t, raw)
	p, _ := m["payload"].(map[string]any)
	e, _ := p["error"].(map[string]any)
	code, _ := e["code"].(string)
	d, _ := e["details"].(map[string]any)
	return code, d
}

func TestRelayForwards(t *testing.T) {
	r := newRelayRig(t, []string{arsia.CapBrokerRelay})
	body, id := r.message(t, relayRecipient, "PT")
	rep := r.g.Receive(t.Context(), Inbound{Body: body})
	if rep.Status != 200 || string(rep.Envelope) != relayReply || rep.ContentType != "application/arsia+json; v=1" {
		t.Fatalf("reply %d %q %q", rep.Status, rep.Envelope, rep.ContentType)
	}
	if got := *r.got.Load(); !bytes.Equal(got, body) {
		t.Fatal("the recipient did not get the bytes the sender signed")
	}
	recs := r.recordsOf(t, audit.KindBrokerRelay, id)
	if len(recs) != 1 || len(r.records(t)) != 1 {
		t.Fatalf("records %+v", r.records(t))
	}
	rec := recs[0]
	if len(rec.Details) != 11 || rec.Details["forwarding_result"] != "success" || rec.Outcome != "success" || rec.Recipient != relayRecipient ||
		rec.Sender != pipeSender || rec.Capability != arsia.CapBrokerRelay || rec.Details["broker_agent_id"] != pipeGateway {
		t.Fatalf("record %+v", rec)
	}
	b, _ := json.Marshal(rec)
	if bytes.Contains(b, []byte("secret")) {
		t.Fatalf("the record carries the payload: %s", b)
	}
	if m := r.metrics(t); !strings.Contains(m, `custos_relays_total{result="success"} 1`) || !strings.Contains(m, `custos_relays_total{result="timeout"} 0`) {
		t.Fatalf("metrics:\n%s", m)
	}
}

func TestRelayRefusals(t *testing.T) {
	t.Run("no grant", func(t *testing.T) {
		r := newRelayRig(t, []string{"ledger.*"})
		body, id := r.message(t, relayRecipient, "PT")
		rep := r.g.Receive(t.Context(), Inbound{Body: body})
		if code, d := errorCode(t, r.pipeRig, rep.Envelope); rep.Status != 403 || code != "forbidden" || d["capability"] != arsia.CapBrokerRelay {
			t.Fatalf("reply %d %s", rep.Status, rep.Envelope)
		}
		if r.hits.Load() != 0 {
			t.Fatal("relayed for a sender without the grant")
		}
		if recs := r.recordsOf(t, audit.KindReceived, id); len(recs) != 1 || recs[0].Outcome != audit.OutcomeRejected || recs[0].Recipient != relayRecipient {
			t.Fatalf("records %+v", r.records(t))
		}
	})
	t.Run("wildcard grant", func(t *testing.T) {
		r := newRelayRig(t, []string{"arsiaprotocol.*"})
		body, _ := r.message(t, relayRecipient, "PT")
		if rep := r.g.Receive(t.Context(), Inbound{Body: body}); rep.Status != 200 || r.hits.Load() != 1 {
			t.Fatalf("reply %d %s", rep.Status, rep.Envelope)
		}
	})
	t.Run("unauthenticated", func(t *testing.T) {
		r := newRelayRig(t, []string{arsia.CapBrokerRelay})
		body, _ := r.message(t, relayRecipient, "PT")
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		m["expires_at"] = arsia.FormatTimestamp(r.clk.Now().Add(time.Hour)) // breaks the signature
		forged, _ := json.Marshal(m)
		rep := r.g.Receive(t.Context(), Inbound{Body: forged})
		if rep.Status != 401 || rep.Envelope != nil || r.hits.Load() != 0 || len(r.records(t)) != 0 {
			t.Fatalf("reply %d %s; %d forwarded, %d records", rep.Status, rep.Envelope, r.hits.Load(), len(r.records(t)))
		}
	})
	t.Run("zone not served", func(t *testing.T) {
		r := newRelayRig(t, []string{arsia.CapBrokerRelay})
		body, id := r.message(t, relayRecipient, "DE")
		rep := r.g.Receive(t.Context(), Inbound{Body: body})
		code, d := errorCode(t, r.pipeRig, rep.Envelope)
		if rep.Status != 503 || code != "service_unavailable" || d["data_residency_violation"] != true || d["required_zone"] != "DE" || r.hits.Load() != 0 {
			t.Fatalf("reply %d %s", rep.Status, rep.Envelope)
		}
		recs := r.recordsOf(t, audit.KindBrokerRelay, id)
		if len(recs) != 1 || recs[0].Outcome != "failure" || recs[0].Details["relay_id"] != d["relay_id"] {
			t.Fatalf("records %+v", r.records(t))
		}
	})
	t.Run("no zone", func(t *testing.T) {
		r := newRelayRig(t, []string{arsia.CapBrokerRelay})
		body, id := r.message(t, relayRecipient, "")
		rep := r.g.Receive(t.Context(), Inbound{Body: body})
		if code, _ := errorCode(t, r.pipeRig, rep.Envelope); rep.Status != 400 || code != "invalid_request" || r.hits.Load() != 0 {
			t.Fatalf("reply %d %s", rep.Status, rep.Envelope)
		}
		if recs := r.recordsOf(t, audit.KindReceived, id); len(recs) != 1 || recs[0].Outcome != audit.OutcomeRejected {
			t.Fatalf("records %+v", r.records(t))
		}
	})
	t.Run("loop", func(t *testing.T) {
		r := newRelayRig(t, []string{arsia.CapBrokerRelay})
		body, _ := r.message(t, relayRecipient, "PT")
		rep := r.g.Receive(t.Context(), Inbound{Body: body, RelayVia: []string{pipeGateway}})
		if code, d := errorCode(t, r.pipeRig, rep.Envelope); rep.Status != 503 || code != "service_unavailable" || d["reason"] != relay.ReasonLoop || r.hits.Load() != 0 {
			t.Fatalf("reply %d %s", rep.Status, rep.Envelope)
		}
	})
	t.Run("stale", func(t *testing.T) {
		r := newRelayRig(t, []string{arsia.CapBrokerRelay})
		body, id := r.message(t, relayRecipient, "PT")
		r.clk.Advance(time.Hour)
		rep := r.g.Receive(t.Context(), Inbound{Body: body})
		if code, _ := errorCode(t, r.pipeRig, rep.Envelope); rep.Status != 400 || code != "invalid_request" || r.hits.Load() != 0 {
			t.Fatalf("reply %d %s", rep.Status, rep.Envelope)
		}
		if recs := r.recordsOf(t, audit.KindReceived, id); len(recs) != 1 || recs[0].Outcome != audit.OutcomeRejected {
			t.Fatalf("records %+v", r.records(t))
		}
	})
	t.Run("no route", func(t *testing.T) {
		r := newRelayRig(t, []string{arsia.CapBrokerRelay})
		body, _ := r.message(t, "agent:acme.elsewhere", "PT")
		rep := r.g.Receive(t.Context(), Inbound{Body: body})
		if code, d := errorCode(t, r.pipeRig, rep.Envelope); rep.Status != 400 || code != "invalid_request" || d["field"] != "/to" || r.hits.Load() != 0 {
			t.Fatalf("reply %d %s", rep.Status, rep.Envelope)
		}
	})
	t.Run("rate limited", func(t *testing.T) {
		r := newRelayRig(t, []string{arsia.CapBrokerRelay}, func(o *Options, _ *pipeRig) { o.RateLimit = RateLimit{PerSecond: 1, Burst: 1} })
		for i, want := range []int{200, 429} {
			body, _ := r.message(t, relayRecipient, "PT")
			if rep := r.g.Receive(t.Context(), Inbound{Body: body}); rep.Status != want {
				t.Fatalf("request %d: %d, want %d", i, rep.Status, want)
			}
		}
		if r.hits.Load() != 1 {
			t.Fatalf("%d forwarded", r.hits.Load())
		}
	})
}

// An encrypted payload is the recipient's: relayed as it came, even by a
// gateway that could not decrypt it, and recorded by the JWE's hash.
func TestRelayEncrypted(t *testing.T) {
	r := newRelayRig(t, []string{arsia.CapBrokerRelay})
	plain, id := r.message(t, relayRecipient, "PT")
	var env map[string]any
	if err := json.Unmarshal(plain, &env); err != nil {
		t.Fatal(err)
	}
	delete(env, "security")
	pub := newEncKey(t, relayRecipient+"#enc-1").Public()
	enc, err := sig.EncryptPayload(env, &pub, sig.ECDHES)
	if err != nil {
		t.Fatal(err)
	}
	jwe, ok := enc["payload"].(string)
	if !ok {
		t.Fatalf("payload %T", enc["payload"])
	}
	signed, err := sig.Sign(enc, r.signer, r.kid)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(signed)
	rep := r.g.Receive(t.Context(), Inbound{Body: body})
	if rep.Status != 200 || string(rep.Envelope) != relayReply {
		t.Fatalf("reply %d %s", rep.Status, rep.Envelope)
	}
	if got := *r.got.Load(); !bytes.Equal(got, body) {
		t.Fatal("the encrypted request was not forwarded as it came")
	}
	recs := r.recordsOf(t, audit.KindBrokerRelay, id)
	sum := sha256.Sum256([]byte(jwe))
	if len(recs) != 1 || recs[0].Details["payload_hash"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("records %+v", recs)
	}
}

func TestRelayBrokerMustBeTheGateway(t *testing.T) {
	rl, err := relay.New(relay.Options{Broker: arsia.BrokerEntry{AgentID: "agent:acme.other", Inbox: "https://o.example/",
		Jurisdiction: "PT", ResidencyZones: []string{"PT"}, Health: arsia.BrokerHealthy, LastHealthCheck: arsia.FormatTimestamp(time.Now())}})
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := gatewaytest.Signer(t)
	a, xs, log := gatewaytest.State(t)
	o := Options{Agent: pipeGateway, Relay: rl, Signer: signer, KID: pipeGateway + "#k", Keys: sig.NewStaticJWKS(jose.JSONWebKeySet{}),
		Authority: a, Exchanges: xs, Audit: log}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "broker") {
		t.Fatalf("New = %v", err)
	}
}
