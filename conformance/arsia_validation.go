package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/custos-runtime/custos/arsia"
)

// execValidation runs the validation category: validate_envelope (the
// default) on a vector's message with the lenient receiver, and
// validate_identity_consistency on the three identity layers.
func execValidation(env *arsiaEnv, c *arsiaCase) error {
	switch op := c.operation("validate_envelope"); op {
	case "validate_envelope":
		v, err := env.vector(c)
		if err != nil {
			return err
		}
		issues := arsia.ErrorIssues(arsia.Validate(v["message"], arsia.ValidateOptions{}))
		return expectValidity(c, issueStrings(issues))
	case "validate_identity_consistency":
		str := func(k string) string { s, _ := c.Input[k].(string); return s }
		warnings := arsia.CheckIdentityConsistency(str("from_agent"), str("kid"), str("identity_agent_id"))
		if err := firstErr(expectEqual(c, "consistent", len(warnings) == 0), expectEqual(c, "warning_count", len(warnings))); err != nil {
			return err
		}
		if kw, ok := c.Expected["warning_contains"].(string); ok {
			if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(strings.ToLower(w), strings.ToLower(kw)) }) {
				return fmt.Errorf("no warning contains %q: %v", kw, warnings)
			}
		}
		return nil
	default:
		return fmt.Errorf("%w: validation operation %q", errUnsupported, op)
	}
}
