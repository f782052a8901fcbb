package httpapi

import (
	"net/http/httptest"
	"testing"

	"github.com/custos-runtime/custos/aais"
)

func TestReplace(t *testing.T) {
	alice := aais.Actor{ID: "alice", Type: aais.ActorHuman}
	bob := aais.Actor{ID: "bob", Type: aais.ActorHuman}
	old, err := NewTokens(map[string]aais.Actor{TokenHash("alice-token"): alice})
	if err != nil {
		t.Fatal(err)
	}
	next, err := NewTokens(map[string]aais.Actor{TokenHash("bob-token"): bob})
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(tok string) (aais.Actor, error) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return old.Authenticate(r)
	}
	if a, err := bearer("alice-token"); err != nil || a.ID != "alice" {
		t.Fatalf("before: %v %v", a, err)
	}
	old.Replace(next)
	if _, err := bearer("alice-token"); err == nil {
		t.Fatal("a replaced token still authenticates")
	}
	if a, err := bearer("bob-token"); err != nil || a.ID != "bob" {
		t.Fatalf("after: %v %v", a, err)
	}

	p := &Policy{Roles: map[string]Role{"ops": {All: true}}, Grants: map[string][]string{"alice": {"ops"}}}
	req := &aais.Request{ID: "apr_1"}
	if !p.Permission(alice, req).Decide || p.Permission(bob, req).Decide {
		t.Fatal("before: alice decides, bob does not")
	}
	p.Replace(&Policy{Roles: map[string]Role{"ops": {All: true}}, Grants: map[string][]string{"bob": {"ops"}}})
	if p.Permission(alice, req).Decide || !p.Permission(bob, req).Decide {
		t.Fatal("after: bob decides, alice does not")
	}
	if got := p.roles("bob"); len(got) != 1 || got[0] != "ops" {
		t.Fatalf("roles after Replace: %v", got)
	}

	s := NewSessions(SessionOptions{})
	rec := httptest.NewRecorder()
	s.start(rec, httptest.NewRequest("POST", "/login", nil), alice)
	s.start(httptest.NewRecorder(), httptest.NewRequest("POST", "/login", nil), bob)
	if n := s.EndSessionsExcept(func(id string) bool { return id == "bob" }); n != 1 {
		t.Fatalf("ended %d sessions, want 1", n)
	}
	r := httptest.NewRequest("GET", "/", nil)
	for _, c := range rec.Result().Cookies() {
		r.AddCookie(c)
	}
	if _, ok := s.lookup(r); ok {
		t.Fatal("alice's session survived her removal")
	}
}
