package mcpproxy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

const examplePolicy = `
store: ./custos-data
rules:
  - tool: "read_*"
    action: allow
  - tool: "*"
    action: require_approval
    profile: EU-AI-ACT-HIGH-RISK
`

func TestParseExamplePolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(examplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	if p.Store != "./custos-data" || p.TTL != DefaultTTL || p.Wait != 0 || len(p.Rules) != 2 {
		t.Fatalf("policy = %+v", p)
	}
	r := p.Rules[1]
	if r.Index != 2 || r.Verdict != RequireApproval || r.Profile != "EU-AI-ACT-HIGH-RISK" || r.Risk != aais.RiskMedium {
		t.Fatalf("rule 2 = %+v", r)
	}
	if got := p.Match("read_file", nil); got == nil || got.Index != 1 {
		t.Fatalf("read_file matched %+v", got)
	}
	if got := p.Match("write_file", nil); got == nil || got.Index != 2 {
		t.Fatalf("write_file matched %+v", got)
	}
}

func TestParseFullPolicy(t *testing.T) {
	t.Setenv("MCPPROXY_TEST_TOKEN", "tok")
	p, err := ParsePolicy([]byte(`
authority: http://127.0.0.1:8080/
token_env: MCPPROXY_TEST_TOKEN
agent: agent:acme.assistant
ttl: 5m
wait: 2m
rules:
  - tool: write_file
    args: {path: "/etc/*"}
    action: deny
    message: "Never under /etc."
  - tool: "write_*"
    action: require_approval
    risk: high
    reasons: ["Writes a file"]
    ttl: 30s
    wait: 20s
    allow_session: true
    resource: "file://{args.path}"
    effects: ["Writes a file"]
    summary: "{tool} {args.path}"
`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Authority != "http://127.0.0.1:8080" || p.Token != "tok" || p.Agent != "agent:acme.assistant" || p.TTL != 5*time.Minute || p.Wait != 2*time.Minute {
		t.Fatalf("policy = %+v", p)
	}
	r := p.Rules[1]
	if r.Risk != aais.RiskHigh || !r.AllowSession || p.ttl(&r) != 30*time.Second || p.wait(&r) != 20*time.Second || p.ttl(&p.Rules[0]) != 5*time.Minute {
		t.Fatalf("rule 2 = %+v", r)
	}
	if got := p.Match("write_file", map[string]any{"path": "/etc/ssh/sshd_config"}); got == nil || got.Verdict != Deny {
		t.Fatalf("/etc/ssh/sshd_config matched %+v", got)
	}
	if got := p.Match("write_file", map[string]any{"path": "/tmp/x"}); got == nil || got.Index != 2 {
		t.Fatalf("/tmp/x matched %+v", got)
	}
	if got := p.Match("delete_file", nil); got != nil {
		t.Fatalf("delete_file matched %+v; want none (deny)", got)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	rules := "\nrules: [{tool: x, action: allow}]\n"
	for name, c := range map[string]struct{ doc, want string }{
		"empty":           {"", "empty"},
		"unknown key":     {"store: x\nrulez: []\n" + rules, "field rulez not found"},
		"unknown rule":    {"store: x\nrules: [{tool: x, action: allow, colour: red}]", "field colour not found"},
		"no authority":    {rules, "store or authority"},
		"both":            {"store: x\nauthority: http://localhost\ntoken: t" + rules, "not both"},
		"no token":        {"authority: http://localhost" + rules, "token: required"},
		"remote http":     {"authority: http://example.com\ntoken: t" + rules, "plain http"},
		"127. name":       {"authority: http://127.attacker.example\ntoken: t" + rules, "plain http"},
		"creds in url":    {"authority: https://u:p@example.com\ntoken: t" + rules, "credentials"},
		"token w/ store":  {"store: x\ntoken: t" + rules, "only used with authority"},
		"no rules":        {"store: x\nrules: []", "at least one rule"},
		"bad action":      {"store: x\nrules: [{tool: x, action: maybe}]", `"maybe" is not allow`},
		"no action":       {"store: x\nrules: [{tool: x}]", "rules[0].action: required"},
		"no tool":         {"store: x\nrules: [{action: allow}]", "rules[0].tool: required"},
		"bad glob":        {"store: x\nrules: [{tool: 'x\\', action: allow}]", "unpaired"},
		"bad profile":     {"store: x\nrules: [{tool: x, action: allow, profile: NOPE}]", "not a compliance profile"},
		"bad risk":        {"store: x\nrules: [{tool: x, action: require_approval, risk: extreme}]", "not low, medium"},
		"risk on allow":   {"store: x\nrules: [{tool: x, action: allow, risk: high}]", "rules[0].risk: only used with action require_approval"},
		"session deny":    {"store: x\nrules: [{tool: x, action: deny, allow_session: true}]", "allow_session: only used"},
		"message allow":   {"store: x\nrules: [{tool: x, action: allow, message: hi}]", "message: only used with action deny"},
		"bad ttl":         {"store: x\nttl: soon" + rules, `ttl: "soon" is not a duration`},
		"tiny wait":       {"store: x\nwait: 10ms" + rules, "shorter than 1s"},
		"bad template":    {"store: x\nrules: [{tool: x, action: require_approval, summary: '{who}'}]", "unknown placeholder"},
		"empty args":      {"store: x\nrules: [{tool: x, action: allow, args: {}}]", "args: must not be empty"},
		"null arg":        {"store: x\nrules: [{tool: x, action: allow, args: {path: null}}]", "a glob string is required"},
		"bad agent":       {"store: x\nagent: 'two words'" + rules, "not an AAIS id"},
		"two documents":   {"store: x" + rules + "---\nstore: y\n", "more than one YAML document"},
		"not a map":       {"- a\n- b\n", "cannot unmarshal"},
		"upstream no url": {"store: x\nupstream: {headers: {X-A: b}}" + rules, "upstream.url: required"},
		"upstream http":   {"store: x\nupstream: {url: 'http://mcp.example.com/mcp'}" + rules, "plain http is allowed only to localhost"},
		"upstream creds":  {"store: x\nupstream: {url: 'https://u:p@mcp.example.com/mcp'}" + rules, "must not carry credentials"},
		"upstream key":    {"store: x\nupstream: {url: 'https://mcp.example.com/mcp', auth: x}" + rules, "field auth not found"},
		"reserved header": {"store: x\nupstream: {url: 'https://mcp.example.com/mcp', headers: {Mcp-Session-Id: x}}" + rules, "set by the MCP transport"},
		"header env unset": {"store: x\nupstream: {url: 'https://mcp.example.com/mcp', headers_env: {Authorization: MCPPROXY_TEST_NOPE}}" + rules,
			"upstream.headers_env.Authorization: the environment variable MCPPROXY_TEST_NOPE is not set"},
		"serve remote":     {"store: x\nserve: {listen: '0.0.0.0:8931'}" + rules, "serve: listen address 0.0.0.0:8931 is not loopback"},
		"serve no token":   {"store: x\nserve: {listen: '0.0.0.0:8931', allow_remote: true}" + rules, "a token is required"},
		"serve two tokens": {"store: x\nserve: {token: a, token_env: B}" + rules, "serve.token and serve.token_env"},
		"serve timeout":    {"store: x\nserve: {session_timeout: forever}" + rules, "serve.session_timeout"},
		"remember deny":    {"store: x\nrules: [{tool: x, action: deny, remember: {scopes: [session]}}]", "remember: only used"},
		"remember twice":   {"store: x\nrules: [{tool: x, action: require_approval, allow_session: true, remember: {scopes: [session]}}]", "say it once"},
		"remember once":    {"store: x\nrules: [{tool: x, action: require_approval, remember: {scopes: [once]}}]", `scope "once": want session or persistent`},
		"remember none":    {"store: x\nrules: [{tool: x, action: require_approval, remember: {max_age: 1h}}]", "remember.scopes: required"},
		"remember age":     {"store: x\nrules: [{tool: x, action: require_approval, remember: {scopes: [session], max_age: soon}}]", `max_age: "soon" is not a duration`},
		"remember range":   {"store: x\nrules: [{tool: x, action: require_approval, remember: {scopes: [session], constraints: {argument_range: {/n: 'value => 1'}}}}]", `unknown operator "=>"`},
		"remember key":     {"store: x\nrules: [{tool: x, action: require_approval, remember: {scopes: [session], constraints: {n_below: 1}}}]", "unknown constraint n_below"},
		"remember field":   {"store: x\nrules: [{tool: x, action: require_approval, remember: {scope: [session]}}]", "scope"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(c.doc))
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *PolicyError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestParseUpstreamAndServe(t *testing.T) {
	t.Setenv("MCPPROXY_TEST_UPSTREAM_AUTH", "Bearer s3cret")
	t.Setenv("MCPPROXY_TEST_LISTEN_TOKEN", "listen-s3cret")
	p, err := ParsePolicy([]byte(`
store: x
upstream:
  url: https://mcp.example.com/mcp
  headers: {X-Tenant: acme}
  headers_env: {Authorization: MCPPROXY_TEST_UPSTREAM_AUTH}
serve:
  listen: 0.0.0.0:9000
  allow_remote: true
  token_env: MCPPROXY_TEST_LISTEN_TOKEN
  path: /gated
  session_timeout: 5m
rules: [{tool: x, action: allow}]
`))
	if err != nil {
		t.Fatal(err)
	}
	u, l := p.Upstream, p.Listen
	if u.URL != "https://mcp.example.com/mcp" || u.Header.Get("Authorization") != "Bearer s3cret" || u.Header.Get("X-Tenant") != "acme" {
		t.Fatalf("upstream = %+v", u)
	}
	if s := u.String(); s != "https://mcp.example.com/mcp (headers Authorization, X-Tenant)" {
		t.Fatalf("upstream described as %q", s)
	}
	if l.Addr != "0.0.0.0:9000" || !l.AllowRemote || l.Token != "listen-s3cret" || l.Path != "/gated" || l.SessionTimeout != 5*time.Minute {
		t.Fatalf("listen = %+v", l)
	}
	p, err = ParsePolicy([]byte("store: x\nserve: {}\nrules: [{tool: x, action: allow}]"))
	if err != nil || p.Listen.Addr != DefaultListen || p.Listen.Token != "" {
		t.Fatalf("serve: {} = %+v, %v", p.Listen, err)
	}
}

func TestParsePolicyListsEveryProblem(t *testing.T) {
	_, err := ParsePolicy([]byte("store: x\nttl: x\nrules: [{tool: a}, {action: deny}]"))
	var pe *PolicyError
	if !errors.As(err, &pe) || len(pe.Problems) != 3 {
		t.Fatalf("err = %v, want 3 problems", err)
	}
}

func TestLoadPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(examplePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("store: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want one naming the file", err)
	}
}

func TestResolveStore(t *testing.T) {
	dir := t.TempDir()
	for in, want := range map[string]string{
		"./custos-data":        filepath.Join(dir, "custos-data"),
		"sqlite:approvals.db":  "sqlite:" + filepath.Join(dir, "approvals.db"),
		"file:state.json":      "file:" + filepath.Join(dir, "state.json"),
		"/abs/approvals.db":    "/abs/approvals.db",
		"memory:":              "memory:",
		"postgres://db/custos": "postgres://db/custos",
		"sqlite:/abs/x.db":     "sqlite:/abs/x.db",
	} {
		if got := resolveStore(in, dir); got != want {
			t.Errorf("resolveStore(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		g, s string
		ok   bool
	}{
		{"*", "", true},
		{"*", "anything/at/all", true},
		{"read_*", "read_file", true},
		{"read_*", "write_file", false},
		{"/etc/*", "/etc/passwd", true},
		{"/etc/*", "/etc/ssh/sshd_config", true},
		{"/etc/*", "/etcetera", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "aéc", true},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"*.txt", "notes.txt", true},
		{"*.txt", "notes.txt.bak", false},
		{"*a*b*c*", "xxaxxbxxcxx", true},
		{"*a*b*c*", "xxaxxcxxbxx", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
	} {
		if got := globMatch(c.g, c.s); got != c.ok {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.g, c.s, got, c.ok)
		}
	}
}

func TestArgMatchersFailClosed(t *testing.T) {
	p, err := ParsePolicy([]byte(`
store: x
rules:
  - tool: write_file
    args: {path: "/etc/*"}
    action: deny
  - tool: write_file
    args: {path: "/tmp/*"}
    action: allow
  - tool: write_file
    action: require_approval
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args map[string]any
		want int
	}{
		{map[string]any{"path": "/tmp/a"}, 2},
		{map[string]any{"path": "/tmp/../etc/passwd"}, 1}, // ambiguous: the deny rule holds
		{map[string]any{"path": []any{"/tmp/a"}}, 1},      // not a string: the deny rule holds
		{map[string]any{"path": "/var/x"}, 3},
		{map[string]any{}, 3}, // no path: neither matcher applies
	} {
		got := p.Match("write_file", c.args)
		if got == nil || got.Index != c.want {
			t.Errorf("Match(%v) = %+v, want rule %d", c.args, got, c.want)
		}
	}
}

func TestExpand(t *testing.T) {
	s, err := expand("{tool}: {args.path} ({args.n}) {args.missing}", "write_file", map[string]any{"path": "/tmp/a", "n": 3.0})
	if err != nil || s != "write_file: /tmp/a (3) " {
		t.Fatalf("expand = %q, %v", s, err)
	}
	for _, bad := range []string{"{", "}", "{x}", "{args.}"} {
		if _, err := expand(bad, "", nil); err == nil {
			t.Errorf("expand(%q) succeeded", bad)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(examplePolicy))
	f.Add([]byte("authority: https://custos.example\ntoken: t\nrules: [{tool: '*', args: {path: '/etc/*'}, action: deny}]"))
	f.Add([]byte("store: x\nrules: [{tool: 'a\\*?', action: require_approval, summary: '{tool} {args.p}', allow_session: true}]"))
	f.Add([]byte("{store: x, rules: [{tool: x, action: allow}]}"))
	f.Add([]byte("store: x\nupstream: {url: 'https://h/mcp', headers: {X-Api-Key: k}}\nserve: {listen: '[::1]:0', token: t}\nrules: [{tool: x, action: allow}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			var pe *PolicyError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %v is not a *PolicyError with problems", err)
			}
			return
		}
		if len(p.Rules) == 0 || (p.Store == "") == (p.Authority == "") {
			t.Fatalf("accepted an invalid policy: %+v", p)
		}
		if p.Upstream != nil && CheckUpstreamURL(p.Upstream.URL) != nil {
			t.Fatalf("accepted the upstream %q", p.Upstream.URL)
		}
		if p.Listen != nil && p.Listen.Check() != nil {
			t.Fatalf("accepted the listener %+v", p.Listen)
		}
		for i, r := range p.Rules {
			if r.Index != i+1 || r.Tool == "" {
				t.Fatalf("rule %d = %+v", i, r)
			}
			switch r.Verdict {
			case Allow, Deny, RequireApproval:
			default:
				t.Fatalf("rule %d has verdict %q", i, r.Verdict)
			}
			// Matching never panics, whatever the globs.
			r.Matches(string(data), map[string]any{"path": string(data)})
		}
	})
}

func TestDocumentedPolicy(t *testing.T) {
	p, err := LoadPolicy(filepath.Join("testdata", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(p.Store) || filepath.Base(p.Store) != "custos-data" || len(p.Rules) != 4 {
		t.Fatalf("policy = %+v", p)
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "mcp-proxy.md"))
	if err != nil {
		t.Skip("docs not present")
	}
	example, _ := os.ReadFile(filepath.Join("testdata", "policy.yaml"))
	body := string(example[strings.Index(string(example), "store:"):])
	if !strings.Contains(string(doc), body) {
		t.Fatal("docs/mcp-proxy.md no longer shows testdata/policy.yaml")
	}
}
