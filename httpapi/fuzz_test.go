package httpapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/store/memstore"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

// The reviewer surfaces as custos serve mounts them (approvals, sign-in,
// submit and withdraw, the review queue, the inbox at "/"), driven with
// arbitrary requests. Placeholders in the path, the body and the headers
// name what each iteration set up: $R1 and $R2 two pending requests
// (submitted by "proxy" under MIFID-II, which has separation of duties),
// $RULE a remembered approval, $REV an open post-execution review, $CSRF
// the CSRF token of "writer"'s browser session.

var fuzzAPINow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

const (
	fuzzR1     = "apr_f0000000000000000000000000000001"
	fuzzR2     = "apr_f0000000000000000000000000000002"
	fuzzR3     = "apr_f0000000000000000000000000000003"
	fuzzOrigin = "https://custos.example"
	fuzzSender = "agent:acme.fuzzer"
	fuzzGW     = "agent:acme.gateway"
)

var fuzzMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}

// countingExchanges counts the exchange writes that changed something.
type countingExchanges struct {
	exchange.Backend
	n atomic.Int64
}

func (c *countingExchanges) add(ok bool, err error) {
	if ok && err == nil {
		c.n.Add(1)
	}
}

func (c *countingExchanges) Create(ctx context.Context, x exchange.Exchange) (exchange.Exchange, bool, error) {
	s, ok, err := c.Backend.Create(ctx, x)
	c.add(ok, err)
	return s, ok, err
}

func (c *countingExchanges) Claim(ctx context.Context, id string, from ...exchange.State) (exchange.Exchange, bool, error) {
	s, ok, err := c.Backend.Claim(ctx, id, from...)
	c.add(ok, err)
	return s, ok, err
}

func (c *countingExchanges) Transition(ctx context.Context, id string, from, to exchange.State, reply json.RawMessage, status int) (exchange.Exchange, bool, error) {
	s, ok, err := c.Backend.Transition(ctx, id, from, to, reply, status)
	c.add(ok, err)
	return s, ok, err
}

func (c *countingExchanges) Apply(ctx context.Context, id string, from, to exchange.State, ch exchange.Change) (exchange.Exchange, bool, error) {
	s, ok, err := c.Backend.Apply(ctx, id, from, to, ch)
	c.add(ok, err)
	return s, ok, err
}

func (c *countingExchanges) CompleteReview(ctx context.Context, id, reviewer string, v exchange.Verdict, j string) (exchange.Review, bool, error) {
	s, ok, err := c.Backend.CompleteReview(ctx, id, reviewer, v, j)
	c.add(ok, err)
	return s, ok, err
}

func (c *countingExchanges) MarkTimedOut(ctx context.Context, id string) (bool, error) {
	ok, err := c.Backend.MarkTimedOut(ctx, id)
	c.add(ok, err)
	return ok, err
}

// fuzzAPIWorker is what a worker's iterations share: credentials, a
// gateway for the review queue, and a server for WebSocket requests
// (which need a real connection) that serves the current iteration.
type fuzzAPIWorker struct {
	tokens    *Tokens
	passwords *Passwords
	policy    *Policy
	gw        *gateway.Gateway
	xs        *countingExchanges
	signer    sig.Signer
	current   atomic.Pointer[http.Handler]
	panicked  atomic.Pointer[string]
	srv       *httptest.Server
}

func fuzzSeed(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func newFuzzAPIWorker(tb testing.TB) *fuzzAPIWorker {
	tb.Helper()
	w := &fuzzAPIWorker{}
	hashes := map[string]aais.Actor{}
	for _, id := range []string{"admin", "writer", "nobody", "proxy"} {
		typ := aais.ActorHuman
		if id == "proxy" {
			typ = aais.ActorPolicy
		}
		hashes[TokenHash("tok-"+id)] = aais.Actor{ID: id, Type: typ}
	}
	var err error
	if w.tokens, err = NewTokens(hashes); err != nil {
		tb.Fatal(err)
	}
	hash, err := hashPassword("correct horse", 8, 1, 1) // cheap parameters: tests only
	if err != nil {
		tb.Fatal(err)
	}
	if w.passwords, err = NewPasswords([]PasswordEntry{{Actor: aais.Actor{ID: "pw-user", Type: aais.ActorHuman}, Hash: hash}}); err != nil {
		tb.Fatal(err)
	}
	w.policy = &Policy{
		Roles:              map[string]Role{"files": {Capabilities: []string{"write_file"}}, "ops": {Capabilities: []string{"demo.*"}}, "admin": {All: true}},
		Grants:             map[string][]string{"admin": {"admin"}, "writer": {"files", "ops"}, "proxy": {"files"}},
		SeparationOfDuties: []string{"MIFID-II"}, JustificationRequired: []string{"DORA"},
	}

	// A gateway whose sender's DSA-VLOP calls leave a review open.
	senderSigner, err := sig.NewEd25519Signer(fuzzSeed("sender"))
	if err != nil {
		tb.Fatal(err)
	}
	w.signer = senderSigner
	pub := ed25519.NewKeyFromSeed(fuzzSeed("sender")).Public()
	keys := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: fuzzSender + "#key-1", Algorithm: "EdDSA", Use: "sig"}}})
	gwSigner, err := sig.NewEd25519Signer(fuzzSeed("gateway"))
	if err != nil {
		tb.Fatal(err)
	}
	now := func() time.Time { return fuzzAPINow }
	auth, err := aais.NewAuthority(memstore.New(), &aais.AuthorityOptions{Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "custos-fuzz-"); err == nil { // tmpfs: synced writes cost nothing
		dir = d
		tb.Cleanup(func() { _ = os.RemoveAll(d) })
	}
	store, err := sqliteexchange.Open(context.Background(), filepath.Join(dir, "x.db"), &sqliteexchange.Options{Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = store.Close() })
	w.xs = &countingExchanges{Backend: store}
	if w.gw, err = gateway.New(gateway.Options{Agent: fuzzGW, Signer: gwSigner, KID: fuzzGW + "#gw-1", Keys: keys,
		Grants: map[string][]string{fuzzSender: {"demo.echo"}}, Handlers: map[string]handler.Handler{"demo.echo": handler.NewEcho()},
		Authority: auth, Exchanges: w.xs, Audit: audit.New(audit.NewMemory(), nil), Now: now,
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		tb.Fatal(err)
	}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// net/http would swallow a panic: keep it for the iteration.
		defer func() {
			if p := recover(); p != nil {
				s := fmt.Sprint(p)
				w.panicked.Store(&s)
			}
		}()
		(*w.current.Load()).ServeHTTP(rw, r)
	}))
	tb.Cleanup(w.srv.Close)
	return w
}

// openReview runs one DSA-VLOP call through the gateway and returns the
// exchange id of the review it leaves open.
func (w *fuzzAPIWorker) openReview(tb testing.TB) string {
	tb.Helper()
	e, err := arsia.NewRequest(fuzzSender, fuzzGW, []string{"demo.echo"}, "com.acme/call", map[string]any{"text": "hi"},
		arsia.BuildOptions{Now: fuzzAPINow, Compliance: map[string]any{"profile": "DSA-VLOP"}})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := e.Map()
	if err != nil {
		tb.Fatal(err)
	}
	signed, err := sig.Sign(m, w.signer, fuzzSender+"#key-1")
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := json.Marshal(signed)
	rep := w.gw.Receive(context.Background(), gateway.Inbound{Body: body})
	if rep.Status != 200 || rep.ExchangeID == "" {
		tb.Fatalf("the review's call: %d %s %v", rep.Status, rep.Envelope, rep.Problem)
	}
	return rep.ExchangeID
}

// fuzzRequest is one of the pending requests an iteration starts with.
func fuzzRequest(tb testing.TB, id, run, content string) (*aais.Request, []byte) {
	tb.Helper()
	name, _ := json.Marshal("write_file")
	prof, _ := json.Marshal(map[string]string{"profile": "MIFID-II"})
	req, err := aais.NewRequest(aais.RequestParams{ID: id, CreatedAt: fuzzAPINow, ExpiresAt: fuzzAPINow.Add(time.Hour),
		Origin: aais.Origin{Harness: "custos-mcp-proxy", SessionID: "mcp-1", RunID: run},
		Action: json.RawMessage(`{"kind":"tool.call","name":"write_file","summary":"Write","arguments":{"path":"/tmp/a","content":"` + content + `"}}`),
		Risk:   aais.Risk{Level: aais.RiskMedium, Reasons: []string{"fuzz"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
			{Decision: aais.Approve, Scope: aais.ScopeSession, Label: "Allow for the session", ScopeConstraints: aais.Constraints{"action_name": name}},
		},
		Extensions: aais.Extensions{ExchangeExtension: prof}})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{ID: "evt_" + id[4:], OccurredAt: fuzzAPINow, Stream: "proxy"}, req)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := aais.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return req, b
}

func fuzzDecision(tb testing.TB, req *aais.Request, v aais.Verdict, s aais.Scope, ext aais.Extensions) []byte {
	tb.Helper()
	d, err := aais.NewDecision(req, aais.DecisionParams{ID: "dec_" + req.ID[4:], Decision: v, Scope: s,
		Actor: aais.Actor{ID: "someone-else", Type: aais.ActorHuman}, DecidedAt: fuzzAPINow, Extensions: ext})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{ID: "evt_d" + req.ID[5:], OccurredAt: fuzzAPINow}, d)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := aais.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fuzzAPIState is one iteration's reviewer surfaces over fresh AAIS state.
type fuzzAPIState struct {
	mux      http.Handler
	store    *memstore.Store
	sessions *Sessions
	cookie   *http.Cookie
	csrf     string
	subs     map[string]string
}

func (w *fuzzAPIWorker) newState(tb testing.TB) *fuzzAPIState {
	tb.Helper()
	st := &fuzzAPIState{store: memstore.New()}
	now := func() time.Time { return fuzzAPINow }
	auth, err := aais.NewAuthority(st.store, &aais.AuthorityOptions{Now: now, Rand: rand.NewChaCha8([32]byte{1})})
	if err != nil {
		tb.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	origins := []string{fuzzOrigin}
	st.sessions = NewSessions(SessionOptions{Now: now})
	approvals, err := NewApprovals(ApprovalsOptions{Authority: auth, Store: st.store, Auth: w.tokens, Sessions: st.sessions,
		Policy: w.policy, AllowedOrigins: origins, Logger: quiet, Poll: 5 * time.Millisecond, Heartbeat: 20 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	ui, err := NewReviewerUI(UIOptions{Sessions: st.sessions, Tokens: w.tokens, Passwords: w.passwords, Policy: w.policy,
		AllowedOrigins: origins, Logger: quiet, Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	reviewerAuth := SessionAuth{Bearer: w.tokens, Sessions: st.sessions, AllowedOrigins: origins}
	submit, err := NewSubmit(SubmitOptions{Authority: auth, Auth: reviewerAuth, Policy: w.policy, Logger: quiet, MaxWait: 20 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	reviews, err := NewReviews(ReviewsOptions{Gateway: w.gw, Auth: reviewerAuth, Policy: w.policy, Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	inbox, err := NewInbox(InboxOptions{Gateway: w.gw, MaxBody: 64 << 10, Metadata: []byte(`{}`), JWKS: []byte(`{"keys":[]}`), PublicURL: fuzzOrigin})
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals/", approvals)
	mux.Handle("GET /{$}", ui)
	mux.Handle("/ui/", ui)
	mux.Handle("/login", ui)
	mux.Handle("/logout", ui)
	mux.Handle("/approvals/requests", submit)
	mux.Handle("/approvals/requests/", submit)
	mux.Handle("/v1/reviews", reviews)
	mux.Handle("/v1/reviews/", reviews)
	mux.Handle("/", inbox)
	st.mux = mux

	// Two pending requests from proxy, and a rule from an earlier
	// approval for the session.
	do := func(method, path, token string, body []byte) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		return rec
	}
	var reqs []*aais.Request
	for _, id := range []string{fuzzR1, fuzzR2, fuzzR3} {
		req, body := fuzzRequest(tb, id, "run-"+id[len(id)-1:], id)
		if rec := do("POST", "/approvals/requests", "tok-proxy", body); rec.Code != http.StatusAccepted {
			tb.Fatalf("submit %s: %d %s", id, rec.Code, rec.Body)
		}
		reqs = append(reqs, req)
	}
	if rec := do("POST", "/approvals/"+fuzzR3+"/decisions", "tok-admin", fuzzDecision(tb, reqs[2], aais.Approve, aais.ScopeSession, nil)); rec.Code != http.StatusOK {
		tb.Fatalf("the rule's approval: %d %s", rec.Code, rec.Body)
	}
	rules, err := auth.Rules(context.Background())
	if err != nil || len(rules.Sorted()) != 1 {
		tb.Fatalf("rules %v %v", rules, err)
	}
	// writer's browser session.
	r := httptest.NewRequest("POST", "/login", strings.NewReader(`{"token":"tok-writer"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", fuzzOrigin)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, r)
	var login struct {
		CSRF string `json:"csrf_token"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &login) != nil || len(rec.Result().Cookies()) != 1 {
		tb.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
	}
	st.cookie, st.csrf = rec.Result().Cookies()[0], login.CSRF
	st.subs = map[string]string{"$R1": fuzzR1, "$R2": fuzzR2, "$RULE": rules.Sorted()[0].ID, "$REV": w.openReview(tb), "$CSRF": st.csrf}
	return st
}

func (st *fuzzAPIState) expand(s string) string {
	for k, v := range st.subs {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// snapshot is what a refused request must leave as it was: the AAIS event
// log, the exchange writes, the sessions.
type apiSnapshot struct {
	events, exchanges int64
	sessions          []string
}

func (w *fuzzAPIWorker) snapshot(tb testing.TB, st *fuzzAPIState) apiSnapshot {
	tb.Helper()
	p, err := st.store.EventsAfter(context.Background(), 0, 0)
	if err != nil {
		tb.Fatal(err)
	}
	s := apiSnapshot{events: int64(len(p.Events)), exchanges: w.xs.n.Load()}
	st.sessions.mu.Lock()
	for k, ss := range st.sessions.m {
		s.sessions = append(s.sessions, string(k[:])+ss.actor.ID)
	}
	st.sessions.mu.Unlock()
	slices.Sort(s.sessions)
	return s
}

func (s apiSnapshot) equal(o apiSnapshot) bool {
	return s.events == o.events && s.exchanges == o.exchanges && slices.Equal(s.sessions, o.sessions)
}

// FuzzReviewerAPI: no request, authenticated or not, makes a reviewer
// endpoint panic or answer 5xx, and one answered 4xx changes nothing: no
// AAIS event (decision, edit, withdrawal, revocation, submission), no
// exchange write (review verdict), no session started or ended. That
// holds over the WebSocket too, per frame: a frame answered with a 4xx
// problem changes nothing.
//
// auth picks the credentials: none, the bearer token of admin, writer
// (roles files and ops), nobody (no role) or proxy (the submitter of $R1
// and $R2), writer's session cookie with or without its CSRF token, or a
// wrong token. An event stream is cut after a short while.
func FuzzReviewerAPI(f *testing.F) {
	w := newFuzzAPIWorker(f)
	r1, _ := fuzzRequest(f, fuzzR1, "run-1", fuzzR1)
	r2, _ := fuzzRequest(f, fuzzR2, "run-2", fuzzR2)
	_, other := fuzzRequest(f, "apr_f00000000000000000000000000000ff", "run-9", "other")
	type seed struct {
		method         uint8
		path           string
		auth           uint8
		contentType    string
		origin, lastID string
		body           string
	}
	seeds := []seed{
		{0, "/approvals/snapshot", 1, "", "", "", ""},
		{0, "/approvals/events", 2, "", "", "5", ""},
		{0, "/approvals/events?after=99999999999999999999", 2, "", "", "", ""},
		{0, "/approvals/events", 5, "", "", "-1", ""},
		{1, "/approvals/$R1/decisions", 2, "application/json", "", "", string(fuzzDecision(f, r1, aais.Approve, aais.ScopeOnce, nil))},
		{1, "/approvals/$R1/decisions", 4, "application/json", "", "", string(fuzzDecision(f, r1, aais.Approve, aais.ScopeOnce, nil))},
		{1, "/approvals/$R1/decisions", 3, "application/json", "", "", string(fuzzDecision(f, r1, aais.Deny, aais.ScopeOnce, nil))},
		{1, "/approvals/$R2/decisions", 5, "application/json", fuzzOrigin, "", string(fuzzDecision(f, r2, aais.Approve, aais.ScopeSession, nil))},
		{1, "/approvals/$R2/decisions", 6, "application/json", fuzzOrigin, "", string(fuzzDecision(f, r2, aais.Deny, aais.ScopeOnce, nil))},
		{1, "/approvals/$R1/decisions", 1, "application/json", "", "", string(fuzzDecision(f, r2, aais.Approve, aais.ScopeOnce, nil))},
		{1, "/approvals/$R1/edits", 2, "application/json", "", "", `{"arguments":{"path":"/tmp/b","content":"x"},"justification":"safer"}`},
		{1, "/approvals/$R1/edits", 3, "application/json", "", "", `{"arguments":{"path":"/etc/passwd","content":"x"}}`},
		{1, "/approvals/$R1/edits", 1, "application/json", "", "", `{"arguments":{"path":"/tmp/b"},"arguments":{}}`},
		{0, "/approvals/$R1/permission", 4, "", "", "", ""},
		{0, "/approvals/me", 5, "", "", "", ""},
		{0, "/approvals/history", 1, "", "", "", ""},
		{0, "/approvals/rules", 2, "", "", "", ""},
		{1, "/approvals/rules/$RULE/revoke", 3, "application/json", "", "", `{}`},
		{1, "/approvals/rules/$RULE/revoke", 1, "application/json", "", "", `{"reason":"done"}`},
		{1, "/approvals/requests", 4, "application/json", "", "", string(other)},
		{1, "/approvals/requests", 2, "application/json", "", "", string(other) + "x"},
		{0, "/approvals/requests/$R1?wait=1s", 4, "", "", "", ""},
		{1, "/approvals/requests/$R1/withdraw", 3, "application/json", "", "", `{}`},
		{1, "/approvals/requests/$R2/withdraw", 4, "application/json", "", "", `{"reason":"no longer needed"}`},
		{1, "/login", 0, "application/json", fuzzOrigin, "", `{"token":"tok-nobody"}`},
		{1, "/login", 0, "application/json", "https://evil.example", "", `{"token":"tok-admin"}`},
		{1, "/login", 0, "application/json", fuzzOrigin, "", `{"id":"pw-user","password":"correct horse"}`},
		{1, "/login", 0, "application/json", fuzzOrigin, "", `{"id":"pw-user","password":"wrong","token":""}`},
		{1, "/logout", 5, "", fuzzOrigin, "", ``},
		{1, "/logout", 6, "", fuzzOrigin, "", ``},
		{0, "/v1/reviews?state=all", 2, "", "", "", ""},
		{0, "/v1/reviews/$REV", 1, "", "", "", ""},
		{1, "/v1/reviews/$REV", 2, "application/json", "", "", `{"verdict":"accepted","justification":"checked"}`},
		{1, "/v1/reviews/$REV", 3, "application/json", "", "", `{"verdict":"flagged"}`},
		{1, "/v1/reviews/$REV", 5, "application/json", fuzzOrigin, "", `{"verdict":"accepted","verdict":"flagged"}`},
		{1, "/v1/reviews/$REV", 1, "application/json", "", "", `{"verdict":"accepted"} {}`},
		{0, "/approvals/ws", 2, "", "", "", string(fuzzDecision(f, r1, aais.Approve, aais.ScopeOnce, nil))},
		{0, "/approvals/ws", 4, "", "", "", string(fuzzDecision(f, r1, aais.Approve, aais.ScopeOnce, nil))},
		{0, "/approvals/ws?csrf=$CSRF", 5, "", fuzzOrigin, "", string(fuzzDecision(f, r2, aais.Deny, aais.ScopeOnce, nil))},
		{0, "/approvals/ws", 5, "", "https://evil.example", "", `{}`},
		{1, "/v1/arsia/inbox", 0, "application/json", "", "", `{"v":"1.0","from":"agent:x.y","id":"1"}`},
		{0, "/", 0, "", "", "", ""},
		{3, "/approvals/$R1/decisions", 1, "", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.auth, s.contentType, s.origin, s.lastID, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, method uint8, path string, auth uint8, contentType, origin, lastID string, body []byte) {
		st := w.newState(t)
		var h http.Handler = st.mux
		w.current.Store(&h)
		path = st.expand(path)
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		u, err := url.ParseRequestURI(path)
		if err != nil {
			return
		}
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		body = []byte(st.expand(string(body)))
		hdr := http.Header{}
		switch auth % 8 {
		case 1, 2, 3, 4:
			hdr.Set("Authorization", "Bearer tok-"+[]string{"admin", "writer", "nobody", "proxy"}[auth%8-1])
		case 5:
			hdr.Set("X-CSRF-Token", st.csrf)
			fallthrough
		case 6:
			hdr.Set("Cookie", st.cookie.String())
		case 7:
			hdr.Set("Authorization", "Bearer tok-writer ")
		}
		for k, v := range map[string]string{"Content-Type": contentType, "Origin": st.expand(origin), "Last-Event-ID": lastID} {
			if v != "" {
				hdr.Set(k, v)
			}
		}
		before := w.snapshot(t, st)
		if m == "GET" && u.Path == "/approvals/ws" {
			w.websocketCase(t, st, u, hdr, body, before)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		r := httptest.NewRequestWithContext(ctx, m, "http://custos.example"+u.RequestURI(), bytes.NewReader(body))
		for k, vs := range hdr {
			r.Header[k] = vs
		}
		rec := httptest.NewRecorder()
		st.mux.ServeHTTP(rec, r)
		if rec.Code >= 500 && ctx.Err() != nil {
			// The iteration's own deadline (it ends event streams) cut a
			// write short on a loaded machine: not the input's doing.
			t.Skipf("%s %s → %d after the iteration's deadline", m, u, rec.Code)
		}
		if rec.Code >= 500 {
			t.Fatalf("%s %s → %d %s", m, u, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			if after := w.snapshot(t, st); !after.equal(before) {
				t.Fatalf("%s %s refused with %d (%s), but the state changed: %+v → %+v", m, u, rec.Code, rec.Body, before, after)
			}
		}
	})
}

// websocketCase dials the approvals WebSocket, sends body as one text
// frame and reads until its answer: a receipt, or a problem document.
func (w *fuzzAPIWorker) websocketCase(t *testing.T, st *fuzzAPIState, u *url.URL, hdr http.Header, body []byte, before apiSnapshot) {
	for _, vs := range hdr {
		for _, v := range vs {
			if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
				return // a client cannot send it
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	defer func() {
		if p := w.panicked.Swap(nil); p != nil {
			t.Fatalf("WebSocket %s: the handler panicked: %v", u, *p)
		}
	}()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(w.srv.URL, "http")+u.RequestURI(), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		if resp.StatusCode >= 500 {
			t.Fatalf("WebSocket %s → %d", u, resp.StatusCode)
		}
		if after := w.snapshot(t, st); resp.StatusCode >= 400 && !after.equal(before) {
			t.Fatalf("WebSocket %s refused with %d, but the state changed", u, resp.StatusCode)
		}
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	if err := c.Write(ctx, websocket.MessageText, body); err != nil {
		return
	}
	for {
		_, frame, err := c.Read(ctx)
		if err != nil {
			return // closed (a frame over the read limit, say): nothing to check
		}
		var ans struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		}
		_ = json.Unmarshal(frame, &ans)
		switch {
		case ans.Status >= 500:
			t.Fatalf("WebSocket answer %s", frame)
		case ans.Status >= 400:
			if after := w.snapshot(t, st); !after.equal(before) {
				t.Fatalf("WebSocket frame refused (%s), but the state changed: %+v → %+v", frame, before, after)
			}
			return
		case ans.Type == string(aais.TypeResolved):
			return
		}
	}
}
