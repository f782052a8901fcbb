package main

import (
	"fmt"
	"log/slog"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/authz"
	"github.com/custos-runtime/custos/gateway/config"
)

// newAuthorizer builds the access-token checks of the inbox (nil when the
// configuration asks for none). cfg has been checked.
// replay, when not nil, is the shared DPoP replay set (replicas on
// PostgreSQL); nil keeps one in memory.
// own, when not nil, is the gateway's own authorization server: trusted
// besides tokens.issuers, its revocations read from replay.
func newAuthorizer(cfg config.Config, replay authz.ReplaySet, logger *slog.Logger, own *authz.Issuer) (gateway.Authorizer, error) {
	t := cfg.Tokens
	mode, err := authz.ParseMode(t.Mode)
	if err != nil {
		return nil, err
	}
	if mode == authz.ModeOff {
		return nil, nil // an untyped nil: the gateway checks no token
	}
	c := authz.Config{Mode: mode, MaxLifetime: t.MaxLifetime, ClockSkew: t.ClockSkew,
		ReplayWindow: t.ReplayWindow, ReplayCapacity: t.ReplayCapacity, Replay: replay, Logger: logger,
		TokenAlgorithms: t.TokenAlgorithms, ProofAlgorithms: t.ProofAlgorithms, AcceptAnyJTI: t.AcceptAnyJTI}
	for i, is := range t.Issuers {
		var keys sig.KeySource
		if is.JWKSURL != "" {
			h, err := sig.NewHTTPJWKS(is.JWKSURL, nil)
			if err != nil {
				return nil, fmt.Errorf("tokens.issuers[%d] (%s): %w", i, is.Issuer, err)
			}
			keys = h
		} else {
			keys = sig.NewJWKSFile(is.JWKSFile)
		}
		c.Issuers = append(c.Issuers, authz.Issuer{Issuer: is.Issuer, Keys: keys})
	}
	if own != nil {
		c.Issuers = append(c.Issuers, *own)
		revs, ok := replay.(auth.ReplayLookup)
		if !ok {
			return nil, fmt.Errorf("authorization_server: the replay set %T cannot hold revocations", replay)
		}
		c.Revocations = revs
	}
	a, err := authz.NewAuthorizer(c)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	return a, nil
}
