package auth

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"
)

// ClientAssertionType is the client_assertion_type of a token request
// authenticated with a signed JWT (RFC 7523 §2.2, private_key_jwt).
const ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// Client assertion lifetimes: the one NewClientAssertion uses when none is
// given, and the longest ValidateClientAssertion accepts by default. An
// assertion is made for one request; a long-lived one is a bearer
// credential that a log or a proxy could leak.
const (
	DefaultAssertionLifetime    = 60 * time.Second
	DefaultAssertionMaxLifetime = 5 * time.Minute
)

// Keys under which the replay set holds other things than DPoP proof
// jtis. ValidateDPoP refuses proof jtis with these prefixes, so a proof
// can neither revoke a token nor burn a client assertion.
const (
	// RevokedTokenPrefix + jti marks an access token as revoked until it
	// expires (RevokedTokenKey).
	RevokedTokenPrefix = "revoked-token:"
	// ClientAssertionPrefix + a digest of iss and jti records a used
	// client assertion.
	ClientAssertionPrefix = "client-assertion:"
)

var reservedReplayPrefixes = []string{RevokedTokenPrefix, ClientAssertionPrefix}

// RevokedTokenKey is the replay-set key that marks the access token with
// this jti as revoked.
func RevokedTokenKey(jti string) string { return RevokedTokenPrefix + jti }

// ReplayLookup is implemented by replay sets that can say whether a key is
// recorded and unexpired without recording it (revocation lists kept in
// the replay set are read this way on every request).
type ReplayLookup interface {
	Contains(ctx context.Context, key string) (bool, error)
}

// ClientAssertionOptions describe a client assertion to sign.
type ClientAssertionOptions struct {
	// ClientID is the agent authenticating: iss and sub.
	ClientID string
	// Audience is the authorization server's token endpoint URL (aud).
	Audience string
	// Now is iat (and nbf); required.
	Now time.Time
	// Lifetime is exp − iat; DefaultAssertionLifetime when zero.
	Lifetime time.Duration
	// ID is the jti; a random UUID v4 when empty.
	ID string
}

// assertionClaims is the payload of a client assertion.
type assertionClaims struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub"`
	Audience  string `json:"aud"`
	ExpiresAt int64  `json:"exp"`
	IssuedAt  int64  `json:"iat"`
	NotBefore int64  `json:"nbf"`
	ID        string `json:"jti"`
}

// NewClientAssertion signs an RFC 7523 client assertion: iss and sub the
// client, aud the token endpoint, with header {"alg", "kid", "typ":
// "JWT"}; the key (Ed25519, or P-256) picks alg. kid names the key in the
// client's published JWKS ("<agent id>#<label>" for an ARSIA agent).
func NewClientAssertion(signer crypto.Signer, kid string, o ClientAssertionOptions) (string, error) {
	switch {
	case kid == "":
		return "", fail(ErrIssue, "no kid")
	case o.ClientID == "":
		return "", fail(ErrIssue, "no ClientID")
	case o.Audience == "":
		return "", fail(ErrIssue, "no Audience (the token endpoint URL)")
	case o.Now.IsZero():
		return "", fail(ErrIssue, "Now is not set")
	case o.Lifetime < 0:
		return "", fail(ErrIssue, "negative Lifetime")
	}
	if o.Lifetime == 0 {
		o.Lifetime = DefaultAssertionLifetime
	}
	if o.Lifetime < time.Second {
		return "", fail(ErrIssue, "Lifetime below one second")
	}
	if o.ID == "" {
		o.ID = NewJTI()
	}
	if len(o.ID) > maxJTI {
		return "", fail(ErrIssue, "jti longer than %d bytes", maxJTI)
	}
	c := assertionClaims{Issuer: o.ClientID, Subject: o.ClientID, Audience: o.Audience,
		IssuedAt: o.Now.Unix(), NotBefore: o.Now.Unix(), ExpiresAt: o.Now.Add(o.Lifetime).Unix(), ID: o.ID}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", failCause(ErrIssue, err, "claims")
	}
	return signCompact(signer, map[string]any{"kid": kid, "typ": "JWT"}, payload, assertionAlgorithms)
}

// assertionAlgorithms are the algorithms a client assertion may use.
var assertionAlgorithms = []string{EdDSA, ES256}

// AssertionOptions say what ValidateClientAssertion accepts. Now,
// Audiences, Keys and Replay are required.
type AssertionOptions struct {
	// Now is the validation time.
	Now time.Time
	// Skew is tolerated on exp, iat and nbf; zero means DefaultSkew.
	Skew time.Duration
	// Audiences are the accepted aud values: the token endpoint URL, and
	// the authorization server's issuer identifier if it accepts that
	// too. The assertion's aud (a string or an array) must name one.
	Audiences []string
	// ClientID, when set, is the only accepted client (the client_id form
	// parameter, when the request has one).
	ClientID string
	// Keys resolves the kid to the client's public key: the senders' keys
	// the gateway trusts. The kid must be "<client id>#<label>".
	Keys TokenKeys
	// Replay records the assertion's jti until it expires: an assertion
	// authenticates one request.
	Replay ReplayCache
	// MaxLifetime bounds exp − now (and exp − iat);
	// DefaultAssertionMaxLifetime when zero.
	MaxLifetime time.Duration
	// Algorithms is the allow-list; empty means EdDSA only. ES256 may be
	// added.
	Algorithms []string
}

func (o AssertionOptions) resolve() (AssertionOptions, error) {
	switch {
	case o.Now.IsZero():
		return o, fail(ErrInvalidOptions, "Now is not set")
	case o.Skew < 0 || o.MaxLifetime < 0:
		return o, fail(ErrInvalidOptions, "negative Skew or MaxLifetime")
	case len(o.Audiences) == 0 || slices.Contains(o.Audiences, ""):
		return o, fail(ErrInvalidOptions, "no Audiences (the token endpoint URL)")
	case o.Keys == nil:
		return o, fail(ErrInvalidOptions, "no Keys")
	case o.Replay == nil:
		return o, fail(ErrInvalidOptions, "Replay is not set")
	}
	if o.Skew == 0 {
		o.Skew = DefaultSkew
	}
	if o.MaxLifetime == 0 {
		o.MaxLifetime = DefaultAssertionMaxLifetime
	}
	algs, err := resolveAlgorithms(o.Algorithms, assertionAlgorithms, []string{EdDSA})
	if err != nil {
		return o, err
	}
	o.Algorithms = algs
	return o, nil
}

// ClientAssertion is a validated client assertion.
type ClientAssertion struct {
	// ClientID is the authenticated client (iss = sub).
	ClientID string
	// KeyID is the kid of the key that signed it; Algorithm its alg.
	KeyID, Algorithm string
	// ID is the jti; ExpiresAt exp in NumericDate seconds.
	ID        string
	ExpiresAt int64
}

// assertionRequired are the claims every client assertion carries (RFC
// 7523 §3), in reporting order.
var assertionRequired = []string{"iss", "sub", "aud", "exp", "jti"}

// ValidateClientAssertion authenticates a client by its RFC 7523 JWT
// assertion (token_endpoint_auth_method private_key_jwt):
//
//   - header typ absent, "JWT" or "client-authentication+jwt" (a DPoP
//     proof or an access token is refused), no crit, alg in the
//     allow-list, a kid "<iss>#..." that opts.Keys resolves, a valid
//     signature;
//   - iss, sub, aud, exp and jti present and typed; iss = sub (the client
//     speaks for itself), equal to opts.ClientID when set; aud naming one
//     of opts.Audiences; now ≤ exp+skew; exp at most MaxLifetime (+skew)
//     ahead, and after iat by at most MaxLifetime; iat and nbf not in the
//     future;
//   - the jti not used before: it is recorded in opts.Replay until
//     exp+skew, and only when everything else passed, so that a forged
//     assertion writes nothing.
//
// Every problem found is returned, as ValidateAccessToken does.
func ValidateClientAssertion(ctx context.Context, assertion string, opts AssertionOptions) (*ClientAssertion, []error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, []error{err}
	}
	jws, err := parseCompact(assertion, "client assertion")
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(checkCrit(jws.header, "client assertion"))
	if v, present := jws.header["typ"]; present {
		typ, _ := v.(string)
		t := strings.TrimPrefix(strings.ToLower(typ), "application/")
		if t != "jwt" && t != "client-authentication+jwt" {
			add(fail(ErrTokenType, "client assertion typ %s is not 'JWT'", reprValue(v)))
		}
	}
	add(verifyKidSignature(ctx, jws, o.Keys, o.Algorithms, "client assertion"))
	out := &ClientAssertion{}
	out.Algorithm, _, _ = memberString(jws.header, "alg")
	out.KeyID, _, _ = memberString(jws.header, "kid")

	m := jws.claims
	for _, name := range assertionRequired {
		if _, ok := m[name]; !ok {
			add(fail(ErrMissingClaim, "client assertion is missing required claim %s", pyRepr(name)))
		}
	}
	str := func(name string) (string, bool) {
		s, present, ok := memberString(m, name)
		if present && !ok {
			add(fail(ErrInvalidClaim, "client assertion claim %s must be a string", pyRepr(name)))
		}
		return s, ok
	}
	iss, issOK := str("iss")
	sub, subOK := str("sub")
	if issOK && subOK && (iss == "" || iss != sub) {
		add(fail(ErrSubject, "client assertion iss %s and sub %s must both name the client", pyRepr(iss), pyRepr(sub)))
	}
	if issOK && o.ClientID != "" && iss != o.ClientID {
		add(fail(ErrIssuer, "client assertion iss %s is not the client_id %s", pyRepr(iss), pyRepr(o.ClientID)))
	}
	if issOK && out.KeyID != "" {
		if owner, _, found := strings.Cut(out.KeyID, "#"); !found || owner != iss {
			add(fail(ErrKeyMismatch, "client assertion kid %s is not a key of %s", pyRepr(out.KeyID), pyRepr(iss)))
		}
	}
	if v, ok := m["aud"]; ok {
		aud, err := decodeAudience(v)
		switch {
		case err != nil:
			add(fail(ErrInvalidClaim, "client assertion claim 'aud' must be a non-empty string or array of non-empty strings"))
		case !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(o.Audiences, a) }):
			add(fail(ErrAudience, "client assertion aud %s does not name this authorization server (%s)",
				audRepr(aud), strings.Join(o.Audiences, ", ")))
		}
	}
	num := func(name string, round func(float64) float64) (int64, bool) {
		v, present := m[name]
		if !present {
			return 0, false
		}
		t, err := numericDate(name, v, round)
		if err != nil {
			add(fail(ErrInvalidClaim, "client assertion claim %s must be a NumericDate", pyRepr(name)))
			return 0, false
		}
		return t, true
	}
	now, skew := o.Now, o.Skew
	exp, expOK := num("exp", math.Floor)
	iat, iatOK := num("iat", math.Ceil)
	nbf, nbfOK := num("nbf", math.Ceil)
	if expOK {
		switch t := time.Unix(exp, 0); {
		case now.After(t.Add(skew)):
			add(fail(ErrExpired, "client assertion expired: exp %d is more than %d s before now %d", exp, int64(skew.Seconds()), now.Unix()))
		case t.After(now.Add(o.MaxLifetime + skew)):
			add(fail(ErrInvalidClaim, "client assertion exp %d is more than %d s after now %d", exp, int64((o.MaxLifetime + skew).Seconds()), now.Unix()))
		case iatOK && time.Duration(exp-iat)*time.Second > o.MaxLifetime:
			add(fail(ErrInvalidClaim, "client assertion lifetime exp−iat %d s exceeds %d s", exp-iat, int64(o.MaxLifetime.Seconds())))
		}
	}
	if iatOK && time.Unix(iat, 0).After(now.Add(skew)) {
		add(fail(ErrNotYetValid, "client assertion iat is in the future: iat %d is more than %d s after now %d", iat, int64(skew.Seconds()), now.Unix()))
	}
	if nbfOK && time.Unix(nbf, 0).After(now.Add(skew)) {
		add(fail(ErrNotYetValid, "client assertion is not yet valid: nbf %d is more than %d s after now %d", nbf, int64(skew.Seconds()), now.Unix()))
	}
	jti, jtiOK := str("jti")
	if jtiOK && (jti == "" || len(jti) > maxJTI) {
		add(fail(ErrInvalidClaim, "client assertion jti must be 1 to %d bytes", maxJTI))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	out.ClientID, out.ID, out.ExpiresAt = iss, jti, exp
	seen, err := o.Replay.Seen(ctx, assertionReplayKey(iss, jti), time.Unix(exp, 0).Add(skew))
	switch {
	case err != nil:
		return nil, []error{failCause(ErrReplayCache, err, "cannot record client assertion jti %s", pyRepr(jti))}
	case seen:
		return nil, []error{fail(ErrReplay, "client assertion replay: jti %s was already used", pyRepr(jti))}
	}
	return out, nil
}

// assertionReplayKey is where a used assertion is recorded: jtis are
// chosen by clients, so they are kept per client, and hashed to bound the
// key's length whatever the client id.
func assertionReplayKey(clientID, jti string) string {
	sum := sha256.Sum256([]byte(clientID + "\x00" + jti))
	return ClientAssertionPrefix + hex.EncodeToString(sum[:])
}
