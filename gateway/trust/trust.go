// Package trust is the identity stage of the gateway: where senders' keys
// come from, which of them are revoked, how strongly each sender's identity
// is established (the ARSIA certificate trust levels L1-L3) and whether that
// is enough for the call.
//
// One Store, built by New from a Config, is both the gateway's key source
// (sig.KeySource: static JWKS files, remote JWKS URLs and discovered peers)
// and its trust policy (gateway.TrustPolicy):
//
//   - A discovered peer is an agent id and a base URL. Its metadata
//     (GET {url}/.well-known/arsia, whose agent_id must be the configured
//     agent) names its JWKS, which is cached per Cache-Control and fetched
//     again for an unknown kid (sig.Discovery). Only kids "<agent>#label"
//     are taken from it, and the kid of a configured peer is only ever
//     resolved through that peer.
//   - A peer's identity record (GET {url}/.well-known/arsia/identity) is
//     cached for Config.IdentityTTL. Its X-ARSIA-Sig header, when present,
//     must be a valid Ed25519 signature over the SHA-256 of the body by a
//     key of the peer's JWKS. Its certificate chain, verified against the
//     configured CA roots with the agent id as a SAN URI and the signing
//     key as the leaf key, makes the sender L2, and L3 with QcStatements.
//     Senders whose keys come from JWKS files or URLs are L1.
//   - Revoked kids and key thumbprints are refused with certificate_revoked
//     even while a JWKS still publishes them, by the key source itself
//     (Key): no key the Store hands out is one it would refuse.
//   - The minimum trust level is the highest of a default, the entry of the
//     effective compliance profile and the entries of the capability
//     patterns that cover the call; a sender below it gets forbidden with
//     details {reason: insufficient_trust_level, required, actual}.
//
// Everything fails closed: a fetch that fails with no fresh cached value
// refuses the request and says why. Remote URLs must be https, except
// http://localhost and loopback addresses (tests, sidecars).
package trust

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/identity"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/internal/limits"
)

// DefaultIdentityTTL is how long a fetched identity record is used before
// it is fetched again.
const DefaultIdentityTTL = time.Hour

// DefaultTimeout bounds every HTTP request (discovery, JWKS, identity).
const DefaultTimeout = 10 * time.Second

// MaxPEMFileBytes caps a CA file.
const MaxPEMFileBytes = limits.FileBytes

// ErrConfig wraps every error of New.
var ErrConfig = errors.New("trust: invalid configuration")

// Peer is an agent whose keys and identity are discovered from its base URL.
type Peer struct {
	// Agent is the peer's ARSIA agent id (agent:acme.billing).
	Agent string
	// URL is its base URL; the metadata is at URL/.well-known/arsia.
	URL string
}

// Config says where keys come from and how much trust is demanded.
type Config struct {
	// JWKSFiles are local JWKS files, read again when they change.
	JWKSFiles []string
	// JWKSURLs are remote JWKS documents, cached per Cache-Control.
	JWKSURLs []string
	// Peers are discovered agents.
	Peers []Peer
	// CAFiles are PEM files of the CA certificates whose chains count for
	// L2 and L3. Without any, every sender is L1.
	CAFiles []string
	// QualifiedCAFiles, when set, are PEM files of the roots of qualified
	// trust service providers: the only chains that can be L3 (a
	// QcStatements leaf under another root is L2). They count for L2 too.
	// When empty, a QcStatements leaf under any root is L3.
	QualifiedCAFiles []string
	// Roots are CA certificates anchored besides CAFiles' (the gateway's
	// own issuing CA, say).
	Roots []*x509.Certificate
	// CheckRevocation, when set, is asked about every chain that verifies
	// (leaf first): an error wrapping identity.ErrCertificateRevoked is
	// certificate_revoked, any other error fails closed
	// (certificate_invalid).
	CheckRevocation func(chain []*x509.Certificate) error
	// RevokedKIDs are kids refused whatever their JWKS says.
	RevokedKIDs []string
	// RevokedThumbprints are RFC 7638 SHA-256 JWK thumbprints (unpadded
	// base64url) of keys refused whatever kid they are published under.
	RevokedThumbprints []string
	// Policy is the minimum trust level per capability and per profile.
	Policy identity.Policy
	// IdentityTTL is how long an identity record is cached (zero means
	// DefaultIdentityTTL).
	IdentityTTL time.Duration
	// RequireIdentitySignature refuses a peer's identity record that has
	// no X-ARSIA-Sig header (a present header is always verified).
	RequireIdentitySignature bool
}

// Options are the runtime dependencies of a Store; nil means defaults.
type Options struct {
	// Client performs the requests (a client with DefaultTimeout when
	// nil). Its transport is wrapped so that only https and loopback http
	// URLs are ever requested, redirects included.
	Client *http.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// MinRefreshInterval is the least time between two fetches of the same
	// document after a failure or for an unknown kid (30 s when zero).
	MinRefreshInterval time.Duration
}

// Store resolves senders' keys and decides whether they are trusted enough.
// It is safe for concurrent use.
type Store struct {
	now        func() time.Time
	client     *http.Client
	minRefresh time.Duration
	static     sig.KeySources
	peers      map[string]*peer
	roots      *x509.CertPool
	qualified  *x509.CertPool
	revocation func([]*x509.Certificate) error
	revokedKID map[string]bool
	revokedTP  map[string]bool
	policy     identity.Policy
	ttl        time.Duration
	requireSig bool
}

var _ gateway.TrustPolicy = (*Store)(nil)
var _ sig.KeySource = (*Store)(nil)

// New checks cfg and builds a Store. Nothing is fetched until a key or a
// trust level is needed; CA files are read now.
func New(cfg Config, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Store{
		now:        o.Now,
		minRefresh: o.MinRefreshInterval,
		peers:      map[string]*peer{},
		revokedKID: map[string]bool{},
		revokedTP:  map[string]bool{},
		policy:     cfg.Policy,
		ttl:        cfg.IdentityTTL,
		requireSig: cfg.RequireIdentitySignature,
		revocation: cfg.CheckRevocation,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.minRefresh <= 0 {
		s.minRefresh = sig.DefaultMinRefreshInterval
	}
	if s.ttl == 0 {
		s.ttl = DefaultIdentityTTL
	}
	if s.ttl < 0 {
		return nil, fmt.Errorf("%w: identity_ttl is negative", ErrConfig)
	}
	s.client = guardedClient(o.Client)
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("%w: min_trust_level: %w", ErrConfig, err)
	}
	hopts := &sig.HTTPJWKSOptions{Client: s.client, Now: s.now, MinRefreshInterval: s.minRefresh,
		// The guarded transport enforces https-or-loopback on every request.
		AllowHTTPInsecure: true}
	for _, f := range cfg.JWKSFiles {
		if f == "" {
			return nil, fmt.Errorf("%w: empty jwks_files entry", ErrConfig)
		}
		s.static = append(s.static, sig.NewJWKSFile(f))
	}
	for _, u := range cfg.JWKSURLs {
		if err := CheckURL(u); err != nil {
			return nil, fmt.Errorf("%w: jwks_urls: %w", ErrConfig, err)
		}
		src, err := sig.NewHTTPJWKS(u, hopts)
		if err != nil {
			return nil, fmt.Errorf("%w: jwks_urls: %w", ErrConfig, err)
		}
		s.static = append(s.static, src)
	}
	for i, p := range cfg.Peers {
		if !arsia.ValidAgentID(p.Agent) {
			return nil, fmt.Errorf("%w: peers[%d]: %q is not an ARSIA agent id", ErrConfig, i, p.Agent)
		}
		if err := CheckURL(p.URL); err != nil {
			return nil, fmt.Errorf("%w: peers[%d] (%s): %w", ErrConfig, i, p.Agent, err)
		}
		if _, dup := s.peers[p.Agent]; dup {
			return nil, fmt.Errorf("%w: peers[%d]: %s is configured twice", ErrConfig, i, p.Agent)
		}
		disc, err := sig.NewDiscovery(p.URL, p.Agent, hopts)
		if err != nil {
			return nil, fmt.Errorf("%w: peers[%d] (%s): %w", ErrConfig, i, p.Agent, err)
		}
		s.peers[p.Agent] = &peer{agent: p.Agent, base: p.URL, disc: disc, client: s.client, lock: make(chan struct{}, 1)}
	}
	if len(cfg.QualifiedCAFiles) > 0 {
		s.qualified = x509.NewCertPool()
		for _, f := range cfg.QualifiedCAFiles {
			if err := addPEMFile(s.qualified, f); err != nil {
				return nil, fmt.Errorf("%w: qualified_ca_files: %w", ErrConfig, err)
			}
		}
	}
	if len(cfg.CAFiles) > 0 || len(cfg.Roots) > 0 || len(cfg.QualifiedCAFiles) > 0 {
		s.roots = x509.NewCertPool()
		for _, f := range append(slices.Clone(cfg.CAFiles), cfg.QualifiedCAFiles...) {
			if err := addPEMFile(s.roots, f); err != nil {
				return nil, fmt.Errorf("%w: ca_files: %w", ErrConfig, err)
			}
		}
		for _, c := range cfg.Roots {
			if c == nil || !c.IsCA {
				return nil, fmt.Errorf("%w: a root is not a CA certificate", ErrConfig)
			}
			s.roots.AddCert(c)
		}
	}
	for _, k := range cfg.RevokedKIDs {
		if a, label, ok := strings.Cut(k, "#"); !ok || label == "" || !arsia.ValidAgentID(a) {
			return nil, fmt.Errorf("%w: revoked_kids: %q is not a kid (agent id, \"#\", label)", ErrConfig, k)
		}
		s.revokedKID[k] = true
	}
	for _, t := range cfg.RevokedThumbprints {
		if b, err := base64.RawURLEncoding.DecodeString(t); err != nil || len(b) != 32 {
			return nil, fmt.Errorf("%w: revoked_thumbprints: %q is not an unpadded base64url SHA-256 thumbprint", ErrConfig, t)
		}
		s.revokedTP[t] = true
	}
	return s, nil
}

// addPEMFile adds every CERTIFICATE block of a PEM file; a file without
// one, or with an unparseable one, is an error.
func addPEMFile(pool *x509.CertPool, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := readCapped(f, MaxPEMFileBytes)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !c.IsCA {
			return fmt.Errorf("%s: certificate %q is not a CA certificate", path, c.Subject)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s: no PEM certificate", path)
	}
	return nil
}

// CheckURL accepts an absolute https URL without user information, or an
// http URL whose host is localhost or a loopback address.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("bad URL %q: %w", raw, err)
	}
	return checkURL(u)
}

func checkURL(u *url.URL) error {
	switch {
	case u.Host == "" || u.User != nil:
		return fmt.Errorf("URL %q must be absolute, without user info", u.Redacted())
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && arsia.IsLoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("URL %q must be https (plain http only for localhost)", u.Redacted())
}

// guardTransport refuses every request, redirects included, to a URL that
// CheckURL would refuse.
type guardTransport struct{ next http.RoundTripper }

func (g guardTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := checkURL(r.URL); err != nil {
		return nil, err
	}
	return g.next.RoundTrip(r)
}

func guardedClient(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	if out.Timeout <= 0 {
		out.Timeout = DefaultTimeout
	}
	next := out.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out.Transport = guardTransport{next: next}
	return &out
}

// Key implements sig.KeySource, and is the only key source the Store
// offers: it returns only keys it would accept. A kid or key thumbprint the
// receiver revoked (revoked_kids, revoked_thumbprints) is refused here,
// while the key is resolved, so sig.Verify fails before it checks anything
// else, whatever uses the Store and whether or not Check runs after it.
//
// The refusal wraps sig.ErrRevokedKey (so errors.Is(err,
// sig.ErrUnauthorized) holds and sig.Verify passes it on unchanged) and an
// *arsia.Error with code certificate_revoked and details {reason}, the
// answer ARSIA gives (Identity §6.4.3): find it with errors.As.
func (s *Store) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	k, err := s.resolve(ctx, kid)
	if err != nil {
		return nil, err
	}
	if reason := s.revoked(k); reason != "" {
		return nil, fmt.Errorf("%w: %w", sig.ErrRevokedKey, certError(arsia.CodeCertificateRevoked, reason, nil))
	}
	return k, nil
}

// resolve finds the key named kid: through the peer when the kid's agent
// is a configured peer, otherwise through the JWKS files and URLs.
func (s *Store) resolve(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	agent, label, ok := strings.Cut(kid, "#")
	if !ok || label == "" || !arsia.ValidAgentID(agent) {
		return nil, fmt.Errorf("%w: %q is not a kid (agent id, \"#\", label)", sig.ErrUnknownKid, kid)
	}
	var (
		k   *jose.JSONWebKey
		err error
	)
	if p := s.peers[agent]; p != nil {
		k, err = p.disc.Key(ctx, kid)
	} else {
		k, err = s.static.Key(ctx, kid)
	}
	if err != nil {
		return nil, err
	}
	if k == nil || k.KeyID != kid {
		return nil, fmt.Errorf("%w: %q", sig.ErrUnknownKid, kid)
	}
	return k, nil
}

// EncryptionKey implements sig.EncryptionKeySource: agent's key with
// "use": "enc" from the peer's discovered JWKS when agent is a configured
// peer, otherwise from the JWKS files and URLs. A key whose kid or
// thumbprint the receiver revoked is not used: the error wraps
// sig.ErrRevokedKey.
func (s *Store) EncryptionKey(ctx context.Context, agent string) (*jose.JSONWebKey, error) {
	if !arsia.ValidAgentID(agent) {
		return nil, fmt.Errorf("%w: %q is not an agent id", sig.ErrNoEncryptionKey, agent)
	}
	var (
		k   *jose.JSONWebKey
		err error
	)
	if p := s.peers[agent]; p != nil {
		k, err = p.disc.EncryptionKey(ctx, agent)
	} else {
		k, err = s.static.EncryptionKey(ctx, agent)
	}
	if err != nil {
		return nil, err
	}
	if reason := s.revoked(k); reason != "" {
		return nil, fmt.Errorf("%w: %s", sig.ErrRevokedKey, strings.Replace(reason, "signing key", "encryption key", 1))
	}
	return k, nil
}

var _ sig.EncryptionKeySource = (*Store)(nil)

// revoked returns why k is revoked by the receiver's lists, or "".
func (s *Store) revoked(k *jose.JSONWebKey) string {
	if s.revokedKID[k.KeyID] {
		return "the signing key " + k.KeyID + " has been revoked"
	}
	if len(s.revokedTP) > 0 {
		if tp, err := k.Thumbprint(crypto.SHA256); err == nil && s.revokedTP[base64.RawURLEncoding.EncodeToString(tp)] {
			return "the signing key (thumbprint " + base64.RawURLEncoding.EncodeToString(tp) + ") has been revoked"
		}
	}
	return ""
}

// Check implements gateway.TrustPolicy: the sender's key is not revoked,
// its identity layers agree, its certificate chain (if any) is valid, and
// its trust level meets the minimum for the call.
func (s *Store) Check(ctx context.Context, q gateway.TrustQuery) *arsia.Error {
	if e := asARSIA(identity.CheckLayers(q.Sender, q.KID, nil)); e != nil {
		return e
	}
	k, err := s.resolve(ctx, q.KID)
	if err != nil {
		return &arsia.Error{Code: arsia.CodeUnauthorized, Description: "The signing key could not be resolved.", Err: err}
	}
	if reason := s.revoked(k); reason != "" {
		return certError(arsia.CodeCertificateRevoked, reason, nil)
	}
	level, e := s.Level(ctx, q.Sender, k)
	if e != nil {
		return e
	}
	required := max(identity.L1, s.policy.Required([]string{q.Capability}, q.Profile))
	if level >= required {
		return nil
	}
	details := map[string]any{"reason": "insufficient_trust_level", "required": required.String(), "actual": level.String()}
	if q.Profile != "" {
		details["profile"] = q.Profile
	}
	return &arsia.Error{
		Code: arsia.CodeForbidden,
		Description: fmt.Sprintf("%s requires identity trust level %s; the sender %s is %s.",
			q.Capability, required, q.Sender, level),
		Details: details,
		Err:     fmt.Errorf("%w: have %v, need %v", identity.ErrInsufficientTrust, level, required),
	}
}

// Level computes the trust level of sender signing with key k: L1 for a
// sender that is not a discovered peer, or a peer whose identity record
// carries no certificate chain (or when no CA is configured); L2 or L3 for
// a chain that verifies. A chain that is present and fails, an identity
// record that disagrees with the sender or cannot be obtained are errors.
func (s *Store) Level(ctx context.Context, sender string, k *jose.JSONWebKey) (identity.TrustLevel, *arsia.Error) {
	p := s.peers[sender]
	if p == nil {
		return identity.L1, nil
	}
	rec, e := p.record(ctx, s)
	if e != nil {
		return identity.L1, e
	}
	if rec == nil {
		return identity.L1, nil // the peer publishes no identity record
	}
	kid := ""
	if k != nil {
		kid = k.KeyID
	}
	if e := asARSIA(identity.CheckLayers(sender, kid, rec)); e != nil {
		return identity.L1, e
	}
	now := s.now()
	if err := rec.ValidAt(now); err != nil {
		return identity.L1, certError(arsia.CodeCertificateExpired, "the identity record is outside its validity period", err)
	}
	if len(rec.CertificateChain) == 0 || s.roots == nil {
		return identity.L1, nil
	}
	var pub crypto.PublicKey
	if k != nil {
		pub = k.Key
	}
	if pub == nil {
		return identity.L1, certError(arsia.CodeKeyMismatch, "no signing key to match the certificate", nil)
	}
	level, err := identity.VerifyChain(rec.CertificateChain, identity.VerifyOptions{
		Roots: s.roots, Now: now, AgentID: sender, SigningKey: pub, CheckRevocation: s.revocation,
		QualifiedRoots: s.qualified,
	})
	if err != nil {
		if e := asARSIA(err); e != nil {
			return identity.L1, e
		}
		return identity.L1, &arsia.Error{Code: arsia.CodeInternalError, Description: "The certificate chain could not be checked.", Err: err}
	}
	return level, nil
}

// asARSIA returns err as an *arsia.Error, or nil when err is nil or not one.
func asARSIA(err error) *arsia.Error {
	var e *arsia.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// certError builds a certificate_* or key_mismatch error with the reason
// the peer must be told.
func certError(code, reason string, cause error) *arsia.Error {
	info, _ := arsia.LookupError(code)
	err := errors.New("trust: " + reason)
	if cause != nil {
		err = fmt.Errorf("trust: %s: %w", reason, cause)
	}
	return &arsia.Error{Code: code, Description: info.Description, Details: map[string]any{"reason": reason}, Err: err}
}
