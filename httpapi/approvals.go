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
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/internal/routes"
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
	// swapped, once set, replaces byHash (Replace).
	swapped atomic.Pointer[map[[sha256.Size]byte]aais.Actor]
}

// TokenHash is the form a token is kept in: "sha256:" + hex(SHA-256(token)).
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(h[:])
}

// NewTokens builds a Tokens from token hashes (TokenHash) and the actor
// each one authenticates; authenticated_by is set to "api_token".
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
		a.AuthenticatedBy = AuthAPIToken
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
	// lookup compares against every hash so that timing says nothing
	// about which one (if any) matched.
	found, ok := t.lookup(token)
	if !ok {
		return aais.Actor{}, ErrUnauthenticated
	}
	return found, nil
}

// ApprovalsOptions configures the approvals binding.
type ApprovalsOptions struct {
	// Authority decides; Store is the one it uses (for the event log).
	Authority *aais.Authority
	Store     aais.Store
	// Auth authenticates every request that carries an Authorization
	// header (required).
	Auth Authenticator
	// Sessions, when set, also accepts browser sessions (the session
	// cookie POST /login sets; see NewReviewerUI). A state-changing
	// request authenticated by the cookie must carry the session's CSRF
	// token in the X-CSRF-Token header and an allowed Origin.
	Sessions *Sessions
	// Policy says who may decide what (roles, separation of duties,
	// justifications); nil lets every reviewer decide every request.
	Policy *Policy
	// OnDecision, when set, is called after each decision the authority
	// answered with a receipt that is not a conflict, with the
	// authenticated actor: the place to audit who decided and why.
	OnDecision func(context.Context, DecisionRecord)
	// AllowedOrigins are the browser origins allowed to post decisions
	// ("https://custos.example") besides the server's own origin; a
	// request carrying another Origin header is refused. Requests without
	// Origin (non-browser clients) pass when they use a bearer token.
	AllowedOrigins []string
	// Poll is how often the event stream looks for new events (250 ms
	// when zero); Heartbeat how often it sends a comment to keep proxies
	// from closing an idle stream (15 s when zero).
	Poll, Heartbeat time.Duration
	// StreamMaxDelay is how long an event may wait for an event stream
	// (SSE or WebSocket) that is not taking it, its writes blocked for at
	// least half that time, before the stream is closed with a reason (a
	// "cutoff" event; the client resumes with Last-Event-ID); 5 s when
	// zero. A stream that only waited for a CPU is not cut off. StreamWriteTimeout bounds the writes
	// to a stream (10 s when zero; a write fails after at least half of
	// it): a client that stops reading is cut off then. Either way the
	// other streams are not slowed down.
	StreamMaxDelay     time.Duration
	StreamWriteTimeout time.Duration
	// MaxBody caps a decision body (64 KiB when zero).
	MaxBody int64
	// Logger receives diagnostics (nothing is logged when nil).
	Logger *slog.Logger
	// Metrics, when set, gets custos_approval_subscribers, the event
	// streams open.
	Metrics prometheus.Registerer
}

type approvals struct {
	o       ApprovalsOptions
	origins originPolicy
	// sse and ws count the event streams open (Server-Sent Events,
	// WebSocket).
	sse, ws atomic.Int64
}

var descSubscribers = prometheus.NewDesc("custos_approval_subscribers",
	"Approval event streams open, by transport (sse, websocket).", []string{"transport"}, nil)

// subscribers is the collector of the streams open.
type subscribers struct{ a *approvals }

func (s subscribers) Describe(ch chan<- *prometheus.Desc) { ch <- descSubscribers }

func (s subscribers) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descSubscribers, prometheus.GaugeValue, float64(s.a.sse.Load()), "sse")
	ch <- prometheus.MustNewConstMetric(descSubscribers, prometheus.GaugeValue, float64(s.a.ws.Load()), "websocket")
}

// DecisionRecord is one decision the authority answered.
type DecisionRecord struct {
	// Actor is the authenticated actor (also Decision.Actor).
	Actor    aais.Actor
	Decision *aais.Decision
	Receipt  *aais.Message
	// Justification is the decision's justification ("" when none);
	// Profile the request's compliance profile.
	Justification, Profile string
	// Response is the reply to a question (aais.ResponseExtension; ""
	// when none).
	Response string
}

// NewApprovals returns the handler of
//
//	GET  /approvals/snapshot             the approval.snapshot message
//	GET  /approvals/events               Server-Sent Events (see below)
//	POST /approvals/{id}/decisions       an approval.decided envelope in,
//	                                     the approval.resolved receipt out
//	POST /approvals/{id}/edits           other arguments proposed: the
//	                                     request is superseded by a new one
//	                                     (see edit)
//	GET  /approvals/ws                   WebSocket: the same, on one
//	                                     connection (see websocket)
//	GET  /approvals/me                   who is signed in, their roles
//	                                     (and a session's CSRF token)
//	GET  /approvals/{id}/permission      what the caller may do with a request
//	GET  /approvals/history              the latest resolutions
//	GET  /approvals/rules                remembered approvals
//	GET  /approvals/{id}/rules           which rules would approve request
//	                                     id now, and why (or why not)
//	POST /approvals/rules/{id}/revoke    revoke one
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
	if o.StreamMaxDelay <= 0 {
		o.StreamMaxDelay = 5 * time.Second
	}
	if o.StreamWriteTimeout <= 0 {
		o.StreamWriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &approvals{o: o, origins: originPolicy{}}
	if o.Metrics != nil {
		if err := o.Metrics.Register(subscribers{a}); err != nil {
			return nil, fmt.Errorf("httpapi: approvals metrics: %w", err)
		}
	}
	for _, or := range o.AllowedOrigins {
		a.origins[or] = true
	}
	mux := routes.New()
	mux.HandleFunc("GET /approvals/snapshot", a.snapshot)
	mux.HandleFunc("GET /approvals/events", a.events)
	mux.HandleFunc("POST /approvals/{id}/decisions", a.decide)
	mux.HandleFunc("POST /approvals/{id}/edits", a.edit)
	mux.HandleFunc("GET /approvals/ws", a.websocket)
	mux.HandleFunc("GET /approvals/me", a.me)
	mux.HandleFunc("GET /approvals/{id}/permission", a.permission)
	mux.HandleFunc("GET /approvals/history", a.history)
	mux.HandleFunc("GET /approvals/rules", a.rules)
	mux.HandleFunc("GET /approvals/{id}/rules", a.explainRules)
	mux.HandleFunc("POST /approvals/rules/{id}/revoke", a.revoke)
	return routes.With(a.authenticated(mux), mux), nil
}

type actorKey struct{}
type sessionKey struct{}

// authenticated establishes the caller: a bearer token (Auth) when the
// request has an Authorization header, otherwise the session cookie. A
// cookie-authenticated request that can change state needs an allowed
// Origin and the session's CSRF token (X-CSRF-Token; for the WebSocket,
// which cannot send headers from a browser, the csrf query parameter).
func (a *approvals) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.Header.Get("Authorization") != "" || a.o.Sessions == nil {
			actor, err := a.o.Auth.Authenticate(r)
			if err != nil {
				a.unauthenticated(w)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, actorKey{}, actor)))
			return
		}
		ss, ok := a.o.Sessions.lookup(r)
		if !ok {
			a.unauthenticated(w)
			return
		}
		ws := r.URL.Path == "/approvals/ws"
		if ws || !safeMethod(r.Method) {
			if !a.origins.allowed(r, true) {
				problem(w, asc.PermissionDenied, http.StatusForbidden, "This origin may not change anything.")
				return
			}
			csrfOK := ss.csrfOK(r)
			if ws {
				got := r.URL.Query().Get("csrf")
				csrfOK = got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1
			}
			if !csrfOK {
				problem(w, asc.PermissionDenied, http.StatusForbidden, "The CSRF token is missing or wrong.")
				return
			}
		}
		ctx = context.WithValue(ctx, actorKey{}, ss.actor)
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, sessionKey{}, ss)))
	})
}

func (a *approvals) unauthenticated(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="custos"`)
	problem(w, asc.AuthenticationRequired, http.StatusUnauthorized, "Authentication is required.")
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// errSessionEnded stops a stream whose session ended or expired.
var errSessionEnded = errors.New("httpapi: the session ended")

// sessionCheck returns an error once the session r was authenticated by
// (if any) has ended.
func (a *approvals) sessionCheck(r *http.Request) func() error {
	ss, _ := r.Context().Value(sessionKey{}).(*session)
	return func() error {
		if ss != nil && !a.o.Sessions.alive(ss) {
			return errSessionEnded
		}
		return nil
	}
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
	if !a.origins.allowed(r, false) {
		problem(w, asc.PermissionDenied, http.StatusForbidden, "This origin may not post decisions.")
		return
	}
	body, ok := readJSON(w, r, a.o.MaxBody, "the approval.decided envelope")
	if !ok {
		return
	}
	actor, _ := r.Context().Value(actorKey{}).(aais.Actor)
	receipt, f := a.decideBody(r.Context(), body, r.PathValue("id"), actor)
	if f != nil {
		problem(w, f.code, f.status, f.detail)
		return
	}
	status := http.StatusOK
	switch {
	case aais.Partial(receipt):
		// A vote counted towards a quorum: the request is still pending.
		status = http.StatusAccepted
	case receipt.Resolution.Outcome == aais.OutcomeConflict:
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
	// The policy: one place every binding passes through.
	st, err := a.o.Authority.State(ctx, m.Decision.RequestID)
	if err != nil {
		return nil, a.failure(ctx, err)
	}
	req := st.Request.Event.Request
	if f := a.o.Policy.check(actor, req, m.Decision); f != nil {
		a.o.Logger.WarnContext(ctx, "decision refused by policy", "request", req.ID, "actor", actor.ID, "reason", f.detail)
		return nil, f
	}
	if f := a.supersessionCheck(ctx, req, m.Decision); f != nil {
		return nil, f
	}
	// The roles the policy grants go with the vote: a quorum's from_roles
	// are filled from them.
	roles := a.o.Policy.Permission(actor, req).Roles
	receipt, err := a.o.Authority.DecideWith(ctx, m.Decision, aais.DecideOptions{Actor: actor, Roles: roles})
	if err != nil {
		return nil, a.failure(ctx, err)
	}
	partial := aais.Partial(receipt)
	if res := receipt.Resolution; partial || (res != nil && res.Outcome != aais.OutcomeConflict && res.DecisionID == m.Decision.ID) {
		d := *m.Decision
		if actor != (aais.Actor{}) {
			d.Actor = actor
		}
		just, _ := Justification(&d)
		rec := DecisionRecord{Actor: d.Actor, Decision: &d, Receipt: receipt, Justification: just, Profile: RequestProfile(req),
			Response: aais.Response(&d)}
		if a.o.OnDecision != nil {
			a.o.OnDecision(ctx, rec)
		}
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
	case errors.Is(err, aais.ErrAlreadyVoted):
		return &failure{http.StatusConflict, asc.Conflict, "You already voted on this request; each reviewer counts once."}
	case errors.Is(err, aais.ErrQuorumUnsupported):
		return &failure{http.StatusConflict, asc.FailedPrecondition, "This request needs several approvals, which this approval store cannot keep."}
	case errors.Is(err, aais.ErrOwnerStopped):
		return &failure{http.StatusConflict, asc.FailedPrecondition, "The process waiting to run this action has stopped; it cannot be approved."}
	case errors.Is(err, aais.ErrNotRemembered):
		// The remember policy changed since the choice was offered;
		// nothing was decided, approve once still can be.
		return &failure{http.StatusConflict, asc.FailedPrecondition, strings.TrimPrefix(err.Error(), aais.ErrNotRemembered.Error()+": ") + "."}
	case errors.Is(err, aais.ErrInvalid):
		return &failure{http.StatusBadRequest, asc.InvalidRequest, err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &failure{http.StatusServiceUnavailable, asc.Timeout, "The request was cancelled."}
	}
	a.o.Logger.ErrorContext(ctx, "approvals", "err", err)
	return &failure{http.StatusInternalServerError, asc.InternalError, "The approval store failed; nothing was decided."}
}

func writeMessage(w http.ResponseWriter, status int, m *aais.Message) {
	b, err := aais.Marshal(m)
	writeEncoded(w, status, b, err)
}

// writeEncoded answers b, JSON, or a problem when encoding failed (err).
func writeEncoded(w http.ResponseWriter, status int, b []byte, err error) {
	if err != nil {
		problem(w, asc.InternalError, http.StatusInternalServerError, "The answer could not be encoded.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// readJSON reads a request body that must be application/json of at most
// max bytes; what says what to send, for the 415 answer. ok is false when
// it has answered the request with a problem.
func readJSON(w http.ResponseWriter, r *http.Request, max int64, what string) (body []byte, ok bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		problem(w, asc.InvalidRequest, http.StatusUnsupportedMediaType, "Send "+what+" as application/json.")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return body, true
	case errors.As(err, &mbe):
		problem(w, asc.InvalidRequest, http.StatusRequestEntityTooLarge, fmt.Sprintf("The body is larger than %d bytes.", max))
	case isTimeout(err):
		// A body that stalls is late, not large.
		w.Header().Set("Connection", "close")
		problem(w, asc.Timeout, http.StatusRequestTimeout, "The body did not arrive in time.")
	default:
		w.Header().Set("Connection", "close")
		problem(w, asc.InvalidRequest, http.StatusBadRequest, "The body could not be read.")
	}
	return nil, false
}

// problem answers an RFC 9457 problem document carrying an ASC status.
func problem(w http.ResponseWriter, code asc.Code, status int, detail string) {
	problemExtra(w, code, status, detail, nil)
}

// problemExtra is problem with extension members (a reason, say) next to
// the ASC status.
func problemExtra(w http.ResponseWriter, code asc.Code, status int, detail string, extra map[string]any) {
	b := problemDoc(code, status, detail, extra)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// problemJSON is the problem document of problem.
func problemJSON(code asc.Code, status int, detail string) []byte {
	return problemDoc(code, status, detail, nil)
}

func problemDoc(code asc.Code, status int, detail string, extra map[string]any) []byte {
	env := asc.New(code, asc.ScopePolicyDecision, true, time.Now())
	env.Message = &asc.Message{User: detail}
	p := asc.ToProblem(env)
	p.Status, p.Extra = status, extra
	b, err := p.MarshalJSON()
	if err != nil {
		b, _ = json.Marshal(map[string]any{"status": status, "detail": detail})
	}
	return b
}

func (a *approvals) actor(r *http.Request) aais.Actor {
	actor, _ := r.Context().Value(actorKey{}).(aais.Actor)
	return actor
}

// me answers who the caller is; a session's answer carries its CSRF token.
func (a *approvals) me(w http.ResponseWriter, r *http.Request) {
	actor := a.actor(r)
	ans := loginAnswer{Actor: actor, Roles: a.o.Policy.roles(actor.ID)}
	if ss, ok := r.Context().Value(sessionKey{}).(*session); ok {
		ans.CSRFToken = ss.csrf
		exp := a.o.Sessions.expires(ss)
		ans.ExpiresAt = &exp
	}
	writeJSON(w, http.StatusOK, ans)
}

// permission answers what the caller may do with one request.
func (a *approvals) permission(w http.ResponseWriter, r *http.Request) {
	st, err := a.o.Authority.State(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a.o.Policy.Permission(a.actor(r), st.Request.Event.Request))
}

// HistoryEntry is one resolved request in GET /approvals/history.
type HistoryEntry struct {
	RequestID      string       `json:"request_id"`
	ActionKind     string       `json:"action_kind,omitempty"`
	ActionName     string       `json:"action_name,omitempty"`
	Summary        string       `json:"summary,omitempty"`
	Profile        string       `json:"profile,omitempty"`
	Outcome        aais.Outcome `json:"outcome"`
	EffectiveScope aais.Scope   `json:"effective_scope,omitempty"`
	Message        string       `json:"message"`
	ResolvedAt     string       `json:"resolved_at"`
	Sequence       uint64       `json:"sequence"`
	// Actor is who decided, from the receipt (aais.DecidedBy), or the
	// reviewer whose remembered rule approved it; absent for expiries.
	Actor         *aais.Actor `json:"actor,omitempty"`
	Justification string      `json:"justification,omitempty"`
	RuleID        string      `json:"rule_id,omitempty"`
	// Because says why the rule approved it (aais.RuleExtension).
	Because []string `json:"because,omitempty"`
	// Question is the prompt of a request that asked a question
	// (aais.Question), Response the reply the reviewer gave.
	Question string `json:"question,omitempty"`
	Response string `json:"response,omitempty"`
	// SupersededBy is the request that replaced this one when a reviewer
	// edited its arguments (outcome cancelled).
	SupersededBy string `json:"superseded_by,omitempty"`
	// Agent is the requesting agent (origin.agent_id); Risk the
	// request's risk level.
	Agent string         `json:"agent,omitempty"`
	Risk  aais.RiskLevel `json:"risk,omitempty"`
}

// rules answers every remembered approval (rule), revoked and expired
// ones included, with whether each is active now.
func (a *approvals) rules(w http.ResponseWriter, r *http.Request) {
	rs, err := a.o.Authority.Rules(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	now := time.Now()
	type entry struct {
		Rule   *aais.Rule `json:"rule"`
		Active bool       `json:"active"`
	}
	out := []entry{}
	for _, rule := range rs.Sorted() {
		out = append(out, entry{Rule: rule, Active: rule.Active(now)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"rules": out})
}

// explainRules answers, for one request, every rule in matching order
// with whether it would approve the request now under the remember
// policy, why ("because": the rule, that it is in force, each constraint
// that held) or why not ("reason").
func (a *approvals) explainRules(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, err := a.o.Authority.State(ctx, r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ms, err := a.o.Authority.ExplainRules(ctx, st.Request.Event.Request)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	type entry struct {
		Rule    *aais.Rule `json:"rule"`
		Matched bool       `json:"matched"`
		Reason  string     `json:"reason,omitempty"`
		Because []string   `json:"because,omitempty"`
	}
	out := []entry{}
	for _, m := range ms {
		out = append(out, entry{Rule: m.Rule, Matched: m.Matched, Reason: m.Reason, Because: m.Because})
	}
	writeJSON(w, http.StatusOK, map[string]any{"request_id": st.Request.Event.Request.ID, "rules": out})
}

// revoke revokes one rule as the caller, when the policy lets them: the
// reviewer who approved it, or one whose roles cover the request it came
// from (revokeCheck).
func (a *approvals) revoke(w http.ResponseWriter, r *http.Request) {
	if !a.origins.allowed(r, false) {
		problem(w, asc.PermissionDenied, http.StatusForbidden, "This origin may not revoke rules.")
		return
	}
	ctx := r.Context()
	actor := a.actor(r)
	id := r.PathValue("id")
	rs, err := a.o.Authority.Rules(ctx)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	target := rs.Get(id)
	if target == nil {
		problem(w, asc.NotFound, http.StatusNotFound, "No such rule.")
		return
	}
	var from *aais.Request
	if st, err := a.o.Authority.State(ctx, target.RequestID); err == nil {
		from = st.Request.Event.Request
	} else if !errors.Is(err, aais.ErrUnknownRequest) {
		a.fail(w, r, err)
		return
	}
	if f := a.o.Policy.revokeCheck(actor, target, from); f != nil {
		a.o.Logger.WarnContext(ctx, "revocation refused by policy", "rule", target.ID, "actor", actor.ID, "reason", f.detail)
		problem(w, f.code, f.status, f.detail)
		return
	}
	rule, revoked, err := a.o.Authority.RevokeRule(ctx, id, actor)
	if errors.Is(err, aais.ErrUnknownRule) {
		problem(w, asc.NotFound, http.StatusNotFound, "No such rule.")
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.o.Logger.InfoContext(r.Context(), "rule revoked", "rule", rule.ID, "by", actor.ID, "revoked", revoked)
	writeJSON(w, http.StatusOK, map[string]any{"rule": rule, "revoked": revoked})
}
