// Package sig signs and verifies ARSIA envelopes (ARSIA-Core §5) and
// encrypts their payloads (§5.3).
//
// An ARSIA envelope is a JSON object exchanged between AI agents. Its
// signature covers the RFC 8785 canonical form (package jcs) of the whole
// envelope minus its "security" member, which then carries
//
//	{"alg": "EdDSA", "kid": "agent:acme.billing#key-1", "sig": "<base64url>"}
//
// The package works on the generic decoded envelope (map[string]any with
// json.Number numbers, as DecodeEnvelope or jcs.Decode produce) and never
// re-encodes a Go struct, which would silently change the signed bytes. It
// does not validate the envelope otherwise; that is the envelope
// validator's job.
//
// # Signing
//
// Sign takes a Signer (NewEd25519Signer, NewES256Signer, NewSigner for any
// crypto.Signer, NewSignerFromJWK) and a kid, which must be the sender's
// agent id ("from"), "#" and a label. EdDSA (Ed25519) is the ARSIA default;
// ES256 signatures are raw R‖S, 64 bytes; RS256 is PKCS #1 v1.5 on RSA keys
// of 2048 to 4096 bits.
//
// # Verifying
//
// Decoding and verifying are separate steps: DecodeEnvelope parses wire
// bytes strictly, Verify checks a decoded envelope against an algorithm
// allow-list the caller must supply (VerifyOptions.Algorithms; "none",
// HS256 and unknown names are always refused) and a KeySource that maps
// kids to public keys. The key's type must match the algorithm, so a key
// published for one algorithm cannot be used to accept another.
//
// A receiver holding wire bytes can do both in one read with
// DecodeAndVerify: it accepts and refuses exactly what the two steps do,
// takes the signing input from the decoder (the received bytes themselves
// when they are canonical, as a signer's output is) and skips Verify's deep
// copy, so that it costs little more than the Ed25519 check for small
// envelopes.
//
// Key sources: StaticJWKS (a fixed set), JWKSFile (a file reloaded when it
// changes), HTTPJWKS (a URL, cached per Cache-Control and ETag, refreshed
// on unknown kids at most every 30 s, treating a kid removed from the set
// as revoked) and Discovery (an agent's /.well-known/arsia metadata leading
// to its JWKS).
//
// # Errors
//
// Every failure wraps a sentinel (ErrMalformed, ErrAlgorithmNotAllowed,
// ErrKidPrefix, ErrUnknownKid, ErrRevokedKey, ErrKeyMismatch,
// ErrBadSignature, ErrKeySource, ErrDecrypt, ...) and satisfies
// errors.Is(err, ErrUnauthorized). ARSIA answers all of them with the
// error code "unauthorized" and no detail; mapping the code is the
// caller's job, and the error text is for local logs only.
//
// # Encryption
//
// EncryptPayload replaces the payload with a JWE (ECDH-ES or
// ECDH-ES+A256KW, A256GCM, EC P-256 recipient) before Sign; the receiver's
// VerifyAndDecrypt verifies first, then decrypts and requires a JSON
// object.
package sig
