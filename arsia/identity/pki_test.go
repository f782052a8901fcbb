package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The test PKI: a root, an intermediate under it, and leaves under the
// intermediate, valid around testNow.
var (
	testNow   = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	testAgent = "agent:acme.billing"
)

type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  string
}

type testPKI struct {
	root, inter testCA
	serial      int64
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{}
	p.root = p.ca(t, "Test Root", nil)
	p.inter = p.ca(t, "Test Intermediate", &p.root)
	return p
}

func (p *testPKI) next() *big.Int { p.serial++; return big.NewInt(p.serial) }

func (p *testPKI) ca(t testing.TB, name string, parent *testCA) testCA {
	t.Helper()
	return p.caUntil(t, name, parent, testNow.AddDate(5, 0, 0))
}

func (p *testPKI) caUntil(t testing.TB, name string, parent *testCA, notAfter time.Time) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          p.next(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             testNow.AddDate(-1, 0, 0),
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	cert, pemText := sign(t, tmpl, issuer, key.Public(), signer)
	return testCA{cert: cert, key: key, pem: pemText}
}

// leafOpts vary a leaf from the valid default.
type leafOpts struct {
	sans       []string
	notBefore  time.Time
	notAfter   time.Time
	keyUsage   x509.KeyUsage
	extra      []pkix.Extension
	selfSigned bool
	isCA       bool
}

// leaf issues an Ed25519 leaf certificate and returns its PEM and key.
func (p *testPKI) leaf(t testing.TB, o leafOpts) (string, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if o.sans == nil {
		o.sans = []string{testAgent}
	}
	if o.notBefore.IsZero() {
		o.notBefore = testNow.AddDate(0, -1, 0)
	}
	if o.notAfter.IsZero() {
		o.notAfter = testNow.AddDate(0, 3, 0)
	}
	if o.keyUsage == 0 {
		o.keyUsage = x509.KeyUsageDigitalSignature
	}
	if o.keyUsage < 0 {
		o.keyUsage = 0
	}
	tmpl := &x509.Certificate{
		SerialNumber:          p.next(),
		Subject:               pkix.Name{CommonName: o.sans[0]},
		NotBefore:             o.notBefore,
		NotAfter:              o.notAfter,
		KeyUsage:              o.keyUsage,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  o.isCA,
		ExtraExtensions:       o.extra,
	}
	for _, s := range o.sans {
		// Built by hand: url.Parse would lower-case the scheme.
		scheme, opaque, _ := strings.Cut(s, ":")
		tmpl.URIs = append(tmpl.URIs, &url.URL{Scheme: scheme, Opaque: opaque})
	}
	issuer, signer := p.inter.cert, crypto.Signer(p.inter.key)
	if o.selfSigned {
		issuer, signer = tmpl, priv
	}
	_, pemText := sign(t, tmpl, issuer, pub, signer)
	return pemText, pub
}

func sign(t testing.TB, tmpl, issuer *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, string) {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// qcExtension builds a QcStatements extension holding the ETSI
// QcCompliance statement (0.4.0.1862.1.1), which has no statementInfo.
func qcExtension(t testing.TB) pkix.Extension {
	t.Helper()
	type statement struct{ ID asn1.ObjectIdentifier }
	value, err := asn1.Marshal([]statement{{ID: asn1.ObjectIdentifier{0, 4, 0, 1862, 1, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: OIDQCStatements, Value: value}
}

func (p *testPKI) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.root.cert)
	return pool
}

func (p *testPKI) opts() VerifyOptions {
	return VerifyOptions{Roots: p.roots(), Now: testNow, AgentID: testAgent}
}
