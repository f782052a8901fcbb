package state

import (
	"errors"
	"fmt"
	"strings"

	"github.com/custos-runtime/custos/arsia"
)

// Sentinel errors. Every error this package returns wraps one of them, so
// callers branch with errors.Is. Store errors are additionally an
// *arsia.Error carrying the wire code to answer with (see WireError).
var (
	ErrInvalidKey        = errors.New("state: invalid key")
	ErrReservedKey       = errors.New("state: reserved key prefix")
	ErrInvalidScope      = errors.New("state: invalid scope")
	ErrInvalidValue      = errors.New("state: value is not valid JSON")
	ErrValueTooLarge     = errors.New("state: value exceeds 1 MiB")
	ErrInvalidEntry      = errors.New("state: invalid state entry")
	ErrMissingLegalBasis = errors.New("state: legal_basis required")
	ErrResidency         = errors.New("state: data residency violation")
	ErrInvalidArgs       = errors.New("state: invalid operation arguments")
	ErrGlobalWrite       = errors.New("state: global scope is not writable by agents")
	ErrUnknownOperation  = errors.New("state: unknown operation")
	ErrUnknownProfile    = errors.New("state: unknown compliance profile")
	ErrInvalidRetention  = errors.New("state: invalid retention")
	ErrAudit             = errors.New("state: cannot build audit record")
	ErrForbidden         = errors.New("state: forbidden")
	ErrNotFound          = errors.New("state: not found")
	ErrConflict          = errors.New("state: version conflict")
	ErrSnapshot          = errors.New("state: snapshot unavailable")
	ErrStoreFull         = errors.New("state: store full")
)

// wireError builds the *arsia.Error of a store failure: code is the wire
// code, description English text safe to send, details the normative
// payload.error.details (may be nil), and err the cause for errors.Is.
func wireError(code string, err error, details map[string]any) *arsia.Error {
	return &arsia.Error{Code: code, Description: describe(err), Details: details, Err: err}
}

// describe turns "state: x: y" into "x: y" for the wire description.
func describe(err error) string {
	s := strings.TrimPrefix(err.Error(), "state: ")
	if s == "" {
		return "state operation failed"
	}
	return s
}

// WireError maps an error of this package to the *arsia.Error to send:
// errors that already are one are returned as they are, validation errors
// become invalid_request (payload_too_large for ErrValueTooLarge,
// forbidden for ErrReservedKey, ErrGlobalWrite and ErrForbidden) and
// anything else internal_error. It returns nil for nil.
func WireError(err error) *arsia.Error {
	if err == nil {
		return nil
	}
	var ae *arsia.Error
	if errors.As(err, &ae) {
		return ae
	}
	switch {
	case errors.Is(err, ErrValueTooLarge):
		return wireError(arsia.CodePayloadTooLarge, err, nil)
	case errors.Is(err, ErrReservedKey), errors.Is(err, ErrGlobalWrite), errors.Is(err, ErrForbidden):
		return wireError(arsia.CodeForbidden, err, map[string]any{"reason": describe(err)})
	case errors.Is(err, ErrMissingLegalBasis):
		return wireError(arsia.CodeInvalidRequest, err, map[string]any{"missing_legal_basis": true})
	case errors.Is(err, ErrNotFound):
		return wireError(arsia.CodeNotFound, err, nil)
	case errors.Is(err, ErrConflict):
		return wireError(arsia.CodeConflict, err, nil)
	case errors.Is(err, ErrStoreFull):
		return wireError(arsia.CodeServiceUnavailable, err, nil)
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrInvalidScope), errors.Is(err, ErrInvalidValue),
		errors.Is(err, ErrInvalidEntry), errors.Is(err, ErrResidency), errors.Is(err, ErrInvalidArgs),
		errors.Is(err, ErrUnknownOperation), errors.Is(err, ErrUnknownProfile),
		errors.Is(err, ErrInvalidRetention), errors.Is(err, ErrSnapshot):
		return wireError(arsia.CodeInvalidRequest, err, nil)
	}
	return &arsia.Error{Code: arsia.CodeInternalError, Description: "The state store failed to process the request.", Err: err}
}

// quote renders s for an error message, clipped so that hostile input
// cannot make messages huge.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "..."
	}
	return fmt.Sprintf("%q", s)
}
