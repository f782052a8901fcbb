package trust_test

import (
	"testing"

	"github.com/custos-runtime/custos/gateway/trust"
)

// A peer's JWKS document comes from the network: any bytes give kids of
// the agent only, or an error.
func FuzzKidsOf(f *testing.F) {
	for _, s := range []string{`{"keys":[{"kid":"agent:a.b#1"}]}`, `{"keys":null}`, `[]`, `{"keys":[1,"x",{"kid":{}}]}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kids, err := trust.KidsOf(data, "agent:a.b")
		if err != nil {
			return
		}
		for _, k := range kids {
			if len(k) <= len("agent:a.b#") || k[:len("agent:a.b#")] != "agent:a.b#" {
				t.Fatalf("kid %q is not agent:a.b's", k)
			}
		}
	})
}
