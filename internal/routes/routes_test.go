package routes

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    Route
	}{
		{"GET /healthz", Route{"GET", "/healthz"}},
		{"POST /approvals/{id}/decisions", Route{"POST", "/approvals/{id}/decisions"}},
		{"GET /{$}", Route{"GET", "/"}},
		{"/approvals/", Route{"", "/approvals/"}},
		{"GET /files/{path...}", Route{"GET", "/files/{path}"}},
		{"GET example.com/x", Route{"GET", "/x"}},
		{"example.com/x", Route{"", "/x"}},
	} {
		if got := parse(c.pattern); got != c.want {
			t.Errorf("parse(%q) = %v, want %v", c.pattern, got, c.want)
		}
	}
}

func TestSample(t *testing.T) {
	for in, want := range map[string]string{
		"/approvals/{id}/decisions": "/approvals/id/decisions",
		"/a/{x}/{y}":                "/a/x/y",
		"/files/{path...}":          "/files/path",
		"/plain":                    "/plain",
		"/broken/{x":                "/broken/{x",
	} {
		if got := Sample(in); got != want {
			t.Errorf("Sample(%q) = %q, want %q", in, got, want)
		}
	}
}

func ok(w http.ResponseWriter, _ *http.Request) {}

// TestRoutesNested lists the routes of handlers mounted under prefixes,
// through middleware (With), and leaves out a route another pattern
// shadows.
func TestRoutesNested(t *testing.T) {
	inner := New()
	inner.HandleFunc("GET /api/things", ok)
	inner.HandleFunc("POST /api/things/{id}", ok)
	inner.HandleFunc("GET /elsewhere", ok) // not reachable through "/api/"
	wrapped := With(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner.ServeHTTP(w, r) }), inner)

	root := New()
	root.Handle("/api/", wrapped)
	root.Handle("/api/things", wrapped) // the same handler twice: listed once
	root.HandleFunc("GET /healthz", ok)
	root.HandleFunc("/legacy", ok)
	fallback := New()
	fallback.HandleFunc("GET /healthz", ok) // shadowed by root's own
	fallback.HandleFunc("GET /only-here", ok)
	root.Handle("/", fallback)

	want := []Route{
		{"GET", "/api/things"},
		{"POST", "/api/things/{id}"},
		{"GET", "/healthz"},
		{"", "/legacy"},
		{"GET", "/only-here"},
	}
	if got := root.Routes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Routes() = %v\nwant %v", got, want)
	}

	// The mux still dispatches like http.ServeMux.
	rec := httptest.NewRecorder()
	root.ServeHTTP(rec, httptest.NewRequest("POST", "/api/things/7", nil))
	if rec.Code != 200 {
		t.Fatalf("POST /api/things/7: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	root.ServeHTTP(rec, httptest.NewRequest("DELETE", "/api/things/7", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE /api/things/7: %d", rec.Code)
	}
}

// TestRoutesUncomparableHandler: a Lister that is not comparable (a
// struct value holding a slice) is never taken for another handler, and
// listing does not panic.
func TestRoutesUncomparableHandler(t *testing.T) {
	root := New()
	root.Handle("/x/", uncomparable{routes: []Route{{"GET", "/x/y"}}})
	if got := root.Routes(); len(got) != 0 {
		t.Fatalf("Routes() = %v, want none (its reach cannot be proven)", got)
	}
}

type uncomparable struct{ routes []Route }

func (u uncomparable) ServeHTTP(http.ResponseWriter, *http.Request) {}
func (u uncomparable) Routes() []Route                              { return u.routes }

func TestRegistrationMistakesPanicAsServeMux(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a duplicate pattern did not panic")
		}
	}()
	m := New()
	m.HandleFunc("GET /a", ok)
	m.HandleFunc("GET /a", ok)
}
