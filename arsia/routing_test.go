package arsia_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/jcs"
)

var routeNow = time.Date(2026, 4, 14, 12, 0, 0, 0, time.UTC)

func brokerMap(id, jurisdiction, health string, zones ...string) map[string]any {
	z := make([]any, len(zones))
	for i, s := range zones {
		z[i] = s
	}
	return map[string]any{
		"agent_id": id, "inbox": "https://broker.example.org/inbox", "jurisdiction": jurisdiction,
		"residency_zones": z, "health": health, "last_health_check": "2026-04-14T12:00:00.000Z",
	}
}

func broker(id, jurisdiction string, health arsia.BrokerHealth, zones ...string) arsia.BrokerEntry {
	return arsia.BrokerEntry{AgentID: id, Inbox: "https://broker.example.org/inbox", Jurisdiction: jurisdiction,
		ResidencyZones: zones, Health: health, LastHealthCheck: "2026-04-14T12:00:00.000Z"}
}

func routeEnvelope(residency any) map[string]any {
	env := map[string]any{
		"v": "1.0", "id": "11111111-1111-4111-9111-111111111111", "ts": "2026-04-14T12:00:00.000Z",
		"from": "agent:acme.alpha", "to": "agent:acme.beta", "intent": "request",
		"expires_at": "2026-04-14T12:05:00.000Z",
		"payload":    map[string]any{"type": "arsiaprotocol.state/set", "args": map[string]any{"k": "v"}},
	}
	if residency != nil {
		env["compliance"] = map[string]any{"data_residency": residency}
	}
	return env
}

func errCode(err error) (code, wire string) {
	var ae *arsia.Error
	if errors.As(err, &ae) {
		return ae.Code, ae.WireCode()
	}
	return "", ""
}

func TestIsEUEEAMember(t *testing.T) {
	members := strings.Fields("AT BE BG HR CY CZ DK EE FI FR DE GR HU IE IT LV LT LU MT NL PL PT RO SK SI ES SE IS LI NO")
	if len(members) != 30 {
		t.Fatalf("test list has %d members", len(members))
	}
	for _, c := range members {
		if !arsia.IsEUEEAMember(c) {
			t.Errorf("%s: not a member", c)
		}
	}
	for _, c := range []string{"CH", "GB", "US", "EU", "EL", "pt", "Pt", "", "PRT", " PT"} {
		if arsia.IsEUEEAMember(c) {
			t.Errorf("%q: member", c)
		}
	}
}

func TestValidateBrokerEntry(t *testing.T) {
	with := func(m map[string]any, k string, v any) map[string]any {
		m = maps.Clone(m)
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	ok := brokerMap("agent:compliance.broker", "PT", "healthy", "EU")
	tests := []struct {
		name     string
		entry    any
		code     string // "" means valid
		contains string
	}{
		{"EU broker in Portugal", ok, "", ""},
		{"EU broker in Iceland", brokerMap("agent:a.b", "IS", "healthy", "EU"), "", ""},
		{"US broker in US", brokerMap("agent:a.b", "US", "degraded", "US"), "", ""},
		{"country and EU", brokerMap("agent:a.b", "PT", "unhealthy", "PT", "EU"), "", ""},
		{"with capacity", with(ok, "capacity", map[string]any{"requests_per_minute": 600, "current_load_pct": 40}), "", ""},
		{"fractional health check", with(ok, "last_health_check", "2026-04-14T12:00:00.123456Z"), "", ""},
		{"EU broker in Switzerland", brokerMap("agent:a.b", "CH", "healthy", "EU"), "eu_zone_non_eea_jurisdiction", "EU/EEA"},
		{"EU broker in US", brokerMap("agent:a.b", "US", "healthy", "US", "EU"), "eu_zone_non_eea_jurisdiction", "Rule 2"},
		{"country zone elsewhere", brokerMap("agent:a.b", "PT", "healthy", "DE"), "zone_jurisdiction_mismatch", "'DE'"},
		{"duplicate zone", brokerMap("agent:a.b", "PT", "healthy", "EU", "EU"), "invalid_broker_entry", "twice"},
		{"missing jurisdiction", with(ok, "jurisdiction", nil), "invalid_broker_entry", "jurisdiction"},
		{"lower-case jurisdiction", with(ok, "jurisdiction", "pt"), "invalid_broker_entry", "jurisdiction"},
		{"no zones", with(ok, "residency_zones", []any{}), "invalid_broker_entry", "residency_zones"},
		{"bad health", with(ok, "health", "fine"), "invalid_broker_entry", "health"},
		{"unknown member", with(ok, "region", "eu-west"), "invalid_broker_entry", "region"},
		{"bad agent id", with(ok, "agent_id", "broker"), "invalid_broker_entry", "agent_id"},
		{"bad timestamp", with(ok, "last_health_check", "yesterday"), "invalid_broker_entry", "last_health_check"},
		{"capacity over 100%", with(ok, "capacity", map[string]any{"current_load_pct": 101}), "invalid_broker_entry", "capacity"},
		{"ftp inbox", with(ok, "inbox", "ftp://broker.example.org/inbox"), "invalid_broker_inbox", "http"},
		{"relative inbox", with(ok, "inbox", "/inbox"), "invalid_broker_inbox", "inbox"},
		{"inbox with credentials", with(ok, "inbox", "https://u:p@broker.example.org/inbox"), "invalid_broker_inbox", "credentials"},
		{"inbox with fragment", with(ok, "inbox", "https://broker.example.org/inbox#x"), "invalid_broker_inbox", "fragment"},
		{"inbox without host", with(ok, "inbox", "https:///inbox"), "invalid_broker_inbox", "host"},
		{"not an object", "agent:a.b", "invalid_broker_entry", "object"},
		{"null", nil, "invalid_broker_entry", ""},
		{"array", []any{ok}, "invalid_broker_entry", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := arsia.ValidateBrokerEntry(tt.entry)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, arsia.ErrInvalidBrokerEntry) {
				t.Fatalf("got %v, want ErrInvalidBrokerEntry", err)
			}
			if code, _ := errCode(err); code != tt.code {
				t.Errorf("code %q, want %q (%v)", code, tt.code, err)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("%q does not contain %q", err, tt.contains)
			}
		})
	}
}

func TestParseBrokerEntryRoundTrip(t *testing.T) {
	m := brokerMap("agent:a.b", "PT", "healthy", "PT", "EU")
	m["capacity"] = map[string]any{"requests_per_minute": 600}
	e, err := arsia.ParseBrokerEntry(m)
	if err != nil {
		t.Fatal(err)
	}
	if e.Capacity == nil || *e.Capacity.RequestsPerMinute != 600 || e.Capacity.CurrentLoadPct != nil {
		t.Errorf("capacity %+v", e.Capacity)
	}
	if err := e.Validate(); err != nil {
		t.Error(err)
	}
	got, _ := json.Marshal(e.Map())
	want, _ := json.Marshal(m)
	if !bytes.Equal(got, want) {
		t.Errorf("Map\n got %s\nwant %s", got, want)
	}
	// The struct's JSON tags give the same document.
	viaTags, _ := json.Marshal(e)
	a, _ := jcs.Canonicalize(viaTags)
	b, _ := jcs.Canonicalize(want)
	if !bytes.Equal(a, b) {
		t.Errorf("json tags\n got %s\nwant %s", a, b)
	}
	if _, err := arsia.ParseBrokerEntry(brokerMap("agent:a.b", "CH", "healthy", "EU")); err == nil {
		t.Error("invalid entry parsed")
	}
}

func TestSelectBrokerByPriority(t *testing.T) {
	h, d, u := arsia.BrokerHealthy, arsia.BrokerDegraded, arsia.BrokerUnhealthy
	tests := []struct {
		name    string
		zone    string
		brokers []arsia.BrokerEntry
		want    string
	}{
		{"first healthy", "EU", []arsia.BrokerEntry{broker("agent:b.one", "PT", h, "EU"), broker("agent:b.two", "DE", h, "EU")}, "agent:b.one"},
		{"skips unhealthy", "EU", []arsia.BrokerEntry{broker("agent:b.one", "PT", u, "EU"), broker("agent:b.two", "DE", h, "EU")}, "agent:b.two"},
		{"healthy before degraded", "EU", []arsia.BrokerEntry{broker("agent:b.one", "PT", d, "EU"), broker("agent:b.two", "DE", h, "EU")}, "agent:b.two"},
		{"degraded only", "EU", []arsia.BrokerEntry{broker("agent:b.one", "PT", u, "EU"), broker("agent:b.two", "DE", d, "EU")}, "agent:b.two"},
		{"other zone", "EU", []arsia.BrokerEntry{broker("agent:b.one", "US", h, "US")}, ""},
		{"EU broker outside the EEA is never chosen", "EU", []arsia.BrokerEntry{broker("agent:b.one", "CH", h, "EU"), broker("agent:b.two", "NO", h, "EU")}, "agent:b.two"},
		{"unknown health", "EU", []arsia.BrokerEntry{broker("agent:b.one", "PT", "fine", "EU")}, ""},
		{"zone must match exactly", "PT", []arsia.BrokerEntry{broker("agent:b.one", "PT", h, "EU")}, ""},
		{"no zone", "", []arsia.BrokerEntry{broker("agent:b.one", "PT", h, "EU")}, ""},
		{"no brokers", "EU", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ok := arsia.SelectBrokerByPriority(tt.zone, tt.brokers)
			if ok != (tt.want != "") || b.AgentID != tt.want {
				t.Errorf("got %q (%v), want %q", b.AgentID, ok, tt.want)
			}
		})
	}
}

func TestSelectBrokerRandom(t *testing.T) {
	pool := []arsia.BrokerEntry{
		broker("agent:b.degraded", "PT", arsia.BrokerDegraded, "EU"),
		broker("agent:b.one", "DE", arsia.BrokerHealthy, "EU"),
		broker("agent:b.two", "FR", arsia.BrokerHealthy, "EU"),
		broker("agent:b.three", "NL", arsia.BrokerHealthy, "EU"),
		broker("agent:b.down", "NL", arsia.BrokerUnhealthy, "EU"),
	}
	seen := map[string]int{}
	for range 300 {
		b, ok, err := arsia.SelectBrokerRandom("EU", pool, nil)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		seen[b.AgentID]++
	}
	if len(seen) != 3 || seen["agent:b.one"] == 0 || seen["agent:b.two"] == 0 || seen["agent:b.three"] == 0 {
		t.Errorf("selection not spread over the healthy pool: %v", seen)
	}
	// An injected reader makes the choice reproducible.
	b, _, err := arsia.SelectBrokerRandom("EU", pool, bytes.NewReader([]byte{2}))
	if err != nil || b.AgentID != "agent:b.three" {
		t.Errorf("reader byte 2: %q, %v", b.AgentID, err)
	}
	b, ok, err := arsia.SelectBrokerRandom("EU", pool[:1], nil)
	if err != nil || !ok || b.AgentID != "agent:b.degraded" {
		t.Errorf("degraded fallback: %q %v %v", b.AgentID, ok, err)
	}
	if _, ok, err := arsia.SelectBrokerRandom("US", pool, nil); ok || err != nil {
		t.Errorf("no eligible broker: %v %v", ok, err)
	}
	if _, ok, err := arsia.SelectBrokerRandom("EU", pool, iotest.ErrReader(errors.New("no entropy"))); ok || err == nil {
		t.Errorf("failing reader: %v %v", ok, err)
	}
}

func TestDataResidencyOf(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]any
		want string
		err  bool
	}{
		{map[string]any{}, "", false},
		{map[string]any{"compliance": nil}, "", false},
		{map[string]any{"compliance": map[string]any{}}, "", false},
		{map[string]any{"compliance": map[string]any{"data_residency": nil}}, "", false},
		{map[string]any{"compliance": map[string]any{"data_residency": ""}}, "", false},
		{map[string]any{"compliance": map[string]any{"data_residency": "EU"}}, "EU", false},
		{map[string]any{"compliance": "EU"}, "", true},
		{map[string]any{"compliance": map[string]any{"data_residency": []any{"EU"}}}, "", true},
	} {
		got, err := arsia.DataResidencyOf(tt.env)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("%v: got %q, %v", tt.env, got, err)
		}
		if err != nil {
			if code, wire := errCode(err); code != "invalid_data_residency" || wire != arsia.CodeInvalidRequest {
				t.Errorf("code %s/%s", code, wire)
			}
		}
	}
}

func TestSelectTopology(t *testing.T) {
	route, err := arsia.SelectTopology("", nil)
	if err != nil || route.Topology != arsia.TopologyDirect || route.Broker != nil || route.DataResidency != "" {
		t.Errorf("direct: %+v %v", route, err)
	}
	de := broker("agent:arsialabs.broker-de", "DE", arsia.BrokerHealthy, "EU")
	route, err = arsia.SelectTopology("EU", []arsia.BrokerEntry{de})
	if err != nil || route.Topology != arsia.TopologyBrokered || route.Broker == nil || route.Broker.AgentID != de.AgentID || route.DataResidency != "EU" {
		t.Errorf("brokered: %+v %v", route, err)
	}

	brokers := []arsia.BrokerEntry{
		broker("agent:us.broker", "US", arsia.BrokerHealthy, "US"),
		broker("agent:bad.broker", "DE", arsia.BrokerUnhealthy, "EU", "DE"),
		broker("agent:pt.broker", "PT", arsia.BrokerDegraded, "PT"),
		broker("agent:ch.broker", "CH", arsia.BrokerHealthy, "EU", "CH"), // invalid: not EEA
		broker("agent:us2.broker", "US", arsia.BrokerHealthy, "US"),
	}
	route, err = arsia.SelectTopology("EU", brokers)
	if !errors.Is(err, arsia.ErrZoneNotServed) || route.Topology != "" || route.DataResidency != "EU" || route.Broker != nil {
		t.Fatalf("no broker: %+v %v", route, err)
	}
	var ae *arsia.Error
	if !errors.As(err, &ae) {
		t.Fatal(err)
	}
	obj := ae.Object()
	want := `{"code":"service_unavailable","description":"No broker is available for the required data residency zone.","details":{"available_zones":["US","PT"],"data_residency_violation":true,"required_zone":"EU"}}`
	if got, _ := json.Marshal(obj); string(got) != want {
		t.Errorf("error object\n got %s\nwant %s", got, want)
	}
	if ae.HTTPStatus() != 503 {
		t.Errorf("HTTP status %d", ae.HTTPStatus())
	}
	if err := arsia.CheckErrorDetails(ae.WireCode(), ae.Details); err != nil {
		t.Error(err)
	}
	_, err = arsia.SelectTopology("EU", nil)
	if !errors.As(err, &ae) || !reflect.DeepEqual(ae.Details["available_zones"], []any{}) {
		t.Errorf("no brokers: available_zones must be an empty list, got %#v", ae.Details["available_zones"])
	}
}

func TestCheckRelayPreconditions(t *testing.T) {
	pt := broker("agent:compliance.broker", "PT", arsia.BrokerHealthy, "EU")
	withExpiry := func(exp any) map[string]any {
		env := routeEnvelope("EU")
		if exp == nil {
			delete(env, "expires_at")
		} else {
			env["expires_at"] = exp
		}
		return env
	}
	badInbox := pt
	badInbox.Inbox = "ftp://x"
	tests := []struct {
		name   string
		env    map[string]any
		broker arsia.BrokerEntry
		now    time.Time
		code   string // "" means allowed
		rule   string
	}{
		{"valid EU relay", routeEnvelope("EU"), pt, routeNow, "", ""},
		{"no expires_at", withExpiry(nil), pt, routeNow, "", ""},
		{"exactly the margin", withExpiry("2026-04-14T12:00:05.000Z"), pt, routeNow, "", ""},
		{"broker does not list the zone", routeEnvelope("EU"), broker("agent:compliance.broker", "US", arsia.BrokerHealthy, "US"), routeNow, "zone_not_served", "Rule 2"},
		{"EU zone, broker outside the EEA", routeEnvelope("EU"), broker("agent:compliance.broker", "CH", arsia.BrokerHealthy, "EU"), routeNow, "zone_not_served", "Rule 2"},
		{"invalid broker entry", routeEnvelope("EU"), badInbox, routeNow, "zone_not_served", "Rule 2"},
		{"no residency", routeEnvelope(nil), pt, routeNow, "invalid_data_residency", "Rule 2"},
		{"unreadable residency", routeEnvelope(7), pt, routeNow, "invalid_data_residency", ""},
		{"expires within the margin", withExpiry("2026-04-14T12:00:02.000Z"), pt, routeNow, "expiry_too_soon", "Rule 9"},
		{"just under the margin", withExpiry("2026-04-14T12:00:04.999Z"), pt, routeNow, "expiry_too_soon", "Rule 9"},
		{"already expired", withExpiry("2026-04-14T11:00:00.000Z"), pt, routeNow, "expiry_too_soon", "Rule 9"},
		{"malformed expires_at", withExpiry("soon"), pt, routeNow, "invalid_expires_at", "Rule 9"},
		{"non-string expires_at", withExpiry(5), pt, routeNow, "invalid_expires_at", "Rule 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := arsia.CheckRelayPreconditions(tt.env, tt.broker, tt.now)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("got %v, want allowed", err)
				}
				return
			}
			if !errors.Is(err, arsia.ErrRelayRefused) {
				t.Fatalf("got %v, want ErrRelayRefused", err)
			}
			if code, _ := errCode(err); code != tt.code {
				t.Errorf("code %q, want %q (%v)", code, tt.code, err)
			}
			if !strings.Contains(err.Error(), tt.rule) {
				t.Errorf("%q does not name %q", err, tt.rule)
			}
		})
	}
	err := arsia.CheckRelayPreconditions(routeEnvelope("EU"), broker("agent:x.y", "US", arsia.BrokerHealthy, "US"), routeNow)
	var ae *arsia.Error
	if !errors.As(err, &ae) || ae.WireCode() != arsia.CodeServiceUnavailable ||
		!reflect.DeepEqual(ae.Details, map[string]any{"data_residency_violation": true, "required_zone": "EU", "broker_jurisdiction": "US"}) {
		t.Errorf("Rule 2 error: %#v", err)
	}
	if err := arsia.CheckRelayPreconditions(routeEnvelope("EU"), pt, time.Time{}); !errors.Is(err, arsia.ErrNoClock) {
		t.Errorf("zero now: %v", err)
	}
}

func TestNewRelayAuditRecord(t *testing.T) {
	env := routeEnvelope("EU")
	in := arsia.RelayAuditInput{
		BrokerAgentID:    "agent:arsialabs.broker-de",
		RelayedAt:        routeNow.Add(1500 * time.Microsecond),
		RelayLatency:     47*time.Millisecond + 900*time.Microsecond,
		ForwardingResult: arsia.ForwardingSuccess,
		Rand:             bytes.NewReader(make([]byte, 16)),
	}
	rec, err := arsia.NewRelayAuditRecord(env, in)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := compliance.PayloadHash(env)
	want := arsia.RelayAuditRecord{
		AuditType: "broker_relay", RelayID: "00000000-0000-4000-8000-000000000000",
		MessageID: "11111111-1111-4111-9111-111111111111", FromAgent: "agent:acme.alpha", ToAgent: "agent:acme.beta",
		BrokerAgentID: "agent:arsialabs.broker-de", ResidencyZone: "EU", RelayedAt: "2026-04-14T12:00:00.001Z",
		PayloadHash: hash, RelayLatencyMS: 47, ForwardingResult: "success",
	}
	if *rec != want {
		t.Errorf("record\n got %+v\nwant %+v", *rec, want)
	}
	data, _ := json.Marshal(rec)
	var viaTags map[string]any
	_ = json.Unmarshal(data, &viaTags)
	if len(viaTags) != 11 || len(rec.Map()) != 11 {
		t.Errorf("record has %d/%d members, want 11", len(viaTags), len(rec.Map()))
	}
	for _, k := range []string{"record_id", "broker_id", "payload"} {
		if _, ok := viaTags[k]; ok {
			t.Errorf("member %s present", k)
		}
	}
	for _, r := range []arsia.ForwardingResult{arsia.ForwardingFailure, arsia.ForwardingTimeout} {
		in := in
		in.ForwardingResult, in.Rand, in.PayloadHash = r, nil, strings.Repeat("a", 64)
		rec, err := arsia.NewRelayAuditRecord(env, in)
		if err != nil || rec.ForwardingResult != r || rec.PayloadHash != strings.Repeat("a", 64) || !arsia.ValidMessageID(rec.RelayID) {
			t.Errorf("%s: %+v %v", r, rec, err)
		}
	}

	enc := maps.Clone(env)
	enc["payload"] = "header.key.iv.ciphertext.tag"
	enc["security"] = map[string]any{"encrypted": true}
	if rec, err := arsia.NewRelayAuditRecord(enc, arsia.RelayAuditInput{BrokerAgentID: in.BrokerAgentID, RelayedAt: routeNow,
		ForwardingResult: arsia.ForwardingSuccess}); err != nil || len(rec.PayloadHash) != 64 {
		t.Errorf("encrypted payload: %+v %v", rec, err)
	}

	bad := map[string]func(in *arsia.RelayAuditInput, env map[string]any){
		"off-enum result":    func(in *arsia.RelayAuditInput, _ map[string]any) { in.ForwardingResult = "forwarded" },
		"no result":          func(in *arsia.RelayAuditInput, _ map[string]any) { in.ForwardingResult = "" },
		"negative latency":   func(in *arsia.RelayAuditInput, _ map[string]any) { in.RelayLatency = -time.Millisecond },
		"no relay time":      func(in *arsia.RelayAuditInput, _ map[string]any) { in.RelayedAt = time.Time{} },
		"bad broker id":      func(in *arsia.RelayAuditInput, _ map[string]any) { in.BrokerAgentID = "broker" },
		"bad payload hash":   func(in *arsia.RelayAuditInput, _ map[string]any) { in.PayloadHash = "sha256:abc" },
		"no residency":       func(_ *arsia.RelayAuditInput, env map[string]any) { delete(env, "compliance") },
		"bad message id":     func(_ *arsia.RelayAuditInput, env map[string]any) { env["id"] = "not-a-uuid" },
		"no sender":          func(_ *arsia.RelayAuditInput, env map[string]any) { delete(env, "from") },
		"no payload":         func(_ *arsia.RelayAuditInput, env map[string]any) { delete(env, "payload") },
		"failing randomness": func(in *arsia.RelayAuditInput, _ map[string]any) { in.Rand = iotest.ErrReader(errors.New("x")) },
	}
	for name, mutate := range bad {
		in, env := in, routeEnvelope("EU")
		in.Rand = nil
		mutate(&in, env)
		if rec, err := arsia.NewRelayAuditRecord(env, in); !errors.Is(err, arsia.ErrInvalidRelayAudit) || rec != nil {
			t.Errorf("%s: %+v, %v", name, rec, err)
		}
	}
}

func TestDeliveryTransitions(t *testing.T) {
	allowed := map[string]bool{
		"created>signed": true, "signed>dispatched": true,
		"dispatched>delivered": true, "dispatched>broker_relayed": true, "dispatched>dispatch_failed": true,
		"dispatched>delivery_failed": true, "dispatched>expired": true,
		"broker_relayed>delivered": true, "broker_relayed>dispatch_failed": true, "broker_relayed>expired": true,
		"delivered>responded":        true,
		"dispatch_failed>dispatched": true, "delivery_failed>dispatched": true,
	}
	states := arsia.DeliveryStates()
	if len(states) != 9 {
		t.Fatalf("%d states", len(states))
	}
	for _, from := range states {
		if !from.Valid() {
			t.Errorf("%s not valid", from)
		}
		for _, to := range states {
			want := allowed[string(from)+">"+string(to)]
			if got := arsia.IsValidDeliveryTransition(from, to); got != want {
				t.Errorf("%s -> %s: %v, want %v", from, to, got, want)
			}
		}
		terminal := from == arsia.DeliveryResponded || from == arsia.DeliveryExpired
		if arsia.IsTerminalDeliveryState(from) != terminal {
			t.Errorf("%s terminal: %v", from, !terminal)
		}
	}
	for _, s := range []arsia.DeliveryState{"", "CREATED", "sent"} {
		if s.Valid() || arsia.IsTerminalDeliveryState(s) || arsia.IsValidDeliveryTransition(s, arsia.DeliverySigned) ||
			arsia.IsValidDeliveryTransition(arsia.DeliveryCreated, s) {
			t.Errorf("unknown state %q accepted", s)
		}
	}
}

func TestParseRateLimitHeaders(t *testing.T) {
	i := func(n int64) *int64 { return &n }
	tests := []struct {
		name string
		h    http.Header
		want arsia.RateLimit
	}{
		{"all four", http.Header{"X-Ratelimit-Limit": {"1000"}, "X-Ratelimit-Remaining": {"999"},
			"X-Ratelimit-Reset": {"1777777777"}, "Retry-After": {"30"}},
			arsia.RateLimit{Limit: i(1000), Remaining: i(999), ResetAt: i(1777777777), RetryAfterSeconds: i(30)}},
		{"non-canonical keys", http.Header{"x-ratelimit-limit": {"42"}, "RETRY-AFTER": {"0"}},
			arsia.RateLimit{Limit: i(42), RetryAfterSeconds: i(0)}},
		{"spec spelling as a raw key", http.Header{"X-RateLimit-Remaining": {"7"}}, arsia.RateLimit{Remaining: i(7)}},
		{"blanks", http.Header{"Retry-After": {" 30 "}}, arsia.RateLimit{RetryAfterSeconds: i(30)}},
		{"first value wins", http.Header{"Retry-After": {"5", "9"}}, arsia.RateLimit{RetryAfterSeconds: i(5)}},
		{"case variants pick the smallest key", http.Header{"retry-after": {"5"}, "RETRY-AFTER": {"9"}, "Retry-after": {"7"}},
			arsia.RateLimit{RetryAfterSeconds: i(9)}},
		{"non-numeric", http.Header{"Retry-After": {"soon"}}, arsia.RateLimit{}},
		{"HTTP date", http.Header{"Retry-After": {"Wed, 21 Oct 2026 07:28:00 GMT"}}, arsia.RateLimit{}},
		{"negative", http.Header{"X-Ratelimit-Limit": {"-1"}}, arsia.RateLimit{}},
		{"signed", http.Header{"X-Ratelimit-Limit": {"+1"}}, arsia.RateLimit{}},
		{"fraction", http.Header{"Retry-After": {"1.5"}}, arsia.RateLimit{}},
		{"overflow", http.Header{"X-Ratelimit-Reset": {"99999999999999999999"}}, arsia.RateLimit{}},
		{"empty", http.Header{"X-Ratelimit-Limit": {""}, "Retry-After": {}}, arsia.RateLimit{}},
		{"nil header", nil, arsia.RateLimit{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := arsia.ParseRateLimitHeaders(tt.h); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %s, want %s", fmtRateLimit(got), fmtRateLimit(tt.want))
			}
		})
	}
}

func fmtRateLimit(r arsia.RateLimit) string {
	v := func(p *int64) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("{limit %s remaining %s reset %s retry %s}", v(r.Limit), v(r.Remaining), v(r.ResetAt), v(r.RetryAfterSeconds))
}

func TestResolvePriority(t *testing.T) {
	p := func(n int) *int { return &n }
	withContext := func(ctx any) map[string]any {
		env := routeEnvelope(nil)
		env["context"] = ctx
		return env
	}
	tests := []struct {
		name     string
		env      map[string]any
		override *int
		want     int
		err      bool
	}{
		{"context priority", withContext(map[string]any{"priority": 7}), nil, 7, false},
		{"json number", withContext(map[string]any{"priority": json.Number("3")}), nil, 3, false},
		{"default", routeEnvelope(nil), nil, 5, false},
		{"context without priority", withContext(map[string]any{"trace_id": "x"}), nil, 5, false},
		{"null context", withContext(nil), nil, 5, false},
		{"override wins", withContext(map[string]any{"priority": 3}), p(9), 9, false},
		{"override zero", withContext(map[string]any{"priority": 3}), p(0), 0, false},
		{"override out of range", routeEnvelope(nil), p(11), 0, true},
		{"negative override", routeEnvelope(nil), p(-1), 0, true},
		{"context out of range", withContext(map[string]any{"priority": 11}), nil, 0, true},
		{"context not an integer", withContext(map[string]any{"priority": "high"}), nil, 0, true},
		{"context fraction", withContext(map[string]any{"priority": 2.5}), nil, 0, true},
		{"context not an object", withContext("urgent"), nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := arsia.ResolvePriority(tt.env, tt.override)
			if tt.err {
				if !errors.Is(err, arsia.ErrInvalidPriority) {
					t.Errorf("got %d, %v; want ErrInvalidPriority", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func FuzzValidateBrokerEntry(f *testing.F) {
	seed, _ := json.Marshal(brokerMap("agent:a.b", "PT", "healthy", "EU"))
	for _, s := range []string{string(seed), `{}`, `[]`, `null`, `{"agent_id":1}`,
		`{"agent_id":"agent:a.b","inbox":"https://%zz","jurisdiction":"PT","residency_zones":["EU"],"health":"healthy","last_health_check":"2026-04-14T12:00:00Z"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		v, err := jcs.Decode([]byte(doc))
		if err != nil {
			return
		}
		err = arsia.ValidateBrokerEntry(v)
		e, perr := arsia.ParseBrokerEntry(v)
		if (err == nil) != (perr == nil) {
			t.Fatalf("Validate %v, Parse %v", err, perr)
		}
		if err != nil {
			if !errors.Is(err, arsia.ErrInvalidBrokerEntry) {
				t.Fatalf("error %v does not wrap ErrInvalidBrokerEntry", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("parsed entry no longer valid: %v", err)
		}
		if slices.Contains(e.ResidencyZones, arsia.ZoneEU) && !arsia.IsEUEEAMember(e.Jurisdiction) {
			t.Fatalf("EU broker outside the EEA accepted: %+v", e)
		}
	})
}

func ExampleSelectTopology() {
	env := map[string]any{"compliance": map[string]any{"data_residency": "EU"}}
	zone, _ := arsia.DataResidencyOf(env)
	brokers := []arsia.BrokerEntry{{
		AgentID: "agent:arsialabs.broker-de", Inbox: "https://broker-de.example/inbox", Jurisdiction: "DE",
		ResidencyZones: []string{"EU"}, Health: arsia.BrokerHealthy, LastHealthCheck: "2026-04-14T12:00:00.000Z",
	}}
	route, err := arsia.SelectTopology(zone, brokers)
	fmt.Println(route.Topology, route.Broker.AgentID, err)

	_, err = arsia.SelectTopology("US", brokers)
	var ae *arsia.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.WireCode(), ae.Details["required_zone"], ae.Details["available_zones"])
	}
	// Output:
	// brokered agent:arsialabs.broker-de <nil>
	// service_unavailable US [EU]
}

func ExampleCheckRelayPreconditions() {
	env := map[string]any{
		"id": "11111111-1111-4111-9111-111111111111", "from": "agent:acme.alpha", "to": "agent:acme.beta",
		"expires_at": "2026-04-14T12:00:02.000Z",
		"payload":    map[string]any{"type": "arsiaprotocol.state/set"},
		"compliance": map[string]any{"data_residency": "EU"},
	}
	b := arsia.BrokerEntry{AgentID: "agent:compliance.broker", Inbox: "https://broker.example.org/inbox",
		Jurisdiction: "PT", ResidencyZones: []string{"EU"}, Health: arsia.BrokerHealthy, LastHealthCheck: "2026-04-14T12:00:00.000Z"}
	now := time.Date(2026, 4, 14, 12, 0, 0, 0, time.UTC)
	fmt.Println(arsia.CheckRelayPreconditions(env, b, now))
	// Output:
	// arsia: expiry_too_soon: Rule 9: the message expires at 2026-04-14T12:00:02.000Z, 2s after now; relaying needs at least 5s
}
