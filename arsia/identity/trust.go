package identity

import (
	"bytes"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
)

// TrustLevel is how strongly an agent's identity is bound to a legal
// entity (ARSIA-Identity §6). The zero value is not a level.
type TrustLevel int

// Trust levels, weakest first; they compare with < and >.
const (
	// L1: the agent's keys are self-asserted through its JWKS, with no
	// certificate (or none that counts).
	L1 TrustLevel = iota + 1
	// L2: an X.509 certificate issued by a trusted CA binds the agent id
	// (as a SAN URI) to the signing key.
	L2
	// L3: as L2, and the certificate is an eIDAS qualified certificate,
	// marked by the QcStatements extension.
	L3
)

// Limits shared by every parse of a certificate chain.
const (
	// MaxChainLength caps the certificates in certificate_chain.
	MaxChainLength = 8
	// MaxPEMBytes caps one PEM certificate.
	MaxPEMBytes = 64 << 10
)

// OIDQCStatements is the QcStatements certificate extension (RFC 3739,
// ETSI EN 319 412-5), id-pe-qcStatements.
var OIDQCStatements = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 3}

// Valid reports whether l is L1, L2 or L3.
func (l TrustLevel) Valid() bool { return l >= L1 && l <= L3 }

// String returns "L1", "L2" or "L3", and "TrustLevel(n)" otherwise.
func (l TrustLevel) String() string {
	if l.Valid() {
		return "L" + strconv.Itoa(int(l))
	}
	return "TrustLevel(" + strconv.Itoa(int(l)) + ")"
}

// ParseTrustLevel parses "L1", "L2" or "L3".
func ParseTrustLevel(s string) (TrustLevel, error) {
	switch s {
	case "L1":
		return L1, nil
	case "L2":
		return L2, nil
	case "L3":
		return L3, nil
	}
	return 0, fmt.Errorf("%w: %q is not L1, L2 or L3", ErrInvalidTrustLevel, s)
}

// MarshalText encodes a valid level as "L1", "L2" or "L3".
func (l TrustLevel) MarshalText() ([]byte, error) {
	if !l.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrInvalidTrustLevel, int(l))
	}
	return []byte(l.String()), nil
}

// UnmarshalText decodes "L1", "L2" or "L3".
func (l *TrustLevel) UnmarshalText(text []byte) error {
	v, err := ParseTrustLevel(string(text))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// ParseCertificatePEM decodes one PEM "CERTIFICATE" block holding one DER
// certificate. The text must start with the BEGIN line (as the identity
// record schema requires) and nothing but whitespace may follow the END
// line; headers are refused. Errors wrap ErrMalformedPEM.
func ParseCertificatePEM(text string) (*x509.Certificate, error) {
	if len(text) > MaxPEMBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformedPEM, len(text), MaxPEMBytes)
	}
	data := []byte(strings.TrimLeft(text, " \t\r\n"))
	if !bytes.HasPrefix(data, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("%w: does not start with -----BEGIN CERTIFICATE-----", ErrMalformedPEM)
	}
	block, rest := pem.Decode(data)
	switch {
	case block == nil:
		return nil, fmt.Errorf("%w: no PEM block", ErrMalformedPEM)
	case block.Type != "CERTIFICATE":
		return nil, fmt.Errorf("%w: PEM block type %q", ErrMalformedPEM, block.Type)
	case len(block.Headers) > 0:
		return nil, fmt.Errorf("%w: PEM headers are not allowed", ErrMalformedPEM)
	case len(bytes.TrimSpace(rest)) > 0:
		return nil, fmt.Errorf("%w: data after the certificate", ErrMalformedPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedPEM, err)
	}
	return cert, nil
}

// ParseChain parses a certificate_chain, leaf first. It fails on an empty
// chain, one longer than MaxChainLength, or any entry ParseCertificatePEM
// refuses.
func ParseChain(pems []string) ([]*x509.Certificate, error) {
	switch {
	case len(pems) == 0:
		return nil, fmt.Errorf("%w: empty certificate chain", ErrMalformedPEM)
	case len(pems) > MaxChainLength:
		return nil, fmt.Errorf("%w: %d certificates, more than %d", ErrMalformedPEM, len(pems), MaxChainLength)
	}
	certs := make([]*x509.Certificate, len(pems))
	for i, p := range pems {
		c, err := ParseCertificatePEM(p)
		if err != nil {
			return nil, fmt.Errorf("certificate_chain[%d]: %w", i, err)
		}
		certs[i] = c
	}
	return certs, nil
}

// ClassifyChain is the reference SDK's compute_trust_level, which the
// conformance suite fixes: L1 for a missing, empty or unparseable chain,
// L3 when the leaf carries the QcStatements extension, L2 for any other
// parseable chain.
//
// It verifies nothing (no signature, CA, validity period, SAN or key
// binding): the result is what the chain claims, fit for display and for
// comparing with the reference SDK, never for a trust decision. Receivers
// use VerifyChain.
func ClassifyChain(pems []string) TrustLevel {
	certs, err := ParseChain(pems)
	if err != nil {
		return L1
	}
	if hasExtension(certs[0], OIDQCStatements) {
		return L3
	}
	return L2
}

// HasQCStatements reports whether the certificate in pemText carries the
// QcStatements extension. It fails (ErrMalformedPEM) when pemText is not
// one PEM certificate.
func HasQCStatements(pemText string) (bool, error) {
	cert, err := ParseCertificatePEM(pemText)
	if err != nil {
		return false, err
	}
	return hasExtension(cert, OIDQCStatements), nil
}

func hasExtension(c *x509.Certificate, oid asn1.ObjectIdentifier) bool {
	for _, e := range c.Extensions {
		if e.Id.Equal(oid) {
			return true
		}
	}
	return false
}

// qcStatement is one QCStatement (RFC 3739 §3.2.6): an identifier and
// optional information whose syntax the identifier defines.
type qcStatement struct {
	StatementID   asn1.ObjectIdentifier
	StatementInfo asn1.RawValue `asn1:"optional"`
}

// parseQCStatements decodes the extension value: a non-empty SEQUENCE OF
// QCStatement with nothing after it.
func parseQCStatements(value []byte) ([]qcStatement, error) {
	var stmts []qcStatement
	rest, err := asn1.Unmarshal(value, &stmts)
	switch {
	case err != nil:
		return nil, err
	case len(rest) > 0:
		return nil, fmt.Errorf("trailing data after QcStatements")
	case len(stmts) == 0:
		return nil, fmt.Errorf("empty QcStatements")
	}
	return stmts, nil
}
