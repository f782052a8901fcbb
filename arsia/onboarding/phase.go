package onboarding

import (
	"fmt"
	"slices"
)

// Phase is one of the six phases of the onboarding flow (ARSIA-Identity
// §7.1). The flow runs them in the order Phases returns and MUST NOT
// reorder or skip one (§7.2); a failure ends it with a denial.
type Phase string

// The six onboarding phases, in order.
const (
	// PhaseDiscoveryAndIdentity (1) fetches the agent's discovery
	// document, identity record and JWKS, verifies the record's signature
	// and the kid prefix, and records the AI system classification.
	PhaseDiscoveryAndIdentity Phase = "discovery_and_identity"
	// PhaseComplianceConformance (2) runs the conformance checks against
	// the agent: envelope validity, signatures, human oversight, audit
	// trail format, classification consistency.
	PhaseComplianceConformance Phase = "compliance_conformance"
	// PhaseCapabilityScoping (3) evaluates the requested capabilities
	// against the receiving organization's CapabilityPolicy.
	PhaseCapabilityScoping Phase = "capability_scoping"
	// PhaseProvenance (4) compares the identity record's creation time
	// with the agent's earliest audit record. It is informational: it
	// never denies.
	PhaseProvenance Phase = "provenance"
	// PhaseDecision (5) emits the approval or denial and, on approval,
	// the scoped access token.
	PhaseDecision Phase = "decision"
	// PhaseOperational (6) is the approved agent's working life under
	// the granted capabilities.
	PhaseOperational Phase = "operational"
)

var phases = []Phase{PhaseDiscoveryAndIdentity, PhaseComplianceConformance, PhaseCapabilityScoping,
	PhaseProvenance, PhaseDecision, PhaseOperational}

// Phases returns the six phases in the order the flow runs them.
func Phases() []Phase { return slices.Clone(phases) }

// Number returns the phase's position, 1 to 6, or 0 for an unknown phase.
func (p Phase) Number() int { return slices.Index(phases, p) + 1 }

// Valid reports whether p is one of the six phases.
func (p Phase) Valid() bool { return p.Number() > 0 }

// Step is one step of Phase 1, discovery and identity verification
// (ARSIA-Identity §7.2). The steps run in the order Phase1Steps returns.
type Step string

// The six Phase 1 steps, in order.
const (
	// StepFetchDiscovery fetches GET /.well-known/arsia.
	StepFetchDiscovery Step = "fetch_discovery"
	// StepFetchIdentityRecord fetches GET /.well-known/arsia/identity.
	StepFetchIdentityRecord Step = "fetch_identity_record"
	// StepFetchJWKS fetches the agent's JWKS.
	StepFetchJWKS Step = "fetch_jwks"
	// StepVerifyIdentitySignature verifies the identity record's
	// X-ARSIA-Sig signature with a key of the JWKS.
	StepVerifyIdentitySignature Step = "verify_identity_signature"
	// StepCheckKidPrefix checks that the signing key's kid starts with
	// the record's agent id.
	StepCheckKidPrefix Step = "check_kid_prefix"
	// StepCheckClassification records the AI system classification and
	// refuses an unacceptable-risk agent.
	StepCheckClassification Step = "check_classification"
)

var phase1Steps = []Step{StepFetchDiscovery, StepFetchIdentityRecord, StepFetchJWKS,
	StepVerifyIdentitySignature, StepCheckKidPrefix, StepCheckClassification}

// Phase1Steps returns the six Phase 1 steps in order.
func Phase1Steps() []Step { return slices.Clone(phase1Steps) }

// Number returns the step's position, 1 to 6, or 0 for an unknown step.
func (s Step) Number() int { return slices.Index(phase1Steps, s) + 1 }

// Valid reports whether s is one of the six Phase 1 steps.
func (s Step) Valid() bool { return s.Number() > 0 }

// DenialReason returns the denial reason a failure of s produces:
// discovery_failed for step 1, identity_verification_failed for steps 2
// to 5, unacceptable_risk_classification for step 6, and "" for an
// unknown step.
func (s Step) DenialReason() string {
	switch n := s.Number(); {
	case n == 1:
		return ReasonDiscoveryFailed
	case n >= 2 && n <= 5:
		return ReasonIdentityVerificationFailed
	case n == 6:
		return ReasonUnacceptableRisk
	}
	return ""
}

// sequence enforces a fixed order: each Advance must name the next item.
// Its zero value expects the first item.
type sequence[T ~string] struct {
	next  int
	ended bool
}

func (s *sequence[T]) advance(order []T, item T, kind string) error {
	switch {
	case s.ended:
		return fmt.Errorf("%w: %s %q after the flow ended", ErrPhaseOrder, kind, item)
	case s.next >= len(order):
		return fmt.Errorf("%w: %s %q after the last %s", ErrPhaseOrder, kind, item, kind)
	case item == order[s.next]:
		s.next++
		return nil
	}
	i := slices.Index(order, item)
	switch {
	case i < 0:
		return fmt.Errorf("%w: unknown %s %q", ErrPhaseOrder, kind, item)
	case i < s.next:
		return fmt.Errorf("%w: %s %q was already taken; next is %q", ErrPhaseOrder, kind, item, order[s.next])
	default:
		return fmt.Errorf("%w: %s %q would skip %q", ErrPhaseOrder, kind, item, order[s.next])
	}
}

func checkOrder[T ~string](order, seq []T, kind string) error {
	var s sequence[T]
	for _, item := range seq {
		if err := s.advance(order, item, kind); err != nil {
			return err
		}
	}
	return nil
}

// CheckPhaseOrder reports whether seq, the phases a flow went through,
// follows the onboarding order: a prefix of Phases, with nothing skipped,
// repeated or reordered. An empty seq is in order (nothing has run yet).
// The error wraps ErrPhaseOrder.
func CheckPhaseOrder(seq []Phase) error { return checkOrder(phases, seq, "phase") }

// CheckStepOrder is CheckPhaseOrder for the Phase 1 steps.
func CheckStepOrder(seq []Step) error { return checkOrder(phase1Steps, seq, "step") }

// PhaseTracker guards a running onboarding flow: Enter admits a phase only
// when it is the next one, and Fail ends the flow. Its zero value expects
// PhaseDiscoveryAndIdentity. A PhaseTracker is not safe for concurrent use;
// one flow is one goroutine's business.
type PhaseTracker struct {
	seq    sequence[Phase]
	failed Phase
}

// Enter records that the flow starts phase p. It refuses, with an error
// wrapping ErrPhaseOrder, a phase that is not the next one and any phase
// after Fail; a refused call changes nothing.
func (t *PhaseTracker) Enter(p Phase) error { return t.seq.advance(phases, p, "phase") }

// Current returns the phase last entered, or "" before the first.
func (t *PhaseTracker) Current() Phase {
	if t.seq.next == 0 {
		return ""
	}
	return phases[t.seq.next-1]
}

// Next returns the phase Enter accepts next; ok is false once the flow
// has ended or reached PhaseOperational.
func (t *PhaseTracker) Next() (p Phase, ok bool) {
	if t.seq.ended || t.seq.next >= len(phases) {
		return "", false
	}
	return phases[t.seq.next], true
}

// Completed returns the phases entered so far, in order.
func (t *PhaseTracker) Completed() []Phase { return slices.Clone(phases[:t.seq.next]) }

// Fail ends the flow in the current phase: the agent is denied, and no
// later phase may be entered. It returns the phase that failed, which the
// decision payload carries; before any phase was entered it fails
// PhaseDiscoveryAndIdentity, the phase that never started properly.
func (t *PhaseTracker) Fail() Phase {
	if !t.seq.ended {
		t.seq.ended = true
		t.failed = t.Current()
		if t.failed == "" {
			t.failed = PhaseDiscoveryAndIdentity
		}
	}
	return t.failed
}

// Failed returns the phase Fail ended the flow in, or "" if it has not
// failed.
func (t *PhaseTracker) Failed() Phase { return t.failed }

// StepTracker is PhaseTracker for the six steps of Phase 1. Its zero value
// expects StepFetchDiscovery. It is not safe for concurrent use.
type StepTracker struct {
	seq sequence[Step]
}

// Fail ends Phase 1 in the step last entered and returns the denial
// reason that step produces (see Step.DenialReason); before any step it is
// discovery_failed. No step may be entered afterwards.
func (t *StepTracker) Fail() string {
	t.seq.ended = true
	if t.seq.next == 0 {
		return ReasonDiscoveryFailed
	}
	return phase1Steps[t.seq.next-1].DenialReason()
}

// Enter records that Phase 1 starts step s; it refuses a step that is not
// the next one with an error wrapping ErrPhaseOrder.
func (t *StepTracker) Enter(s Step) error { return t.seq.advance(phase1Steps, s, "step") }

// Completed returns the steps entered so far, in order.
func (t *StepTracker) Completed() []Step { return slices.Clone(phase1Steps[:t.seq.next]) }

// Done reports whether all six steps have been entered.
func (t *StepTracker) Done() bool { return t.seq.next == len(phase1Steps) }
