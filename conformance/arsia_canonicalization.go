package conformance

import (
	"encoding/hex"
	"fmt"
	"maps"

	"github.com/custos-runtime/custos/jcs"
)

// execCanonicalization checks that JCS(message without security) equals the
// vector's canonical_bytes_hex.
func execCanonicalization(env *arsiaEnv, c *arsiaCase) error {
	v, err := env.vector(c)
	if err != nil {
		return err
	}
	got, err := signingInput(v)
	if err != nil {
		return err
	}
	crypto, _ := v["crypto"].(map[string]any)
	field, _ := c.Expected["match_vector_field"].(string)
	if field == "" {
		field = "canonical_bytes_hex"
	}
	want, _ := crypto[field].(string)
	if want == "" {
		return fmt.Errorf("vector %v has no crypto.%s", v["id"], field)
	}
	if gotHex := hex.EncodeToString(got); gotHex != want {
		return fmt.Errorf("canonical bytes differ:\n got  %s\n want %s", got, mustHex(want))
	}
	return nil
}

// signingInput is JCS of a vector's message without its security member.
func signingInput(v map[string]any) ([]byte, error) {
	msg, ok := v["message"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("vector %v has no message object", v["id"])
	}
	unsigned := maps.Clone(msg)
	delete(unsigned, "security")
	return jcs.CanonicalizeValue(unsigned)
}

func mustHex(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		return s
	}
	return string(b)
}
