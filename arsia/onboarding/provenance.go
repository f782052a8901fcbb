package onboarding

import (
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia/identity"
)

// TimeLayout is the wire form of onboarding timestamps: RFC 3339 in UTC
// with exactly three fractional digits.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// ClockSkew is the tolerance for timestamps ahead of now (ARSIA-Core
// §8.3).
const ClockSkew = 300 * time.Second

// Provenance is the Phase 4 evidence of an agent's history
// (ARSIA-Identity §7.5): its identity must not be younger than its
// earliest audit record. It is informational: a false Verified SHOULD be
// logged as a warning and MUST NOT by itself deny onboarding.
type Provenance struct {
	// IdentityCreatedAt is the identity record's created_at; zero when it
	// was missing or not a valid timestamp.
	IdentityCreatedAt time.Time
	// EarliestAuditRecord is the processed_at of the agent's earliest
	// audit record; zero when unknown.
	EarliestAuditRecord time.Time
	// Verified is true when both times are known, neither is in the
	// future, and the audit record is not earlier than the identity.
	Verified bool
	// Notes explain a false Verified, one sentence per finding.
	Notes []string
}

// VerifyProvenance checks Phase 4 provenance from the wire values of the
// identity record's created_at and of the earliest audit record's
// processed_at ("" when absent), at now. Timestamps must have the
// TimeLayout form; a timestamp more than ClockSkew after now is not
// accepted as evidence. Notes name what failed: "identity_created_at is
// missing", "audit predates identity", ...
func VerifyProvenance(identityCreatedAt, earliestAuditRecord string, now time.Time) Provenance {
	var p Provenance
	var ok1, ok2 bool
	p.IdentityCreatedAt, ok1 = p.readTime("identity_created_at", identityCreatedAt, now)
	p.EarliestAuditRecord, ok2 = p.readTime("earliest_audit_record", earliestAuditRecord, now)
	if now.IsZero() {
		p.Notes = append(p.Notes, "the verification time is not set")
		return p
	}
	if ok1 && ok2 && p.EarliestAuditRecord.Before(p.IdentityCreatedAt) {
		p.Notes = append(p.Notes, fmt.Sprintf("audit predates identity: earliest audit record %s is before identity_created_at %s",
			p.EarliestAuditRecord.Format(TimeLayout), p.IdentityCreatedAt.Format(TimeLayout)))
	}
	p.Verified = ok1 && ok2 && len(p.Notes) == 0
	return p
}

// ProvenanceFromRecord is VerifyProvenance with the identity record's
// created_at. A nil record yields "identity_created_at is missing".
func ProvenanceFromRecord(rec *identity.IdentityRecord, earliestAuditRecord string, now time.Time) Provenance {
	created := ""
	if rec != nil && !rec.CreatedAt.IsZero() {
		created = rec.CreatedAt.UTC().Format(TimeLayout)
	}
	return VerifyProvenance(created, earliestAuditRecord, now)
}

// readTime parses one timestamp, noting why it cannot be used.
func (p *Provenance) readTime(name, s string, now time.Time) (time.Time, bool) {
	if s == "" {
		p.Notes = append(p.Notes, name+" is missing")
		return time.Time{}, false
	}
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s {
		p.Notes = append(p.Notes, fmt.Sprintf("%s %q is not an RFC 3339 UTC timestamp with milliseconds", name, truncate(s)))
		return time.Time{}, false
	}
	if !now.IsZero() && t.After(now.Add(ClockSkew)) {
		p.Notes = append(p.Notes, fmt.Sprintf("%s %s is in the future", name, s))
		return t, false
	}
	return t, true
}

// Map returns the provenance object of the onboarding decision schema:
// identity_created_at, earliest_audit_record (when known) and
// provenance_verified. identity_created_at is omitted when unknown, which
// the schema refuses: such provenance cannot go on the wire.
func (p Provenance) Map() map[string]any {
	m := map[string]any{"provenance_verified": p.Verified}
	if !p.IdentityCreatedAt.IsZero() {
		m["identity_created_at"] = p.IdentityCreatedAt.UTC().Format(TimeLayout)
	}
	if !p.EarliestAuditRecord.IsZero() {
		m["earliest_audit_record"] = p.EarliestAuditRecord.UTC().Format(TimeLayout)
	}
	return m
}

// truncate shortens s for an error message.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
