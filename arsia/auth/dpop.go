package auth

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"
)

// DPoPClaims are the claims of a DPoP proof (RFC 9449 §4.2; ARSIA-Identity
// §3.3).
type DPoPClaims struct {
	// ID (jti) is unique per proof; receivers refuse a second use.
	ID string `json:"jti"`
	// Method (htm) is the HTTP method of the request: POST for the ARSIA
	// inbox.
	Method string `json:"htm"`
	// URL (htu) is the request URL without query and fragment.
	URL string `json:"htu"`
	// IssuedAt (iat) is the proof's creation time, in NumericDate seconds.
	IssuedAt int64 `json:"iat"`
	// AccessTokenHash (ath) is AccessTokenHash of the token sent with the
	// proof.
	AccessTokenHash string `json:"ath"`
}

// DPoPProof is a validated DPoP proof.
type DPoPProof struct {
	// Algorithm is the alg the proof was signed with.
	Algorithm string
	// JWK is the public key from the proof header, which signed it.
	JWK JWK
	// Claims are the proof's claims.
	Claims DPoPClaims
}

// DPoPOptions say what ValidateDPoP accepts. Method, URL, AccessToken, Now
// and Replay are required.
type DPoPOptions struct {
	// Method is the HTTP method of the request the proof came with.
	Method string
	// URL is the absolute URL of that request, as the receiver was
	// addressed (scheme, host, path; query and fragment are ignored).
	URL string
	// AccessToken is the token the proof came with; ath must be its hash.
	AccessToken string
	// Now is the validation time. This package never reads the clock.
	Now time.Time
	// Skew bounds |iat − Now|; zero means DefaultSkew.
	Skew time.Duration
	// Replay records the jti of every accepted proof. There is no
	// validation without replay protection: a captured proof would
	// otherwise be reusable for its whole window. Its clock must agree
	// with Now: a cache whose clock runs ahead forgets a jti before the
	// proof has expired.
	Replay ReplayCache
	// Algorithms is the allow-list; empty means EdDSA only. ES256 may be
	// added.
	Algorithms []string
	// TokenRequest checks a proof sent to a token endpoint (RFC 9449 §5):
	// no access token exists yet, so AccessToken must be empty and the
	// proof must not carry ath.
	TokenRequest bool
}

// dpopAlgorithms are the algorithms a DPoP proof may use.
var dpopAlgorithms = []string{EdDSA, ES256}

// dpopClaims are the claims every proof must carry, in reporting order.
var dpopClaims = []string{"jti", "htm", "htu", "iat", "ath"}

type dpopConfig struct {
	DPoPOptions
	htu string // normalized URL
}

func (o DPoPOptions) resolve() (dpopConfig, error) {
	cfg := dpopConfig{DPoPOptions: o}
	switch {
	case o.Now.IsZero():
		return cfg, fail(ErrInvalidOptions, "Now is not set")
	case o.Skew < 0:
		return cfg, fail(ErrInvalidOptions, "negative Skew")
	case o.Method == "":
		return cfg, fail(ErrInvalidOptions, "Method is not set")
	case o.AccessToken == "" && !o.TokenRequest:
		return cfg, fail(ErrInvalidOptions, "AccessToken is not set (ARSIA proofs always carry ath)")
	case o.AccessToken != "" && o.TokenRequest:
		return cfg, fail(ErrInvalidOptions, "AccessToken is set for a token request proof")
	case o.Replay == nil:
		return cfg, fail(ErrInvalidOptions, "Replay is not set")
	}
	if cfg.Skew == 0 {
		cfg.Skew = DefaultSkew
	}
	htu, err := normalizeHTU(o.URL)
	if err != nil {
		return cfg, failCause(ErrInvalidOptions, err, "URL %s", pyRepr(o.URL))
	}
	cfg.htu = htu
	algs, err := resolveAlgorithms(o.Algorithms, dpopAlgorithms, []string{EdDSA})
	if err != nil {
		return cfg, err
	}
	cfg.Algorithms = algs
	return cfg, nil
}

// ValidateDPoP checks a DPoP proof (the DPoP request header) as RFC 9449
// §4.3 and ARSIA-Identity §3.3 ask:
//
//   - header typ "dpop+jwt", alg in the allow-list, jwk a public key of
//     that algorithm without private members, signature by that key;
//   - claims jti, htm, htu, iat and ath present and typed; htm equal to the
//     request method; htu equal to the request URL after normalization
//     (scheme and host case, default port, percent-encoding; query and
//     fragment ignored); iat within Now ± skew; ath equal to
//     AccessTokenHash(opts.AccessToken);
//   - jti not seen before, recorded in opts.Replay until iat+skew, when
//     the proof would expire anyway.
//
// Every problem found is returned. The replay cache is consulted only when
// nothing else is wrong, so forged or stale proofs cannot fill it or burn
// the jti of a legitimate one.
//
// A valid proof says the request was signed by the holder of its key; to
// know that key is the one the token was issued for, call
// VerifyDPoPBinding.
func ValidateDPoP(ctx context.Context, proof string, opts DPoPOptions) (*DPoPProof, []error) {
	cfg, err := opts.resolve()
	if err != nil {
		return nil, []error{err}
	}
	jws, err := parseCompact(proof, "DPoP proof")
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	out := &DPoPProof{}
	add(checkCrit(jws.header, "DPoP proof"))
	if typ, _, _ := memberString(jws.header, "typ"); strings.TrimPrefix(strings.ToLower(typ), "application/") != "dpop+jwt" {
		add(fail(ErrTokenType, "DPoP proof typ %s is not 'dpop+jwt'", reprValue(jws.header["typ"])))
	}
	alg, _, algOK := memberString(jws.header, "alg")
	if !algOK || !slices.Contains(cfg.Algorithms, alg) {
		algOK = false
		add(fail(ErrAlgorithmNotAllowed, "DPoP proof alg %s is not allowed (allowed: %s)",
			reprValue(jws.header["alg"]), strings.Join(cfg.Algorithms, ", ")))
	}
	out.Algorithm = alg
	pub, jwk, err := proofKey(jws.header)
	add(err)
	out.JWK = jwk
	if algOK && err == nil {
		if err := checkKey(alg, pub); err != nil {
			add(err)
		} else if !verifySignature(alg, pub, jws.signingInput, jws.signature) {
			add(fail(ErrBadSignature, "DPoP proof signature does not verify with its jwk"))
		}
	}

	m := jws.claims
	for _, name := range dpopClaims {
		if _, ok := m[name]; !ok && !(name == "ath" && cfg.TokenRequest) {
			add(fail(ErrMissingClaim, "DPoP proof is missing required claim %s", pyRepr(name)))
		}
	}
	str := func(name string) (string, bool) {
		s, present, ok := memberString(m, name)
		if present && !ok {
			add(fail(ErrInvalidClaim, "DPoP proof claim %s must be a string", pyRepr(name)))
		}
		return s, ok
	}
	c := &out.Claims
	var ok bool
	if c.ID, ok = str("jti"); ok && (c.ID == "" || len(c.ID) > maxJTI) {
		add(fail(ErrInvalidClaim, "DPoP proof jti must be 1 to %d bytes", maxJTI))
	} else if ok && slices.ContainsFunc(reservedReplayPrefixes, func(p string) bool { return strings.HasPrefix(c.ID, p) }) {
		// The replay set also holds revocations and used assertions
		// under these prefixes: such a jti would revoke a token.
		add(fail(ErrInvalidClaim, "DPoP proof jti %s uses a reserved prefix", pyRepr(c.ID)))
	}
	if c.Method, ok = str("htm"); ok && c.Method != cfg.Method {
		// Methods are case-sensitive (RFC 9110 §9.1).
		add(fail(ErrDPoPMethod, "DPoP htm %s does not match the request method %s", pyRepr(c.Method), pyRepr(cfg.Method)))
	}
	if c.URL, ok = str("htu"); ok {
		if got, err := normalizeHTU(c.URL); err != nil || got != cfg.htu {
			add(fail(ErrDPoPURL, "DPoP htu %s does not match the request URL %s", pyRepr(c.URL), pyRepr(cfg.URL)))
		}
	}
	if v, present := m["iat"]; present {
		iat, err := numericDate("iat", v, math.Floor)
		if err != nil {
			add(fail(ErrInvalidClaim, "DPoP proof claim 'iat' must be a number"))
		} else {
			c.IssuedAt = iat
			t := time.Unix(iat, 0)
			switch {
			case t.After(cfg.Now.Add(cfg.Skew)):
				add(fail(ErrDPoPTime, "DPoP iat is in the future: iat %d is more than %d s after now %d",
					iat, int64(cfg.Skew.Seconds()), cfg.Now.Unix()))
			case t.Before(cfg.Now.Add(-cfg.Skew)):
				add(fail(ErrDPoPTime, "DPoP iat is too old: iat %d is more than %d s before now %d",
					iat, int64(cfg.Skew.Seconds()), cfg.Now.Unix()))
			}
		}
	}
	if _, present := m["ath"]; present && cfg.TokenRequest {
		add(fail(ErrInvalidClaim, "DPoP proof for a token request carries 'ath' but there is no access token"))
	} else if c.AccessTokenHash, ok = str("ath"); ok {
		want := AccessTokenHash(cfg.AccessToken)
		if subtle.ConstantTimeCompare([]byte(c.AccessTokenHash), []byte(want)) != 1 {
			add(fail(ErrDPoPTokenHash, "DPoP ath does not match the access token"))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}

	until := time.Unix(c.IssuedAt, 0).Add(cfg.Skew)
	seen, err := cfg.Replay.Seen(ctx, c.ID, until)
	switch {
	case err != nil:
		return nil, []error{failCause(ErrReplayCache, err, "cannot record DPoP jti %s", pyRepr(c.ID))}
	case seen:
		return nil, []error{fail(ErrReplay, "DPoP proof replay: jti %s was already used", pyRepr(c.ID))}
	}
	return out, nil
}

// proofKey reads the jwk header of a DPoP proof.
func proofKey(header map[string]any) (crypto.PublicKey, JWK, error) {
	v, ok := header["jwk"]
	if !ok {
		return nil, JWK{}, fail(ErrInvalidJWK, "DPoP proof header has no 'jwk'")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, JWK{}, fail(ErrInvalidJWK, "DPoP proof jwk is not an object")
	}
	jwk, err := jwkFromMap(m)
	if err != nil {
		return nil, JWK{}, err
	}
	pub, err := jwk.PublicKey()
	if err != nil {
		return nil, jwk, err
	}
	return pub, jwk, nil
}

// normalizeHTU reduces an http(s) URL to the form htu comparisons use
// (RFC 9449 §4.3 step 9, RFC 3986 §6.2.2–6.2.3): lower-case scheme and
// host, no default port, "/" for an empty path, percent-encodings with
// upper-case hex and unreserved characters decoded; query and fragment
// dropped. Dot segments are kept, so "/a/../inbox" is not "/inbox": a
// proof must name the URL as sent.
func normalizeHTU(raw string) (string, error) {
	if len(raw) > 2048 {
		return "", fmt.Errorf("URL longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", fmt.Errorf("not an http or https URL")
	}
	if u.Opaque != "" || u.User != nil || u.Hostname() == "" {
		return "", fmt.Errorf("not an absolute URL with a host and no user information")
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	switch port := u.Port(); {
	case port == "", scheme == "https" && port == "443", scheme == "http" && port == "80":
	default:
		host += ":" + port
	}
	path := normalizePercent(u.EscapedPath())
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, nil
}

// normalizePercent upper-cases the hex of percent-encodings and decodes
// those of unreserved characters (RFC 3986 §2.3, §6.2.2.2). The input has
// been validated by url.Parse.
func normalizePercent(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+2 >= len(p) {
			b.WriteByte(p[i])
			continue
		}
		hi, lo := unhex(p[i+1]), unhex(p[i+2])
		if hi < 0 || lo < 0 {
			b.WriteByte(p[i])
			continue
		}
		c := byte(hi<<4 | lo)
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
		i += 2
	}
	return b.String()
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// AccessTokenHash is the ath of a DPoP proof: the unpadded base64url
// SHA-256 of the access token's ASCII text (RFC 9449 §4.2).
func AccessTokenHash(accessToken string) string {
	sum := sha256.Sum256([]byte(accessToken))
	return b64.EncodeToString(sum[:])
}

// VerifyDPoPBinding checks that a DPoP proof was signed by the key the
// access token is bound to: the token's cnf.jkt must equal the RFC 7638
// thumbprint of the proof's jwk (RFC 9449 §6.1, ARSIA-Identity §9.2). A
// token without cnf.jkt fails too: a proof by any key would otherwise
// "bind" it. Call it after ValidateAccessToken and ValidateDPoP have both
// succeeded.
func VerifyDPoPBinding(claims *Claims, proof *DPoPProof) error {
	if proof == nil {
		return fail(ErrDPoPBinding, "no DPoP proof")
	}
	if !claims.SenderConstrained() {
		return fail(ErrDPoPBinding, "token has no cnf.jkt: it is not bound to a DPoP key")
	}
	jkt, err := Thumbprint(proof.JWK)
	if err != nil {
		return failCause(ErrDPoPBinding, err, "DPoP proof jwk")
	}
	if subtle.ConstantTimeCompare([]byte(jkt), []byte(claims.Confirmation.JKT)) != 1 {
		return fail(ErrDPoPBinding, "DPoP proof key thumbprint %s does not match the token's cnf.jkt %s",
			pyRepr(jkt), pyRepr(claims.Confirmation.JKT))
	}
	return nil
}

// NewDPoPProof signs a DPoP proof with header {"alg", "jwk", "typ":
// "dpop+jwt"}; the key (Ed25519 or P-256) picks alg and its public JWK is
// embedded. An empty claims.ID is replaced by a random UUID v4; the other
// claims are signed as given, so tests can make proofs that must fail.
// Compute AccessTokenHash with AccessTokenHash.
func NewDPoPProof(signer crypto.Signer, claims DPoPClaims) (string, error) {
	if signer == nil {
		return "", fail(ErrIssue, "no signer")
	}
	jwk, err := PublicJWK(signer.Public())
	if err != nil {
		return "", failCause(ErrIssue, err, "DPoP key")
	}
	if claims.ID == "" {
		claims.ID = NewJTI()
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", failCause(ErrIssue, err, "claims")
	}
	return signCompact(signer, map[string]any{"typ": "dpop+jwt", "jwk": jwk}, payload, dpopAlgorithms)
}

// NewTokenRequestProof signs the DPoP proof of a token request (RFC 9449
// §5): htm method (POST), htu the token endpoint URL without query and
// fragment, iat now, a random jti, and no ath since no token exists yet.
// The token issued is bound to the signer's key.
func NewTokenRequestProof(signer crypto.Signer, method, tokenURL string, now time.Time) (string, error) {
	if signer == nil {
		return "", fail(ErrIssue, "no signer")
	}
	if method == "" || now.IsZero() {
		return "", fail(ErrIssue, "a token request proof needs the method and the time")
	}
	u, err := url.Parse(tokenURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fail(ErrIssue, "token URL %s is not an absolute http(s) URL", pyRepr(tokenURL))
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	jwk, err := PublicJWK(signer.Public())
	if err != nil {
		return "", failCause(ErrIssue, err, "DPoP key")
	}
	payload, err := json.Marshal(map[string]any{"jti": NewJTI(), "htm": method, "htu": u.String(), "iat": now.Unix()})
	if err != nil {
		return "", failCause(ErrIssue, err, "claims")
	}
	return signCompact(signer, map[string]any{"typ": "dpop+jwt", "jwk": jwk}, payload, dpopAlgorithms)
}

// NewJTI returns a random UUID v4, for jti claims.
func NewJTI() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
