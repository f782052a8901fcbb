package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

const (
	sender    = "agent:acme.advisor"
	recipient = "agent:acme.ledger"
	brokerID  = "agent:acme.broker"
)

var t0 = time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)

func brokerEntry(jurisdiction string, zones ...string) arsia.BrokerEntry {
	return arsia.BrokerEntry{AgentID: brokerID, Inbox: "https://broker.example/v1/arsia/inbox", Jurisdiction: jurisdiction,
		ResidencyZones: zones, Health: arsia.BrokerHealthy, LastHealthCheck: arsia.FormatTimestamp(t0)}
}

// message builds a request for recipient with residency zone (none when
// ""), expiring ttl after t0, and its wire bytes.
func message(t *testing.T, zone string, ttl time.Duration) (map[string]any, []byte) {
	t.Helper()
	comp := map[string]any{"profile": "GDPR-STANDARD"}
	if zone != "" {
		comp["data_residency"] = zone
	}
	e, err := arsia.NewRequest(sender, recipient, []string{"ledger.read"}, "com.acme/call",
		map[string]any{"text": "the secret payload"}, arsia.BuildOptions{Now: t0, TTL: ttl, Compliance: comp})
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.Map()
	if err != nil {
		t.Fatal(err)
	}
	// Odd spacing: the bytes forwarded must be these, not a re-encoding.
	b, err := json.MarshalIndent(env, "", "   ")
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back, b
}

type recipientSrv struct {
	*httptest.Server
	hits atomic.Int64
	body atomic.Pointer[[]byte]
	via  atomic.Pointer[string]
}

func newRecipient(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *recipientSrv {
	s := &recipientSrv{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		s.body.Store(&b)
		v := r.Header.Get(HeaderVia)
		s.via.Store(&v)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

const reply = `{"v":"1.0","intent":"response",   "payload":{"ok":true}}`

func answer(status int, ct, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func newRelayer(t *testing.T, b arsia.BrokerEntry, inbox string, o Options) *Relayer {
	t.Helper()
	o.Broker = b
	if o.Routes == nil {
		o.Routes = []Route{{Agent: recipient, Inbox: inbox}}
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkRecord: the record validates, has exactly the 11 members of the
// schema, names the relay, and carries nothing of the payload.
func checkRecord(t *testing.T, rec *arsia.RelayAuditRecord, env map[string]any, want arsia.ForwardingResult) {
	t.Helper()
	if rec == nil {
		t.Fatal("no relay audit record")
	}
	if err := rec.Validate(); err != nil {
		t.Fatalf("record does not validate: %v", err)
	}
	m := rec.Map()
	b, _ := json.Marshal(rec)
	var wire map[string]any
	_ = json.Unmarshal(b, &wire)
	if len(m) != 11 || len(wire) != 11 {
		t.Fatalf("record has %d/%d members, want 11: %s", len(m), len(wire), b)
	}
	if bytes.Contains(b, []byte("secret payload")) || bytes.Contains(b, []byte("payload\":{")) {
		t.Fatalf("the record carries the payload: %s", b)
	}
	if rec.ForwardingResult != want || rec.MessageID != env["id"] || rec.FromAgent != sender || rec.ToAgent != recipient || rec.BrokerAgentID != brokerID {
		t.Fatalf("record = %s, want result %s", b, want)
	}
}

func TestRelay(t *testing.T) {
	ok := newRecipient(t, answer(200, "application/arsia+json; v=1", reply))
	denied := newRecipient(t, answer(403, "application/arsia+json; v=1", `{"refused":1}`))
	for name, tc := range map[string]struct {
		broker arsia.BrokerEntry
		zone   string
		ttl    time.Duration
		via    []string
		hops   int
		routes []Route
		srv    *recipientSrv
		// want: the ARSIA code of the refusal ("" for forwarded), its
		// wire code and the recorded result ("" for no record).
		code, wire string
		result     arsia.ForwardingResult
		reason     string
		status     int
	}{
		"forwarded":          {broker: brokerEntry("PT", "PT"), zone: "PT", srv: ok, result: arsia.ForwardingSuccess, status: 200},
		"recipient refuses":  {broker: brokerEntry("PT", "PT"), zone: "PT", srv: denied, result: arsia.ForwardingSuccess, status: 403},
		"EU from the EU":     {broker: brokerEntry("DE", "EU"), zone: "EU", srv: ok, result: arsia.ForwardingSuccess, status: 200},
		"after one broker":   {broker: brokerEntry("PT", "PT"), zone: "PT", via: []string{"agent:acme.first"}, srv: ok, result: arsia.ForwardingSuccess, status: 200},
		"zone not served":    {broker: brokerEntry("PT", "PT"), zone: "DE", srv: ok, code: "zone_not_served", wire: "service_unavailable", result: arsia.ForwardingFailure},
		"EU not PT":          {broker: brokerEntry("PT", "PT"), zone: "EU", srv: ok, code: "zone_not_served", wire: "service_unavailable", result: arsia.ForwardingFailure},
		"no zone":            {broker: brokerEntry("PT", "PT"), srv: ok, code: "invalid_data_residency", wire: "invalid_request"},
		"expiry too soon":    {broker: brokerEntry("PT", "PT"), zone: "PT", ttl: 4 * time.Second, srv: ok, code: "expiry_too_soon", wire: "service_unavailable", result: arsia.ForwardingTimeout},
		"expiry just enough": {broker: brokerEntry("PT", "PT"), zone: "PT", ttl: 5*time.Second + 3*time.Millisecond, srv: ok, result: arsia.ForwardingSuccess, status: 200},
		"route zone":         {broker: brokerEntry("DE", "DE", "EU"), zone: "EU", routes: []Route{{Agent: recipient, Inbox: ok.URL, ResidencyZones: []string{"DE"}}}, srv: ok, code: "zone_not_served", wire: "service_unavailable", result: arsia.ForwardingFailure},
		"loop":               {broker: brokerEntry("PT", "PT"), zone: "PT", via: []string{"agent:acme.first", brokerID}, srv: ok, code: "service_unavailable", wire: "service_unavailable", result: arsia.ForwardingFailure, reason: ReasonLoop},
		"loop elsewhere":     {broker: brokerEntry("PT", "PT"), zone: "PT", via: []string{"agent:acme.a", "agent:acme.a"}, srv: ok, code: "service_unavailable", wire: "service_unavailable", result: arsia.ForwardingFailure, reason: ReasonLoop},
		"too many hops":      {broker: brokerEntry("PT", "PT"), zone: "PT", via: []string{"agent:acme.a", "agent:acme.b"}, hops: 2, srv: ok, code: "service_unavailable", wire: "service_unavailable", result: arsia.ForwardingFailure, reason: ReasonMaxHops},
		"malformed via":      {broker: brokerEntry("PT", "PT"), zone: "PT", via: []string{"agent:acme.a,,"}, srv: ok, code: "invalid_relay_via", wire: "invalid_request", result: arsia.ForwardingFailure},
		"not an ARSIA reply": {broker: brokerEntry("PT", "PT"), zone: "PT", srv: newRecipient(t, answer(502, "text/html", "<h1>bad gateway</h1>")), code: "service_unavailable", wire: "service_unavailable", result: arsia.ForwardingFailure, reason: ReasonReplyInvalid},
		"empty reply":        {broker: brokerEntry("PT", "PT"), zone: "PT", srv: newRecipient(t, answer(200, "application/arsia+json", "")), code: "service_unavailable", wire: "service_unavailable", result: arsia.ForwardingFailure, reason: ReasonReplyInvalid},
		"redirect": {broker: brokerEntry("PT", "PT"), zone: "PT", srv: newRecipient(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusTemporaryRedirect)
		}), code: "service_unavailable", wire: "service_unavailable", result: arsia.ForwardingFailure, reason: ReasonRedirected},
		"reply too large":     {broker: brokerEntry("PT", "PT"), zone: "PT", srv: newRecipient(t, answer(200, "application/arsia+json", strings.Repeat("x", 2048))), code: "service_unavailable", wire: "service_unavailable", result: arsia.ForwardingFailure, reason: ReasonReplyTooBig},
		"reply at the bound":  {broker: brokerEntry("PT", "PT"), zone: "PT", srv: newRecipient(t, answer(200, "application/arsia+json", strings.Repeat("x", 1024))), result: arsia.ForwardingSuccess, status: 200},
		"problem passed back": {broker: brokerEntry("PT", "PT"), zone: "PT", srv: newRecipient(t, answer(401, "application/problem+json", `{"status":401}`)), result: arsia.ForwardingSuccess, status: 401},
	} {
		t.Run(name, func(t *testing.T) {
			routes := tc.routes
			if routes == nil {
				routes = []Route{{Agent: recipient, Inbox: tc.srv.URL}}
			}
			r := newRelayer(t, tc.broker, "", Options{Routes: routes, MaxHops: tc.hops, MaxReplyBytes: 1024})
			ttl := tc.ttl
			if ttl == 0 {
				ttl = time.Minute
			}
			env, body := message(t, tc.zone, ttl)
			route, found := r.Route(recipient)
			if !found {
				t.Fatal("no route")
			}
			before := tc.srv.hits.Load()
			out := r.Relay(t.Context(), Request{Route: route, Body: body, Envelope: env, Via: tc.via, Received: t0, Now: t0.Add(3 * time.Millisecond)})
			forwarded := tc.srv.hits.Load() > before
			if tc.code == "" {
				if !out.Forwarded || out.Err != nil || out.Status != tc.status {
					t.Fatalf("outcome = %+v, want forwarded with %d", out, tc.status)
				}
				if got := *tc.srv.body.Load(); !bytes.Equal(got, body) {
					t.Fatalf("forwarded %q, want the bytes received %q", got, body)
				}
				if got, want := *tc.srv.via.Load(), FormatVia(append(slices.Clone(tc.via), brokerID)); got != want {
					t.Fatalf("%s = %q, want %q", HeaderVia, got, want)
				}
				if out.RetryAfter != 0 {
					t.Fatalf("retry after %s", out.RetryAfter)
				}
			} else {
				if out.Forwarded || out.Err == nil || out.Err.Code != tc.code || out.Err.WireCode() != tc.wire {
					t.Fatalf("outcome = %+v (%v), want refusal %s/%s", out, out.Err, tc.code, tc.wire)
				}
				if forwarded != (tc.reason == ReasonReplyInvalid || tc.reason == ReasonRedirected || tc.reason == ReasonReplyTooBig) {
					t.Fatalf("forwarded = %v for a refusal %s", forwarded, tc.reason)
				}
				if tc.reason != "" {
					d := out.Err.Details
					if d["relay_failed"] != true || d["reason"] != tc.reason || d["to_agent"] != recipient || d["broker_agent_id"] != brokerID ||
						d["forwarding_result"] != string(tc.result) || d["residency_zone"] != tc.zone || d["relay_id"] != out.Record.RelayID {
						t.Fatalf("details = %v", d)
					}
				}
				if tc.code == "zone_not_served" {
					d := out.Err.Details
					if d["data_residency_violation"] != true || d["required_zone"] != tc.zone || d["broker_jurisdiction"] != tc.broker.Jurisdiction || d["available_zones"] == nil {
						t.Fatalf("details = %v", d)
					}
					if !strings.Contains(out.Err.Description, "Rule 2") {
						t.Fatalf("description %q names no rule", out.Err.Description)
					}
				}
				if tc.code == "expiry_too_soon" && !strings.Contains(out.Err.Description, "Rule 9") {
					t.Fatalf("description %q names no rule", out.Err.Description)
				}
			}
			if tc.result == "" {
				if out.Record != nil {
					t.Fatalf("a record for an unrecordable relay: %+v", out.Record)
				}
				return
			}
			checkRecord(t, out.Record, env, tc.result)
			if out.Record.RelayLatencyMS != 3 || out.Record.RelayedAt != arsia.FormatTimestamp(t0.Add(3*time.Millisecond)) || out.Record.ResidencyZone != tc.zone {
				t.Fatalf("record = %+v", out.Record)
			}
		})
	}
}

// The reply is handed back byte for byte, with its media type and the
// recipient's Retry-After.
func TestRelayReplyPassedThrough(t *testing.T) {
	srv := newRecipient(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/arsia+json; v=1")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(503)
		_, _ = io.WriteString(w, reply+"\n\n")
	})
	r := newRelayer(t, brokerEntry("PT", "PT"), srv.URL, Options{})
	env, body := message(t, "PT", time.Minute)
	route, _ := r.Route(recipient)
	out := r.Relay(t.Context(), Request{Route: route, Body: body, Envelope: env, Received: t0, Now: t0})
	if !out.Forwarded || out.Status != 503 || string(out.Body) != reply+"\n\n" || out.ContentType != "application/arsia+json; v=1" || out.RetryAfter != 7*time.Second {
		t.Fatalf("outcome = %+v", out)
	}
	checkRecord(t, out.Record, env, arsia.ForwardingSuccess)
}

func TestRelayRecipientDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := newRelayer(t, brokerEntry("PT", "PT"), url, Options{})
	env, body := message(t, "PT", time.Minute)
	route, _ := r.Route(recipient)
	out := r.Relay(t.Context(), Request{Route: route, Body: body, Envelope: env, Received: t0, Now: t0})
	if out.Forwarded || out.Err == nil || out.Err.WireCode() != arsia.CodeServiceUnavailable || out.Err.HTTPStatus() != 503 {
		t.Fatalf("outcome = %+v", out)
	}
	d := out.Err.Details
	if d["relay_failed"] != true || d["reason"] != ReasonUnreachable || d["forwarding_result"] != "failure" || d["relay_id"] != out.Record.RelayID ||
		d["to_agent"] != recipient || d["broker_agent_id"] != brokerID || d["residency_zone"] != "PT" {
		t.Fatalf("details = %v", d)
	}
	if strings.Contains(out.Err.Description, "127.0.0.1") || strings.Contains(out.Err.Description, "refused") {
		t.Fatalf("the description tells the network: %q", out.Err.Description)
	}
	checkRecord(t, out.Record, env, arsia.ForwardingFailure)
}

func TestRelayRecipientSlow(t *testing.T) {
	release := make(chan struct{})
	srv := newRecipient(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	r := newRelayer(t, brokerEntry("PT", "PT"), srv.URL, Options{Timeout: 150 * time.Millisecond})
	env, body := message(t, "PT", time.Minute)
	route, _ := r.Route(recipient)
	start := time.Now()
	out := r.Relay(t.Context(), Request{Route: route, Body: body, Envelope: env, Received: t0, Now: t0})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %s", took)
	}
	if out.Forwarded || out.Err == nil || out.Err.Details["reason"] != ReasonTimeout || out.Err.Details["forwarding_result"] != "timeout" {
		t.Fatalf("outcome = %+v", out)
	}
	checkRecord(t, out.Record, env, arsia.ForwardingTimeout)
}

// The sender hanging up ends the attempt: a failure, not a timeout.
func TestRelayCancelled(t *testing.T) {
	srv := newRecipient(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	r := newRelayer(t, brokerEntry("PT", "PT"), srv.URL, Options{})
	env, body := message(t, "PT", time.Minute)
	route, _ := r.Route(recipient)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	out := r.Relay(ctx, Request{Route: route, Body: body, Envelope: env, Received: t0, Now: t0})
	if out.Forwarded || out.Err == nil || out.Err.Details["reason"] != ReasonCancelled {
		t.Fatalf("outcome = %+v", out)
	}
	checkRecord(t, out.Record, env, arsia.ForwardingFailure)
}

// A message whose id is no UUID v4 cannot have a relay record: it is not
// relayed.
func TestRelayUnrecordable(t *testing.T) {
	srv := newRecipient(t, answer(200, "application/arsia+json", reply))
	r := newRelayer(t, brokerEntry("PT", "PT"), srv.URL, Options{})
	env, body := message(t, "PT", time.Minute)
	env["id"] = "not-a-uuid"
	route, _ := r.Route(recipient)
	out := r.Relay(t.Context(), Request{Route: route, Body: body, Envelope: env, Received: t0, Now: t0})
	if out.Forwarded || out.Record != nil || out.Err == nil || out.Err.WireCode() != arsia.CodeInvalidRequest || out.Err.Details["field"] != "/id" || srv.hits.Load() != 0 {
		t.Fatalf("outcome = %+v", out)
	}
}

func TestNewRefuses(t *testing.T) {
	good := brokerEntry("PT", "PT")
	for name, o := range map[string]Options{
		"EU broker outside the EU": {Broker: brokerEntry("CH", "EU")},
		"no zones":                 {Broker: brokerEntry("PT")},
		"timeout":                  {Broker: good, Timeout: 11 * time.Second},
		"hops":                     {Broker: good, MaxHops: -1},
		"route to itself":          {Broker: good, Routes: []Route{{Agent: brokerID, Inbox: "https://x.example/"}}},
		"route twice":              {Broker: good, Routes: []Route{{Agent: recipient, Inbox: "https://x.example/"}, {Agent: recipient, Inbox: "https://y.example/"}}},
		"route zone":               {Broker: good, Routes: []Route{{Agent: recipient, Inbox: "https://x.example/", ResidencyZones: []string{"DE"}}}},
		"route agent":              {Broker: good, Routes: []Route{{Agent: "ledger", Inbox: "https://x.example/"}}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
	// An EU broker outside the EU/EEA is refused at New; CheckRelayPreconditions
	// refuses it too, should one get through.
	env, _ := message(t, "EU", time.Minute)
	err := arsia.CheckRelayPreconditions(env, brokerEntry("CH", "EU"), t0)
	var ae *arsia.Error
	if !errors.As(err, &ae) || ae.Code != "zone_not_served" {
		t.Fatalf("CheckRelayPreconditions = %v", err)
	}
}

func TestParseVia(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
		ok   bool
	}{
		{nil, nil, true},
		{[]string{""}, nil, true},
		{[]string{"  "}, nil, true},
		{[]string{"agent:a.b"}, []string{"agent:a.b"}, true},
		{[]string{"agent:a.b,agent:c.d"}, []string{"agent:a.b", "agent:c.d"}, true},
		{[]string{" agent:a.b ,\tagent:c.d "}, []string{"agent:a.b", "agent:c.d"}, true},
		{[]string{"agent:a.b", "agent:c.d"}, []string{"agent:a.b", "agent:c.d"}, true},
		{[]string{"agent:a.b", "", "agent:c.d"}, []string{"agent:a.b", "agent:c.d"}, true},
		{[]string{"agent:a.b, agent:a.b"}, []string{"agent:a.b", "agent:a.b"}, true},
		{[]string{","}, nil, false},
		{[]string{"agent:a.b,"}, nil, false},
		{[]string{"agent:a.b;x"}, nil, false},
		{[]string{"a.b"}, nil, false},
		{[]string{"agent:a"}, nil, false},
		{[]string{strings.Repeat("agent:a.b,", 32) + "agent:a.b"}, nil, false},
		{[]string{"agent:a." + strings.Repeat("b", 9000)}, nil, false},
	} {
		got, err := ParseVia(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("ParseVia(%q) = %q, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrVia) {
			t.Errorf("ParseVia(%q): %v is not ErrVia", tc.in, err)
		}
	}
}

func FuzzParseVia(f *testing.F) {
	for _, s := range []string{"", "agent:a.b", "agent:a.b, agent:c.d", ",", "agent:a.b,,", "\x00", "agent:a.b/x_y"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ids, err := ParseVia([]string{a, b})
		if err != nil {
			if ids != nil || !errors.Is(err, ErrVia) {
				t.Fatalf("ParseVia = %q, %v", ids, err)
			}
			return
		}
		if len(ids) > MaxViaEntries {
			t.Fatalf("%d entries", len(ids))
		}
		for _, id := range ids {
			if !arsia.ValidAgentID(id) {
				t.Fatalf("entry %q is not an agent id", id)
			}
		}
		// What FormatVia writes reads back the same.
		again, err := ParseVia([]string{FormatVia(ids)})
		if err != nil || !slices.Equal(again, ids) {
			t.Fatalf("round trip %q: %q, %v", ids, again, err)
		}
	})
}
