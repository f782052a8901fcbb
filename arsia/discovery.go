package arsia

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// This file builds the documents an agent publishes for discovery (Core
// §7): the AgentMetadata at GET /.well-known/arsia, the JWKS at
// /.well-known/arsia/jwks.json and the capability listing at
// /.well-known/arsia/capabilities. Builders validate before they return:
// a document this package builds is one peers can rely on.

// Discovery sentinel errors.
var (
	ErrInvalidDiscovery = errors.New("arsia: invalid discovery document")
	ErrInvalidJWK       = errors.New("arsia: invalid JWK")
	ErrInvalidListing   = errors.New("arsia: invalid capability listing")
)

// Discovery defaults (Core §7.1, §7.2); max_message_bytes defaults to
// DefaultMaxMessageBytes.
const (
	DefaultRequestTimeoutMS = 30000
	DefaultListingLimit     = 20
	MaxListingLimit         = 100
)

// Features are the optional protocol features an agent announces.
type Features struct {
	AsyncResponses bool `json:"async_responses"`
	BatchRequests  bool `json:"batch_requests"`
	Encryption     bool `json:"encryption"`
}

// RateLimits are the limits an agent announces. A zero member is not
// announced (the schema's minimum is 1).
type RateLimits struct {
	RequestsPerMinute int `json:"requests_per_minute,omitempty"`
	BurstSize         int `json:"burst_size,omitempty"`
}

// AgentMetadata is the discovery document served at GET /.well-known/arsia
// (Core §7.1). Build one with NewAgentMetadata, which fills the defaults
// and validates; the zero values of the optional members (nil pointers and
// slices) mean "not announced" and are left out of the JSON.
type AgentMetadata struct {
	AgentID string
	Name    string
	// Version is the agent's software version, not the protocol's.
	Version string
	// ProtocolVersion, ServerMin and ServerMax default to ProtocolVersion
	// ("1.0").
	ProtocolVersion string
	// Inbox and JWKS are absolute https URLs (http only for a loopback
	// host, for local development).
	Inbox string
	JWKS  string
	// CapabilitiesSupported may hold wildcard entries ("orders.*"), as the
	// reference SDK allows; see docs/identity.md for the schema conflict.
	// Nil is published as [].
	CapabilitiesSupported []string
	// MaxMessageBytes defaults to DefaultMaxMessageBytes and
	// RequestTimeoutMS to DefaultRequestTimeoutMS when zero.
	MaxMessageBytes  int64
	RequestTimeoutMS int64
	ServerMin        string
	ServerMax        string

	Features   *Features
	RateLimits *RateLimits
	// ComplianceProfilesSupported is announced when non-nil, even empty.
	ComplianceProfilesSupported []string
}

// NewAgentMetadata returns m with its defaults filled in, or an error
// wrapping ErrInvalidDiscovery that names the first bad member.
func NewAgentMetadata(m AgentMetadata) (AgentMetadata, error) {
	if m.ProtocolVersion == "" {
		m.ProtocolVersion = ProtocolVersion
	}
	if m.ServerMin == "" {
		m.ServerMin = ProtocolVersion
	}
	if m.ServerMax == "" {
		m.ServerMax = ProtocolVersion
	}
	if m.MaxMessageBytes == 0 {
		m.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if m.RequestTimeoutMS == 0 {
		m.RequestTimeoutMS = DefaultRequestTimeoutMS
	}
	m.CapabilitiesSupported = slices.Clone(m.CapabilitiesSupported)
	if m.CapabilitiesSupported == nil {
		m.CapabilitiesSupported = []string{}
	}
	if m.ComplianceProfilesSupported != nil {
		m.ComplianceProfilesSupported = append([]string{}, m.ComplianceProfilesSupported...)
	}
	if m.Features != nil {
		f := *m.Features
		m.Features = &f
	}
	if m.RateLimits != nil {
		r := *m.RateLimits
		m.RateLimits = &r
	}
	if err := m.Validate(); err != nil {
		return AgentMetadata{}, err
	}
	return m, nil
}

// Validate checks m as published: every required member present and well
// formed, server_min ≤ protocol_version ≤ server_max, no duplicate
// capability or profile.
func (m AgentMetadata) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidDiscovery}, args...)...)
	}
	if _, err := ParseAgentID(m.AgentID); err != nil {
		return bad("agent_id: %w", err)
	}
	if m.Name == "" {
		return bad("name is empty")
	}
	if m.Version == "" {
		return bad("version is empty")
	}
	if err := checkPublishedURL(m.Inbox); err != nil {
		return bad("inbox: %v", err)
	}
	if err := checkPublishedURL(m.JWKS); err != nil {
		return bad("jwks: %v", err)
	}
	versions := map[string]Version{}
	for _, f := range []struct{ name, value string }{
		{"protocol_version", m.ProtocolVersion}, {"server_min", m.ServerMin}, {"server_max", m.ServerMax},
	} {
		v, err := ParseVersion(f.value)
		if err != nil {
			return bad("%s: %w", f.name, err)
		}
		versions[f.name] = v
	}
	if versions["server_min"].Compare(versions["server_max"]) > 0 {
		return bad("server_min %s is above server_max %s", m.ServerMin, m.ServerMax)
	}
	if p := versions["protocol_version"]; p.Compare(versions["server_min"]) < 0 || p.Compare(versions["server_max"]) > 0 {
		return bad("protocol_version %s is outside server_min..server_max", m.ProtocolVersion)
	}
	if m.CapabilitiesSupported == nil {
		return bad("capabilities_supported is missing")
	}
	for i, c := range m.CapabilitiesSupported {
		if err := ValidateCapability(c); err != nil {
			return bad("capabilities_supported[%d]: %w", i, err)
		}
		if slices.Contains(m.CapabilitiesSupported[:i], c) {
			return bad("capabilities_supported[%d]: duplicate %s", i, pyRepr(c))
		}
	}
	if m.MaxMessageBytes < 1 {
		return bad("max_message_bytes %d is below 1", m.MaxMessageBytes)
	}
	if m.RequestTimeoutMS < 0 {
		return bad("request_timeout_ms %d is negative", m.RequestTimeoutMS)
	}
	if r := m.RateLimits; r != nil && (r.RequestsPerMinute < 0 || r.BurstSize < 0) {
		return bad("rate_limits must be positive")
	}
	for i, p := range m.ComplianceProfilesSupported {
		if p == "" {
			return bad("compliance_profiles_supported[%d] is empty", i)
		}
		if slices.Contains(m.ComplianceProfilesSupported[:i], p) {
			return bad("compliance_profiles_supported[%d]: duplicate %s", i, pyRepr(p))
		}
	}
	return nil
}

// Map returns the document in the generic JSON form, with only the
// optional members that m announces.
func (m AgentMetadata) Map() map[string]any {
	caps := m.CapabilitiesSupported
	if caps == nil {
		caps = []string{}
	}
	doc := map[string]any{
		"agent_id":               m.AgentID,
		"name":                   m.Name,
		"version":                m.Version,
		"protocol_version":       m.ProtocolVersion,
		"inbox":                  m.Inbox,
		"jwks":                   m.JWKS,
		"capabilities_supported": anyStrings(caps),
		"max_message_bytes":      m.MaxMessageBytes,
		"request_timeout_ms":     m.RequestTimeoutMS,
		"server_min":             m.ServerMin,
		"server_max":             m.ServerMax,
	}
	if f := m.Features; f != nil {
		doc["features"] = map[string]any{
			"async_responses": f.AsyncResponses,
			"batch_requests":  f.BatchRequests,
			"encryption":      f.Encryption,
		}
	}
	if r := m.RateLimits; r != nil {
		limits := map[string]any{}
		if r.RequestsPerMinute != 0 {
			limits["requests_per_minute"] = r.RequestsPerMinute
		}
		if r.BurstSize != 0 {
			limits["burst_size"] = r.BurstSize
		}
		doc["rate_limits"] = limits
	}
	if m.ComplianceProfilesSupported != nil {
		doc["compliance_profiles_supported"] = anyStrings(m.ComplianceProfilesSupported)
	}
	return doc
}

// MarshalJSON encodes Map.
func (m AgentMetadata) MarshalJSON() ([]byte, error) { return json.Marshal(m.Map()) }

// checkPublishedURL accepts an absolute https URL without user info or
// fragment, or http on a loopback host.
func checkPublishedURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s is not a URL", pyRepr(raw))
	}
	switch {
	case u.Host == "" || u.User != nil || u.Fragment != "":
		return fmt.Errorf("%s must be an absolute URL without user info or fragment", pyRepr(raw))
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && IsLoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%s must use https", pyRepr(raw))
}

// IsLoopbackHost reports whether host (a URL's Hostname) is localhost or
// a loopback address: the one place plain http is acceptable for an
// agent's endpoints (local agents, sidecars, tests).
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// JWK "use" values.
const (
	UseSignature  = "sig"
	UseEncryption = "enc"
)

// JWK is one public key of an agent's JWKS (Core §7.3, Identity §2): an
// Ed25519 or P-256 signing key, or an X25519 or P-256 encryption key. The
// kid is "<agent id>#<label>". A JWK never carries private members.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	X   string `json:"x"`
	// Y is set for EC keys only.
	Y   string `json:"y,omitempty"`
	Use string `json:"use"`
}

// NewSigningJWK returns the signing JWK of pub: an ed25519.PublicKey
// (OKP/Ed25519) or a P-256 *ecdsa.PublicKey (EC/P-256).
func NewSigningJWK(kid string, pub crypto.PublicKey) (JWK, error) {
	var k JWK
	switch p := pub.(type) {
	case ed25519.PublicKey:
		if len(p) != ed25519.PublicKeySize {
			return JWK{}, fmt.Errorf("%w: Ed25519 key of %d bytes", ErrInvalidJWK, len(p))
		}
		k = JWK{Kty: "OKP", Crv: "Ed25519", X: b64(p)}
	case *ecdsa.PublicKey:
		var err error
		if k, err = ecJWK(p); err != nil {
			return JWK{}, err
		}
	default:
		return JWK{}, fmt.Errorf("%w: signing keys are Ed25519 or P-256, not %T", ErrInvalidJWK, pub)
	}
	k.Kid, k.Use = kid, UseSignature
	if err := k.check(); err != nil {
		return JWK{}, err
	}
	return k, nil
}

// NewEncryptionJWK returns the encryption JWK of pub: an X25519 or P-256
// *ecdh.PublicKey, or a P-256 *ecdsa.PublicKey.
func NewEncryptionJWK(kid string, pub crypto.PublicKey) (JWK, error) {
	var k JWK
	switch p := pub.(type) {
	case *ecdh.PublicKey:
		switch p.Curve() {
		case ecdh.X25519():
			k = JWK{Kty: "OKP", Crv: "X25519", X: b64(p.Bytes())}
		case ecdh.P256():
			raw := p.Bytes() // 0x04 ‖ X ‖ Y
			k = JWK{Kty: "EC", Crv: "P-256", X: b64(raw[1:33]), Y: b64(raw[33:])}
		default:
			return JWK{}, fmt.Errorf("%w: encryption keys are X25519 or P-256", ErrInvalidJWK)
		}
	case *ecdsa.PublicKey:
		var err error
		if k, err = ecJWK(p); err != nil {
			return JWK{}, err
		}
	default:
		return JWK{}, fmt.Errorf("%w: encryption keys are X25519 or P-256, not %T", ErrInvalidJWK, pub)
	}
	k.Kid, k.Use = kid, UseEncryption
	if err := k.check(); err != nil {
		return JWK{}, err
	}
	return k, nil
}

func ecJWK(p *ecdsa.PublicKey) (JWK, error) {
	if p == nil || p.Curve != elliptic.P256() {
		return JWK{}, fmt.Errorf("%w: EC keys must be on P-256", ErrInvalidJWK)
	}
	raw, err := p.Bytes()
	if err != nil {
		return JWK{}, fmt.Errorf("%w: %w", ErrInvalidJWK, err)
	}
	return JWK{Kty: "EC", Crv: "P-256", X: b64(raw[1:33]), Y: b64(raw[33:])}, nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// JWKFromMap reads one JWKS entry in the generic JSON form. It checks the
// structure only, as the jwk-entry schema does (members, kty/crv/use
// combinations, kid grammar, base64url alphabet; no "d" or any other
// member); PublicKey checks the key material.
func JWKFromMap(m map[string]any) (JWK, error) {
	var k JWK
	fields := map[string]*string{"kty": &k.Kty, "crv": &k.Crv, "kid": &k.Kid, "x": &k.X, "y": &k.Y, "use": &k.Use}
	for name, v := range m {
		dst, ok := fields[name]
		if !ok {
			return JWK{}, fmt.Errorf("%w: member %s is not allowed", ErrInvalidJWK, pyRepr(truncateForMessage(name)))
		}
		s, ok := v.(string)
		if !ok {
			return JWK{}, fmt.Errorf("%w: %s is not a string", ErrInvalidJWK, name)
		}
		*dst = s
	}
	if err := k.Validate(); err != nil {
		return JWK{}, err
	}
	return k, nil
}

// Validate checks the structure of k (see JWKFromMap), not its key
// material.
func (k JWK) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidJWK}, args...)...)
	}
	if err := CheckKid(k.Kid); err != nil {
		return err
	}
	switch {
	case k.Use != UseSignature && k.Use != UseEncryption:
		return bad("use %s must be 'sig' or 'enc'", pyRepr(truncateForMessage(k.Use)))
	case k.Kty == "OKP" && k.Crv == "Ed25519" && k.Use == UseSignature:
	case k.Kty == "OKP" && k.Crv == "X25519" && k.Use == UseEncryption:
	case k.Kty == "EC" && k.Crv == "P-256":
	default:
		return bad("%s key on curve %s cannot be used for %s", pyRepr(truncateForMessage(k.Kty)), pyRepr(truncateForMessage(k.Crv)), pyRepr(k.Use))
	}
	if !isBase64URLNoPad(k.X) {
		return bad("x must be non-empty base64url without padding")
	}
	if k.Kty == "EC" && !isBase64URLNoPad(k.Y) {
		return bad("y must be non-empty base64url without padding")
	}
	if k.Kty != "EC" && k.Y != "" {
		return bad("y is only for EC keys")
	}
	return nil
}

// check is Validate plus the key material.
func (k JWK) check() error {
	if err := k.Validate(); err != nil {
		return err
	}
	_, err := k.PublicKey()
	return err
}

// PublicKey decodes the key: ed25519.PublicKey for Ed25519, *ecdsa.PublicKey
// for a P-256 signing key and *ecdh.PublicKey for an encryption key. It
// fails (ErrInvalidJWK) on a key of the wrong length or off the curve.
func (k JWK) PublicKey() (crypto.PublicKey, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	x, err := base64.RawURLEncoding.Strict().DecodeString(k.X)
	if err != nil {
		return nil, fmt.Errorf("%w: x: %w", ErrInvalidJWK, err)
	}
	switch k.Crv {
	case "Ed25519":
		if len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: Ed25519 x is %d bytes, want 32", ErrInvalidJWK, len(x))
		}
		return ed25519.PublicKey(x), nil
	case "X25519":
		pub, err := ecdh.X25519().NewPublicKey(x)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidJWK, err)
		}
		return pub, nil
	}
	y, err := base64.RawURLEncoding.Strict().DecodeString(k.Y)
	if err != nil {
		return nil, fmt.Errorf("%w: y: %w", ErrInvalidJWK, err)
	}
	if len(x) != 32 || len(y) != 32 {
		return nil, fmt.Errorf("%w: P-256 coordinates must be 32 bytes", ErrInvalidJWK)
	}
	point := append(append([]byte{4}, x...), y...)
	if k.Use == UseEncryption {
		pub, err := ecdh.P256().NewPublicKey(point)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidJWK, err)
		}
		return pub, nil
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJWK, err)
	}
	return pub, nil
}

// Map returns k in the generic JSON form.
func (k JWK) Map() map[string]any {
	m := map[string]any{"kty": k.Kty, "crv": k.Crv, "kid": k.Kid, "x": k.X, "use": k.Use}
	if k.Y != "" {
		m["y"] = k.Y
	}
	return m
}

// CheckKid checks the kid grammar of Identity §2.2: a valid agent id, '#'
// and a label of letters, digits, '-' and '_' starting with a letter or
// digit. The error wraps ErrInvalidJWK.
func CheckKid(kid string) error {
	agent, label, ok := strings.Cut(kid, "#")
	if !ok {
		return fmt.Errorf("%w: kid %s has no '#label'", ErrInvalidJWK, pyRepr(truncateForMessage(kid)))
	}
	if _, err := ParseAgentID(agent); err != nil {
		return fmt.Errorf("%w: kid %s: %w", ErrInvalidJWK, pyRepr(truncateForMessage(kid)), err)
	}
	if p := resourceProblem(label); p != "" {
		return fmt.Errorf("%w: kid label %s is not letters, digits, '-' and '_' starting with a letter or digit", ErrInvalidJWK, pyRepr(truncateForMessage(label)))
	}
	return nil
}

// JWKS is a JSON Web Key Set as published at /.well-known/arsia/jwks.json.
type JWKS struct {
	Keys []JWK
}

// NewJWKS returns the set of keys after checking each one, key material
// included, and that no kid repeats. All keys must belong to one agent.
func NewJWKS(keys ...JWK) (JWKS, error) {
	var agent string
	for i, k := range keys {
		if err := k.check(); err != nil {
			return JWKS{}, fmt.Errorf("keys[%d]: %w", i, err)
		}
		a, _, _ := strings.Cut(k.Kid, "#")
		if i == 0 {
			agent = a
		} else if a != agent {
			return JWKS{}, fmt.Errorf("%w: keys[%d] belongs to %s, keys[0] to %s", ErrInvalidJWK, i, pyRepr(a), pyRepr(agent))
		}
		if slices.ContainsFunc(keys[:i], func(o JWK) bool { return o.Kid == k.Kid }) {
			return JWKS{}, fmt.Errorf("%w: kid %s appears twice", ErrInvalidJWK, pyRepr(k.Kid))
		}
	}
	return JWKS{Keys: slices.Clone(keys)}, nil
}

// Key returns the key named kid.
func (s JWKS) Key(kid string) (JWK, bool) {
	i := slices.IndexFunc(s.Keys, func(k JWK) bool { return k.Kid == kid })
	if i < 0 {
		return JWK{}, false
	}
	return s.Keys[i], true
}

// Map returns {"keys": [...]} in the generic JSON form; no keys is [].
func (s JWKS) Map() map[string]any {
	keys := make([]any, len(s.Keys))
	for i, k := range s.Keys {
		keys[i] = k.Map()
	}
	return map[string]any{"keys": keys}
}

// MarshalJSON encodes Map.
func (s JWKS) MarshalJSON() ([]byte, error) { return json.Marshal(s.Map()) }

// CapabilityDescriptor describes one capability at GET
// /.well-known/arsia/capabilities (Core §7.2).
type CapabilityDescriptor struct {
	Capability  string
	Description string
	// RiskLevel is 0 (none) to 10 (critical).
	RiskLevel int
	// RateLimit, when set, is requests per minute for this capability.
	RateLimit *int
	// Requires lists capabilities a request must also carry; nil is not
	// announced.
	Requires               []string
	HumanOversightRequired bool
}

// Validate checks d: a concrete (non-wildcard) capability, a description,
// a risk level in 0-10, a non-negative rate limit and distinct concrete
// prerequisites other than the capability itself.
func (d CapabilityDescriptor) Validate() error {
	if err := ValidateCapability(d.Capability); err != nil {
		return fmt.Errorf("%w: capability: %w", ErrInvalidDiscovery, err)
	}
	if IsWildcardCapability(d.Capability) {
		return fmt.Errorf("%w: capability %s is a wildcard", ErrInvalidDiscovery, pyRepr(d.Capability))
	}
	if d.Description == "" {
		return fmt.Errorf("%w: description is empty", ErrInvalidDiscovery)
	}
	if _, err := RiskClassification(d.RiskLevel); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidDiscovery, err)
	}
	if d.RateLimit != nil && *d.RateLimit < 0 {
		return fmt.Errorf("%w: rate_limit %d is negative", ErrInvalidDiscovery, *d.RateLimit)
	}
	for i, r := range d.Requires {
		if err := ValidateCapability(r); err != nil || IsWildcardCapability(r) {
			return fmt.Errorf("%w: requires[%d] %s is not a concrete capability", ErrInvalidDiscovery, i, pyRepr(truncateForMessage(r)))
		}
		if r == d.Capability || slices.Contains(d.Requires[:i], r) {
			return fmt.Errorf("%w: requires[%d] %s repeats a capability", ErrInvalidDiscovery, i, pyRepr(r))
		}
	}
	return nil
}

// Map returns d in the generic JSON form.
func (d CapabilityDescriptor) Map() map[string]any {
	m := map[string]any{
		"capability":               d.Capability,
		"description":              d.Description,
		"risk_level":               d.RiskLevel,
		"human_oversight_required": d.HumanOversightRequired,
	}
	if d.RateLimit != nil {
		m["rate_limit"] = *d.RateLimit
	}
	if d.Requires != nil {
		m["requires"] = anyStrings(d.Requires)
	}
	return m
}

// MarshalJSON encodes Map.
func (d CapabilityDescriptor) MarshalJSON() ([]byte, error) { return json.Marshal(d.Map()) }

// Page places a listing in a larger result. Zero values mean the defaults
// of a listing that is not paginated: Total is the number of entries,
// Limit DefaultListingLimit, Offset 0.
type Page struct {
	Total, Limit, Offset int
}

// CapabilityListing is one page of a discovery listing, {actions, total,
// limit, offset}. T is CapabilityDescriptor for the capabilities endpoint,
// or any JSON value for entries this package does not model.
type CapabilityListing[T any] struct {
	Actions []T
	Total   int
	Limit   int
	Offset  int
}

// NewCapabilityListing wraps actions into a page, filling the defaults of
// page. It fails (ErrInvalidListing) when the limit is outside
// 1..MaxListingLimit, the page holds more entries than the limit, the
// offset or total is negative, or total is smaller than offset plus the
// entries; and when an entry has a Validate method that fails.
func NewCapabilityListing[T any](actions []T, page Page) (CapabilityListing[T], error) {
	if page.Total == 0 {
		page.Total = len(actions)
	}
	if page.Limit == 0 {
		page.Limit = DefaultListingLimit
	}
	switch {
	case page.Limit < 1 || page.Limit > MaxListingLimit:
		return CapabilityListing[T]{}, fmt.Errorf("%w: limit %d is outside 1..%d", ErrInvalidListing, page.Limit, MaxListingLimit)
	case len(actions) > page.Limit:
		return CapabilityListing[T]{}, fmt.Errorf("%w: %d entries exceed the limit %d", ErrInvalidListing, len(actions), page.Limit)
	case page.Offset < 0 || page.Total < 0:
		return CapabilityListing[T]{}, fmt.Errorf("%w: offset and total must not be negative", ErrInvalidListing)
	case len(actions) > 0 && page.Total < page.Offset+len(actions):
		return CapabilityListing[T]{}, fmt.Errorf("%w: total %d is below offset %d plus %d entries", ErrInvalidListing, page.Total, page.Offset, len(actions))
	}
	for i, a := range actions {
		if v, ok := any(a).(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return CapabilityListing[T]{}, fmt.Errorf("%w: actions[%d]: %w", ErrInvalidListing, i, err)
			}
		}
	}
	return CapabilityListing[T]{Actions: slices.Clone(actions), Total: page.Total, Limit: page.Limit, Offset: page.Offset}, nil
}

// MarshalJSON encodes {actions, total, limit, offset}; no actions is [].
func (l CapabilityListing[T]) MarshalJSON() ([]byte, error) {
	actions := l.Actions
	if actions == nil {
		actions = []T{}
	}
	return json.Marshal(struct {
		Actions []T `json:"actions"`
		Total   int `json:"total"`
		Limit   int `json:"limit"`
		Offset  int `json:"offset"`
	}{actions, l.Total, l.Limit, l.Offset})
}
