package mcpproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/internal/limits"
)

// Verdict is what a policy rule does with a matching tools/call.
type Verdict string

// The three verdicts.
const (
	Allow           Verdict = "allow"
	RequireApproval Verdict = "require_approval"
	Deny            Verdict = "deny"
)

// Defaults applied when the policy leaves a setting out.
const (
	// DefaultTTL is how long an approval request stays open.
	DefaultTTL = 10 * time.Minute
	// DefaultRisk is the advisory risk of a gated call.
	DefaultRisk = aais.RiskMedium
	// DefaultAgent is origin.agent_id when the policy names none.
	DefaultAgent = ""
	// MaxPolicySize caps a policy file.
	MaxPolicySize = limits.FileBytes
	// MaxRules caps the number of rules.
	MaxRules = 1000
)

// Policy is a parsed, validated mcp-proxy policy file. Build it with
// ParsePolicy or LoadPolicy: a Policy built by hand is not checked.
type Policy struct {
	// Store is the embedded approval store location (store.Parse syntax);
	// exactly one of Store and Authority is set.
	Store string
	// Authority is the base URL of a running custos serve; Token the
	// reviewer API token used to reach it.
	Authority string
	Token     string
	// Agent is the origin.agent_id of every approval request ("": none).
	Agent string
	// TTL is the default lifetime of an approval request; Wait the default
	// time a call waits for its decision (0: until the request expires).
	TTL, Wait time.Duration
	// Rules are tried in order; the first that matches decides. No match
	// is Deny.
	Rules []Rule
	// Upstream is the remote MCP server to front (upstream:), nil when
	// the server is a command given on the command line.
	Upstream *Upstream
	// Listen is how to serve the hosts over HTTP (serve:), nil for stdio.
	Listen *Listen
}

// Rule is one policy rule.
type Rule struct {
	// Index is the rule's position in the file, from 1.
	Index int
	// Tool is the tool-name glob.
	Tool string
	// Args maps a top-level argument name to a glob its string value must
	// match. Every matcher must hold.
	Args map[string]string
	// Verdict is allow, require_approval or deny.
	Verdict Verdict
	// Profile is the compliance profile the call is governed by
	// ("": none).
	Profile string
	// The approval request's advisory risk and its reasons.
	Risk    aais.RiskLevel
	Reasons []string
	// TTL and Wait override the policy's (0: the policy's).
	TTL, Wait time.Duration
	// AllowSession offers "approve for this session" to the reviewer
	// (Remember with scope session).
	AllowSession bool
	// Remember, when set, says which remembered choices the rule's
	// approvals offer: its Scopes (session, persistent), each bound to the
	// tool and this policy rule and carrying its Constraints, its rules
	// living at most MaxAge. It replaces AllowSession.
	Remember *aais.RememberRule
	// Resource, Effects and Summary describe the action to the reviewer;
	// Summary and Resource may use {tool} and {args.NAME}.
	Resource string
	Effects  []string
	Summary  string
	// Message is shown to the model when a deny rule refuses a call.
	Message string
}

// fileRule and filePolicy are the YAML form, decoded strictly.
type filePolicy struct {
	Store     *string       `yaml:"store"`
	Authority *string       `yaml:"authority"`
	Token     *string       `yaml:"token"`
	TokenEnv  *string       `yaml:"token_env"`
	Agent     *string       `yaml:"agent"`
	TTL       *string       `yaml:"ttl"`
	Wait      *string       `yaml:"wait"`
	Rules     *[]fileRule   `yaml:"rules"`
	Upstream  *fileUpstream `yaml:"upstream"`
	Serve     *fileServe    `yaml:"serve"`
}

type fileUpstream struct {
	URL        *string           `yaml:"url"`
	Headers    map[string]string `yaml:"headers"`
	HeadersEnv map[string]string `yaml:"headers_env"`
}

type fileServe struct {
	Listen         *string `yaml:"listen"`
	Path           *string `yaml:"path"`
	Token          *string `yaml:"token"`
	TokenEnv       *string `yaml:"token_env"`
	AllowRemote    *bool   `yaml:"allow_remote"`
	TLSCert        *string `yaml:"tls_cert"`
	TLSKey         *string `yaml:"tls_key"`
	SessionTimeout *string `yaml:"session_timeout"`
}

type fileRule struct {
	Tool         *string            `yaml:"tool"`
	Args         map[string]*string `yaml:"args"`
	Action       *string            `yaml:"action"`
	Profile      *string            `yaml:"profile"`
	Risk         *string            `yaml:"risk"`
	Reasons      []string           `yaml:"reasons"`
	TTL          *string            `yaml:"ttl"`
	Wait         *string            `yaml:"wait"`
	AllowSession *bool              `yaml:"allow_session"`
	Remember     *fileRemember      `yaml:"remember"`
	Resource     *string            `yaml:"resource"`
	Effects      []string           `yaml:"effects"`
	Summary      *string            `yaml:"summary"`
	Message      *string            `yaml:"message"`
}

// fileRemember is a rule's remember block.
type fileRemember struct {
	Scopes      []string       `yaml:"scopes"`
	MaxAge      *string        `yaml:"max_age"`
	Constraints map[string]any `yaml:"constraints"`
}

// PolicyError is a refused policy file: every problem found, each naming
// where it is.
type PolicyError struct {
	Problems []string
}

func (e *PolicyError) Error() string {
	if len(e.Problems) == 1 {
		return "policy: " + e.Problems[0]
	}
	return "policy: " + strings.Join(e.Problems, "; ")
}

// LoadPolicy reads and validates the policy file at path. A relative
// store path is resolved against the directory of the policy file.
func LoadPolicy(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPolicySize+1))
	if err != nil {
		return nil, err
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p.Store = resolveStore(p.Store, filepath.Dir(path))
	return p, nil
}

// resolveStore makes a relative store path relative to dir (the policy
// file's directory): MCP hosts start servers in a working directory of
// their own choosing.
func resolveStore(s, dir string) string {
	if s == "" || s == "memory:" || strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		return s
	}
	prefix := ""
	for _, p := range []string{"sqlite:", "file:"} {
		if strings.HasPrefix(s, p) {
			prefix, s = p, s[len(p):]
			break
		}
	}
	if s == "" || filepath.IsAbs(s) {
		return prefix + s
	}
	abs, err := filepath.Abs(filepath.Join(dir, s))
	if err != nil {
		return prefix + filepath.Join(dir, s)
	}
	return prefix + abs
}

// ParsePolicy reads a policy document (YAML, or JSON, which is YAML) and
// validates it strictly: unknown keys, malformed globs, durations and
// values, a missing or doubled authority, and an empty rule list are
// refused with a *PolicyError listing every problem.
func ParsePolicy(data []byte) (*Policy, error) {
	if len(data) > MaxPolicySize {
		return nil, &PolicyError{[]string{fmt.Sprintf("the file is larger than %d bytes", MaxPolicySize)}}
	}
	var fp filePolicy
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fp); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &PolicyError{[]string{"the file is empty"}}
		}
		return nil, &PolicyError{[]string{strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &PolicyError{[]string{"more than one YAML document"}}
	}
	var probs []string
	bad := func(format string, a ...any) { probs = append(probs, fmt.Sprintf(format, a...)) }
	p := &Policy{TTL: DefaultTTL}

	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	switch {
	case fp.Store != nil && fp.Authority != nil:
		bad("store and authority: set one of them, not both")
	case fp.Store == nil && fp.Authority == nil:
		bad("store or authority: one of them is required (store: ./custos-data, or authority: http://127.0.0.1:8080 with token)")
	}
	if fp.Store != nil {
		if strings.TrimSpace(*fp.Store) == "" {
			bad("store: must not be empty")
		}
		p.Store = *fp.Store
		if fp.Token != nil || fp.TokenEnv != nil {
			bad("token: only used with authority")
		}
	}
	if fp.Authority != nil {
		p.Authority = strings.TrimRight(*fp.Authority, "/")
		u, err := url.Parse(p.Authority)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			bad("authority: %q is not an http(s) URL", *fp.Authority)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			bad("authority: %q must not carry credentials, a query or a fragment (put the token in token)", *fp.Authority)
		case u.Scheme == "http" && !arsia.IsLoopbackHost(u.Hostname()):
			bad("authority: %q: plain http is allowed only to localhost; use https", *fp.Authority)
		}
		switch {
		case fp.Token != nil && fp.TokenEnv != nil:
			bad("token and token_env: set one of them, not both")
		case fp.Token != nil:
			p.Token = *fp.Token
		case fp.TokenEnv != nil:
			p.Token = os.Getenv(*fp.TokenEnv)
			if *fp.TokenEnv == "" {
				bad("token_env: must name an environment variable")
			} else if p.Token == "" {
				bad("token_env: the environment variable %s is not set", *fp.TokenEnv)
			}
		default:
			bad("token: required with authority (a reviewer API token; or token_env: VARIABLE)")
		}
		if fp.Token != nil && strings.TrimSpace(p.Token) == "" {
			bad("token: must not be empty")
		}
	}
	p.Agent = str(fp.Agent)
	if fp.Agent != nil && (len(p.Agent) > 200 || !aaisID.MatchString(p.Agent)) {
		bad("agent: %q is not an AAIS id (1 to 200 of A-Z a-z 0-9 . _ : -, starting with a letter or digit)", p.Agent)
	}
	if d, ok := duration(fp.TTL, "ttl", bad); ok {
		p.TTL = d
	}
	if d, ok := duration(fp.Wait, "wait", bad); ok {
		p.Wait = d
	}
	if fp.Rules == nil || len(*fp.Rules) == 0 {
		bad("rules: at least one rule is required (calls no rule matches are denied)")
	} else if len(*fp.Rules) > MaxRules {
		bad("rules: more than %d", MaxRules)
	} else {
		for i, fr := range *fp.Rules {
			p.Rules = append(p.Rules, parseRule(i+1, fr, bad))
		}
	}
	if fp.Upstream != nil {
		p.Upstream = parseUpstream(fp.Upstream, bad)
	}
	if fp.Serve != nil {
		p.Listen = parseServe(fp.Serve, bad)
	}
	if len(probs) > 0 {
		return nil, &PolicyError{probs}
	}
	return p, nil
}

func parseUpstream(fu *fileUpstream, bad func(string, ...any)) *Upstream {
	u := &Upstream{Header: http.Header{}}
	if fu.URL == nil {
		bad("upstream.url: required (the remote server's MCP endpoint, https://…/mcp)")
	} else if err := CheckUpstreamURL(*fu.URL); err != nil {
		bad("upstream.url: %v", err)
	} else {
		u.URL = *fu.URL
	}
	for _, name := range sortedKeys(fu.Headers) {
		if err := addHeader(u.Header, name, fu.Headers[name], "upstream.headers"); err != nil {
			bad("%v", err)
		}
	}
	for _, name := range sortedKeys(fu.HeadersEnv) {
		variable := fu.HeadersEnv[name]
		value, set := os.LookupEnv(variable)
		switch {
		case variable == "":
			bad("upstream.headers_env.%s: must name an environment variable", name)
		case !set:
			bad("upstream.headers_env.%s: the environment variable %s is not set", name, variable)
		default:
			if err := addHeader(u.Header, name, value, "upstream.headers_env"); err != nil {
				bad("%v", err)
			}
		}
	}
	return u
}

func parseServe(fs *fileServe, bad func(string, ...any)) *Listen {
	l := &Listen{Addr: DefaultListen}
	if fs.Listen != nil {
		l.Addr = *fs.Listen
	}
	if fs.Path != nil {
		l.Path = *fs.Path
	}
	switch {
	case fs.Token != nil && fs.TokenEnv != nil:
		bad("serve.token and serve.token_env: set one of them, not both")
	case fs.Token != nil:
		l.Token = *fs.Token
		if strings.TrimSpace(l.Token) == "" {
			bad("serve.token: must not be empty")
		}
	case fs.TokenEnv != nil:
		l.Token = os.Getenv(*fs.TokenEnv)
		if *fs.TokenEnv == "" {
			bad("serve.token_env: must name an environment variable")
		} else if l.Token == "" {
			bad("serve.token_env: the environment variable %s is not set", *fs.TokenEnv)
		}
	}
	if fs.AllowRemote != nil {
		l.AllowRemote = *fs.AllowRemote
	}
	if fs.TLSCert != nil {
		l.TLSCert = *fs.TLSCert
	}
	if fs.TLSKey != nil {
		l.TLSKey = *fs.TLSKey
	}
	if d, ok := duration(fs.SessionTimeout, "serve.session_timeout", bad); ok {
		l.SessionTimeout = d
	}
	if err := l.Check(); err != nil {
		bad("serve: %s", strings.TrimPrefix(err.Error(), "mcpproxy: "))
	}
	return l
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func duration(s *string, where string, bad func(string, ...any)) (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	d, err := time.ParseDuration(*s)
	switch {
	case err != nil:
		bad("%s: %q is not a duration (write 90s, 10m, 1h)", where, *s)
	case d < time.Second:
		bad("%s: %s is shorter than 1s", where, *s)
	case d > 7*24*time.Hour:
		bad("%s: %s is longer than 7 days", where, *s)
	default:
		return d, true
	}
	return 0, false
}

func parseRemember(where string, fr *fileRemember, bad func(string, ...any)) *aais.RememberRule {
	rr := &aais.RememberRule{}
	if len(fr.Scopes) == 0 {
		bad("%s.scopes: required: session and/or persistent", where)
	}
	for _, s := range fr.Scopes {
		rr.Scopes = append(rr.Scopes, aais.Scope(s))
	}
	if d, ok := duration(fr.MaxAge, where+".max_age", bad); ok {
		rr.MaxAge = d
	}
	if len(fr.Constraints) > 0 {
		rr.Constraints = aais.Constraints{}
		for k, v := range fr.Constraints {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false) // keep the "<" of a range as it is
			if err := enc.Encode(v); err != nil {
				bad("%s.constraints.%s: %v", where, k, err)
				continue
			}
			rr.Constraints[k] = bytes.TrimRight(b.Bytes(), "\n")
		}
	}
	if err := (&aais.RememberRules{Rules: []aais.RememberRule{*rr}}).Validate(); err != nil {
		bad("%s: %s", where, strings.TrimPrefix(err.Error(), "remember entry 1: "))
	}
	return rr
}

// remembered returns the remember entry of a rule (AllowSession is a
// session entry), nil when its approvals are never remembered.
func (r *Rule) remembered() *aais.RememberRule {
	switch {
	case r.Remember != nil:
		return r.Remember
	case r.AllowSession:
		return &aais.RememberRule{Scopes: []aais.Scope{aais.ScopeSession}}
	}
	return nil
}

// RememberPolicy is the policy's remember policy for an authority: a
// request is judged by the rule that gated it (named by its
// origin.project, "mcp-proxy rule N"), and may be remembered only as that
// rule's remember block (or allow_session) says.
func (p *Policy) RememberPolicy() aais.RememberPolicy { return rememberByRule{p} }

type rememberByRule struct{ p *Policy }

func (rb rememberByRule) Remember(req *aais.Request, scope aais.Scope) (aais.RememberLimits, error) {
	var n int
	if req == nil || req.Origin.Harness != Harness {
		return aais.RememberLimits{}, fmt.Errorf("%w: not a request of this proxy", aais.ErrNotRemembered)
	}
	if _, err := fmt.Sscanf(req.Origin.Project, "mcp-proxy rule %d", &n); err != nil || n < 1 || n > len(rb.p.Rules) ||
		fmt.Sprintf("mcp-proxy rule %d", n) != req.Origin.Project {
		return aais.RememberLimits{}, fmt.Errorf("%w: the request names no rule of this policy", aais.ErrNotRemembered)
	}
	rule := &rb.p.Rules[n-1]
	rr := rule.remembered()
	if rr == nil || rule.Verdict != RequireApproval {
		return aais.RememberLimits{}, fmt.Errorf("%w: policy rule %d remembers no approval; only approve once is allowed", aais.ErrNotRemembered, n)
	}
	lim, err := (&aais.RememberRules{Rules: []aais.RememberRule{*rr}}).Remember(req, scope)
	if err != nil {
		words := make([]string, len(rr.Scopes))
		for i, s := range rr.Scopes {
			words[i] = string(s)
		}
		return aais.RememberLimits{}, fmt.Errorf("%w: a %s approval is refused: policy rule %d remembers only %s approvals", aais.ErrNotRemembered, scope, n, strings.Join(words, " and "))
	}
	return lim, nil
}

func parseRule(n int, fr fileRule, bad func(string, ...any)) Rule {
	where := fmt.Sprintf("rules[%d]", n-1)
	r := Rule{Index: n}
	if fr.Tool == nil || *fr.Tool == "" {
		bad("%s.tool: required (a tool-name glob such as \"read_*\" or \"*\")", where)
	} else if err := checkGlob(*fr.Tool); err != nil {
		bad("%s.tool: %v", where, err)
	} else {
		r.Tool = *fr.Tool
	}
	if fr.Args != nil {
		if len(fr.Args) == 0 {
			bad("%s.args: must not be empty when present", where)
		}
		r.Args = map[string]string{}
		for k, v := range fr.Args {
			switch {
			case k == "":
				bad("%s.args: an argument name must not be empty", where)
			case v == nil:
				bad("%s.args.%s: a glob string is required", where, k)
			default:
				if err := checkGlob(*v); err != nil {
					bad("%s.args.%s: %v", where, k, err)
				}
				r.Args[k] = *v
			}
		}
	}
	if fr.Action == nil {
		bad("%s.action: required (allow, require_approval or deny)", where)
	} else {
		switch v := Verdict(*fr.Action); v {
		case Allow, RequireApproval, Deny:
			r.Verdict = v
		default:
			bad("%s.action: %q is not allow, require_approval or deny", where, *fr.Action)
		}
	}
	gated := r.Verdict == RequireApproval
	only := func(key string, set bool) {
		if set && !gated && r.Verdict != "" {
			bad("%s.%s: only used with action require_approval", where, key)
		}
	}
	if fr.Profile != nil {
		if _, ok := compliance.Default().Get(*fr.Profile); !ok {
			bad("%s.profile: %q is not a compliance profile (%s)", where, *fr.Profile, strings.Join(compliance.Default().Names(), ", "))
		}
		r.Profile = *fr.Profile
	}
	r.Risk = DefaultRisk
	only("risk", fr.Risk != nil)
	if fr.Risk != nil {
		switch l := aais.RiskLevel(*fr.Risk); l {
		case aais.RiskLow, aais.RiskMedium, aais.RiskHigh, aais.RiskCritical:
			r.Risk = l
		default:
			bad("%s.risk: %q is not low, medium, high or critical", where, *fr.Risk)
		}
	}
	only("reasons", fr.Reasons != nil)
	if len(fr.Reasons) > 19 {
		bad("%s.reasons: at most 19", where)
	}
	for i, s := range fr.Reasons {
		if s == "" || len(s) > 1000 {
			bad("%s.reasons[%d]: must be 1 to 1000 characters", where, i)
		}
	}
	r.Reasons = fr.Reasons
	only("ttl", fr.TTL != nil)
	if d, ok := duration(fr.TTL, where+".ttl", bad); ok {
		r.TTL = d
	}
	only("wait", fr.Wait != nil)
	if d, ok := duration(fr.Wait, where+".wait", bad); ok {
		r.Wait = d
	}
	only("allow_session", fr.AllowSession != nil)
	if fr.AllowSession != nil {
		r.AllowSession = *fr.AllowSession
	}
	only("remember", fr.Remember != nil)
	if fr.Remember != nil {
		if fr.AllowSession != nil {
			bad("%s: allow_session and remember: say it once, in remember.scopes", where)
		}
		r.Remember = parseRemember(where+".remember", fr.Remember, bad)
	}
	only("resource", fr.Resource != nil)
	if fr.Resource != nil {
		if *fr.Resource == "" {
			bad("%s.resource: must not be empty", where)
		} else if err := checkTemplate(*fr.Resource); err != nil {
			bad("%s.resource: %v", where, err)
		}
		r.Resource = *fr.Resource
	}
	only("effects", fr.Effects != nil)
	for i, s := range fr.Effects {
		if s == "" || len(s) > 1000 {
			bad("%s.effects[%d]: must be 1 to 1000 characters", where, i)
		}
	}
	r.Effects = fr.Effects
	only("summary", fr.Summary != nil)
	if fr.Summary != nil {
		if *fr.Summary == "" {
			bad("%s.summary: must not be empty", where)
		} else if err := checkTemplate(*fr.Summary); err != nil {
			bad("%s.summary: %v", where, err)
		}
		r.Summary = *fr.Summary
	}
	if fr.Message != nil {
		if r.Verdict != Deny && r.Verdict != "" {
			bad("%s.message: only used with action deny", where)
		}
		if *fr.Message == "" || len(*fr.Message) > 1000 {
			bad("%s.message: must be 1 to 1000 characters", where)
		}
		r.Message = *fr.Message
	}
	return r
}

// Match returns the first rule that matches a call of tool with the given
// decoded arguments (nil when none: the call is denied).
func (p *Policy) Match(tool string, args map[string]any) *Rule {
	for i := range p.Rules {
		if p.Rules[i].Matches(tool, args) {
			return &p.Rules[i]
		}
	}
	return nil
}

// Matches reports whether r covers a call of tool with args.
//
// An argument matcher holds when the named argument is a string matching
// the glob. Values that are ambiguous for a path glob — a string with a ".."
// path segment or a NUL, or a present non-string value — fail closed: they
// never satisfy an allow rule's matcher, and always satisfy a deny or
// require_approval rule's. A missing argument satisfies no matcher.
func (r *Rule) Matches(tool string, args map[string]any) bool {
	if !globMatch(r.Tool, tool) {
		return false
	}
	keys := make([]string, 0, len(r.Args))
	for k := range r.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, present := args[k]
		if !present {
			return false
		}
		s, isString := v.(string)
		if !isString || ambiguous(s) {
			if r.Verdict == Allow {
				return false
			}
			continue
		}
		if !globMatch(r.Args[k], s) {
			return false
		}
	}
	return true
}

// ambiguous reports whether s could name another path than it appears to.
func ambiguous(s string) bool {
	if strings.ContainsRune(s, 0) {
		return true
	}
	for _, seg := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return true
		}
	}
	return false
}

// ttl and wait are the rule's settings, falling back to the policy's.
func (p *Policy) ttl(r *Rule) time.Duration {
	if r.TTL > 0 {
		return r.TTL
	}
	return p.TTL
}

func (p *Policy) wait(r *Rule) time.Duration {
	if r.Wait > 0 {
		return r.Wait
	}
	return p.Wait
}
