package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/schema"
)

// EntrySchema is the JSON Schema of a StateEntry.
const EntrySchema = "arsia-state-entry.schema.json"

// SessionMaxLifetime bounds a session entry: expires_at may be at most this
// long after created_at (ARSIA-State §1.1).
const SessionMaxLifetime = 24 * time.Hour

// PII is an entry's GDPR classification (ARSIA-State §2.1.10).
type PII string

// The four classifications, from least to most protected.
const (
	// PIINone is data about no natural person.
	PIINone PII = "none"
	// PIIPseudonymised is personal data pseudonymised per GDPR Art. 4(5):
	// still personal data, and bound to the declared residency.
	PIIPseudonymised PII = "pseudonymised"
	// PIIPersonal identifies a natural person: the writing envelope must
	// carry a legal basis.
	PIIPersonal PII = "personal"
	// PIISensitive is GDPR Art. 9(1) special-category data: it needs an
	// Art. 9(2) legal basis and pii_special_categories.
	PIISensitive PII = "sensitive"
)

// Valid reports whether p is one of the four classifications.
func (p PII) Valid() bool {
	switch p {
	case PIINone, PIIPseudonymised, PIIPersonal, PIISensitive:
		return true
	}
	return false
}

// IsPersonalData reports whether p is personal data under GDPR
// (pseudonymised, personal or sensitive).
func (p PII) IsPersonalData() bool {
	return p == PIIPseudonymised || p == PIIPersonal || p == PIISensitive
}

// NeedsLegalBasis reports whether writing p requires compliance.legal_basis
// (personal and sensitive).
func (p PII) NeedsLegalBasis() bool { return p == PIIPersonal || p == PIISensitive }

// SpecialCategories are the GDPR Art. 9(1) values of pii_special_categories.
func SpecialCategories() []string {
	return []string{"health", "biometric", "genetic", "racial_ethnic", "political", "religious", "trade_union", "sexual_orientation"}
}

// Entry is a StateEntry (ARSIA-State §2.1). Zero ExpiresAt and
// RetentionDays mean the optional members are absent.
type Entry struct {
	Key                  string
	Value                any
	OwnerAgentID         string
	Scope                Scope
	CreatedAt            time.Time
	UpdatedAt            time.Time
	ExpiresAt            time.Time
	RetentionDays        int
	DataResidency        string
	PIIClassification    PII
	PIISpecialCategories []string
	Version              int
	Deleted              bool
}

// Map returns the entry in wire form, timestamps as
// YYYY-MM-DDTHH:MM:SS.mmmZ. Value is shared, not copied.
func (e *Entry) Map() map[string]any {
	m := map[string]any{
		"key":                e.Key,
		"value":              e.Value,
		"owner_agent_id":     e.OwnerAgentID,
		"scope":              string(e.Scope),
		"created_at":         arsia.FormatTimestamp(e.CreatedAt),
		"updated_at":         arsia.FormatTimestamp(e.UpdatedAt),
		"pii_classification": string(e.PIIClassification),
		"version":            e.Version,
	}
	if !e.ExpiresAt.IsZero() {
		m["expires_at"] = arsia.FormatTimestamp(e.ExpiresAt)
	}
	if e.RetentionDays > 0 {
		m["retention_days"] = e.RetentionDays
	}
	if e.DataResidency != "" {
		m["data_residency"] = e.DataResidency
	}
	if len(e.PIISpecialCategories) > 0 {
		cats := make([]any, len(e.PIISpecialCategories))
		for i, c := range e.PIISpecialCategories {
			cats[i] = c
		}
		m["pii_special_categories"] = cats
	}
	if e.Deleted {
		m["deleted"] = true
	}
	return m
}

// MarshalJSON encodes Map().
func (e *Entry) MarshalJSON() ([]byte, error) { return json.Marshal(e.Map()) }

// Clone returns a copy of e that shares nothing mutable with it except
// Value, which callers treat as immutable.
func (e *Entry) Clone() *Entry {
	c := *e
	c.PIISpecialCategories = slices.Clone(e.PIISpecialCategories)
	return &c
}

// EntryFromMap checks m against the StateEntry schema and converts it. It
// checks structure only (plus the value's JSON validity and size); use
// ValidateEntry for the protocol rules. The error wraps ErrInvalidEntry, or
// ErrInvalidValue / ErrValueTooLarge for the value.
func EntryFromMap(m map[string]any) (*Entry, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: entry is missing or not an object", ErrInvalidEntry)
	}
	if v, ok := m["value"]; ok {
		if err := CheckValue(v); err != nil {
			return nil, fmt.Errorf("%w: value: %w", ErrInvalidEntry, err)
		}
	}
	errs, err := schema.Validate(m, EntrySchema)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEntry, err)
	}
	if len(errs) > 0 {
		var msgs []string
		if msg := scopeMismatch(m); msg != "" {
			msgs = append(msgs, msg)
		}
		for _, e := range errs {
			msgs = append(msgs, e.String())
		}
		return nil, fmt.Errorf("%w: %s", ErrInvalidEntry, strings.Join(msgs, "; "))
	}
	e := &Entry{Value: m["value"]}
	e.Key, _ = m["key"].(string)
	e.OwnerAgentID, _ = m["owner_agent_id"].(string)
	s, _ := m["scope"].(string)
	e.Scope = Scope(s)
	s, _ = m["pii_classification"].(string)
	e.PIIClassification = PII(s)
	e.DataResidency, _ = m["data_residency"].(string)
	e.Deleted, _ = m["deleted"].(bool)
	var ok bool
	if e.Version, ok = intOf(m["version"]); !ok {
		return nil, fmt.Errorf("%w: version is not an integer", ErrInvalidEntry)
	}
	if v, present := m["retention_days"]; present {
		if e.RetentionDays, ok = intOf(v); !ok {
			return nil, fmt.Errorf("%w: retention_days is not an integer", ErrInvalidEntry)
		}
	}
	if cats, ok := m["pii_special_categories"].([]any); ok {
		for _, c := range cats {
			if cs, ok := c.(string); ok {
				e.PIISpecialCategories = append(e.PIISpecialCategories, cs)
			}
		}
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"created_at", &e.CreatedAt}, {"updated_at", &e.UpdatedAt}, {"expires_at", &e.ExpiresAt}} {
		s, present := m[f.name].(string)
		if !present {
			continue
		}
		t, err := arsia.ParseTimestamp(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidEntry, f.name, err)
		}
		*f.dst = t
	}
	return e, nil
}

// scopeMismatch explains the most common schema failure of an entry, a
// scope that differs from the key's scope segment, in the protocol's
// terms; "" when that is not the problem.
func scopeMismatch(m map[string]any) string {
	key, _ := m["key"].(string)
	scope, _ := m["scope"].(string)
	owner, _ := m["owner_agent_id"].(string)
	k, err := (KeyPolicy{Owner: owner, AllowReserved: true}).Parse(key)
	if err != nil || scope == "" || string(k.Scope) == scope {
		return ""
	}
	return fmt.Sprintf("scope %s does not match the key's scope segment %s; an entry's scope cannot change (create a new entry and delete this one)", quote(scope), quote(string(k.Scope)))
}

// EntryContext is what entry validation needs beyond the entry: who is
// writing it and under which compliance.
type EntryContext struct {
	// Sender is the writing request's from. When set, it must own the
	// entry (ARSIA-State §3.1.2 rule 1). A store that lets a read_write
	// grantee update an entry checks the grant itself and leaves Sender
	// empty.
	Sender string
	// Compliance is the writing envelope's compliance object, or nil when
	// it has none. Its effective values (profile defaults inherited) are
	// used.
	Compliance map[string]any
	// Registry holds the compliance profiles; nil means
	// compliance.Default().
	Registry *compliance.Registry
}

// effectiveCompliance returns ctx.Compliance with its profile's defaults
// inherited, or nil when there is none. An unknown profile is an error.
func (ctx EntryContext) effectiveCompliance() (map[string]any, error) {
	if ctx.Compliance == nil {
		return nil, nil
	}
	out, _, err := compliance.Apply(map[string]any{"compliance": ctx.Compliance}, ctx.Registry, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnknownProfile, err)
	}
	eff, _ := out["compliance"].(map[string]any)
	return eff, nil
}

// ValidateEntry checks the entry m (the wire object) against the schema and
// the protocol rules of ARSIA-State §1–§2:
//
//   - the key parses (no reserved local key), lies in owner_agent_id's
//     namespace, and its scope segment equals scope ("scope");
//   - the sender, when given, is the owner;
//   - updated_at and expires_at are not before created_at, and a session
//     entry expires at most 24 hours after creation
//     ("exceeds created_at + 24h");
//   - the value is JSON (no NaN or infinities; binary data goes as a base64
//     string) of at most 1 MiB;
//   - personal and sensitive entries need the envelope's legal_basis
//     (an Art. 9(2) one for sensitive); pii_special_categories is present
//     exactly for sensitive entries;
//   - personal data (pseudonymised, personal, sensitive) with its own
//     data_residency must stay inside the envelope's effective
//     data_residency ("residency"): the same code, or a member state when
//     the envelope says EU.
//
// It returns every problem found, joined; each wraps a sentinel
// (ErrInvalidEntry, ErrInvalidKey, ErrInvalidValue, ErrMissingLegalBasis,
// ErrResidency, ErrForbidden, ErrUnknownProfile).
func ValidateEntry(m map[string]any, ctx EntryContext) error {
	e, err := EntryFromMap(m)
	if err != nil {
		return err
	}
	return e.Validate(ctx)
}

// Validate applies the rules of ValidateEntry to an entry already
// converted.
func (e *Entry) Validate(ctx EntryContext) error {
	var errs []error
	add := func(sentinel error, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...))
	}
	if !arsia.ValidAgentID(e.OwnerAgentID) {
		add(ErrInvalidEntry, "owner_agent_id %s is not a valid agent identifier", quote(e.OwnerAgentID))
	} else if k, err := (KeyPolicy{Owner: e.OwnerAgentID}).Parse(e.Key); err != nil {
		errs = append(errs, err)
	} else if k.Scope != e.Scope {
		add(ErrInvalidEntry, "scope %s does not match the key's scope segment %s; an entry's scope cannot change (create a new entry and delete this one)", quote(string(e.Scope)), quote(string(k.Scope)))
	}
	if !e.Scope.Valid() {
		add(ErrInvalidEntry, "unknown scope %s", quote(string(e.Scope)))
	}
	if ctx.Sender != "" && ctx.Sender != e.OwnerAgentID {
		add(ErrForbidden, "sender %s is not the owner %s", quote(ctx.Sender), quote(e.OwnerAgentID))
	}
	if e.Version < 1 {
		add(ErrInvalidEntry, "version %d is below 1", e.Version)
	}
	if e.RetentionDays < 0 {
		add(ErrInvalidEntry, "retention_days %d is below 1", e.RetentionDays)
	}
	switch {
	case e.CreatedAt.IsZero() || e.UpdatedAt.IsZero():
		add(ErrInvalidEntry, "created_at and updated_at are required")
	case e.UpdatedAt.Before(e.CreatedAt):
		add(ErrInvalidEntry, "updated_at is before created_at")
	}
	if !e.ExpiresAt.IsZero() && !e.CreatedAt.IsZero() {
		switch {
		case e.ExpiresAt.Before(e.CreatedAt):
			add(ErrInvalidEntry, "expires_at is before created_at")
		case e.Scope == ScopeSession && e.ExpiresAt.Sub(e.CreatedAt) > SessionMaxLifetime:
			add(ErrInvalidEntry, "session entry expires_at %s exceeds created_at + 24h (%s)",
				arsia.FormatTimestamp(e.ExpiresAt), arsia.FormatTimestamp(e.CreatedAt.Add(SessionMaxLifetime)))
		}
	}
	if err := CheckValue(e.Value); err != nil {
		errs = append(errs, err)
	}
	if err := checkPII(e.PIIClassification, e.PIISpecialCategories, e.DataResidency, ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkPII applies the classification rules shared by entries and SET
// arguments.
func checkPII(pii PII, cats []string, residency string, ctx EntryContext) error {
	var errs []error
	add := func(sentinel error, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...))
	}
	if !pii.Valid() {
		add(ErrInvalidEntry, "unknown pii_classification %s", quote(string(pii)))
		return errors.Join(errs...)
	}
	switch {
	case pii == PIISensitive && len(cats) == 0:
		add(ErrInvalidEntry, "a sensitive entry requires pii_special_categories")
	case pii != PIISensitive && len(cats) > 0:
		add(ErrInvalidEntry, "pii_special_categories is allowed only for sensitive entries")
	}
	for _, c := range cats {
		if !slices.Contains(SpecialCategories(), c) {
			add(ErrInvalidEntry, "unknown pii_special_categories value %s", quote(c))
		}
	}
	if residency != "" && !validZone(residency) {
		add(ErrResidency, "data_residency %s is not an ISO 3166-1 alpha-2 code", quote(residency))
	}
	if !pii.IsPersonalData() {
		return errors.Join(errs...)
	}
	eff, err := ctx.effectiveCompliance()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if pii.NeedsLegalBasis() {
		basis, _ := eff["legal_basis"].(string)
		switch lb := compliance.LegalBasis(basis); {
		case basis == "":
			add(ErrMissingLegalBasis, "pii_classification %s requires compliance.legal_basis in the writing envelope", quote(string(pii)))
		case !lb.Valid():
			add(ErrMissingLegalBasis, "compliance.legal_basis %s is not a GDPR legal basis", quote(basis))
		case pii == PIISensitive && !lb.IsArticle9():
			add(ErrMissingLegalBasis, "sensitive data requires an Art. 9(2) legal_basis, got %s", quote(basis))
		}
	}
	zone, _ := eff["data_residency"].(string)
	if residency != "" && zone != "" && !WithinZone(residency, zone) {
		add(ErrResidency, "entry data_residency %s is outside the envelope's data_residency %s", quote(residency), quote(zone))
	}
	return errors.Join(errs...)
}

// WithinZone reports whether data kept in residency satisfies zone: the
// same code, or an EU/EEA member state when zone is "EU".
func WithinZone(residency, zone string) bool {
	return residency == zone || (zone == "EU" && arsia.IsEUEEAMember(residency))
}

func validZone(s string) bool {
	return len(s) == 2 && 'A' <= s[0] && s[0] <= 'Z' && 'A' <= s[1] && s[1] <= 'Z'
}

// intOf converts a decoded JSON integer (Go integer, integral float64 or
// json.Number) to int.
func intOf(v any) (int, bool) {
	const lim = 1 << 53
	switch n := v.(type) {
	case int:
		return n, n > -lim && n < lim
	case int64:
		return int(n), n > -lim && n < lim
	case float64:
		if n != math.Trunc(n) || math.Abs(n) >= lim {
			return 0, false
		}
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		if err != nil || i <= -lim || i >= lim {
			return 0, false
		}
		return int(i), true
	}
	return 0, false
}
