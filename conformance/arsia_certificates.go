package conformance

import (
	"fmt"

	"github.com/custos-runtime/custos/arsia/identity"
)

// execCertificates runs the certificates suite: the reference SDK's trust
// level classification (compute_trust_level) and the QcStatements probe
// (has_qc_statements). Both are identity.ClassifyChain semantics: the
// suite's certificates are self-signed, so it checks what a chain claims,
// not what a receiver would verify (identity.VerifyChain, tested in
// arsia/identity).
func execCertificates(_ *arsiaEnv, c *arsiaCase) error {
	switch op := c.operation(""); op {
	case "compute_trust_level":
		record, ok := c.Input["identity_record"].(map[string]any)
		if !ok {
			return fmt.Errorf("%w: input.identity_record is not an object", errUnsupported)
		}
		return expectEqual(c, "trust_level", identity.ClassifyChain(chainOf(record)).String())
	case "has_qc_statements":
		pem, ok := c.Input["cert_pem"].(string)
		if !ok {
			return fmt.Errorf("%w: input.cert_pem is not a string", errUnsupported)
		}
		present, err := identity.HasQCStatements(pem)
		if done, res := expectRaises(c, err); done {
			return res
		}
		return expectEqual(c, "present", present)
	default:
		return fmt.Errorf("%w: certificates operation %q", errUnsupported, op)
	}
}

// chainOf returns the record's certificate_chain. A member that is not a
// list, or an entry that is not a string, yields an entry no parser
// accepts, so the record falls to L1 as an unparseable chain would.
func chainOf(record map[string]any) []string {
	raw, present := record["certificate_chain"]
	if !present || raw == nil {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		return []string{""}
	}
	chain := make([]string, len(list))
	for i, v := range list {
		chain[i], _ = v.(string)
	}
	return chain
}
