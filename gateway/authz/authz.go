// Package authz is the authorization stage of custos serve: it checks the
// OAuth 2.0 access token (a JWT) that accompanies an ARSIA request, and the
// DPoP proof (RFC 9449) that binds it to the sender's key, as ARSIA Core §6
// and Identity §3 describe. An *Authorizer implements gateway.Authorizer.
//
// A request carries either
//
//	Authorization: Bearer <access token>
//
// or
//
//	Authorization: DPoP <access token>
//	DPoP: <proof>
//
// and the Authorizer checks, building on package arsia/auth:
//
//   - the token's issuer is trusted, and its signature verifies with one of
//     that issuer's keys (its JWKS);
//   - exp, iat and nbf, with the clock skew (300 s by default); exp−iat at
//     most MaxLifetime when set;
//   - sub is the envelope's from, aud names the envelope's to, jti is set;
//   - for DPoP: the proof's signature, htm and htu (the request method and
//     URL, without query and fragment), iat within the replay window, ath
//     (the token's hash), a jti never seen before, and the token's cnf.jkt
//     equal to the thumbprint of the proof's key;
//   - a DPoP-bound token (one with cnf.jkt) never passes as a bearer token;
//   - the scope lists the first requested capability, the call itself, by
//     exact string. The other capabilities are downgraded by the gateway:
//     the Grant's Scope is the token's whole scope.
//
// Failures are answered with ARSIA "unauthorized" (401) and a short reason
// code in details.reason ("token_missing", "token_expired", "dpop_replay",
// ...; see the Reason constants), never with the checks' own messages,
// which go to the Logger. A valid token whose scope lacks the call is
// "forbidden" (403) with reason "scope_insufficient" and the missing
// capability. A replay set that cannot record a proof is
// "service_unavailable" (503).
package authz

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/gateway"
)

// Mode says which access tokens the inbox demands.
type Mode string

// The modes.
const (
	// ModeOff: no access token is checked (no Authorizer).
	ModeOff Mode = "off"
	// ModeBearer: "Authorization: Bearer <token>"; DPoP-bound tokens are
	// refused, since they would need a proof.
	ModeBearer Mode = "bearer"
	// ModeDPoP: "Authorization: DPoP <token>" with a DPoP proof, and the
	// token bound to the proof's key (cnf.jkt).
	ModeDPoP Mode = "dpop"
	// ModeAny: either; a DPoP-bound token must come as DPoP with its proof.
	ModeAny Mode = "any"
)

// ParseMode reads a mode name; "" is ModeOff.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeOff, nil
	case ModeOff, ModeBearer, ModeDPoP, ModeAny:
		return m, nil
	}
	return "", fmt.Errorf("authz: mode %q: want off, bearer, dpop or any", s)
}

// Reason codes, sent in details.reason. They name the failed check, not
// the token's content.
const (
	ReasonTokenMissing         = "token_missing"               // no Authorization header
	ReasonTokenMalformed       = "token_malformed"             // not "<scheme> <jwt>", or not a decodable JWT
	ReasonSchemeNotAllowed     = "scheme_not_allowed"          // Bearer or DPoP where the mode does not accept it
	ReasonIssuerUntrusted      = "issuer_untrusted"            // iss is not a configured issuer
	ReasonTokenSignature       = "token_signature_invalid"     // alg, kid or signature
	ReasonTokenClaims          = "token_claims_invalid"        // a required claim is missing or ill-typed
	ReasonTokenExpired         = "token_expired"               // now > exp + skew
	ReasonTokenNotYetValid     = "token_not_yet_valid"         // iat or nbf > now + skew
	ReasonTokenLifetime        = "token_lifetime_exceeded"     // exp − iat > max_lifetime
	ReasonSubjectMismatch      = "token_subject_mismatch"      // sub is not the envelope's from
	ReasonAudienceMismatch     = "token_audience_mismatch"     // aud does not name the envelope's to
	ReasonTokenInvalid         = "token_invalid"               // any other token problem
	ReasonDPoPRequired         = "dpop_required"               // a DPoP-bound token presented as Bearer
	ReasonTokenNotBound        = "token_not_bound"             // the DPoP scheme with a token without cnf.jkt
	ReasonDPoPMissing          = "dpop_missing"                // the DPoP scheme without a DPoP header
	ReasonDPoPMalformed        = "dpop_malformed"              // the proof is not a decodable dpop+jwt with a jwk
	ReasonDPoPSignature        = "dpop_signature_invalid"      // alg or signature
	ReasonDPoPMethod           = "dpop_method_mismatch"        // htm is not the request method
	ReasonDPoPURL              = "dpop_url_mismatch"           // htu is not the request URL
	ReasonDPoPTime             = "dpop_iat_invalid"            // iat outside now ± replay window
	ReasonDPoPTokenHash        = "dpop_ath_mismatch"           // ath is not the token's hash
	ReasonDPoPReplay           = "dpop_replay"                 // the proof's jti was used before
	ReasonDPoPBinding          = "dpop_binding_mismatch"       // the proof's key is not the token's cnf.jkt
	ReasonDPoPInvalid          = "dpop_invalid"                // any other proof problem
	ReasonScopeInsufficient    = "scope_insufficient"          // forbidden: the scope lacks the call
	ReasonReplaySetUnavailable = "replay_set_unavailable"      // service_unavailable
	ReasonTokenRevoked         = "token_revoked"               // the token's jti was revoked (RFC 7009)
	ReasonRevocationsDown      = "revocation_list_unavailable" // service_unavailable: revocations cannot be read
)

// Issuer is a trusted authorization server.
type Issuer struct {
	// Issuer is its iss claim, compared exactly.
	Issuer string
	// Keys are its verification keys: sig.NewJWKSFile, sig.NewHTTPJWKS,
	// auth.NewStaticKeys...
	Keys auth.TokenKeys
}

// ReplaySet remembers the jti of every accepted DPoP proof until the proof
// could no longer be accepted; see auth.ReplayCache for the contract
// (checked by package arsia/auth/replaytest). NewMemoryReplaySet is the
// in-process one; a shared one (PostgreSQL) makes replay protection hold
// across gateway instances.
type ReplaySet = auth.ReplayCache

// NewMemoryReplaySet returns an in-process ReplaySet holding at most
// capacity unexpired jtis (auth.DefaultReplayCapacity when 0), pruned as
// now advances (time.Now when nil). When full it refuses proofs rather
// than forget a jti.
func NewMemoryReplaySet(capacity int, now func() time.Time) ReplaySet {
	return auth.NewMemoryReplayCache(&auth.MemoryReplayOptions{Capacity: capacity, Now: now})
}

// Config configures an Authorizer.
type Config struct {
	// Mode is which tokens are demanded; ModeOff makes New return nil.
	Mode Mode
	// Issuers are the trusted authorization servers; at least one.
	Issuers []Issuer
	// ClockSkew is tolerated on the token's exp, iat and nbf;
	// auth.DefaultSkew (300 s) when zero.
	ClockSkew time.Duration
	// ReplayWindow bounds |iat − now| of a DPoP proof, and so how long its
	// jti is remembered; ClockSkew when zero.
	ReplayWindow time.Duration
	// MaxLifetime, when set, refuses tokens whose exp − iat exceeds it
	// (ARSIA recommends at most 3600 s, 300 s for high-risk calls).
	MaxLifetime time.Duration
	// Replay records DPoP proof jtis. When nil, an in-memory set of
	// ReplayCapacity entries is used whose clock is the requests' Now.
	Replay ReplaySet
	// ReplayCapacity sizes the in-memory set (auth.DefaultReplayCapacity
	// when zero).
	ReplayCapacity int
	// TokenAlgorithms are the accepted token algorithms (EdDSA, ES256 and
	// RS256 when empty); ProofAlgorithms those of DPoP proofs (EdDSA and
	// ES256 when empty).
	TokenAlgorithms, ProofAlgorithms []string
	// AcceptAnyJTI accepts any non-empty token jti instead of requiring a
	// UUID v4 (for authorization servers that use other formats).
	AcceptAnyJTI bool
	// Logger receives why a token was refused (nothing is logged when nil).
	Logger *slog.Logger
	// Revocations, when set, holds revoked tokens under
	// auth.RevokedTokenKey(jti) (the authorization server's revocation
	// endpoint writes them into the replay set); a listed token is
	// refused with reason token_revoked, and a lookup that fails refuses
	// the request (503): revocation fails closed.
	Revocations auth.ReplayLookup
}

// Authorizer checks access tokens; it implements gateway.Authorizer and is
// safe for concurrent use.
type Authorizer struct {
	mode    Mode
	issuers map[string]auth.TokenKeys
	cfg     Config
	replay  ReplaySet
	clock   *observedClock
	log     *slog.Logger
}

var _ gateway.Authorizer = (*Authorizer)(nil)

// New checks cfg and returns its Authorizer, or a nil gateway.Authorizer
// (an untyped nil, fit for gateway.Options.Authorizer) for ModeOff.
func New(cfg Config) (gateway.Authorizer, error) {
	a, err := NewAuthorizer(cfg)
	if err != nil || a == nil {
		return nil, err
	}
	return a, nil
}

// NewAuthorizer is New returning the concrete type; it returns nil, nil
// for ModeOff.
func NewAuthorizer(cfg Config) (*Authorizer, error) {
	mode, err := ParseMode(string(cfg.Mode))
	if err != nil {
		return nil, err
	}
	if mode == ModeOff {
		return nil, nil
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("authz: "+format, a...)) }
	if len(cfg.Issuers) == 0 {
		bad("mode %s needs at least one trusted issuer", mode)
	}
	issuers := map[string]auth.TokenKeys{}
	for i, is := range cfg.Issuers {
		switch {
		case is.Issuer == "":
			bad("issuer %d has no iss", i)
		case is.Keys == nil:
			bad("issuer %q has no keys", is.Issuer)
		case issuers[is.Issuer] != nil:
			bad("issuer %q is listed twice", is.Issuer)
		default:
			issuers[is.Issuer] = is.Keys
		}
	}
	if cfg.ClockSkew < 0 || cfg.ReplayWindow < 0 || cfg.MaxLifetime < 0 || cfg.ReplayCapacity < 0 {
		bad("negative clock_skew, replay_window, max_lifetime or replay capacity")
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = auth.DefaultSkew
	}
	if cfg.ReplayWindow == 0 {
		cfg.ReplayWindow = cfg.ClockSkew
	}
	if len(cfg.TokenAlgorithms) == 0 {
		cfg.TokenAlgorithms = []string{auth.EdDSA, auth.ES256, auth.RS256}
	}
	if len(cfg.ProofAlgorithms) == 0 {
		cfg.ProofAlgorithms = []string{auth.EdDSA, auth.ES256}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	a := &Authorizer{mode: mode, issuers: issuers, cfg: cfg, replay: cfg.Replay, clock: &observedClock{}, log: cfg.Logger}
	if a.replay == nil {
		a.replay = NewMemoryReplaySet(cfg.ReplayCapacity, a.clock.Now)
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a, nil
}

// Mode returns the Authorizer's mode.
func (a *Authorizer) Mode() Mode { return a.mode }

// Authorize implements gateway.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, q gateway.AuthzQuery) (*gateway.Grant, *arsia.Error) {
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	a.clock.observe(now)
	deny := func(reason string, errs ...error) (*gateway.Grant, *arsia.Error) {
		return nil, a.unauthorized(q, reason, errs...)
	}

	if strings.TrimSpace(q.Authorization) == "" {
		return deny(ReasonTokenMissing)
	}
	scheme, token, err := ParseAuthorization(q.Authorization)
	if err != nil {
		return deny(ReasonTokenMalformed, err)
	}
	if (scheme == SchemeBearer && a.mode == ModeDPoP) || (scheme == SchemeDPoP && a.mode == ModeBearer) {
		return deny(ReasonSchemeNotAllowed)
	}
	iss, err := PeekIssuer(token)
	if err != nil {
		return deny(ReasonTokenMalformed, err)
	}
	keys, ok := a.issuers[iss]
	if !ok {
		return deny(ReasonIssuerUntrusted, fmt.Errorf("authz: issuer %q is not trusted", clip(iss)))
	}
	claims, errs := auth.ValidateAccessToken(ctx, token, keys, auth.TokenOptions{
		Now: now, Skew: a.cfg.ClockSkew, Issuer: iss,
		ExpectedSubject: q.Sender, ExpectedAudience: q.Recipient,
		Algorithms: a.cfg.TokenAlgorithms, AcceptAnyJTI: a.cfg.AcceptAnyJTI,
	})
	if len(errs) > 0 {
		return nil, a.refuse(q, tokenReasons, ReasonTokenInvalid, errs)
	}
	if a.cfg.MaxLifetime > 0 && time.Duration(claims.ExpiresAt-claims.IssuedAt)*time.Second > a.cfg.MaxLifetime {
		return deny(ReasonTokenLifetime, fmt.Errorf("authz: token lifetime %d s exceeds max_lifetime %s",
			claims.ExpiresAt-claims.IssuedAt, a.cfg.MaxLifetime))
	}

	if a.cfg.Revocations != nil {
		revoked, err := a.cfg.Revocations.Contains(ctx, auth.RevokedTokenKey(claims.ID))
		switch {
		case err != nil:
			a.log.Warn("revocation list unavailable", "sender", q.Sender, "err", err)
			return nil, &arsia.Error{Code: arsia.CodeServiceUnavailable,
				Description: "The request cannot be authorized right now; retry later.",
				Details:     map[string]any{"reason": ReasonRevocationsDown}, Err: err}
		case revoked:
			return deny(ReasonTokenRevoked, fmt.Errorf("authz: token %s is revoked", clip(claims.ID)))
		}
	}

	bound := false
	if scheme == SchemeBearer {
		if err := auth.CheckBearer(claims); err != nil {
			return deny(ReasonDPoPRequired, err)
		}
	} else {
		if !claims.SenderConstrained() {
			return deny(ReasonTokenNotBound, errors.New("authz: DPoP scheme with a token that has no cnf.jkt"))
		}
		if strings.TrimSpace(q.DPoP) == "" {
			return deny(ReasonDPoPMissing)
		}
		proof, errs := auth.ValidateDPoP(ctx, q.DPoP, auth.DPoPOptions{
			Method: q.Method, URL: q.URL, AccessToken: token, Now: now,
			Skew: a.cfg.ReplayWindow, Replay: a.replay, Algorithms: a.cfg.ProofAlgorithms,
		})
		if len(errs) > 0 {
			return nil, a.refuse(q, proofReasons, ReasonDPoPInvalid, errs)
		}
		if err := auth.VerifyDPoPBinding(claims, proof); err != nil {
			return deny(ReasonDPoPBinding, err)
		}
		bound = true
	}

	scope := claims.ScopeEntries()
	if len(q.Capabilities) > 0 {
		if covered, missing := auth.CheckScopeCoverage(claims.Scope, q.Capabilities[:1]); !covered {
			a.log.InfoContext(ctx, "access token refused", "sender", q.Sender, "reason", ReasonScopeInsufficient,
				"missing", missing, "jti", claims.ID, "iss", claims.Issuer)
			return nil, &arsia.Error{
				Code:        arsia.CodeForbidden,
				Description: "The access token does not grant the requested capability.",
				Details: map[string]any{
					"reason":                ReasonScopeInsufficient,
					"missing":               anyStrings(missing),
					"required_capabilities": anyStrings(q.Capabilities[:1]),
					"provided_capabilities": anyStrings(scope),
				},
				Err: &auth.ScopeError{Required: slices.Clone(q.Capabilities[:1]), Granted: scope, Missing: missing},
			}
		}
	}
	return &gateway.Grant{Scope: scope, TokenID: claims.ID, Issuer: claims.Issuer, Bound: bound}, nil
}

// reasonRule maps the sentinel errors of package auth to a reason code.
type reasonRule struct {
	reason string
	errs   []error
}

// tokenReasons and proofReasons are in priority order: when a token has
// several problems, the first rule that matches names it.
var (
	tokenReasons = []reasonRule{
		{ReasonTokenMalformed, []error{auth.ErrMalformed, auth.ErrTokenType}},
		{ReasonTokenSignature, []error{auth.ErrAlgorithmNotAllowed, auth.ErrUnknownKey, auth.ErrKeyMismatch, auth.ErrBadSignature, auth.ErrInvalidJWK}},
		{ReasonTokenClaims, []error{auth.ErrMissingClaim, auth.ErrInvalidClaim}},
		{ReasonIssuerUntrusted, []error{auth.ErrIssuer}},
		{ReasonTokenExpired, []error{auth.ErrExpired}},
		{ReasonTokenNotYetValid, []error{auth.ErrNotYetValid}},
		{ReasonSubjectMismatch, []error{auth.ErrSubject}},
		{ReasonAudienceMismatch, []error{auth.ErrAudience}},
	}
	proofReasons = []reasonRule{
		{ReasonDPoPMalformed, []error{auth.ErrMalformed, auth.ErrTokenType, auth.ErrInvalidJWK, auth.ErrMissingClaim, auth.ErrInvalidClaim}},
		{ReasonDPoPSignature, []error{auth.ErrAlgorithmNotAllowed, auth.ErrKeyMismatch, auth.ErrBadSignature}},
		{ReasonDPoPMethod, []error{auth.ErrDPoPMethod}},
		{ReasonDPoPURL, []error{auth.ErrDPoPURL}},
		{ReasonDPoPTime, []error{auth.ErrDPoPTime}},
		{ReasonDPoPTokenHash, []error{auth.ErrDPoPTokenHash}},
		{ReasonDPoPReplay, []error{auth.ErrReplay}},
		{ReasonDPoPBinding, []error{auth.ErrDPoPBinding}},
	}
)

// refuse answers the errors of ValidateAccessToken or ValidateDPoP: a
// receiver-side problem (options, replay set) is internal_error or
// service_unavailable; anything else is unauthorized with the reason of
// the first matching rule.
func (a *Authorizer) refuse(q gateway.AuthzQuery, rules []reasonRule, fallback string, errs []error) *arsia.Error {
	joined := errors.Join(errs...)
	switch {
	case errors.Is(joined, auth.ErrInvalidOptions):
		a.log.Error("authorization failed", "sender", q.Sender, "err", joined)
		return &arsia.Error{Code: arsia.CodeInternalError, Description: "The receiver failed to process the request.", Err: joined}
	case errors.Is(joined, auth.ErrReplayCache), errors.Is(joined, auth.ErrReplayCacheFull):
		a.log.Warn("DPoP replay set unavailable", "sender", q.Sender, "err", joined)
		return &arsia.Error{Code: arsia.CodeServiceUnavailable,
			Description: "The request cannot be authorized right now; retry later.",
			Details:     map[string]any{"reason": ReasonReplaySetUnavailable}, Err: joined}
	}
	return a.unauthorized(q, reasonOf(rules, fallback, errs), errs...)
}

func reasonOf(rules []reasonRule, fallback string, errs []error) string {
	for _, r := range rules {
		for _, err := range errs {
			for _, target := range r.errs {
				if errors.Is(err, target) {
					return r.reason
				}
			}
		}
	}
	return fallback
}

// unauthorized is the 401 answer: a generic description and the reason
// code; the errors themselves go to the log and to Err.
func (a *Authorizer) unauthorized(q gateway.AuthzQuery, reason string, errs ...error) *arsia.Error {
	joined := errors.Join(errs...)
	if joined != nil {
		a.log.Info("access token refused", "sender", q.Sender, "reason", reason, "err", joined)
	} else {
		a.log.Info("access token refused", "sender", q.Sender, "reason", reason)
	}
	return &arsia.Error{
		Code:        arsia.CodeUnauthorized,
		Description: "The access token or DPoP proof was not accepted.",
		Details:     map[string]any{"reason": reason},
		Err:         joined,
	}
}

// The authorization schemes.
const (
	SchemeBearer = "Bearer"
	SchemeDPoP   = "DPoP"
)

// ErrAuthorization is returned by ParseAuthorization.
var ErrAuthorization = errors.New("authz: malformed Authorization header")

// ParseAuthorization splits an Authorization header value into its scheme,
// SchemeBearer or SchemeDPoP (matched without regard to case, RFC 9110
// §11.1), and its credentials: one token68 (RFC 9110 §11.2), which a
// compact JWT is. Spaces around the value and between the two are
// allowed; anything else is an error wrapping ErrAuthorization.
func ParseAuthorization(header string) (scheme, token string, err error) {
	h := strings.Trim(header, " \t")
	name, rest, found := strings.Cut(h, " ")
	if !found {
		return "", "", fmt.Errorf("%w: want \"<scheme> <token>\"", ErrAuthorization)
	}
	switch {
	case strings.EqualFold(name, SchemeBearer):
		scheme = SchemeBearer
	case strings.EqualFold(name, SchemeDPoP):
		scheme = SchemeDPoP
	default:
		return "", "", fmt.Errorf("%w: scheme %q is not Bearer or DPoP", ErrAuthorization, clip(name))
	}
	token = strings.TrimLeft(rest, " ")
	if token == "" || len(token) > auth.MaxJWTBytes || !isToken68(token) {
		return "", "", fmt.Errorf("%w: the credentials are not one token68", ErrAuthorization)
	}
	return scheme, token, nil
}

// isToken68 reports whether s is a token68: 1*( ALPHA / DIGIT / "-" / "."
// / "_" / "~" / "+" / "/" ) *"=".
func isToken68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// PeekIssuer reads the iss claim of a compact JWT WITHOUT verifying it, to
// choose whose keys verify it. Nothing else may be trusted from it.
func PeekIssuer(token string) (string, error) {
	if len(token) > auth.MaxJWTBytes {
		return "", fmt.Errorf("%w: token too large", auth.ErrMalformed)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("%w: not a compact JWS", auth.ErrMalformed)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("%w: payload is not base64url", auth.ErrMalformed)
	}
	var c struct {
		Iss json.RawMessage `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", fmt.Errorf("%w: payload is not a JSON object", auth.ErrMalformed)
	}
	var iss string
	if err := json.Unmarshal(c.Iss, &iss); err != nil || iss == "" {
		return "", fmt.Errorf("%w: no string iss", auth.ErrMalformed)
	}
	return iss, nil
}

// observedClock is the in-memory replay set's clock: the latest Now of a
// request, so that the set expires entries on the same clock the proofs
// are checked with (the gateway's Options.Now).
type observedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *observedClock) observe(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
}

func (c *observedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		return time.Now()
	}
	return c.now
}

func anyStrings(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// clip bounds an untrusted string quoted in a log message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
