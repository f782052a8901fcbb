package httpapi

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/custos-runtime/custos/aais"
)

func TestHashPassword(t *testing.T) {
	h, err := HashPassword("s3cret pass")
	if err != nil || !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("%s %v", h, err)
	}
	if h2, _ := HashPassword("s3cret pass"); h2 == h {
		t.Fatal("two hashes of one password are equal (no salt?)")
	}
	if !verifyPassword(h, "s3cret pass") || verifyPassword(h, "s3cret pasS") || verifyPassword(h, "") {
		t.Fatal("argon2id verification")
	}
	if _, err := HashPassword(""); err == nil {
		t.Fatal("an empty password was hashed")
	}
	b, _ := bcrypt.GenerateFromPassword([]byte("pw"), 4)
	if !verifyPassword(string(b), "pw") || verifyPassword(string(b), "pw2") {
		t.Fatal("bcrypt verification")
	}
	for _, bad := range []string{"", "plain", "$argon2i$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=18$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=99999999,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=65536,t=3,p=4$!!$aGFzaGhhc2hoYXNoaGFzaA", "$2b$04$short"} {
		if checkPasswordHash(bad) == nil || verifyPassword(bad, "x") {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := NewPasswords([]PasswordEntry{{Actor: aais.Actor{ID: "a", Type: aais.ActorHuman}, Hash: "plain"}}); err == nil {
		t.Fatal("a plain password was accepted as a hash")
	}
	if _, err := NewPasswords([]PasswordEntry{{Hash: h}}); err == nil {
		t.Fatal("a password without an actor was accepted")
	}
	p, err := NewPasswords([]PasswordEntry{{Actor: aais.Actor{ID: "a", Type: aais.ActorHuman}, Hash: h}})
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := p.Verify("a", "s3cret pass"); !ok || a.ID != "a" {
		t.Fatal("Verify")
	}
	if _, ok := p.Verify("b", "s3cret pass"); ok {
		t.Fatal("an unknown id verified")
	}
	if _, ok := (*Passwords)(nil).Verify("a", "x"); ok {
		t.Fatal("nil Passwords verified")
	}
}

func TestRoleCovers(t *testing.T) {
	for _, c := range []struct {
		role             Role
		capability, prof string
		want             bool
	}{
		{Role{All: true}, "x", "", true},
		{Role{}, "x", "", false},
		{Role{Capabilities: []string{"billing.*"}}, "billing.invoice.create", "", true},
		{Role{Capabilities: []string{"billing.*"}}, "billingx", "", false},
		{Role{Capabilities: []string{"billing.*"}}, "shell.exec", "", false},
		{Role{Capabilities: []string{"billing.*"}, Profiles: []string{"MIFID-II"}}, "billing.refund", "MIFID-II", true},
		{Role{Capabilities: []string{"billing.*"}, Profiles: []string{"MIFID-II"}}, "billing.refund", "", false},
		{Role{Profiles: []string{"MIFID-II"}}, "anything", "MIFID-II", true},
		{Role{Capabilities: []string{"["}}, "[", "", false},
	} {
		if got := c.role.covers(c.capability, c.prof); got != c.want {
			t.Errorf("%+v covers %s/%s: %v", c.role, c.capability, c.prof, got)
		}
	}
	// Without roles configured, everyone decides everything.
	if p := (&Policy{}).Permission(aais.Actor{ID: "x"}, &aais.Request{}); !p.Decide || !p.Approve {
		t.Fatalf("no roles: %+v", p)
	}
}
