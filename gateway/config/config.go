// Package config is the configuration of custos serve: what the YAML file,
// the CUSTOS_* environment variables and the command-line flags say, in
// that order of increasing precedence, checked before anything starts.
//
// custos.example.yaml at the repository root documents every setting.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/identity"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/internal/limits"
	"github.com/custos-runtime/custos/internal/telemetry"
)

// Defaults.
const (
	DefaultListen     = "127.0.0.1:8080"
	DefaultDataDir    = "custos-data"
	DefaultAgent      = "agent:local.custos"
	DefaultMaxBody    = limits.MessageBytes
	DefaultApprovalTT = 10 * time.Minute
)

// Config is everything custos serve reads at start.
type Config struct {
	// Listen is the TCP address of the HTTP server.
	Listen string `yaml:"listen"`
	// Data is the data directory: the approval store, the audit log and
	// the gateway's own key live there unless set otherwise.
	Data string `yaml:"data"`
	// Agent is the gateway's own ARSIA agent identifier (the "to" of the
	// requests it accepts, the "from" of its answers).
	Agent string `yaml:"agent"`
	// PublicURL is how senders reach this gateway (discovery, status
	// URLs); empty means http://<listen>.
	PublicURL string `yaml:"public_url"`
	// Store is where the gateway keeps its state (see store.Parse): empty
	// means custos.db in Data, one SQLite file for approvals, exchanges
	// and the audit log; a postgres:// URL keeps all of it, and the
	// replicas' shared replay set and rate limits, in one schema.
	Store string `yaml:"store" secret:"url"`
	// AuditLog keeps the audit log elsewhere than Store: a SQLite file of
	// its own, or a postgres:// URL; empty (the default) keeps it in
	// Store, where each pipeline step commits with its audit record.
	AuditLog string `yaml:"audit_log" secret:"url"`
	// Instance names this gateway among replicas sharing a PostgreSQL
	// store: the claims it makes, so that after a restart it ends only
	// its own interrupted calls. Empty means host name and data
	// directory. Keep it stable across restarts of one replica.
	Instance string `yaml:"instance"`
	// LogFormat is "text" or "json".
	LogFormat string `yaml:"log_format"`
	// MaxBody caps a request body in bytes.
	MaxBody int64 `yaml:"max_body"`
	// Trust says whose signatures are accepted.
	Trust Trust `yaml:"trust"`
	// Senders grants capabilities to the agents that may call.
	Senders []Sender `yaml:"senders"`
	// Handlers says how each capability runs.
	Handlers map[string]Handler `yaml:"handlers"`
	// Reviewers may decide approvals through the HTTP API with their API
	// token (kept only as its SHA-256: custos serve token prints one).
	Reviewers []Reviewer `yaml:"reviewers"`
	// Roles say what reviewers may decide (reviewers.go).
	Roles map[string]Role `yaml:"roles"`
	// SeparationOfDuties are the compliance profiles whose requests their
	// requester may not approve; JustificationRequired those whose
	// approvals need a written justification.
	SeparationOfDuties    []string `yaml:"separation_of_duties"`
	JustificationRequired []string `yaml:"justification_required"`
	// AllowedOrigins are browser origins ("https://review.example")
	// allowed to sign in and make changes, besides PublicURL's (reviewers.go).
	AllowedOrigins []string `yaml:"allowed_origins"`
	// Oversight tunes the approvals the compliance profiles demand.
	Oversight Oversight `yaml:"oversight"`
	// RateLimit bounds each sender's request rate.
	RateLimit RateLimit `yaml:"rate_limit"`
	// Tokens says which access tokens the inbox demands (tokens.go).
	Tokens Tokens `yaml:"tokens"`
	// AuthorizationServer makes the gateway issue its own access tokens
	// (authserver.go).
	AuthorizationServer AuthorizationServer `yaml:"authorization_server"`
	// Limits bounds what a caller costs before it is authenticated.
	Limits Limits `yaml:"limits"`
	// Tracing exports OpenTelemetry traces over OTLP; off by default. The
	// OTEL_* environment variables win over it (docs/operations.md).
	Tracing Tracing `yaml:"tracing"`
	// Notifications announce approvals on webhooks, Slack and email
	// (notifications.go).
	Notifications Notifications `yaml:"notifications"`
	// Quorum makes calls need several approvals (quorum.go).
	Quorum []QuorumRule `yaml:"quorum"`
	// CertificateAuthority is the optional issuing CA for L2 (ca.go).
	CertificateAuthority CertificateAuthority `yaml:"certificate_authority"`
	// State serves ARSIA-State, the agents' memory (state.go).
	State StateService `yaml:"state"`
	// Onboarding lets agents of other organizations onboard themselves
	// (onboarding.go).
	Onboarding Onboarding `yaml:"onboarding"`
	// Relay makes the gateway a Compliance Broker (relay.go).
	Relay Relay `yaml:"relay"`
}

// Limits bounds what the transport spends on a caller before its request
// is authenticated (docs/security.md): a rate and a connection cap per
// client address, a cap on open connections, on the bytes of request
// bodies in flight, and on how long a body may take to arrive. 0
// disables each cap.
type Limits struct {
	// PerAddress limits each client address (an IPv4 address; an IPv6
	// address by its /64).
	PerAddress PerAddressLimits `yaml:"per_address"`
	// Connections caps the open connections; past it new ones wait in
	// the kernel's backlog.
	Connections int `yaml:"connections"`
	// BodyBytesInFlight caps the bytes of the request bodies being read
	// or handled (each reserves its Content-Length, max_body when
	// unknown); a request that finds no room within BodyWait gets 503
	// with Retry-After. At least max_body when set.
	BodyBytesInFlight int64         `yaml:"body_bytes_in_flight"`
	BodyWait          time.Duration `yaml:"body_wait"`
	// BodyTimeout is how long a request body may take to arrive (408
	// past it).
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// HeaderBytes caps a request's header (431 above it).
	HeaderBytes int `yaml:"header_bytes"`
}

// PerAddressLimits is a token bucket of Burst requests refilled at
// PerSecond for each client address, checked before anything is read,
// over at most Tracked addresses (the least recently seen forgotten
// first), a cap of Connections open connections per address and one of
// BodyBytesInFlight of the body bytes in flight (429 past it, at least
// max_body when set). Exempt lists the addresses (CIDR prefixes or single
// addresses) none applies to.
type PerAddressLimits struct {
	PerSecond         float64  `yaml:"per_second"`
	Burst             int      `yaml:"burst"`
	Tracked           int      `yaml:"tracked"`
	Connections       int      `yaml:"connections"`
	BodyBytesInFlight int64    `yaml:"body_bytes_in_flight"`
	Exempt            []string `yaml:"exempt"`
}

// ExemptPrefixes parses Exempt; a single address is its own prefix.
func (p PerAddressLimits) ExemptPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range p.Exempt {
		if pr, err := netip.ParsePrefix(s); err == nil {
			if pr.Addr().Is4In6() {
				return nil, fmt.Errorf("%q: write an IPv4 prefix as IPv4", s)
			}
			out = append(out, pr.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func (l Limits) check(maxBody int64) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("limits."+format, a...)) }
	p := l.PerAddress
	if p.PerSecond < 0 || p.Burst < 0 || (p.PerSecond > 0 && p.Burst == 0) {
		bad("per_address: per_second and burst must be >= 0, and burst > 0 when a rate is set")
	}
	if p.Tracked < 0 || (p.PerSecond > 0 && p.Tracked == 0) || p.Tracked > 1<<24 {
		bad("per_address.tracked %d: want 1 to %d addresses when a rate is set", p.Tracked, 1<<24)
	}
	if p.Connections < 0 {
		bad("per_address.connections %d: negative", p.Connections)
	}
	if p.BodyBytesInFlight < 0 || (p.BodyBytesInFlight > 0 && p.BodyBytesInFlight < maxBody) {
		bad("per_address.body_bytes_in_flight %d: want 0 (no cap) or at least max_body (%d)", p.BodyBytesInFlight, maxBody)
	}
	if _, err := p.ExemptPrefixes(); err != nil {
		bad("per_address.exempt: %v", err)
	}
	if l.Connections < 0 {
		bad("connections %d: negative", l.Connections)
	}
	if l.BodyBytesInFlight < 0 || (l.BodyBytesInFlight > 0 && l.BodyBytesInFlight < maxBody) {
		bad("body_bytes_in_flight %d: want 0 (no cap) or at least max_body (%d)", l.BodyBytesInFlight, maxBody)
	}
	if l.BodyWait < 0 {
		bad("body_wait %s: negative", l.BodyWait)
	}
	if l.BodyTimeout < 0 {
		bad("body_timeout %s: negative", l.BodyTimeout)
	}
	if l.HeaderBytes < 4<<10 || l.HeaderBytes > 1<<20 {
		bad("header_bytes %d: want 4 KiB to 1 MiB", l.HeaderBytes)
	}
	return errs
}

// RateLimit bounds each sender: a bucket of Burst requests refilled at
// PerSecond. PerSecond 0 disables the limit.
type RateLimit struct {
	PerSecond float64 `yaml:"per_second"`
	Burst     int     `yaml:"burst"`
}

// Trust lists where senders' public keys come from and how much identity
// assurance calls demand (package gateway/trust, docs/trust.md).
type Trust struct {
	// JWKSFiles are local JWKS files (re-read when they change).
	JWKSFiles []string `yaml:"jwks_files"`
	// JWKSURLs are remote JWKS documents (HTTPS, cached per Cache-Control).
	JWKSURLs []string `yaml:"jwks_urls"`
	// Peers are agents whose keys and identity record are discovered from
	// their base URL (URL/.well-known/arsia).
	Peers []TrustPeer `yaml:"peers"`
	// CAFiles are PEM files of the CA certificates whose chains make a
	// peer L2 (L3 with QcStatements).
	CAFiles []string `yaml:"ca_files"`
	// QualifiedCAFiles, when set, are the only roots (of qualified trust
	// service providers) under which a QcStatements chain is L3; they
	// count for L2 as ca_files do. Unset: QcStatements under any root is
	// L3.
	QualifiedCAFiles []string `yaml:"qualified_ca_files"`
	// RevokedKIDs are kids refused (certificate_revoked) even while a
	// JWKS still publishes them.
	RevokedKIDs []string `yaml:"revoked_kids"`
	// RevokedThumbprints are RFC 7638 SHA-256 JWK thumbprints (unpadded
	// base64url) of keys refused under any kid.
	RevokedThumbprints []string `yaml:"revoked_thumbprints"`
	// MinTrustLevel is the minimum trust level of a sender.
	MinTrustLevel MinTrustLevel `yaml:"min_trust_level"`
	// IdentityTTL is how long a peer's identity record is cached (1 h
	// when zero).
	IdentityTTL time.Duration `yaml:"identity_ttl"`
	// RequireIdentitySignature refuses identity records without an
	// X-ARSIA-Sig header.
	RequireIdentitySignature bool `yaml:"require_identity_signature"`
	// Algorithms are the envelope signature algorithms accepted (EdDSA,
	// ES256 and RS256 when empty).
	Algorithms []string `yaml:"algorithms"`
	// MinRefreshInterval is the least time between two fetches of one
	// remote document after a failure or for an unknown kid (30 s when
	// zero).
	MinRefreshInterval time.Duration `yaml:"min_refresh_interval"`
}

// KnownAlgorithms are the JWS algorithms an algorithms list may name.
var KnownAlgorithms = []string{"EdDSA", "ES256", "RS256"}

func checkAlgorithms(key string, list []string) []error {
	var errs []error
	seen := map[string]bool{}
	for _, a := range list {
		switch {
		case !slices.Contains(KnownAlgorithms, a):
			errs = append(errs, fmt.Errorf("%s: %q: want %s", key, a, strings.Join(KnownAlgorithms, ", ")))
		case seen[a]:
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", key, a))
		}
		seen[a] = true
	}
	return errs
}

// TrustPeer is a discovered agent: its agent id and base URL.
type TrustPeer struct {
	Agent string `yaml:"agent"`
	URL   string `yaml:"url"`
}

// MinTrustLevel is the minimum trust level (L1, L2, L3) by default, per
// effective compliance profile and per capability pattern; the highest
// that applies to a call wins.
type MinTrustLevel struct {
	Default      identity.TrustLevel            `yaml:"default"`
	Profiles     map[string]identity.TrustLevel `yaml:"profiles"`
	Capabilities map[string]identity.TrustLevel `yaml:"capabilities"`
}

// UnmarshalYAML accepts the mapping form and a bare level, which sets
// the default ("min_trust_level: L2").
func (m *MinTrustLevel) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if err := m.Default.UnmarshalText([]byte(n.Value)); err != nil {
			return fmt.Errorf("line %d: min_trust_level: %w", n.Line, err)
		}
		return nil
	}
	// Node.Decode does not inherit KnownFields: refuse misspelt keys here.
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i].Value; k {
			case "default", "profiles", "capabilities":
			default:
				return fmt.Errorf("line %d: min_trust_level: field %s not found (want default, profiles, capabilities)", n.Content[i].Line, k)
			}
		}
	}
	type plain MinTrustLevel
	var p plain
	if err := n.Decode(&p); err != nil {
		return fmt.Errorf("min_trust_level: %w", err)
	}
	*m = MinTrustLevel(p)
	return nil
}

// Policy returns the levels as an identity.Policy.
func (m MinTrustLevel) Policy() identity.Policy {
	return identity.Policy{Default: m.Default, ByProfile: m.Profiles, ByCapability: m.Capabilities}
}

// check reports the problems of the trust settings.
func (t Trust) check() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	trustURL := func(raw string) bool {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || u.User != nil {
			return false
		}
		return u.Scheme == "https" || u.Scheme == "http" && arsia.IsLoopbackHost(u.Hostname())
	}
	for _, u := range t.JWKSURLs {
		if !trustURL(u) {
			bad("trust.jwks_urls: %q is not an https URL", u)
		}
	}
	for _, f := range t.JWKSFiles {
		if f == "" {
			bad("trust.jwks_files: empty path")
		}
	}
	seen := map[string]bool{}
	for i, p := range t.Peers {
		switch {
		case !arsia.ValidAgentID(p.Agent):
			bad("trust.peers[%d].agent %q is not an ARSIA agent identifier", i, p.Agent)
		case seen[p.Agent]:
			bad("trust.peers[%d]: %s is listed twice", i, p.Agent)
		}
		seen[p.Agent] = true
		if !trustURL(p.URL) {
			bad("trust.peers[%d].url %q: want an https URL (http only for localhost)", i, p.URL)
		}
	}
	for _, f := range t.CAFiles {
		if f == "" {
			bad("trust.ca_files: empty path")
		}
	}
	for _, f := range t.QualifiedCAFiles {
		if f == "" {
			bad("trust.qualified_ca_files: empty path")
		}
	}
	for _, k := range t.RevokedKIDs {
		if a, label, ok := strings.Cut(k, "#"); !ok || label == "" || !arsia.ValidAgentID(a) {
			bad("trust.revoked_kids: %q is not a kid (agent id, \"#\", label)", k)
		}
	}
	for _, tp := range t.RevokedThumbprints {
		if len(tp) != 43 || strings.Trim(tp, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			bad("trust.revoked_thumbprints: %q is not an unpadded base64url SHA-256 thumbprint", tp)
		}
	}
	if err := t.MinTrustLevel.Policy().Validate(); err != nil {
		bad("trust.min_trust_level: %v", err)
	}
	if t.IdentityTTL < 0 {
		bad("trust.identity_ttl %s: negative", t.IdentityTTL)
	}
	if t.MinRefreshInterval < 0 {
		bad("trust.min_refresh_interval %s: negative", t.MinRefreshInterval)
	}
	errs = append(errs, checkAlgorithms("trust.algorithms", t.Algorithms)...)
	return errs
}

// Sender is an agent allowed to call, and what it may call.
type Sender struct {
	Agent string `yaml:"agent"`
	// Capabilities are capability patterns ("billing.*").
	Capabilities []string `yaml:"capabilities"`
	// CallbackURL, when set, receives the approval_decision and the final
	// reply of this sender's requests that waited for a human (https, or
	// http to localhost).
	CallbackURL string `yaml:"callback_url"`
	// Oversight are capability patterns, among those granted, whose every
	// call waits for a human approval whatever the message's profile.
	Oversight []string `yaml:"oversight"`
}

// Handler says how one capability runs. Type is echo, http, exec, mcp or
// a2a; the other fields belong to some types each: URL to http, a2a and mcp
// (Streamable HTTP), Command, Dir and Env to exec and mcp (stdio), Tools to
// mcp.
type Handler struct {
	Type    string   `yaml:"type"`
	URL     string   `yaml:"url"`
	Command []string `yaml:"command"`
	Dir     string   `yaml:"dir"`
	// Env is the complete environment of an exec or stdio mcp program
	// ("NAME=value"); its values are redacted when the configuration is
	// printed.
	Env     []string      `yaml:"env" secret:"env"`
	Timeout time.Duration `yaml:"timeout"`
	// Tools, for mcp, lists the tool names the handler may call (all
	// when empty).
	Tools []string `yaml:"tools"`
	// Headers, for http, a2a and an mcp url, are sent with every call to
	// the upstream, typically its credentials; each value is the value,
	// env:NAME or file:PATH (Secret).
	Headers map[string]string `yaml:"headers" secret:"true"`
	// MaxResponseBytes caps the upstream's answer (http, a2a) or the
	// program's standard output (exec); 0 means the handler's default.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// Poll, for a2a, is how often a task still working is asked about
	// (the handler's default when 0).
	Poll time.Duration `yaml:"poll"`
	// RequiredApprovals is the required_approvals of the capability's
	// ARSIA action descriptor: how many distinct reviewers must approve
	// each call (0 or 1: one). The quorum rules may ask for more.
	RequiredApprovals int `yaml:"required_approvals"`
	// RiskLevel, when set, is the risk_level (0 to 10) of the capability's
	// ARSIA action: an onboarding policy's max_risk_level is applied to it
	// (a capability above its max counts as prohibited).
	RiskLevel *int `yaml:"risk_level"`
}

// RiskLevels are the risk levels the handlers declare, by capability.
func RiskLevels(handlers map[string]Handler) map[string]int {
	out := map[string]int{}
	for name, h := range handlers {
		if h.RiskLevel != nil {
			out[name] = *h.RiskLevel
		}
	}
	return out
}

// HeaderValues resolves h.Headers (env:NAME, file:PATH) into the header
// the handler sends; nil when there are none.
func (h Handler) HeaderValues() (http.Header, error) {
	if len(h.Headers) == 0 {
		return nil, nil
	}
	out := http.Header{}
	names := make([]string, 0, len(h.Headers))
	for k := range h.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v, err := Secret(h.Headers[k])
		if err != nil {
			return nil, fmt.Errorf("headers.%s: %w", k, err)
		}
		out.Set(k, v)
	}
	return out, nil
}

// Tracing is where the gateway's spans go (see telemetry.Config, which
// says what each field means and which OTEL_* variable wins over it).
type Tracing struct {
	// Exporter is otlp or none (empty: otlp when an endpoint is set).
	Exporter string `yaml:"exporter"`
	// Protocol is http/protobuf (the default) or grpc.
	Protocol string `yaml:"protocol"`
	// Endpoint is the collector's base URL (http://collector:4318).
	Endpoint string `yaml:"endpoint"`
	// Headers go with every export (credentials).
	Headers map[string]string `yaml:"headers" secret:"true"`
	// ServiceName is service.name ("custos" when empty).
	ServiceName string `yaml:"service_name"`
	// SampleRatio samples that share of the traces that start here.
	SampleRatio *float64 `yaml:"sample_ratio"`
}

// Telemetry is t as the telemetry package takes it.
func (t Tracing) Telemetry() telemetry.Config {
	return telemetry.Config{Exporter: t.Exporter, Protocol: t.Protocol, Endpoint: t.Endpoint, Headers: t.Headers,
		ServiceName: t.ServiceName, SampleRatio: t.SampleRatio}
}

// Oversight tunes approvals.
type Oversight struct {
	// TTL is how long a reviewer has to decide.
	TTL time.Duration `yaml:"ttl"`
	// AllowSession offers "approve for this session" with constraints
	// pinning the capability.
	AllowSession bool `yaml:"allow_session"`
	// ReviewWithin is the deadline of a required_post_execution review
	// (required_within_24h: at most 24 h).
	ReviewWithin time.Duration `yaml:"review_within"`
	// Remember says which capabilities may be approved for a session or
	// persistently, with which constraints and for how long: entries
	// tried in order, the first covering a call's capability and
	// profile deciding; a call no entry covers is offered approve once
	// only. allow_session without remember is one entry remembering
	// every capability for a session.
	Remember []Remember `yaml:"remember"`
}

// Remember is one entry of oversight.remember.
type Remember struct {
	// Capabilities are globs on the capability name ("billing.*"); none
	// means every capability.
	Capabilities []string `yaml:"capabilities"`
	// Profiles are compliance profiles; none means every call.
	Profiles []string `yaml:"profiles"`
	// Scopes are session and/or persistent; none forbids remembering.
	Scopes []string `yaml:"scopes"`
	// MaxAge caps a remembered rule's life (none when zero).
	MaxAge time.Duration `yaml:"max_age"`
	// Constraints are AAIS scope constraints every remembered choice
	// carries and no rule may drop ({argument_range: {/amount: "value <=
	// 100"}}).
	Constraints map[string]any `yaml:"constraints"`
}

// RememberPolicy is oversight.remember as the AAIS authority holds it (nil
// when no approval may be remembered); profileOf reads a request's
// compliance profile.
func (o Oversight) RememberPolicy(profileOf func(*aais.Request) string) (*aais.RememberRules, error) {
	entries := o.Remember
	if len(entries) == 0 && o.AllowSession {
		entries = []Remember{{Scopes: []string{string(aais.ScopeSession)}}}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	p := &aais.RememberRules{ProfileOf: profileOf}
	for i, e := range entries {
		r := aais.RememberRule{Capabilities: e.Capabilities, Profiles: e.Profiles, MaxAge: e.MaxAge}
		for _, sc := range e.Scopes {
			r.Scopes = append(r.Scopes, aais.Scope(sc))
		}
		if len(e.Constraints) > 0 {
			r.Constraints = aais.Constraints{}
			for k, v := range e.Constraints {
				// Not json.Marshal: it would write "<" of a range as \u003c.
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(v); err != nil {
					return nil, fmt.Errorf("oversight.remember[%d].constraints.%s: %v", i, k, err)
				}
				r.Constraints[k] = bytes.TrimRight(b.Bytes(), "\n")
			}
		}
		p.Rules = append(p.Rules, r)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("oversight.remember: %w", err)
	}
	return p, nil
}

// Default returns the configuration of a fresh install.
func Default() Config {
	return Config{
		Listen:    DefaultListen,
		Data:      DefaultDataDir,
		Agent:     DefaultAgent,
		LogFormat: "text",
		MaxBody:   DefaultMaxBody,
		Oversight: Oversight{TTL: DefaultApprovalTT, ReviewWithin: 24 * time.Hour},
		RateLimit: RateLimit{PerSecond: 20, Burst: 40},
		Limits: Limits{
			PerAddress: PerAddressLimits{PerSecond: 100, Burst: 200, Tracked: 16384, Connections: 128,
				BodyBytesInFlight: 4 << 20, Exempt: []string{"127.0.0.0/8", "::1"}},
			Connections: 1024, BodyBytesInFlight: 16 << 20, BodyWait: 2 * time.Second, BodyTimeout: 10 * time.Second,
			HeaderBytes: 64 << 10,
		},
	}
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("config")

// Decode reads a YAML configuration over c. Unknown keys, duplicate keys and
// a second document are errors: a misspelt setting must not be ignored.
func (c *Config) Decode(r io.Reader, name string) error {
	data, err := io.ReadAll(io.LimitReader(r, limits.FileBytes+1))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrConfig, name, err)
	}
	if len(data) > limits.FileBytes {
		return fmt.Errorf("%w: %s: larger than 1 MiB", ErrConfig, name)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s: %w", ErrConfig, name, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s: more than one YAML document", ErrConfig, name)
	}
	return nil
}

// LoadFile reads the YAML file at path over c.
func (c *Config) LoadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer f.Close()
	return c.Decode(f, path)
}

// EnvVars maps the environment variables custos serve reads to settings.
var EnvVars = map[string]string{
	"CUSTOS_LISTEN":     "listen",
	"CUSTOS_DATA":       "data",
	"CUSTOS_AGENT":      "agent",
	"CUSTOS_PUBLIC_URL": "public_url",
	"CUSTOS_STORE":      "store",
	"CUSTOS_AUDIT_LOG":  "audit_log",
	"CUSTOS_INSTANCE":   "instance",
	"CUSTOS_LOG_FORMAT": "log_format",
	"CUSTOS_MAX_BODY":   "max_body",
}

// ApplyEnv applies the CUSTOS_* variables that are set (lookup is
// os.LookupEnv in production).
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	for env, key := range EnvVars {
		v, ok := lookup(env)
		if !ok || v == "" {
			continue
		}
		if err := c.Set(key, v); err != nil {
			return fmt.Errorf("%w (from %s)", err, env)
		}
	}
	return nil
}

// Set sets one top-level setting by its YAML key, as flags and the
// environment do.
func (c *Config) Set(key, value string) error {
	switch key {
	case "listen":
		c.Listen = value
	case "data":
		c.Data = value
	case "agent":
		c.Agent = value
	case "public_url":
		c.PublicURL = value
	case "store":
		c.Store = value
	case "audit_log":
		c.AuditLog = value
	case "instance":
		c.Instance = value
	case "log_format":
		c.LogFormat = value
	case "max_body":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: max_body %q is not a number of bytes", ErrConfig, value)
		}
		c.MaxBody = n
	default:
		return fmt.Errorf("%w: unknown setting %q", ErrConfig, key)
	}
	return nil
}

// Shared reports whether the gateway keeps its state in PostgreSQL, where
// several replicas share it (the approval store is a postgres:// URL).
func (c *Config) Shared() bool {
	return strings.HasPrefix(c.Store, "postgres://") || strings.HasPrefix(c.Store, "postgresql://")
}

// Check reports every problem with c at once, and fills the settings
// derived from others (PublicURL, Store, AuditLog paths). dataAbs makes
// Data absolute.
func (c *Config) Check() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen %q: %v", c.Listen, err)
	}
	if c.Data == "" {
		bad("data: empty")
	} else if abs, err := filepath.Abs(c.Data); err != nil {
		bad("data %q: %v", c.Data, err)
	} else {
		c.Data = abs
	}
	if !arsia.ValidAgentID(c.Agent) {
		bad("agent %q is not an ARSIA agent identifier (agent:org.name)", c.Agent)
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Listen
	} else if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("public_url %q: want an http or https URL", c.PublicURL)
	}
	if c.Store == "" {
		c.Store = filepath.Join(c.Data, "custos.db")
	}
	if c.Instance == "" {
		host, _ := os.Hostname()
		c.Instance = host + ":" + c.Data
	} else if len(c.Instance) > 256 || strings.ContainsFunc(c.Instance, unicode.IsControl) {
		bad("instance %q: at most 256 characters, no control characters", c.Instance)
	}
	for _, err := range c.Tokens.check(c.AuthorizationServer.Enabled) {
		bad("tokens: %v", err)
	}
	for _, err := range c.AuthorizationServer.check(c.Tokens.MaxLifetime) {
		bad("authorization_server: %v", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log_format %q: want text or json", c.LogFormat)
	}
	if c.MaxBody <= 0 || c.MaxBody > 64<<20 {
		bad("max_body %d: want 1 byte to 64 MiB", c.MaxBody)
	}
	errs = append(errs, c.Trust.check()...)
	for i, s := range c.Senders {
		if !arsia.ValidAgentID(s.Agent) {
			bad("senders[%d].agent %q is not an ARSIA agent identifier", i, s.Agent)
		}
		if len(s.Capabilities) == 0 {
			bad("senders[%d] (%s): no capabilities granted", i, s.Agent)
		}
		for _, p := range s.Capabilities {
			if strings.TrimSuffix(p, "*") == "" && p != "*" {
				bad("senders[%d]: empty capability pattern", i)
			}
		}
		for _, p := range s.Oversight {
			if strings.TrimSuffix(p, "*") == "" && p != "*" {
				bad("senders[%d].oversight: empty capability pattern", i)
			}
		}
		if s.CallbackURL != "" {
			if err := exchange.CheckCallbackURL(s.CallbackURL); err != nil {
				bad("senders[%d].callback_url: %v", i, err)
			}
		}
	}
	for name, h := range c.Handlers {
		if err := arsia.ValidateCapability(name); err != nil {
			bad("handlers: %q: %v", name, err)
		}
		switch h.Type {
		case "echo":
		case "http":
			if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("handlers.%s.url %q: want an http or https URL", name, h.URL)
			}
		case "exec":
			if len(h.Command) == 0 || !filepath.IsAbs(h.Command[0]) {
				bad("handlers.%s.command: want an absolute program path and its arguments", name)
			}
		case "mcp":
			switch {
			case (len(h.Command) == 0) == (h.URL == ""):
				bad("handlers.%s: an mcp handler wants either command (stdio) or url (Streamable HTTP)", name)
			case len(h.Command) > 0 && !filepath.IsAbs(h.Command[0]):
				bad("handlers.%s.command: want an absolute program path and its arguments", name)
			case h.URL != "":
				if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					bad("handlers.%s.url %q: want an http or https URL", name, h.URL)
				}
				if h.Dir != "" || len(h.Env) > 0 {
					bad("handlers.%s: dir and env apply to a command, not a url", name)
				}
			}
			for _, tool := range h.Tools {
				if tool == "" || strings.ContainsAny(tool, " \t\r\n") {
					bad("handlers.%s.tools: %q is not a tool name", name, tool)
				}
			}
		case "a2a":
			if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("handlers.%s.url %q: want an http or https URL", name, h.URL)
			}
		default:
			bad("handlers.%s.type %q: want echo, http or exec, or an mcp or a2a handler", name, h.Type)
		}
		if len(h.Tools) > 0 && h.Type != "mcp" {
			bad("handlers.%s.tools: only an mcp handler has tools", name)
		}
		if h.Timeout < 0 {
			bad("handlers.%s.timeout: negative", name)
		}
		if len(h.Headers) > 0 && h.Type != "http" && h.Type != "a2a" && (h.Type != "mcp" || h.URL == "") {
			bad("handlers.%s.headers: only http, a2a and an mcp url send headers", name)
		}
		for k, v := range h.Headers {
			if !validHeaderName(k) {
				bad("handlers.%s.headers: %q is not a header name", name, k)
			} else if _, err := Secret(v); err != nil {
				bad("handlers.%s.headers.%s: %v", name, k, err)
			}
		}
		if h.MaxResponseBytes < 0 || h.MaxResponseBytes > 64<<20 {
			bad("handlers.%s.max_response_bytes %d: want 0 (the default) to 64 MiB", name, h.MaxResponseBytes)
		}
		if h.MaxResponseBytes != 0 && h.Type != "http" && h.Type != "a2a" && h.Type != "exec" {
			bad("handlers.%s.max_response_bytes: only http, a2a and exec handlers have it", name)
		}
		if h.RiskLevel != nil && (*h.RiskLevel < arsia.MinRiskLevel || *h.RiskLevel > arsia.MaxRiskLevel) {
			bad("handlers.%s.risk_level %d: want %d to %d", name, *h.RiskLevel, arsia.MinRiskLevel, arsia.MaxRiskLevel)
		}
		if h.Poll < 0 || (h.Poll != 0 && h.Type != "a2a") {
			bad("handlers.%s.poll: only an a2a handler polls, and not negatively", name)
		}
	}
	errs = append(errs, c.checkQuorum()...)
	errs = append(errs, c.checkCA()...)
	errs = append(errs, c.checkState()...)
	errs = append(errs, c.checkOnboarding()...)
	errs = append(errs, c.checkRelay()...)
	for _, err := range c.checkReviewers() {
		bad("%v", err)
	}
	errs = append(errs, c.checkNotifications()...)
	if c.Oversight.TTL <= 0 || c.Oversight.TTL > arsia.MaxApprovalWindow {
		bad("oversight.ttl %s: want more than 0 and at most %s", c.Oversight.TTL, arsia.MaxApprovalWindow)
	}
	if c.Oversight.ReviewWithin <= 0 {
		bad("oversight.review_within %s: want more than 0", c.Oversight.ReviewWithin)
	}
	if _, err := c.Oversight.RememberPolicy(nil); err != nil {
		errs = append(errs, err)
	}
	if c.RateLimit.PerSecond < 0 || c.RateLimit.Burst < 0 || (c.RateLimit.PerSecond > 0 && c.RateLimit.Burst == 0) {
		bad("rate_limit: per_second and burst must be >= 0, and burst > 0 when a rate is set")
	}
	errs = append(errs, c.Limits.check(c.MaxBody)...)
	if err := c.Tracing.Telemetry().Check(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
}

// validHeaderName reports whether k is an HTTP header field name (an RFC
// 9110 token).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > unicode.MaxASCII || !(r == '!' || r >= '#' && r <= '\'' || r == '*' || r == '+' || r == '-' || r == '.' ||
			r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= '^' && r <= 'z' || r == '|' || r == '~') {
			return false
		}
	}
	return true
}
