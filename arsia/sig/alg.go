package sig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"fmt"
	"slices"
)

// Signature algorithms of ARSIA-Core §5.1, as they appear in security.alg.
const (
	// EdDSA is Ed25519 (RFC 8032): a 64-byte signature. ARSIA requires it.
	EdDSA = "EdDSA"
	// ES256 is ECDSA on P-256 with SHA-256; the signature is the 64-byte
	// raw R‖S, never DER.
	ES256 = "ES256"
	// RS256 is RSASSA-PKCS1-v1_5 with SHA-256 on keys of 2048 bits or more;
	// the signature is as long as the modulus.
	RS256 = "RS256"
)

// Bounds on RSA keys. The upper bound keeps a hostile JWKS from making
// every verification expensive; it matches go-jose's parsing limit.
const (
	MinRSABits = 2048
	MaxRSABits = 4096
)

// maxSigChars bounds the base64url text of a signature before it is decoded:
// a 4096-bit RSA signature is 683 characters.
const maxSigChars = 700

// supported reports whether alg is one this package implements. "none",
// HS256 and every other name are refused whatever the allow-list says.
func supported(alg string) bool {
	return alg == EdDSA || alg == ES256 || alg == RS256
}

// checkAllowed refuses an algorithm that is unsupported or not in allowed.
// An empty allow-list refuses everything: a caller must say what it accepts.
func checkAllowed(alg string, allowed []string) error {
	if !supported(alg) || !slices.Contains(allowed, alg) {
		return fmt.Errorf("%w: %q", ErrAlgorithmNotAllowed, alg)
	}
	return nil
}

// fixedSigLen is the signature length of alg in bytes, or 0 when it depends
// on the key (RS256).
func fixedSigLen(alg string) int {
	if alg == EdDSA || alg == ES256 {
		return 64
	}
	return 0
}

// checkKey reports whether pub is usable with alg and returns the signature
// length it implies.
func checkKey(alg string, pub crypto.PublicKey) (sigLen int, err error) {
	switch alg {
	case EdDSA:
		if k, ok := pub.(ed25519.PublicKey); ok && len(k) == ed25519.PublicKeySize {
			return ed25519.SignatureSize, nil
		}
	case ES256:
		if k, ok := pub.(*ecdsa.PublicKey); ok && k != nil && k.Curve == elliptic.P256() {
			return 64, nil
		}
	case RS256:
		if k, ok := pub.(*rsa.PublicKey); ok && k != nil && k.N != nil {
			if bits := k.N.BitLen(); bits < MinRSABits || bits > MaxRSABits {
				return 0, fmt.Errorf("%w: RSA key of %d bits", ErrKeyMismatch, bits)
			}
			return k.Size(), nil
		}
	}
	return 0, fmt.Errorf("%w: %s cannot be verified with a %T", ErrKeyMismatch, alg, pub)
}

// algorithmFor names the algorithm a signing key implies.
func algorithmFor(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return EdDSA, nil
		}
	case *ecdsa.PublicKey:
		if k != nil && k.Curve == elliptic.P256() {
			return ES256, nil
		}
	case *rsa.PublicKey:
		if k != nil && k.N != nil && k.N.BitLen() >= MinRSABits && k.N.BitLen() <= MaxRSABits {
			return RS256, nil
		}
	}
	return "", fmt.Errorf("%w: no ARSIA algorithm for a %T signing key", ErrKeyMismatch, pub)
}
