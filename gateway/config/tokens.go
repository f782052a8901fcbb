package config

import (
	"fmt"
	"net/url"
	"slices"
	"time"
)

// Token modes (tokens.mode).
const (
	TokensOff    = "off"
	TokensBearer = "bearer"
	TokensDPoP   = "dpop"
	TokensAny    = "any"
)

// DefaultClockSkew is the skew tolerated on token and proof times (ARSIA
// Core §8.3).
const DefaultClockSkew = 300 * time.Second

// Tokens says which access tokens the inbox demands (docs/tokens.md).
type Tokens struct {
	// Mode is off (no token), bearer ("Authorization: Bearer"), dpop
	// ("Authorization: DPoP" with a DPoP proof and a bound token) or any
	// (either; a bound token still needs its proof). Empty means off.
	Mode string `yaml:"mode"`
	// Issuers are the trusted authorization servers.
	Issuers []TokenIssuer `yaml:"issuers"`
	// MaxLifetime, when set, refuses tokens whose exp − iat exceeds it.
	MaxLifetime time.Duration `yaml:"max_lifetime"`
	// ClockSkew is tolerated on exp, iat and nbf (300s when zero; at
	// most 300s).
	ClockSkew time.Duration `yaml:"clock_skew"`
	// ReplayWindow bounds how old or early a DPoP proof's iat may be, and
	// so how long its jti is remembered (clock_skew when zero; at most
	// 300s).
	ReplayWindow time.Duration `yaml:"replay_window"`
	// ReplayCapacity bounds the remembered DPoP proof ids (262144 when
	// zero); when full, proofs are refused with 503 until entries expire.
	ReplayCapacity int `yaml:"replay_capacity"`
	// TokenAlgorithms are the accepted algorithms of access tokens
	// (EdDSA, ES256 and RS256 when empty); ProofAlgorithms those of DPoP
	// proofs (EdDSA and ES256 when empty).
	TokenAlgorithms []string `yaml:"token_algorithms"`
	ProofAlgorithms []string `yaml:"proof_algorithms"`
	// AcceptAnyJTI accepts any non-empty token jti instead of demanding
	// a UUID v4 (for authorization servers that use another format).
	AcceptAnyJTI bool `yaml:"accept_any_jti"`
}

// TokenIssuer is a trusted authorization server: its iss and where its
// public keys are (exactly one of a JWKS file and an https JWKS URL).
type TokenIssuer struct {
	Issuer   string `yaml:"issuer"`
	JWKSFile string `yaml:"jwks_file"`
	JWKSURL  string `yaml:"jwks_url"`
}

// check returns what is wrong with t, and fills the defaults. ownIssuer
// says the gateway's authorization server is on: its tokens are trusted
// without a configured issuer.
func (t *Tokens) check(ownIssuer bool) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch t.Mode {
	case "":
		t.Mode = TokensOff
	case TokensOff, TokensBearer, TokensDPoP, TokensAny:
	default:
		bad("mode %q: want off, bearer, dpop or any", t.Mode)
	}
	if t.Mode != TokensOff && t.Mode != "" && len(t.Issuers) == 0 && !ownIssuer && len(errs) == 0 {
		bad("mode %s: no issuers (whose tokens to accept) and authorization_server is not enabled", t.Mode)
	}
	seen := map[string]bool{}
	for i, is := range t.Issuers {
		switch {
		case is.Issuer == "":
			bad("issuers[%d]: no issuer (the tokens' iss)", i)
		case seen[is.Issuer]:
			bad("issuers[%d]: %q is listed twice", i, is.Issuer)
		}
		seen[is.Issuer] = true
		switch {
		case (is.JWKSFile == "") == (is.JWKSURL == ""):
			bad("issuers[%d] (%s): want exactly one of jwks_file and jwks_url", i, is.Issuer)
		case is.JWKSURL != "":
			if u, err := url.Parse(is.JWKSURL); err != nil || u.Scheme != "https" || u.Host == "" {
				bad("issuers[%d] (%s): jwks_url %q is not an https URL", i, is.Issuer, is.JWKSURL)
			}
		}
	}
	if t.MaxLifetime < 0 {
		bad("max_lifetime: negative")
	}
	if t.ClockSkew == 0 {
		t.ClockSkew = DefaultClockSkew
	}
	if t.ClockSkew < time.Second || t.ClockSkew > DefaultClockSkew {
		bad("clock_skew %s: want 1s to %s", t.ClockSkew, DefaultClockSkew)
	}
	if t.ReplayWindow == 0 {
		t.ReplayWindow = t.ClockSkew
	}
	if t.ReplayWindow < time.Second || t.ReplayWindow > DefaultClockSkew {
		bad("replay_window %s: want 1s to %s", t.ReplayWindow, DefaultClockSkew)
	}
	if t.ReplayCapacity < 0 {
		bad("replay_capacity: negative")
	}
	errs = append(errs, checkAlgorithms("token_algorithms", t.TokenAlgorithms)...)
	errs = append(errs, checkAlgorithms("proof_algorithms", t.ProofAlgorithms)...)
	if slices.Contains(t.ProofAlgorithms, "RS256") {
		bad("proof_algorithms: RS256 is not accepted for DPoP proofs")
	}
	return errs
}
