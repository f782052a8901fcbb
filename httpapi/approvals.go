// Package httpapi holds the HTTP adapters of Custos. This file is the AAIS
// HTTP + SSE binding: reviewers' presenters read a snapshot and a live event
// stream and post decisions, and every answer is an AAIS message or an ASC
// problem document.
package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// Authenticator establishes who is calling. The actor it returns is the
// one recorded in receipts: an actor in a request body is never trusted.
type Authenticator interface {
	// Authenticate returns the caller's actor, or an error when the
	// request carries no valid credentials (answered 401).
	Authenticate(r *http.Request) (aais.Actor, error)
}

// ErrUnauthenticated is what an Authenticator returns for a request
// without valid credentials.
var ErrUnauthenticated = errors.New("httpapi: not authenticated")

// Tokens authenticates API tokens sent as "Authorization: Bearer TOKEN".
// It keeps only the SHA-256 of each token and compares in constant time.
type Tokens struct {
	byHash map[[sha256.Size]byte]aais.Actor
}

// TokenHash is the form a token is kept in: "sha256:" + hex(SHA-256(token)).
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(h[:])
}

// NewTokens builds a Tokens from token hashes (TokenHash) and the actor
// each one authenticates; authenticated_by is set to "api-token".
func NewTokens(hashes map[string]aais.Actor) (*Tokens, error) {
	t := &Tokens{byHash: map[[sha256.Size]byte]aais.Actor{}}
	for h, a := range hashes {
		raw, ok := strings.CutPrefix(h, "sha256:")
		b, err := hex.DecodeString(raw)
		if !ok || err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("httpapi: %q is not a sha256: token hash", h)
		}
		if a.ID == "" || a.Type == "" {
			return nil, fmt.Errorf("httpapi: token %s… has no actor id or type", h[:15])
		}
		a.AuthenticatedBy = "api-token"
		t.byHash[[sha256.Size]byte(b)] = a
	}
	return t, nil
}

// Authenticate implements Authenticator.
func (t *Tokens) Authenticate(r *http.Request) (aais.Actor, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return aais.Actor{}, ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(token))
	var found aais.Actor
	matched := 0
	// Compare against every hash so that timing says nothing about which
	// one (if any) matched.
	for h, a := range t.byHash {
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			found, matched = a, 1
		}
	}
	if matched == 0 {
		return aais.Actor{}, ErrUnauthenticated
	}
	return found, nil
}

// ApprovalsOptions configures the approvals binding.
type ApprovalsOptions struct {
	// Authority decides; Store is the one it uses (for the event log).
	Authority *aais.Authority
	Store     aais.Store
	// Auth authenticates every request (required).
	Auth Authenticator
	// AllowedOrigins are the browser origins allowed to post decisions
	// ("https://custos.example"); a request carrying another Origin header
	// is refused. Requests without Origin (non-browser clients) pass.
	AllowedOrigins []string
	// Poll is how often the event stream looks for new events (250 ms
	// when zero); Heartbeat how often it sends a comment to keep proxies
	// from closing an idle stream (15 s when zero).
	Poll, Heartbeat time.Duration
	// MaxBody caps a decision body (64 KiB when zero).
	MaxBody int64
	// Logger receives diagnostics (slog.Default when nil).
	Logger *slog.Logger
}

type approvals struct {
	o       ApprovalsOptions
	origins map[string]bool
}

// NewApprovals returns the handler of
//
//	GET  /approvals/snapshot             the approval.snapshot message
//	GET  /approvals/events               Server-Sent Events (see below)
//	POST /approvals/{id}/decisions       an approval.decided envelope in,
//	                                     the approval.resolved receipt out
//	GET  /approvals/ws                   WebSocket: the same, on one
//	                                     connection (see websocket)
//
// Every endpoint requires authentication. The event stream starts after
// the Last-Event-ID header (or the after query parameter) when given, and
// otherwise with an approval.snapshot event whose id is its
// as_of_sequence; each event is "id: <sequence>", "event: <type>" and one
// "data:" line holding the envelope. When the position can no longer be
// continued (the store was reset, or compacted past it), a "gap" event is
// sent, followed by a fresh snapshot to restart from.
func NewApprovals(o ApprovalsOptions) (http.Handler, error) {
	if o.Authority == nil || o.Store == nil || o.Auth == nil {
		return nil, errors.New("httpapi: approvals need an authority, its store and an authenticator")
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 64 << 10
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &approvals{o: o, origins: map[string]bool{}}
	for _, or := range o.AllowedOrigins {
		a.origins[or] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /approvals/snapshot", a.snapshot)
	mux.HandleFunc("GET /approvals/events", a.events)
	mux.HandleFunc("POST /approvals/{id}/decisions", a.decide)
	mux.HandleFunc("GET /approvals/ws", a.websocket)
	return a.authenticated(mux), nil
}

type actorKey struct{}

func (a *approvals) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, err := a.o.Auth.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="custos"`)
			problem(w, asc.AuthenticationRequired, http.StatusUnauthorized, "Authentication is required.")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, actor)))
	})
}

func (a *approvals) snapshot(w http.ResponseWriter, r *http.Request) {
	m, err := a.o.Authority.Snapshot(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeMessage(w, http.StatusOK, m)
}

func (a *approvals) decide(w http.ResponseWriter, r *http.Request) {
	if or := r.Header.Get("Origin"); or != "" && !a.origins[or] {
		problem(w, asc.PermissionDenied, http.StatusForbidden, "This origin may not post decisions.")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		problem(w, asc.InvalidRequest, http.StatusUnsupportedMediaType, "Send the approval.decided envelope as application/json.")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.o.MaxBody))
	if err != nil {
		problem(w, asc.InvalidRequest, http.StatusRequestEntityTooLarge, fmt.Sprintf("The body is larger than %d bytes.", a.o.MaxBody))
		return
	}
	actor, _ := r.Context().Value(actorKey{}).(aais.Actor)
	receipt, f := a.decideBody(r.Context(), body, r.PathValue("id"), actor)
	if f != nil {
		problem(w, f.code, f.status, f.detail)
		return
	}
	status := http.StatusOK
	if receipt.Resolution.Outcome == aais.OutcomeConflict {
		status = http.StatusConflict
	}
	writeMessage(w, status, receipt)
}

// failure is a refused decision, in HTTP and ASC terms.
type failure struct {
	status int
	code   asc.Code
	detail string
}

// decideBody decides one approval.decided envelope as actor; requestID,
// when not empty, is the request the transport named.
func (a *approvals) decideBody(ctx context.Context, body []byte, requestID string, actor aais.Actor) (*aais.Message, *failure) {
	m, err := aais.Parse(body)
	if err != nil {
		return nil, &failure{http.StatusBadRequest, asc.InvalidRequest, "Not a valid AAIS message: " + err.Error()}
	}
	if m.Type != aais.TypeDecided {
		return nil, &failure{http.StatusBadRequest, asc.InvalidRequest, fmt.Sprintf("Expected approval.decided, got %s.", m.Type)}
	}
	if requestID != "" && m.Decision.RequestID != requestID {
		return nil, &failure{http.StatusBadRequest, asc.InvalidRequest, "The decision is for another request than the URL names."}
	}
	receipt, err := a.o.Authority.Decide(ctx, m.Decision, actor, nil)
	if err != nil {
		return nil, a.failure(ctx, err)
	}
	return receipt, nil
}

// fail answers an error of the authority or the store.
func (a *approvals) fail(w http.ResponseWriter, r *http.Request, err error) {
	f := a.failure(r.Context(), err)
	problem(w, f.code, f.status, f.detail)
}

func (a *approvals) failure(ctx context.Context, err error) *failure {
	switch {
	case errors.Is(err, aais.ErrUnknownRequest):
		return &failure{http.StatusNotFound, asc.NotFound, "No such approval request."}
	case errors.Is(err, aais.ErrOwnerStopped):
		return &failure{http.StatusConflict, asc.FailedPrecondition, "The process waiting to run this action has stopped; it cannot be approved."}
	case errors.Is(err, aais.ErrInvalid):
		return &failure{http.StatusBadRequest, asc.InvalidRequest, err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &failure{http.StatusServiceUnavailable, asc.Timeout, "The request was cancelled."}
	}
	a.o.Logger.ErrorContext(ctx, "approvals", "err", err)
	return &failure{http.StatusInternalServerError, asc.InternalError, "The approval store failed; nothing was decided."}
}

func (a *approvals) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		problem(w, asc.InternalError, http.StatusInternalServerError, "Streaming is not supported here.")
		return
	}
	after, resume := uint64(0), false
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, resume = parseSeq(v)
	} else if v := r.URL.Query().Get("after"); v != "" {
		after, resume = parseSeq(v)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	lastBeat := time.Now()
	err := a.o.Authority.Follow(r.Context(), after, resume, a.o.Poll, aais.Follower{
		Message: func(m *aais.Message) error { return writeEvent(w, m) },
		Gap: func(p aais.EventPage) error {
			_, err := fmt.Fprintf(w, "event: gap\ndata: {\"store_id\":%q,\"latest\":%d}\n\n", p.StoreID, p.Latest)
			return err
		},
		Idle: func(wrote bool) error {
			if !wrote && time.Since(lastBeat) >= a.o.Heartbeat {
				if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
					return err
				}
				wrote = true
			}
			if wrote {
				lastBeat = time.Now()
				fl.Flush()
			}
			return nil
		},
	})
	if err != nil && r.Context().Err() == nil {
		a.o.Logger.ErrorContext(r.Context(), "approval events", "err", err)
	}
}

func parseSeq(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > aais.MaxSequence {
		return 0, false
	}
	return n, true
}

// writeEvent writes m as one SSE event. Marshal's output is one line, so
// it fits one data field.
func writeEvent(w io.Writer, m *aais.Message) error {
	b, err := aais.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", m.Sequence, m.Type, b)
	return err
}

func writeMessage(w http.ResponseWriter, status int, m *aais.Message) {
	b, err := aais.Marshal(m)
	if err != nil {
		problem(w, asc.InternalError, http.StatusInternalServerError, "The answer could not be encoded.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// problem answers an RFC 9457 problem document carrying an ASC status.
func problem(w http.ResponseWriter, code asc.Code, status int, detail string) {
	b := problemJSON(code, status, detail)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// problemJSON is the problem document of problem.
func problemJSON(code asc.Code, status int, detail string) []byte {
	env := asc.New(code, asc.ScopePolicyDecision, true, time.Now())
	env.Message = &asc.Message{User: detail}
	p := asc.ToProblem(env)
	p.Status = status
	b, err := p.MarshalJSON()
	if err != nil {
		b, _ = json.Marshal(map[string]any{"status": status, "detail": detail})
	}
	return b
}
