package audit

import (
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
)

// ProfileRetention returns an Options.Retention policy that keeps a
// record for the retention period of its Profile in reg (nil means
// compliance.Default()): the profile's default retention_days, raised to
// the schema's floor for that profile (compliance.RetentionFloor), counted
// in calendar days from the record's Time. A record whose profile is
// empty, unknown or sets no period (GDPR-STANDARD) is kept for fallback; a
// zero fallback keeps it forever.
//
// A record that carries its own RetainUntil (for instance from FromARSIA,
// which uses the message's own retention_days) keeps it: the policy only
// fills a missing one.
func ProfileRetention(reg *compliance.Registry, fallback time.Duration) func(Record) time.Time {
	if reg == nil {
		reg = compliance.Default()
	}
	return func(r Record) time.Time {
		days := 0
		if p, ok := reg.Get(r.Profile); ok && p.Defaults.RetentionDays != nil {
			days = *p.Defaults.RetentionDays
		}
		if floor, ok := compliance.RetentionFloor(r.Profile); ok {
			days = max(days, floor)
		}
		if days > 0 {
			return r.Time.AddDate(0, 0, days)
		}
		if fallback > 0 {
			return r.Time.Add(fallback)
		}
		return time.Time{}
	}
}

// FromARSIA returns the KindReceived record of an ARSIA envelope from its
// ARSIA audit record (compliance.NewAuditRecord): the ARSIA record is
// embedded whole (Record.ARSIA) and its members fill the chain record's
// own: message id, sender, recipient, capability (the intent), payload
// hash (with the "sha256:" prefix), profile, time (processed_at) and
// retain_until (retained_until). The caller adds the oversight mode,
// outcome, actor, ASC code, trace id.
func FromARSIA(ar *compliance.AuditRecord) (Record, error) {
	if ar == nil {
		return Record{}, fmt.Errorf("%w: nil ARSIA audit record", ErrRecord)
	}
	cp := *ar
	rec := Record{
		Kind:        KindReceived,
		MessageID:   ar.MessageID,
		Sender:      ar.FromAgent,
		Recipient:   ar.ToAgent,
		Capability:  ar.Intent,
		PayloadHash: "sha256:" + ar.PayloadHash,
		Profile:     ar.ComplianceProfile,
		ARSIA:       &cp,
	}
	if !isDigest(rec.PayloadHash) {
		return Record{}, fmt.Errorf("%w: ARSIA payload_hash %q is not 64 lower-case hex digits", ErrRecord, ar.PayloadHash)
	}
	var err error
	if rec.Time, err = time.Parse(time.RFC3339Nano, ar.ProcessedAt); err != nil {
		return Record{}, fmt.Errorf("%w: ARSIA processed_at: %v", ErrRecord, err)
	}
	if ar.RetainedUntil != "" {
		if rec.RetainUntil, err = time.Parse(time.RFC3339Nano, ar.RetainedUntil); err != nil {
			return Record{}, fmt.Errorf("%w: ARSIA retained_until: %v", ErrRecord, err)
		}
	}
	return rec, nil
}
