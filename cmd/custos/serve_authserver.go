package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/authserver"
	"github.com/custos-runtime/custos/gateway/authz"
	"github.com/custos-runtime/custos/internal/routes"
)

// ownTokenIssuer is the gateway's own authorization server as a trusted
// issuer of the inbox (nil when authorization_server is off): iss the
// public URL, verified with the gateway's key.
func (s *server) ownTokenIssuer() *authz.Issuer {
	if !s.cfg.AuthorizationServer.Enabled {
		return nil
	}
	return &authz.Issuer{Issuer: s.cfg.PublicURL, Keys: auth.NewStaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{s.key.public}})}
}

// mountAuthServer puts the authorization server's endpoints on mux when
// authorization_server is enabled. Its grants, keys and capabilities are
// the gateway's policy in force, so reloads apply to the next request.
func (s *server) mountAuthServer(mux *routes.Mux) (*authserver.Server, error) {
	a := s.cfg.AuthorizationServer
	if !a.Enabled {
		return nil, nil
	}
	replay, ok := s.state.Replay.(authserver.Replay)
	if !ok {
		return nil, fmt.Errorf("authorization_server: the replay set %T cannot hold revocations", s.state.Replay)
	}
	signer, err := cryptoSigner(s.key.signer)
	if err != nil {
		return nil, fmt.Errorf("authorization_server: %w", err)
	}
	// Read once: a reload replaces s.cfg while tokens are issued.
	gw, gwAgent := s.gw, s.cfg.Agent
	srv, err := authserver.New(authserver.Options{Issuer: s.cfg.PublicURL, Agent: s.cfg.Agent, Signer: signer, KID: s.key.kid,
		JWKSURL:      s.cfg.PublicURL + "/.well-known/arsia/jwks.json",
		SenderKeys:   func() auth.TokenKeys { return gw.Policy().Keys },
		Grants:       func(agent string) []string { return gw.Policy().Grants[agent] },
		Capabilities: func() []string { return slices.Sorted(maps.Keys(gw.Policy().Handlers)) },
		Replay:       replay, TokenLifetime: a.TokenLifetime, MaxTokenLifetime: a.MaxTokenLifetime,
		Skew: s.cfg.Tokens.ClockSkew, Logger: s.logger,
		// Issuing is audited first: a token the log does not know of is
		// withheld (fail closed).
		OnIssue: func(ctx context.Context, t authserver.Token) error {
			_, err := s.auditLog.Append(context.WithoutCancel(ctx), audit.TokenIssued(t.Agent, gwAgent, t.ID, t.Scope, t.JKT, t.ExpiresAt))
			return err
		},
		OnRevoke: func(ctx context.Context, sub, jti string) error {
			_, err := s.auditLog.Append(context.WithoutCancel(ctx), audit.TokenRevoked(sub, gwAgent, jti))
			return err
		}})
	if err != nil {
		return nil, err
	}
	srv.Mount(mux)
	return srv, nil
}

// edSigner is a gateway sig.Signer (EdDSA) as a crypto.Signer, which
// package arsia/auth signs access tokens with.
type edSigner struct{ s sig.Signer }

func (e edSigner) Public() crypto.PublicKey { return e.s.Public() }

func (e edSigner) Sign(_ io.Reader, message []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts.HashFunc() != crypto.Hash(0) {
		return nil, errors.New("an Ed25519 key signs the message itself")
	}
	return e.s.SignMessage(message)
}

func cryptoSigner(s sig.Signer) (crypto.Signer, error) {
	if s.Algorithm() != auth.EdDSA {
		return nil, fmt.Errorf("the gateway key is %s; issuing tokens needs its Ed25519 key", s.Algorithm())
	}
	return edSigner{s}, nil
}
