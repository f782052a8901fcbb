package state

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseKey checks that key parsing never panics, that every accepted
// key round-trips and satisfies the grammar, and that every refusal wraps
// ErrInvalidKey.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"agent:acme.alpha/agent/user.profile", "agent:acme.alpha/w1/shared/x", "agent:acme.alpha/agent/agent/x",
		"agent:acme.alpha/tenant/x", "agent:acme.alpha/agent/arsiaprotocol.x", "agent:acme.alpha/agent/a//b",
		"agent:acme.alpha/session/", "agent:/agent/x", "", "agent:a.b/global/" + strings.Repeat("z", 600),
	} {
		f.Add(s, "", false)
		f.Add(s, "agent:acme.alpha", true)
	}
	f.Fuzz(func(t *testing.T, s, owner string, allowReserved bool) {
		p := KeyPolicy{Owner: owner, AllowReserved: allowReserved}
		k, err := p.Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrInvalidKey", s, err)
			}
			return
		}
		if k.String() != s || len(s) > MaxKeyLength || !k.Scope.Valid() || k.Name == "" {
			t.Fatalf("Parse(%q) accepted %+v", s, k)
		}
		if owner != "" && k.Owner != owner {
			t.Fatalf("Parse(%q) owner %q, policy owner %q", s, k.Owner, owner)
		}
		if k.Reserved() && !allowReserved {
			t.Fatalf("Parse(%q) accepted a reserved key", s)
		}
		// A key must also be a valid grant pattern of its owner and match
		// itself.
		pat, err := ParseKeyPattern(s, k.Owner)
		if err == nil && !pat.Matches(s) {
			t.Fatalf("pattern %q does not match itself", s)
		}
		if kp, err := ParseKeyPattern(s+"*", ""); err == nil && !kp.Matches(s) {
			t.Fatalf("pattern %q* does not match %q", s, s)
		}
	})
}
