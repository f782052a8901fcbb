package compliance

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/custos-runtime/custos/jcs"
)

// DefaultProfile is the profile whose defaults apply when a message carries a
// compliance object without naming a profile, or (leniently) names one the
// registry does not know (Core §4.3.7).
const DefaultProfile = "GDPR-STANDARD"

// DefaultClockSkew is the Core §8.3 timestamp tolerance used when the
// effective profile does not tighten it.
const DefaultClockSkew = 300

// Oversight is the human_oversight mode of a message.
type Oversight string

// The four human_oversight modes.
const (
	OversightNotRequired             Oversight = "not_required"
	OversightRequiredBeforeExecution Oversight = "required_before_execution"
	OversightRequiredWithin24h       Oversight = "required_within_24h"
	OversightRequiredPostExecution   Oversight = "required_post_execution"
)

// Valid reports whether o is one of the four modes.
func (o Oversight) Valid() bool {
	switch o {
	case OversightNotRequired, OversightRequiredBeforeExecution, OversightRequiredWithin24h, OversightRequiredPostExecution:
		return true
	}
	return false
}

// LegalBasis is a GDPR ground for processing personal data.
type LegalBasis string

// GDPR Art. 6(1) grounds.
const (
	LegalBasisConsent             LegalBasis = "consent"
	LegalBasisContract            LegalBasis = "contract"
	LegalBasisLegalObligation     LegalBasis = "legal_obligation"
	LegalBasisVitalInterests      LegalBasis = "vital_interests"
	LegalBasisPublicTask          LegalBasis = "public_task"
	LegalBasisLegitimateInterests LegalBasis = "legitimate_interests"
)

// GDPR Art. 9(2) grounds, for special categories of personal data.
const (
	LegalBasisExplicitConsent           LegalBasis = "explicit_consent"
	LegalBasisEmploymentSocialSecurity  LegalBasis = "employment_social_security"
	LegalBasisVitalInterestsIncapacity  LegalBasis = "vital_interests_incapacity"
	LegalBasisLegitimateActivities      LegalBasis = "legitimate_activities"
	LegalBasisManifestlyPublic          LegalBasis = "manifestly_public"
	LegalBasisLegalClaims               LegalBasis = "legal_claims"
	LegalBasisSubstantialPublicInterest LegalBasis = "substantial_public_interest"
	LegalBasisHealthMedicine            LegalBasis = "health_medicine"
	LegalBasisPublicHealth              LegalBasis = "public_health"
	LegalBasisArchivingResearch         LegalBasis = "archiving_research"
)

// IsArticle6 reports whether b is a GDPR Art. 6(1) ground.
func (b LegalBasis) IsArticle6() bool {
	switch b {
	case LegalBasisConsent, LegalBasisContract, LegalBasisLegalObligation,
		LegalBasisVitalInterests, LegalBasisPublicTask, LegalBasisLegitimateInterests:
		return true
	}
	return false
}

// IsArticle9 reports whether b is a GDPR Art. 9(2) ground.
func (b LegalBasis) IsArticle9() bool {
	switch b {
	case LegalBasisExplicitConsent, LegalBasisEmploymentSocialSecurity, LegalBasisVitalInterestsIncapacity,
		LegalBasisLegitimateActivities, LegalBasisManifestlyPublic, LegalBasisLegalClaims,
		LegalBasisSubstantialPublicInterest, LegalBasisHealthMedicine, LegalBasisPublicHealth,
		LegalBasisArchivingResearch:
		return true
	}
	return false
}

// Valid reports whether b is any GDPR ground ARSIA knows.
func (b LegalBasis) Valid() bool { return b.IsArticle6() || b.IsArticle9() }

// Classification is an EU AI Act risk class (ai_system_classification).
type Classification string

// The four risk classes, lowest first.
const (
	MinimalRisk      Classification = "minimal-risk"
	LimitedRisk      Classification = "limited-risk"
	HighRisk         Classification = "high-risk"
	UnacceptableRisk Classification = "unacceptable-risk"
)

// Rank orders the classes: minimal-risk 1 < limited-risk 2 < high-risk 3 <
// unacceptable-risk 4. Unknown values rank 0, so callers must check Valid
// before comparing.
func (c Classification) Rank() int {
	switch c {
	case MinimalRisk:
		return 1
	case LimitedRisk:
		return 2
	case HighRisk:
		return 3
	case UnacceptableRisk:
		return 4
	}
	return 0
}

// Valid reports whether c is one of the four classes.
func (c Classification) Valid() bool { return c.Rank() > 0 }

// Status is the lifecycle state of a profile.
type Status string

// Profile statuses.
const (
	StatusActive     Status = "active"
	StatusDraft      Status = "draft"
	StatusDeprecated Status = "deprecated"
)

// Profile is a named regulatory profile: the compliance values a message
// inherits when it declares the profile.
type Profile struct {
	Name                 string
	Description          string
	Status               Status
	RegulatoryReferences []string
	Defaults             Defaults
}

// Defaults are a profile's default compliance values. A field the profile
// file leaves out or sets to null is not inherited: RetentionDays is then
// nil, HumanOversight, LegalBasis and DataResidency are empty and
// ClockSkewSeconds is 0.
type Defaults struct {
	AuditRequired          bool
	RetentionDays          *int
	HumanOversight         Oversight
	ExplainabilityRequired bool
	PIIInvolved            bool
	LegalBasis             LegalBasis
	DataResidency          string
	// ClockSkewSeconds tightens the Core §8.3 ±300 s tolerance (10–300); it
	// is a receiver parameter and is never copied into a message.
	ClockSkewSeconds int
	// Extra holds profile-specific defaults the file defines beyond the
	// fields above (the defaults object is open). They are inherited like
	// the others.
	Extra map[string]any

	// present lists the compliance fields the file gives a non-null value,
	// in the order inheritance fills them.
	present []string
}

// inheritable returns the profile's non-null defaults as compliance-field
// values, keyed by field name. The caller owns the result.
// inheritedValue is inheritable()[k] without building the map or copying
// the value; the result must not be modified.
func (d *Defaults) inheritedValue(k string) (any, bool) {
	if !slices.Contains(d.present, k) {
		return nil, false
	}
	switch k {
	case fieldAuditRequired:
		return d.AuditRequired, true
	case fieldRetentionDays:
		return *d.RetentionDays, true
	case fieldHumanOversight:
		return string(d.HumanOversight), true
	case fieldExplainability:
		return d.ExplainabilityRequired, true
	case fieldPIIInvolved:
		return d.PIIInvolved, true
	case fieldLegalBasis:
		return string(d.LegalBasis), true
	case fieldDataResidency:
		return d.DataResidency, true
	}
	return d.Extra[k], true
}

func (d *Defaults) inheritable() map[string]any {
	out := make(map[string]any, len(d.present))
	for _, k := range d.present {
		switch k {
		case fieldAuditRequired:
			out[k] = d.AuditRequired
		case fieldRetentionDays:
			out[k] = *d.RetentionDays
		case fieldHumanOversight:
			out[k] = string(d.HumanOversight)
		case fieldExplainability:
			out[k] = d.ExplainabilityRequired
		case fieldPIIInvolved:
			out[k] = d.PIIInvolved
		case fieldLegalBasis:
			out[k] = string(d.LegalBasis)
		case fieldDataResidency:
			out[k] = d.DataResidency
		default:
			out[k] = deepCopy(d.Extra[k])
		}
	}
	return out
}

// Compliance-field names.
const (
	fieldProfile         = "profile"
	fieldAuditRequired   = "audit_required"
	fieldRetentionDays   = "retention_days"
	fieldHumanOversight  = "human_oversight"
	fieldExplainability  = "explainability_required"
	fieldPIIInvolved     = "pii_involved"
	fieldLegalBasis      = "legal_basis"
	fieldDataResidency   = "data_residency"
	fieldClassification  = "ai_system_classification"
	fieldClockSkewSecond = "clock_skew_seconds"
)

// Registry is a read-only set of profiles, built by Load or Default. It is
// safe for concurrent use. Functions taking a *Registry treat nil (and the
// zero Registry) as Default().
type Registry struct {
	version  string
	profiles map[string]*Profile
	names    []string
}

// ErrInvalidProfiles is wrapped by every Load error.
var ErrInvalidProfiles = errors.New("compliance: invalid profiles file")

//go:embed arsia-compliance-profiles.json
var bundledProfiles []byte

// Default returns the registry of the seven profiles bundled with ARSIA 1.0
// (arsia-compliance-profiles.json, version 1.0.0). It is built on first use
// and shared; Registry has no mutating methods.
func Default() *Registry { return defaultRegistry() }

var defaultRegistry = sync.OnceValue(func() *Registry {
	reg, err := Load(bundledProfiles)
	if err != nil {
		// The file is embedded and covered by tests: failing here is a
		// build defect, not an input error.
		panic("compliance: bundled profiles do not load: " + err.Error())
	}
	return reg
})

// Load parses a profiles file in the format of arsia-compliance-profiles.json:
// {"version", "profiles": {NAME: {name, description, status,
// regulatory_references, defaults}}}. Duplicate member names, unknown enum
// values, retention_days below 1, clock_skew_seconds outside 10–300 and a
// profile whose name differs from its key are rejected. The file must
// define GDPR-STANDARD, the fallback profile. Top-level members other than
// version and profiles ($comment, $schema, generated) are ignored: the
// upstream file does not validate against its own schema, so loading does
// not depend on it.
func Load(data []byte) (*Registry, error) {
	doc, err := jcs.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidProfiles, err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: top level is not an object", ErrInvalidProfiles)
	}
	reg := &Registry{profiles: map[string]*Profile{}}
	if v, ok := top["version"]; ok {
		if reg.version, ok = v.(string); !ok {
			return nil, fmt.Errorf("%w: version is not a string", ErrInvalidProfiles)
		}
	}
	profiles, ok := top["profiles"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: profiles is missing or not an object", ErrInvalidProfiles)
	}
	for key, raw := range profiles {
		if key == "" {
			return nil, fmt.Errorf("%w: a profile has an empty name", ErrInvalidProfiles)
		}
		p, err := parseProfile(key, raw)
		if err != nil {
			return nil, fmt.Errorf("%w: profile %q: %v", ErrInvalidProfiles, key, err)
		}
		reg.profiles[key] = p
		reg.names = append(reg.names, key)
	}
	if _, ok := reg.profiles[DefaultProfile]; !ok {
		return nil, fmt.Errorf("%w: %s, the fallback profile, is not defined", ErrInvalidProfiles, DefaultProfile)
	}
	sort.Strings(reg.names)
	return reg, nil
}

func parseProfile(key string, raw any) (*Profile, error) {
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("not an object")
	}
	p := &Profile{Name: key, Status: StatusActive}
	if v, ok := obj["name"]; ok {
		name, ok := v.(string)
		if !ok || name != key {
			return nil, fmt.Errorf("name %s does not match its key", render(v))
		}
	}
	if v, ok := obj["description"]; ok {
		if p.Description, ok = v.(string); !ok {
			return nil, errors.New("description is not a string")
		}
	}
	if v, ok := obj["status"]; ok {
		s, _ := v.(string)
		switch Status(s) {
		case StatusActive, StatusDraft, StatusDeprecated:
			p.Status = Status(s)
		default:
			return nil, fmt.Errorf("status %s is not active, draft or deprecated", render(v))
		}
	}
	if v, ok := obj["regulatory_references"]; ok {
		refs, ok := v.([]any)
		if !ok {
			return nil, errors.New("regulatory_references is not an array")
		}
		for _, r := range refs {
			s, ok := r.(string)
			if !ok {
				return nil, errors.New("regulatory_references holds a non-string")
			}
			p.RegulatoryReferences = append(p.RegulatoryReferences, s)
		}
	}
	defs, ok := obj["defaults"].(map[string]any)
	if !ok {
		return nil, errors.New("defaults is missing or not an object")
	}
	if err := parseDefaults(&p.Defaults, defs); err != nil {
		return nil, fmt.Errorf("defaults: %v", err)
	}
	return p, nil
}

// inheritOrder is the order in which known defaults are recorded; extension
// fields follow in name order.
var inheritOrder = []string{fieldAuditRequired, fieldRetentionDays, fieldHumanOversight,
	fieldExplainability, fieldPIIInvolved, fieldLegalBasis, fieldDataResidency}

func parseDefaults(d *Defaults, obj map[string]any) error {
	boolField := func(name string, dst *bool) error {
		v, ok := obj[name]
		if !ok || v == nil {
			return nil
		}
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("%s is not a boolean", name)
		}
		*dst = b
		return nil
	}
	if err := boolField(fieldAuditRequired, &d.AuditRequired); err != nil {
		return err
	}
	if err := boolField(fieldExplainability, &d.ExplainabilityRequired); err != nil {
		return err
	}
	if err := boolField(fieldPIIInvolved, &d.PIIInvolved); err != nil {
		return err
	}
	if v := obj[fieldRetentionDays]; v != nil {
		n, ok := integer(v)
		if !ok || n < 1 || n > maxRetentionDays {
			return fmt.Errorf("retention_days %s is not an integer in 1..%d", render(v), maxRetentionDays)
		}
		days := int(n)
		d.RetentionDays = &days
	}
	if v := obj[fieldHumanOversight]; v != nil {
		s, _ := v.(string)
		if !Oversight(s).Valid() {
			return fmt.Errorf("human_oversight %s is not a known mode", render(v))
		}
		d.HumanOversight = Oversight(s)
	}
	if v := obj[fieldLegalBasis]; v != nil {
		s, _ := v.(string)
		if !LegalBasis(s).Valid() {
			return fmt.Errorf("legal_basis %s is not a GDPR Art. 6 or Art. 9 ground", render(v))
		}
		d.LegalBasis = LegalBasis(s)
	}
	if v := obj[fieldDataResidency]; v != nil {
		s, _ := v.(string)
		if !validResidency(s) {
			return fmt.Errorf("data_residency %s is not two upper-case letters", render(v))
		}
		d.DataResidency = s
	}
	if v := obj[fieldClockSkewSecond]; v != nil {
		n, ok := integer(v)
		if !ok || n < 10 || n > DefaultClockSkew {
			return fmt.Errorf("clock_skew_seconds %s is not an integer in 10..300", render(v))
		}
		d.ClockSkewSeconds = int(n)
	}
	for _, k := range inheritOrder {
		if obj[k] != nil {
			d.present = append(d.present, k)
		}
	}
	var extra []string
	for k, v := range obj {
		if v != nil && !slices.Contains(inheritOrder, k) && k != fieldClockSkewSecond && k != fieldProfile {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		if d.Extra == nil {
			d.Extra = map[string]any{}
		}
		d.Extra[k] = obj[k]
		d.present = append(d.present, k)
	}
	return nil
}

// Version is the profiles file's version string ("1.0.0" for the bundled
// file).
func (r *Registry) Version() string { return r.version }

// Get returns the named profile. The Profile is shared: treat it as
// read-only.
func (r *Registry) Get(name string) (*Profile, bool) {
	p, ok := r.profiles[name]
	return p, ok
}

// Names returns the profile names in ascending order.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

// orDefault lets every entry point accept a nil or zero registry; only Load
// builds one with profiles, and Load guarantees the fallback profile.
func (r *Registry) orDefault() *Registry {
	if r == nil || r.profiles == nil {
		return Default()
	}
	return r
}

// RetentionFloor returns the minimum retention_days the compliance-field
// schema imposes for the named profile (MIFID-II and DORA 1827,
// PAC-AGRICULTURE 1096, DSA-VLOP 730). Receivers enforce it on the raw
// message value (rule R4).
func RetentionFloor(profile string) (days int, ok bool) {
	switch profile {
	case "MIFID-II", "DORA":
		return 1827, true
	case "PAC-AGRICULTURE":
		return 1096, true
	case "DSA-VLOP":
		return 730, true
	}
	return 0, false
}

// EffectiveRetention combines a profile's default retention with a requested
// one: the larger wins, since a profile's retention is a minimum. It returns
// nil when neither is set (GDPR-STANDARD mandates no period).
func (p *Profile) EffectiveRetention(requested *int) *int {
	def := p.Defaults.RetentionDays
	switch {
	case def == nil && requested == nil:
		return nil
	case def == nil:
		n := *requested
		return &n
	case requested == nil || *requested < *def:
		n := *def
		return &n
	}
	n := *requested
	return &n
}
