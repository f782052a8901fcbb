package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/jcs"
	"github.com/custos-runtime/custos/store/memstore"
)

const (
	loginToken = "login-t0ken-for-admin"
	bobToken   = "api-t0ken-for-bob"
)

// passwords of the reviewers of sessionEnv.
var testPasswords = map[string]string{"bob": "correct horse battery", "carol": "carol's secret", "dave": "dave-pass"}

// sessionEnv is the approvals API and the reviewer UI on one server, with
// sessions, passwords, tokens and a role policy.
type sessionEnv struct {
	srv      *httptest.Server
	store    *memstore.Store
	auth     *aais.Authority
	clock    *aaistest.Clock
	sessions *Sessions

	mu        sync.Mutex
	decisions []DecisionRecord
}

var (
	hashOnce   sync.Once
	testHashes map[string]string
)

// cheapHashes are argon2id hashes with small parameters, so the tests stay
// fast under the race detector; bob's is bcrypt.
func cheapHashes(t *testing.T) map[string]string {
	hashOnce.Do(func() {
		testHashes = map[string]string{}
		for id, pw := range testPasswords {
			h, err := hashPassword(pw, 64, 1, 1)
			if err != nil {
				panic(err)
			}
			testHashes[id] = h
		}
		// bob's is bcrypt (cost 4).
		h, err := bcrypt.GenerateFromPassword([]byte(testPasswords["bob"]), 4)
		if err != nil {
			panic(err)
		}
		testHashes["bob"] = string(h)
	})
	return testHashes
}

func testPolicy() *Policy {
	return &Policy{
		Roles: map[string]Role{
			"finance": {Capabilities: []string{"billing.*"}, Profiles: []string{"MIFID-II"}},
			"ops":     {Capabilities: []string{"shell.*"}},
			"admin":   {All: true},
		},
		Grants:                map[string][]string{"admin": {"admin"}, "bob": {"finance"}, "carol": {"finance"}, "dave": {"ops"}},
		SeparationOfDuties:    []string{"MIFID-II"},
		JustificationRequired: []string{"MIFID-II"},
	}
}

func newSessionEnv(t *testing.T, tls bool) *sessionEnv {
	t.Helper()
	s := memstore.New()
	c := aaistest.NewClock(time.Now().UTC())
	a := aaistest.NewAuthority(t, s, c)
	e := &sessionEnv{store: s, auth: a, clock: c}
	toks, err := NewTokens(map[string]aais.Actor{
		TokenHash(loginToken): {ID: "admin", Type: aais.ActorHuman, DisplayName: "Administrator"},
		TokenHash(bobToken):   {ID: "bob", Type: aais.ActorHuman, DisplayName: "Bob"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var entries []PasswordEntry
	for id, h := range cheapHashes(t) {
		entries = append(entries, PasswordEntry{Actor: aais.Actor{ID: id, Type: aais.ActorHuman, DisplayName: strings.ToUpper(id[:1]) + id[1:]}, Hash: h})
	}
	pws, err := NewPasswords(entries)
	if err != nil {
		t.Fatal(err)
	}
	e.sessions = NewSessions(SessionOptions{TTL: 2 * time.Hour, Idle: 30 * time.Minute, Now: c.Now})
	pol := testPolicy()
	api, err := NewApprovals(ApprovalsOptions{Authority: a, Store: s, Auth: toks, Sessions: e.sessions, Policy: pol,
		Poll: 5 * time.Millisecond, Heartbeat: 20 * time.Millisecond, AllowedOrigins: []string{"https://review.example"},
		Logger: slog.New(slog.DiscardHandler),
		OnDecision: func(_ context.Context, r DecisionRecord) {
			e.mu.Lock()
			e.decisions = append(e.decisions, r)
			e.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := NewReviewerUI(UIOptions{Sessions: e.sessions, Tokens: toks, Passwords: pws, Policy: pol, Now: c.Now,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals/", api)
	mux.Handle("GET /{$}", ui)
	mux.Handle("/ui/", ui)
	mux.Handle("/login", ui)
	mux.Handle("/logout", ui)
	if tls {
		e.srv = httptest.NewTLSServer(mux)
	} else {
		e.srv = httptest.NewServer(mux)
	}
	t.Cleanup(e.srv.Close)
	return e
}

// browser is a client with a cookie jar that behaves like a same-origin
// page: it sends Origin on every POST and the CSRF token when it has one.
type browser struct {
	e      *sessionEnv
	c      *http.Client
	csrf   string
	origin string
}

func (e *sessionEnv) browser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := e.srv.Client()
	cl := *c
	cl.Jar = jar
	return &browser{e: e, c: &cl, origin: e.srv.URL}
}

func (b *browser) do(t *testing.T, method, path, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != "GET" {
		req.Header.Set("Origin", b.origin)
		if b.csrf != "" {
			req.Header.Set(CSRFHeader, b.csrf)
		}
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// login signs in and keeps the CSRF token.
func (b *browser) login(t *testing.T, body string) loginAnswer {
	t.Helper()
	resp, out := b.do(t, "POST", "/login", body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("login %s: %d %s", body, resp.StatusCode, out)
	}
	var ans loginAnswer
	if err := json.Unmarshal(out, &ans); err != nil || ans.CSRFToken == "" {
		t.Fatalf("login answer %s: %v", out, err)
	}
	b.csrf = ans.CSRFToken
	return ans
}

func (b *browser) loginPassword(t *testing.T, id string) loginAnswer {
	body, _ := json.Marshal(map[string]string{"id": id, "password": testPasswords[id]})
	return b.login(t, string(body))
}

func summaryOf(capability string) string {
	s, ok := map[string]string{
		"shell.exec":             "Run the nightly database backup script",
		"billing.refund":         "Refund invoice INV-2291 to ACME",
		"billing.invoice.create": "Create an invoice of 100.00 for ACME",
	}[capability]
	if !ok {
		s = "Call " + capability
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// gwRequest is a gateway-like request for the capability under profile,
// asked by agent.
func (e *sessionEnv) gwRequest(t *testing.T, n, capability, profile, agent string) *aais.Request {
	t.Helper()
	now := e.clock.Now()
	ext, _ := json.Marshal(map[string]string{"exchange_id": "x_" + n, "sender": agent, "message_id": "m_" + n,
		"payload_type": "com.example/test", "profile": profile})
	name, _ := json.Marshal(capability)
	r, err := aais.NewRequest(aais.RequestParams{
		ID: "apr_" + n, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Origin: aais.Origin{Harness: "custos", SessionID: agent, AgentID: agent},
		Action: json.RawMessage(`{"kind":"tool.call","name":` + string(name) + `,"summary":` + summaryOf(capability) + `,` +
			`"arguments":{"amount":"100.00","customer":"ACME"},"resource":"https://billing.example/invoices"}`),
		Risk: aais.Risk{Level: aais.RiskHigh, Reasons: []string{"Moves money"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow this call once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
			{Decision: aais.Approve, Scope: aais.ScopeSession, Label: "Allow for the session",
				ScopeConstraints: aais.Constraints{"action_name": name}},
		},
		Extensions: aais.Extensions{ExchangeExtension: ext},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.auth.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// decision is an approval.decided envelope on r, claiming to be mallory.
func decision(t *testing.T, r *aais.Request, v aais.Verdict, s aais.Scope, justification string) (*aais.Decision, string) {
	t.Helper()
	p := aais.DecisionParams{Decision: v, Scope: s, Actor: aais.Actor{ID: "mallory", Type: aais.ActorHuman}, DecidedAt: time.Now()}
	if justification != "" {
		j, _ := json.Marshal(justification)
		p.Extensions = aais.Extensions{JustificationExtension: j}
	}
	d, err := aais.NewDecision(r, p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Stream: "presenter"}, d)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return d, string(b)
}

func (e *sessionEnv) pending(t *testing.T, id string) bool {
	t.Helper()
	st, err := e.store.RequestState(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st.Pending()
}

// decidedBy checks in the store that the decision recorded for the request
// was made as actor: the stored decision fingerprint is the JCS digest of
// the decision with the actor the server authenticated.
func (e *sessionEnv) decidedBy(t *testing.T, id string, actor aais.Actor) {
	t.Helper()
	st, err := e.store.RequestState(t.Context(), id)
	if err != nil || st.Resolution == nil {
		t.Fatalf("request %s: %v, resolution %v", id, err, st.Resolution)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, rec := range e.decisions {
		if rec.Decision.RequestID != id {
			continue
		}
		if rec.Actor != actor || rec.Decision.Actor != actor {
			t.Fatalf("decision on %s recorded as %+v, want %+v", id, rec.Actor, actor)
		}
		b, err := rec.Decision.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		fp, err := jcs.Digest(b)
		if err != nil {
			t.Fatal(err)
		}
		if fp != st.Resolution.DecisionFingerprint {
			t.Fatalf("the store's decision fingerprint %s is not that of the decision by %s (%s)", st.Resolution.DecisionFingerprint, actor.ID, fp)
		}
		return
	}
	t.Fatalf("no decision recorded for %s", id)
}

func TestLoginPasswordAndToken(t *testing.T) {
	e := newSessionEnv(t, false)
	b := e.browser(t)

	// Not signed in.
	resp, body := b.do(t, "GET", "/approvals/me", "", nil)
	wantProblem(t, resp, body, 401, asc.AuthenticationRequired)

	// A password.
	resp, body = b.do(t, "POST", "/login", `{"id":"bob","password":"correct horse battery"}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	var ans loginAnswer
	_ = json.Unmarshal(body, &ans)
	if ans.Actor.ID != "bob" || ans.Actor.AuthenticatedBy != AuthSessionPassword || ans.CSRFToken == "" || len(ans.Roles) != 1 {
		t.Fatalf("login answer: %s", body)
	}
	b.csrf = ans.CSRFToken
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Name != SessionCookie || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode ||
		cookies[0].Path != "/" || cookies[0].Secure {
		t.Fatalf("cookie: %+v", cookies)
	}
	resp, body = b.do(t, "GET", "/approvals/me", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"authenticated_by":"session/password"`) ||
		!strings.Contains(string(body), ans.CSRFToken) {
		t.Fatalf("me: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.do(t, "GET", "/approvals/snapshot", "", nil); resp.StatusCode != 200 {
		t.Fatalf("snapshot with the cookie: %d %s", resp.StatusCode, body)
	}

	// Another sign-in gets a new session; the old cookie no longer works.
	old := cookies[0].Value
	b.loginPassword(t, "carol")
	req, _ := http.NewRequest("GET", e.srv.URL+"/approvals/me", nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: old})
	if resp, _ := e.srv.Client().Do(req); resp.StatusCode != 401 {
		t.Fatalf("the replaced session still works: %d", resp.StatusCode)
	}

	// A token: the login token, or a reviewer's API token.
	a := e.browser(t).login(t, `{"token":"`+loginToken+`"}`)
	if a.Actor.ID != "admin" || a.Actor.AuthenticatedBy != AuthSessionLoginToken {
		t.Fatalf("token login: %+v", a)
	}
	if a := e.browser(t).login(t, `{"token":"`+bobToken+`"}`); a.Actor.ID != "bob" {
		t.Fatalf("api token login: %+v", a)
	}
	// Bearer API clients keep working, with authenticated_by api_token.
	resp, body = (&browser{e: e, c: e.srv.Client()}).do(t, "GET", "/approvals/me", "", map[string]string{"Authorization": "Bearer " + bobToken})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"authenticated_by":"api_token"`) || strings.Contains(string(body), "csrf") {
		t.Fatalf("bearer me: %d %s", resp.StatusCode, body)
	}
}

func TestLoginRefusals(t *testing.T) {
	e := newSessionEnv(t, false)
	b := e.browser(t)
	for _, body := range []string{
		`{"id":"bob","password":"wrong"}`,
		`{"id":"nobody","password":"correct horse battery"}`,
		`{"token":"wrong"}`,
	} {
		resp, out := b.do(t, "POST", "/login", body, nil)
		wantProblem(t, resp, out, 401, asc.AuthenticationRequired)
		if len(resp.Cookies()) != 0 {
			t.Fatalf("%s: a cookie was set", body)
		}
	}
	resp, out := b.do(t, "POST", "/login", `{"token":"x","id":"bob"}`, nil)
	wantProblem(t, resp, out, 400, asc.InvalidRequest)
	resp, out = b.do(t, "POST", "/login", `id=bob&password=x`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	wantProblem(t, resp, out, 415, asc.InvalidRequest)
	resp, out = b.do(t, "POST", "/login", `{"id":"bob","password":"correct horse battery"}`, map[string]string{"Origin": "https://evil.example"})
	wantProblem(t, resp, out, 403, asc.PermissionDenied)

	// Ten failures from one address: further attempts wait, even right ones.
	for range 7 {
		b.do(t, "POST", "/login", `{"id":"carol","password":"guess"}`, nil)
	}
	resp, out = b.do(t, "POST", "/login", `{"id":"bob","password":"correct horse battery"}`, nil)
	wantProblem(t, resp, out, 429, asc.RateLimited)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	e.clock.Advance(6 * time.Minute)
	b.loginPassword(t, "bob")
}

func TestLogoutAndExpiry(t *testing.T) {
	e := newSessionEnv(t, false)
	b := e.browser(t)
	b.loginPassword(t, "bob")

	// Logout needs the CSRF token.
	csrf := b.csrf
	b.csrf = ""
	resp, out := b.do(t, "POST", "/logout", "", nil)
	wantProblem(t, resp, out, 403, asc.PermissionDenied)
	b.csrf = csrf
	if resp, out := b.do(t, "POST", "/logout", "", nil); resp.StatusCode != 204 {
		t.Fatalf("logout: %d %s", resp.StatusCode, out)
	}
	resp, out = b.do(t, "GET", "/approvals/snapshot", "", nil)
	wantProblem(t, resp, out, 401, asc.AuthenticationRequired)

	// Idle expiry: 30 minutes without use.
	b.loginPassword(t, "bob")
	e.clock.Advance(20 * time.Minute)
	if resp, _ := b.do(t, "GET", "/approvals/me", "", nil); resp.StatusCode != 200 {
		t.Fatalf("after 20 min: %d", resp.StatusCode)
	}
	e.clock.Advance(31 * time.Minute)
	resp, out = b.do(t, "GET", "/approvals/me", "", nil)
	wantProblem(t, resp, out, 401, asc.AuthenticationRequired)

	// Absolute expiry: two hours, however busy.
	b.loginPassword(t, "bob")
	for range 5 {
		e.clock.Advance(25 * time.Minute)
		b.do(t, "GET", "/approvals/me", "", nil)
	}
	resp, out = b.do(t, "GET", "/approvals/me", "", nil)
	wantProblem(t, resp, out, 401, asc.AuthenticationRequired)
	if n := e.sessions.Len(); n != 0 {
		t.Fatalf("%d sessions left", n)
	}
}

func TestSecureCookie(t *testing.T) {
	e := newSessionEnv(t, true)
	b := e.browser(t)
	resp, body := b.do(t, "POST", "/login", `{"token":"`+loginToken+`"}`, nil)
	c := resp.Cookies()
	if resp.StatusCode != 200 || len(c) != 1 || c[0].Name != SecureSessionCookie || !c[0].Secure || !c[0].HttpOnly || c[0].Path != "/" || c[0].Domain != "" {
		t.Fatalf("over TLS: %d %s %+v", resp.StatusCode, body, c)
	}
	var ans loginAnswer
	_ = json.Unmarshal(body, &ans)
	b.csrf = ans.CSRFToken
	if resp, _ := b.do(t, "GET", "/approvals/me", "", nil); resp.StatusCode != 200 {
		t.Fatalf("me over TLS: %d", resp.StatusCode)
	}
	// The plain name is not accepted where cookies are Secure.
	req, _ := http.NewRequest("GET", e.srv.URL+"/approvals/me", nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: c[0].Value})
	if resp, _ := e.srv.Client().Do(req); resp.StatusCode != 401 {
		t.Fatalf("the unprefixed cookie: %d", resp.StatusCode)
	}
}

func TestCookieDecisionsNeedCSRFAndOrigin(t *testing.T) {
	e := newSessionEnv(t, false)
	b := e.browser(t)
	bob := b.loginPassword(t, "bob").Actor
	r := e.gwRequest(t, "1", "billing.invoice.create", "MIFID-II", "agent:acme.advisor")
	d, dec := decision(t, r, aais.Approve, aais.ScopeOnce, "Invoice matches the signed order #42")
	path := "/approvals/" + r.ID + "/decisions"

	resp, out := b.do(t, "POST", path, dec, map[string]string{CSRFHeader: ""})
	wantProblem(t, resp, out, 403, asc.PermissionDenied)
	resp, out = b.do(t, "POST", path, dec, map[string]string{CSRFHeader: "wrong"})
	wantProblem(t, resp, out, 403, asc.PermissionDenied)
	resp, out = b.do(t, "POST", path, dec, map[string]string{"Origin": "https://evil.example"})
	wantProblem(t, resp, out, 403, asc.PermissionDenied)
	resp, out = b.do(t, "POST", path, dec, map[string]string{"Origin": ""})
	wantProblem(t, resp, out, 403, asc.PermissionDenied)
	if !e.pending(t, r.ID) {
		t.Fatal("a refused decision changed the request")
	}

	resp, out = b.do(t, "POST", path, dec, nil)
	m, err := aais.Parse(out)
	if resp.StatusCode != 200 || err != nil || m.Resolution.Outcome != aais.OutcomeApproved || m.Resolution.DecisionID != d.ID {
		t.Fatalf("decision: %d %s %v", resp.StatusCode, out, err)
	}
	// The body said mallory; the store has bob.
	e.decidedBy(t, r.ID, bob)

	// The history names bob and his justification.
	resp, out = b.do(t, "GET", "/approvals/history", "", nil)
	var h struct{ Resolved []HistoryEntry }
	if err := json.Unmarshal(out, &h); err != nil || resp.StatusCode != 200 || len(h.Resolved) != 1 {
		t.Fatalf("history: %d %s", resp.StatusCode, out)
	}
	if got := h.Resolved[0]; got.Actor == nil || got.Actor.ID != "bob" || got.Justification != "Invoice matches the signed order #42" ||
		got.ActionName != "billing.invoice.create" || got.Profile != "MIFID-II" || got.Outcome != aais.OutcomeApproved {
		t.Fatalf("history entry: %+v", got)
	}
}

func TestBearerForgedActorIgnored(t *testing.T) {
	e := newSessionEnv(t, false)
	r := e.gwRequest(t, "2", "billing.refund", "MIFID-II", "agent:acme.advisor")
	_, dec := decision(t, r, aais.Approve, aais.ScopeOnce, "ok")
	api := &browser{e: e, c: e.srv.Client()}
	resp, out := api.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, map[string]string{"Authorization": "Bearer " + bobToken, "Origin": ""})
	if resp.StatusCode != 200 {
		t.Fatalf("bearer decision: %d %s", resp.StatusCode, out)
	}
	e.decidedBy(t, r.ID, aais.Actor{ID: "bob", Type: aais.ActorHuman, DisplayName: "Bob", AuthenticatedBy: AuthAPIToken})
}

func TestRolesAndSeparationOfDuties(t *testing.T) {
	e := newSessionEnv(t, false)
	bob, carol, dave := e.browser(t), e.browser(t), e.browser(t)
	bob.loginPassword(t, "bob")
	carol.loginPassword(t, "carol")
	dave.loginPassword(t, "dave")

	// bob (finance: billing.* under MIFID-II) may not decide a shell command,
	// nor a billing call under another profile.
	shell := e.gwRequest(t, "sh", "shell.exec", "", "agent:acme.advisor")
	gdpr := e.gwRequest(t, "gdpr", "billing.invoice.create", "GDPR-STANDARD", "agent:acme.advisor")
	for _, r := range []*aais.Request{shell, gdpr} {
		for _, v := range []aais.Verdict{aais.Approve, aais.Deny} {
			_, dec := decision(t, r, v, aais.ScopeOnce, "x")
			resp, out := bob.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, nil)
			wantProblem(t, resp, out, 403, asc.PermissionDenied)
		}
		if !e.pending(t, r.ID) {
			t.Fatalf("%s was decided by a reviewer without the role", r.ID)
		}
	}
	resp, out := bob.do(t, "GET", "/approvals/"+shell.ID+"/permission", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(out), `"decide":false`) {
		t.Fatalf("permission: %d %s", resp.StatusCode, out)
	}
	// dave (ops: shell.*) may.
	_, dec := decision(t, shell, aais.Deny, aais.ScopeOnce, "")
	if resp, out := dave.do(t, "POST", "/approvals/"+shell.ID+"/decisions", dec, nil); resp.StatusCode != 200 {
		t.Fatalf("dave: %d %s", resp.StatusCode, out)
	}

	// Separation of duties: carol asked (as the agent's principal), so
	// carol may not approve under MIFID-II; bob may.
	own := e.gwRequest(t, "own", "billing.invoice.create", "MIFID-II", "carol")
	_, dec = decision(t, own, aais.Approve, aais.ScopeOnce, "looks right")
	resp, out = carol.do(t, "POST", "/approvals/"+own.ID+"/decisions", dec, nil)
	wantProblem(t, resp, out, 403, asc.PermissionDenied)
	if !strings.Contains(string(out), "Separation of duties") || !e.pending(t, own.ID) {
		t.Fatalf("separation of duties: %s", out)
	}
	resp, out = carol.do(t, "GET", "/approvals/"+own.ID+"/permission", "", nil)
	if !strings.Contains(string(out), `"decide":true,"approve":false`) {
		t.Fatalf("carol's permission: %d %s", resp.StatusCode, out)
	}

	// A MIFID-II approval needs a justification.
	_, dec = decision(t, own, aais.Approve, aais.ScopeOnce, "")
	resp, out = bob.do(t, "POST", "/approvals/"+own.ID+"/decisions", dec, nil)
	wantProblem(t, resp, out, 422, asc.InvalidRequest)
	_, dec = decision(t, own, aais.Approve, aais.ScopeOnce, "   ")
	resp, out = bob.do(t, "POST", "/approvals/"+own.ID+"/decisions", dec, nil)
	wantProblem(t, resp, out, 422, asc.InvalidRequest)
	_, dec = decision(t, own, aais.Approve, aais.ScopeOnce, strings.Repeat("x", MaxJustification+1))
	resp, out = bob.do(t, "POST", "/approvals/"+own.ID+"/decisions", dec, nil)
	wantProblem(t, resp, out, 400, asc.InvalidRequest)
	if !e.pending(t, own.ID) {
		t.Fatal("a refused approval resolved the request")
	}
	_, dec = decision(t, own, aais.Approve, aais.ScopeOnce, "Order #7 verified by phone")
	if resp, out := bob.do(t, "POST", "/approvals/"+own.ID+"/decisions", dec, nil); resp.StatusCode != 200 {
		t.Fatalf("bob: %d %s", resp.StatusCode, out)
	}

	// The admin login token may decide anything.
	admin := e.browser(t)
	admin.login(t, `{"token":"`+loginToken+`"}`)
	_, dec = decision(t, gdpr, aais.Deny, aais.ScopeOnce, "")
	if resp, out := admin.do(t, "POST", "/approvals/"+gdpr.ID+"/decisions", dec, nil); resp.StatusCode != 200 {
		t.Fatalf("admin: %d %s", resp.StatusCode, out)
	}
}

func TestRulesEndpoints(t *testing.T) {
	e := newSessionEnv(t, false)
	b := e.browser(t)
	b.loginPassword(t, "bob")
	r := e.gwRequest(t, "s1", "billing.invoice.create", "MIFID-II", "agent:acme.advisor")
	_, dec := decision(t, r, aais.Approve, aais.ScopeSession, "Recurring invoices for ACME")
	if resp, out := b.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, nil); resp.StatusCode != 200 {
		t.Fatalf("session approval: %d %s", resp.StatusCode, out)
	}
	resp, out := b.do(t, "GET", "/approvals/rules", "", nil)
	var list struct {
		Rules []struct {
			Rule   *aais.Rule
			Active bool
		}
	}
	if err := json.Unmarshal(out, &list); err != nil || resp.StatusCode != 200 || len(list.Rules) != 1 || !list.Rules[0].Active {
		t.Fatalf("rules: %d %s %v", resp.StatusCode, out, err)
	}
	id := list.Rules[0].Rule.ID
	if list.Rules[0].Rule.Actor.ID != "bob" {
		t.Fatalf("rule actor: %+v", list.Rules[0].Rule.Actor)
	}
	resp, out = b.do(t, "POST", "/approvals/rules/"+id+"/revoke", "", map[string]string{CSRFHeader: ""})
	wantProblem(t, resp, out, 403, asc.PermissionDenied)
	resp, out = b.do(t, "POST", "/approvals/rules/"+id+"/revoke", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(out), `"revoked":true`) {
		t.Fatalf("revoke: %d %s", resp.StatusCode, out)
	}
	rules, _ := e.auth.Rules(t.Context())
	if rules.Get(id).RevokedBy.ID != "bob" {
		t.Fatalf("revoked by %+v", rules.Get(id).RevokedBy)
	}
	resp, out = b.do(t, "POST", "/approvals/rules/rul_nope/revoke", "", nil)
	wantProblem(t, resp, out, 404, asc.NotFound)
}

func TestEventsWithSessionCookie(t *testing.T) {
	e := newSessionEnv(t, false)
	b := e.browser(t)
	b.loginPassword(t, "bob")
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/approvals/events", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	s := &sse{sc: sc, body: resp.Body}
	if ev := s.next(t); ev.typ != string(aais.TypeSnapshot) {
		t.Fatalf("first event: %+v", ev)
	}
	r := e.gwRequest(t, "ev", "billing.invoice.create", "MIFID-II", "agent:acme.advisor")
	if ev := s.next(t); ev.typ != string(aais.TypeRequested) || !strings.Contains(ev.data, r.ID) {
		t.Fatalf("second event: %+v", ev)
	}
	// Signing out ends the stream.
	if resp, out := b.do(t, "POST", "/logout", "", nil); resp.StatusCode != 204 {
		t.Fatalf("logout: %d %s", resp.StatusCode, out)
	}
	done := make(chan bool)
	go func() {
		for sc.Scan() {
		}
		done <- true
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived the session")
	}
}

func TestUIServed(t *testing.T) {
	e := newSessionEnv(t, false)
	c := e.srv.Client()
	for path, ctype := range map[string]string{"/": "text/html", "/ui/app.js": "javascript", "/ui/app.css": "text/css", "/ui/icon.svg": "image/svg+xml"} {
		resp, err := c.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if resp.Header.Get("Content-Security-Policy") != ContentSecurityPolicy || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: headers %v", path, resp.Header)
		}
	}
	for _, path := range []string{"/ui/", "/ui/nope.js", "/ui/index.html"} {
		if resp, err := c.Get(e.srv.URL + path); err != nil || resp.StatusCode != 404 {
			t.Fatalf("%s: %v %v", path, resp.StatusCode, err)
		}
	}
	if !strings.Contains(ContentSecurityPolicy, "script-src 'self'") || strings.Contains(ContentSecurityPolicy, "unsafe") {
		t.Fatal("the CSP allows inline script")
	}
}

// The inbox's own files hold no inline script or style, load nothing from
// elsewhere, and never put data into innerHTML.
func TestUIFilesAreSelfContained(t *testing.T) {
	html, _ := uiFiles.ReadFile("ui/index.html")
	js, _ := uiFiles.ReadFile("ui/app.js")
	css, _ := uiFiles.ReadFile("ui/app.css")
	for _, bad := range []string{"<script>", " style=", " onclick=", " onload=", "http://", "https://", "//cdn"} {
		if strings.Contains(string(html), bad) {
			t.Errorf("index.html contains %q", bad)
		}
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("app.js contains %q", bad)
		}
	}
	for _, bad := range []string{"@import", "url(", "@font-face"} {
		if strings.Contains(string(css), bad) {
			t.Errorf("app.css contains %q", bad)
		}
	}
}
