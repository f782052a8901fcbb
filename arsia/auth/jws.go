package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/custos-runtime/custos/jcs"
)

// Signature algorithms, as they appear in a JWS alg header. "none", the
// HMAC family and every other name are refused whatever an allow-list
// says: an HMAC key shared with the issuer would let any holder mint
// tokens, and "none" is no signature at all.
const (
	// EdDSA is Ed25519 (RFC 8037). ARSIA requires it for access tokens and
	// DPoP proofs.
	EdDSA = "EdDSA"
	// ES256 is ECDSA on P-256 with SHA-256, signature raw R‖S (64 bytes).
	ES256 = "ES256"
	// RS256 is RSASSA-PKCS1-v1_5 with SHA-256, on keys of 2048 to 4096
	// bits. Accepted for access tokens only.
	RS256 = "RS256"
)

// Bounds on RSA keys: the lower one is RFC 7518's; the upper one keeps a
// hostile key from making every verification slow.
const (
	minRSABits = 2048
	maxRSABits = 4096
)

// MaxJWTBytes caps an access token or DPoP proof before anything is
// decoded. It is shared by parsing and verification, so no path reads
// more.
const MaxJWTBytes = 16 << 10

// jsonLimits bound the header and claims objects: no legitimate JWT nests
// deeper than a cnf or jwk object.
var jsonLimits = &jcs.Options{MaxDepth: 8, MaxSize: MaxJWTBytes}

var b64 = base64.RawURLEncoding.Strict()

// compactJWS is a JWS in compact serialization, decoded but not verified.
type compactJWS struct {
	header       map[string]any
	claims       map[string]any
	signingInput string // the first two parts as received, the signed bytes
	signature    []byte
}

// parseCompact decodes a compact JWS strictly: three parts of unpadded
// base64url, header and payload JSON objects without duplicate member
// names, a non-empty signature. It checks nothing about the contents; what
// is wrong with them is reported by the validators, all at once.
func parseCompact(token, what string) (*compactJWS, error) {
	if len(token) > MaxJWTBytes {
		return nil, fail(ErrMalformed, "%s is %d bytes, more than %d", what, len(token), MaxJWTBytes)
	}
	if token == "" {
		return nil, fail(ErrMalformed, "%s is empty", what)
	}
	if n := strings.Count(token, ".") + 1; n != 3 {
		return nil, fail(ErrMalformed, "%s has %d dot-separated parts, a compact JWS has 3", what, n)
	}
	parts := strings.SplitN(token, ".", 3)
	raw := make([][]byte, 3)
	for i, name := range []string{"header", "payload", "signature"} {
		b, err := decodeB64(parts[i])
		if err != nil {
			return nil, failCause(ErrMalformed, err, "%s %s is not unpadded base64url", what, name)
		}
		raw[i] = b
	}
	if len(raw[2]) == 0 {
		return nil, fail(ErrMalformed, "%s is unsigned", what)
	}
	header, err := decodeObject(raw[0])
	if err != nil {
		return nil, failCause(ErrMalformed, err, "%s header is not a JSON object", what)
	}
	claims, err := decodeObject(raw[1])
	if err != nil {
		return nil, failCause(ErrMalformed, err, "%s payload is not a JSON object", what)
	}
	return &compactJWS{
		header:       header,
		claims:       claims,
		signingInput: parts[0] + "." + parts[1],
		signature:    raw[2],
	}, nil
}

// decodeB64 decodes unpadded base64url and refuses every character outside
// its alphabet; the standard decoder would skip line breaks.
func decodeB64(s string) ([]byte, error) {
	if !isB64URL(s) && s != "" {
		return nil, fmt.Errorf("character outside the base64url alphabet")
	}
	return b64.DecodeString(s)
}

func isB64URL(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// decodeObject decodes a JSON object with package jcs, which rejects
// duplicate member names, invalid UTF-8 and numbers that change value
// between implementations: two parsers must never see two different
// claims in the same signed bytes.
func decodeObject(data []byte) (map[string]any, error) {
	v, err := jsonLimits.Decode(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s", jsonKind(v))
	}
	return m, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// resolveAlgorithms applies an allow-list option: empty means def, and
// every name must be one of supported. Naming "none" or HS256 is a
// configuration error, not a silent no-op, so the mistake is seen.
func resolveAlgorithms(list, supported, def []string) ([]string, error) {
	if len(list) == 0 {
		return def, nil
	}
	for _, a := range list {
		if !slices.Contains(supported, a) {
			return nil, fail(ErrInvalidOptions, "algorithm %s is not supported here (supported: %s)",
				pyRepr(a), strings.Join(supported, ", "))
		}
	}
	return list, nil
}

// checkKey reports whether pub can verify alg signatures.
func checkKey(alg string, pub crypto.PublicKey) error {
	switch alg {
	case EdDSA:
		if k, ok := pub.(ed25519.PublicKey); ok && len(k) == ed25519.PublicKeySize {
			return nil
		}
	case ES256:
		if k, ok := pub.(*ecdsa.PublicKey); ok && k != nil && k.Curve == elliptic.P256() {
			return nil
		}
	case RS256:
		if k, ok := pub.(*rsa.PublicKey); ok && k != nil && k.N != nil {
			if bits := k.N.BitLen(); bits < minRSABits || bits > maxRSABits {
				return fail(ErrKeyMismatch, "RSA key of %d bits (want %d to %d)", bits, minRSABits, maxRSABits)
			}
			return nil
		}
	}
	return fail(ErrKeyMismatch, "%s cannot be verified with a %T", alg, pub)
}

// algorithmFor names the algorithm a key signs with.
func algorithmFor(pub crypto.PublicKey) (string, error) {
	for _, alg := range []string{EdDSA, ES256, RS256} {
		if checkKey(alg, pub) == nil {
			return alg, nil
		}
	}
	return "", fail(ErrKeyMismatch, "no supported algorithm for a %T key", pub)
}

// verifySignature checks sig over input. The caller has matched alg with
// the key (checkKey); the lengths are checked here again so that a mistake
// there cannot turn into a panic or an accepted signature.
func verifySignature(alg string, pub crypto.PublicKey, input string, sig []byte) bool {
	switch alg {
	case EdDSA:
		k, ok := pub.(ed25519.PublicKey)
		return ok && len(k) == ed25519.PublicKeySize && len(sig) == ed25519.SignatureSize &&
			ed25519.Verify(k, []byte(input), sig)
	case ES256:
		k, ok := pub.(*ecdsa.PublicKey)
		if !ok || k == nil || k.Curve != elliptic.P256() || len(sig) != 64 {
			return false
		}
		digest := sha256.Sum256([]byte(input))
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k, digest[:], r, s)
	case RS256:
		k, ok := pub.(*rsa.PublicKey)
		if !ok || checkKey(RS256, k) != nil || len(sig) != k.Size() {
			return false
		}
		digest := sha256.Sum256([]byte(input))
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) == nil
	}
	return false
}

// signCompact signs header (to which it adds alg) and payload with
// signer, whose public key picks the algorithm, and returns the compact
// JWS. Header members are serialized in sorted order.
func signCompact(signer crypto.Signer, header map[string]any, payload []byte, allowed []string) (string, error) {
	if signer == nil {
		return "", fail(ErrIssue, "no signer")
	}
	alg, err := algorithmFor(signer.Public())
	if err != nil {
		return "", failCause(ErrIssue, err, "signing key")
	}
	if !slices.Contains(allowed, alg) {
		return "", fail(ErrIssue, "%s keys cannot sign this kind of JWT", alg)
	}
	header["alg"] = alg
	hdr, err := json.Marshal(header)
	if err != nil {
		return "", failCause(ErrIssue, err, "header")
	}
	input := b64.EncodeToString(hdr) + "." + b64.EncodeToString(payload)
	var sig []byte
	switch alg {
	case EdDSA:
		sig, err = signer.Sign(rand.Reader, []byte(input), crypto.Hash(0))
	case ES256:
		digest := sha256.Sum256([]byte(input))
		var der []byte
		if der, err = signer.Sign(rand.Reader, digest[:], crypto.SHA256); err == nil {
			sig, err = rawECDSA(der)
		}
	case RS256:
		digest := sha256.Sum256([]byte(input))
		sig, err = signer.Sign(rand.Reader, digest[:], crypto.SHA256)
	}
	if err != nil {
		return "", failCause(ErrIssue, err, "%s signature", alg)
	}
	// Verify what was produced: a signer that does not follow the
	// crypto.Signer conventions (an HSM returning another encoding) must
	// fail here, not at every receiver.
	if !verifySignature(alg, signer.Public(), input, sig) {
		return "", fail(ErrIssue, "the signer produced a signature that does not verify")
	}
	return input + "." + b64.EncodeToString(sig), nil
}

// rawECDSA converts an ASN.1 DER ECDSA signature to the 64-byte R‖S of
// RFC 7518 §3.4.
func rawECDSA(der []byte) ([]byte, error) {
	var rs struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &rs)
	if err != nil || len(rest) != 0 || rs.R == nil || rs.S == nil ||
		rs.R.Sign() <= 0 || rs.S.Sign() <= 0 || rs.R.BitLen() > 256 || rs.S.BitLen() > 256 {
		return nil, fmt.Errorf("not a P-256 ECDSA signature in ASN.1 DER")
	}
	out := make([]byte, 64)
	rs.R.FillBytes(out[:32])
	rs.S.FillBytes(out[32:])
	return out, nil
}

// memberString returns member name of m as a string; present says
// whether the member exists at all.
func memberString(m map[string]any, name string) (value string, present, ok bool) {
	v, present := m[name]
	s, ok := v.(string)
	return s, present, ok
}

// checkCrit refuses a crit header: this package understands no JWS
// extension, and RFC 7515 §4.1.11 says a recipient that does not must
// reject the JWS.
func checkCrit(header map[string]any, what string) error {
	if _, ok := header["crit"]; ok {
		return fail(ErrMalformed, "%s header has 'crit': no JWS extension is supported", what)
	}
	return nil
}
