// Package config is the configuration of custos serve: what the YAML file,
// the CUSTOS_* environment variables and the command-line flags say, in
// that order of increasing precedence, checked before anything starts.
//
// custos.example.yaml at the repository root documents every setting.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/custos-runtime/custos/arsia"
)

// Defaults.
const (
	DefaultListen     = "127.0.0.1:8080"
	DefaultDataDir    = "custos-data"
	DefaultAgent      = "agent:local.custos"
	DefaultMaxBody    = 1 << 20
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
	// Store is the approval store location (see store.Parse); empty means
	// approvals.db in Data.
	Store string `yaml:"store"`
	// AuditLog is the audit log file; empty means audit.db in Data.
	AuditLog string `yaml:"audit_log"`
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
	// Oversight tunes the approvals the compliance profiles demand.
	Oversight Oversight `yaml:"oversight"`
	// RateLimit bounds each sender's request rate.
	RateLimit RateLimit `yaml:"rate_limit"`
	// Tokens says which access tokens the inbox demands (tokens.go).
	Tokens Tokens `yaml:"tokens"`
}

// RateLimit bounds each sender: a bucket of Burst requests refilled at
// PerSecond. PerSecond 0 disables the limit.
type RateLimit struct {
	PerSecond float64 `yaml:"per_second"`
	Burst     int     `yaml:"burst"`
}

// Trust lists where senders' public keys come from.
type Trust struct {
	// JWKSFiles are local JWKS files (re-read when they change).
	JWKSFiles []string `yaml:"jwks_files"`
	// JWKSURLs are remote JWKS documents (HTTPS, cached per Cache-Control).
	JWKSURLs []string `yaml:"jwks_urls"`
}

// Sender is an agent allowed to call, and what it may call.
type Sender struct {
	Agent string `yaml:"agent"`
	// Capabilities are capability patterns ("billing.*").
	Capabilities []string `yaml:"capabilities"`
}

// Handler says how one capability runs. Type is echo, http or exec; the
// other fields belong to one type each.
type Handler struct {
	Type    string        `yaml:"type"`
	URL     string        `yaml:"url"`
	Command []string      `yaml:"command"`
	Dir     string        `yaml:"dir"`
	Env     []string      `yaml:"env"`
	Timeout time.Duration `yaml:"timeout"`
}

// Reviewer is a person (or program) who may decide approvals.
type Reviewer struct {
	// ID is recorded as the actor of their decisions.
	ID          string `yaml:"id"`
	DisplayName string `yaml:"display_name"`
	// TokenSHA256 is "sha256:" + hex SHA-256 of their API token.
	TokenSHA256 string `yaml:"token_sha256"`
}

// Oversight tunes approvals.
type Oversight struct {
	// TTL is how long a reviewer has to decide.
	TTL time.Duration `yaml:"ttl"`
	// AllowSession offers "approve for this session" with constraints
	// pinning the capability.
	AllowSession bool `yaml:"allow_session"`
}

// Default returns the configuration of a fresh install.
func Default() Config {
	return Config{
		Listen:    DefaultListen,
		Data:      DefaultDataDir,
		Agent:     DefaultAgent,
		LogFormat: "text",
		MaxBody:   DefaultMaxBody,
		Oversight: Oversight{TTL: DefaultApprovalTT},
		RateLimit: RateLimit{PerSecond: 20, Burst: 40},
	}
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("config")

// Decode reads a YAML configuration over c. Unknown keys, duplicate keys and
// a second document are errors: a misspelt setting must not be ignored.
func (c *Config) Decode(r io.Reader, name string) error {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrConfig, name, err)
	}
	if len(data) > 1<<20 {
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
		c.Store = filepath.Join(c.Data, "approvals.db")
	}
	if c.AuditLog == "" {
		c.AuditLog = filepath.Join(c.Data, "audit.db")
	}
	for _, err := range c.Tokens.check() {
		bad("tokens: %v", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log_format %q: want text or json", c.LogFormat)
	}
	if c.MaxBody <= 0 || c.MaxBody > 64<<20 {
		bad("max_body %d: want 1 byte to 64 MiB", c.MaxBody)
	}
	for _, u := range c.Trust.JWKSURLs {
		if p, err := url.Parse(u); err != nil || p.Scheme != "https" || p.Host == "" {
			bad("trust.jwks_urls: %q is not an https URL", u)
		}
	}
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
		default:
			bad("handlers.%s.type %q: want echo, http or exec", name, h.Type)
		}
		if h.Timeout < 0 {
			bad("handlers.%s.timeout: negative", name)
		}
	}
	seen := map[string]bool{}
	for i, r := range c.Reviewers {
		h, ok := strings.CutPrefix(r.TokenSHA256, "sha256:")
		switch {
		case r.ID == "":
			bad("reviewers[%d]: no id", i)
		case !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "":
			bad("reviewers[%d] (%s): token_sha256 must be \"sha256:\" and 64 lower-case hex digits (custos serve token prints one)", i, r.ID)
		case seen[r.TokenSHA256]:
			bad("reviewers[%d] (%s): the same token as another reviewer", i, r.ID)
		}
		seen[r.TokenSHA256] = true
	}
	if c.Oversight.TTL <= 0 || c.Oversight.TTL > arsia.MaxApprovalWindow {
		bad("oversight.ttl %s: want more than 0 and at most %s", c.Oversight.TTL, arsia.MaxApprovalWindow)
	}
	if c.RateLimit.PerSecond < 0 || c.RateLimit.Burst < 0 || (c.RateLimit.PerSecond > 0 && c.RateLimit.Burst == 0) {
		bad("rate_limit: per_second and burst must be >= 0, and burst > 0 when a rate is set")
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
}
