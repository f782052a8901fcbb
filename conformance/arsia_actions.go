package conformance

import (
	"errors"
	"fmt"

	"github.com/custos-runtime/custos/arsia"
)

// execActions runs the actions suite: the capability grammar, reserved
// capabilities, matching and downgrade, action descriptors, risk buckets,
// the execution lifecycle and explanations.
func execActions(_ *arsiaEnv, c *arsiaCase) error {
	str := func(k string) string { s, _ := c.Input[k].(string); return s }
	list := func(k string) ([]string, error) {
		raw, ok := c.Input[k].([]any)
		if !ok {
			return nil, fmt.Errorf("%w: input.%s is not a list", errUnsupported, k)
		}
		out := make([]string, 0, len(raw))
		for _, v := range raw {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%w: input.%s holds a non-string", errUnsupported, k)
			}
			out = append(out, s)
		}
		return out, nil
	}
	switch op := c.operation(""); op {
	case "validate_capability":
		var errs []string
		if err := arsia.ValidateCapability(str("capability")); err != nil {
			errs = append(errs, err.Error())
		}
		return expectValidity(c, errs)
	case "is_reserved_capability":
		return expectEqual(c, "reserved", arsia.IsReservedCapability(str("capability")))
	case "match_capability":
		return expectEqual(c, "matches", arsia.MatchCapability(str("scope_entry"), str("requested")))
	case "match_capabilities":
		scope, err := list("scope")
		if err != nil {
			return err
		}
		requested, err := list("requested")
		if err != nil {
			return err
		}
		return expectEqual(c, "matches", arsia.MatchCapabilities(scope, requested))
	case "downgrade_capabilities":
		scope, err := list("scope")
		if err != nil {
			return err
		}
		requested, err := list("requested")
		if err != nil {
			return err
		}
		effective, err := arsia.DowngradeCapabilities(requested, scope)
		if done, res := expectRaises(c, err); done {
			return res
		}
		return expectEqual(c, "effective", effective)
	case "validate_action_descriptor":
		return expectValidity(c, issueStrings(arsia.ErrorIssues(arsia.ValidateActionDescriptor(c.Input["descriptor"]))))
	case "get_risk_classification":
		level, ok := c.Input["risk_level"].(int)
		if !ok {
			return fmt.Errorf("%w: input.risk_level is not an integer", errUnsupported)
		}
		class, err := arsia.RiskClassification(level)
		if done, res := expectRaises(c, err); done {
			return res
		}
		return expectEqual(c, "classification", string(class))
	case "is_valid_transition":
		ok := arsia.IsValidTransition(arsia.ExecutionState(str("from_state")), arsia.ExecutionState(str("to_state")))
		want, isBool := c.Expected["valid"].(bool)
		if !isBool {
			return errors.New("expected.valid is not a boolean")
		}
		if ok != want {
			return fmt.Errorf("transition %s -> %s: got valid=%v, want %v", str("from_state"), str("to_state"), ok, want)
		}
		return nil
	case "validate_explanation":
		return expectValidity(c, issueStrings(arsia.ErrorIssues(arsia.ValidateExplanation(c.Input["explanation"]))))
	default:
		return fmt.Errorf("%w: actions operation %q", errUnsupported, op)
	}
}

// issueStrings renders validator findings for expectValidity.
func issueStrings(issues []arsia.Issue) []string {
	out := make([]string, len(issues))
	for i, is := range issues {
		out[i] = is.String()
	}
	return out
}
