package arsia

import (
	"fmt"
	"regexp"
	"slices"
	"unicode/utf8"
)

// RiskClass is the EU AI Act-aligned bucket of a risk level (ARSIA-Actions
// §2.2). It is not the ai_system_classification enum of the compliance
// block: risk 9-10 is critical-risk, not unacceptable-risk.
type RiskClass string

// Risk buckets.
const (
	MinimalRisk  RiskClass = "minimal-risk"  // 0-2
	LimitedRisk  RiskClass = "limited-risk"  // 3-4
	ElevatedRisk RiskClass = "elevated-risk" // 5-6
	HighRisk     RiskClass = "high-risk"     // 7-8
	CriticalRisk RiskClass = "critical-risk" // 9-10
)

// Thresholds of the action descriptor schema (ARSIA-Actions §2.1).
const (
	MinRiskLevel                   = 0
	MaxRiskLevel                   = 10
	AuditRequiredFromRisk          = 5
	ExplainabilityRequiredFromRisk = 7
	HumanOversightRequiredFromRisk = 9
)

// RiskClassification returns the bucket of a risk level; a level outside
// 0-10 fails with ErrRiskLevel.
func RiskClassification(level int) (RiskClass, error) {
	switch {
	case level < MinRiskLevel || level > MaxRiskLevel:
		return "", newError("invalid_risk_level", ErrRiskLevel, "risk_level %d is outside 0-10", level)
	case level <= 2:
		return MinimalRisk, nil
	case level <= 4:
		return LimitedRisk, nil
	case level <= 6:
		return ElevatedRisk, nil
	case level <= 8:
		return HighRisk, nil
	}
	return CriticalRisk, nil
}

// ExecutionState is a state of the action execution lifecycle
// (ARSIA-Actions §4.1).
type ExecutionState string

// Execution states.
const (
	StateRequested       ExecutionState = "requested"
	StatePendingApproval ExecutionState = "pending_approval"
	StateExecuting       ExecutionState = "executing"
	StateCompleted       ExecutionState = "completed"
	StateFailed          ExecutionState = "failed"
	StateRolledBack      ExecutionState = "rolled_back"
)

var executionTransitions = map[ExecutionState][]ExecutionState{
	StateRequested:       {StatePendingApproval, StateExecuting, StateFailed},
	StatePendingApproval: {StateExecuting, StateFailed},
	StateExecuting:       {StateCompleted, StateFailed},
	StateCompleted:       {StateRolledBack},
	StateFailed:          nil,
	StateRolledBack:      nil,
}

// IsValidTransition reports whether the lifecycle allows from → to. Failed
// and rolled_back are terminal; unknown states allow nothing.
func IsValidTransition(from, to ExecutionState) bool {
	return slices.Contains(executionTransitions[from], to)
}

// IsTerminalState reports whether s is a known state with no way out.
func IsTerminalState(s ExecutionState) bool {
	next, known := executionTransitions[s]
	return known && len(next) == 0
}

var (
	payloadTypePattern        = `^[a-zA-Z][a-zA-Z0-9]*(\.[a-zA-Z][a-zA-Z0-9]*)*(\/[a-zA-Z][a-zA-Z0-9_-]*)*$`
	payloadTypeRE             = regexp.MustCompile(payloadTypePattern)
	capabilityWildcardPattern = `^[a-zA-Z][a-zA-Z0-9]*(\.[a-zA-Z][a-zA-Z0-9]*)+$|^[a-zA-Z][a-zA-Z0-9]*(\.[a-zA-Z][a-zA-Z0-9]*)*\.\*$`
	capabilityWildcardRE      = regexp.MustCompile(capabilityWildcardPattern)
	timestampPattern          = `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`
	timestampRE               = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$`)
)

// ValidPayloadType reports whether s is a payload type or action id
// (reverse-domain segments with optional /sub-paths).
func ValidPayloadType(s string) bool { return payloadTypeRE.MatchString(s) }

var actionCategories = []string{"data", "communication", "financial", "system", "oversight"}

// ValidateActionDescriptor checks an ActionDescriptor (ARSIA-Actions §2.1)
// given as decoded JSON. It applies the rules of the descriptor JSON Schema
// with the reference validator's messages ("'risk_level' is a required
// property", "True was expected" when risk ≥5 lacks audit_required, ≥7
// lacks explainability_required, ≥9 lacks human_oversight_required) and
// adds the warning risk_34_audit_recommended for risk 3-4 without audit.
func ValidateActionDescriptor(d any) []Issue {
	var l issueList
	obj, ok := objectOf(d)
	if !ok {
		l.schemaErr("", pyRepr(d)+" is not of type 'object'")
		return l
	}
	for _, k := range []string{"action_id", "category", "description", "risk_level", "reversible", "idempotent",
		"required_capabilities", "human_oversight_required", "audit_required", "explainability_required"} {
		if _, ok := obj[k]; !ok {
			l.schemaErr("", pyRepr(k)+" is a required property")
		}
	}
	known := []string{"action_id", "category", "description", "risk_level", "reversible", "idempotent",
		"required_capabilities", "optional_capabilities", "human_oversight_required", "audit_required",
		"retention_days", "explainability_required", "max_execution_ms", "required_approvals"}
	l.additional(obj, "", known)

	if v, ok := obj["action_id"]; ok {
		l.stringPattern("/action_id", v, payloadTypeRE, payloadTypePattern)
	}
	if v, ok := obj["category"]; ok {
		if s, isStr := v.(string); !isStr || !slices.Contains(actionCategories, s) {
			l.schemaErr("/category", pyRepr(v)+" is not one of "+pyRepr(actionCategories))
		}
	}
	if v, ok := obj["description"]; ok {
		l.stringLength("/description", v, 0, 512)
	}
	if v, ok := obj["risk_level"]; ok {
		l.integerRange("/risk_level", v, MinRiskLevel, MaxRiskLevel)
	}
	for _, k := range []string{"reversible", "idempotent", "human_oversight_required", "audit_required", "explainability_required"} {
		if v, ok := obj[k]; ok {
			if _, isBool := v.(bool); !isBool {
				l.schemaErr("/"+k, pyRepr(v)+" is not of type 'boolean'")
			}
		}
	}
	for _, k := range []string{"required_capabilities", "optional_capabilities"} {
		v, ok := obj[k]
		if !ok {
			continue
		}
		arr, isArr := arrayOf(v)
		if !isArr {
			l.schemaErr("/"+k, pyRepr(v)+" is not of type 'array'")
			continue
		}
		if k == "required_capabilities" && len(arr) == 0 {
			l.schemaErr("/"+k, "[] should be non-empty")
		}
		l.unique("/"+k, arr)
		for i, item := range arr {
			p := fmt.Sprintf("/%s/%d", k, i)
			l.stringPattern(p, item, capabilityWildcardRE, capabilityWildcardPattern)
			if s, isStr := item.(string); isStr && utf8.RuneCountInString(s) > MaxCapabilityLength {
				l.schemaErr(p, pyRepr(s)+" is too long")
			}
		}
	}
	for k, minimum := range map[string]int{"retention_days": 1, "max_execution_ms": 100, "required_approvals": 1} {
		if v, ok := obj[k]; ok {
			l.integerRange("/"+k, v, minimum, -1)
		}
	}

	// The schema's if/then: "minimum" ignores non-numbers, so a present
	// non-numeric risk_level triggers every "then", as in the reference.
	if v, ok := obj["risk_level"]; ok {
		f, isNum := numberOf(v)
		for _, rule := range []struct {
			from  float64
			field string
		}{
			{AuditRequiredFromRisk, "audit_required"},
			{ExplainabilityRequiredFromRisk, "explainability_required"},
			{HumanOversightRequiredFromRisk, "human_oversight_required"},
		} {
			if isNum && f < rule.from {
				continue
			}
			if fv, present := obj[rule.field]; present && fv != true {
				l.schemaErr("/"+rule.field, "True was expected")
			}
		}
		if lvl, isInt := integerOf(v); isInt && lvl >= 3 && lvl <= 4 && obj["audit_required"] != true {
			l.add("risk_34_audit_recommended", "/audit_required", SeverityWarning,
				fmt.Sprintf("risk_level %d (limited-risk) actions SHOULD set audit_required to true (ARSIA-Actions §2.2)", lvl))
		}
	}
	return sortByPointer(l)
}

// MaxReasoningLength is the longest explanation reasoning, in characters.
const MaxReasoningLength = 4096

// ValidateExplanation checks a payload.explanation object (ARSIA-Actions
// §5.2) given as decoded JSON: reasoning 1-4096 characters, confidence in
// [0, 1], inputs_used a non-empty list of unique strings, well-formed
// alternatives_considered, model_version and decision_timestamp, and no
// other members. Messages follow the reference validator's wording.
func ValidateExplanation(e any) []Issue {
	var l issueList
	obj, ok := objectOf(e)
	if !ok {
		l.schemaErr("", pyRepr(e)+" is not of type 'object'")
		return l
	}
	for _, k := range []string{"reasoning", "confidence", "inputs_used"} {
		if _, ok := obj[k]; !ok {
			l.schemaErr("", pyRepr(k)+" is a required property")
		}
	}
	l.additional(obj, "", []string{"reasoning", "confidence", "inputs_used", "alternatives_considered", "model_version", "decision_timestamp"})
	if v, ok := obj["reasoning"]; ok {
		l.stringLength("/reasoning", v, 1, MaxReasoningLength)
	}
	if v, ok := obj["confidence"]; ok {
		l.unitInterval("/confidence", v)
	}
	if v, ok := obj["inputs_used"]; ok {
		if arr, isArr := arrayOf(v); !isArr {
			l.schemaErr("/inputs_used", pyRepr(v)+" is not of type 'array'")
		} else {
			if len(arr) == 0 {
				l.schemaErr("/inputs_used", "[] should be non-empty")
			}
			l.unique("/inputs_used", arr)
			for i, item := range arr {
				if _, isStr := item.(string); !isStr {
					l.schemaErr(fmt.Sprintf("/inputs_used/%d", i), pyRepr(item)+" is not of type 'string'")
				}
			}
		}
	}
	if v, ok := obj["alternatives_considered"]; ok {
		if arr, isArr := arrayOf(v); !isArr {
			l.schemaErr("/alternatives_considered", pyRepr(v)+" is not of type 'array'")
		} else {
			for i, item := range arr {
				p := fmt.Sprintf("/alternatives_considered/%d", i)
				alt, isObj := objectOf(item)
				if !isObj {
					l.schemaErr(p, pyRepr(item)+" is not of type 'object'")
					continue
				}
				for _, k := range []string{"option", "reason_rejected", "confidence"} {
					if _, ok := alt[k]; !ok {
						l.schemaErr(p, pyRepr(k)+" is a required property")
					}
				}
				l.additional(alt, p, []string{"option", "reason_rejected", "confidence"})
				for _, k := range []string{"option", "reason_rejected"} {
					if s, ok := alt[k]; ok {
						l.stringLength(p+"/"+k, s, 0, -1)
					}
				}
				if c, ok := alt["confidence"]; ok {
					l.unitInterval(p+"/confidence", c)
				}
			}
		}
	}
	if v, ok := obj["model_version"]; ok {
		l.stringLength("/model_version", v, 0, -1)
	}
	if v, ok := obj["decision_timestamp"]; ok {
		l.stringPattern("/decision_timestamp", v, timestampRE, timestampPattern)
	}
	return sortByPointer(l)
}

// CheckDecisionTimestamp enforces ARSIA-Actions §5.2: an explanation's
// decision_timestamp must not be later than the envelope's ts. Both must be
// well-formed timestamps. The error is an *Error with code
// decision_timestamp_after_envelope (or wraps ErrInvalidTimestamp).
func CheckDecisionTimestamp(decisionTimestamp, envelopeTS string) error {
	d, err := ParseTimestamp(decisionTimestamp)
	if err != nil {
		return err
	}
	ts, err := ParseTimestamp(envelopeTS)
	if err != nil {
		return err
	}
	if d.After(ts) {
		return newError("decision_timestamp_after_envelope", ErrDecisionAfterEnvelope,
			"explanation.decision_timestamp %s is later than envelope ts %s", pyRepr(decisionTimestamp), pyRepr(envelopeTS))
	}
	return nil
}

func (l *issueList) additional(obj map[string]any, pointer string, known []string) {
	var extra []string
	for k := range obj {
		if !slices.Contains(known, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return
	}
	slices.Sort(extra)
	parts := make([]string, len(extra))
	for i, k := range extra {
		parts[i] = pyRepr(k)
	}
	verb := "was"
	if len(extra) > 1 {
		verb = "were"
	}
	l.schemaErr(pointer, "Additional properties are not allowed ("+joinComma(parts)+" "+verb+" unexpected)")
}

func (l *issueList) stringPattern(pointer string, v any, re *regexp.Regexp, pattern string) {
	s, ok := v.(string)
	if !ok {
		l.schemaErr(pointer, pyRepr(v)+" is not of type 'string'")
		return
	}
	if !re.MatchString(s) {
		l.schemaErr(pointer, pyRepr(truncateForMessage(s))+" does not match "+pyRepr(pattern))
	}
}

// stringLength checks a string's length in characters; max < 0 means no
// upper bound.
func (l *issueList) stringLength(pointer string, v any, minLen, maxLen int) {
	s, ok := v.(string)
	if !ok {
		l.schemaErr(pointer, pyRepr(v)+" is not of type 'string'")
		return
	}
	n := utf8.RuneCountInString(s)
	switch {
	case n < minLen && minLen == 1:
		l.schemaErr(pointer, pyRepr(s)+" should be non-empty")
	case n < minLen:
		l.schemaErr(pointer, pyRepr(s)+" is too short")
	case maxLen >= 0 && n > maxLen:
		l.schemaErr(pointer, pyRepr(truncateForMessage(s))+" is too long")
	}
}

// integerRange checks an integer against [minimum, maximum]; maximum < 0
// means no upper bound.
func (l *issueList) integerRange(pointer string, v any, minimum, maximum int) {
	f, isNum := numberOf(v)
	if _, isInt := integerOf(v); !isInt {
		l.schemaErr(pointer, pyRepr(v)+" is not of type 'integer'")
		return
	}
	switch {
	case f < float64(minimum):
		l.schemaErr(pointer, fmt.Sprintf("%s is less than the minimum of %d", pyRepr(v), minimum))
	case maximum >= 0 && isNum && f > float64(maximum):
		l.schemaErr(pointer, fmt.Sprintf("%s is greater than the maximum of %d", pyRepr(v), maximum))
	}
}

func (l *issueList) unitInterval(pointer string, v any) {
	f, ok := numberOf(v)
	if !ok {
		l.schemaErr(pointer, pyRepr(v)+" is not of type 'number'")
		return
	}
	switch {
	case f < 0:
		l.schemaErr(pointer, pyRepr(v)+" is less than the minimum of 0.0")
	case f > 1:
		l.schemaErr(pointer, pyRepr(v)+" is greater than the maximum of 1.0")
	}
}

func (l *issueList) unique(pointer string, arr []any) {
	seen := make(map[string]bool, len(arr))
	for _, item := range arr {
		k := pyRepr(item)
		if seen[k] {
			l.schemaErr(pointer, truncateForMessage(pyRepr(arr))+" has non-unique elements")
			return
		}
		seen[k] = true
	}
}

func joinComma(parts []string) string {
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += ", "
		}
		out += p
	}
	return out
}

// sortByPointer orders issues by pointer, stably, as the reference sorts
// its errors by path.
func sortByPointer(l issueList) []Issue {
	out := []Issue(l)
	slices.SortStableFunc(out, func(a, b Issue) int {
		switch {
		case a.Pointer < b.Pointer:
			return -1
		case a.Pointer > b.Pointer:
			return 1
		}
		return 0
	})
	return out
}
