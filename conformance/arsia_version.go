package conformance

import (
	"fmt"

	"github.com/custos-runtime/custos/arsia"
)

// execVersion runs the version suite: parse_version, compare_versions and
// is_compatible.
func execVersion(_ *arsiaEnv, c *arsiaCase) error {
	str := func(k string) string { s, _ := c.Input[k].(string); return s }
	switch op := c.operation(""); op {
	case "parse_version":
		v, err := arsia.ParseVersion(str("value"))
		if done, res := expectRaises(c, err); done {
			return res
		}
		return firstErr(expectEqual(c, "major", v.Major), expectEqual(c, "minor", v.Minor))
	case "compare_versions":
		r, err := arsia.CompareVersions(str("a"), str("b"))
		if done, res := expectRaises(c, err); done {
			return res
		}
		return expectEqual(c, "result", r)
	case "is_compatible":
		ok, err := arsia.IsCompatible(str("our_version"), str("their_version"), str("their_min_v"))
		if done, res := expectRaises(c, err); done {
			return res
		}
		return expectEqual(c, "compatible", ok)
	default:
		return fmt.Errorf("%w: version operation %q", errUnsupported, op)
	}
}
