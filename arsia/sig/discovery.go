package sig

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/custos-runtime/custos/jcs"
	"github.com/go-jose/go-jose/v4"
)

// WellKnownPath is where an ARSIA agent publishes its metadata, relative to
// its base URL.
const WellKnownPath = ".well-known/arsia"

// MaxMetadataBytes caps a discovery document.
const MaxMetadataBytes = 1 << 20

// AgentMetadata is the discovery document an agent serves at
// /.well-known/arsia. Only AgentID and JWKS are checked here; the rest is
// carried for callers.
type AgentMetadata struct {
	AgentID               string   `json:"agent_id"`
	Name                  string   `json:"name"`
	Version               string   `json:"version"`
	ProtocolVersion       string   `json:"protocol_version"`
	Inbox                 string   `json:"inbox"`
	JWKS                  string   `json:"jwks"`
	CapabilitiesSupported []string `json:"capabilities_supported"`
	MaxMessageBytes       int64    `json:"max_message_bytes"`
	RequestTimeoutMS      int64    `json:"request_timeout_ms"`
	ServerMin             string   `json:"server_min"`
	ServerMax             string   `json:"server_max"`
	// Raw is the whole document, for members not listed above.
	Raw map[string]any `json:"-"`
}

// FetchAgentMetadata reads baseURL/.well-known/arsia and checks that it
// describes agentID and names a JWKS URL. The JWKS URL is resolved against
// the metadata URL and must pass the same https rule as every other URL.
func FetchAgentMetadata(ctx context.Context, baseURL, agentID string, opts *HTTPJWKSOptions) (*AgentMetadata, error) {
	o := opts.withDefaults()
	base, err := o.checkURL(baseURL)
	if err != nil {
		return nil, err
	}
	metaURL := base.JoinPath(WellKnownPath)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metaURL.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeySource, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: fetching agent metadata: %w", ErrKeySource, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: agent metadata fetch returned status %d", ErrKeySource, resp.StatusCode)
	}
	body, err := readCapped(resp.Body, MaxMetadataBytes)
	if err != nil {
		return nil, err
	}
	doc, err := jcs.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("%w: agent metadata: %w", ErrKeySource, err)
	}
	raw, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: agent metadata is not an object", ErrKeySource)
	}
	var meta AgentMetadata
	if err := json.Unmarshal(body, &meta); err != nil {
		return nil, fmt.Errorf("%w: agent metadata: %w", ErrKeySource, err)
	}
	meta.Raw = raw
	if meta.AgentID != agentID {
		return nil, fmt.Errorf("%w: metadata at %s is for agent %q, want %q", ErrKeySource, metaURL, meta.AgentID, agentID)
	}
	if meta.JWKS == "" {
		return nil, fmt.Errorf("%w: agent metadata has no jwks URL", ErrKeySource)
	}
	ref, err := url.Parse(meta.JWKS)
	if err != nil {
		return nil, fmt.Errorf("%w: bad jwks URL: %w", ErrKeySource, err)
	}
	jwksURL := metaURL.ResolveReference(ref)
	if _, err := o.checkURL(jwksURL.String()); err != nil {
		return nil, err
	}
	meta.JWKS = jwksURL.String()
	return &meta, nil
}

// Discovery is a KeySource for one agent known by its agent id and base
// URL. On first use it reads the agent's metadata (FetchAgentMetadata),
// checks that agent_id is the expected agent, and from then on serves keys
// from an HTTPJWKS on the metadata's jwks URL, with the same caching,
// rotation and revocation rules. Only kids of the form "<agent id>#label"
// are ever looked up or accepted from the JWKS, so the agent cannot publish
// keys for anyone else. A failed discovery is retried no sooner than
// MinRefreshInterval.
type Discovery struct {
	baseURL, agentID string
	opts             HTTPJWKSOptions
	lock             chan struct{}

	meta        *AgentMetadata
	jwks        *HTTPJWKS
	lastAttempt time.Time
	lastErr     error
}

// NewDiscovery returns a Discovery for agentID served at baseURL. Nothing is
// fetched until the first Key or Metadata call. opts.KidPrefix is ignored.
func NewDiscovery(baseURL, agentID string, opts *HTTPJWKSOptions) (*Discovery, error) {
	o := opts.withDefaults()
	if _, err := o.checkURL(baseURL); err != nil {
		return nil, err
	}
	if agentID == "" || strings.Contains(agentID, "#") {
		return nil, fmt.Errorf("%w: bad agent id %q", ErrKeySource, agentID)
	}
	o.KidPrefix = agentID + "#"
	return &Discovery{baseURL: baseURL, agentID: agentID, opts: o, lock: make(chan struct{}, 1)}, nil
}

// Metadata returns the agent's metadata, discovering it if needed.
func (d *Discovery) Metadata(ctx context.Context) (*AgentMetadata, error) {
	if _, err := d.source(ctx); err != nil {
		return nil, err
	}
	return d.meta, nil
}

// Key returns the agent's key named kid.
func (d *Discovery) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	if label, ok := strings.CutPrefix(kid, d.opts.KidPrefix); !ok || label == "" {
		return nil, fmt.Errorf("%w: %q is not a kid of %s", ErrUnknownKid, kid, d.agentID)
	}
	src, err := d.source(ctx)
	if err != nil {
		return nil, err
	}
	return src.Key(ctx, kid)
}

// source returns the agent's HTTPJWKS, running discovery when it has not
// succeeded yet and the rate limit allows.
func (d *Discovery) source(ctx context.Context) (*HTTPJWKS, error) {
	select {
	case d.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrKeySource, ctx.Err())
	}
	defer func() { <-d.lock }()
	if d.jwks != nil {
		return d.jwks, nil
	}
	now := d.opts.Now()
	if d.lastErr != nil && now.Sub(d.lastAttempt) < d.opts.MinRefreshInterval {
		return nil, d.lastErr
	}
	meta, err := FetchAgentMetadata(ctx, d.baseURL, d.agentID, &d.opts)
	if err == nil {
		var src *HTTPJWKS
		if src, err = NewHTTPJWKS(meta.JWKS, &d.opts); err == nil {
			d.meta, d.jwks = meta, src
			return src, nil
		}
	}
	if ctx.Err() == nil {
		d.lastAttempt, d.lastErr = now, err
	}
	return nil, err
}
