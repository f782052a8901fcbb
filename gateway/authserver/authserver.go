// Package authserver makes custos serve its own OAuth 2.0 authorization
// server (ARSIA-Identity §3, Core §6): agents authenticate with a signed
// client assertion (RFC 7523 private_key_jwt, by the ARSIA key the gateway
// already trusts for their envelopes) and receive access tokens in exactly
// the claim format gateway/authz validates, signed with the gateway's own
// key, optionally bound to a DPoP key (RFC 9449 §5).
//
// Endpoints (Mount):
//
//	GET  /.well-known/oauth-authorization-server  RFC 8414 metadata
//	POST /oauth/token       client_credentials grant
//	POST /oauth/introspect  RFC 7662, client-authenticated
//	POST /oauth/revoke      RFC 7009
//
// A token's scope is what the agent asked for, each entry granted by the
// sender grants in force (Options.Grants is read per request, so a
// reload applies at once). Revocations are kept in the replay set under
// auth.RevokedTokenKey(jti) until the token expires; gateway/authz reads
// them there. Nothing is written for a request whose client assertion
// fails: the assertion's jti is recorded only once it is valid.
package authserver

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
)

// Defaults and bounds of token lifetimes.
const (
	DefaultTokenLifetime    = 5 * time.Minute
	DefaultMaxTokenLifetime = time.Hour
	MaxTokenLifetime        = 24 * time.Hour
)

// Paths of the endpoints, below the issuer URL.
const (
	MetadataPath   = "/.well-known/oauth-authorization-server"
	TokenPath      = "/oauth/token"
	IntrospectPath = "/oauth/introspect"
	RevokePath     = "/oauth/revoke"
)

// Replay is the replay set the server records assertions, proofs and
// revocations in: an auth.ReplayCache that can also be read.
type Replay interface {
	auth.ReplayCache
	auth.ReplayLookup
}

// Options configure a Server.
type Options struct {
	// Issuer is the iss of issued tokens and the base URL of the
	// endpoints: the gateway's public URL, without a trailing slash.
	Issuer string
	// Agent is the gateway's agent id: the aud of issued tokens.
	Agent string
	// Signer and KID sign issued tokens: the gateway's key, under the kid
	// its JWKS (JWKSURL) publishes.
	Signer  crypto.Signer
	KID     string
	JWKSURL string
	// SenderKeys resolves the kid of a client assertion to the agent's
	// public key: the trust store in force.
	SenderKeys func() auth.TokenKeys
	// Grants returns the capability patterns an agent may call, as
	// configured now; an agent without any gets no token.
	Grants func(agent string) []string
	// Capabilities returns the capabilities the gateway serves now: a
	// request without scope gets those the agent's grants cover.
	Capabilities func() []string
	// Replay records used assertions and DPoP proofs and holds
	// revocations.
	Replay Replay
	// TokenLifetime is the lifetime of issued tokens
	// (DefaultTokenLifetime when zero); MaxTokenLifetime caps what Issue
	// may be asked for (DefaultMaxTokenLifetime when zero).
	TokenLifetime, MaxTokenLifetime time.Duration
	// Skew is tolerated on assertion and proof times (auth.DefaultSkew
	// when zero).
	Skew time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// OnIssue and OnRevoke, when set, are told of each token issued and
	// revoked (for the audit log). An error from OnIssue withholds the
	// token.
	OnIssue  func(ctx context.Context, t Token) error
	OnRevoke func(ctx context.Context, agent, jti string) error
	// Logger receives refusals (nothing is logged when nil).
	Logger *slog.Logger
}

// Server is the authorization server; it is safe for concurrent use.
type Server struct {
	o   Options
	log *slog.Logger
	own auth.TokenKeys // the gateway's key: verifies the tokens it issued
}

// New checks o and returns its Server.
func New(o Options) (*Server, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("authserver: "+format, a...)) }
	switch {
	case o.Issuer == "" || strings.HasSuffix(o.Issuer, "/"):
		bad("Issuer %q: want the base URL without a trailing slash", o.Issuer)
	case !arsia.ValidAgentID(o.Agent):
		bad("Agent %q is not an agent id", o.Agent)
	case o.Signer == nil || o.KID == "":
		bad("no Signer or KID")
	case o.SenderKeys == nil || o.Grants == nil || o.Replay == nil:
		bad("SenderKeys, Grants and Replay are required")
	}
	if o.TokenLifetime == 0 {
		o.TokenLifetime = DefaultTokenLifetime
	}
	if o.MaxTokenLifetime == 0 {
		o.MaxTokenLifetime = DefaultMaxTokenLifetime
	}
	if o.TokenLifetime < time.Second || o.MaxTokenLifetime > MaxTokenLifetime || o.TokenLifetime > o.MaxTokenLifetime {
		bad("token lifetime %s, max %s: want 1s ≤ lifetime ≤ max ≤ %s", o.TokenLifetime, o.MaxTokenLifetime, MaxTokenLifetime)
	}
	if o.Skew == 0 {
		o.Skew = auth.DefaultSkew
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Capabilities == nil {
		o.Capabilities = func() []string { return nil }
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := &Server{o: o, log: o.Logger, own: auth.NewStaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: o.Signer.Public(), KeyID: o.KID, Use: "sig"}}})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// TokenURL is the token endpoint's URL (the aud of client assertions and
// the htu of token request proofs).
func (s *Server) TokenURL() string { return s.o.Issuer + TokenPath }

// Token is an issued access token.
type Token struct {
	// AccessToken is the JWT; TokenType "DPoP" when bound, else "Bearer".
	AccessToken, TokenType string
	// Agent is its sub, ID its jti, Scope its scope entries.
	Agent, ID string
	Scope     []string
	// JKT is the cnf.jkt of a bound token.
	JKT string
	// IssuedAt and ExpiresAt bound its validity.
	IssuedAt, ExpiresAt time.Time
}

// Errors of Issue.
var (
	// ErrScope: a requested capability is not granted to the agent, or is
	// not an exact capability name.
	ErrScope = errors.New("authserver: scope not granted")
	// ErrIssue: the token could not be signed or recorded.
	ErrIssue = errors.New("authserver: cannot issue")
)

// Issue signs an access token for agentID granting scope (exact
// capability names, each covered by the agent's grants in force), bound
// to the DPoP key with thumbprint jkt when not empty, valid for lifetime
// (the configured token lifetime when zero, at most the maximum).
func (s *Server) Issue(ctx context.Context, agentID string, scope []string, jkt string, lifetime time.Duration) (Token, error) {
	if err := s.checkScope(agentID, scope); err != nil {
		return Token{}, err
	}
	switch {
	case lifetime < 0:
		return Token{}, fmt.Errorf("%w: negative lifetime", ErrIssue)
	case lifetime == 0:
		lifetime = s.o.TokenLifetime
	case lifetime > s.o.MaxTokenLifetime:
		lifetime = s.o.MaxTokenLifetime
	}
	now := s.o.Now().Truncate(time.Second)
	t := Token{Agent: agentID, ID: auth.NewJTI(), Scope: slices.Clone(scope), JKT: jkt,
		IssuedAt: now, ExpiresAt: now.Add(lifetime), TokenType: "Bearer"}
	c := auth.Claims{Issuer: s.o.Issuer, Subject: agentID, Audience: auth.Audience{s.o.Agent},
		IssuedAt: now.Unix(), ExpiresAt: t.ExpiresAt.Unix(), ID: t.ID, Scope: strings.Join(scope, " ")}
	if jkt != "" {
		c.Confirmation = &auth.Confirmation{JKT: jkt}
		t.TokenType = "DPoP"
	}
	tok, err := auth.IssueAccessToken(s.o.Signer, s.o.KID, c)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrIssue, err)
	}
	t.AccessToken = tok
	if s.o.OnIssue != nil {
		if err := s.o.OnIssue(ctx, t); err != nil {
			return Token{}, fmt.Errorf("%w: %w", ErrIssue, err)
		}
	}
	return t, nil
}

// checkScope requires a non-empty scope of exact capability names, each
// granted to agent by the grants in force.
func (s *Server) checkScope(agent string, scope []string) error {
	if len(scope) == 0 {
		return fmt.Errorf("%w: empty scope", ErrScope)
	}
	grants := s.o.Grants(agent)
	for _, c := range scope {
		if err := arsia.ValidateCapability(c); err != nil || arsia.IsWildcardCapability(c) {
			return fmt.Errorf("%w: %q is not an exact capability name", ErrScope, clip(c))
		}
		if !arsia.MatchCapabilities(grants, []string{c}) {
			return fmt.Errorf("%w: %q is not granted to %s", ErrScope, clip(c), agent)
		}
	}
	return nil
}

// defaultScope is what a request without scope gets: the served
// capabilities the agent's grants cover, in order.
func (s *Server) defaultScope(agent string) []string {
	grants := s.o.Grants(agent)
	var out []string
	for _, c := range s.o.Capabilities() {
		if !arsia.IsWildcardCapability(c) && arsia.MatchCapabilities(grants, []string{c}) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
