package identity_test

import (
	"strings"
	"testing"

	"github.com/custos-runtime/custos/arsia/identity"
)

func TestParseSignatureHeader(t *testing.T) {
	raw := make([]byte, 64)
	raw[0] = 0xfb
	for name, tc := range map[string]struct {
		v  string
		ok bool
	}{
		"base64url":  {"-" + strings.Repeat("A", 85), true},
		"std padded": {"+" + strings.Repeat("A", 85) + "==", true},
		"short":      {"AAAA", false},
		"empty":      {" ", false},
		"garbage":    {"!!!", false},
		"too long":   {strings.Repeat("A", 200), false},
	} {
		b, err := identity.ParseSignatureHeader(tc.v)
		if (err == nil) != tc.ok || (tc.ok && len(b) != 64) {
			t.Errorf("%s: %d bytes, %v", name, len(b), err)
		}
	}
}

// The X-ARSIA-Sig header comes from the network: any value is an error or
// a 64-byte signature, never a panic.
func FuzzParseSignatureHeader(f *testing.F) {
	for _, s := range []string{"", "AAAA", "-_-_", "+/+/==", " \t", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		b, err := identity.ParseSignatureHeader(v)
		if err == nil && len(b) != 64 {
			t.Fatalf("%q: %d bytes", v, len(b))
		}
	})
}
