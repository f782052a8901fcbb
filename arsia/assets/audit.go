package assets

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/arsia"
)

// AuditEventType is the event_type of every Assets audit record.
const AuditEventType = "asset_transfer"

// EscrowAuditKind is the sub_type of an escrow audit record (§4.3).
type EscrowAuditKind string

// The four escrow audit records, one per lifecycle transition.
const (
	EscrowCreated  EscrowAuditKind = "escrow_created"  // §4.3.1, receipt "escrowed"
	EscrowReleased EscrowAuditKind = "escrow_released" // §4.3.2, ESCROWED → RELEASED
	EscrowReturned EscrowAuditKind = "escrow_returned" // §4.3.3, → RETURNED (timeout or cancel)
	EscrowDisputed EscrowAuditKind = "escrow_disputed" // §4.3.4, ESCROWED → DISPUTED
)

// escrowAuditMembers lists, per kind, the required members besides
// event_type, sub_type, audit_id and timestamp, then the optional ones.
var escrowAuditMembers = map[EscrowAuditKind]struct{ required, optional []string }{
	EscrowCreated:  {required: []string{"payment_reference", "amount", "currency_or_unit", "from_agent", "to_agent", "release_agent", "timeout_at"}},
	EscrowReleased: {required: []string{"payment_reference", "released_by", "release_trigger", "original_audit_id"}},
	EscrowReturned: {required: []string{"payment_reference", "timeout_at", "actual_timeout", "original_audit_id"},
		optional: []string{"cancellation_reason"}},
	EscrowDisputed: {required: []string{"payment_reference", "disputed_by", "dispute_reason", "arbitration_agent", "original_audit_id"}},
}

// EscrowAuditFields are the inputs of every escrow audit record; each kind
// uses its own subset (see BuildEscrowAudit). The JSON names are the
// record's member names.
type EscrowAuditFields struct {
	AuditID            string  `json:"audit_id,omitempty"`
	Timestamp          string  `json:"timestamp,omitempty"`
	PaymentReference   string  `json:"payment_reference,omitempty"`
	Amount             *Amount `json:"amount,omitempty"`
	CurrencyOrUnit     string  `json:"currency_or_unit,omitempty"`
	FromAgent          string  `json:"from_agent,omitempty"`
	ToAgent            string  `json:"to_agent,omitempty"`
	ReleaseAgent       string  `json:"release_agent,omitempty"`
	TimeoutAt          string  `json:"timeout_at,omitempty"`
	ReleasedBy         string  `json:"released_by,omitempty"`
	ReleaseTrigger     string  `json:"release_trigger,omitempty"`
	OriginalAuditID    string  `json:"original_audit_id,omitempty"`
	ActualTimeout      string  `json:"actual_timeout,omitempty"`
	CancellationReason string  `json:"cancellation_reason,omitempty"`
	DisputedBy         string  `json:"disputed_by,omitempty"`
	DisputeReason      string  `json:"dispute_reason,omitempty"`
	ArbitrationAgent   string  `json:"arbitration_agent,omitempty"`
}

// set returns the members that are set, by record name.
func (f EscrowAuditFields) set() map[string]any {
	m := map[string]any{}
	put := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	put("payment_reference", f.PaymentReference)
	put("currency_or_unit", f.CurrencyOrUnit)
	put("from_agent", f.FromAgent)
	put("to_agent", f.ToAgent)
	put("release_agent", f.ReleaseAgent)
	put("timeout_at", f.TimeoutAt)
	put("released_by", f.ReleasedBy)
	put("release_trigger", f.ReleaseTrigger)
	put("original_audit_id", f.OriginalAuditID)
	put("actual_timeout", f.ActualTimeout)
	put("cancellation_reason", f.CancellationReason)
	put("disputed_by", f.DisputedBy)
	put("dispute_reason", f.DisputeReason)
	put("arbitration_agent", f.ArbitrationAgent)
	if f.Amount != nil {
		m["amount"] = *f.Amount
	}
	return m
}

// BuildEscrowAudit returns the escrow audit record of one kind (§4.3):
// event_type "asset_transfer", sub_type, audit_id, timestamp and exactly
// the kind's members. AuditID is required (a UUID v4; see arsia.NewID);
// an empty Timestamp is now. A member the kind does not have, a missing
// one, or a malformed one (agent ids, UUIDs, wire timestamps,
// release_trigger as a payload type, amount > 0) is an error wrapping
// ErrAudit. amount is an Amount (it marshals as an exact JSON number).
func BuildEscrowAudit(kind EscrowAuditKind, f EscrowAuditFields, now time.Time) (map[string]any, error) {
	members, ok := escrowAuditMembers[kind]
	if !ok {
		return nil, fmt.Errorf("%w: unknown escrow audit sub_type %q", ErrAudit, string(kind))
	}
	rec, err := auditHeader(f.AuditID, "timestamp", f.Timestamp, now)
	if err != nil {
		return nil, err
	}
	rec["event_type"] = AuditEventType
	rec["sub_type"] = string(kind)
	var p problems
	given := f.set()
	for k := range given {
		if !slices.Contains(members.required, k) && !slices.Contains(members.optional, k) {
			p.invalid("/"+k, ErrAudit, fmt.Sprintf("%s is not a member of an %s record", k, kind))
		}
	}
	for _, k := range members.required {
		if _, ok := given[k]; !ok {
			p.invalid("/"+k, ErrAudit, fmt.Sprintf("%s is required in an %s record", k, kind))
		}
	}
	for k, v := range given {
		if msg := auditMemberProblem(k, v); msg != "" {
			p.invalid("/"+k, ErrAudit, msg)
		}
		rec[k] = v
	}
	if len(p) > 0 {
		return nil, Join(p)
	}
	return rec, nil
}

// auditHeader starts a record with audit_id and its time member.
func auditHeader(auditID, timeKey, ts string, now time.Time) (map[string]any, error) {
	if !arsia.ValidMessageID(auditID) {
		return nil, fmt.Errorf("%w: audit_id %q is not a lowercase UUID v4", ErrAudit, auditID)
	}
	if ts == "" {
		if now.IsZero() {
			return nil, fmt.Errorf("%w: no %s and no current time", ErrNoClock, timeKey)
		}
		ts = arsia.FormatTimestamp(now)
	} else if _, err := arsia.ParseTimestamp(ts); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrAudit, timeKey, err)
	}
	return map[string]any{"audit_id": auditID, timeKey: ts}, nil
}

// auditMemberProblem checks one audit member by its kind of value.
func auditMemberProblem(k string, v any) string {
	s, _ := v.(string)
	switch k {
	case "from_agent", "to_agent", "release_agent", "released_by", "disputed_by", "arbitration_agent", "requested_by":
		if !arsia.ValidAgentID(s) {
			return fmt.Sprintf("%s %q is not a valid agent identifier", k, s)
		}
	case "timeout_at", "actual_timeout":
		if _, err := arsia.ParseTimestamp(s); err != nil {
			return fmt.Sprintf("%s is not a wire timestamp", k)
		}
	case "original_audit_id":
		if !arsia.ValidMessageID(s) {
			return fmt.Sprintf("%s %q is not a lowercase UUID v4", k, s)
		}
	case "release_trigger":
		if !arsia.ValidPayloadType(s) {
			return fmt.Sprintf("release_trigger %q is not a payload type", s)
		}
	case "amount":
		if a, _ := v.(Amount); a.Sign() <= 0 || !a.FitsPrecision(MaxPrecision) {
			return "amount must be greater than zero with at most 8 decimal places"
		}
	case "payment_reference", "original_payment_reference", "reversal_payment_reference", "currency_or_unit":
		if n := utf8.RuneCountInString(s); n < 1 || n > 128 {
			return k + " must be 1-128 characters"
		}
	case "dispute_reason", "cancellation_reason", "reversal_reason":
		if n := utf8.RuneCountInString(s); n < 1 || n > 512 {
			return k + " must be 1-512 characters"
		}
	}
	return ""
}

// ReversalAuditFields are the inputs of a reversal audit record (§3.3.2,
// §5.1.3), which links the reversal to the original transfer.
type ReversalAuditFields struct {
	AuditID                  string  `json:"audit_id,omitempty"`
	CreatedAt                string  `json:"created_at,omitempty"`
	OriginalAuditID          string  `json:"original_audit_id,omitempty"`
	OriginalPaymentReference string  `json:"original_payment_reference,omitempty"`
	ReversalPaymentReference string  `json:"reversal_payment_reference,omitempty"`
	ReversalReason           string  `json:"reversal_reason,omitempty"`
	RequestedBy              string  `json:"requested_by,omitempty"`
	ReversalAmount           *Amount `json:"reversal_amount,omitempty"`
	// OriginalAmount is the original transfer's amount: needed to tell a
	// partial reversal from a full one when ReversalAmount is set.
	OriginalAmount *Amount `json:"original_amount,omitempty"`
}

// BuildReversalAudit returns the reversal audit record: audit_id,
// created_at (empty: now), original_audit_id, original_payment_reference,
// reversal_payment_reference (which must differ from the original),
// reversal_amount, is_full_reversal, reversal_reason and requested_by.
// Without ReversalAmount the reversal is full and reversal_amount is the
// original amount, or null when that is unknown; with it, OriginalAmount
// is required and must not be smaller. Errors wrap ErrAudit.
func BuildReversalAudit(f ReversalAuditFields, now time.Time) (map[string]any, error) {
	rec, err := auditHeader(f.AuditID, "created_at", f.CreatedAt, now)
	if err != nil {
		return nil, err
	}
	var p problems
	for k, v := range map[string]string{
		"original_audit_id":          f.OriginalAuditID,
		"original_payment_reference": f.OriginalPaymentReference,
		"reversal_payment_reference": f.ReversalPaymentReference,
		"reversal_reason":            f.ReversalReason,
		"requested_by":               f.RequestedBy,
	} {
		if msg := auditMemberProblem(k, v); msg != "" {
			p.invalid("/"+k, ErrAudit, msg)
		}
		rec[k] = v
	}
	if f.ReversalPaymentReference != "" && f.ReversalPaymentReference == f.OriginalPaymentReference {
		p.invalid("/reversal_payment_reference", ErrAudit, "reversal_payment_reference must differ from original_payment_reference")
	}
	for _, a := range []*Amount{f.OriginalAmount, f.ReversalAmount} {
		if a != nil && a.Sign() <= 0 {
			p.invalid("/reversal_amount", ErrAudit, "amounts must be greater than zero")
		}
	}
	var amount any
	full := true
	switch {
	case f.ReversalAmount == nil && f.OriginalAmount != nil:
		amount = *f.OriginalAmount
	case f.ReversalAmount != nil && f.OriginalAmount == nil:
		p.invalid("/reversal_amount", ErrAudit, "original amount unknown: cannot tell a full reversal from a partial one")
	case f.ReversalAmount != nil:
		if f.ReversalAmount.Cmp(*f.OriginalAmount) > 0 {
			p.invalid("/reversal_amount", ErrAudit, "reversal_amount exceeds original transfer amount")
		}
		amount = *f.ReversalAmount
		full = f.ReversalAmount.Equal(*f.OriginalAmount)
	}
	rec["reversal_amount"] = amount
	rec["is_full_reversal"] = full
	if len(p) > 0 {
		return nil, Join(p)
	}
	return rec, nil
}
