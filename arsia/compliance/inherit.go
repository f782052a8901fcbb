package compliance

import (
	"errors"
	"fmt"
	"math"
)

// ErrUnknownProfile is returned by Apply in strict mode when the message
// names a profile the registry does not hold.
var ErrUnknownProfile = errors.New("compliance: unknown compliance profile")

// ErrInvalidCompliance is returned when the envelope's compliance member is
// present but is not a JSON object.
var ErrInvalidCompliance = errors.New("compliance: compliance is not a JSON object")

// resolution is a message's compliance object together with the profile
// that governs it and the values it ends up with after inheritance.
type resolution struct {
	raw         map[string]any // the message's own compliance object
	declared    bool           // the message names a profile (non-null)
	declaredStr string         // the name as a string; "" if not a string
	known       bool           // the declared profile is in the registry
	profile     *Profile       // declared profile if known, else the fallback
	effective   map[string]any // raw + inherited defaults (a fresh map)
	warnings    []string
}

// complianceOf returns the envelope's compliance object; ok is false when the
// member is absent or null (no compliance applies, priority 4).
func complianceOf(env map[string]any) (comp map[string]any, ok bool, err error) {
	v, present := env["compliance"]
	if !present || v == nil {
		return nil, false, nil
	}
	comp, isObj := v.(map[string]any)
	if !isObj {
		return nil, false, fmt.Errorf("%w (got %s)", ErrInvalidCompliance, render(v))
	}
	return comp, true, nil
}

// resolve performs Core §4.3.7 inheritance on a compliance object: the
// message's own non-null values win, then the declared profile's defaults,
// then GDPR-STANDARD's when no (known) profile is declared. It then applies
// the retention floor and the pii_involved ⇒ audit_required rule. It never
// fails: an unknown profile is reported through known and a warning.
func resolve(comp map[string]any, reg *Registry) *resolution {
	r := &resolution{raw: comp}
	r.profile, r.declared, r.known, r.declaredStr = governingProfile(comp, reg)
	if r.declared && !r.known {
		r.warnings = append(r.warnings, fmt.Sprintf(
			"unknown compliance profile %s — falling back to %s", render(comp[fieldProfile]), DefaultProfile))
	}

	eff := copyObject(comp)
	for k, def := range r.profile.Defaults.inheritable() {
		if eff[k] == nil {
			eff[k] = def
		}
	}

	// A profile's retention is a minimum: a shorter per-message period is
	// raised to it (Core §4.3.7). Receivers still reject the raw value
	// where the schema sets a floor (R4).
	if floor := r.profile.Defaults.RetentionDays; floor != nil {
		if v := comp[fieldRetentionDays]; v != nil {
			if n, ok := number(v); ok && n < float64(*floor) {
				eff[fieldRetentionDays] = *floor
				r.warnings = append(r.warnings, fmt.Sprintf(
					"retention_days %s is below profile %s minimum %d — using profile minimum",
					render(v), r.profile.Name, *floor))
			}
		}
	}

	// Personal data is always audited (Core §4.3.8, compliance-field
	// schema): the declared audit_required cannot switch it off.
	if isTrue(eff[fieldPIIInvolved]) && !isTrue(eff[fieldAuditRequired]) {
		r.warnings = append(r.warnings, fmt.Sprintf(
			"pii_involved=true forces audit_required=true (was %s)", render(eff[fieldAuditRequired])))
		eff[fieldAuditRequired] = true
	}
	r.effective = eff
	return r
}

// governingProfile is the profile part of resolve: the declared profile
// when the registry knows it, else the fallback.
func governingProfile(comp map[string]any, reg *Registry) (p *Profile, declared, known bool, declaredStr string) {
	p, _ = reg.Get(DefaultProfile)
	if v := comp[fieldProfile]; v != nil {
		declared = true
		declaredStr, _ = v.(string)
		if dp, ok := reg.Get(declaredStr); ok && declaredStr != "" {
			known, p = true, dp
		}
	}
	return p, declared, known, declaredStr
}

// effectiveValue is resolve(comp, ...).effective[k] for the members that
// resolve does not rewrite after inheritance (all but retention_days and
// audit_required), read without copying anything. The result must not be
// modified.
func effectiveValue(comp map[string]any, p *Profile, k string) any {
	if v := comp[k]; v != nil {
		return v
	}
	if def, ok := p.Defaults.inheritedValue(k); ok {
		return def
	}
	return nil
}

// Apply performs sender-side field inheritance (Core §4.3.7) and returns a
// deep copy of env whose compliance object holds the effective values:
//
//  1. a value the message sets (non-null) wins;
//  2. otherwise the declared profile's non-null default is filled in;
//  3. a compliance object that declares no profile inherits GDPR-STANDARD;
//  4. an envelope without a compliance object (or with compliance: null) is
//     returned unchanged (still copied).
//
// An unknown profile is an error wrapping ErrUnknownProfile when strict is
// set; otherwise the GDPR-STANDARD defaults apply and a warning says so. The
// profile name itself is never added or rewritten. A retention_days below
// the profile's default is raised to it, and pii_involved=true forces
// audit_required=true; both add a warning. Warnings are returned, not
// logged. env is never modified; a nil reg means Default().
func Apply(env map[string]any, reg *Registry, strict bool) (out map[string]any, warnings []string, err error) {
	reg = reg.orDefault()
	comp, ok, err := complianceOf(env)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return copyObject(env), nil, nil
	}
	r := resolve(comp, reg)
	if r.declared && !r.known && strict {
		return nil, nil, fmt.Errorf("%w %s", ErrUnknownProfile, render(comp[fieldProfile]))
	}
	out = make(map[string]any, len(env))
	for k, v := range env {
		if k != "compliance" {
			out[k] = deepCopy(v)
		}
	}
	out["compliance"] = r.effective
	return out, r.warnings, nil
}

// EffectiveProfile returns the profile that governs env: the declared one
// when the registry knows it, GDPR-STANDARD when compliance is present but
// names no known profile. ok is false when env has no compliance object (or
// an invalid one).
func EffectiveProfile(env map[string]any, reg *Registry) (p *Profile, ok bool) {
	reg = reg.orDefault()
	comp, present, err := complianceOf(env)
	if err != nil || !present {
		return nil, false
	}
	return resolve(comp, reg).profile, true
}

// EffectiveRetentionDays returns the retention period, in days, that
// governs env's audit records: the larger of the message's retention_days
// and its profile's default. ok is false when there is none (no compliance
// object, or GDPR-STANDARD with no per-message value).
func EffectiveRetentionDays(env map[string]any, reg *Registry) (days int, ok bool) {
	reg = reg.orDefault()
	comp, present, err := complianceOf(env)
	if err != nil || !present {
		return 0, false
	}
	r := resolve(comp, reg)
	// A fractional period is rounded up: retention may grow, never shrink.
	if f, isNum := number(r.effective[fieldRetentionDays]); isNum && f >= 1 {
		return int(math.Ceil(min(f, math.MaxInt32))), true
	}
	if def := r.profile.Defaults.RetentionDays; def != nil {
		return *def, true
	}
	return 0, false
}
