package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/store/memstore"
)

const (
	aliceToken = "review-token-alice"
	bobToken   = "review-token-bob"
)

// reviewServer is the approvals HTTP API of a custos serve: a memstore
// authority, two reviewers (alice may decide everything, bob only billing)
// and a switch that ends the first event stream.
type reviewServer struct {
	url   string
	auth  *aais.Authority
	store *memstore.Store

	cut     chan struct{} // closed: the first event stream ends
	streams atomic.Int32
	mu      sync.Mutex
	lastIDs []string // the Last-Event-ID of each event stream opened
}

func newReviewServer(t *testing.T) *reviewServer {
	t.Helper()
	st := memstore.New()
	a, err := aais.NewAuthority(st, &aais.AuthorityOptions{Stream: "test"})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := httpapi.NewTokens(map[string]aais.Actor{
		httpapi.TokenHash(aliceToken): {ID: "alice", Type: aais.ActorHuman, DisplayName: "Alice Example"},
		httpapi.TokenHash(bobToken):   {ID: "bob", Type: aais.ActorHuman},
	})
	if err != nil {
		t.Fatal(err)
	}
	policy := &httpapi.Policy{
		Roles: map[string]httpapi.Role{
			"admin":   {All: true},
			"finance": {Capabilities: []string{"billing.*"}},
		},
		Grants:                map[string][]string{"alice": {"admin"}, "bob": {"finance"}},
		JustificationRequired: []string{"MIFID-II"},
	}
	h, err := httpapi.NewApprovals(httpapi.ApprovalsOptions{Authority: a, Store: st, Auth: toks, Policy: policy,
		Poll: 5 * time.Millisecond, Heartbeat: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rs := &reviewServer{auth: a, store: st, cut: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/approvals/events" {
			rs.mu.Lock()
			rs.lastIDs = append(rs.lastIDs, r.Header.Get("Last-Event-ID"))
			rs.mu.Unlock()
			if rs.streams.Add(1) == 1 {
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				go func() {
					select {
					case <-rs.cut:
						cancel()
					case <-ctx.Done():
					}
				}()
				r = r.WithContext(ctx)
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rs.url = srv.URL
	return rs
}

// submit records a pending request: apr_<n> running a shell command
// (offering approve once, approve for the session, deny), or with profile
// a billing action under that compliance profile.
func (rs *reviewServer) submit(t *testing.T, n, profile string) *aais.Request {
	t.Helper()
	now := time.Now()
	action := `{"kind":"process.exec","name":"shell.exec","summary":"Run the syntax check ` + n + `",` +
		`"arguments":{"command":"node --check script-` + n + `.js","flags":["--strict"]},"working_directory":"/workspace/example",` +
		`"effects":["Starts a local Node.js process"]}`
	var ext aais.Extensions
	if profile != "" {
		action = `{"kind":"tool.call","name":"billing.invoice.create","summary":"Create invoice ` + n + `",` +
			`"arguments":{"amount":"100.00","po":"PO-2291"}}`
		ext = aais.Extensions{httpapi.ExchangeExtension: json.RawMessage(`{"profile":"` + profile + `","sender":"agent:acme.advisor"}`)}
	}
	r, err := aais.NewRequest(aais.RequestParams{
		ID:        "apr_" + n,
		CreatedAt: now,
		ExpiresAt: now.Add(time.Hour),
		Origin:    aais.Origin{Harness: "test", SessionID: "s-1", AgentID: "agent:acme.advisor"},
		Action:    json.RawMessage(action),
		Risk:      aais.Risk{Level: aais.RiskHigh, Reasons: []string{"Executes a local process"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Approve, Scope: aais.ScopeSession, Label: "Allow for this session",
				ScopeConstraints: aais.Constraints{"action_name": json.RawMessage(`"shell.exec"`), "origin_session": json.RawMessage(`"s-1"`)}},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
		Extensions: ext,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rs.auth.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// receipt returns the stored receipt of a resolved request.
func (rs *reviewServer) receipt(t *testing.T, id string) *aais.Resolution {
	t.Helper()
	st, err := rs.auth.State(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Resolution == nil {
		t.Fatalf("%s is still pending", id)
	}
	return st.Resolution.Event.Resolution
}

// reviewSession is a custos review running in-process with scripted input.
type reviewSession struct {
	in        *io.PipeWriter
	out, errs *syncBuffer
	code      chan int
	closeOnce sync.Once
}

func startReview(t *testing.T, server, token string, extra ...string) *reviewSession {
	t.Helper()
	pr, pw := io.Pipe()
	s := &reviewSession{in: pw, out: &syncBuffer{}, errs: &syncBuffer{}, code: make(chan int, 1)}
	args := append([]string{"review", "--server", server, "--token", token}, extra...)
	go func() { s.code <- run(context.Background(), args, pr, s.out, s.errs) }()
	t.Cleanup(func() { s.closeOnce.Do(func() { pw.Close() }) })
	return s
}

// send types one line; it returns the output length before it, for expect.
func (s *reviewSession) send(t *testing.T, line string) int {
	t.Helper()
	mark := len(s.out.String())
	done := make(chan error, 1)
	go func() { _, err := io.WriteString(s.in, line+"\n"); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("typing %q: %v", line, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("custos review does not read %q; output:\n%s", line, s.out.String())
	}
	return mark
}

// expect waits until b shows want after the first mark bytes.
func expect(t *testing.T, b *syncBuffer, mark int, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		text := b.String()
		if strings.Contains(text[mark:], want) {
			return text[mark:]
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw %q; output:\n%s", want, text)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// quit ends the session and returns its exit code.
func (s *reviewSession) quit(t *testing.T) int {
	t.Helper()
	s.send(t, "quit")
	s.closeOnce.Do(func() { s.in.Close() })
	select {
	case code := <-s.code:
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("custos review did not stop; output:\n%s", s.out.String())
		return -1
	}
}

func TestReviewInteractive(t *testing.T) {
	rs := newReviewServer(t)
	r1 := rs.submit(t, "1", "")
	s := startReview(t, rs.url, aliceToken)

	out := expect(t, s.out, 0, "1 pending:")
	if !strings.Contains(out, "as alice (Alice Example), roles admin") || !strings.Contains(out, "shell.exec") ||
		!strings.Contains(out, "agent:acme.advisor") || !strings.Contains(out, "high") || strings.Contains(out, "\x1b[") {
		t.Fatalf("the queue:\n%s", out)
	}

	// A request submitted now appears without any input.
	rs.submit(t, "2", "")
	expect(t, s.out, 0, "+ #2 new request: high  shell.exec")

	mark := s.send(t, "show 1")
	out = expect(t, s.out, mark, "Decide with:")
	for _, want := range []string{`"command": "node --check script-1.js"`, `"--strict"`, r1.ActionDigest,
		"process.exec", "/workspace/example", "Starts a local Node.js process", "Executes a local process",
		"Compliance profile none", "Approves this one request only", "later requests of the same session",
		"Conditions: the action is named shell.exec; it comes from session s-1.", "You may decide     yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("show 1 lacks %q:\n%s", want, out)
		}
	}

	mark = s.send(t, "approve 1 once -- matches PO-2291")
	// The receipt, and the request leaving the queue (in either order:
	// the stream may report it first).
	expect(t, s.out, mark, "Outcome   approved (scope once)")
	expect(t, s.out, mark, "- #1 apr_1 approved (once) by alice")
	res := rs.receipt(t, "apr_1")
	actor, just, ok := aais.DecidedBy(res)
	if res.Outcome != aais.OutcomeApproved || !ok || actor.ID != "alice" || actor.AuthenticatedBy != httpapi.AuthAPIToken || just != "matches PO-2291" {
		t.Fatalf("receipt of apr_1: %s by %+v (%v), justification %q", res.Outcome, actor, ok, just)
	}

	// deny, with the justification asked for.
	mark = s.send(t, "deny 2")
	expect(t, s.out, mark, "Justification for #2 (optional")
	mark = s.send(t, "not needed today")
	expect(t, s.out, mark, "Outcome   denied")
	res = rs.receipt(t, "apr_2")
	if actor, just, _ := aais.DecidedBy(res); res.Outcome != aais.OutcomeDenied || actor.ID != "alice" || just != "not needed today" {
		t.Fatalf("receipt of apr_2: %s by %+v, %q", res.Outcome, actor, just)
	}
	mark = s.send(t, "approve 2")
	expect(t, s.out, mark, "Request #2 (apr_2) is no longer pending.")

	// The stream drops once: the reviewer is told, it reconnects where it
	// stopped, and the list keeps updating.
	close(rs.cut)
	expect(t, s.errs, 0, "event stream lost")
	expect(t, s.errs, 0, "event stream reconnected")
	rs.submit(t, "3", "")
	expect(t, s.out, 0, "+ #3 new request")
	rs.mu.Lock()
	ids := append([]string(nil), rs.lastIDs...)
	rs.mu.Unlock()
	if len(ids) < 2 || ids[0] != "1" || ids[1] == "0" || ids[1] == "" {
		t.Fatalf("Last-Event-ID of the streams: %q", ids)
	}

	// A session approval makes a rule; rules lists it, revoke ends it.
	mark = s.send(t, "approve 3 session -- --justification with dashes")
	expect(t, s.out, mark, "Outcome   approved (scope session)")
	if _, just, _ := aais.DecidedBy(rs.receipt(t, "apr_3")); just != "--justification with dashes" {
		t.Fatalf("justification %q", just)
	}
	rules, err := rs.auth.Rules(context.Background())
	if err != nil || len(rules) != 1 {
		t.Fatalf("rules: %v %v", rules, err)
	}
	var ruleID string
	for _, r := range rules {
		ruleID = r.ID
	}
	mark = s.send(t, "rules")
	out = expect(t, s.out, mark, ruleID)
	if !strings.Contains(out, "active") || !strings.Contains(out, "the action is named shell.exec") {
		t.Fatalf("rules:\n%s", out)
	}
	mark = s.send(t, "revoke "+ruleID)
	expect(t, s.out, mark, "Revoked rule "+ruleID)
	mark = s.send(t, "revoke "+ruleID)
	expect(t, s.out, mark, "was already revoked by alice")

	mark = s.send(t, "history")
	out = expect(t, s.out, mark, "matches PO-2291")
	if !strings.Contains(out, "alice (api_token)") || !strings.Contains(out, "denied") {
		t.Fatalf("history:\n%s", out)
	}

	// A profile that requires a justification: nothing is sent without one.
	rs.submit(t, "4", "MIFID-II")
	expect(t, s.out, 0, "+ #4 new request")
	mark = s.send(t, "approve 4")
	expect(t, s.out, mark, "Justification for #4 (required by MIFID-II)")
	mark = s.send(t, "")
	expect(t, s.out, mark, "requires a justification to approve; nothing was sent")
	mark = s.send(t, "approve 4 persistent -- x")
	expect(t, s.out, mark, "does not offer (approve, persistent)")
	mark = s.send(t, "bogus")
	expect(t, s.out, mark, `Unknown command "bogus"`)
	mark = s.send(t, "help")
	expect(t, s.out, mark, "revoke RULE_ID")

	if code := s.quit(t); code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, s.errs.String())
	}
}

func TestReviewForbidden(t *testing.T) {
	rs := newReviewServer(t)
	rs.submit(t, "1", "")
	s := startReview(t, rs.url, bobToken)
	expect(t, s.out, 0, "1 pending:")

	mark := s.send(t, "show 1")
	expect(t, s.out, mark, "You may decide     no: Your roles (finance) do not cover capability shell.exec.")

	// The server refuses, with its ASC status; the request stays pending.
	mark = s.send(t, "approve 1 once -- looks fine")
	out := expect(t, s.out, mark, "stays pending")
	if !strings.Contains(out, "Refused: HTTP 403, ASC-4002 PERMISSION_DENIED: Your roles (finance) do not cover") {
		t.Fatalf("approve by bob:\n%s", out)
	}
	if st, err := rs.auth.State(context.Background(), "apr_1"); err != nil || st.Resolution != nil {
		t.Fatalf("apr_1 after a refused decision: %+v %v", st.Resolution, err)
	}
	if code := s.quit(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestReviewGap(t *testing.T) {
	rs := newReviewServer(t)
	rs.submit(t, "1", "")
	s := startReview(t, rs.url, aliceToken)
	expect(t, s.out, 0, "1 pending:")
	for rs.streams.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}

	// The store loses its state: the server says so on the stream and
	// sends a fresh snapshot, from which the list is rebuilt.
	rs.store.Reset()
	expect(t, s.errs, 0, "could not continue")
	expect(t, s.out, 0, "- #1 apr_1 is no longer pending")
	rs.submit(t, "2", "")
	expect(t, s.out, 0, "+ #2 new request")
	mark := s.send(t, "list")
	out := expect(t, s.out, mark, "1 pending:")
	if !strings.Contains(out, "Run the syntax check 2") || strings.Contains(out, "Run the syntax check 1") {
		t.Fatalf("the list after the gap:\n%s", out)
	}
	if code := s.quit(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestReviewOnceAndJSON(t *testing.T) {
	rs := newReviewServer(t)
	rs.submit(t, "1", "")
	rs.submit(t, "2", "MIFID-II")

	t.Setenv("CUSTOS_SERVER", rs.url)
	t.Setenv("CUSTOS_TOKEN", aliceToken)
	code, out, errOut := custos(t, "", "review", "--once")
	if code != 0 || !strings.Contains(out, "2 pending:") || !strings.Contains(out, "billing.invoice.create") ||
		!strings.Contains(out, "MIFID-II") || !strings.Contains(out, " in ") {
		t.Fatalf("--once: %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = custos(t, "", "review", "--json")
	m, err := aais.Parse([]byte(strings.TrimSpace(out)))
	if code != 0 || err != nil || m.Type != aais.TypeSnapshot || len(m.Snapshot.Pending) != 2 {
		t.Fatalf("--json: %d %v\n%s%s", code, err, out, errOut)
	}

	code, _, errOut = custos(t, "", "review", "--once", "--token", "wrong")
	if code != 1 || !strings.Contains(errOut, "HTTP 401, ASC-") || !strings.Contains(errOut, "AUTHENTICATION_REQUIRED") {
		t.Fatalf("a wrong token: %d %s", code, errOut)
	}
	t.Setenv("CUSTOS_TOKEN", "")
	if code, _, errOut = custos(t, "", "review", "--once"); code != 2 || !strings.Contains(errOut, "--token") {
		t.Fatalf("no token: %d %s", code, errOut)
	}
	if code, _, _ = custos(t, "", "review", "--once", "--token", "x", "--server", "ftp://example"); code != 2 {
		t.Fatalf("an ftp server: %d", code)
	}
}

func TestReviewVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain":         "plain",
		"a\x1b[2Jb":     "a⟨U+001B⟩[2Jb",
		"pay\u202Eabc":  "pay⟨U+202E⟩abc",
		"x\u200by":      "x⟨U+200B⟩y",
		"line\nbreak":   "line⟨U+000A⟩break",
		"csi\u009bhere": "csi⟨U+009B⟩here",
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
	if got := visibleText("a\nb\x07", true); got != "a\nb⟨U+0007⟩" {
		t.Errorf("visibleText block: %q", got)
	}
	for in, want := range map[string][3]string{
		"1 once -- matches PO-2291":     {"1 once", "matches PO-2291", "y"},
		"1 --justification=because":     {"1", "because", "y"},
		"2 session --justification why": {"2 session", "why", "y"},
		`3 -- "quoted words"`:           {"3", "quoted words", "y"},
		"4 once":                        {"4 once", "", ""},
		"5 --":                          {"5", "", "y"},
	} {
		head, just, given := splitJustification(in)
		g := ""
		if given {
			g = "y"
		}
		if strings.TrimSpace(head) != want[0] || just != want[1] || g != want[2] {
			t.Errorf("splitJustification(%q) = %q, %q, %v", in, head, just, given)
		}
	}
}

// edit proposes corrected arguments: the original is superseded, the new
// request (with the edited arguments) is pending and needs its own
// decision; malformed JSON sends nothing.
func TestReviewEdit(t *testing.T) {
	rs := newReviewServer(t)
	rs.submit(t, "1", "")
	s := startReview(t, rs.url, aliceToken)
	expect(t, s.out, 0, "1 pending:")
	mark := s.send(t, "edit 1 -- wrong file")
	expect(t, s.out, mark, "New arguments")
	mark = s.send(t, "not json")
	expect(t, s.out, mark, "must be one JSON object; nothing was sent")
	mark = s.send(t, "edit 1 -- wrong file")
	expect(t, s.out, mark, "New arguments")
	mark = s.send(t, `{"command":"node --check fixed.js","flags":["--strict"]}`)
	out := expect(t, s.out, mark, "needs its own decision")
	if !strings.Contains(out, "superseded by apr_1-e1") {
		t.Fatalf("edit:\n%s", out)
	}
	st, err := rs.auth.State(context.Background(), "apr_1-e1")
	if err != nil || st.Resolution != nil || !strings.Contains(string(st.Request.Event.Request.Action.Arguments()), "fixed.js") {
		t.Fatalf("the edited request: %+v %v", st, err)
	}
	if orig, err := rs.auth.State(context.Background(), "apr_1"); err != nil || orig.Resolution == nil || orig.Resolution.Event.Resolution.Outcome != aais.OutcomeCancelled {
		t.Fatalf("the original after the edit: %+v %v", orig, err)
	}
	if code := s.quit(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
