package identity

import (
	"crypto"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

// VerifyOptions configure VerifyChain. Roots, Now and AgentID are
// required: there is no default trust store and no clock.
type VerifyOptions struct {
	// Roots are the CAs whose certificates count for L2. The system pool
	// is never used implicitly.
	Roots *x509.CertPool
	// Intermediates are extra CA certificates that may complete a chain,
	// besides the ones the peer sent after its leaf.
	Intermediates *x509.CertPool
	// QualifiedRoots, when set, restricts L3 to chains that also verify
	// against these roots (for example the CAs of qualified trust service
	// providers on the EU trusted lists). When nil, a QcStatements leaf
	// under any of Roots is L3.
	QualifiedRoots *x509.CertPool
	// Now is the verification time.
	Now time.Time
	// AgentID must appear, byte for byte, as a URI subject alternative
	// name of the leaf.
	AgentID string
	// SigningKey, when set, must be the leaf's public key (the key the
	// agent's JWKS publishes and its envelopes are signed with); a
	// different key is key_mismatch.
	SigningKey crypto.PublicKey
	// ExtKeyUsages the leaf must allow; nil accepts any extended key usage.
	ExtKeyUsages []x509.ExtKeyUsage
	// CheckRevocation, when set, is called with the verified chain, leaf
	// first. An error wrapping ErrCertificateRevoked means revoked; any
	// other error means the status is unknown, and the chain is refused
	// as certificate_invalid. When nil, revocation is not checked.
	CheckRevocation func(chain []*x509.Certificate) error
}

func (o *VerifyOptions) check() error {
	switch {
	case o.Roots == nil:
		return fmt.Errorf("%w: Roots is nil", ErrInvalidOptions)
	case o.Now.IsZero():
		return fmt.Errorf("%w: Now is not set", ErrInvalidOptions)
	}
	if _, err := arsia.ParseAgentID(o.AgentID); err != nil {
		return fmt.Errorf("%w: AgentID: %w", ErrInvalidOptions, err)
	}
	return nil
}

// VerifyChain is the receiver's verification of a certificate_chain (leaf
// first) per ARSIA-Identity §6:
//
//   - no chain (nil or empty): L1 and no error, the agent relies on its
//     self-asserted JWKS;
//   - L2 when the chain verifies against opts.Roots at opts.Now through at
//     least one CA (a leaf that is itself a root does not count), the leaf
//     is not a CA, names opts.AgentID exactly as a SAN URI, has a key usage
//     extension allowing digitalSignature, matches opts.SigningKey when
//     set, and passes opts.CheckRevocation when set;
//   - L3 when, in addition, the leaf carries a well-formed QcStatements
//     extension (and the chain verifies against opts.QualifiedRoots when
//     set).
//
// A chain that is present but fails returns L1 and an *arsia.Error with
// code certificate_invalid, certificate_expired, key_mismatch or
// certificate_revoked and details {reason}, ready to send; the receiver
// decides whether to refuse the message or to carry on at L1. Bad options
// return L1 and an error wrapping ErrInvalidOptions, which is the
// receiver's fault and must not be sent.
func VerifyChain(pems []string, opts VerifyOptions) (TrustLevel, error) {
	if err := opts.check(); err != nil {
		return L1, err
	}
	if len(pems) == 0 {
		return L1, nil
	}
	certs, err := ParseChain(pems)
	if err != nil {
		return L1, certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "certificate chain is malformed", err)
	}
	leaf := certs[0]
	switch {
	case opts.Now.Before(leaf.NotBefore):
		return L1, certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "certificate is not yet valid", nil)
	case opts.Now.After(leaf.NotAfter):
		return L1, certError(arsia.CodeCertificateExpired, ErrCertificateExpired, "certificate has expired", nil)
	}
	chain, err := verifiedChain(certs, opts.Roots, opts)
	if err != nil {
		return L1, err
	}
	if err := checkLeaf(leaf, opts); err != nil {
		return L1, err
	}
	if opts.CheckRevocation != nil {
		if err := opts.CheckRevocation(chain); err != nil {
			if errors.Is(err, ErrCertificateRevoked) {
				return L1, certError(arsia.CodeCertificateRevoked, ErrCertificateRevoked, "certificate has been revoked", err)
			}
			return L1, certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "certificate revocation status is unknown", err)
		}
	}
	if !hasExtension(leaf, OIDQCStatements) {
		return L2, nil
	}
	for _, e := range leaf.Extensions {
		if e.Id.Equal(OIDQCStatements) {
			if _, err := parseQCStatements(e.Value); err != nil {
				return L1, certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "QcStatements extension is malformed", err)
			}
		}
	}
	if opts.QualifiedRoots != nil {
		if _, err := verifiedChain(certs, opts.QualifiedRoots, opts); err != nil {
			return L2, nil
		}
	}
	return L3, nil
}

// verifiedChain runs x509 path validation and returns a verified chain
// that has at least one certificate above the leaf.
func verifiedChain(certs []*x509.Certificate, roots *x509.CertPool, opts VerifyOptions) ([]*x509.Certificate, error) {
	inter := x509.NewCertPool()
	if opts.Intermediates != nil {
		inter = opts.Intermediates.Clone()
	}
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	usages := opts.ExtKeyUsages
	if usages == nil {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageAny}
	}
	chains, err := certs[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   opts.Now,
		KeyUsages:     usages,
	})
	if err != nil {
		var invalid x509.CertificateInvalidError
		if errors.As(err, &invalid) && invalid.Reason == x509.Expired {
			return nil, certError(arsia.CodeCertificateExpired, ErrCertificateExpired, "a certificate in the chain has expired or is not yet valid", err)
		}
		var unknown x509.UnknownAuthorityError
		if errors.As(err, &unknown) {
			return nil, certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "certificate is not issued by a trusted CA", err)
		}
		return nil, certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "certificate chain does not verify", err)
	}
	for _, ch := range chains {
		if len(ch) >= 2 {
			return ch, nil
		}
	}
	return nil, certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "certificate is a trust anchor, not CA-issued", nil)
}

// checkLeaf applies the ARSIA rules x509 path validation does not.
func checkLeaf(leaf *x509.Certificate, opts VerifyOptions) error {
	if leaf.IsCA {
		return certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "leaf certificate is a CA certificate", nil)
	}
	if !slices.Contains(rawSANURIs(leaf), opts.AgentID) {
		return certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "certificate does not name the agent as a SAN URI", nil)
	}
	// An absent key usage extension (KeyUsage 0) would allow every usage
	// under RFC 5280; ARSIA certificates must state digitalSignature.
	if leaf.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return certError(arsia.CodeCertificateInvalid, ErrCertificateInvalid, "certificate key usage does not allow digital signatures", nil)
	}
	if opts.SigningKey != nil {
		if err := LeafPublicKeyMatches(leaf, opts.SigningKey); err != nil {
			return err
		}
	}
	return nil
}

// LeafKeyMatches checks that jwk, the JWKS signing key an agent's
// envelopes verify with, is the public key of its certificate leaf. A
// mismatch, or a JWK that is not a usable signing key, is an *arsia.Error
// with code key_mismatch.
func LeafKeyMatches(leaf *x509.Certificate, jwk arsia.JWK) error {
	if jwk.Use != arsia.UseSignature {
		return certError(arsia.CodeKeyMismatch, ErrKeyMismatch, "key is not a signing key", nil)
	}
	pub, err := jwk.PublicKey()
	if err != nil {
		return certError(arsia.CodeKeyMismatch, ErrKeyMismatch, "signing key is malformed", err)
	}
	return LeafPublicKeyMatches(leaf, pub)
}

// LeafPublicKeyMatches is LeafKeyMatches for a decoded public key (such as
// the Key of a go-jose JSONWebKey).
func LeafPublicKeyMatches(leaf *x509.Certificate, pub crypto.PublicKey) error {
	if leaf == nil || pub == nil {
		return certError(arsia.CodeKeyMismatch, ErrKeyMismatch, "signing key does not match the certificate", nil)
	}
	eq, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !eq.Equal(pub) {
		return certError(arsia.CodeKeyMismatch, ErrKeyMismatch, "signing key does not match the certificate", nil)
	}
	return nil
}

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// rawSANURIs returns the URI subject alternative names as written in the
// certificate. x509.Certificate.URIs holds them re-parsed by net/url, which
// lower-cases the scheme, so comparing those would accept "AGENT:acme.bot"
// for "agent:acme.bot"; agent ids are compared byte for byte.
func rawSANURIs(c *x509.Certificate) []string {
	var uris []string
	for _, e := range c.Extensions {
		if !e.Id.Equal(oidSubjectAltName) {
			continue
		}
		var names []asn1.RawValue
		if rest, err := asn1.Unmarshal(e.Value, &names); err != nil || len(rest) > 0 {
			return nil
		}
		for _, n := range names {
			const uriTag = 6 // uniformResourceIdentifier [6] IA5String
			if n.Class == asn1.ClassContextSpecific && n.Tag == uriTag && !n.IsCompound {
				uris = append(uris, string(n.Bytes))
			}
		}
	}
	return uris
}
