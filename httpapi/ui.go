package httpapi

import (
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/internal/routes"
)

// The web inbox: plain HTML, CSS and JavaScript, embedded, with nothing
// loaded from anywhere else.
//
//go:embed ui
var uiFiles embed.FS

// ContentSecurityPolicy is sent with every page and asset of the inbox:
// scripts and styles only from the inbox itself (no inline script), no
// frames, no plugins, no form posts elsewhere.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// UIOptions configures the reviewers' web inbox and its sign-in.
type UIOptions struct {
	// Sessions keeps the browser sessions (required); give the same one to
	// ApprovalsOptions.Sessions.
	Sessions *Sessions
	// Tokens are the tokens that may sign in (the login token custos
	// serve prints, reviewers' API tokens); Passwords the reviewers who
	// sign in with a password. Either may be nil.
	Tokens    *Tokens
	Passwords *Passwords
	// Policy supplies each reviewer's roles (may be nil).
	Policy *Policy
	// AllowedOrigins are browser origins allowed to sign in besides the
	// server's own origin.
	AllowedOrigins []string
	// Logger receives sign-ins (nothing is logged when nil).
	Logger *slog.Logger
	// Now is the clock of the sign-in throttle (time.Now when nil).
	Now func() time.Time
}

type reviewerUI struct {
	o        UIOptions
	origins  originPolicy
	throttle *throttle
	static   http.Handler
}

// NewReviewerUI returns the handler of the reviewers' web inbox:
//
//	GET  /          the inbox (sign-in form, pending requests, details,
//	                history, remembered rules)
//	GET  /ui/…      its script, style sheet and icon
//	POST /login     {"token": …} or {"id": …, "password": …} in (JSON);
//	                a session cookie and {"actor", "roles", "csrf_token",
//	                "session_expires_at"} out
//	POST /logout    ends the session (needs the X-CSRF-Token header)
//
// The inbox talks to the approvals endpoints (NewApprovals with the same
// Sessions) on the same origin.
func NewReviewerUI(o UIOptions) (http.Handler, error) {
	if o.Sessions == nil {
		return nil, errors.New("httpapi: the reviewer UI needs a session store")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		return nil, err
	}
	u := &reviewerUI{o: o, origins: originPolicy{}, throttle: newThrottle(10, 5*time.Minute, o.Now),
		static: http.StripPrefix("/ui/", http.FileServerFS(sub))}
	for _, or := range o.AllowedOrigins {
		u.origins[or] = true
	}
	mux := routes.New()
	mux.HandleFunc("GET /{$}", u.index)
	mux.HandleFunc("GET /ui/profiles.json", profilesJSON)
	mux.HandleFunc("GET /ui/", u.asset)
	mux.HandleFunc("POST /login", u.login)
	mux.HandleFunc("POST /logout", u.logout)
	return routes.With(securityHeaders(mux), mux), nil
}

// securityHeaders sets the headers every inbox answer carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

func (u *reviewerUI) index(w http.ResponseWriter, r *http.Request) {
	b, err := uiFiles.ReadFile("ui/index.html")
	if err != nil {
		http.Error(w, "missing", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// profilesJSON answers the human oversight each bundled compliance
// profile demands, for the inbox to show the risk a request's profile
// implies beside the one its handler declares.
func profilesJSON(w http.ResponseWriter, _ *http.Request) {
	reg := compliance.Default()
	out := map[string]string{}
	for _, name := range reg.Names() {
		if p, ok := reg.Get(name); ok {
			out[name] = string(p.Defaults.HumanOversight)
		}
	}
	b, err := json.Marshal(map[string]any{"human_oversight": out})
	if err != nil {
		http.Error(w, "profiles", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

func (u *reviewerUI) asset(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ui/" || r.URL.Path == "/ui/index.html" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	u.static.ServeHTTP(w, r)
}
