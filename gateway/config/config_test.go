package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Check(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if !filepath.IsAbs(c.Data) || c.Store != filepath.Join(c.Data, "custos.db") ||
		c.AuditLog != "" || c.PublicURL != "http://127.0.0.1:8080" {
		t.Fatalf("derived settings: %+v", c)
	}
}

func TestPrecedence(t *testing.T) {
	c := Default()
	yml := `
listen: 127.0.0.1:9000
agent: agent:acme.gateway
senders:
  - agent: agent:acme.advisor
    capabilities: ["billing.*"]
handlers:
  billing.invoice.create:
    type: http
    url: https://billing.internal/invoices
    timeout: 5s
  demo.echo:
    type: echo
oversight:
  ttl: 15m
  allow_session: true
`
	if err := c.Decode(strings.NewReader(yml), "custos.yaml"); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CUSTOS_LISTEN": "127.0.0.1:9100", "CUSTOS_LOG_FORMAT": "json", "CUSTOS_UNRELATED": "x"}
	if err := c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("listen", "127.0.0.1:9200"); err != nil { // a flag
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9200" || c.LogFormat != "json" || c.Agent != "agent:acme.gateway" ||
		c.Handlers["billing.invoice.create"].Timeout != 5*time.Second || c.Oversight.TTL != 15*time.Minute ||
		len(c.Senders) != 1 || c.Senders[0].Capabilities[0] != "billing.*" {
		t.Fatalf("merged config: %+v", c)
	}
}

func TestRefused(t *testing.T) {
	for name, tc := range map[string]struct{ yml, want string }{
		"unknown key":      {"listn: x\n", "field listn not found"},
		"duplicate key":    {"listen: a:1\nlisten: b:2\n", "already defined"},
		"two documents":    {"listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "more than one YAML document"},
		"bad listen":       {"listen: nope\n", "listen"},
		"bad agent":        {"agent: acme\n", "agent"},
		"tracing exporter": {"tracing:\n  exporter: zipkin\n", "tracing.exporter"},
		"tracing protocol": {"tracing:\n  protocol: http/json\n", "tracing.protocol"},
		"tracing endpoint": {"tracing:\n  endpoint: collector:4318\n", "tracing.endpoint"},
		"tracing userinfo": {"tracing:\n  endpoint: http://u:p@collector:4318\n", "tracing.endpoint"},
		"tracing ratio":    {"tracing:\n  sample_ratio: 1.5\n", "tracing.sample_ratio"},
		"tracing header":   {"tracing:\n  headers: {\"a b\": x}\n", "tracing.headers"},
		"tracing key":      {"tracing:\n  endpont: http://x\n", "endpont"},
		"bad handler":      {"handlers:\n  x.y:\n    type: ftp\n", "want echo, http or exec"},
		"http without url": {"handlers:\n  x.y:\n    type: http\n", "handlers.x.y.url"},
		"relative command": {"handlers:\n  x.y:\n    type: exec\n    command: [ls]\n", "absolute program path"},
		"jwks over http":   {"trust:\n  jwks_urls: [\"http://keys.example/jwks.json\"]\n", "not an https URL"},
		"trust level":      {"trust:\n  min_trust_level: L9\n", "min_trust_level"},
		"sender no caps":   {"senders:\n  - agent: agent:a.b\n", "no capabilities"},
		"ttl too long":     {"oversight:\n  ttl: 48h\n", "oversight.ttl"},
		"log format":       {"log_format: xml\n", "log_format"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Default()
			err := c.Decode(strings.NewReader(tc.yml), "custos.yaml")
			if err == nil {
				err = c.Check()
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
	c := Default()
	if err := c.Set("max_body", "lots"); !errors.Is(err, ErrConfig) {
		t.Fatalf("Set(max_body, lots) = %v", err)
	}
	if err := c.Set("nope", "x"); !errors.Is(err, ErrConfig) {
		t.Fatalf("Set(nope) = %v", err)
	}
	// Every problem is reported at once.
	c = Default()
	c.Listen, c.LogFormat = "x", "xml"
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "listen") || !strings.Contains(err.Error(), "log_format") {
		t.Fatalf("Check = %v, want both problems", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("listen: 127.0.0.1:8080\n"))
	f.Add([]byte("handlers:\n  a.b:\n    type: echo\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Default()
		if err := c.Decode(strings.NewReader(string(data)), "fuzz"); err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error without ErrConfig: %v", err)
			}
			return
		}
		_ = c.Check()
	})
}

// The example configuration in the repository loads and checks.
func TestExampleConfig(t *testing.T) {
	c := Default()
	if err := c.LoadFile("../../custos.example.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	def := Default()
	if err := def.Check(); err != nil {
		t.Fatal(err)
	}
	if c.Listen != def.Listen || c.Agent != def.Agent || !reflect.DeepEqual(c.Oversight, def.Oversight) || c.MaxBody != def.MaxBody {
		t.Fatalf("the example's stated defaults differ from the defaults: %+v", c)
	}
}

func TestReviewers(t *testing.T) {
	good := "sha256:" + strings.Repeat("ab", 32)
	for name, tc := range map[string]struct {
		yml string
		ok  bool
	}{
		"valid":      {"reviewers:\n  - id: alice\n    token_sha256: " + good + "\n", true},
		"no id":      {"reviewers:\n  - token_sha256: " + good + "\n", false},
		"bad hash":   {"reviewers:\n  - id: a\n    token_sha256: sha256:xyz\n", false},
		"upper hex":  {"reviewers:\n  - id: a\n    token_sha256: sha256:" + strings.Repeat("AB", 32) + "\n", false},
		"same token": {"reviewers:\n  - id: a\n    token_sha256: " + good + "\n  - id: b\n    token_sha256: " + good + "\n", false},
	} {
		c := Default()
		err := c.Decode(strings.NewReader(tc.yml), "custos.yaml")
		if err == nil {
			err = c.Check()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok %v", name, err, tc.ok)
		}
	}
}

func TestTokens(t *testing.T) {
	for name, tc := range map[string]struct {
		yml string
		ok  bool
	}{
		"absent":          {"", true},
		"off":             {"tokens: {mode: off}\n", true},
		"bearer file":     {"tokens:\n  mode: bearer\n  issuers: [{issuer: https://as.example, jwks_file: as.jwks.json}]\n", true},
		"dpop url":        {"tokens:\n  mode: dpop\n  issuers: [{issuer: https://as.example, jwks_url: https://as.example/jwks.json}]\n  max_lifetime: 5m\n  clock_skew: 60s\n  replay_window: 30s\n  replay_capacity: 1000\n", true},
		"any":             {"tokens:\n  mode: any\n  issuers: [{issuer: a, jwks_file: a.json}, {issuer: b, jwks_file: b.json}]\n", true},
		"unknown mode":    {"tokens: {mode: sometimes}\n", false},
		"no issuers":      {"tokens: {mode: bearer}\n", false},
		"no iss":          {"tokens:\n  mode: bearer\n  issuers: [{jwks_file: a.json}]\n", false},
		"no keys":         {"tokens:\n  mode: bearer\n  issuers: [{issuer: a}]\n", false},
		"both keys":       {"tokens:\n  mode: bearer\n  issuers: [{issuer: a, jwks_file: a.json, jwks_url: https://a/jwks}]\n", false},
		"http jwks":       {"tokens:\n  mode: bearer\n  issuers: [{issuer: a, jwks_url: http://a/jwks}]\n", false},
		"twice":           {"tokens:\n  mode: bearer\n  issuers: [{issuer: a, jwks_file: a.json}, {issuer: a, jwks_file: b.json}]\n", false},
		"negative life":   {"tokens:\n  mode: bearer\n  max_lifetime: -1s\n  issuers: [{issuer: a, jwks_file: a.json}]\n", false},
		"skew too large":  {"tokens:\n  mode: bearer\n  clock_skew: 301s\n  issuers: [{issuer: a, jwks_file: a.json}]\n", false},
		"window too long": {"tokens:\n  mode: dpop\n  replay_window: 10m\n  issuers: [{issuer: a, jwks_file: a.json}]\n", false},
		"unknown key":     {"tokens:\n  mode: bearer\n  issuer: a\n", false},
	} {
		c := Default()
		err := c.Decode(strings.NewReader(tc.yml), "custos.yaml")
		if err == nil {
			err = c.Check()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok %v", name, err, tc.ok)
		}
	}
}

// Unset token settings get their defaults.
func TestTokensDefaults(t *testing.T) {
	c := Default()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if c.Tokens.Mode != TokensOff || c.Tokens.ClockSkew != DefaultClockSkew || c.Tokens.ReplayWindow != DefaultClockSkew {
		t.Fatalf("defaults: %+v", c.Tokens)
	}
	c = Default()
	if err := c.Decode(strings.NewReader("tokens: {mode: dpop, clock_skew: 30s, issuers: [{issuer: a, jwks_file: a.json}]}\n"), "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if c.Tokens.ReplayWindow != 30*time.Second {
		t.Fatalf("replay_window %s, want the clock_skew", c.Tokens.ReplayWindow)
	}
}

func TestTrust(t *testing.T) {
	const full = `trust:
  jwks_files: [keys/jwks.json]
  jwks_urls: ["https://keys.example/jwks.json", "http://127.0.0.1:9000/jwks.json"]
  peers:
    - {agent: agent:acme.billing, url: "https://billing.acme.example"}
    - {agent: agent:acme.local, url: "http://localhost:8081"}
  ca_files: [/etc/custos/ca.pem]
  revoked_kids: ["agent:acme.billing#key-2019"]
  revoked_thumbprints: [NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs]
  min_trust_level:
    default: L1
    profiles: {EU-AI-ACT-HIGH-RISK: L2}
    capabilities: {"payments.*": L3}
  identity_ttl: 30m
  require_identity_signature: true
`
	c := Default()
	if err := c.Decode(strings.NewReader(full), "custos.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	tr := c.Trust
	p := tr.MinTrustLevel.Policy()
	if len(tr.Peers) != 2 || tr.Peers[0].Agent != "agent:acme.billing" || tr.IdentityTTL != 30*time.Minute ||
		!tr.RequireIdentitySignature || len(tr.CAFiles) != 1 || len(tr.RevokedKIDs) != 1 || len(tr.RevokedThumbprints) != 1 ||
		p.Default.String() != "L1" || p.ByProfile["EU-AI-ACT-HIGH-RISK"].String() != "L2" || p.ByCapability["payments.*"].String() != "L3" {
		t.Fatalf("trust: %+v", tr)
	}
	// A bare level is the default.
	c = Default()
	if err := c.Decode(strings.NewReader("trust:\n  min_trust_level: L2\n"), "custos.yaml"); err != nil || c.Trust.MinTrustLevel.Default.String() != "L2" {
		t.Fatalf("bare level: %v %+v", err, c.Trust.MinTrustLevel)
	}
	for name, tc := range map[string]struct{ yml, want string }{
		"peer bad agent":    {"trust:\n  peers: [{agent: acme, url: \"https://a.example\"}]\n", "trust.peers[0].agent"},
		"peer over http":    {"trust:\n  peers: [{agent: agent:a.b, url: \"http://a.example\"}]\n", "trust.peers[0].url"},
		"peer twice":        {"trust:\n  peers: [{agent: agent:a.b, url: \"https://a.example\"}, {agent: agent:a.b, url: \"https://b.example\"}]\n", "listed twice"},
		"peer unknown key":  {"trust:\n  peers: [{agent: agent:a.b, uri: \"https://a.example\"}]\n", "field uri not found"},
		"revoked not a kid": {"trust:\n  revoked_kids: [agent:a.b]\n", "trust.revoked_kids"},
		"bad thumbprint":    {"trust:\n  revoked_thumbprints: [abc]\n", "trust.revoked_thumbprints"},
		"bad level":         {"trust:\n  min_trust_level: {profiles: {GDPR-STANDARD: L4}}\n", "min_trust_level"},
		"bad pattern":       {"trust:\n  min_trust_level: {capabilities: {\"pay*\": L2}}\n", "trust.min_trust_level"},
		"misspelt key":      {"trust:\n  min_trust_level: {profile: {GDPR-STANDARD: L2}}\n", "field profile not found"},
		"negative ttl":      {"trust:\n  identity_ttl: -1s\n", "trust.identity_ttl"},
		"jwks not loopback": {"trust:\n  jwks_urls: [\"http://10.0.0.1/jwks.json\"]\n", "not an https URL"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Default()
			err := c.Decode(strings.NewReader(tc.yml), "custos.yaml")
			if err == nil {
				err = c.Check()
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

// With the approval store on PostgreSQL, the audit log defaults to the same
// database (one chain for every replica); an instance name is derived
// when none is given, and a malformed one is refused.
func TestSharedState(t *testing.T) {
	c := Default()
	c.Data = t.TempDir()
	c.Store = "postgres://u@db.example/custos?custos_schema=prod"
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if !c.Shared() || c.AuditLog != "" || !strings.HasSuffix(c.Instance, ":"+c.Data) {
		t.Fatalf("shared %v, audit_log %q, instance %q", c.Shared(), c.AuditLog, c.Instance)
	}
	c = Default()
	c.Data = t.TempDir()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if c.Shared() || c.AuditLog != "" || c.Store != filepath.Join(c.Data, "custos.db") {
		t.Fatalf("local: shared %v, audit_log %q", c.Shared(), c.AuditLog)
	}
	c = Default()
	c.Instance = "bad\nname"
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "instance") {
		t.Fatalf("a control character in instance: %v", err)
	}
}

func TestOversightRemember(t *testing.T) {
	decode := func(t *testing.T, remember string) (*Config, error) {
		t.Helper()
		c := Default()
		if err := c.Decode(strings.NewReader("oversight:\n  remember:\n"+remember), "custos.yaml"); err != nil {
			return nil, err
		}
		return &c, c.Check()
	}
	c, err := decode(t, `
    - capabilities: ["billing.refund"]
      profiles: [EU-AI-ACT-HIGH-RISK]
      scopes: [session, persistent]
      max_age: 720h
      constraints:
        argument_range: {/amount: "value <= 100"}
    - capabilities: ["demo.*"]
      scopes: [session]
`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Oversight.RememberPolicy(nil)
	if err != nil || p == nil || len(p.Rules) != 2 {
		t.Fatalf("policy: %v %+v", err, p)
	}
	e := p.Rules[0]
	if e.MaxAge != 720*time.Hour || len(e.Scopes) != 2 || string(e.Constraints["argument_range"]) != `{"/amount":"value <= 100"}` {
		t.Fatalf("entry 1: %+v", e)
	}
	for _, bad := range []struct{ yml, want string }{
		{"    - scopes: [once]\n", `remember entry 1: scope "once": want session or persistent`},
		{"    - scopes: [forever]\n", `scope "forever"`},
		{"    - scopes: [session]\n      max_age: -1h\n", "max_age is negative"},
		{"    - capabilities: ['[']\n      scopes: [session]\n", "is not a glob"},
		{"    - scopes: [session]\n      constraints: {argument_range: {/amount: 'value <> 1'}}\n", `unknown operator "<>"`},
		{"    - scopes: [session]\n      constraints: {amount_below: 5}\n", "unknown constraint amount_below"},
		{"    - scopes: [session]\n      scope: [persistent]\n", "scope"},
	} {
		if _, err := decode(t, bad.yml); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want one containing %q", bad.yml, err, bad.want)
		}
	}
	// allow_session alone is one entry remembering every capability for
	// a session; neither means no policy.
	legacy := Oversight{AllowSession: true}
	if p, err := legacy.RememberPolicy(nil); err != nil || len(p.Rules) != 1 || p.Rules[0].Scopes[0] != "session" || len(p.Rules[0].Capabilities) != 0 {
		t.Fatalf("allow_session: %v %+v", err, p)
	}
	if p, err := (Oversight{}).RememberPolicy(nil); err != nil || p != nil {
		t.Fatalf("no policy: %v %+v", err, p)
	}
}
