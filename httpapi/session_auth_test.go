package httpapi

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/custos-runtime/custos/aais"
)

func TestSessionAuth(t *testing.T) {
	toks, _ := NewTokens(map[string]aais.Actor{TokenHash("tok"): {ID: "bot", Type: aais.ActorHuman}})
	sessions := NewSessions(SessionOptions{})
	w := httptest.NewRecorder()
	ss := sessions.start(w, httptest.NewRequest("POST", "/login", nil), aais.Actor{ID: "alice", Type: aais.ActorHuman})
	cookie := w.Result().Cookies()[0]
	// The server's public origin is configured: the Host header alone
	// is not trusted for a name that is not loopback.
	auth := SessionAuth{Bearer: toks, Sessions: sessions, AllowedOrigins: []string{"http://custos.test"}}

	r := httptest.NewRequest("GET", "http://custos.test/v1/reviews", nil)
	r.Header.Set("Authorization", "Bearer tok")
	if a, err := auth.Authenticate(r); err != nil || a.ID != "bot" {
		t.Fatalf("bearer: %+v %v", a, err)
	}
	r = httptest.NewRequest("GET", "http://custos.test/v1/reviews", nil)
	r.AddCookie(cookie)
	if a, err := auth.Authenticate(r); err != nil || a.ID != "alice" {
		t.Fatalf("cookie GET: %+v %v", a, err)
	}
	post := func(origin, csrf string) error {
		r := httptest.NewRequest("POST", "http://custos.test/v1/reviews/x", nil)
		r.AddCookie(cookie)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if csrf != "" {
			r.Header.Set(CSRFHeader, csrf)
		}
		_, err := auth.Authenticate(r)
		return err
	}
	if err := post("http://custos.test", ""); !errors.Is(err, ErrCSRF) || !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("POST without the token: %v", err)
	}
	if err := post("https://evil.example", ss.csrf); !errors.Is(err, ErrCSRF) {
		t.Fatalf("POST from another origin: %v", err)
	}
	if err := post("http://custos.test", ss.csrf); err != nil {
		t.Fatalf("POST with the token: %v", err)
	}
	// Without it, an Origin that only agrees with the Host header (what a
	// DNS-rebinding page sends) is refused, a loopback one accepted.
	bare := SessionAuth{Bearer: toks, Sessions: sessions}
	for host, want := range map[string]bool{"custos.test": false, "evil.example:8080": false, "127.0.0.1:8080": true,
		"localhost:8080": true, "[::1]:8080": true, "127.0.0.1.evil.example": false} {
		r := httptest.NewRequest("POST", "http://"+host+"/v1/reviews/x", nil)
		r.AddCookie(cookie)
		r.Header.Set("Origin", "http://"+host)
		r.Header.Set(CSRFHeader, ss.csrf)
		if _, err := bare.Authenticate(r); (err == nil) != want {
			t.Errorf("Host and Origin %s: %v, want allowed %v", host, err, want)
		}
	}
	r = httptest.NewRequest("GET", "/", nil)
	if _, err := auth.Authenticate(r); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("nothing: %v", err)
	}
}
