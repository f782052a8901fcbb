package trust_test

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/identity"
	"github.com/custos-runtime/custos/gateway/ca"
	"github.com/custos-runtime/custos/gateway/trust"
)

// chainStrings splits a PEM bundle into the identity record's
// certificate_chain entries, leaf first.
func chainStrings(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		out = append(out, string(pem.EncodeToMemory(blk)))
	}
	if len(out) == 0 {
		t.Fatal("no certificate in the chain")
	}
	return out
}

// The gateway's own CA, anchored as a root: a peer whose identity record
// carries a chain it issued (and registered) is L2; revoked in the
// registry, the next check says certificate_revoked without waiting for
// the identity record's cache; a chain the CA key signed outside the
// registry is refused; an unavailable registry fails closed.
func TestGatewayCAChainIsL2UntilRevoked(t *testing.T) {
	c, err := ca.Open(t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	reg := ca.NewMemoryRegistry()
	k := newAgentKey(t, billing+"#key-1")
	is, err := c.Issue(t.Context(), billing, k.pub, ca.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Record(t.Context(), ca.Certificate{Issued: is, IssuedBy: "admin"}); err != nil {
		t.Fatal(err)
	}
	p := newFakePeer(t, billing, k)
	p.set(func(p *fakePeer) { p.chain = chainStrings(t, is.ChainPEM) })
	clk := newClock()
	cfg := trust.Config{Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}}, Roots: []*x509.Certificate{c.Root()}, CheckRevocation: c.RevocationChecker(reg)}
	s := newStore(t, cfg, clk)
	key := func() *jose.JSONWebKey {
		kk, err := s.Key(t.Context(), k.kid)
		if err != nil {
			t.Fatal(err)
		}
		return kk
	}
	if level, e := s.Level(t.Context(), billing, key()); e != nil || level != identity.L2 {
		t.Fatalf("CA-issued chain: %v %v", level, e)
	}
	// A record fetched before the agent got its chain is cached, and
	// counts as L1 until forgotten (as custos serve does when its CA
	// issues the agent a certificate).
	late := newFakePeer(t, billing, k)
	fresh := newStore(t, trust.Config{Peers: []trust.Peer{{Agent: billing, URL: late.srv.URL}}, Roots: cfg.Roots, CheckRevocation: cfg.CheckRevocation}, clk)
	lateKey, err := fresh.Key(t.Context(), k.kid)
	if err != nil {
		t.Fatal(err)
	}
	if level, e := fresh.Level(t.Context(), billing, lateKey); e != nil || level != identity.L1 {
		t.Fatalf("before the chain: %v %v", level, e)
	}
	late.set(func(p *fakePeer) { p.chain = chainStrings(t, is.ChainPEM) })
	if level, _ := fresh.Level(t.Context(), billing, lateKey); level != identity.L1 {
		t.Fatalf("the cached record changed by itself: %v", level)
	}
	fresh.ForgetIdentity(billing)
	fresh.ForgetIdentity("agent:unknown.peer")
	if level, e := fresh.Level(t.Context(), billing, lateKey); e != nil || level != identity.L2 {
		t.Fatalf("after ForgetIdentity: %v %v, want L2", level, e)
	}

	// Without the root anchored, the same record is not trusted.
	if _, e := newStore(t, trust.Config{Peers: cfg.Peers}, clk).Level(t.Context(), billing, key()); e != nil {
		t.Fatalf("no roots at all is L1, not an error: %v", e)
	}
	if _, err := reg.Revoke(t.Context(), is.Serial, clk.Now(), "admin", "key compromise"); err != nil {
		t.Fatal(err)
	}
	if _, e := s.Level(t.Context(), billing, key()); e == nil || e.Code != arsia.CodeCertificateRevoked {
		t.Fatalf("revoked chain: %v", e)
	}

	// Signed by the CA key but never registered.
	k2 := newAgentKey(t, billing+"#key-2")
	ghost, err := c.Issue(t.Context(), billing, k2.pub, ca.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p2 := newFakePeer(t, billing, k2)
	p2.set(func(p *fakePeer) { p.chain = chainStrings(t, ghost.ChainPEM) })
	s2 := newStore(t, trust.Config{Peers: []trust.Peer{{Agent: billing, URL: p2.srv.URL}}, Roots: cfg.Roots, CheckRevocation: cfg.CheckRevocation}, clk)
	k2j, err := s2.Key(t.Context(), k2.kid)
	if err != nil {
		t.Fatal(err)
	}
	if _, e := s2.Level(t.Context(), billing, k2j); e == nil || e.Code != arsia.CodeCertificateRevoked {
		t.Fatalf("unregistered chain: %v", e)
	}

	// A registry that cannot answer: the status is unknown, refused.
	failing := func([]*x509.Certificate) error { return ca.ErrRegistry }
	s3 := newStore(t, trust.Config{Peers: cfg.Peers, Roots: cfg.Roots, CheckRevocation: failing}, clk)
	if _, e := s3.Level(t.Context(), billing, key()); e == nil || e.Code != arsia.CodeCertificateInvalid {
		t.Fatalf("registry down: %v", e)
	}
	// Expired: the clock past not_after.
	clk.Advance(ca.DefaultValidity + time.Hour)
	s4 := newStore(t, trust.Config{Peers: cfg.Peers, Roots: cfg.Roots}, clk)
	if _, e := s4.Level(t.Context(), billing, key()); e == nil || e.Code != arsia.CodeCertificateExpired {
		t.Fatalf("expired chain: %v", e)
	}
}

// qualified_ca_files makes L3 a decision about which roots are qualified
// providers: a QcStatements leaf under an ordinary CA is then L2, under a
// listed provider L3; without the list any root's QcStatements leaf is L3.
func TestQualifiedRootsDecideL3(t *testing.T) {
	qtsp, ordinary := newTestPKI(t), newTestPKI(t)
	k := newAgentKey(t, billing+"#key-1")
	p := newFakePeer(t, billing, k)
	peers := []trust.Peer{{Agent: billing, URL: p.srv.URL}}
	level := func(cfg trust.Config, pki *testPKI) identity.TrustLevel {
		t.Helper()
		p.set(func(p *fakePeer) { p.chain = pki.chain(t, k.pub, leafOpts{agent: billing, qc: true}) })
		s := newStore(t, cfg, newClock())
		kk, err := s.Key(t.Context(), k.kid)
		if err != nil {
			t.Fatal(err)
		}
		l, e := s.Level(t.Context(), billing, kk)
		if e != nil {
			t.Fatalf("Level: %v", e)
		}
		return l
	}
	both := trust.Config{Peers: peers, CAFiles: []string{ordinary.rootFile}, QualifiedCAFiles: []string{qtsp.rootFile}}
	if got := level(both, ordinary); got != identity.L2 {
		t.Errorf("QcStatements under an ordinary CA with qualified_ca_files set: %v, want L2", got)
	}
	if got := level(both, qtsp); got != identity.L3 {
		t.Errorf("QcStatements under a qualified provider: %v, want L3", got)
	}
	if got := level(trust.Config{Peers: peers, QualifiedCAFiles: []string{qtsp.rootFile}}, qtsp); got != identity.L3 {
		t.Errorf("qualified_ca_files alone anchors its roots: %v, want L3", got)
	}
	if got := level(trust.Config{Peers: peers, CAFiles: []string{ordinary.rootFile}}, ordinary); got != identity.L3 {
		t.Errorf("without qualified_ca_files: %v, want L3", got)
	}
	if _, err := trust.New(trust.Config{QualifiedCAFiles: []string{filepath.Join(t.TempDir(), "missing.pem")}}, nil); err == nil {
		t.Error("a missing qualified_ca_files entry was accepted")
	}
}
