package conformance

import (
	"fmt"

	"github.com/custos-runtime/custos/arsia"
)

// execIdentity runs the identity suite: agent identifier parsing
// (parse_or_validate, the default) and comparison (compare_agent_ids).
func execIdentity(_ *arsiaEnv, c *arsiaCase) error {
	switch op := c.operation("parse_or_validate"); op {
	case "parse_or_validate":
		s, ok := c.Input["agent_id"].(string)
		if !ok {
			return fmt.Errorf("%w: input.agent_id is not a string", errUnsupported)
		}
		id, err := arsia.ParseAgentID(s)
		var errs []string
		if err != nil {
			errs = append(errs, err.Error())
		}
		if err := expectValidity(c, errs); err != nil {
			return err
		}
		want, ok := c.Expected["parsed"].(map[string]any)
		if !ok || err != nil {
			return nil
		}
		var resource any
		if id.Resource != "" {
			resource = id.Resource
		}
		got := map[string]any{"org": id.Org, "name": id.Name, "sub": id.Sub, "resource": resource}
		for k, w := range want {
			if !sameJSON(got[k], w) {
				return fmt.Errorf("parsed.%s: got %s, want %s", k, compactJSON(got[k]), compactJSON(w))
			}
		}
		return nil
	case "compare_agent_ids":
		a, _ := c.Input["agent_id_a"].(string)
		b, _ := c.Input["agent_id_b"].(string)
		return expectEqual(c, "equal", arsia.SameAgent(a, b))
	default:
		return fmt.Errorf("%w: identity operation %q", errUnsupported, op)
	}
}
