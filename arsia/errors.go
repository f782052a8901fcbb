package arsia

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Sentinel errors. Every error this package returns wraps one of them, so
// callers branch with errors.Is; the *Error that carries them says which
// ARSIA code to answer with.
var (
	ErrInvalidAgentID          = errors.New("arsia: invalid agent identifier")
	ErrInvalidCapability       = errors.New("arsia: invalid capability")
	ErrReservedCapability      = errors.New("arsia: reserved capability prefix misused")
	ErrNoEffectiveCapabilities = errors.New("arsia: no requested capability is granted")
	ErrRiskLevel               = errors.New("arsia: risk level outside 0-10")
	ErrInvalidVersion          = errors.New("arsia: invalid protocol version")
	ErrUnsupportedVersion      = errors.New("arsia: unsupported protocol version")
	ErrUnknownErrorCode        = errors.New("arsia: unknown error code")
	ErrRetryAttempt            = errors.New("arsia: retry attempt out of range")
	ErrInvalidEnvelope         = errors.New("arsia: invalid envelope")
	ErrInvalidTimestamp        = errors.New("arsia: invalid timestamp")
	ErrDecisionAfterEnvelope   = errors.New("arsia: explanation decision_timestamp is after the envelope ts")
	ErrNoClock                 = errors.New("arsia: build time not set")
	ErrInvalidBuild            = errors.New("arsia: cannot build envelope")
)

// The 14 standard wire error codes (Core §11.2, Identity §6.4.3).
const (
	CodeInvalidRequest      = "invalid_request"
	CodeUnauthorized        = "unauthorized"
	CodeForbidden           = "forbidden"
	CodeNotFound            = "not_found"
	CodeConflict            = "conflict"
	CodePayloadTooLarge     = "payload_too_large"
	CodeRateLimited         = "rate_limited"
	CodeInternalError       = "internal_error"
	CodeNotImplemented      = "not_implemented"
	CodeServiceUnavailable  = "service_unavailable"
	CodeCertificateInvalid  = "certificate_invalid"
	CodeCertificateExpired  = "certificate_expired"
	CodeKeyMismatch         = "key_mismatch"
	CodeCertificateRevoked  = "certificate_revoked"
	errorPayloadTypeDefault = "org.arsiaprotocol.error"
)

// ErrorInfo describes one standard wire error code.
type ErrorInfo struct {
	Code       string
	HTTPStatus int
	// Retryable is the registry default: retry internal_error and
	// service_unavailable with RetryDelay, rate_limited after Retry-After.
	Retryable bool
	// RequiredDetails are the members payload.error.details must carry;
	// DetailsRequired says details must be present even when no member is
	// named (forbidden: which depends on why access was refused).
	RequiredDetails []string
	DetailsRequired bool
	// Description is a generic English description, safe to send.
	Description string
}

var wireErrors = []ErrorInfo{
	{Code: CodeInvalidRequest, HTTPStatus: 400, Description: "The request is malformed or violates the protocol."},
	{Code: CodeUnauthorized, HTTPStatus: 401, Description: "The sender could not be authenticated."},
	{Code: CodeForbidden, HTTPStatus: 403, DetailsRequired: true, Description: "The sender is not allowed to perform this action."},
	{Code: CodeNotFound, HTTPStatus: 404, Description: "The requested resource or action does not exist."},
	{Code: CodeConflict, HTTPStatus: 409, Description: "The request conflicts with the current state."},
	{Code: CodePayloadTooLarge, HTTPStatus: 413, Description: "The message exceeds the maximum accepted size."},
	{Code: CodeRateLimited, HTTPStatus: 429, Retryable: true, Description: "Too many requests; retry after the indicated delay."},
	{Code: CodeInternalError, HTTPStatus: 500, Retryable: true, Description: "The receiver failed to process the request."},
	{Code: CodeNotImplemented, HTTPStatus: 501, RequiredDetails: []string{"supported_versions"}, DetailsRequired: true, Description: "The requested version, action or payload type is not supported."},
	{Code: CodeServiceUnavailable, HTTPStatus: 503, Retryable: true, Description: "The service is temporarily unavailable."},
	{Code: CodeCertificateInvalid, HTTPStatus: 401, RequiredDetails: []string{"reason"}, DetailsRequired: true, Description: "The sender certificate is invalid."},
	{Code: CodeCertificateExpired, HTTPStatus: 401, RequiredDetails: []string{"reason"}, DetailsRequired: true, Description: "The sender certificate has expired."},
	{Code: CodeKeyMismatch, HTTPStatus: 401, RequiredDetails: []string{"reason"}, DetailsRequired: true, Description: "The signing key does not match the sender certificate."},
	{Code: CodeCertificateRevoked, HTTPStatus: 401, RequiredDetails: []string{"reason"}, DetailsRequired: true, Description: "The sender certificate has been revoked."},
}

// WireErrorCodes returns the 14 standard wire error codes in registry order.
func WireErrorCodes() []string {
	out := make([]string, len(wireErrors))
	for i, e := range wireErrors {
		out[i] = e.Code
	}
	return out
}

// LookupError returns the registry entry of a standard wire error code.
// Custom reverse-domain codes are not in the registry.
func LookupError(code string) (ErrorInfo, bool) {
	for _, e := range wireErrors {
		if e.Code == code {
			e.RequiredDetails = slices.Clone(e.RequiredDetails)
			return e, true
		}
	}
	return ErrorInfo{}, false
}

// ErrorInfoFor is LookupError that fails (ErrUnknownErrorCode) for a code
// outside the registry.
func ErrorInfoFor(code string) (ErrorInfo, error) {
	info, ok := LookupError(code)
	if !ok {
		return ErrorInfo{}, fmt.Errorf("%w: %s", ErrUnknownErrorCode, pyRepr(code))
	}
	return info, nil
}

var customErrorCode = regexp.MustCompile(`^[a-z][a-z0-9]*(\.[a-z][a-z0-9-]*)+$`)

// IsCustomErrorCode reports whether code is an application code in
// reverse-domain form, such as com.example.insufficient-funds.
func IsCustomErrorCode(code string) bool {
	return len(code) <= 256 && customErrorCode.MatchString(code)
}

// ValidWireErrorCode reports whether code may appear in payload.error.code:
// a standard code or a custom reverse-domain code.
func ValidWireErrorCode(code string) bool {
	_, ok := LookupError(code)
	return ok || IsCustomErrorCode(code)
}

// CheckErrorDetails reports the first normative details member missing for
// a standard code (Core §11.2): forbidden needs details, not_implemented
// needs supported_versions{min,max}, the certificate codes need reason.
// Custom codes have no requirements.
func CheckErrorDetails(code string, details map[string]any) error {
	info, ok := LookupError(code)
	if !ok {
		if IsCustomErrorCode(code) {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrUnknownErrorCode, pyRepr(code))
	}
	if info.DetailsRequired && len(details) == 0 {
		return fmt.Errorf("%w: %s requires details", ErrInvalidEnvelope, code)
	}
	for _, k := range info.RequiredDetails {
		if _, ok := details[k]; !ok {
			return fmt.Errorf("%w: %s requires details.%s", ErrInvalidEnvelope, code, k)
		}
	}
	if code == CodeNotImplemented {
		sv, _ := details["supported_versions"].(map[string]any)
		if _, ok := sv["min"]; !ok {
			return fmt.Errorf("%w: not_implemented requires details.supported_versions.min", ErrInvalidEnvelope)
		}
		if _, ok := sv["max"]; !ok {
			return fmt.Errorf("%w: not_implemented requires details.supported_versions.max", ErrInvalidEnvelope)
		}
	}
	return nil
}

// Retry policy of Core §11.3.
const (
	RetryBase       = time.Second
	RetryCap        = 32 * time.Second
	MaxRetries      = 3
	RetryJitterLow  = 0.75
	RetryJitterHigh = 1.25
)

// RetryDelay is the delay before retry number attempt (1-based) of an
// internal_error or service_unavailable: 1 s, 2 s, 4 s. Attempts outside
// 1..MaxRetries fail with ErrRetryAttempt: the caller has given up. Jitter
// (×[0.75,1.25]) is the caller's, so this stays deterministic.
func RetryDelay(attempt int) (time.Duration, error) {
	if attempt < 1 || attempt > MaxRetries {
		return 0, fmt.Errorf("%w: attempt %d not in 1..%d", ErrRetryAttempt, attempt, MaxRetries)
	}
	return RetryBase << (attempt - 1), nil
}

// RoutingRetryDelay is the delivery back-off of ARSIA-Routing: min(2^(n-1),
// 32) seconds for attempt n ≥ 1, with no attempt limit of its own.
func RoutingRetryDelay(attempt int) (time.Duration, error) {
	if attempt < 1 {
		return 0, fmt.Errorf("%w: attempt %d is not positive", ErrRetryAttempt, attempt)
	}
	if attempt > 6 {
		return RetryCap, nil
	}
	return min(RetryBase<<(attempt-1), RetryCap), nil
}

// Error is an ARSIA error as a Go value. Code is a standard wire code, a
// custom reverse-domain code, or one of this package's internal validation
// codes (see WireCode and ToASC); Description is English text that may be
// sent to the peer; Details is payload.error.details. Err is the cause, for
// errors.Is and logs, and is never sent.
type Error struct {
	Code        string
	Description string
	Details     map[string]any
	Err         error
}

// Error returns "arsia: <code>: <description>".
func (e *Error) Error() string {
	msg := "arsia: " + e.Code
	switch {
	case e.Description != "":
		msg += ": " + e.Description
	case e.Err != nil:
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// WireCode is the code to put in payload.error.code: see the package-level
// WireCode.
func (e *Error) WireCode() string { return WireCode(e.Code) }

// HTTPStatus is the HTTP status of the wire code (500 for a custom code).
func (e *Error) HTTPStatus() int {
	if info, ok := LookupError(e.WireCode()); ok {
		return info.HTTPStatus
	}
	return 500
}

// Object returns the payload.error object {code, description, details?}
// with the wire code. For unauthorized and the certificate codes the
// description is the registry's generic text, so that no verification
// detail leaks (Core §5.2).
func (e *Error) Object() map[string]any {
	code := e.WireCode()
	desc := e.Description
	info, known := LookupError(code)
	if desc == "" || (known && info.HTTPStatus == 401 && code != e.Code) {
		if known {
			desc = info.Description
		} else {
			desc = "The request failed."
		}
	}
	obj := map[string]any{"code": code, "description": desc}
	if e.Details != nil {
		obj["details"] = e.Details
	}
	return obj
}

// newError builds an *Error for an internal code.
func newError(code string, sentinel error, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...), Err: sentinel}
}
