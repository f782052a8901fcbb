package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

func TestVerifyChain(t *testing.T) {
	p := newTestPKI(t)
	valid, validKey := p.leaf(t, leafOpts{})
	qc, _ := p.leaf(t, leafOpts{extra: []pkix.Extension{qcExtension(t)}})
	badQC, _ := p.leaf(t, leafOpts{extra: []pkix.Extension{{Id: OIDQCStatements, Value: []byte{0x30, 0x00}}}})
	expired, _ := p.leaf(t, leafOpts{notBefore: testNow.AddDate(-1, 0, 0), notAfter: testNow.AddDate(0, -1, 0)})
	future, _ := p.leaf(t, leafOpts{notBefore: testNow.AddDate(0, 1, 0)})
	wrongSAN, _ := p.leaf(t, leafOpts{sans: []string{"agent:acme.other"}})
	upperSAN, _ := p.leaf(t, leafOpts{sans: []string{"AGENT:acme.billing"}})
	resourceSAN, _ := p.leaf(t, leafOpts{sans: []string{"agent:acme.other", testAgent + "/r1", testAgent}})
	noDigitalSig, _ := p.leaf(t, leafOpts{keyUsage: x509.KeyUsageKeyEncipherment})
	noKeyUsage, _ := p.leaf(t, leafOpts{keyUsage: -1})
	selfSigned, _ := p.leaf(t, leafOpts{selfSigned: true})
	caLeaf, _ := p.leaf(t, leafOpts{isCA: true, keyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign})
	otherKey, _, _ := ed25519.GenerateKey(rand.Reader)

	old := *p
	old.inter = p.caUntil(t, "Expired Intermediate", &p.root, testNow.AddDate(0, 0, -1))
	oldLeaf, _ := old.leaf(t, leafOpts{})

	qualified := x509.NewCertPool()
	other := newTestPKI(t)
	qualified.AddCert(other.root.cert)

	tests := []struct {
		name   string
		chain  []string
		modify func(*VerifyOptions)
		level  TrustLevel
		code   string
	}{
		{name: "no chain", chain: nil, level: L1},
		{name: "empty chain", chain: []string{}, level: L1},
		{name: "leaf and intermediate", chain: []string{valid, p.inter.pem}, level: L2},
		{name: "leaf, intermediate and root", chain: []string{valid, p.inter.pem, p.root.pem}, level: L2},
		{name: "intermediate configured", chain: []string{valid}, modify: func(o *VerifyOptions) {
			o.Intermediates = x509.NewCertPool()
			o.Intermediates.AddCert(p.inter.cert)
		}, level: L2},
		{name: "intermediate missing", chain: []string{valid}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "qualified", chain: []string{qc, p.inter.pem}, level: L3},
		{name: "qualified, qualified roots match", chain: []string{qc, p.inter.pem}, modify: func(o *VerifyOptions) {
			o.QualifiedRoots = p.roots()
		}, level: L3},
		{name: "qualified, not under qualified roots", chain: []string{qc, p.inter.pem}, modify: func(o *VerifyOptions) {
			o.QualifiedRoots = qualified
		}, level: L2},
		{name: "malformed QcStatements", chain: []string{badQC, p.inter.pem}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "expired leaf", chain: []string{expired, p.inter.pem}, level: L1, code: arsia.CodeCertificateExpired},
		{name: "leaf not yet valid", chain: []string{future, p.inter.pem}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "expired intermediate", chain: []string{oldLeaf, old.inter.pem}, level: L1, code: arsia.CodeCertificateExpired},
		{name: "wrong SAN", chain: []string{wrongSAN, p.inter.pem}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "SAN differs in case only", chain: []string{upperSAN, p.inter.pem}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "SAN among several", chain: []string{resourceSAN, p.inter.pem}, level: L2},
		{name: "no digitalSignature", chain: []string{noDigitalSig, p.inter.pem}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "no key usage extension", chain: []string{noKeyUsage, p.inter.pem}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "self-signed leaf", chain: []string{selfSigned}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "self-signed leaf pinned as root", chain: []string{selfSigned}, modify: func(o *VerifyOptions) {
			c, _ := ParseCertificatePEM(selfSigned)
			o.Roots.AddCert(c)
		}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "CA as leaf", chain: []string{caLeaf, p.inter.pem}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "garbage PEM", chain: []string{"not a pem"}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "garbage intermediate", chain: []string{valid, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "other CA", chain: []string{valid, p.inter.pem}, modify: func(o *VerifyOptions) { o.Roots = qualified }, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "signing key matches", chain: []string{valid, p.inter.pem}, modify: func(o *VerifyOptions) { o.SigningKey = validKey }, level: L2},
		{name: "signing key differs", chain: []string{valid, p.inter.pem}, modify: func(o *VerifyOptions) { o.SigningKey = otherKey }, level: L1, code: arsia.CodeKeyMismatch},
		{name: "revoked", chain: []string{valid, p.inter.pem}, modify: func(o *VerifyOptions) {
			o.CheckRevocation = func([]*x509.Certificate) error { return fmt.Errorf("serial on CRL: %w", ErrCertificateRevoked) }
		}, level: L1, code: arsia.CodeCertificateRevoked},
		{name: "revocation unknown", chain: []string{valid, p.inter.pem}, modify: func(o *VerifyOptions) {
			o.CheckRevocation = func([]*x509.Certificate) error { return errors.New("OCSP responder down") }
		}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "revocation good, chain passed", chain: []string{valid, p.inter.pem}, modify: func(o *VerifyOptions) {
			o.CheckRevocation = func(chain []*x509.Certificate) error {
				if len(chain) != 3 || !chain[2].Equal(p.root.cert) {
					return fmt.Errorf("chain of %d", len(chain))
				}
				return nil
			}
		}, level: L2},
		{name: "server auth required", chain: []string{valid, p.inter.pem}, modify: func(o *VerifyOptions) {
			o.ExtKeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		}, level: L1, code: arsia.CodeCertificateInvalid},
		{name: "too long", chain: make([]string, MaxChainLength+1), level: L1, code: arsia.CodeCertificateInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := p.opts()
			if tc.modify != nil {
				tc.modify(&o)
			}
			level, err := VerifyChain(tc.chain, o)
			if level != tc.level {
				t.Errorf("level %v, want %v (err %v)", level, tc.level, err)
			}
			if tc.code == "" {
				if err != nil {
					t.Errorf("unexpected error %v", err)
				}
				return
			}
			var ae *arsia.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %v is not an *arsia.Error", err)
			}
			if ae.Code != tc.code {
				t.Errorf("code %s, want %s (%v)", ae.Code, tc.code, err)
			}
			if reason, _ := ae.Details["reason"].(string); reason == "" {
				t.Errorf("no details.reason in %v", ae.Details)
			}
			if err := arsia.CheckErrorDetails(ae.WireCode(), ae.Details); err != nil {
				t.Errorf("wire details: %v", err)
			}
			sentinel := map[string]error{
				arsia.CodeCertificateInvalid: ErrCertificateInvalid, arsia.CodeCertificateExpired: ErrCertificateExpired,
				arsia.CodeKeyMismatch: ErrKeyMismatch, arsia.CodeCertificateRevoked: ErrCertificateRevoked,
			}[tc.code]
			if !errors.Is(err, sentinel) {
				t.Errorf("%v does not wrap %v", err, sentinel)
			}
		})
	}
}

func TestVerifyChainOptions(t *testing.T) {
	p := newTestPKI(t)
	valid, _ := p.leaf(t, leafOpts{})
	for name, modify := range map[string]func(*VerifyOptions){
		"no roots":     func(o *VerifyOptions) { o.Roots = nil },
		"no time":      func(o *VerifyOptions) { o.Now = time.Time{} },
		"no agent":     func(o *VerifyOptions) { o.AgentID = "" },
		"bad agent id": func(o *VerifyOptions) { o.AgentID = "agent:nodot" },
	} {
		o := p.opts()
		modify(&o)
		level, err := VerifyChain([]string{valid, p.inter.pem}, o)
		if level != L1 || !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: %v, %v", name, level, err)
		}
		var ae *arsia.Error
		if errors.As(err, &ae) {
			t.Errorf("%s: option error must not be a wire error: %v", name, err)
		}
	}
}

func TestLeafKeyMatches(t *testing.T) {
	p := newTestPKI(t)
	leafPEM, pub := p.leaf(t, leafOpts{})
	leaf, err := ParseCertificatePEM(leafPEM)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := arsia.NewSigningJWK(testAgent+"#key-1", pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := LeafKeyMatches(leaf, jwk); err != nil {
		t.Errorf("matching key: %v", err)
	}
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := arsia.NewSigningJWK(testAgent+"#key-2", otherPub)
	enc := jwk
	enc.Use = arsia.UseEncryption
	broken := jwk
	broken.X = "AAAA"
	for name, k := range map[string]arsia.JWK{"other key": other, "encryption use": enc, "broken key": broken} {
		err := LeafKeyMatches(leaf, k)
		var ae *arsia.Error
		if !errors.As(err, &ae) || ae.Code != arsia.CodeKeyMismatch || !errors.Is(err, ErrKeyMismatch) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := LeafPublicKeyMatches(nil, pub); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("nil leaf: %v", err)
	}
	if err := LeafPublicKeyMatches(leaf, nil); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("nil key: %v", err)
	}
}

func TestRawSANURIs(t *testing.T) {
	p := newTestPKI(t)
	pemText, _ := p.leaf(t, leafOpts{sans: []string{"AGENT:acme.billing", "agent:acme.billing/x"}})
	c, err := ParseCertificatePEM(pemText)
	if err != nil {
		t.Fatal(err)
	}
	got := rawSANURIs(c)
	if len(got) != 2 || got[0] != "AGENT:acme.billing" || got[1] != "agent:acme.billing/x" {
		t.Errorf("raw SANs %q", got)
	}
	if c.URIs[0].String() != "agent:acme.billing" {
		t.Logf("net/url form %q", c.URIs[0])
	}
}
