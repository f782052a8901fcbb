package assets

import (
	"errors"
	"maps"

	"github.com/custos-runtime/custos/arsia"
)

// Sentinel errors. Every *Error and every error returned by this package
// wraps one of them, so callers branch with errors.Is.
var (
	// ErrInvalidAmount: an amount is not a finite JSON number, or is out
	// of range, zero or negative where a positive amount is required.
	ErrInvalidAmount = errors.New("assets: invalid amount")
	// ErrPrecision: an amount has more decimal places than its asset type
	// allows (§2).
	ErrPrecision = errors.New("assets: amount precision exceeds the asset type maximum")
	// ErrCurrencyCode: currency_or_unit is not an uppercase ISO 4217 code
	// (currency) or not a valid application-defined unit (other types).
	ErrCurrencyCode = errors.New("assets: invalid currency_or_unit")
	// ErrSchema: a document violates its JSON Schema.
	ErrSchema = errors.New("assets: schema violation")
	// ErrReceiptMismatch: a receipt does not answer its request.
	ErrReceiptMismatch = errors.New("assets: receipt does not match its request")
	// ErrReversal: a reversal precondition (§3.3) does not hold.
	ErrReversal = errors.New("assets: reversal precondition not met")
	// ErrReversalWindow: the T+1 / T+30 reversal window has expired.
	ErrReversalWindow = errors.New("assets: reversal window expired")
	// ErrEscrow: escrow conditions are invalid or an escrow message does
	// not apply.
	ErrEscrow = errors.New("assets: invalid escrow")
	// ErrEscrowTransition: the escrow state machine forbids a transition.
	ErrEscrowTransition = errors.New("assets: escrow transition not allowed")
	// ErrForbidden: the sender may not perform the operation (wire code
	// forbidden).
	ErrForbidden = errors.New("assets: forbidden")
	// ErrSeparationOfDuties: one token or agent would both initiate and
	// approve a transfer (§5.1.2).
	ErrSeparationOfDuties = errors.New("assets: separation of duties violated")
	// ErrSCA: PSD2 strong customer authentication factors are missing.
	ErrSCA = errors.New("assets: PSD2 strong customer authentication not satisfied")
	// ErrRiskLevel: a risk level is outside 0-10.
	ErrRiskLevel = errors.New("assets: risk level outside 0-10")
	// ErrDORAIncident: a DORA incident event cannot be built.
	ErrDORAIncident = errors.New("assets: invalid DORA incident")
	// ErrMiFIDRetention: retention is below the MiFID II floor (§6.1.2).
	ErrMiFIDRetention = errors.New("assets: MiFID II retention floor not met")
	// ErrMiFIDRecord: a MiFID II audit record cannot be built.
	ErrMiFIDRecord = errors.New("assets: invalid MiFID II audit record")
	// ErrAudit: an audit record cannot be built from the given fields.
	ErrAudit = errors.New("assets: invalid audit fields")
	// ErrNoClock: a time-dependent check was called without a time.
	ErrNoClock = errors.New("assets: current time not set")
)

// Error is one problem found by a validator. It carries the ARSIA wire
// code to answer with, so a receiver can turn it into an error envelope
// with ARSIA.
type Error struct {
	// Code is the wire error code: invalid_request, forbidden or conflict.
	Code string
	// Field is the JSON Pointer of the offending member ("/amount"), or ""
	// when the problem concerns the document as a whole.
	Field string
	// Message is an English description that may be sent to the peer.
	Message string
	// Details is payload.error.details (required for forbidden).
	Details map[string]any
	// Err is the sentinel; never sent.
	Err error
}

// Error returns "assets: <field>: <message>" (without the field part when
// Field is empty).
func (e *Error) Error() string {
	if e.Field != "" {
		return "assets: " + e.Field + ": " + e.Message
	}
	return "assets: " + e.Message
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// ARSIA returns the problem as an *arsia.Error, ready for
// arsia.NewError / Error.Object.
func (e *Error) ARSIA() *arsia.Error {
	return &arsia.Error{Code: e.Code, Description: e.Message, Details: maps.Clone(e.Details), Err: e}
}

// Join returns nil when errs is empty, and otherwise one error wrapping all
// of them (errors.Is and errors.As see each).
func Join(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// HasCode reports whether some error in errs carries the wire code.
func HasCode(errs []*Error, code string) bool {
	for _, e := range errs {
		if e.Code == code {
			return true
		}
	}
	return false
}

// problems accumulates *Errors.
type problems []*Error

func (p *problems) add(code, field string, sentinel error, msg string) *Error {
	e := &Error{Code: code, Field: field, Message: msg, Err: sentinel}
	*p = append(*p, e)
	return e
}

func (p *problems) invalid(field string, sentinel error, msg string) *Error {
	return p.add(arsia.CodeInvalidRequest, field, sentinel, msg)
}
