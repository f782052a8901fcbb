// Package ca is an optional issuing certificate authority for the gateway. It
// signs agent certificates (agent id in a SAN URI) so receivers that anchor its
// root compute trust level L2. L3 is a trust decision about qualified
// providers and is never issued (ErrQualifiedNotIssued).
package ca

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// ErrQualifiedNotIssued: L3 needs a qualified trust service provider; this CA
// issues L2 only.
var ErrQualifiedNotIssued = errors.New("ca: trust level L3 is not issued: L3 requires a certificate from a qualified trust service provider")

// ErrBadRequest wraps every invalid Issue input.
var ErrBadRequest = errors.New("ca: bad request")

const (
	DefaultValidity = 90 * 24 * time.Hour
	MaxValidity     = 397 * 24 * time.Hour
	// NotBeforeBackdate is how far before issuance a certificate's
	// validity starts (clock skew between the CA and receivers).
	NotBeforeBackdate = time.Minute
)

// Options for Issue. Zero Validity means the CA default.
type Options struct {
	Validity   time.Duration
	TrustLevel string // "", "L2" or "L3" (refused)
}

// Issued is one issued certificate.
type Issued struct {
	Serial    string
	AgentID   string
	NotBefore time.Time
	NotAfter  time.Time
	ChainPEM  []byte // leaf then root
}

// CA holds the root key and certificate.
type CA struct {
	key         ed25519.PrivateKey
	root        *x509.Certificate
	rootPEM     []byte
	validity    time.Duration
	maxValidity time.Duration
	now         func() time.Time
}

// Open loads the CA key and root from dir, creating them (0600) on first use.
// validity/maxValidity of 0 take the defaults; maxValidity is capped at 397 d.
func Open(dir string, validity, maxValidity time.Duration) (*CA, error) {
	if maxValidity <= 0 || maxValidity > MaxValidity {
		maxValidity = MaxValidity
	}
	if validity <= 0 {
		validity = DefaultValidity
	}
	if validity > maxValidity {
		return nil, fmt.Errorf("ca: validity %s exceeds max_validity %s", validity, maxValidity)
	}
	keyPath, certPath := filepath.Join(dir, "ca-key.pem"), filepath.Join(dir, "ca-root.pem")
	c := &CA{validity: validity, maxValidity: maxValidity, now: time.Now}
	kb, err := os.ReadFile(keyPath)
	if errors.Is(err, os.ErrNotExist) {
		return c, c.create(dir, keyPath, certPath)
	}
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(kb)
	if blk == nil {
		return nil, errors.New("ca: key file is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ca: key: %w", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("ca: key is not Ed25519")
	}
	cb, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	cblk, _ := pem.Decode(cb)
	if cblk == nil {
		return nil, errors.New("ca: root file is not PEM")
	}
	root, err := x509.ParseCertificate(cblk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ca: root: %w", err)
	}
	if !ed25519.PublicKey(root.PublicKey.(ed25519.PublicKey)).Equal(ek.Public()) {
		return nil, errors.New("ca: root does not match key")
	}
	c.key, c.root, c.rootPEM = ek, root, cb
	return c, nil
}

func (c *CA) create(dir, keyPath, certPath string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	now := c.now().UTC()
	serial, err := randSerial()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Custos issuing CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return err
	}
	root, _ := x509.ParseCertificate(der)
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), 0o600); err != nil {
		return err
	}
	cp := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certPath, cp, 0o600); err != nil {
		return err
	}
	c.key, c.root, c.rootPEM = priv, root, cp
	return nil
}

func randSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// Root returns the root certificate.
func (c *CA) Root() *x509.Certificate { return c.root }

// RootPEM returns the root certificate PEM.
func (c *CA) RootPEM() []byte { return append([]byte(nil), c.rootPEM...) }

// Issue signs a leaf for agentID (SAN URI) and pub; EKU clientAuth.
func (c *CA) Issue(_ context.Context, agentID string, pub ed25519.PublicKey, opts Options) (Issued, error) {
	switch opts.TrustLevel {
	case "", "L2":
	case "L3":
		return Issued{}, ErrQualifiedNotIssued
	default:
		return Issued{}, fmt.Errorf("%w: trust_level %q (only L2 is issued)", ErrBadRequest, opts.TrustLevel)
	}
	if len(pub) != ed25519.PublicKeySize {
		return Issued{}, fmt.Errorf("%w: public key must be %d bytes", ErrBadRequest, ed25519.PublicKeySize)
	}
	u, err := url.Parse(agentID)
	if err != nil || u.Scheme == "" || agentID == "" {
		return Issued{}, fmt.Errorf("%w: agent_id %q is not a URI", ErrBadRequest, agentID)
	}
	v := opts.Validity
	if v == 0 {
		v = c.validity
	}
	if v < 0 || v > c.maxValidity {
		return Issued{}, fmt.Errorf("%w: validity %s outside (0, %s]", ErrBadRequest, v, c.maxValidity)
	}
	serial, err := randSerial()
	if err != nil {
		return Issued{}, err
	}
	// Valid from a minute ago, so that a receiver whose clock is a little
	// behind (or truncates to the second) does not see it as not yet
	// valid; the lifetime is still exactly v.
	from := c.now().UTC().Truncate(time.Second).Add(-NotBeforeBackdate)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: agentID},
		NotBefore:    from,
		NotAfter:     from.Add(v),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{u},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.root, pub, c.key)
	if err != nil {
		return Issued{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return Issued{}, err
	}
	chain := append(pemOf(leaf), c.rootPEM...)
	return Issued{Serial: Serial(serial), AgentID: agentID, NotBefore: tmpl.NotBefore, NotAfter: tmpl.NotAfter, ChainPEM: chain}, nil
}

// pemOf is cert's PEM encoding.
func pemOf(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}
