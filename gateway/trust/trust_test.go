package trust_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/identity"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/trust"
)

const (
	billing = "agent:acme.billing"
	advisor = "agent:acme.advisor"
	gw      = "agent:acme.gateway"
)

// newStore builds a Store on the test clock.
func newStore(t testing.TB, cfg trust.Config, c *clock) *trust.Store {
	t.Helper()
	s, err := trust.New(cfg, &trust.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func verifyOpts(c *clock) sig.VerifyOptions {
	return sig.VerifyOptions{Algorithms: []string{sig.EdDSA}, Now: c.Now}
}

// A discovered peer's key verifies its signed envelope; Check passes at L1.
func TestDiscoveredKeyVerifies(t *testing.T) {
	k := newAgentKey(t, billing+"#key-1")
	p := newFakePeer(t, billing, k)
	c := newClock()
	s := newStore(t, trust.Config{Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}}}, c)
	env := signedRequest(t, billing, gw, "demo.echo", "", k)
	v, err := sig.Verify(t.Context(), env, s, verifyOpts(c))
	if err != nil {
		t.Fatal(err)
	}
	if v.KeyID != k.kid {
		t.Fatalf("kid = %q", v.KeyID)
	}
	if e := s.Check(t.Context(), gateway.TrustQuery{Sender: billing, KID: k.kid, Capability: "demo.echo"}); e != nil {
		t.Fatalf("Check = %v", e)
	}
	// Another agent's envelope signed with a kid of its own is not served
	// by billing's JWKS.
	other := newAgentKey(t, advisor+"#key-1")
	if _, err := sig.Verify(t.Context(), signedRequest(t, advisor, gw, "demo.echo", "", other), s, verifyOpts(c)); !errors.Is(err, sig.ErrUnknownKid) {
		t.Fatalf("unconfigured agent: %v", err)
	}
}

// A peer's JWKS listing a key for another agent cannot vouch for it, and a
// JWKS file cannot vouch for a configured peer's kids.
func TestKeysOnlyForTheirAgent(t *testing.T) {
	k := newAgentKey(t, billing+"#key-1")
	foreign := newAgentKey(t, advisor+"#key-1")
	p := newFakePeer(t, billing, k, foreign)
	impostor := newAgentKey(t, billing+"#key-2")
	file := filepath.Join(t.TempDir(), "jwks.json")
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{impostor.jwk()}})
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c := newClock()
	s := newStore(t, trust.Config{JWKSFiles: []string{file}, Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}}}, c)
	if _, err := s.Key(t.Context(), foreign.kid); !errors.Is(err, sig.ErrUnknownKid) {
		t.Fatalf("foreign kid from peer JWKS: %v", err)
	}
	if _, err := s.Key(t.Context(), impostor.kid); !errors.Is(err, sig.ErrUnknownKid) {
		t.Fatalf("peer kid from a JWKS file: %v", err)
	}
	for _, kid := range []string{"", "#x", "agent:acme.billing#", "nohash", "bad agent#x"} {
		if _, err := s.Key(t.Context(), kid); !errors.Is(err, sig.ErrUnknownKid) {
			t.Errorf("Key(%q) = %v", kid, err)
		}
	}
}

// An unknown kid makes the JWKS be fetched again (once the minimum
// interval has passed), so a newly published key works.
func TestUnknownKidRefetch(t *testing.T) {
	k1 := newAgentKey(t, billing+"#key-1")
	k2 := newAgentKey(t, billing+"#key-2")
	p := newFakePeer(t, billing, k1)
	c := newClock()
	s := newStore(t, trust.Config{Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}}}, c)
	if _, err := s.Key(t.Context(), k1.kid); err != nil {
		t.Fatal(err)
	}
	p.set(func(p *fakePeer) { p.keys = append(p.keys, k2) })
	c.Advance(sig.DefaultMinRefreshInterval + time.Second)
	env := signedRequest(t, billing, gw, "demo.echo", "", k2)
	if _, err := sig.Verify(t.Context(), env, s, verifyOpts(c)); err != nil {
		t.Fatalf("new key after refetch: %v", err)
	}
	if n := p.count("/.well-known/arsia/jwks.json"); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}
	// A key removed from the JWKS is refused after the next fetch.
	p.set(func(p *fakePeer) { p.keys = []agentKey{k2} })
	c.Advance(2 * time.Hour)
	if _, err := sig.Verify(t.Context(), signedRequest(t, billing, gw, "demo.echo", "", k1), s, verifyOpts(c)); !errors.Is(err, sig.ErrUnauthorized) {
		t.Fatalf("removed key: %v", err)
	}
}

// A kid or thumbprint the receiver revoked is refused with
// certificate_revoked even though the JWKS still publishes it, by the key
// source itself: sig.Verify with the Store fails at key resolution, before
// the signature is looked at, with no Check needed.
func TestRevoked(t *testing.T) {
	k1 := newAgentKey(t, billing+"#key-1")
	k2 := newAgentKey(t, billing+"#key-2")
	k3 := newAgentKey(t, billing+"#key-3")
	// k2's key published again under a new kid: the thumbprint catches it.
	k2again := agentKey{kid: billing + "#key-2b", priv: k2.priv, pub: k2.pub}
	p := newFakePeer(t, billing, k1, k2, k3, k2again)
	p.set(func(p *fakePeer) { p.sigKey = &k3 }) // a revoked key cannot sign the identity record
	c := newClock()
	s := newStore(t, trust.Config{
		Peers:              []trust.Peer{{Agent: billing, URL: p.srv.URL}},
		RevokedKIDs:        []string{k1.kid},
		RevokedThumbprints: []string{k2.thumbprint(t)},
	}, c)
	for _, k := range []agentKey{k1, k2, k2again} {
		if _, err := s.Key(t.Context(), k.kid); !errors.Is(err, sig.ErrRevokedKey) {
			t.Errorf("Key(%s) = %v, want ErrRevokedKey", k.kid, err)
		}
		env := signedRequest(t, billing, gw, "demo.echo", "", k)
		// A broken signature too: the key is refused before the
		// signature is checked.
		broken := signedRequest(t, billing, gw, "demo.echo", "", k)
		raw, err := base64.RawURLEncoding.DecodeString(broken["security"].(map[string]any)["sig"].(string))
		if err != nil {
			t.Fatal(err)
		}
		raw[0] ^= 1
		broken["security"].(map[string]any)["sig"] = base64.RawURLEncoding.EncodeToString(raw)
		for name, e := range map[string]map[string]any{"signed": env, "bad signature": broken} {
			_, err := sig.Verify(t.Context(), e, s, verifyOpts(c))
			if !errors.Is(err, sig.ErrRevokedKey) || !errors.Is(err, sig.ErrUnauthorized) || errors.Is(err, sig.ErrBadSignature) {
				t.Fatalf("%s, %s: Verify = %v, want ErrRevokedKey", k.kid, name, err)
			}
			var ae *arsia.Error
			if !errors.As(err, &ae) || ae.Code != arsia.CodeCertificateRevoked || ae.HTTPStatus() != 401 {
				t.Fatalf("%s, %s: %v carries no certificate_revoked", k.kid, name, err)
			}
			if r, _ := ae.Details["reason"].(string); !strings.Contains(r, "revoked") {
				t.Errorf("reason = %q", r)
			}
			if err := arsia.CheckErrorDetails(ae.Code, ae.Details); err != nil {
				t.Error(err)
			}
		}
		// Check, run anyway, refuses too.
		e := s.Check(t.Context(), gateway.TrustQuery{Sender: billing, KID: k.kid, Capability: "demo.echo"})
		if e == nil || e.Code != arsia.CodeCertificateRevoked {
			t.Fatalf("Check(%s) = %v, want certificate_revoked", k.kid, e)
		}
	}
	if _, err := sig.Verify(t.Context(), signedRequest(t, billing, gw, "demo.echo", "", k3), s, verifyOpts(c)); err != nil {
		t.Fatalf("unrevoked key: %v", err)
	}
	if e := s.Check(t.Context(), gateway.TrustQuery{Sender: billing, KID: k3.kid, Capability: "demo.echo"}); e != nil {
		t.Fatalf("unrevoked key: %v", e)
	}
}

// A key the receiver revoked cannot sign a peer's identity record either,
// though the peer's JWKS still lists it.
func TestRevokedKeyCannotSignIdentityRecord(t *testing.T) {
	pki := newTestPKI(t)
	k1 := newAgentKey(t, billing+"#key-1")
	old := newAgentKey(t, billing+"#key-old")
	p := newFakePeer(t, billing, k1, old)
	p.set(func(p *fakePeer) {
		p.chain = pki.chain(t, k1.pub, leafOpts{agent: billing})
		p.sigKey = &old
	})
	cfg := trust.Config{Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}}, CAFiles: []string{pki.rootFile}}
	jwk := func(s *trust.Store) *jose.JSONWebKey {
		k, err := s.Key(t.Context(), k1.kid)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	s := newStore(t, cfg, newClock())
	if level, e := s.Level(t.Context(), billing, jwk(s)); e != nil || level != identity.L2 {
		t.Fatalf("record signed by a live key: %v %v", level, e)
	}
	cfg.RevokedKIDs = []string{old.kid}
	s = newStore(t, cfg, newClock())
	if _, e := s.Level(t.Context(), billing, jwk(s)); e == nil || e.Code != arsia.CodeCertificateInvalid {
		t.Fatalf("record signed by a revoked key: %v", e)
	}
}

// levelCase is one identity record setup and the level or error expected.
type levelCase struct {
	setup    func(p *fakePeer, pki *testPKI, k agentKey)
	noCA     bool
	want     identity.TrustLevel
	wantCode string
}

func TestTrustLevels(t *testing.T) {
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	foreignPKI := newTestPKI(t)
	for name, tc := range map[string]levelCase{
		"no identity record":   {setup: func(p *fakePeer, _ *testPKI, _ agentKey) { p.noRecord = true }, want: identity.L1},
		"record without chain": {setup: func(*fakePeer, *testPKI, agentKey) {}, want: identity.L1},
		"L2 chain": {setup: func(p *fakePeer, pki *testPKI, k agentKey) {
			p.chain = pki.chain(t, k.pub, leafOpts{agent: billing})
		}, want: identity.L2},
		"L3 chain": {setup: func(p *fakePeer, pki *testPKI, k agentKey) {
			p.chain = pki.chain(t, k.pub, leafOpts{agent: billing, qc: true})
		}, want: identity.L3},
		"chain but no CA configured": {setup: func(p *fakePeer, pki *testPKI, k agentKey) {
			p.chain = pki.chain(t, k.pub, leafOpts{agent: billing, qc: true})
		}, noCA: true, want: identity.L1},
		"unsigned record": {setup: func(p *fakePeer, pki *testPKI, k agentKey) {
			p.sigKey = nil
			p.chain = pki.chain(t, k.pub, leafOpts{agent: billing})
		}, want: identity.L2},
		"expired leaf": {setup: func(p *fakePeer, pki *testPKI, k agentKey) {
			p.chain = pki.chain(t, k.pub, leafOpts{agent: billing, notAfter: time.Now().Add(-time.Hour)})
		}, wantCode: arsia.CodeCertificateExpired},
		"leaf key is not the signing key": {setup: func(p *fakePeer, pki *testPKI, _ agentKey) {
			p.chain = pki.chain(t, other, leafOpts{agent: billing})
		}, wantCode: arsia.CodeKeyMismatch},
		"SAN names another agent": {setup: func(p *fakePeer, pki *testPKI, k agentKey) {
			p.chain = pki.chain(t, k.pub, leafOpts{agent: advisor})
		}, wantCode: arsia.CodeCertificateInvalid},
		"untrusted CA": {setup: func(p *fakePeer, _ *testPKI, k agentKey) {
			p.chain = foreignPKI.chain(t, k.pub, leafOpts{agent: billing})
		}, wantCode: arsia.CodeCertificateInvalid},
		"malformed chain": {setup: func(p *fakePeer, _ *testPKI, _ agentKey) {
			p.chain = []string{"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}
		}, wantCode: arsia.CodeCertificateInvalid},
		"bad X-ARSIA-Sig": {setup: func(p *fakePeer, pki *testPKI, k agentKey) {
			p.chain = pki.chain(t, k.pub, leafOpts{agent: billing})
			p.badSig = true
		}, wantCode: arsia.CodeCertificateInvalid},
		"X-ARSIA-Sig by a key not in the JWKS": {setup: func(p *fakePeer, _ *testPKI, _ agentKey) {
			stranger := newAgentKey(t, billing+"#stranger")
			p.sigKey = &stranger
		}, wantCode: arsia.CodeCertificateInvalid},
		"record for another agent": {setup: func(p *fakePeer, _ *testPKI, _ agentKey) {
			p.recordAgent = advisor
		}, wantCode: arsia.CodeUnauthorized},
		"identity redirected to plain http": {setup: func(p *fakePeer, _ *testPKI, _ agentKey) {
			p.identityTo = "http://192.0.2.1/.well-known/arsia/identity"
		}, wantCode: arsia.CodeServiceUnavailable},
		"identity endpoint failing": {setup: func(p *fakePeer, _ *testPKI, _ agentKey) {
			p.identityStatus = 500
		}, wantCode: arsia.CodeServiceUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			pki := newTestPKI(t)
			k := newAgentKey(t, billing+"#key-1")
			p := newFakePeer(t, billing, k)
			p.set(func(p *fakePeer) { tc.setup(p, pki, k) })
			cfg := trust.Config{Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}}}
			if !tc.noCA {
				cfg.CAFiles = []string{pki.rootFile}
			}
			s := newStore(t, cfg, newClock())
			jwk, err := s.Key(t.Context(), k.kid)
			if err != nil {
				t.Fatal(err)
			}
			level, e := s.Level(t.Context(), billing, jwk)
			if tc.wantCode != "" {
				if e == nil || e.Code != tc.wantCode {
					t.Fatalf("Level = %v, %v; want %s", level, e, tc.wantCode)
				}
				if err := arsia.CheckErrorDetails(e.Code, e.Details); err != nil {
					t.Errorf("details: %v", err)
				}
				// Check answers the same refusal.
				if ce := s.Check(t.Context(), gateway.TrustQuery{Sender: billing, KID: k.kid, Capability: "demo.echo"}); ce == nil || ce.Code != tc.wantCode {
					t.Errorf("Check = %v", ce)
				}
				return
			}
			if e != nil || level != tc.want {
				t.Fatalf("Level = %v, %v; want %v", level, e, tc.want)
			}
		})
	}
}

// A sender with static keys is L1; an identity signature is demanded when
// configured.
func TestStaticSenderAndRequiredSignature(t *testing.T) {
	k := newAgentKey(t, advisor+"#key-1")
	file := filepath.Join(t.TempDir(), "jwks.json")
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.jwk()}})
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	bk := newAgentKey(t, billing+"#key-1")
	p := newFakePeer(t, billing, bk)
	p.set(func(p *fakePeer) { p.sigKey = nil })
	c := newClock()
	s := newStore(t, trust.Config{JWKSFiles: []string{file}, Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}},
		RequireIdentitySignature: true, Policy: identity.Policy{Default: identity.L2}}, c)
	e := s.Check(t.Context(), gateway.TrustQuery{Sender: advisor, KID: k.kid, Capability: "demo.echo"})
	if e == nil || e.Code != arsia.CodeForbidden || e.Details["actual"] != "L1" || e.Details["required"] != "L2" {
		t.Fatalf("static sender: %v %v", e, e.Details)
	}
	e = s.Check(t.Context(), gateway.TrustQuery{Sender: billing, KID: bk.kid, Capability: "demo.echo"})
	if e == nil || e.Code != arsia.CodeCertificateInvalid || !strings.Contains(e.Details["reason"].(string), "not signed") {
		t.Fatalf("unsigned record: %v", e)
	}
}

// The highest applicable minimum wins: default, profile, capability pattern.
func TestMinimumTrustLevel(t *testing.T) {
	pki := newTestPKI(t)
	k2 := newAgentKey(t, billing+"#key-1")
	l2 := newFakePeer(t, billing, k2)
	l2.set(func(p *fakePeer) { p.chain = pki.chain(t, k2.pub, leafOpts{agent: billing}) })
	k1 := newAgentKey(t, advisor+"#key-1")
	l1 := newFakePeer(t, advisor, k1)
	s := newStore(t, trust.Config{
		Peers:   []trust.Peer{{Agent: billing, URL: l2.srv.URL}, {Agent: advisor, URL: l1.srv.URL}},
		CAFiles: []string{pki.rootFile},
		Policy: identity.Policy{Default: identity.L1,
			ByProfile:    map[string]identity.TrustLevel{"EU-AI-ACT-HIGH-RISK": identity.L2},
			ByCapability: map[string]identity.TrustLevel{"payments.*": identity.L3}},
	}, newClock())
	for _, tc := range []struct {
		sender, kid, capability, profile string
		required, actual                 string // "" = allowed
	}{
		{advisor, k1.kid, "demo.echo", "", "", ""},
		{advisor, k1.kid, "demo.echo", "GDPR-STANDARD", "", ""},
		{advisor, k1.kid, "demo.echo", "EU-AI-ACT-HIGH-RISK", "L2", "L1"},
		{billing, k2.kid, "demo.echo", "EU-AI-ACT-HIGH-RISK", "", ""},
		{billing, k2.kid, "payments.sepa.execute", "", "L3", "L2"},
		{billing, k2.kid, "payments.sepa.execute", "EU-AI-ACT-HIGH-RISK", "L3", "L2"},
		{billing, k2.kid, "paymentsx.card", "", "", ""},
		{billing, k2.kid, "payments", "", "L3", "L2"}, // not a capability: every entry applies
		{advisor, k1.kid, "payments.card", "GDPR-STANDARD", "L3", "L1"},
	} {
		e := s.Check(t.Context(), gateway.TrustQuery{Sender: tc.sender, KID: tc.kid, Capability: tc.capability, Profile: tc.profile})
		if tc.required == "" {
			if e != nil {
				t.Errorf("%s %s %s: %v", tc.sender, tc.capability, tc.profile, e)
			}
			continue
		}
		if e == nil || e.Code != arsia.CodeForbidden || e.HTTPStatus() != 403 ||
			e.Details["reason"] != "insufficient_trust_level" || e.Details["required"] != tc.required || e.Details["actual"] != tc.actual {
			t.Errorf("%s %s %s: %v, want forbidden %s/%s", tc.sender, tc.capability, tc.profile, e, tc.required, tc.actual)
		}
	}
}

// With the peer unreachable and nothing cached, everything fails closed,
// and says why; a cached identity record serves until its TTL, then the
// failure shows again.
func TestPeerDownFailsClosed(t *testing.T) {
	k := newAgentKey(t, billing+"#key-1")
	p := newFakePeer(t, billing, k)
	url := p.srv.URL
	p.srv.Close()
	c := newClock()
	s := newStore(t, trust.Config{Peers: []trust.Peer{{Agent: billing, URL: url}}}, c)
	if _, err := sig.Verify(t.Context(), signedRequest(t, billing, gw, "demo.echo", "", k), s, verifyOpts(c)); !errors.Is(err, sig.ErrKeySource) {
		t.Fatalf("Verify with peer down: %v", err)
	}
	jwk := k.jwk()
	_, e := s.Level(t.Context(), billing, &jwk)
	if e == nil || e.Code != arsia.CodeServiceUnavailable || !strings.Contains(e.Description, "cannot be established") {
		t.Fatalf("Level with peer down: %v", e)
	}

	// Identity record cached, then the endpoint breaks.
	p2 := newFakePeer(t, billing, k)
	s2 := newStore(t, trust.Config{Peers: []trust.Peer{{Agent: billing, URL: p2.srv.URL}}, IdentityTTL: 10 * time.Minute}, c)
	q := gateway.TrustQuery{Sender: billing, KID: k.kid, Capability: "demo.echo"}
	if e := s2.Check(t.Context(), q); e != nil {
		t.Fatal(e)
	}
	p2.set(func(p *fakePeer) { p.identityStatus = 503 })
	c.Advance(5 * time.Minute)
	if e := s2.Check(t.Context(), q); e != nil {
		t.Fatalf("within TTL: %v", e)
	}
	if n := p2.count("/.well-known/arsia/identity"); n != 1 {
		t.Fatalf("identity fetched %d times within its TTL", n)
	}
	c.Advance(6 * time.Minute)
	if e := s2.Check(t.Context(), q); e == nil || e.Code != arsia.CodeServiceUnavailable || !strings.Contains(e.Description, "status 503") {
		t.Fatalf("after TTL with endpoint failing: %v", e)
	}
	// Failures are not retried at once...
	p2.set(func(p *fakePeer) { p.identityStatus = 0 })
	if e := s2.Check(t.Context(), q); e == nil {
		t.Fatal("retried within the minimum interval")
	}
	// ...but after the interval.
	c.Advance(sig.DefaultMinRefreshInterval)
	if e := s2.Check(t.Context(), q); e != nil {
		t.Fatalf("after recovery: %v", e)
	}
}

// Metadata for another agent, or naming a plain-http JWKS URL off
// loopback, is refused.
func TestMetadataRefused(t *testing.T) {
	k := newAgentKey(t, billing+"#key-1")
	for name, f := range map[string]func(p *fakePeer){
		"agent_id mismatch":  func(p *fakePeer) { p.metaAgent = advisor },
		"http jwks off host": func(p *fakePeer) { p.metaJWKS = "http://192.0.2.1/jwks.json" },
		"jwks failing":       func(p *fakePeer) { p.jwksStatus = 500 },
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakePeer(t, billing, k)
			p.set(f)
			c := newClock()
			s := newStore(t, trust.Config{Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}}}, c)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if _, err := s.Key(ctx, k.kid); !errors.Is(err, sig.ErrKeySource) {
				t.Fatalf("Key = %v", err)
			}
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "x.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]trust.Config{
		"http url":         {JWKSURLs: []string{"http://keys.example/jwks.json"}},
		"peer over http":   {Peers: []trust.Peer{{Agent: billing, URL: "http://billing.example"}}},
		"peer bad agent":   {Peers: []trust.Peer{{Agent: "billing", URL: "https://billing.example"}}},
		"peer twice":       {Peers: []trust.Peer{{Agent: billing, URL: "https://a.example"}, {Agent: billing, URL: "https://b.example"}}},
		"missing CA file":  {CAFiles: []string{filepath.Join(dir, "nope.pem")}},
		"CA file not PEM":  {CAFiles: []string{notPEM}},
		"bad revoked kid":  {RevokedKIDs: []string{"agent:acme.billing"}},
		"bad thumbprint":   {RevokedThumbprints: []string{"abc"}},
		"bad policy level": {Policy: identity.Policy{Default: 7}},
		"bad pattern":      {Policy: identity.Policy{ByCapability: map[string]identity.TrustLevel{"pay*": identity.L2}}},
		"negative ttl":     {IdentityTTL: -time.Second},
	} {
		if _, err := trust.New(cfg, nil); !errors.Is(err, trust.ErrConfig) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	for _, ok := range []string{"https://x.example", "http://127.0.0.1:8080", "http://localhost", "http://[::1]:1"} {
		if err := trust.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%s) = %v", ok, err)
		}
	}
}

func TestKidsOf(t *testing.T) {
	kids, err := trust.KidsOf([]byte(`{"keys":[{"kid":"agent:a.b#1"},{"kid":"agent:a.bc#2"},{"kid":5},{"kid":"agent:a.b#1"},{"kid":"agent:a.b#"}]}`), "agent:a.b")
	if err != nil || len(kids) != 1 || kids[0] != "agent:a.b#1" {
		t.Fatalf("KidsOf = %v, %v", kids, err)
	}
}

// Concurrent checks share the caches safely and fetch each document once.
func TestConcurrentChecks(t *testing.T) {
	pki := newTestPKI(t)
	k := newAgentKey(t, billing+"#key-1")
	p := newFakePeer(t, billing, k)
	p.set(func(p *fakePeer) { p.chain = pki.chain(t, k.pub, leafOpts{agent: billing, qc: true}) })
	c := newClock()
	s := newStore(t, trust.Config{Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}}, CAFiles: []string{pki.rootFile},
		Policy: identity.Policy{ByCapability: map[string]identity.TrustLevel{"payments.*": identity.L3}}}, c)
	errs := make(chan *arsia.Error, 16)
	for range 16 {
		go func() {
			errs <- s.Check(t.Context(), gateway.TrustQuery{Sender: billing, KID: k.kid, Capability: "payments.sepa"})
		}()
	}
	for range 16 {
		if e := <-errs; e != nil {
			t.Error(e)
		}
	}
	if n := p.count("/.well-known/arsia/identity"); n != 1 {
		t.Errorf("identity fetched %d times", n)
	}
}
