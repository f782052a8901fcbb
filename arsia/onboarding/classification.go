package onboarding

import (
	"fmt"

	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/identity"
)

// Intents exempt from the profile declaration of ARSIA-Identity §4.2: an
// agent may always report an error or an event.
const (
	IntentError = "error"
	IntentEvent = "event"
)

// CheckProfileRequirement applies ARSIA-Identity §4.2 to an agent being
// onboarded, given the ai_system_classification of its identity record,
// the compliance profile it declares ("" for none) and, when the check
// concerns one message, that message's intent ("" otherwise):
//
//   - an unacceptable-risk agent MUST NOT be onboarded, whatever it
//     declares and whatever the intent (ErrUnacceptableRisk);
//   - a high-risk agent MUST declare a compliance profile
//     (ErrProfileRequired), except for the error and event intents;
//   - a declared profile must be one of reg's (ErrUnknownProfile); a nil
//     reg means compliance.Default(), the seven ARSIA 1.0 profiles;
//   - a missing or unknown classification is refused
//     (ErrUnknownClassification): the rule cannot be applied to it, and
//     onboarding fails closed.
func CheckProfileRequirement(reg *compliance.Registry, classification, declaredProfile, intent string) error {
	class := compliance.Classification(classification)
	if !class.Valid() {
		if classification == "" {
			return fmt.Errorf("%w: ai_system_classification is missing", ErrUnknownClassification)
		}
		return fmt.Errorf("%w: %q", ErrUnknownClassification, classification)
	}
	if class == compliance.UnacceptableRisk {
		return fmt.Errorf("%w (ARSIA-Identity §4.2)", ErrUnacceptableRisk)
	}
	if declaredProfile == "" {
		if class == compliance.HighRisk && intent != IntentError && intent != IntentEvent {
			return fmt.Errorf("%w (ARSIA-Identity §4.2)", ErrProfileRequired)
		}
		return nil
	}
	if reg == nil {
		reg = compliance.Default()
	}
	if _, ok := reg.Get(declaredProfile); !ok {
		return fmt.Errorf("%w: %q", ErrUnknownProfile, declaredProfile)
	}
	return nil
}

// ClassificationConsistent reports whether a classification an agent
// declares (per message, or in its onboarding request) is consistent with
// the one of its identity record (ARSIA-Core §4.3.8 R6): it may be lower
// or equal, never higher, since an agent cannot act above the class it was
// registered with. Unknown or missing values on either side are
// inconsistent: the comparison fails closed.
func ClassificationConsistent(declared, identityClassification string) bool {
	d, i := compliance.Classification(declared), compliance.Classification(identityClassification)
	return d.Valid() && i.Valid() && d.Rank() <= i.Rank()
}

// CheckRecordClassification is ClassificationConsistent against an
// identity record, with an error that says why: ErrUnknownClassification
// for an unknown value or a nil record, ErrClassificationEscalation when
// declared ranks above the record's classification.
func CheckRecordClassification(rec *identity.IdentityRecord, declared string) error {
	if rec == nil {
		return fmt.Errorf("%w: no identity record", ErrUnknownClassification)
	}
	for _, c := range []string{declared, rec.AISystemClassification} {
		if !compliance.Classification(c).Valid() {
			return fmt.Errorf("%w: %q", ErrUnknownClassification, c)
		}
	}
	if !ClassificationConsistent(declared, rec.AISystemClassification) {
		return fmt.Errorf("%w: declared %q, identity record %q", ErrClassificationEscalation, declared, rec.AISystemClassification)
	}
	return nil
}
