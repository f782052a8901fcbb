package state

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/schema"
)

// AuditSchema is the JSON Schema of audit records.
const AuditSchema = "arsia-audit-record.schema.json"

// PayloadHash returns the audit payload_hash of a payload object: the
// lower-case hex SHA-256 of its RFC 8785 canonical form (ARSIA-State
// §7.1). It is compliance.PayloadHash for an envelope carrying payload, so
// member order never changes it; non-JSON values (NaN, other Go types)
// fail.
func PayloadHash(payload map[string]any) (string, error) {
	if payload == nil {
		return "", fmt.Errorf("%w: payload is missing or not an object", ErrAudit)
	}
	h, err := compliance.PayloadHash(map[string]any{"payload": payload})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrAudit, err)
	}
	return h, nil
}

// The five state audit event types and the operation each documents.
var auditEvents = map[string]Operation{
	"state_set": OpSet, "state_delete": OpDelete, "state_purge": OpPurge,
	"state_grant": OpGrant, "state_revoke": OpRevoke,
}

// EventType returns the audit event type of o ("state_set", ...), or ""
// for GET, QUERY and SNAPSHOT, which have none of their own.
func EventType(o Operation) string {
	for e, op := range auditEvents {
		if op == o {
			return e
		}
	}
	return ""
}

// requiredAuditMembers are the members arsia-audit-record.schema.json
// requires per state event type, beyond the common ones.
var requiredAuditMembers = map[string][]string{
	"state_set":    {"key", "owner_agent_id", "actor_agent_id", "version", "pii_classification", "timestamp"},
	"state_delete": {"key", "owner_agent_id", "actor_agent_id", "version", "timestamp"},
	"state_purge":  {"key", "owner_agent_id", "initiator_agent_id", "purged_at", "pii_classification"},
	"state_grant":  {"grant_id", "key_pattern", "grantor_agent_id", "grantee_agent_id", "access_level", "valid_until", "timestamp"},
	"state_revoke": {"grant_id", "grantor_agent_id", "grantee_agent_id", "timestamp"},
}

// AuditInput is what a state audit record needs beyond the envelope of
// the operation. Members the envelope carries (key, actor, reason, grant
// pattern...) are read from it.
type AuditInput struct {
	// RecordID is the record's lower-case UUID v4; empty means a fresh
	// random one.
	RecordID string
	// EventType is state_set, state_delete, state_purge, state_grant or
	// state_revoke, and must match the envelope's payload.type.
	EventType string
	// OperatorID is the owner_id of the agent keeping the audit log.
	OperatorID string
	// ProcessedAt is now: the record's processing time.
	ProcessedAt time.Time
	// RetentionDays is the effective retention the caller computed (see
	// EffectiveRetention); the record keeps the larger of it and the
	// envelope's.
	RetentionDays int
	// Version is the entry's version after a SET, or at a DELETE.
	Version int
	// PIIClassification is the entry's classification, for PURGE (whose
	// args do not carry it) or to override SET args.
	PIIClassification PII
	// PurgedAt is when the data was destroyed; zero means ProcessedAt.
	PurgedAt time.Time
	// GrantID is the id the store gave a GRANT.
	GrantID string
	// GranteeAgentID is the grantee of a revoked grant (REVOKE args carry
	// only the grant id).
	GranteeAgentID string
	// Plaintext is the decrypted payload of an encrypted envelope.
	Plaintext map[string]any
	// Partial accepts a record without the event-specific members the
	// audit schema requires (as the reference SDK's payload-agnostic
	// builder does). Without it such a record is an error, and the record
	// is checked against the audit-record schema.
	Partial bool
}

// AuditRecord is the audit record of a state operation: the common members
// of compliance.AuditRecord plus the state members of ARSIA-State §3 and
// §7.1. It never holds the entry's value.
type AuditRecord struct {
	compliance.AuditRecord
	Key                  string
	OwnerAgentID         string
	ActorAgentID         string
	InitiatorAgentID     string
	Version              int
	PIIClassification    PII
	PIISpecialCategories []string
	LegalBasis           string
	Timestamp            string
	PurgedAt             string
	Reason               string
	GrantID              string
	KeyPattern           string
	GrantorAgentID       string
	GranteeAgentID       string
	AccessLevel          AccessLevel
	// ValidUntil is a grant's expiry; empty is JSON null in a state_grant
	// record (no expiry) and absent otherwise.
	ValidUntil string
}

// Map returns the record as a JSON object, empty members left out.
func (r *AuditRecord) Map() map[string]any {
	m := map[string]any{}
	if data, err := json.Marshal(r.AuditRecord); err == nil {
		_ = json.Unmarshal(data, &m)
	}
	for k, v := range map[string]string{
		"key": r.Key, "owner_agent_id": r.OwnerAgentID, "actor_agent_id": r.ActorAgentID,
		"initiator_agent_id": r.InitiatorAgentID, "pii_classification": string(r.PIIClassification),
		"legal_basis": r.LegalBasis, "timestamp": r.Timestamp, "purged_at": r.PurgedAt, "reason": r.Reason,
		"grant_id": r.GrantID, "key_pattern": r.KeyPattern, "grantor_agent_id": r.GrantorAgentID,
		"grantee_agent_id": r.GranteeAgentID, "access_level": string(r.AccessLevel), "valid_until": r.ValidUntil,
	} {
		putString(m, k, v)
	}
	if r.Version > 0 {
		m["version"] = r.Version
	}
	if len(r.PIISpecialCategories) > 0 {
		cats := make([]any, len(r.PIISpecialCategories))
		for i, c := range r.PIISpecialCategories {
			cats[i] = c
		}
		m["pii_special_categories"] = cats
	}
	if r.EventType == "state_grant" && r.ValidUntil == "" {
		m["valid_until"] = nil
	}
	return m
}

// MarshalJSON encodes Map().
func (r *AuditRecord) MarshalJSON() ([]byte, error) { return json.Marshal(r.Map()) }

// Missing lists, sorted, the members the audit schema requires for the
// record's event type that it lacks.
func (r *AuditRecord) Missing() []string {
	m := r.Map()
	need := slices.Clone(requiredAuditMembers[r.EventType])
	if r.EventType == "state_set" && r.PIIClassification.NeedsLegalBasis() {
		need = append(need, "legal_basis")
	}
	if r.EventType == "state_set" && r.PIIClassification == PIISensitive {
		need = append(need, "pii_special_categories")
	}
	var out []string
	for _, k := range need {
		if _, ok := m[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// NewAuditRecord builds the audit record of the state operation env
// carries. The common members come from compliance.NewAuditRecord
// (payload_hash, compliance_profile, data_residency, retained_until...);
// the state members from the payload args, the envelope (from is the
// actor, initiator or grantor; ts the event timestamp) and in. A nil reg
// means compliance.Default(). Errors wrap ErrAudit.
func NewAuditRecord(env map[string]any, reg *compliance.Registry, in AuditInput) (*AuditRecord, error) {
	fail := func(format string, args ...any) (*AuditRecord, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrAudit}, args...)...)
	}
	op, ok := auditEvents[in.EventType]
	if !ok {
		return fail("event type %s is not a state event (state_set, state_delete, state_purge, state_grant, state_revoke)", quote(in.EventType))
	}
	payload, _ := env["payload"].(map[string]any)
	if payload == nil {
		payload = in.Plaintext
	}
	ptype, _ := payload["type"].(string)
	if got, err := OperationOf(ptype); err != nil || got != op {
		return fail("event type %s does not document payload type %s", in.EventType, quote(ptype))
	}
	if in.RecordID == "" {
		id, err := compliance.NewRecordID(nil)
		if err != nil {
			return fail("record id: %v", err)
		}
		in.RecordID = id
	}
	core, err := compliance.NewAuditRecord(env, reg, compliance.AuditInput{
		RecordID: in.RecordID, EventType: in.EventType, OperatorID: in.OperatorID,
		ProcessedAt: in.ProcessedAt, RetentionDays: in.RetentionDays, Plaintext: in.Plaintext,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAudit, err)
	}
	rec := &AuditRecord{AuditRecord: *core, Version: max(in.Version, 0)}
	args, _ := payload["args"].(map[string]any)
	str := func(k string) string { s, _ := args[k].(string); return s }
	from, _ := env["from"].(string)
	ts, _ := env["ts"].(string)

	switch op {
	case OpSet, OpDelete, OpPurge:
		rec.Key = str("key")
		if k, err := ParseKey(rec.Key); err == nil {
			rec.OwnerAgentID = k.Owner
		}
	}
	switch op {
	case OpSet:
		rec.ActorAgentID, rec.Timestamp = from, ts
		rec.PIIClassification = PII(str("pii_classification"))
		if cats, ok := args["pii_special_categories"].([]any); ok {
			for _, c := range cats {
				if s, ok := c.(string); ok {
					rec.PIISpecialCategories = append(rec.PIISpecialCategories, s)
				}
			}
		}
	case OpDelete:
		rec.ActorAgentID, rec.Timestamp = from, ts
	case OpPurge:
		rec.InitiatorAgentID, rec.Reason = from, str("reason")
		at := in.PurgedAt
		if at.IsZero() {
			at = in.ProcessedAt
		}
		rec.PurgedAt = at.UTC().Format("2006-01-02T15:04:05.000Z")
	case OpGrant:
		rec.GrantID, rec.GrantorAgentID, rec.Timestamp = in.GrantID, from, ts
		rec.KeyPattern, rec.GranteeAgentID = str("key_pattern"), str("grantee_agent_id")
		rec.AccessLevel, rec.ValidUntil = AccessLevel(str("access_level")), str("valid_until")
	case OpRevoke:
		rec.GrantID, rec.GrantorAgentID, rec.Timestamp = str("grant_id"), from, ts
		rec.GranteeAgentID = in.GranteeAgentID
	}
	if in.PIIClassification != "" && (op == OpSet || op == OpPurge) {
		rec.PIIClassification = in.PIIClassification
	}
	if op == OpSet && rec.PIIClassification.NeedsLegalBasis() {
		if out, _, err := compliance.Apply(env, reg, false); err == nil {
			if c, ok := out["compliance"].(map[string]any); ok {
				rec.LegalBasis, _ = c["legal_basis"].(string)
			}
		}
	}
	if in.Partial {
		return rec, nil
	}
	if missing := rec.Missing(); len(missing) > 0 {
		return fail("%s record lacks %s", in.EventType, strings.Join(missing, ", "))
	}
	errs, err := schema.Validate(rec.Map(), AuditSchema)
	if err != nil {
		return fail("%v", err)
	}
	if len(errs) > 0 {
		return fail("record does not match the audit schema: %s", schema.Join(errs))
	}
	return rec, nil
}
