package sig

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"errors"
	"fmt"
	"slices"

	"github.com/custos-runtime/custos/jcs"
	"github.com/go-jose/go-jose/v4"
)

// Payload encryption algorithms of ARSIA-Core §5.3 implemented here.
const (
	// ECDHES is direct ECDH-ES key agreement (RFC 7518 §4.6), the one
	// ARSIA recommends.
	ECDHES = "ECDH-ES"
	// ECDHESA256KW is ECDH-ES with AES-256 key wrap.
	ECDHESA256KW = "ECDH-ES+A256KW"
	// A256GCM is the only content encryption ARSIA defines.
	A256GCM = "A256GCM"
)

func supportedEncAlg(alg string) bool { return alg == ECDHES || alg == ECDHESA256KW }

// EncryptPayload returns a copy of env whose payload object is replaced by
// a JWE compact serialization (alg ECDH-ES or ECDH-ES+A256KW, enc A256GCM)
// of its canonical JSON, encrypted to recipient, and whose security member
// is {encrypted: true, enc_alg, enc_method: "A256GCM"}. Sign must follow:
// ARSIA encrypts first and signs the ciphertext.
//
// recipient is the receiver's EC P-256 key with "use": "enc", typically
// taken from its JWKS; its kid goes in the JWE header. env is not modified.
func EncryptPayload(env map[string]any, recipient *jose.JSONWebKey, alg string) (map[string]any, error) {
	if !supportedEncAlg(alg) {
		return nil, fmt.Errorf("sig: encryption algorithm %q not supported", alg)
	}
	if recipient == nil || recipient.Use != "enc" {
		return nil, errors.New(`sig: recipient must be a JWK with "use": "enc"`)
	}
	pub, ok := recipient.Public().Key.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, errors.New("sig: recipient must be an EC P-256 key")
	}
	if env == nil {
		return nil, fmt.Errorf("%w: nil envelope", ErrMalformed)
	}
	if sec, ok := env["security"].(map[string]any); ok && sec[secEncrypted] == true {
		return nil, errors.New("sig: payload is already encrypted")
	}
	payload, ok := env["payload"].(map[string]any)
	if !ok {
		return nil, errors.New("sig: payload is not a JSON object")
	}
	plaintext, err := jcs.CanonicalizeValue(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	enc, err := jose.NewEncrypter(jose.A256GCM, jose.Recipient{
		Algorithm: jose.KeyAlgorithm(alg), Key: pub, KeyID: recipient.KeyID,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("sig: %w", err)
	}
	obj, err := enc.Encrypt(plaintext)
	if err != nil {
		return nil, fmt.Errorf("sig: %w", err)
	}
	compact, err := obj.CompactSerialize()
	if err != nil {
		return nil, fmt.Errorf("sig: %w", err)
	}
	c, err := deepCopy(env)
	if err != nil {
		return nil, err
	}
	out := c.(map[string]any)
	out["payload"] = compact
	out["security"] = map[string]any{secEncrypted: true, secEncAlg: alg, secEncMethod: A256GCM}
	return out, nil
}

// DecryptOptions is the receiver's decryption policy.
type DecryptOptions struct {
	// Key is the receiver's private EC P-256 key ("use" "enc" or absent).
	Key *jose.JSONWebKey
	// Algorithms is the allow-list for enc_alg, such as
	// []string{sig.ECDHES}. Required: empty refuses everything.
	Algorithms []string
	// RequireKeyID refuses a JWE whose protected header does not name
	// Key's kid (ARSIA: the JWE header carries the recipient's kid); by
	// default a JWE without a kid is tried with Key.
	RequireKeyID bool
}

// VerifyAndDecrypt is the receiving procedure of ARSIA-Core §5.3: it
// verifies the signature first (Verify), and only then decrypts the JWE
// payload and requires the plaintext to be a JSON object, which it returns
// as Verified.Payload (Verified.Envelope keeps the JWE). An envelope that is
// not encrypted is refused; receivers that accept both should call Verify
// and, when Verified.Encrypted, Decrypt.
//
// Errors, all satisfying errors.Is(err, ErrUnauthorized), read:
//
//	sig: signature verification failed on encrypted envelope: ...
//	sig: JWE decryption failed: ...
//	sig: decrypted JWE plaintext is not valid JSON: ...
//	sig: decrypted JWE plaintext is not a JSON object (got array or primitive)
func VerifyAndDecrypt(ctx context.Context, env map[string]any, keys KeySource, vopts VerifyOptions, dopts DecryptOptions) (*Verified, error) {
	v, err := Verify(ctx, env, keys, vopts)
	if err != nil {
		return nil, fmt.Errorf("sig: signature verification failed on encrypted envelope: %w", err)
	}
	payload, err := Decrypt(v, dopts)
	if err != nil {
		return nil, err
	}
	v.Payload = payload
	return v, nil
}

// Decrypt decrypts the payload of an envelope Verify accepted. Taking a
// *Verified makes decrypting an unverified envelope impossible by accident.
func Decrypt(v *Verified, opts DecryptOptions) (map[string]any, error) {
	if v == nil || !v.Encrypted {
		return nil, fmt.Errorf("%w: envelope is not encrypted", ErrDecrypt)
	}
	jwe, ok := v.Envelope["payload"].(string)
	if !ok {
		return nil, fmt.Errorf("%w: encrypted payload is not a string", ErrDecrypt)
	}
	if !supportedEncAlg(v.EncAlg) || !slices.Contains(opts.Algorithms, v.EncAlg) {
		return nil, fmt.Errorf("%w: enc_alg %q not allowed", ErrDecrypt, v.EncAlg)
	}
	if v.EncMethod != A256GCM {
		return nil, fmt.Errorf("%w: enc_method %q not allowed", ErrDecrypt, v.EncMethod)
	}
	if opts.Key == nil || (opts.Key.Use != "" && opts.Key.Use != "enc") {
		return nil, fmt.Errorf("%w: no encryption key", ErrDecrypt)
	}
	priv, ok := opts.Key.Key.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: decryption key is not an EC P-256 private key", ErrDecrypt)
	}
	obj, err := jose.ParseEncryptedCompact(jwe,
		[]jose.KeyAlgorithm{jose.KeyAlgorithm(v.EncAlg)}, []jose.ContentEncryption{jose.A256GCM})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecrypt, err)
	}
	if _, zipped := obj.Header.ExtraHeaders[jose.HeaderKey("zip")]; zipped {
		return nil, fmt.Errorf("%w: compressed JWE refused", ErrDecrypt)
	}
	if opts.RequireKeyID && obj.Header.KeyID == "" {
		return nil, fmt.Errorf("%w: %w: the JWE header names no kid, not %q", ErrDecrypt, ErrWrongRecipient, opts.Key.KeyID)
	}
	if obj.Header.KeyID != "" && opts.Key.KeyID != "" && obj.Header.KeyID != opts.Key.KeyID {
		return nil, fmt.Errorf("%w: %w: JWE is for key %q", ErrDecrypt, ErrWrongRecipient, obj.Header.KeyID)
	}
	plaintext, err := obj.Decrypt(priv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecrypt, err)
	}
	doc, err := jcs.Decode(plaintext)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlaintextNotJSON, err)
	}
	payload, ok := doc.(map[string]any)
	if !ok {
		return nil, ErrPlaintextNotObject
	}
	return payload, nil
}
