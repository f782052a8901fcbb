package main

import (
	"context"
	"crypto/x509"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/ca"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/internal/routes"
)

// openCA opens the issuing CA when certificate_authority is enabled: its
// key and root in the CA directory (created on first use), its registry in
// the state. It runs before the trust store is built, which anchors the
// root (caAnchors).
func (s *server) openCA() error {
	c := s.cfg.CertificateAuthority
	if !c.Enabled {
		return nil
	}
	authority, err := ca.Open(s.cfg.CADir(), c.Validity, c.MaxValidity)
	if err != nil {
		return err
	}
	s.ca = authority
	return nil
}

// caAnchors is what the trust store adds for the gateway's own CA: its root
// and the registry's revocation check (none without a CA).
func (s *server) caAnchors() trustAnchors {
	if s.ca == nil {
		return trustAnchors{}
	}
	return trustAnchors{roots: []*x509.Certificate{s.ca.Root()}, revocation: s.ca.RevocationChecker(s.state.Certificates)}
}

// mountCA mounts the CA API (the root for anyone; issuance, listing and
// revocation for the configured operators, authenticated as reviewers are)
// and records every issuance and revocation in the audit log.
func (s *server) mountCA(mux *routes.Mux, auth httpapi.Authenticator) error {
	if s.ca == nil {
		return nil
	}
	operators := s.cfg.CertificateAuthority.CAOperators()
	record := func(outcome string) func(ctx context.Context, c ca.Certificate, by aais.Actor) {
		return func(ctx context.Context, c ca.Certificate, by aais.Actor) {
			details := map[string]any{"serial": c.Serial, "not_before": c.NotBefore.UTC().Format(time.RFC3339),
				"not_after": c.NotAfter.UTC().Format(time.RFC3339), "trust_level": "L2"}
			if c.Revoked() {
				details["reason"] = c.RevocationReason
			}
			rec := audit.Record{Kind: audit.KindCertificate, Sender: c.AgentID, Outcome: outcome, Details: details,
				Actor: audit.Actor{ID: by.ID, Type: string(by.Type), AuthenticatedBy: by.AuthenticatedBy}}
			if _, err := s.auditLog.Append(ctx, rec); err != nil {
				s.logger.ErrorContext(ctx, "auditing a certificate", "serial", c.Serial, "outcome", outcome, "err", err)
			}
			// The agent's next request is judged on its identity record as
			// published now (with the new chain), not on the cached one.
			if f, ok := s.gw.Policy().Keys.(interface{ ForgetIdentity(string) }); ok {
				f.ForgetIdentity(c.AgentID)
			}
		}
	}
	h, err := httpapi.NewCA(httpapi.CAOptions{CA: s.ca, Registry: s.state.Certificates, Auth: auth,
		Operators: func() []string { return operators }, OnIssue: record("issued"), OnRevoke: record("revoked"), Logger: s.logger})
	if err != nil {
		return err
	}
	for _, route := range []string{"GET " + httpapi.CARootPath, "POST " + httpapi.CACertificatesPath, "GET " + httpapi.CACertificatesPath,
		"GET " + httpapi.CACertificatesPath + "/{serial}", "POST " + httpapi.CACertificatesPath + "/{serial}/revoke"} {
		mux.Handle(route, h)
	}
	return nil
}
