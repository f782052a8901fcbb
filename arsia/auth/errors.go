package auth

import (
	"errors"
	"fmt"
	"github.com/custos-runtime/custos/internal/pyrepr"
	"strings"

	"github.com/custos-runtime/custos/arsia"
)

// Sentinel errors. Every error this package returns wraps exactly one of
// them, so callers branch with errors.Is. The text of a returned error says
// what was wrong and may quote the token; it is for local logs. What to
// send to the peer is ArsiaError's business.
var (
	// ErrMalformed: the JWT is not a compact JWS this package can decode
	// (size, part count, base64url, JSON, duplicate member names, an
	// unsupported critical header).
	ErrMalformed = errors.New("auth: malformed JWT")
	// ErrTokenType: the typ header is missing or names another kind of JWT
	// (an access token presented as a DPoP proof, or the reverse).
	ErrTokenType = errors.New("auth: wrong JWT type")
	// ErrAlgorithmNotAllowed: the alg header is not in the allow-list.
	ErrAlgorithmNotAllowed = errors.New("auth: algorithm not allowed")
	// ErrUnknownKey: no verification key could be resolved for the kid.
	ErrUnknownKey = errors.New("auth: verification key not found")
	// ErrKeyMismatch: the key cannot be used with the token's algorithm.
	ErrKeyMismatch = errors.New("auth: key does not match the algorithm")
	// ErrBadSignature: the signature does not verify.
	ErrBadSignature = errors.New("auth: bad signature")
	// ErrMissingClaim: a required claim is absent.
	ErrMissingClaim = errors.New("auth: missing required claim")
	// ErrInvalidClaim: a claim has the wrong type or format.
	ErrInvalidClaim = errors.New("auth: invalid claim")
	// ErrExpired: now is past exp plus the clock skew.
	ErrExpired = errors.New("auth: token expired")
	// ErrNotYetValid: iat or nbf is later than now plus the clock skew.
	ErrNotYetValid = errors.New("auth: token not yet valid")
	// ErrIssuer: iss is not the expected authorization server.
	ErrIssuer = errors.New("auth: issuer mismatch")
	// ErrSubject: sub is not the envelope's sender.
	ErrSubject = errors.New("auth: subject mismatch")
	// ErrAudience: aud does not name the envelope's recipient.
	ErrAudience = errors.New("auth: audience mismatch")
	// ErrInsufficientScope: the token is otherwise valid but its scope
	// does not cover the requested capabilities. The error is a
	// *ScopeError.
	ErrInsufficientScope = errors.New("auth: insufficient scope")
	// ErrInvalidJWK: a JWK lacks required members, carries private key
	// material or does not describe a usable public key.
	ErrInvalidJWK = errors.New("auth: invalid JWK")
	// ErrDPoPMethod: the proof's htm is not the request method.
	ErrDPoPMethod = errors.New("auth: DPoP htm mismatch")
	// ErrDPoPURL: the proof's htu is not the request URL.
	ErrDPoPURL = errors.New("auth: DPoP htu mismatch")
	// ErrDPoPTime: the proof's iat is outside now ± skew.
	ErrDPoPTime = errors.New("auth: DPoP iat outside the accepted window")
	// ErrDPoPTokenHash: the proof's ath is not the hash of the access
	// token it travels with.
	ErrDPoPTokenHash = errors.New("auth: DPoP ath mismatch")
	// ErrReplay: the proof's jti has been used before.
	ErrReplay = errors.New("auth: DPoP proof replay")
	// ErrDPoPBinding: the proof is signed by another key than the one the
	// token's cnf.jkt names, or the token is not DPoP-bound at all.
	ErrDPoPBinding = errors.New("auth: DPoP key does not match the token binding")
	// ErrDPoPRequired: a DPoP-bound token (one with cnf.jkt) was presented
	// as a bearer token.
	ErrDPoPRequired = errors.New("auth: DPoP-bound token presented without a proof")
	// ErrReplayCache: the replay cache could not record a jti (backend
	// failure, cancelled context, or full). The proof is refused.
	ErrReplayCache = errors.New("auth: replay cache unavailable")
	// ErrReplayCacheFull: a bounded replay cache has no room left for an
	// unexpired entry. It refuses rather than forget a jti that could
	// still be replayed.
	ErrReplayCacheFull = errors.New("auth: replay cache full")
	// ErrInvalidOptions: the caller's options are unusable (no Now, an
	// algorithm that is never allowed, no expected subject...). This is a
	// bug on the receiving side, not a verdict on the token.
	ErrInvalidOptions = errors.New("auth: invalid options")
	// ErrIssue: IssueAccessToken or NewDPoPProof refused to sign.
	ErrIssue = errors.New("auth: cannot issue JWT")
)

// problem is one finding: a sentinel for errors.Is, the human-readable
// text in the reference SDK's wording, and an optional cause for logs.
type problem struct {
	kind  error
	msg   string
	cause error
}

func (p *problem) Error() string {
	if p.cause != nil {
		return "auth: " + p.msg + ": " + p.cause.Error()
	}
	return "auth: " + p.msg
}

func (p *problem) Unwrap() []error {
	if p.cause != nil {
		return []error{p.kind, p.cause}
	}
	return []error{p.kind}
}

func fail(kind error, format string, args ...any) error {
	return &problem{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func failCause(kind, cause error, format string, args ...any) error {
	return &problem{kind: kind, msg: fmt.Sprintf(format, args...), cause: cause}
}

// ScopeError reports capabilities a token's scope does not grant. It
// matches ErrInsufficientScope.
type ScopeError struct {
	// Required are the capabilities the request asked for, in order.
	Required []string
	// Granted are the token's scope entries.
	Granted []string
	// Missing are the required capabilities not granted, in request
	// order, without repeats.
	Missing []string
}

// Error uses the reference SDK's wording, with the missing list as a
// Python list literal: "token scope does not cover required capabilities:
// missing=['notes.write']".
func (e *ScopeError) Error() string {
	quoted := make([]string, len(e.Missing))
	for i, m := range e.Missing {
		quoted[i] = pyRepr(m)
	}
	return "auth: token scope does not cover required capabilities: missing=[" + strings.Join(quoted, ", ") + "]"
}

// Is makes a *ScopeError match ErrInsufficientScope.
func (e *ScopeError) Is(target error) bool { return target == ErrInsufficientScope }

// ArsiaError turns the errors of ValidateAccessToken, ValidateDPoP,
// VerifyDPoPBinding or CheckBearer into the ARSIA error to answer with,
// or nil when errs holds no error.
//
//   - Any authentication failure (bad or missing token or proof, wrong
//     key, expired, wrong sub or aud, replay, binding) gives
//     "unauthorized" with a generic description and no details, as Core
//     §5.2 and §6.4 ask: the peer learns nothing about which check failed.
//   - Insufficient scope on an otherwise valid token gives "forbidden"
//     with the normative details {required_capabilities,
//     provided_capabilities} (Core §6.4 step 5, §11.2): the sender is
//     known, it is just not allowed to do this.
//   - A replay cache that cannot record the proof gives
//     "service_unavailable", which the peer may retry; options the
//     receiver got wrong give "internal_error".
//
// The errors themselves travel in Err, for logs.
func ArsiaError(errs ...error) *arsia.Error {
	var (
		joined                        = errors.Join(errs...)
		scope                         *ScopeError
		unauthorized, infra, internal bool
	)
	if joined == nil {
		return nil
	}
	for _, err := range errs {
		var se *ScopeError
		switch {
		case err == nil:
		case errors.As(err, &se):
			if scope == nil {
				scope = se // later ones describe the same token
			}
		case errors.Is(err, ErrInvalidOptions):
			internal = true
		case errors.Is(err, ErrReplayCache), errors.Is(err, ErrReplayCacheFull):
			infra = true
		default:
			unauthorized = true
		}
	}
	switch {
	case unauthorized:
		return &arsia.Error{Code: arsia.CodeUnauthorized,
			Description: "The access token or DPoP proof was not accepted.", Err: joined}
	case internal:
		return &arsia.Error{Code: arsia.CodeInternalError,
			Description: "The receiver failed to process the request.", Err: joined}
	case infra:
		return &arsia.Error{Code: arsia.CodeServiceUnavailable,
			Description: "The request cannot be authorized right now; retry later.", Err: joined}
	}
	return &arsia.Error{
		Code:        arsia.CodeForbidden,
		Description: "The access token does not grant the requested capabilities.",
		Details: map[string]any{
			"required_capabilities": anyStrings(scope.Required),
			"provided_capabilities": anyStrings(scope.Granted),
		},
		Err: joined,
	}
}

func anyStrings(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// maxQuoted bounds how much of an untrusted value an error message
// repeats, so that a large claim does not become a large log line.
const maxQuoted = 200

// pyRepr quotes s as Python's repr does for str, which is the form the
// conformance suites search for ('jti', missing=['notes.write']). Values
// longer than maxQuoted runes are cut and marked with "...".
func pyRepr(s string) string { return pyrepr.Clipped(s, maxQuoted) }
