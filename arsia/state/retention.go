package state

import (
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
)

// EffectiveRetention returns the retention period, in days, of an entry
// written under the named compliance profile (ARSIA-State §4.1.1): the
// larger of the profile's default and the entry's own retention_days
// (entryDays, nil when absent). An entry can extend its profile's
// retention, never shorten it. The result is nil when neither sets one
// (GDPR-STANDARD mandates no period). An unknown profile fails with
// ErrUnknownProfile and entryDays below 1 with ErrInvalidRetention. A nil
// reg means compliance.Default().
func EffectiveRetention(reg *compliance.Registry, profile string, entryDays *int) (*int, error) {
	if reg == nil {
		reg = compliance.Default()
	}
	p, ok := reg.Get(profile)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownProfile, quote(profile))
	}
	if entryDays != nil && *entryDays < 1 {
		return nil, fmt.Errorf("%w: retention_days %d is below 1", ErrInvalidRetention, *entryDays)
	}
	return p.EffectiveRetention(entryDays), nil
}

// maxRetentionDays bounds date arithmetic: any longer period is treated as
// forever.
const maxRetentionDays = 1_000_000

// WithinRetention reports whether an entry created at created with the
// effective retention days (nil: none) must still be kept at now:
// now < created + days × 24 h. Entries within retention may be removed
// only by PURGE.
func WithinRetention(created time.Time, days *int, now time.Time) bool {
	if days == nil || *days < 1 {
		return false
	}
	if *days > maxRetentionDays {
		return true
	}
	return now.Before(created.UTC().AddDate(0, 0, *days))
}
