package assets

import (
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
)

// MiFIDRetentionFloorDays is the minimum retention of MiFID II records
// (§6.1.2: five years, 1825 days; Commission Delegated Regulation (EU)
// 2017/565 Art. 72). The compliance-field schema rounds the same five
// years up to 1827 for the MIFID-II profile's raw retention_days (see
// compliance.RetentionFloor); this floor applies to the effective value.
const MiFIDRetentionFloorDays = 1825

// EnforceMiFIDRetention checks that the effective retention of a financial
// message (compliance.EffectiveRetentionDays: the larger of its
// retention_days and its profile's default) is at least
// MiFIDRetentionFloorDays. A message with no retention at all fails too.
// reg nil means compliance.Default(). The error wraps ErrMiFIDRetention.
func EnforceMiFIDRetention(env map[string]any, reg *compliance.Registry) error {
	days, ok := compliance.EffectiveRetentionDays(env, reg)
	switch {
	case !ok:
		return fmt.Errorf("%w: MiFID II requires a retention period of at least %d days; the message has none", ErrMiFIDRetention, MiFIDRetentionFloorDays)
	case days < MiFIDRetentionFloorDays:
		return fmt.Errorf("%w: MiFID II requires a retention period of at least %d days; effective retention is %d", ErrMiFIDRetention, MiFIDRetentionFloorDays, days)
	}
	return nil
}

// Human oversight statuses of a MiFID II audit record.
const (
	OversightNotRequired = "not_required"
	OversightPending     = "pending"
	OversightApproved    = "approved"
	OversightRejected    = "rejected"
	OversightTimeout     = "timeout"
)

// MiFIDAuditInput is what a MiFID II audit record (§6.1.1) is projected
// from.
type MiFIDAuditInput struct {
	// AuditID is the record's UUID v4 (see arsia.NewID).
	AuditID string
	// Request is the AssetTransferRequest envelope (generic form).
	Request map[string]any
	// Receipt is the AssetTransferReceipt envelope, or nil while there is
	// none: the record is then "pending", initiated at the request's ts.
	Receipt map[string]any
	// HumanOversightStatus is one of the Oversight* constants; empty
	// means not_required.
	HumanOversightStatus string
	// ApproverID and ApprovalTimestamp record an approval (both or neither).
	ApproverID        string
	ApprovalTimestamp time.Time
	// ExemptionReason records an applied SCA exemption (see IsSCAExempt).
	ExemptionReason string
	// CreatedAt is when the record was first written; UpdatedAt when it
	// was last updated (zero: CreatedAt).
	CreatedAt, UpdatedAt time.Time
}

// BuildMiFIDAuditRecord projects a transfer request, and its receipt when
// there is one, onto the MiFID II audit record of §6.1.1 and checks the
// result against arsia-mifid-audit-record.schema.json. The request args
// must be valid (ValidateTransferRequest); payload_hash is the SHA-256 of
// the canonical request payload (compliance.PayloadHash). amount and
// actual_amount are json.Number, exact.
func BuildMiFIDAuditRecord(in MiFIDAuditInput) (map[string]any, error) {
	fail := func(format string, args ...any) (map[string]any, error) {
		return nil, fmt.Errorf("%w: %s", ErrMiFIDRecord, fmt.Sprintf(format, args...))
	}
	if in.CreatedAt.IsZero() {
		return nil, fmt.Errorf("%w: CreatedAt not set", ErrNoClock)
	}
	payload, _ := in.Request["payload"].(map[string]any)
	args, _ := payload["args"].(map[string]any)
	if errs := ValidateTransferRequest(args); len(errs) > 0 {
		return fail("invalid transfer request: %v", Join(errs))
	}
	amount, _ := AmountFromJSON(args["amount"])
	hash, err := compliance.PayloadHash(in.Request)
	if err != nil {
		return fail("%v", err)
	}
	updated := in.UpdatedAt
	if updated.IsZero() {
		updated = in.CreatedAt
	}
	oversight := in.HumanOversightStatus
	if oversight == "" {
		oversight = OversightNotRequired
	}
	rec := map[string]any{
		"audit_id":               in.AuditID,
		"message_id":             in.Request["id"],
		"from_agent":             args["from_agent"],
		"to_agent":               args["to_agent"],
		"amount":                 amount.Number(),
		"currency_or_unit":       args["currency_or_unit"],
		"asset_type":             args["asset_type"],
		"payment_reference":      args["payment_reference"],
		"initiated_at":           in.Request["ts"],
		"status":                 StatusPending,
		"compliance_profile":     "none",
		"payload_hash":           hash,
		"human_oversight_status": oversight,
		"created_at":             arsia.FormatTimestamp(in.CreatedAt),
		"updated_at":             arsia.FormatTimestamp(updated),
	}
	if comp, ok := in.Request["compliance"].(map[string]any); ok {
		rec["compliance_profile"] = compliance.DefaultProfile
		if p, ok := comp["profile"].(string); ok && p != "" {
			rec["compliance_profile"] = p
		}
		if r, ok := comp["data_residency"].(string); ok {
			rec["data_residency"] = r
		}
	}
	if in.Receipt != nil {
		rp, _ := in.Receipt["payload"].(map[string]any)
		result, _ := rp["result"].(map[string]any)
		if errs := ValidateReceiptMatch(args, result); len(errs) > 0 {
			return fail("receipt does not match the request: %v", Join(errs))
		}
		actual, _ := AmountFromJSON(result["amount"])
		rec["receipt_message_id"] = in.Receipt["id"]
		rec["actual_amount"] = actual.Number()
		rec["status"] = result["status"]
		rec["initiated_at"] = result["initiated_at"]
		for _, k := range []string{"provider_reference", "settled_at", "failure_reason"} {
			if v, ok := result[k]; ok {
				rec[k] = v
			}
		}
	}
	if in.ApproverID != "" || !in.ApprovalTimestamp.IsZero() {
		if in.ApproverID == "" || in.ApprovalTimestamp.IsZero() {
			return fail("approver_id and approval_timestamp go together")
		}
		rec["approver_id"] = in.ApproverID
		rec["approval_timestamp"] = arsia.FormatTimestamp(in.ApprovalTimestamp)
	}
	if in.ExemptionReason != "" {
		rec["exemption_reason"] = in.ExemptionReason
	}
	if errs := schemaProblems(rec, schemaMiFID, nil); len(errs) > 0 {
		return fail("%v", Join(errs))
	}
	return rec, nil
}
