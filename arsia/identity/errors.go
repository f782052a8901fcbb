package identity

import (
	"errors"
	"fmt"

	"github.com/custos-runtime/custos/arsia"
)

// Sentinel errors. Certificate failures come as an *arsia.Error whose Code
// is one of the four certificate codes and whose Err wraps the matching
// sentinel, so callers may branch with errors.Is or errors.As.
var (
	ErrMalformedPEM       = errors.New("identity: malformed PEM certificate")
	ErrCertificateInvalid = errors.New("identity: certificate invalid")
	ErrCertificateExpired = errors.New("identity: certificate expired")
	ErrKeyMismatch        = errors.New("identity: signing key does not match the certificate")
	ErrCertificateRevoked = errors.New("identity: certificate revoked")
	ErrInvalidOptions     = errors.New("identity: invalid verify options")
	ErrInvalidRecord      = errors.New("identity: invalid identity record")
	ErrIdentityMismatch   = errors.New("identity: identity layers disagree")
	ErrRecordExpired      = errors.New("identity: identity record outside its validity")
	ErrInvalidTrustLevel  = errors.New("identity: invalid trust level")
	ErrInvalidPolicy      = errors.New("identity: invalid trust policy")
	ErrInsufficientTrust  = errors.New("identity: trust level below the required minimum")
)

// certError builds the wire error for a certificate failure. reason goes to
// the peer in details.reason (Identity §6.4.3 requires it), so it names what
// failed in generic terms; cause, which may hold parser or x509 detail, is
// kept for local logs only.
func certError(code string, sentinel error, reason string, cause error) *arsia.Error {
	info, _ := arsia.LookupError(code)
	err := fmt.Errorf("%w: %s", sentinel, reason)
	if cause != nil {
		err = fmt.Errorf("%w: %s: %w", sentinel, reason, cause)
	}
	return &arsia.Error{
		Code:        code,
		Description: info.Description,
		Details:     map[string]any{"reason": reason},
		Err:         err,
	}
}
