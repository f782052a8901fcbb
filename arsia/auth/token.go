package auth

import (
	"context"
	"crypto"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultSkew is the clock skew tolerated on every time claim (Core §8.3).
// Compliance profiles may tighten it (clock_skew_seconds, 10 to 300).
const DefaultSkew = 300 * time.Second

// maxJTI bounds a jti: it is stored in replay caches and audit logs.
const maxJTI = 256

// Claims are the claims of an ARSIA access token (Core §6.1). Times are
// NumericDate seconds since the Unix epoch; zero NotBefore means absent.
type Claims struct {
	Issuer       string        `json:"iss"`
	Subject      string        `json:"sub"`
	Audience     Audience      `json:"aud"`
	ExpiresAt    int64         `json:"exp"`
	IssuedAt     int64         `json:"iat"`
	NotBefore    int64         `json:"nbf,omitempty"`
	ID           string        `json:"jti"`
	Scope        string        `json:"scope"`
	Confirmation *Confirmation `json:"cnf,omitempty"`
}

// Confirmation is the cnf claim of a sender-constrained token (RFC 7800,
// RFC 9449 §6.1).
type Confirmation struct {
	// JKT is the RFC 7638 thumbprint of the key DPoP proofs must be
	// signed with.
	JKT string `json:"jkt"`
}

// ScopeEntries returns the scope split on spaces.
func (c *Claims) ScopeEntries() []string { return scopeEntries(c.Scope) }

// SenderConstrained reports whether the token is DPoP-bound (has
// cnf.jkt): it must then come with a DPoP proof by that key.
func (c *Claims) SenderConstrained() bool {
	return c != nil && c.Confirmation != nil && c.Confirmation.JKT != ""
}

// Audience is the aud claim: one recipient, written as a string, or
// several, written as an array.
type Audience []string

// MarshalJSON writes a single audience as a string.
func (a Audience) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]string(a))
}

// UnmarshalJSON accepts a string or an array of strings.
func (a *Audience) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*a = Audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return fail(ErrInvalidClaim, "aud must be a string or an array of strings")
	}
	*a = many
	return nil
}

// Contains reports whether id is one of the audiences.
func (a Audience) Contains(id string) bool { return slices.Contains(a, id) }

// TokenOptions say what ValidateAccessToken accepts. Now is required;
// zero values of the other fields mean the secure defaults.
type TokenOptions struct {
	// Now is the validation time. This package never reads the clock.
	Now time.Time
	// Skew is the clock skew tolerated on exp, iat and nbf; zero means
	// DefaultSkew. Negative is an error.
	Skew time.Duration
	// Issuer, when set, is the only accepted iss. TokenKeys should hold
	// that issuer's keys only, which binds the issuer already; this check
	// names the mistake when two servers share keys.
	Issuer string
	// ExpectedSubject is the envelope's "from": the token must have been
	// issued to the sender. Required unless SkipSubjectCheckInsecure.
	ExpectedSubject string
	// ExpectedAudience is the envelope's "to": the token must be meant for
	// this recipient. Required unless SkipAudienceCheckInsecure.
	ExpectedAudience string
	// RequiredScope are the request's capabilities; each must be a scope
	// entry, by exact string match.
	RequiredScope []string
	// Algorithms is the allow-list of alg values; empty means EdDSA only.
	// ES256 and RS256 may be added; any other name is an options error.
	Algorithms []string
	// AcceptAnyJTI accepts any non-empty jti of up to 256 bytes instead of
	// requiring a UUID v4 (Core §6.1). The reference SDK and the
	// conformance suites do not check the format (their tokens use
	// UUID-shaped but non-v4 values); the jti's value for audit does not
	// depend on it, so this relaxes interoperability, not security.
	AcceptAnyJTI bool
	// SkipSubjectCheckInsecure and SkipAudienceCheckInsecure skip the sub
	// and aud comparisons. Without them, a token issued to another agent or
	// for another recipient would be accepted; use them only where no
	// envelope exists (tooling, conformance cases that leave them out).
	SkipSubjectCheckInsecure  bool
	SkipAudienceCheckInsecure bool
}

// tokenAlgorithms are the algorithms an access token may use.
var tokenAlgorithms = []string{EdDSA, ES256, RS256}

func (o TokenOptions) resolve() (TokenOptions, error) {
	if o.Now.IsZero() {
		return o, fail(ErrInvalidOptions, "Now is not set")
	}
	switch {
	case o.Skew < 0:
		return o, fail(ErrInvalidOptions, "negative Skew")
	case o.Skew == 0:
		o.Skew = DefaultSkew
	}
	if o.ExpectedSubject == "" && !o.SkipSubjectCheckInsecure {
		return o, fail(ErrInvalidOptions, "ExpectedSubject is empty (the envelope's from)")
	}
	if o.ExpectedAudience == "" && !o.SkipAudienceCheckInsecure {
		return o, fail(ErrInvalidOptions, "ExpectedAudience is empty (the envelope's to)")
	}
	algs, err := resolveAlgorithms(o.Algorithms, tokenAlgorithms, []string{EdDSA})
	if err != nil {
		return o, err
	}
	o.Algorithms = algs
	return o, nil
}

// requiredClaims are the claims every access token must carry (Core §6.1),
// in the order missing ones are reported.
var requiredClaims = []string{"iss", "sub", "aud", "exp", "iat", "jti", "scope"}

// ValidateAccessToken verifies an access token (a JWT in compact form) and
// checks its claims against opts, following Core §6.4:
//
//   - header typ "JWT" (or "at+jwt", RFC 9068), alg in the allow-list, a
//     kid that keys resolves to a key of that algorithm, a valid signature;
//   - the seven required claims (iss, sub, aud, exp, iat, jti, scope) with
//     their types; now ≤ exp+skew, iat ≤ now+skew, nbf ≤ now+skew;
//   - iss, sub and aud equal to the expected values; jti a UUID v4;
//   - every required capability listed in scope (exact match, no
//     wildcards; see CheckScopeCoverage);
//   - cnf, when present, an object with a jkt.
//
// Once the token has been decoded, every check runs and every problem is
// returned, in that order; a token with problems never yields claims. The
// signature is verified before the claims are trusted, but a bad signature
// does not hide the other findings, which helps whoever debugs the issuer.
// Only a ScopeError among the problems means "forbidden"; see ArsiaError.
//
// Token lifetime (exp−iat) is not limited: Core §6.1 makes 3600 s a SHOULD.
func ValidateAccessToken(ctx context.Context, token string, keys TokenKeys, opts TokenOptions) (*Claims, []error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, []error{err}
	}
	if keys == nil {
		return nil, []error{fail(ErrInvalidOptions, "no TokenKeys")}
	}
	jws, err := parseCompact(token, "token")
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(checkCrit(jws.header, "token"))
	add(checkTokenType(jws.header))
	add(verifyTokenSignature(ctx, jws, keys, o.Algorithms))

	c, claimErrs := decodeTokenClaims(jws.claims, o.AcceptAnyJTI)
	errs = append(errs, claimErrs...)
	present := func(name string) bool { _, ok := jws.claims[name]; return ok }
	isString := func(name string) bool { _, ok := jws.claims[name].(string); return ok }
	skew := o.Skew
	if present("exp") && c.ExpiresAt != invalidTime && o.Now.After(time.Unix(c.ExpiresAt, 0).Add(skew)) {
		add(fail(ErrExpired, "token expired: exp %d is more than %d s before now %d",
			c.ExpiresAt, int64(skew.Seconds()), o.Now.Unix()))
	}
	if present("iat") && c.IssuedAt != invalidTime && time.Unix(c.IssuedAt, 0).After(o.Now.Add(skew)) {
		add(fail(ErrNotYetValid, "token iat is in the future: iat %d is more than %d s after now %d",
			c.IssuedAt, int64(skew.Seconds()), o.Now.Unix()))
	}
	if present("nbf") && c.NotBefore != invalidTime && time.Unix(c.NotBefore, 0).After(o.Now.Add(skew)) {
		add(fail(ErrNotYetValid, "token is not yet valid: nbf %d is more than %d s after now %d",
			c.NotBefore, int64(skew.Seconds()), o.Now.Unix()))
	}
	if o.Issuer != "" && isString("iss") && c.Issuer != o.Issuer {
		add(fail(ErrIssuer, "token iss %s does not match expected %s", pyRepr(c.Issuer), pyRepr(o.Issuer)))
	}
	if !o.SkipSubjectCheckInsecure && isString("sub") && c.Subject != o.ExpectedSubject {
		add(fail(ErrSubject, "token sub %s does not match expected %s", pyRepr(c.Subject), pyRepr(o.ExpectedSubject)))
	}
	if !o.SkipAudienceCheckInsecure && c.Audience != nil && !c.Audience.Contains(o.ExpectedAudience) {
		add(fail(ErrAudience, "token aud %s does not match expected %s", audRepr(c.Audience), pyRepr(o.ExpectedAudience)))
	}
	if isString("scope") && validScope(c.Scope) {
		if covered, missing := CheckScopeCoverage(c.Scope, o.RequiredScope); !covered {
			errs = append(errs, &ScopeError{
				Required: slices.Clone(o.RequiredScope),
				Granted:  scopeEntries(c.Scope),
				Missing:  missing,
			})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// checkTokenType requires typ JWT, or at+jwt (RFC 9068), compared without
// regard to case and with an optional "application/" prefix (RFC 7515
// §4.1.9). Requiring it keeps a DPoP proof (typ dpop+jwt) or another JWT
// signed by the same key from passing as an access token.
func checkTokenType(header map[string]any) error {
	typ, present, ok := memberString(header, "typ")
	if !present {
		return fail(ErrTokenType, "token header has no 'typ' (want 'JWT')")
	}
	t := strings.TrimPrefix(strings.ToLower(typ), "application/")
	if !ok || (t != "jwt" && t != "at+jwt") {
		return fail(ErrTokenType, "token typ %s is not 'JWT'", reprValue(header["typ"]))
	}
	return nil
}

// verifyTokenSignature checks alg against the allow-list, resolves kid and
// verifies the signature. Header jwk, jku, x5u and x5c are ignored: an
// access token is trusted only through the issuer's keys.
func verifyTokenSignature(ctx context.Context, jws *compactJWS, keys TokenKeys, allowed []string) error {
	return verifyKidSignature(ctx, jws, keys, allowed, "token")
}

// verifyKidSignature is verifyTokenSignature for any JWT whose key is
// named by kid (what names the JWT in messages).
func verifyKidSignature(ctx context.Context, jws *compactJWS, keys TokenKeys, allowed []string, what string) error {
	alg, _, ok := memberString(jws.header, "alg")
	if !ok || !slices.Contains(allowed, alg) {
		return fail(ErrAlgorithmNotAllowed, "%s alg %s is not allowed (allowed: %s)",
			what, reprValue(jws.header["alg"]), strings.Join(allowed, ", "))
	}
	kid, _, ok := memberString(jws.header, "kid")
	if !ok || kid == "" {
		return fail(ErrUnknownKey, "%s header has no 'kid'", what)
	}
	jwk, err := keys.Key(ctx, kid)
	if err != nil {
		return failCause(ErrUnknownKey, err, "%s kid %s", what, pyRepr(kid))
	}
	if jwk == nil || jwk.Key == nil {
		return fail(ErrUnknownKey, "%s kid %s resolved to no key", what, pyRepr(kid))
	}
	if jwk.Algorithm != "" && jwk.Algorithm != alg {
		return fail(ErrKeyMismatch, "key %s is for %s, %s alg is %s", pyRepr(kid), jwk.Algorithm, what, alg)
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return fail(ErrKeyMismatch, "key %s has use %s", pyRepr(kid), pyRepr(jwk.Use))
	}
	if !jwk.IsPublic() {
		return fail(ErrKeyMismatch, "key %s is not a public key", pyRepr(kid))
	}
	if err := checkKey(alg, jwk.Key); err != nil {
		return err
	}
	if !verifySignature(alg, jwk.Key, jws.signingInput, jws.signature) {
		return fail(ErrBadSignature, "%s signature does not verify with key %s", what, pyRepr(kid))
	}
	return nil
}

// invalidTime marks a time claim that was present but unusable, so the
// time checks skip it (the type error has been reported).
const invalidTime = math.MinInt64

// decodeTokenClaims maps the claims object onto Claims and reports
// missing and ill-typed claims.
func decodeTokenClaims(m map[string]any, anyJTI bool) (*Claims, []error) {
	c := &Claims{}
	var errs []error
	for _, name := range requiredClaims {
		if _, ok := m[name]; !ok {
			errs = append(errs, fail(ErrMissingClaim, "token is missing required claim %s", pyRepr(name)))
		}
	}
	str := func(name string) string {
		s, present, ok := memberString(m, name)
		if present && !ok {
			errs = append(errs, fail(ErrInvalidClaim, "token claim %s must be a string", pyRepr(name)))
		}
		return s
	}
	c.Issuer = str("iss")
	c.Subject = str("sub")
	c.ID = str("jti")
	c.Scope = str("scope")
	if v, ok := m["aud"]; ok {
		aud, err := decodeAudience(v)
		errs = appendErr(errs, err)
		c.Audience = aud
	}
	num := func(name string, round func(float64) float64) int64 {
		v, present := m[name]
		if !present {
			return 0
		}
		t, err := numericDate(name, v, round)
		if err != nil {
			errs = append(errs, err)
			return invalidTime
		}
		return t
	}
	// Rounding fails closed: a fractional exp is cut down, a fractional iat
	// or nbf is rounded up.
	c.ExpiresAt = num("exp", math.Floor)
	c.IssuedAt = num("iat", math.Ceil)
	c.NotBefore = num("nbf", math.Ceil)
	if _, ok := m["jti"].(string); ok {
		switch {
		case c.ID == "" || len(c.ID) > maxJTI:
			errs = append(errs, fail(ErrInvalidClaim, "token jti must be 1 to %d bytes", maxJTI))
		case !anyJTI && !isUUIDv4(c.ID):
			errs = append(errs, fail(ErrInvalidClaim, "token jti %s is not a UUID v4", pyRepr(c.ID)))
		}
	}
	if _, ok := m["scope"].(string); ok && !validScope(c.Scope) {
		errs = append(errs, fail(ErrInvalidClaim, "token scope %s is not a space-separated list of capabilities", pyRepr(c.Scope)))
	}
	if v, ok := m["cnf"]; ok {
		cnf, err := decodeConfirmation(v)
		errs = appendErr(errs, err)
		c.Confirmation = cnf
	}
	return c, errs
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

func decodeAudience(v any) (Audience, error) {
	bad := fail(ErrInvalidClaim, "token claim 'aud' must be a non-empty string or array of non-empty strings")
	switch a := v.(type) {
	case string:
		if a == "" {
			return nil, bad
		}
		return Audience{a}, nil
	case []any:
		if len(a) == 0 {
			return nil, bad
		}
		out := make(Audience, len(a))
		for i, e := range a {
			s, ok := e.(string)
			if !ok || s == "" {
				return nil, bad
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, bad
}

func decodeConfirmation(v any) (*Confirmation, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fail(ErrInvalidClaim, "token claim 'cnf' must be an object")
	}
	jkt, _, ok := memberString(m, "jkt")
	if !ok || !isB64URL(jkt) {
		// A cnf this package cannot check (x5t#S256, jwk...) must not be
		// read as "not sender-constrained".
		return nil, fail(ErrInvalidClaim, "token claim 'cnf' has no base64url 'jkt'")
	}
	return &Confirmation{JKT: jkt}, nil
}

// numericDate reads an RFC 7519 NumericDate.
func numericDate(name string, v any, round func(float64) float64) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fail(ErrInvalidClaim, "token claim %s must be a number", pyRepr(name))
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > 1<<53 {
		return 0, fail(ErrInvalidClaim, "token claim %s is not a usable NumericDate", pyRepr(name))
	}
	return int64(round(f)), nil
}

// audRepr quotes an audience as the reference SDK does: a string for one
// audience, a Python list for several.
func audRepr(a Audience) string {
	if len(a) == 1 {
		return pyRepr(a[0])
	}
	q := make([]string, len(a))
	for i, s := range a {
		q[i] = pyRepr(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// reprValue quotes an untrusted header value of any JSON type.
func reprValue(v any) string {
	switch t := v.(type) {
	case nil:
		return "None"
	case string:
		return pyRepr(t)
	}
	return jsonKind(v)
}

// isUUIDv4 reports whether s is a UUID v4 in 8-4-4-4-12 hex form, as the
// ARSIA common schema defines it (either case).
func isUUIDv4(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		case 14:
			if c != '4' {
				return false
			}
		case 19:
			if !strings.ContainsRune("89abAB", rune(c)) {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// scopeEntries splits a scope on spaces (RFC 6749 §3.3 separates scope
// tokens with %x20 only). Other whitespace stays inside an entry, where it
// can never match a capability.
func scopeEntries(scope string) []string {
	var out []string
	for _, e := range strings.Split(scope, " ") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// validScope reports whether scope has at least one entry and only
// printable ASCII entries.
func validScope(scope string) bool {
	entries := scopeEntries(scope)
	if len(entries) == 0 {
		return false
	}
	for i := 0; i < len(scope); i++ {
		if c := scope[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// CheckScopeCoverage reports whether every required capability is an entry
// of the space-separated scope, and which are missing, in request order
// without repeats.
//
// Matching is exact (Core §6.4 step 5): a scope entry "notes.*" does not
// cover "notes.read". Wildcards belong to capability policies and
// effective-capability downgrades (arsia.MatchCapabilities); a token
// grants exactly what it lists, so an authorization server that wants to
// grant a family of capabilities must list them. An empty requirement is
// covered.
func CheckScopeCoverage(scope string, required []string) (covered bool, missing []string) {
	granted := scopeEntries(scope)
	for _, r := range required {
		if !slices.Contains(granted, r) && !slices.Contains(missing, r) {
			missing = append(missing, r)
		}
	}
	return len(missing) == 0, missing
}

// CheckBearer refuses a DPoP-bound token (one with cnf.jkt) presented
// with the Bearer scheme: RFC 9449 §7.1 forbids downgrading a
// sender-constrained token to a bearer token, which would make a stolen
// token usable without the key.
func CheckBearer(c *Claims) error {
	if c.SenderConstrained() {
		return fail(ErrDPoPRequired, "token is bound to a DPoP key (cnf.jkt) but came without a DPoP proof")
	}
	return nil
}

// IssueAccessToken signs claims as an ARSIA access token with header
// {"alg", "kid", "typ": "JWT"}; the key picks alg (Ed25519 → EdDSA, P-256
// → ES256, RSA → RS256). It is meant for tests and Custos tooling; an
// authorization server would be the usual issuer.
//
// It refuses claims that ValidateAccessToken would reject whatever the
// time and the request: a missing required claim, a jti that is not a
// UUID v4, an invalid scope, exp not after iat. Tokens that are expired,
// premature or meant for someone else can be issued, so they can be
// tested.
func IssueAccessToken(signer crypto.Signer, kid string, claims Claims) (string, error) {
	var missing []string
	for name, empty := range map[string]bool{
		"iss": claims.Issuer == "", "sub": claims.Subject == "", "aud": len(claims.Audience) == 0,
		"exp": claims.ExpiresAt == 0, "iat": claims.IssuedAt == 0, "jti": claims.ID == "", "scope": claims.Scope == "",
	} {
		if empty {
			missing = append(missing, name)
		}
	}
	switch {
	case kid == "":
		return "", fail(ErrIssue, "no kid")
	case len(missing) > 0:
		slices.Sort(missing)
		return "", fail(ErrIssue, "claims %s are not set", strings.Join(missing, ", "))
	case slices.Contains(claims.Audience, ""):
		return "", fail(ErrIssue, "empty audience")
	case !isUUIDv4(claims.ID):
		return "", fail(ErrIssue, "jti %s is not a UUID v4", pyRepr(claims.ID))
	case !validScope(claims.Scope):
		return "", fail(ErrIssue, "invalid scope %s", pyRepr(claims.Scope))
	case claims.ExpiresAt <= claims.IssuedAt:
		return "", fail(ErrIssue, "exp is not after iat")
	case claims.Confirmation != nil && !isB64URL(claims.Confirmation.JKT):
		return "", fail(ErrIssue, "cnf.jkt is not a thumbprint")
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", failCause(ErrIssue, err, "claims")
	}
	return signCompact(signer, map[string]any{"kid": kid, "typ": "JWT"}, payload, tokenAlgorithms)
}
