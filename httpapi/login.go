package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/asc"
)

// How a session's actor signed in (the authenticated_by of its decisions).
const (
	AuthAPIToken          = "api_token"
	AuthSessionPassword   = "session/password"
	AuthSessionLoginToken = "session/login_token"
)

// lookup returns the actor of a token.
func (t *Tokens) lookup(token string) (aais.Actor, bool) {
	if t == nil || token == "" {
		return aais.Actor{}, false
	}
	sum := sha256.Sum256([]byte(token))
	var found aais.Actor
	matched := 0
	for h, a := range t.table() {
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			found, matched = a, 1
		}
	}
	return found, matched == 1
}

// loginBody is what POST /login accepts: a token, or an id and password.
type loginBody struct {
	Token    string `json:"token"`
	ID       string `json:"id"`
	Password string `json:"password"`
}

// loginAnswer is what POST /login and GET /approvals/me answer.
type loginAnswer struct {
	Actor     aais.Actor `json:"actor"`
	Roles     []string   `json:"roles"`
	CSRFToken string     `json:"csrf_token,omitempty"`
	ExpiresAt *time.Time `json:"session_expires_at,omitempty"`
}

// throttle limits failed sign-ins per client address and per reviewer id:
// after max failures within window, further attempts are refused until
// the window has passed.
type throttle struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	now    func() time.Time
	fails  map[string][]time.Time
}

func newThrottle(max int, window time.Duration, now func() time.Time) *throttle {
	return &throttle{max: max, window: window, now: now, fails: map[string][]time.Time{}}
}

// blocked returns how long keys must wait (0: they may try now).
func (t *throttle) blocked(keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var wait time.Duration
	for _, k := range keys {
		f := t.recent(k, now)
		if len(f) >= t.max {
			if w := f[0].Add(t.window).Sub(now); w > wait {
				wait = w
			}
		}
	}
	return wait
}

func (t *throttle) recent(k string, now time.Time) []time.Time {
	f := t.fails[k]
	i := 0
	for i < len(f) && !now.Before(f[i].Add(t.window)) {
		i++
	}
	f = f[i:]
	if len(f) == 0 {
		delete(t.fails, k)
	} else {
		t.fails[k] = f
	}
	return f
}

func (t *throttle) fail(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if len(t.fails) > 100000 { // bound memory under a flood
		t.fails = map[string][]time.Time{}
	}
	for _, k := range keys {
		t.fails[k] = append(t.recent(k, now), now)
	}
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// login answers POST /login: a token or an id and password in (JSON), a
// session cookie and the session's CSRF token out.
func (u *reviewerUI) login(w http.ResponseWriter, r *http.Request) {
	if !u.origins.allowed(r, true) {
		problem(w, asc.PermissionDenied, http.StatusForbidden, "This origin may not sign in.")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		problem(w, asc.InvalidRequest, http.StatusUnsupportedMediaType, "Send the credentials as application/json.")
		return
	}
	var body loginBody
	raw, err := io.ReadAll(io.LimitReader(r.Body, 8<<10))
	if err == nil {
		err = decodeObject(raw, &body, "token", "id", "password")
	}
	if err != nil || (body.Token == "") == (body.ID == "" && body.Password == "") {
		problem(w, asc.InvalidRequest, http.StatusBadRequest, `Send {"token": "…"} or {"id": "…", "password": "…"}.`)
		return
	}
	keys := []string{"addr:" + clientAddr(r)}
	if body.ID != "" {
		keys = append(keys, "id:"+body.ID)
	}
	if wait := u.throttle.blocked(keys...); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		problem(w, asc.RateLimited, http.StatusTooManyRequests, "Too many failed sign-ins; try again later.")
		return
	}
	var actor aais.Actor
	ok := false
	if body.Token != "" {
		if actor, ok = u.o.Tokens.lookup(body.Token); ok {
			actor.AuthenticatedBy = AuthSessionLoginToken
		}
	} else if actor, ok = u.o.Passwords.Verify(body.ID, body.Password); ok {
		actor.AuthenticatedBy = AuthSessionPassword
	}
	if !ok {
		u.throttle.fail(keys...)
		u.o.Logger.WarnContext(r.Context(), "reviewer sign-in failed", "id", body.ID, "addr", clientAddr(r))
		problem(w, asc.AuthenticationRequired, http.StatusUnauthorized, "Wrong token, or wrong id or password.")
		return
	}
	// A session cookie already present is ended: a sign-in always starts
	// a fresh session.
	if old, ok := u.o.Sessions.lookup(r); ok {
		u.o.Sessions.end(w, r, old)
	}
	ss := u.o.Sessions.start(w, r, actor)
	u.o.Logger.InfoContext(r.Context(), "reviewer signed in", "id", actor.ID, "by", actor.AuthenticatedBy)
	exp := u.o.Sessions.expires(ss)
	writeJSON(w, http.StatusOK, loginAnswer{Actor: actor, Roles: u.o.Policy.roles(actor.ID), CSRFToken: ss.csrf, ExpiresAt: &exp})
}

// logout answers POST /logout: the session ends (it needs the CSRF token).
func (u *reviewerUI) logout(w http.ResponseWriter, r *http.Request) {
	ss, ok := u.o.Sessions.lookup(r)
	if !ok {
		u.o.Sessions.end(w, r, nil)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !u.origins.allowed(r, true) {
		problem(w, asc.PermissionDenied, http.StatusForbidden, "This origin may not sign out.")
		return
	}
	if !ss.csrfOK(r) {
		problem(w, asc.PermissionDenied, http.StatusForbidden, "The CSRF token is missing or wrong.")
		return
	}
	u.o.Sessions.end(w, r, ss)
	w.WriteHeader(http.StatusNoContent)
}

// roles returns id's role names.
func (p *Policy) roles(id string) []string {
	p = p.current()
	out := []string{}
	if p != nil {
		out = append(out, p.Grants[id]...)
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	writeEncoded(w, status, b, err)
}

// originPolicy is the browser Origin allow-list.
type originPolicy map[string]bool

// allowed reports whether r's Origin may make a state-changing request:
// an allowed origin (the configured public URL's, and any others
// configured), or the origin of the request itself (scheme and Host) when
// that Host is a loopback address or localhost. The Host header alone is
// not trusted for any other name: it is what the client says, and a page
// whose DNS name was pointed at this server (DNS rebinding) sends an
// Origin and a Host that agree. A request without Origin passes unless
// required (cookie-bearing requests must have one: browsers always send it
// on POST and WebSocket).
func (o originPolicy) allowed(r *http.Request, required bool) bool {
	or := r.Header.Get("Origin")
	if or == "" {
		return !required
	}
	if o[or] {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if or != scheme+"://"+r.Host {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(r.Host); err == nil {
		host = h
	}
	return arsia.IsLoopbackHost(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}
