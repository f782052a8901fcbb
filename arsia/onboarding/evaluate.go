package onboarding

import (
	"slices"

	"github.com/custos-runtime/custos/arsia"
)

// Denial reasons of an onboarding decision (ARSIA-Identity §7.6), one per
// phase that can deny.
const (
	// ReasonDiscoveryFailed: Phase 1 step 1, the discovery document could
	// not be fetched or is invalid.
	ReasonDiscoveryFailed = "discovery_failed"
	// ReasonIdentityVerificationFailed: Phase 1 steps 2 to 5, the
	// identity record, JWKS, signature or kid prefix did not verify.
	ReasonIdentityVerificationFailed = "identity_verification_failed"
	// ReasonUnacceptableRisk: Phase 1 step 6, the agent is classified
	// unacceptable-risk.
	ReasonUnacceptableRisk = "unacceptable_risk_classification"
	// ReasonConformanceFailed: Phase 2, a conformance check failed.
	ReasonConformanceFailed = "conformance_failed"
	// ReasonNoPermittedCapabilities: Phase 3, the policy grants nothing
	// that was asked for, or something asked for is prohibited.
	ReasonNoPermittedCapabilities = "no_permitted_capabilities"
)

// reasonPhase maps each denial reason to the phase that produces it.
var reasonPhase = map[string]Phase{
	ReasonDiscoveryFailed:            PhaseDiscoveryAndIdentity,
	ReasonIdentityVerificationFailed: PhaseDiscoveryAndIdentity,
	ReasonUnacceptableRisk:           PhaseDiscoveryAndIdentity,
	ReasonConformanceFailed:          PhaseComplianceConformance,
	ReasonNoPermittedCapabilities:    PhaseCapabilityScoping,
}

// DenialReasons returns the five denial reasons, in phase order.
func DenialReasons() []string {
	return []string{ReasonDiscoveryFailed, ReasonIdentityVerificationFailed, ReasonUnacceptableRisk,
		ReasonConformanceFailed, ReasonNoPermittedCapabilities}
}

// PhaseOf returns the phase that produces a denial reason.
func PhaseOf(reason string) (Phase, bool) {
	p, ok := reasonPhase[reason]
	return p, ok
}

// Decision is the outcome of evaluating requested capabilities against a
// policy (ARSIA-Identity §8.3). Every requested capability lands in
// exactly one of the three lists, in request order and without repeats.
type Decision struct {
	// Approved is true when at least one capability is granted and none
	// requested is prohibited.
	Approved bool
	// FreelyAllowed are the granted capabilities whose rule is allowed.
	FreelyAllowed []string
	// OversightRequired are the granted capabilities whose every
	// invocation needs a human approval first.
	OversightRequired []string
	// Denied are the capabilities not granted: prohibited, above their
	// rule's max_risk_level, named by no rule (deny by default), or not
	// valid concrete capability names.
	Denied []string
	// DenialReason is [no_permitted_capabilities] when Approved is
	// false, and empty otherwise.
	DenialReason []string
}

// Effective returns the granted capabilities, FreelyAllowed then
// OversightRequired: what an access token's scope may carry. It is empty
// when the decision is not approved.
func (d Decision) Effective() []string {
	if !d.Approved {
		return []string{}
	}
	return append(slices.Clone(d.FreelyAllowed), d.OversightRequired...)
}

// Evaluate applies the policy to the requested capabilities
// (ARSIA-Identity §8.3):
//
//  1. a capability is matched against the policy's rules with
//     arsia.MatchCapability, so requests that are wildcards or not valid
//     capability names match nothing; should several rules match, the
//     most restrictive status wins;
//  2. a rule with max_risk_level whose capability has, in
//     actionRiskLevels, a risk level above it or outside 0 to 10 is
//     treated as prohibited;
//  3. a prohibited capability is denied, and its presence denies the
//     whole request;
//  4. a capability no rule matches is denied (deny by default), which
//     alone does not deny the request: a partial match is approved;
//  5. a request left with nothing granted, including an empty one, is
//     denied with no_permitted_capabilities.
//
// actionRiskLevels may be nil; a capability without a risk level there is
// not limited by max_risk_level at onboarding time (the limit still
// applies to each invocation). A nil or invalid policy grants nothing.
// Evaluate never fails: a request it cannot grant is denied.
func Evaluate(policy *CapabilityPolicy, requested []string, actionRiskLevels map[string]int) Decision {
	d := Decision{FreelyAllowed: []string{}, OversightRequired: []string{}, Denied: []string{}}
	usable := policy.Validate() == nil
	prohibited := false
	seen := make(map[string]bool, len(requested))
	for _, c := range requested {
		if seen[c] {
			continue
		}
		seen[c] = true
		status, matched := Status(""), false
		if usable {
			status, matched = policy.statusFor(c, actionRiskLevels)
		}
		switch {
		case !matched:
			d.Denied = append(d.Denied, c)
		case status == StatusAllowed:
			d.FreelyAllowed = append(d.FreelyAllowed, c)
		case status == StatusOversightRequired:
			d.OversightRequired = append(d.OversightRequired, c)
		default:
			prohibited = true
			d.Denied = append(d.Denied, c)
		}
	}
	d.Approved = !prohibited && len(d.FreelyAllowed)+len(d.OversightRequired) > 0
	if !d.Approved {
		d.DenialReason = []string{ReasonNoPermittedCapabilities}
	}
	return d
}

// statusFor returns the effective status of requested under p, and
// whether any rule matched it.
func (p *CapabilityPolicy) statusFor(requested string, risk map[string]int) (Status, bool) {
	status, matched := Status(""), false
	for _, r := range p.Capabilities {
		if !arsia.MatchCapability(r.Capability, requested) {
			continue
		}
		s := r.Status
		if r.MaxRiskLevel != nil {
			if level, ok := risk[requested]; ok && (level < 0 || level > MaxRiskLevel || level > *r.MaxRiskLevel) {
				s = StatusProhibited
			}
		}
		if !matched || s.restrictiveness() > status.restrictiveness() {
			status = s
		}
		matched = true
	}
	return status, matched
}
