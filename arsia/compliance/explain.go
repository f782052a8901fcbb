package compliance

import (
	"fmt"
	"unicode/utf8"
)

// ExplainabilityRequired reports whether env's effective compliance asks for
// an explanation in the response (explainability_required after
// inheritance: true under every bundled profile except GDPR-STANDARD and
// DORA). A nil reg means Default().
func ExplainabilityRequired(env map[string]any, reg *Registry) bool {
	return EffectiveOf(env, reg).ExplainabilityRequired
}

// ValidateExplainability checks a response against its request (ARSIA-Actions
// §5.2): when the request's effective explainability_required is true, the
// response's payload must carry an explanation object with a reasoning of
// 1–4096 characters, a confidence between 0 and 1 and a non-empty array of
// distinct string inputs_used. It returns nil when no explanation is
// required or the explanation is well formed. An encrypted (string)
// payload must be decrypted first: it is reported as missing. A nil reg
// means Default().
func ValidateExplainability(request, response map[string]any, reg *Registry) []Violation {
	if !ExplainabilityRequired(request, reg) {
		return nil
	}
	missing := func(why string) []Violation {
		return []Violation{{Code: CodeMissingExplanation,
			Message: "explainability_required: response " + why}}
	}
	payload, ok := response["payload"].(map[string]any)
	if !ok {
		if _, enc := response["payload"].(string); enc {
			return missing("payload is encrypted; decrypt it before checking payload.explanation")
		}
		return missing("has no payload object")
	}
	exp, ok := payload["explanation"].(map[string]any)
	if !ok {
		if payload["explanation"] == nil {
			return missing("has no payload.explanation")
		}
		return missing("payload.explanation is not an object")
	}
	var out []Violation
	bad := func(format string, args ...any) {
		out = append(out, Violation{Code: CodeInvalidExplanation,
			Message: "explainability_required: payload.explanation." + fmt.Sprintf(format, args...)})
	}
	switch r, ok := exp["reasoning"].(string); {
	case exp["reasoning"] == nil:
		bad("reasoning is required")
	case !ok:
		bad("reasoning must be a string")
	case r == "" || utf8.RuneCountInString(r) > 4096:
		bad("reasoning must be 1–4096 characters")
	}
	if c := exp["confidence"]; c == nil {
		bad("confidence is required")
	} else if f, ok := number(c); !ok || f < 0 || f > 1 {
		bad("confidence %s must be a number between 0 and 1", render(c))
	}
	switch in, ok := exp["inputs_used"].([]any); {
	case exp["inputs_used"] == nil:
		bad("inputs_used is required")
	case !ok || len(in) == 0:
		bad("inputs_used must be a non-empty array")
	default:
		seen := make(map[string]bool, len(in))
		for _, e := range in {
			s, ok := e.(string)
			if !ok {
				bad("inputs_used must hold strings, got %s", render(e))
				break
			}
			if seen[s] {
				bad("inputs_used repeats %s", render(s))
				break
			}
			seen[s] = true
		}
	}
	return out
}
