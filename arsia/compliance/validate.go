package compliance

import "fmt"

// Violation codes of the receiver rules (Core §4.3.8) and of the other
// checks in this package.
const (
	CodeUnknownProfile           = "unknown_profile"           // R1
	CodeMissingLegalBasis        = "missing_legal_basis"       // R2
	CodeMissingHumanOversight    = "missing_human_oversight"   // R3
	CodeMissingProfile           = "missing_profile"           // R7
	CodeInsufficientRetention    = "insufficient_retention"    // R4
	CodeInvalidDataResidency     = "invalid_data_residency"    // R5
	CodeClassificationEscalation = "classification_escalation" // R6
	CodeInvalidCompliance        = "invalid_compliance"        // compliance is not an object
	CodeOversightTimeout         = "oversight_timeout"         // CheckOversightTimeout
	CodeMissingExplanation       = "missing_explanation"       // ValidateExplainability
	CodeInvalidExplanation       = "invalid_explanation"       // ValidateExplainability
)

// Violation is one broken compliance rule. Rule is the Core §4.3.8 tag
// ("R1".."R7"), empty for checks outside those rules. Message starts with
// the tag and is safe to return to the sender (it quotes only the message's
// own values, truncated).
type Violation struct {
	Rule    string
	Code    string
	Message string
}

// String returns the message.
func (v Violation) String() string { return v.Message }

// Options tunes Validate. The zero value is the lenient receiver without an
// identity classification.
type Options struct {
	// Strict rejects an unknown profile (R1) instead of falling back to
	// GDPR-STANDARD.
	Strict bool
	// IdentityClassification is the sender's agent-level
	// ai_system_classification from its IdentityRecord. When set, a
	// per-message classification above it is rejected (R6).
	IdentityClassification string
}

// Validate applies the receiver rules of Core §4.3.8 to env and returns the
// violations, in the order R1, R2, R3, R7, R4, R5, R6. Rules read the
// effective compliance (after inheritance, see Apply) except R4, which reads
// the raw per-message retention_days, and R1/R7, which read the declared
// profile. An envelope without a compliance object has no violations. env
// need not be L1-valid; no input makes Validate panic. A nil reg means
// Default().
//
//   - R1 unknown_profile: the declared profile is not in the registry (strict
//     only; lenient receivers fall back to GDPR-STANDARD).
//   - R2 missing_legal_basis: pii_involved is true and legal_basis is absent,
//     empty or not a GDPR Art. 6/Art. 9 ground.
//   - R3 missing_human_oversight: the classification is high-risk (or
//     unacceptable-risk) and human_oversight is absent or not a known mode.
//   - R7 missing_profile: the classification is high-risk (or
//     unacceptable-risk), intent is neither error nor event, and the message
//     declares no profile the registry knows (Identity §4.2).
//   - R4 insufficient_retention: the effective profile has a schema
//     retention floor (RetentionFloor) and the raw retention_days is below it
//     or not a number.
//   - R5 invalid_data_residency: data_residency does not match ^[A-Z]{2}$.
//   - R6 classification_escalation: opts.IdentityClassification is set, the
//     message has a classification, and it ranks above the agent's, or
//     either value is unknown.
func Validate(env map[string]any, reg *Registry, opts Options) []Violation {
	reg = reg.orDefault()
	comp, present, err := complianceOf(env)
	if err != nil {
		return []Violation{{Code: CodeInvalidCompliance, Message: err.Error()}}
	}
	if !present {
		return nil
	}
	// Only members that inheritance fills in but never rewrites are read
	// from the effective compliance, so look them up in place instead of
	// building it (see resolve).
	profile, declared, known, _ := governingProfile(comp, reg)
	eff := func(k string) any { return effectiveValue(comp, profile, k) }
	var out []Violation
	add := func(rule, code, format string, args ...any) {
		out = append(out, Violation{Rule: rule, Code: code, Message: rule + ": " + fmt.Sprintf(format, args...)})
	}

	if declared && !known && opts.Strict {
		add("R1", CodeUnknownProfile, "unknown compliance profile %s", render(comp[fieldProfile]))
	}

	if isTrue(eff(fieldPIIInvolved)) {
		switch lb := eff(fieldLegalBasis); {
		case lb == nil || lb == "":
			add("R2", CodeMissingLegalBasis,
				"compliance.legal_basis is required when pii_involved=true (GDPR Art. 6)")
		case !isLegalBasis(lb):
			add("R2", CodeMissingLegalBasis,
				"compliance.legal_basis %s is not a GDPR Art. 6 or Art. 9 ground (pii_involved=true)", render(lb))
		}
	}

	cls, hasCls := eff(fieldClassification).(string)
	atLeastHigh := hasCls && Classification(cls).Rank() >= HighRisk.Rank()
	if atLeastHigh {
		switch ho := eff(fieldHumanOversight); {
		case ho == nil:
			add("R3", CodeMissingHumanOversight,
				"compliance.human_oversight is required when ai_system_classification=%s", render(cls))
		case !isOversight(ho):
			add("R3", CodeMissingHumanOversight,
				"compliance.human_oversight %s is not a known mode (ai_system_classification=%s)", render(ho), render(cls))
		}
		if intent, _ := env["intent"].(string); intent != "error" && intent != "event" && !known {
			add("R7", CodeMissingProfile,
				"compliance profile required when ai_system_classification=%s (Identity §4.2)", render(cls))
		}
	}

	if floor, ok := RetentionFloor(profile.Name); ok {
		if v := comp[fieldRetentionDays]; v != nil {
			if n, isNum := number(v); !isNum || n < float64(floor) {
				add("R4", CodeInsufficientRetention,
					"%s requires retention_days >= %d, got %s", profile.Name, floor, render(v))
			}
		}
	}

	if v := eff(fieldDataResidency); v != nil {
		if s, ok := v.(string); !ok || !validResidency(s) {
			add("R5", CodeInvalidDataResidency,
				"compliance.data_residency %s must be an ISO 3166-1 alpha-2 code or supranational zone (^[A-Z]{2}$, e.g. 'EU')", render(v))
		}
	}

	if agent := opts.IdentityClassification; agent != "" {
		if v := eff(fieldClassification); v != nil {
			msg, _ := v.(string)
			switch {
			case !Classification(msg).Valid():
				add("R6", CodeClassificationEscalation,
					"per-message classification %s is not a known ai_system_classification", render(v))
			case !Classification(agent).Valid():
				add("R6", CodeClassificationEscalation,
					"agent-level classification %s is not a known ai_system_classification", render(agent))
			case Classification(msg).Rank() > Classification(agent).Rank():
				add("R6", CodeClassificationEscalation,
					"per-message classification %s escalates above agent-level %s (Identity §1.2)", render(msg), render(agent))
			}
		}
	}
	return out
}

func isLegalBasis(v any) bool {
	s, ok := v.(string)
	return ok && LegalBasis(s).Valid()
}

func isOversight(v any) bool {
	s, ok := v.(string)
	return ok && Oversight(s).Valid()
}
