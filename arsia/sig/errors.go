package sig

// sigError is the type of every sentinel in this package. Each one reports
// itself as ErrUnauthorized to errors.Is, so a caller can map the whole
// family to the ARSIA error code "unauthorized" with one test.
type sigError struct{ msg string }

func (e *sigError) Error() string { return e.msg }

// Is makes every sentinel match ErrUnauthorized.
func (e *sigError) Is(target error) bool { return target == ErrUnauthorized }

// Errors returned by this package. Every verification failure wraps one of
// them with %w and also satisfies errors.Is(err, ErrUnauthorized).
//
// All of them map to the ARSIA error code "unauthorized" (ARSIA-Core §5.2).
// The caller does that mapping; it must not send err.Error() to the remote
// peer, whose only business is that the envelope was refused. The text, which
// may name the kid or the reason, is meant for local logs.
var (
	// ErrUnauthorized is matched by every error of this package.
	ErrUnauthorized error = &sigError{"sig: unauthorized"}

	// ErrMalformed: the envelope or its security member does not have the
	// required shape (security not an object, missing or non-string alg,
	// kid or sig, unknown security members, signature not strict unpadded
	// base64url or of the wrong length, envelope not canonicalizable).
	ErrMalformed error = &sigError{"sig: malformed envelope"}

	// ErrAlgorithmNotAllowed: security.alg is not in the caller's
	// allow-list, the allow-list is empty, or the algorithm is not one of
	// EdDSA, ES256 and RS256 ("none" and HS256 never are).
	ErrAlgorithmNotAllowed error = &sigError{"sig: algorithm not allowed"}

	// ErrKidPrefix: the kid does not start with the envelope's "from" agent
	// id followed by "#" and a non-empty label.
	ErrKidPrefix error = &sigError{`sig: kid does not start with the sender's agent id and "#"`}

	// ErrUnknownKid: the key source has no usable verification key with
	// this kid (also returned when a key set lists the kid twice).
	ErrUnknownKid error = &sigError{"sig: unknown kid"}

	// ErrRevokedKey: the kid was published once and has been removed from
	// a later copy of the key set, which ARSIA defines as revocation.
	ErrRevokedKey error = &sigError{"sig: revoked key"}

	// ErrKeyMismatch: the resolved key cannot be used with the algorithm
	// (wrong key type or curve, RSA key under 2048 bits, "use" other than
	// "sig", or a JWK "alg" that names another algorithm).
	ErrKeyMismatch error = &sigError{"sig: key does not match the algorithm"}

	// ErrBadSignature: the signature does not verify over the canonical
	// envelope.
	ErrBadSignature error = &sigError{"sig: bad signature"}

	// ErrKeySource: the key source could not produce a key set (network
	// failure, non-200 status, oversized or invalid JWKS, discovery
	// metadata for another agent). Transient, but still fails closed.
	ErrKeySource error = &sigError{"sig: key source unavailable"}

	// ErrDecrypt: the JWE payload could not be decrypted, or the plaintext
	// is not a JSON object. See VerifyAndDecrypt for the wording.
	ErrDecrypt error = &sigError{"sig: JWE decryption failed"}

	// ErrWrongRecipient, with ErrDecrypt: the JWE header names another key
	// than the receiver's (or none, with DecryptOptions.RequireKeyID).
	ErrWrongRecipient error = &sigError{"sig: the JWE is not for this key"}
)

// Errors of VerifyAndDecrypt after the JWE decrypted. They, too, map to
// "unauthorized".
var (
	ErrPlaintextNotJSON   error = &sigError{"sig: decrypted JWE plaintext is not valid JSON"}
	ErrPlaintextNotObject error = &sigError{"sig: decrypted JWE plaintext is not a JSON object (got array or primitive)"}
)
