package sig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"

	"github.com/go-jose/go-jose/v4"
)

// Signer makes ARSIA signatures with one private key. It is pure
// computation and takes no context; a Signer backed by a remote key store
// should bound its own latency.
type Signer interface {
	// Algorithm is the security.alg value the signatures are made for:
	// EdDSA, ES256 or RS256.
	Algorithm() string
	// Public is the verification key.
	Public() crypto.PublicKey
	// SignMessage signs message (the canonical envelope bytes) and returns
	// the raw signature: 64 bytes for EdDSA and ES256 (R‖S), the modulus
	// size for RS256.
	SignMessage(message []byte) ([]byte, error)
}

// keySigner adapts a crypto.Signer to the ARSIA wire formats.
type keySigner struct {
	alg    string
	signer crypto.Signer
	pub    crypto.PublicKey
	sigLen int
}

// NewSigner wraps a crypto.Signer: ed25519.PrivateKey signs EdDSA, an
// *ecdsa.PrivateKey on P-256 signs ES256 and an *rsa.PrivateKey of 2048 to
// 4096 bits signs RS256. Hardware-backed signers with those public keys work
// too, provided they follow the crypto.Signer conventions (Ed25519 signs the
// message with crypto.Hash(0), ECDSA returns ASN.1 DER, RSA with
// crypto.SHA256 means PKCS #1 v1.5).
func NewSigner(s crypto.Signer) (Signer, error) {
	if s == nil {
		return nil, errors.New("sig: nil signer")
	}
	pub := s.Public()
	alg, err := algorithmFor(pub)
	if err != nil {
		return nil, err
	}
	n, err := checkKey(alg, pub)
	if err != nil {
		return nil, err
	}
	return &keySigner{alg: alg, signer: s, pub: pub, sigLen: n}, nil
}

// NewEd25519Signer returns an EdDSA signer from a 32-byte RFC 8032 seed (the
// private_key_hex of ARSIA's test keypairs, decoded).
func NewEd25519Signer(seed []byte) (Signer, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("sig: Ed25519 seed must be %d bytes, got %d", ed25519.SeedSize, len(seed))
	}
	return NewSigner(ed25519.NewKeyFromSeed(seed))
}

// NewES256Signer returns an ES256 signer from a 32-byte big-endian P-256
// private scalar.
func NewES256Signer(scalar []byte) (Signer, error) {
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar)
	if err != nil {
		return nil, fmt.Errorf("sig: P-256 private key: %w", err)
	}
	return NewSigner(k)
}

// NewSignerFromJWK returns a signer for a private JWK (OKP Ed25519, EC P-256
// or RSA). A "use" other than "sig" or an "alg" that names another
// algorithm is refused.
func NewSignerFromJWK(k *jose.JSONWebKey) (Signer, error) {
	if k == nil {
		return nil, errors.New("sig: nil JWK")
	}
	if k.Use != "" && k.Use != "sig" {
		return nil, fmt.Errorf("%w: JWK use %q is not sig", ErrKeyMismatch, k.Use)
	}
	s, ok := k.Key.(crypto.Signer)
	if !ok || k.IsPublic() {
		return nil, fmt.Errorf("%w: JWK holds no private signing key", ErrKeyMismatch)
	}
	signer, err := NewSigner(s)
	if err != nil {
		return nil, err
	}
	if k.Algorithm != "" && k.Algorithm != signer.Algorithm() {
		return nil, fmt.Errorf("%w: JWK alg %q, key implies %s", ErrKeyMismatch, k.Algorithm, signer.Algorithm())
	}
	return signer, nil
}

func (s *keySigner) Algorithm() string        { return s.alg }
func (s *keySigner) Public() crypto.PublicKey { return s.pub }

func (s *keySigner) SignMessage(message []byte) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch s.alg {
	case EdDSA:
		out, err = s.signer.Sign(rand.Reader, message, crypto.Hash(0))
	case ES256:
		digest := sha256.Sum256(message)
		var der []byte
		if der, err = s.signer.Sign(rand.Reader, digest[:], crypto.SHA256); err == nil {
			out, err = derToRaw(der)
		}
	case RS256:
		digest := sha256.Sum256(message)
		out, err = s.signer.Sign(rand.Reader, digest[:], crypto.SHA256)
	}
	if err != nil {
		return nil, fmt.Errorf("sig: signing with %s: %w", s.alg, err)
	}
	if len(out) != s.sigLen {
		return nil, fmt.Errorf("sig: %s signer returned %d bytes, want %d", s.alg, len(out), s.sigLen)
	}
	return out, nil
}

// derToRaw turns an ASN.1 ECDSA signature into the fixed 64-byte R‖S that
// JWS (RFC 7518 §3.4) and ARSIA use.
func derToRaw(der []byte) ([]byte, error) {
	var rs struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &rs)
	if err != nil || len(rest) != 0 || rs.R == nil || rs.S == nil ||
		rs.R.Sign() <= 0 || rs.S.Sign() <= 0 || rs.R.BitLen() > 256 || rs.S.BitLen() > 256 {
		return nil, errors.New("sig: malformed ECDSA signature from signer")
	}
	out := make([]byte, 64)
	rs.R.FillBytes(out[:32])
	rs.S.FillBytes(out[32:])
	return out, nil
}
