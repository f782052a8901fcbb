package main

import (
	"crypto/x509"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/trust"
)

// trustAnchors are roots the trust store anchors besides trust.ca_files
// (the gateway's own CA: serve_ca.go), with their revocation check.
type trustAnchors struct {
	roots      []*x509.Certificate
	revocation func([]*x509.Certificate) error
}

// newTrust builds the trust store of the configured senders' keys (JWKS
// files and URLs, discovered peers), revocations, CA roots and minimum
// trust levels. The store is both the key source and the trust policy. As
// a key source it never returns a key the configuration revoked: sig.Verify
// fails on it with an error wrapping sig.ErrRevokedKey and an *arsia.Error
// certificate_revoked with its reason (see trust.Store.Key).
func newTrust(t config.Trust, extra trustAnchors) (sig.KeySource, gateway.TrustPolicy, error) {
	peers := make([]trust.Peer, len(t.Peers))
	for i, p := range t.Peers {
		peers[i] = trust.Peer{Agent: p.Agent, URL: p.URL}
	}
	s, err := trust.New(trust.Config{
		JWKSFiles:                t.JWKSFiles,
		JWKSURLs:                 t.JWKSURLs,
		Peers:                    peers,
		CAFiles:                  t.CAFiles,
		QualifiedCAFiles:         t.QualifiedCAFiles,
		Roots:                    extra.roots,
		CheckRevocation:          extra.revocation,
		RevokedKIDs:              t.RevokedKIDs,
		RevokedThumbprints:       t.RevokedThumbprints,
		Policy:                   t.MinTrustLevel.Policy(),
		IdentityTTL:              t.IdentityTTL,
		RequireIdentitySignature: t.RequireIdentitySignature,
	}, &trust.Options{MinRefreshInterval: t.MinRefreshInterval})
	if err != nil {
		return nil, nil, err
	}
	return s, s, nil
}
