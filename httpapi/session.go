package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// Session cookie names: the __Host- prefix (Secure, Path=/, no Domain: no
// other host or path can set or shadow it) whenever the cookie is Secure.
const (
	SessionCookie       = "custos_session"
	SecureSessionCookie = "__Host-custos_session"
	// CSRFHeader carries the session's CSRF token on every state-changing
	// request authenticated by the session cookie.
	CSRFHeader = "X-CSRF-Token"
)

// SessionOptions configures browser sessions.
type SessionOptions struct {
	// TTL is a session's absolute lifetime (12 h when zero); Idle how long
	// it lives without use (1 h when zero).
	TTL, Idle time.Duration
	// Secure marks cookies Secure (and names them __Host-custos_session)
	// even on plain-HTTP requests: set it when the public URL is https
	// behind a TLS-terminating proxy. Requests that arrive over TLS always
	// get Secure cookies.
	Secure bool
	// Max caps the number of live sessions (10000 when zero); the oldest
	// is ended to make room.
	Max int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Sessions is the server-side store of browser sessions, in memory: a
// restart signs everybody out. The cookie holds a random 256-bit id; the
// store keeps only its SHA-256.
type Sessions struct {
	o  SessionOptions
	mu sync.Mutex
	m  map[[sha256.Size]byte]*session
}

type session struct {
	key     [sha256.Size]byte
	actor   aais.Actor
	csrf    string
	created time.Time
	used    time.Time
	ended   bool
}

// NewSessions returns an empty session store.
func NewSessions(o SessionOptions) *Sessions {
	if o.TTL <= 0 {
		o.TTL = 12 * time.Hour
	}
	if o.Idle <= 0 {
		o.Idle = time.Hour
	}
	if o.Max <= 0 {
		o.Max = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Sessions{o: o, m: map[[sha256.Size]byte]*session{}}
}

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// secure reports whether r's cookies are Secure.
func (s *Sessions) secure(r *http.Request) bool { return s.o.Secure || r.TLS != nil }

func (s *Sessions) cookieName(r *http.Request) string {
	if s.secure(r) {
		return SecureSessionCookie
	}
	return SessionCookie
}

// start creates a session for actor, sets its cookie on w and returns it.
// Every sign-in gets a fresh id (no session fixation).
func (s *Sessions) start(w http.ResponseWriter, r *http.Request, actor aais.Actor) *session {
	id := randomString(32)
	now := s.o.Now()
	ss := &session{key: sha256.Sum256([]byte(id)), actor: actor, csrf: randomString(32), created: now, used: now}
	s.mu.Lock()
	s.sweep(now)
	for len(s.m) >= s.o.Max {
		var oldest *session
		for _, c := range s.m {
			if oldest == nil || c.created.Before(oldest.created) {
				oldest = c
			}
		}
		s.remove(oldest)
	}
	s.m[ss.key] = ss
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(r), Value: id, Path: "/", HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteStrictMode, MaxAge: int(s.o.TTL / time.Second)})
	return ss
}

// sweep drops expired sessions; s.mu is held.
func (s *Sessions) sweep(now time.Time) {
	for _, ss := range s.m {
		if s.expired(ss, now) {
			s.remove(ss)
		}
	}
}

func (s *Sessions) remove(ss *session) {
	ss.ended = true
	delete(s.m, ss.key)
}

func (s *Sessions) expired(ss *session, now time.Time) bool {
	return !now.Before(ss.created.Add(s.o.TTL)) || !now.Before(ss.used.Add(s.o.Idle))
}

// lookup returns the live session r's cookie names, and marks it used.
func (s *Sessions) lookup(r *http.Request) (*session, bool) {
	c, err := r.Cookie(s.cookieName(r))
	if err != nil || c.Value == "" {
		return nil, false
	}
	key := sha256.Sum256([]byte(c.Value))
	now := s.o.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[key]
	if !ok {
		return nil, false
	}
	if s.expired(ss, now) {
		s.remove(ss)
		return nil, false
	}
	ss.used = now
	return ss, true
}

// alive reports whether ss has neither ended nor expired (a stream opened
// with it stops when it has).
func (s *Sessions) alive(ss *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss.ended {
		return false
	}
	if s.expired(ss, s.o.Now()) {
		s.remove(ss)
		return false
	}
	return true
}

// end ends ss and clears the cookie on w.
func (s *Sessions) end(w http.ResponseWriter, r *http.Request, ss *session) {
	if ss != nil {
		s.mu.Lock()
		s.remove(ss)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(r), Value: "", Path: "/", HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// expires is when ss ends at the latest.
func (s *Sessions) expires(ss *session) time.Time { return ss.created.Add(s.o.TTL) }

// csrfOK reports whether r carries ss's CSRF token (constant time).
func (ss *session) csrfOK(r *http.Request) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1
}

// Len is the number of live sessions (for tests and metrics).
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(s.o.Now())
	return len(s.m)
}
