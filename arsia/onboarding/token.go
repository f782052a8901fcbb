package onboarding

import (
	"crypto"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
)

// TokenOptions say how IssueToken signs and shapes an access token.
type TokenOptions struct {
	// Signer and KeyID are the gateway's (or its authorization server's)
	// signing key and its kid, which validators look up in the issuer's
	// JWKS. Ed25519 is the algorithm every ARSIA validator accepts.
	Signer crypto.Signer
	KeyID  string
	// Issuer is the iss claim: the gateway's agent id.
	Issuer string
	// Audience is the aud claim: the agents the token is for.
	Audience []string
	// Now is the issue time (iat). This package never reads the clock.
	Now time.Time
	// Lifetime is exp−iat in whole seconds; zero means the decision's
	// TokenLifetimeSeconds, the policy's maximum, which it must not
	// exceed.
	Lifetime time.Duration
	// JTI is the token id, a UUID v4; empty means a random one.
	JTI string
	// JKT, when set, binds the token to the agent's DPoP key (cnf.jkt,
	// an RFC 7638 thumbprint).
	JKT string
}

// IssueToken issues the access token of an approved decision (Phase 5,
// ARSIA-Identity §7.6): sub is the agent, scope exactly its effective
// capabilities, exp at most the policy's token lifetime after Now. It
// refuses, with an error wrapping ErrTokenIssue, a denied or malformed
// decision, a lifetime above the policy's, an issuer that is not an agent
// id, and an empty audience. The caller records EventTokenIssued.
func IssueToken(p *Payload, opts TokenOptions) (string, *auth.Claims, error) {
	claims, err := tokenClaims(p, opts)
	if err != nil {
		return "", nil, err
	}
	if opts.Signer == nil {
		return "", nil, fmt.Errorf("%w: no signer", ErrTokenIssue)
	}
	tok, err := auth.IssueAccessToken(opts.Signer, opts.KeyID, *claims)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrTokenIssue, err)
	}
	return tok, claims, nil
}

func tokenClaims(p *Payload, opts TokenOptions) (*auth.Claims, error) {
	if !p.Approved() {
		return nil, fmt.Errorf("%w: the decision is not an approval", ErrTokenIssue)
	}
	if len(p.DenialReason) > 0 {
		return nil, fmt.Errorf("%w: an approval carries denial reasons", ErrTokenIssue)
	}
	if _, err := arsia.ParseAgentID(p.AgentID); err != nil {
		return nil, fmt.Errorf("%w: agent_id: %w", ErrTokenIssue, err)
	}
	scope := p.Effective()
	if len(scope) == 0 {
		return nil, fmt.Errorf("%w: the approval grants no capability", ErrTokenIssue)
	}
	for _, c := range scope {
		if arsia.ValidateCapability(c) != nil || arsia.IsWildcardCapability(c) {
			return nil, fmt.Errorf("%w: granted capability %q is not a concrete capability", ErrTokenIssue, c)
		}
	}
	if _, err := arsia.ParseAgentID(opts.Issuer); err != nil {
		return nil, fmt.Errorf("%w: issuer: %w", ErrTokenIssue, err)
	}
	if len(opts.Audience) == 0 || slices.Contains(opts.Audience, "") {
		return nil, fmt.Errorf("%w: no audience", ErrTokenIssue)
	}
	if opts.Now.IsZero() {
		return nil, fmt.Errorf("%w: Now is not set", ErrTokenIssue)
	}
	max := p.TokenLifetimeSeconds
	if max < 1 || max > MaxTokenLifetimeSeconds {
		return nil, fmt.Errorf("%w: token lifetime %d s is not between 1 and %d", ErrTokenIssue, max, MaxTokenLifetimeSeconds)
	}
	life := int64(max)
	if opts.Lifetime != 0 {
		if opts.Lifetime < time.Second || opts.Lifetime%time.Second != 0 {
			return nil, fmt.Errorf("%w: lifetime %v is not a positive whole number of seconds", ErrTokenIssue, opts.Lifetime)
		}
		if life = int64(opts.Lifetime / time.Second); life > int64(max) {
			return nil, fmt.Errorf("%w: lifetime %d s exceeds the policy's %d s", ErrTokenIssue, life, max)
		}
	}
	jti := opts.JTI
	if jti == "" {
		jti = auth.NewJTI()
	}
	iat := opts.Now.Unix()
	c := &auth.Claims{
		Issuer:    opts.Issuer,
		Subject:   p.AgentID,
		Audience:  slices.Clone(opts.Audience),
		IssuedAt:  iat,
		ExpiresAt: iat + life,
		ID:        jti,
		Scope:     strings.Join(scope, " "),
	}
	if opts.JKT != "" {
		c.Confirmation = &auth.Confirmation{JKT: opts.JKT}
	}
	return c, nil
}
