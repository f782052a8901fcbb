package arsia_test

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/schema"
)

// checkSchema validates v's JSON against an embedded schema.
func checkSchema(t *testing.T, v any, name string) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	errs, err := schema.Validate(doc, name)
	if err != nil || len(errs) > 0 {
		t.Errorf("%s: %v %v\n%s", name, errs, err, data)
	}
}

func minimalMetadata() arsia.AgentMetadata {
	return arsia.AgentMetadata{
		AgentID: "agent:acme.bot", Name: "Acme Bot", Version: "2.1.0",
		Inbox: "https://acme.example/arsia/inbox", JWKS: "https://acme.example/.well-known/arsia/jwks.json",
	}
}

func TestNewAgentMetadata(t *testing.T) {
	m, err := arsia.NewAgentMetadata(minimalMetadata())
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(m)
	want := `{"agent_id":"agent:acme.bot","capabilities_supported":[],"inbox":"https://acme.example/arsia/inbox","jwks":"https://acme.example/.well-known/arsia/jwks.json","max_message_bytes":1048576,"name":"Acme Bot","protocol_version":"1.0","request_timeout_ms":30000,"server_max":"1.0","server_min":"1.0","version":"2.1.0"}`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
	checkSchema(t, m, "arsia-discovery-response.schema.json")

	full := minimalMetadata()
	full.CapabilitiesSupported = []string{"quotes.get", "orders.create"}
	full.Features = &arsia.Features{AsyncResponses: true, Encryption: true}
	full.RateLimits = &arsia.RateLimits{RequestsPerMinute: 120, BurstSize: 20}
	full.ComplianceProfilesSupported = []string{"GDPR-STANDARD", "MIFID-II"}
	full.ServerMax, full.ProtocolVersion = "1.2", "1.2"
	m, err = arsia.NewAgentMetadata(full)
	if err != nil {
		t.Fatal(err)
	}
	checkSchema(t, m, "arsia-discovery-response.schema.json")
	doc := m.Map()
	if f := doc["features"].(map[string]any); f["batch_requests"] != false || len(f) != 3 {
		t.Errorf("features %v", f)
	}
	// The builder copies: later edits to the input do not leak in.
	full.CapabilitiesSupported[0] = "changed.later"
	if m.CapabilitiesSupported[0] != "quotes.get" {
		t.Error("builder kept the caller's slice")
	}

	empty := minimalMetadata()
	empty.ComplianceProfilesSupported = []string{}
	m, _ = arsia.NewAgentMetadata(empty)
	if v, ok := m.Map()["compliance_profiles_supported"]; !ok || len(v.([]any)) != 0 {
		t.Errorf("explicit empty profiles dropped: %v", v)
	}
}

func TestNewAgentMetadataRefuses(t *testing.T) {
	tests := map[string]func(*arsia.AgentMetadata){
		"bad agent id":         func(m *arsia.AgentMetadata) { m.AgentID = "acme.bot" },
		"no name":              func(m *arsia.AgentMetadata) { m.Name = "" },
		"no version":           func(m *arsia.AgentMetadata) { m.Version = "" },
		"relative inbox":       func(m *arsia.AgentMetadata) { m.Inbox = "/arsia/inbox" },
		"http inbox":           func(m *arsia.AgentMetadata) { m.Inbox = "http://acme.example/inbox" },
		"user info in jwks":    func(m *arsia.AgentMetadata) { m.JWKS = "https://u:p@acme.example/jwks.json" },
		"bad protocol version": func(m *arsia.AgentMetadata) { m.ProtocolVersion = "1" },
		"min above max":        func(m *arsia.AgentMetadata) { m.ServerMin, m.ServerMax, m.ProtocolVersion = "1.2", "1.1", "1.1" },
		"protocol outside":     func(m *arsia.AgentMetadata) { m.ProtocolVersion = "2.0" },
		"bad capability":       func(m *arsia.AgentMetadata) { m.CapabilitiesSupported = []string{"quotes"} },
		"duplicate capability": func(m *arsia.AgentMetadata) { m.CapabilitiesSupported = []string{"a.b", "a.b"} },
		"negative size":        func(m *arsia.AgentMetadata) { m.MaxMessageBytes = -1 },
		"negative timeout":     func(m *arsia.AgentMetadata) { m.RequestTimeoutMS = -1 },
		"negative rate":        func(m *arsia.AgentMetadata) { m.RateLimits = &arsia.RateLimits{BurstSize: -1} },
		"empty profile":        func(m *arsia.AgentMetadata) { m.ComplianceProfilesSupported = []string{""} },
		"duplicate profile":    func(m *arsia.AgentMetadata) { m.ComplianceProfilesSupported = []string{"DORA", "DORA"} },
	}
	for name, modify := range tests {
		m := minimalMetadata()
		modify(&m)
		if _, err := arsia.NewAgentMetadata(m); !errors.Is(err, arsia.ErrInvalidDiscovery) {
			t.Errorf("%s: %v", name, err)
		}
	}
	local := minimalMetadata()
	local.Inbox = "http://127.0.0.1:8080/inbox"
	if _, err := arsia.NewAgentMetadata(local); err != nil {
		t.Errorf("loopback http: %v", err)
	}
}

func TestJWKS(t *testing.T) {
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	xKey, _ := ecdh.X25519().GenerateKey(rand.Reader)
	pEncKey, _ := ecdh.P256().GenerateKey(rand.Reader)
	const agent = "agent:acme.bot"
	var keys []arsia.JWK
	for _, build := range []func() (arsia.JWK, error){
		func() (arsia.JWK, error) { return arsia.NewSigningJWK(agent+"#key1", edPub) },
		func() (arsia.JWK, error) { return arsia.NewSigningJWK(agent+"#key-es256", &ecKey.PublicKey) },
		func() (arsia.JWK, error) { return arsia.NewEncryptionJWK(agent+"#enc-x25519", xKey.PublicKey()) },
		func() (arsia.JWK, error) { return arsia.NewEncryptionJWK(agent+"#enc_p256", pEncKey.PublicKey()) },
	} {
		k, err := build()
		if err != nil {
			t.Fatal(err)
		}
		checkSchema(t, k.Map(), "arsia-jwk-entry.schema.json")
		keys = append(keys, k)
	}
	set, err := arsia.NewJWKS(keys...)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := set.Key(agent + "#key1"); k.Kty != "OKP" || k.Crv != "Ed25519" || k.Use != "sig" || k.Y != "" {
		t.Errorf("Ed25519 JWK %+v", k)
	}
	if k, _ := set.Key(agent + "#key-es256"); k.Kty != "EC" || k.Crv != "P-256" || k.Y == "" {
		t.Errorf("P-256 JWK %+v", k)
	}
	pub, err := keys[1].PublicKey()
	if err != nil || !ecKey.PublicKey.Equal(pub) {
		t.Errorf("P-256 round trip: %v", err)
	}
	pub, err = keys[0].PublicKey()
	if err != nil || !edPub.Equal(pub) {
		t.Errorf("Ed25519 round trip: %v", err)
	}
	if data, _ := json.Marshal(arsia.JWKS{}); string(data) != `{"keys":[]}` {
		t.Errorf("empty set %s", data)
	}

	refuse := map[string]func() error{
		"kid without label": func() error { _, err := arsia.NewSigningJWK(agent, edPub); return err },
		"kid bad label":     func() error { _, err := arsia.NewSigningJWK(agent+"#-k", edPub); return err },
		"kid bad agent":     func() error { _, err := arsia.NewSigningJWK("agent:acme#k", edPub); return err },
		"short Ed25519":     func() error { _, err := arsia.NewSigningJWK(agent+"#k", edPub[:31]); return err },
		"P-384": func() error {
			k, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
			_, err := arsia.NewSigningJWK(agent+"#k", &k.PublicKey)
			return err
		},
		"X25519 for signing": func() error { _, err := arsia.NewSigningJWK(agent+"#k", xKey.PublicKey()); return err },
		"Ed25519 for enc":    func() error { _, err := arsia.NewEncryptionJWK(agent+"#k", edPub); return err },
		"duplicate kid":      func() error { _, err := arsia.NewJWKS(keys[0], keys[0]); return err },
		"two agents": func() error {
			other, _ := arsia.NewSigningJWK("agent:evil.bot#key1", edPub)
			_, err := arsia.NewJWKS(keys[0], other)
			return err
		},
		"bad material": func() error {
			k := keys[0]
			k.X = "aaaa"
			_, err := arsia.NewJWKS(k)
			return err
		},
		"off-curve point": func() error {
			k := keys[1]
			k.Y = k.X
			_, err := k.PublicKey()
			return err
		},
	}
	for name, f := range refuse {
		if err := f(); !errors.Is(err, arsia.ErrInvalidJWK) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestJWKFromMap(t *testing.T) {
	good := map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": "agent:acme.bot#key1", "x": "abc_-", "use": "sig"}
	if _, err := arsia.JWKFromMap(good); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, good, "arsia-jwk-entry.schema.json")
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for name, m := range map[string]map[string]any{
		"private d":      with("d", "secret"),
		"unknown member": with("alg", "EdDSA"),
		"no x":           with("x", nil),
		"padded x":       with("x", "abc="),
		"number kid":     with("kid", 1),
		"bad use":        with("use", "both"),
		"OKP with y":     with("y", "abc"),
		"EC without y":   with("kty", "EC"),
		"X25519 sig":     with("crv", "X25519"),
	} {
		if _, err := arsia.JWKFromMap(m); !errors.Is(err, arsia.ErrInvalidJWK) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCapabilityListing(t *testing.T) {
	limit := 60
	descs := []arsia.CapabilityDescriptor{
		{Capability: "quotes.get", Description: "Fetch a quote", RiskLevel: 2},
		{Capability: "orders.create", Description: "Submit an order", RiskLevel: 6, RateLimit: &limit,
			Requires: []string{"quotes.get"}, HumanOversightRequired: true},
	}
	for _, d := range descs {
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		checkSchema(t, d, "arsia-capability-descriptor.schema.json")
	}
	l, err := arsia.NewCapabilityListing(descs, arsia.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 2 || l.Limit != 20 || l.Offset != 0 {
		t.Errorf("defaults %+v", l)
	}
	data, _ := json.Marshal(l)
	if !strings.HasPrefix(string(data), `{"actions":[{"capability":"quotes.get"`) || !strings.HasSuffix(string(data), `"total":2,"limit":20,"offset":0}`) {
		t.Errorf("JSON %s", data)
	}
	empty, _ := arsia.NewCapabilityListing[arsia.CapabilityDescriptor](nil, arsia.Page{})
	if data, _ := json.Marshal(empty); string(data) != `{"actions":[],"total":0,"limit":20,"offset":0}` {
		t.Errorf("empty %s", data)
	}
	checkSchema(t, empty, "arsia-action-discovery-response.schema.json")
	if _, err := arsia.NewCapabilityListing(descs[:1], arsia.Page{Total: 150, Limit: 10, Offset: 20}); err != nil {
		t.Errorf("mid-stream page: %v", err)
	}
	for name, page := range map[string]arsia.Page{
		"limit above max":    {Limit: 101},
		"negative limit":     {Limit: -1},
		"more than limit":    {Limit: 1},
		"negative offset":    {Offset: -1},
		"total below page":   {Total: 1},
		"total below offset": {Total: 5, Offset: 4},
	} {
		if _, err := arsia.NewCapabilityListing(descs, page); !errors.Is(err, arsia.ErrInvalidListing) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := descs[0]
	bad.RiskLevel = 11
	if _, err := arsia.NewCapabilityListing([]arsia.CapabilityDescriptor{bad}, arsia.Page{}); !errors.Is(err, arsia.ErrInvalidDiscovery) {
		t.Errorf("entry not validated: %v", err)
	}
	neg := -1
	for name, d := range map[string]arsia.CapabilityDescriptor{
		"wildcard":       {Capability: "quotes.*", Description: "x"},
		"no description": {Capability: "quotes.get"},
		"risk":           {Capability: "quotes.get", Description: "x", RiskLevel: -1},
		"rate":           {Capability: "quotes.get", Description: "x", RateLimit: &neg},
		"requires self":  {Capability: "quotes.get", Description: "x", Requires: []string{"quotes.get"}},
		"requires twice": {Capability: "quotes.get", Description: "x", Requires: []string{"a.b", "a.b"}},
		"requires wild":  {Capability: "quotes.get", Description: "x", Requires: []string{"a.*"}},
	} {
		if err := d.Validate(); !errors.Is(err, arsia.ErrInvalidDiscovery) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzJWKFromMap(f *testing.F) {
	f.Add("OKP", "Ed25519", "agent:acme.bot#key1", "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "", "sig")
	f.Add("EC", "P-256", "agent:acme.bot#k", "AAAA", "AAAA", "enc")
	f.Fuzz(func(t *testing.T, kty, crv, kid, x, y, use string) {
		m := map[string]any{"kty": kty, "crv": crv, "kid": kid, "x": x, "use": use}
		if y != "" {
			m["y"] = y
		}
		k, err := arsia.JWKFromMap(m)
		if err != nil {
			return
		}
		if _, err := k.PublicKey(); err == nil {
			if _, err := arsia.NewJWKS(k); err != nil {
				t.Fatalf("usable key refused by NewJWKS: %v", err)
			}
		}
	})
}
