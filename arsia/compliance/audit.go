package compliance

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/custos-runtime/custos/jcs"
)

// ErrAudit is wrapped by every NewAuditRecord error.
var ErrAudit = errors.New("compliance: cannot build audit record")

// AuditRecord is the ARSIA audit record of one envelope (ARSIA-State §7.1,
// arsia-audit-record.schema.json), restricted to the members that every
// event type carries plus the oversight ones. It stores a hash of the
// payload, never the payload.
type AuditRecord struct {
	RecordID             string `json:"record_id"`
	MessageID            string `json:"message_id"`
	EventType            string `json:"event_type"`
	FromAgent            string `json:"from_agent"`
	ToAgent              string `json:"to_agent"`
	Intent               string `json:"intent"`
	PayloadType          string `json:"payload_type"`
	PayloadHash          string `json:"payload_hash"`
	PlaintextHash        string `json:"plaintext_hash,omitempty"`
	ComplianceProfile    string `json:"compliance_profile"`
	HumanOversightStatus string `json:"human_oversight_status,omitempty"`
	ApproverID           string `json:"approver_id,omitempty"`
	ProcessedAt          string `json:"processed_at"`
	RetainedUntil        string `json:"retained_until"`
	DataResidency        string `json:"data_residency,omitempty"`
	OperatorID           string `json:"operator_id"`
}

// AuditInput is what an audit record needs beyond the envelope. Everything
// time- or randomness-dependent is supplied by the caller, so the same
// inputs always give the same record.
type AuditInput struct {
	// RecordID is the record's UUID v4 (lower case); see NewRecordID.
	RecordID string
	// EventType is one of the schema's event types ("request", "response",
	// "state_set", ...).
	EventType string
	// OperatorID is the owner_id of the agent that keeps the audit log.
	OperatorID string
	// ProcessedAt is when the event was processed; the record's time.
	ProcessedAt time.Time
	// RetentionDays is the retention the caller computed (for example from
	// a state entry). The record uses the larger of it and the envelope's
	// effective retention; 0 means the envelope's alone.
	RetentionDays int
	// HumanOversightStatus is not_required, pending, approved, denied or
	// expired. Empty means not_required when the effective human_oversight
	// is not_required (or absent), pending otherwise.
	HumanOversightStatus string
	// ApproverID is required when HumanOversightStatus is approved or
	// denied.
	ApproverID string
	// Plaintext is the decrypted payload object of an encrypted envelope. It
	// is required then: it gives payload_type and plaintext_hash.
	Plaintext map[string]any
}

var auditEventTypes = map[string]bool{
	"approval_decision": true, "approval_expired": true, "asset_transfer": true, "broker_relay": true,
	"dora_incident": true, "error": true, "event": true, "key_rotation": true, "pending_approval": true,
	"request": true, "response": true, "rollback": true, "state_delete": true, "state_grant": true,
	"state_purge": true, "state_revoke": true, "state_set": true,
}

// NewRecordID returns a random UUID v4 read from r (crypto/rand when r is
// nil).
func NewRecordID(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// isUUIDv4 matches ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$.
func isUUIDv4(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case i == 14:
			if c != '4' {
				return false
			}
		case i == 19:
			if c != '8' && c != '9' && c != 'a' && c != 'b' {
				return false
			}
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f'):
			return false
		}
	}
	return true
}

// PayloadHash returns the audit payload_hash of env: the lower-case hex
// SHA-256 of the RFC 8785 canonical form of the payload object, or of the
// UTF-8 JWE string when security.encrypted is true (Core §5.3.1).
func PayloadHash(env map[string]any) (string, error) {
	switch p := env["payload"].(type) {
	case map[string]any:
		c, err := jcs.CanonicalizeValue(p)
		if err != nil {
			return "", fmt.Errorf("%w: payload: %v", ErrAudit, err)
		}
		sum := sha256.Sum256(c)
		return hex.EncodeToString(sum[:]), nil
	case string:
		sec, _ := env["security"].(map[string]any)
		if !isTrue(sec["encrypted"]) {
			return "", fmt.Errorf("%w: string payload without security.encrypted=true", ErrAudit)
		}
		sum := sha256.Sum256([]byte(p))
		return hex.EncodeToString(sum[:]), nil
	}
	return "", fmt.Errorf("%w: payload is missing or neither an object nor a JWE string", ErrAudit)
}

// NewAuditRecord builds the audit record of env. compliance_profile is the
// declared profile name, GDPR-STANDARD when compliance names none, or "none"
// without a compliance object; data_residency is the effective one;
// retained_until is processed_at plus the effective retention (see
// AuditInput.RetentionDays), and a record without any retention period is an
// error: the operator must choose one. A nil reg means Default().
func NewAuditRecord(env map[string]any, reg *Registry, in AuditInput) (*AuditRecord, error) {
	reg = reg.orDefault()
	fail := func(format string, args ...any) (*AuditRecord, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrAudit}, args...)...)
	}
	if !isUUIDv4(in.RecordID) {
		return fail("record id %s is not a lower-case UUID v4", render(in.RecordID))
	}
	if !auditEventTypes[in.EventType] {
		return fail("unknown event type %s", render(in.EventType))
	}
	if in.OperatorID == "" {
		return fail("operator id is required")
	}
	if in.ProcessedAt.IsZero() {
		return fail("processed-at time is required")
	}
	rec := &AuditRecord{RecordID: in.RecordID, EventType: in.EventType, OperatorID: in.OperatorID}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"id", &rec.MessageID}, {"from", &rec.FromAgent}, {"to", &rec.ToAgent}, {"intent", &rec.Intent}} {
		s, ok := env[f.name].(string)
		if !ok || s == "" {
			return fail("envelope %s is missing or not a string", f.name)
		}
		*f.dst = s
	}

	var err error
	if rec.PayloadHash, err = PayloadHash(env); err != nil {
		return nil, err
	}
	payload, _ := env["payload"].(map[string]any)
	if payload == nil {
		if in.Plaintext == nil {
			return fail("encrypted payload: pass the decrypted payload as AuditInput.Plaintext")
		}
		c, err := jcs.CanonicalizeValue(in.Plaintext)
		if err != nil {
			return fail("plaintext: %v", err)
		}
		sum := sha256.Sum256(c)
		rec.PlaintextHash = hex.EncodeToString(sum[:])
		payload = in.Plaintext
	}
	if rec.PayloadType, _ = payload["type"].(string); rec.PayloadType == "" {
		return fail("payload.type is missing or not a string")
	}

	comp, present, err := complianceOf(env)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAudit, err)
	}
	oversight := OversightNotRequired
	switch {
	case !present:
		rec.ComplianceProfile = "none"
	default:
		r := resolve(comp, reg)
		rec.ComplianceProfile = r.profile.Name
		if r.declaredStr != "" {
			rec.ComplianceProfile = r.declaredStr
		}
		if s, ok := r.effective[fieldDataResidency].(string); ok && validResidency(s) {
			rec.DataResidency = s
		}
		if s, ok := r.effective[fieldHumanOversight].(string); ok && Oversight(s).Valid() {
			oversight = Oversight(s)
		}
	}

	switch in.HumanOversightStatus {
	case "":
		rec.HumanOversightStatus = "not_required"
		if oversight != OversightNotRequired {
			rec.HumanOversightStatus = "pending"
		}
	case "not_required", "pending", "expired":
		rec.HumanOversightStatus = in.HumanOversightStatus
	case "approved", "denied":
		if in.ApproverID == "" {
			return fail("human oversight status %s needs an approver id", in.HumanOversightStatus)
		}
		rec.HumanOversightStatus, rec.ApproverID = in.HumanOversightStatus, in.ApproverID
	default:
		return fail("unknown human oversight status %s", render(in.HumanOversightStatus))
	}

	days := max(in.RetentionDays, 0)
	if d, ok := EffectiveRetentionDays(env, reg); ok {
		days = max(days, d)
	}
	if days == 0 {
		return fail("no retention period: the profile sets none; pass AuditInput.RetentionDays")
	}
	processed := in.ProcessedAt.UTC()
	until := processed.AddDate(0, 0, days)
	if until.Year() > 9999 {
		return fail("retention of %d days ends after year 9999", days)
	}
	rec.ProcessedAt = processed.Format(timeLayout)
	rec.RetainedUntil = until.Format(timeLayout)
	return rec, nil
}
