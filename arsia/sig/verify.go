package sig

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/custos-runtime/custos/internal/limits"
	"github.com/custos-runtime/custos/jcs"
	"github.com/go-jose/go-jose/v4"
)

// MaxEnvelopeBytes is the largest wire envelope DecodeEnvelope accepts: the
// ARSIA default max_message_bytes (1 MiB).
const MaxEnvelopeBytes = limits.MessageBytes

// DecodeEnvelope decodes a wire envelope strictly (RFC 8785 / I-JSON rules of
// package jcs: duplicate member names, invalid UTF-8 and non-interoperable
// numbers are refused; depth and size capped) into the generic form Verify
// takes. It only parses; nothing is verified.
func DecodeEnvelope(data []byte) (map[string]any, error) {
	if len(data) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("%w: envelope larger than %d bytes", ErrMalformed, MaxEnvelopeBytes)
	}
	v, err := decodeOptions.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	env, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: envelope is not a JSON object", ErrMalformed)
	}
	return env, nil
}

// decodeOptions decodes envelopes strictly, sharing the member names and
// values ARSIA envelopes repeat instead of allocating them for every message.
var decodeOptions = &jcs.Options{MaxSize: MaxEnvelopeBytes, Strings: envelopeStrings}

// envelopeStrings are the member names and values ARSIA envelopes repeat.
var envelopeStrings = jcs.NewStringTable(
	"v", "id", "ts", "from", "to", "intent", "correlation_id", "expires_at", "min_v",
	"capabilities", "idempotency", "context", "security", "compliance", "payload",
	"type", "version", "args", "result", "data", "explanation", "error", "code",
	"description", "details", "alg", "kid", "sig", "encrypted", "enc_alg", "enc_method",
	"key", "trace_id", "span_id", "flags", "locale", "priority", "profile",
	"data_residency", "audit_required", "retention_days", "human_oversight",
	"explainability_required", "pii_involved", "legal_basis", "ai_system_classification",
	"1.0", "request", "response", "event", "error", "pending_approval", "approval_decision",
	"EdDSA", "ES256", "RS256", "ECDH-ES", "A256GCM", "EU", "contract", "consent",
	"legal_obligation", "legitimate_interests", "not_required", "required_before_execution",
	"required_within_24h", "required_post_execution", "minimal-risk", "limited-risk",
	"high-risk", "GDPR-STANDARD", "EU-AI-ACT-HIGH-RISK", "EU-AI-ACT-LIMITED-RISK",
	"MIFID-II", "DORA", "DSA-VLOP", "PAC-AGRICULTURE",
)

// sharedDecodeOptions is decodeOptions for DecodeAndVerify, whose strings
// share one copy of the input.
var sharedDecodeOptions = &jcs.Options{MaxSize: MaxEnvelopeBytes, ShareInput: true, Strings: envelopeStrings}

// VerifyOptions is the verifier's policy.
type VerifyOptions struct {
	// Algorithms is the allow-list for security.alg, for example
	// []string{sig.EdDSA}. It is required: an empty list refuses every
	// envelope, so that no caller accepts an algorithm by omission. Only
	// EdDSA, ES256 and RS256 can ever pass.
	Algorithms []string
	// Now stamps Verified.At. Nil means time.Now. Signature checks do not
	// depend on time; expiry of the envelope is the envelope validator's
	// business and key freshness the KeySource's.
	Now func() time.Time
}

// Verified describes an envelope whose signature verified.
type Verified struct {
	// Envelope is a private deep copy of the envelope that was verified,
	// security included; later changes to the caller's map do not reach
	// it. For an encrypted envelope its payload is the JWE string.
	Envelope map[string]any
	// Payload is the payload object: Envelope's payload when it is an
	// object, the decrypted object after VerifyAndDecrypt, nil otherwise.
	Payload map[string]any
	// From is the sender's agent id, which the kid was checked against.
	From string
	// Algorithm and KeyID are security.alg and security.kid.
	Algorithm string
	KeyID     string
	// Key is the verification key the KeySource returned.
	Key *jose.JSONWebKey
	// Encrypted reports security.encrypted; EncAlg and EncMethod are the
	// declared JWE algorithms (unverified until VerifyAndDecrypt).
	Encrypted         bool
	EncAlg, EncMethod string
	// At is VerifyOptions.Now at verification.
	At time.Time
}

// security is a parsed security member.
type security struct {
	alg, kid, sig     string
	encrypted         bool
	encAlg, encMethod string
}

// parseSecurity checks the shape of env["security"]: an object with string
// alg, kid and sig, optional boolean encrypted and string enc_alg and
// enc_method (both required when encrypted is true), and nothing else.
func parseSecurity(env map[string]any) (security, error) {
	raw, present := env["security"]
	if !present {
		return security{}, fmt.Errorf("%w: no security member", ErrMalformed)
	}
	m, ok := raw.(map[string]any)
	if !ok || m == nil {
		return security{}, fmt.Errorf("%w: security is not an object", ErrMalformed)
	}
	var s security
	bad, hasBad := "", false
	for k, v := range m {
		var ok bool
		switch k {
		case secAlg:
			s.alg, ok = v.(string)
		case secKid:
			s.kid, ok = v.(string)
		case secSig:
			s.sig, ok = v.(string)
		case secEncrypted:
			s.encrypted, ok = v.(bool)
		case secEncAlg:
			s.encAlg, ok = v.(string)
		case secEncMethod:
			s.encMethod, ok = v.(string)
		}
		// Of several bad members the first in name order is named, so
		// that the message does not depend on map order.
		if !ok && (!hasBad || k < bad) {
			bad, hasBad = k, true
		}
	}
	if hasBad {
		return security{}, fmt.Errorf("%w: security member %q is unknown or of the wrong type", ErrMalformed, bad)
	}
	if s.alg == "" || s.kid == "" || s.sig == "" {
		return security{}, fmt.Errorf("%w: security needs alg, kid and sig", ErrMalformed)
	}
	if s.encrypted && (s.encAlg == "" || s.encMethod == "") {
		return security{}, fmt.Errorf("%w: encrypted envelope without enc_alg and enc_method", ErrMalformed)
	}
	return s, nil
}

// strictBase64 is unpadded base64url that refuses non-zero trailing bits.
var strictBase64 = base64.RawURLEncoding.Strict()

// decodeSigInto decodes unpadded base64url strictly — no padding, no '+' or
// '/', no line breaks (which encoding/base64 would skip), no non-zero
// trailing bits — writing into dst when it is large enough.
func decodeSigInto(dst []byte, s string) ([]byte, error) {
	if len(s) > maxSigChars {
		return nil, fmt.Errorf("%w: signature too long", ErrMalformed)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, fmt.Errorf("%w: signature is not unpadded base64url", ErrMalformed)
		}
	}
	if n := strictBase64.DecodedLen(len(s)); cap(dst) < n {
		dst = make([]byte, n)
	}
	n, err := strictBase64.Decode(dst[:cap(dst)], []byte(s))
	if err != nil {
		return nil, fmt.Errorf("%w: signature is not unpadded base64url", ErrMalformed)
	}
	return dst[:n], nil
}

// Verify checks the signature of an ARSIA envelope (ARSIA-Core §5.2) and
// returns what was verified. env is the generic decoded envelope (see
// DecodeEnvelope); it is not modified.
//
// The steps, each failing closed: security is present and well formed; alg
// is in opts.Algorithms; kid starts with the "from" agent id and "#"; sig is
// unpadded base64url of the length the algorithm needs; keys resolves kid;
// the key's type, curve, size, use and alg fit the algorithm; the signature
// verifies over SigningInput(env).
//
// Every error wraps one of the package's sentinels and satisfies
// errors.Is(err, ErrUnauthorized): reply "unauthorized" to the peer and keep
// the text for local logs.
func Verify(ctx context.Context, env map[string]any, keys KeySource, opts VerifyOptions) (*Verified, error) {
	if env == nil {
		return nil, fmt.Errorf("%w: nil envelope", ErrMalformed)
	}
	// Canonicalize and take a private copy in one walk, so that what is
	// verified is what the caller gets back, whatever happens to env
	// afterwards. The signing input lives in a pooled buffer: it does not
	// outlive this call and verifyRaw keeps nothing.
	buf := inputBuffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= 1<<20 {
			inputBuffers.Put(buf)
		}
	}()
	input, env, err := signingInputCopy((*buf)[:0], env, true)
	if err != nil {
		return nil, err
	}
	*buf = input
	return verifyInput(ctx, env, input, keys, opts)
}

// DecodeAndVerify is DecodeEnvelope followed by Verify, in one read of
// data: the signing input is taken from the decoder (copied from data when
// data is canonical, as a signer's output is) instead of being written
// again from the decoded envelope, and the decoded envelope, which nobody
// else holds, is returned as Verified.Envelope without a further copy. It
// accepts and refuses exactly what DecodeEnvelope and Verify together do,
// with the same errors.
//
// The strings of Verified.Envelope share one copy of data (see
// jcs.Options.ShareInput): whoever keeps one of them beyond the message's
// life should keep a strings.Clone of it.
func DecodeAndVerify(ctx context.Context, data []byte, keys KeySource, opts VerifyOptions) (*Verified, error) {
	if len(data) > MaxEnvelopeBytes {
		return nil, fmt.Errorf("%w: envelope larger than %d bytes", ErrMalformed, MaxEnvelopeBytes)
	}
	buf := inputBuffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= 1<<20 {
			inputBuffers.Put(buf)
		}
	}()
	v, input, err := sharedDecodeOptions.DecodeCanonical((*buf)[:0], data, "security")
	*buf = input
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	env, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: envelope is not a JSON object", ErrMalformed)
	}
	return verifyInput(ctx, env, input, keys, opts)
}

// verifyInput is Verify once the signing input of env is known; env is
// the caller's private copy.
func verifyInput(ctx context.Context, env map[string]any, input []byte, keys KeySource, opts VerifyOptions) (*Verified, error) {
	sec, err := parseSecurity(env)
	if err != nil {
		return nil, err
	}
	if err := checkAllowed(sec.alg, opts.Algorithms); err != nil {
		return nil, err
	}
	if err := checkKidPrefix(env, sec.kid); err != nil {
		return nil, err
	}
	var sigBuf [64]byte // EdDSA and ES256; RSA signatures get their own
	sigBytes, err := decodeSigInto(sigBuf[:0], sec.sig)
	if err != nil {
		return nil, err
	}
	if n := fixedSigLen(sec.alg); n != 0 && len(sigBytes) != n {
		return nil, fmt.Errorf("%w: %s signature of %d bytes, want %d", ErrMalformed, sec.alg, len(sigBytes), n)
	}
	jwk, err := resolve(ctx, keys, sec.kid)
	if err != nil {
		return nil, err
	}
	if err := checkJWK(jwk, sec.alg, sec.kid); err != nil {
		return nil, err
	}
	n, err := checkKey(sec.alg, jwk.Key)
	if err != nil {
		return nil, err
	}
	if len(sigBytes) != n {
		return nil, fmt.Errorf("%w: %s signature of %d bytes, key needs %d", ErrMalformed, sec.alg, len(sigBytes), n)
	}
	if !verifyRaw(sec.alg, jwk.Key, input, sigBytes) {
		return nil, fmt.Errorf("%w: kid %q", ErrBadSignature, sec.kid)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	from, _ := env["from"].(string)
	payload, _ := env["payload"].(map[string]any)
	return &Verified{
		Envelope: env, Payload: payload, From: from,
		Algorithm: sec.alg, KeyID: sec.kid, Key: jwk,
		Encrypted: sec.encrypted, EncAlg: sec.encAlg, EncMethod: sec.encMethod,
		At: now(),
	}, nil
}

// resolve asks keys for kid and makes sure any failure is one of ours.
func resolve(ctx context.Context, keys KeySource, kid string) (*jose.JSONWebKey, error) {
	if keys == nil {
		return nil, fmt.Errorf("%w: no key source", ErrKeySource)
	}
	jwk, err := keys.Key(ctx, kid)
	if err != nil {
		if errors.Is(err, ErrUnauthorized) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrKeySource, err)
	}
	if jwk == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKid, kid)
	}
	return jwk, nil
}

// checkJWK applies the JWK's own metadata: a key published for another kid,
// for encryption or for another algorithm is not used.
func checkJWK(jwk *jose.JSONWebKey, alg, kid string) error {
	switch {
	case jwk.KeyID != "" && jwk.KeyID != kid:
		return fmt.Errorf("%w: key source returned kid %q for %q", ErrKeyMismatch, jwk.KeyID, kid)
	case jwk.Use != "" && jwk.Use != "sig":
		return fmt.Errorf("%w: key use %q", ErrKeyMismatch, jwk.Use)
	case jwk.Algorithm != "" && jwk.Algorithm != alg:
		return fmt.Errorf("%w: key is for %q, envelope claims %s", ErrKeyMismatch, jwk.Algorithm, alg)
	}
	return nil
}

// verifyRaw checks a raw signature; checkKey has vetted pub and the length.
func verifyRaw(alg string, pub crypto.PublicKey, msg, sig []byte) bool {
	switch alg {
	case EdDSA:
		return ed25519.Verify(pub.(ed25519.PublicKey), msg, sig)
	case ES256:
		digest := sha256.Sum256(msg)
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(pub.(*ecdsa.PublicKey), digest[:], r, s)
	case RS256:
		digest := sha256.Sum256(msg)
		return rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, digest[:], sig) == nil
	}
	return false
}
