// Package routes is an http.ServeMux that can say which routes it serves,
// including those of the handlers mounted on it that have routes of their
// own. The OpenAPI test of custos serve compares that list, taken from the
// real wiring, with the documented paths; nothing else depends on it.
package routes

import (
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
)

// Route is one method and path template a mux serves. Path keeps the
// wildcards of the pattern ({id}; {rest...} as {rest}); Method is empty
// for a pattern registered without one (it serves every method).
type Route struct {
	Method, Path string
}

func (r Route) String() string {
	if r.Method == "" {
		return "* " + r.Path
	}
	return r.Method + " " + r.Path
}

// Lister is a handler that knows its routes.
type Lister interface {
	Routes() []Route
}

// Mux is an http.ServeMux that remembers what was registered on it.
type Mux struct {
	mux     *http.ServeMux
	entries []entry
}

type entry struct {
	pattern string
	route   Route
	handler http.Handler
}

// New returns an empty Mux.
func New() *Mux { return &Mux{mux: http.NewServeMux()} }

// Handle registers h for pattern, as http.ServeMux.Handle (it panics on
// the same mistakes).
func (m *Mux) Handle(pattern string, h http.Handler) {
	m.mux.Handle(pattern, h)
	m.entries = append(m.entries, entry{pattern: pattern, route: parse(pattern), handler: h})
}

// HandleFunc registers f for pattern.
func (m *Mux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(f))
}

// ServeHTTP dispatches r as http.ServeMux does.
func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.mux.ServeHTTP(w, r) }

// Routes lists what the mux serves, sorted by path then method. A
// handler that is a Lister contributes its own routes instead of the
// pattern it was mounted at, each only when a request for it really
// reaches that handler through this mux (a route shadowed by another
// pattern is not served, so it is not listed).
func (m *Mux) Routes() []Route {
	seen := map[Route]bool{}
	var out []Route
	add := func(r Route) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, e := range m.entries {
		l, ok := e.handler.(Lister)
		if !ok {
			add(e.route)
			continue
		}
		for _, sub := range l.Routes() {
			if m.reaches(sub, e.handler) {
				add(sub)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// reaches reports whether a sample request for r is dispatched to h.
func (m *Mux) reaches(r Route, h http.Handler) bool {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	req := &http.Request{Method: method, URL: &url.URL{Path: Sample(r.Path)}, Host: "localhost", Header: http.Header{}}
	_, pattern := m.mux.Handler(req)
	for _, e := range m.entries {
		if e.pattern == pattern && same(e.handler, h) {
			return true
		}
	}
	return false
}

func same(a, b http.Handler) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// Sample is a concrete path for a template: each {wildcard} becomes its
// own name ("/approvals/{id}" → "/approvals/id").
func Sample(template string) string {
	var b strings.Builder
	for i := 0; i < len(template); i++ {
		if template[i] != '{' {
			b.WriteByte(template[i])
			continue
		}
		end := strings.IndexByte(template[i:], '}')
		if end < 0 {
			b.WriteString(template[i:])
			break
		}
		b.WriteString(strings.TrimSuffix(template[i+1:i+end], "..."))
		i += end
	}
	return b.String()
}

// parse splits a ServeMux pattern "[METHOD ][HOST]/PATH" into a Route
// ({$} dropped, {x...} written {x}).
func parse(pattern string) Route {
	var r Route
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		r.Method, pattern = pattern[:i], strings.TrimLeft(pattern[i:], " \t")
	}
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		pattern = pattern[i:] // a host-qualified pattern
	}
	pattern = strings.ReplaceAll(pattern, "{$}", "")
	pattern = strings.ReplaceAll(pattern, "...}", "}")
	r.Path = pattern
	return r
}

// With returns h (typically l wrapped in middleware) listing l's routes.
func With(h http.Handler, l Lister) http.Handler { return &listed{Handler: h, l: l} }

type listed struct {
	http.Handler
	l Lister
}

func (x *listed) Routes() []Route { return x.l.Routes() }
