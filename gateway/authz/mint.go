package authz

import (
	"crypto"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia/auth"
)

// TokenRequest describes an access token to mint with IssueToken.
type TokenRequest struct {
	// Issuer (iss), Subject (sub: the agent that will send requests) and
	// Audience (aud: the gateway's agent id).
	Issuer, Subject, Audience string
	// Scope are the capabilities granted, exact strings.
	Scope []string
	// Now is iat (time.Now when zero); TTL the lifetime (5 minutes when
	// zero).
	Now time.Time
	TTL time.Duration
	// JKT, when set, binds the token to a DPoP key: the RFC 7638
	// thumbprint of its public key (auth.Thumbprint, or KeyThumbprint).
	JKT string
	// ID is the jti; a random UUID v4 when empty.
	ID string
}

// IssueToken signs an ARSIA access token with an authorization server's
// key (Ed25519, P-256 or RSA; kid names it in the issuer's JWKS). It is for
// tests, demos and custos token issue: a deployment gets its tokens from an
// authorization server.
func IssueToken(signer crypto.Signer, kid string, r TokenRequest) (string, error) {
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	if r.TTL == 0 {
		r.TTL = 5 * time.Minute
	}
	if r.TTL < time.Second {
		return "", errors.New("authz: token TTL below one second")
	}
	if r.ID == "" {
		r.ID = auth.NewJTI()
	}
	c := auth.Claims{
		Issuer: r.Issuer, Subject: r.Subject, Audience: auth.Audience{r.Audience},
		IssuedAt: r.Now.Unix(), ExpiresAt: r.Now.Add(r.TTL).Unix(),
		ID: r.ID, Scope: strings.Join(r.Scope, " "),
	}
	if r.Audience == "" {
		c.Audience = nil
	}
	if r.JKT != "" {
		c.Confirmation = &auth.Confirmation{JKT: r.JKT}
	}
	return auth.IssueAccessToken(signer, kid, c)
}

// KeyThumbprint is the RFC 7638 thumbprint of a public key (Ed25519 or
// P-256), the cnf.jkt of tokens bound to it.
func KeyThumbprint(pub crypto.PublicKey) (string, error) {
	jwk, err := auth.PublicJWK(pub)
	if err != nil {
		return "", err
	}
	return auth.Thumbprint(jwk)
}

// NewProof signs a DPoP proof for one request: method and URL are the
// request's (the URL's query and fragment are left out of htu), token the
// access token it accompanies (its hash becomes ath). now is iat
// (time.Now when zero). Each call makes a new jti.
func NewProof(signer crypto.Signer, method, rawURL, token string, now time.Time) (string, error) {
	if now.IsZero() {
		now = time.Now()
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("authz: DPoP URL %q is not an absolute http(s) URL", rawURL)
	}
	if method == "" || token == "" {
		return "", errors.New("authz: a DPoP proof needs the method and the access token")
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	return auth.NewDPoPProof(signer, auth.DPoPClaims{
		Method: method, URL: u.String(), IssuedAt: now.Unix(), AccessTokenHash: auth.AccessTokenHash(token),
	})
}
