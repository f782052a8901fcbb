package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"math/big"
)

// JWK is a public JSON Web Key (RFC 7517) of the kinds ARSIA uses: OKP
// Ed25519 (RFC 8037), EC P-256 and RSA. Members are kept as the
// base64url text they were received as, so that a thumbprint is computed
// over exactly what the peer sent.
type JWK struct {
	KeyType   string `json:"kty"`
	Curve     string `json:"crv,omitempty"`
	X         string `json:"x,omitempty"`
	Y         string `json:"y,omitempty"`
	N         string `json:"n,omitempty"`
	E         string `json:"e,omitempty"`
	KeyID     string `json:"kid,omitempty"`
	Use       string `json:"use,omitempty"`
	Algorithm string `json:"alg,omitempty"`
}

// privateMembers carry secret key material (RFC 7518 §6.2.2, §6.3.2, §6.4;
// RFC 8037 §2). A JWK that travels in a DPoP header or a JWKS must not
// have any of them: that key is leaked and cannot prove possession.
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// ParseJWK decodes one public JWK strictly (duplicate member names
// refused). Private or symmetric key material is refused; members this
// package does not use (key_ops, x5c...) are ignored. It does not check
// that the key is usable; PublicKey does.
func ParseJWK(data []byte) (JWK, error) {
	m, err := decodeObject(data)
	if err != nil {
		return JWK{}, failCause(ErrInvalidJWK, err, "JWK is not a JSON object")
	}
	return jwkFromMap(m)
}

func jwkFromMap(m map[string]any) (JWK, error) {
	for _, p := range privateMembers {
		if _, ok := m[p]; ok {
			return JWK{}, fail(ErrInvalidJWK, "JWK contains private key material (member %s)", pyRepr(p))
		}
	}
	var k JWK
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"kty", &k.KeyType}, {"crv", &k.Curve}, {"x", &k.X}, {"y", &k.Y},
		{"n", &k.N}, {"e", &k.E}, {"kid", &k.KeyID}, {"use", &k.Use}, {"alg", &k.Algorithm},
	} {
		s, present, ok := memberString(m, f.name)
		if present && !ok {
			return JWK{}, fail(ErrInvalidJWK, "JWK member %s is not a string", pyRepr(f.name))
		}
		*f.dst = s
	}
	if k.KeyType == "" {
		return JWK{}, fail(ErrInvalidJWK, "JWK has no 'kty'")
	}
	return k, nil
}

// PublicJWK returns the JWK of an Ed25519, P-256 or RSA public key.
func PublicJWK(pub crypto.PublicKey) (JWK, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return JWK{KeyType: "OKP", Curve: "Ed25519", X: b64.EncodeToString(k)}, nil
		}
	case *ecdsa.PublicKey:
		if k != nil && k.Curve == elliptic.P256() {
			e, err := k.ECDH()
			if err != nil {
				return JWK{}, failCause(ErrInvalidJWK, err, "P-256 key")
			}
			b := e.Bytes() // 0x04 ‖ X ‖ Y, each 32 bytes
			return JWK{KeyType: "EC", Curve: "P-256", X: b64.EncodeToString(b[1:33]), Y: b64.EncodeToString(b[33:])}, nil
		}
	case *rsa.PublicKey:
		if k != nil && k.N != nil && k.E > 0 {
			e := big.NewInt(int64(k.E)).Bytes()
			return JWK{KeyType: "RSA", N: b64.EncodeToString(k.N.Bytes()), E: b64.EncodeToString(e)}, nil
		}
	}
	return JWK{}, fail(ErrInvalidJWK, "unsupported public key type %T", pub)
}

// PublicKey returns the key the JWK describes: ed25519.PublicKey,
// *ecdsa.PublicKey on P-256 (the point is checked to be on the curve) or
// *rsa.PublicKey of 2048 to 4096 bits. Other key types and curves fail.
func (k JWK) PublicKey() (crypto.PublicKey, error) {
	switch k.KeyType {
	case "OKP":
		if k.Curve != "Ed25519" {
			return nil, fail(ErrInvalidJWK, "unsupported OKP curve %s", pyRepr(k.Curve))
		}
		x, err := decodeB64(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fail(ErrInvalidJWK, "Ed25519 'x' must be %d bytes of base64url", ed25519.PublicKeySize)
		}
		return ed25519.PublicKey(x), nil
	case "EC":
		if k.Curve != "P-256" {
			return nil, fail(ErrInvalidJWK, "unsupported EC curve %s", pyRepr(k.Curve))
		}
		x, errX := decodeB64(k.X)
		y, errY := decodeB64(k.Y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return nil, fail(ErrInvalidJWK, "P-256 'x' and 'y' must be 32 bytes of base64url each")
		}
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
		if err != nil {
			return nil, failCause(ErrInvalidJWK, err, "P-256 point")
		}
		return pub, nil
	case "RSA":
		n, errN := decodeB64(k.N)
		e, errE := decodeB64(k.E)
		if errN != nil || errE != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 || n[0] == 0 || e[0] == 0 {
			return nil, fail(ErrInvalidJWK, "RSA 'n' and 'e' must be minimal unsigned base64url integers")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.E < 3 || pub.E%2 == 0 {
			return nil, fail(ErrInvalidJWK, "RSA exponent %d", pub.E)
		}
		if err := checkKey(RS256, pub); err != nil {
			return nil, failCause(ErrInvalidJWK, err, "RSA key")
		}
		return pub, nil
	}
	return nil, fail(ErrInvalidJWK, "unsupported key type %s", pyRepr(k.KeyType))
}

// Thumbprint is the RFC 7638 JWK thumbprint: the unpadded base64url
// SHA-256 of the JSON object holding only the key type's required members
// in lexicographic order, without whitespace — {"crv","kty","x"} for OKP,
// {"crv","kty","x","y"} for EC, {"e","kty","n"} for RSA. Optional members
// (kid, use, alg) do not change it. It is the value of cnf.jkt in a
// DPoP-bound access token (RFC 9449 §6).
//
// Member values must be non-empty and made of characters that JSON writes
// without escapes (base64url for key material, letters, digits and "-"
// for kty and crv), so the object can be written byte-exactly by hand; a
// JWK outside that set fails instead of getting a thumbprint another
// implementation would compute differently.
func Thumbprint(k JWK) (string, error) {
	var members [][2]string
	switch k.KeyType {
	case "OKP":
		members = [][2]string{{"crv", k.Curve}, {"kty", k.KeyType}, {"x", k.X}}
	case "EC":
		members = [][2]string{{"crv", k.Curve}, {"kty", k.KeyType}, {"x", k.X}, {"y", k.Y}}
	case "RSA":
		members = [][2]string{{"e", k.E}, {"kty", k.KeyType}, {"n", k.N}}
	default:
		return "", fail(ErrInvalidJWK, "no thumbprint for key type %s", pyRepr(k.KeyType))
	}
	buf := []byte{'{'}
	for i, m := range members {
		name, value := m[0], m[1]
		ok := isB64URL(value)
		if name == "crv" || name == "kty" {
			ok = isToken(value)
		}
		if !ok {
			return "", fail(ErrInvalidJWK, "JWK member %s is missing or not in its character set", pyRepr(name))
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '"')
		buf = append(buf, name...)
		buf = append(buf, `":"`...)
		buf = append(buf, value...)
		buf = append(buf, '"')
	}
	buf = append(buf, '}')
	sum := sha256.Sum256(buf)
	return b64.EncodeToString(sum[:]), nil
}

// isToken reports whether s is a non-empty run of ASCII letters, digits
// and "-", which covers every registered kty and crv name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
