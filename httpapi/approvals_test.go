package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/store/memstore"
)

const token = "t0ken-for-alice"

type env struct {
	srv   *httptest.Server
	store *memstore.Store
	auth  *aais.Authority
	clock *aaistest.Clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := memstore.New()
	c := aaistest.NewClock(time.Now().UTC())
	a := aaistest.NewAuthority(t, s, c)
	toks, err := NewTokens(map[string]aais.Actor{TokenHash(token): {ID: "alice", Type: aais.ActorHuman}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewApprovals(ApprovalsOptions{Authority: a, Store: s, Auth: toks, Poll: 5 * time.Millisecond,
		Heartbeat: 20 * time.Millisecond, AllowedOrigins: []string{"https://review.example"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{srv: srv, store: s, auth: a, clock: c}
}

func (e *env) do(t *testing.T, method, path, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (e *env) decisionBody(t *testing.T, r *aais.Request, v aais.Verdict) (*aais.Decision, string) {
	t.Helper()
	d := aaistest.Decision(t, r, v, "", e.clock.Now())
	d.Actor = aais.Actor{ID: "mallory", Type: aais.ActorHuman} // never trusted
	m, err := aais.NewMessage(aais.Header{OccurredAt: e.clock.Now(), Stream: "presenter"}, d)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return d, string(b)
}

// wantProblem checks an RFC 9457 answer carrying the ASC code.
func wantProblem(t *testing.T, resp *http.Response, body []byte, status int, code asc.Code) {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("status %d %s, want %d problem+json: %s", resp.StatusCode, resp.Header.Get("Content-Type"), status, body)
	}
	p, err := asc.ParseProblem(body)
	if err != nil || p.AgentStatus == nil || p.AgentStatus.Code != code {
		t.Fatalf("problem %s: %v; want ASC code %d", body, err, code)
	}
}

func TestApprovalsHTTP(t *testing.T) {
	e := newEnv(t)
	r := aaistest.Request(t, e.clock.Now(), "1")
	if _, _, err := e.auth.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}

	resp, body := e.do(t, "GET", "/approvals/snapshot", "", nil)
	snap, err := aais.Parse(body)
	if resp.StatusCode != 200 || err != nil || len(snap.Snapshot.Pending) != 1 {
		t.Fatalf("snapshot: %d %s %v", resp.StatusCode, body, err)
	}

	resp, body = e.do(t, "GET", "/approvals/snapshot", "", map[string]string{"Authorization": ""})
	wantProblem(t, resp, body, 401, asc.AuthenticationRequired)
	resp, body = e.do(t, "GET", "/approvals/snapshot", "", map[string]string{"Authorization": "Bearer wrong"})
	wantProblem(t, resp, body, 401, asc.AuthenticationRequired)

	d, dec := e.decisionBody(t, r, aais.Approve)
	path := "/approvals/" + r.ID + "/decisions"
	resp, body = e.do(t, "POST", path, dec, map[string]string{"Origin": "https://evil.example"})
	wantProblem(t, resp, body, 403, asc.PermissionDenied)
	resp, body = e.do(t, "POST", path, dec, map[string]string{"Content-Type": "text/plain"})
	wantProblem(t, resp, body, 415, asc.InvalidRequest)
	resp, body = e.do(t, "POST", "/approvals/apr_other/decisions", dec, nil)
	wantProblem(t, resp, body, 400, asc.InvalidRequest)
	resp, body = e.do(t, "POST", path, `{"aais":"1.0"}`, nil)
	wantProblem(t, resp, body, 400, asc.InvalidRequest)
	resp, body = e.do(t, "POST", path, strings.Repeat(" ", 70<<10), nil)
	wantProblem(t, resp, body, 413, asc.InvalidRequest)
	if !e.pending(t, r.ID) {
		t.Fatal("a refused decision changed the request")
	}

	resp, body = e.do(t, "POST", path, dec, map[string]string{"Origin": "https://review.example"})
	receipt, err := aais.Parse(body)
	if resp.StatusCode != 200 || err != nil || receipt.Resolution.Outcome != aais.OutcomeApproved || receipt.Resolution.DecisionID != d.ID {
		t.Fatalf("decision: %d %s %v", resp.StatusCode, body, err)
	}
	// The same decision again: the same receipt.
	if resp, again := e.do(t, "POST", path, dec, nil); resp.StatusCode != 200 || !bytes.Equal(again, body) {
		t.Fatalf("replay: %d %s", resp.StatusCode, again)
	}
	// Another decision: conflict.
	_, deny := e.decisionBody(t, r, aais.Deny)
	resp, body = e.do(t, "POST", path, deny, nil)
	if m, err := aais.Parse(body); resp.StatusCode != 409 || err != nil || m.Resolution.Outcome != aais.OutcomeConflict {
		t.Fatalf("conflicting decision: %d %s", resp.StatusCode, body)
	}

	unknown := aaistest.Request(t, e.clock.Now(), "404")
	_, dec404 := e.decisionBody(t, unknown, aais.Approve)
	resp, body = e.do(t, "POST", "/approvals/"+unknown.ID+"/decisions", dec404, nil)
	wantProblem(t, resp, body, 404, asc.NotFound)
}

func (e *env) pending(t *testing.T, id string) bool {
	st, err := e.store.RequestState(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st.Pending()
}

// sse reads Server-Sent Events.
type sse struct {
	sc   *bufio.Scanner
	body io.Closer
}

type event struct{ id, typ, data string }

func (e *env) stream(t *testing.T, lastID string) *sse {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/approvals/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &sse{sc: sc, body: resp.Body}
}

// next returns the next event, skipping heartbeats.
func (s *sse) next(t *testing.T) event {
	t.Helper()
	var ev event
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if ev.typ != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
	t.Fatalf("stream ended: %v", s.sc.Err())
	return ev
}

func TestApprovalsEvents(t *testing.T) {
	e := newEnv(t)
	r1 := aaistest.Request(t, e.clock.Now(), "1")
	if _, _, err := e.auth.Create(t.Context(), r1); err != nil {
		t.Fatal(err)
	}
	s := e.stream(t, "")
	first := s.next(t)
	if first.typ != string(aais.TypeSnapshot) || first.id != "1" {
		t.Fatalf("first event %+v, want the snapshot as of 1", first)
	}
	var v aais.View
	m, err := aais.Parse([]byte(first.data))
	if err != nil || v.Restore(m) != nil {
		t.Fatalf("snapshot data: %v", err)
	}
	r2 := aaistest.Request(t, e.clock.Now(), "2")
	if _, _, err := e.auth.Create(t.Context(), r2); err != nil {
		t.Fatal(err)
	}
	if _, err := e.auth.Decide(t.Context(), aaistest.Decision(t, r1, aais.Deny, "", e.clock.Now()), aaistest.Actor, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ev := s.next(t)
		m, err := aais.Parse([]byte(ev.data))
		if err != nil || ev.id != seqString(m.Sequence) || ev.typ != string(m.Type) {
			t.Fatalf("event %+v: %v", ev, err)
		}
		if _, err := v.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
	if p := v.Pending(time.Time{}); len(p) != 1 || p[0].ID != r2.ID {
		t.Fatalf("view from the stream: %v", p)
	}

	// Resuming after event 2 gives event 3 first, with no snapshot.
	if ev := e.stream(t, "2").next(t); ev.id != "3" || ev.typ != string(aais.TypeResolved) {
		t.Fatalf("resumed stream starts with %+v", ev)
	}
	// A reset store: the stream says so and restarts from a snapshot.
	resumed := e.stream(t, "3")
	e.store.Reset()
	if ev := resumed.next(t); ev.typ != "gap" {
		t.Fatalf("after a reset: %+v, want a gap event", ev)
	}
	if ev := resumed.next(t); ev.typ != string(aais.TypeSnapshot) || ev.id != "0" {
		t.Fatalf("after the gap: %+v, want a snapshot as of 0", ev)
	}
}

func seqString(n uint64) string { b, _ := json.Marshal(n); return string(b) }

func TestTokens(t *testing.T) {
	if _, err := NewTokens(map[string]aais.Actor{"md5:abc": {ID: "a", Type: aais.ActorHuman}}); err == nil {
		t.Fatal("a hash that is not sha256 was accepted")
	}
	if _, err := NewTokens(map[string]aais.Actor{TokenHash("x"): {}}); err == nil {
		t.Fatal("a token without an actor was accepted")
	}
	toks, err := NewTokens(map[string]aais.Actor{TokenHash("x"): {ID: "a", Type: aais.ActorHuman, AuthenticatedBy: "claimed"}})
	if err != nil {
		t.Fatal(err)
	}
	for hdr, ok := range map[string]bool{"Bearer x": true, "bearer x": true, "Bearer y": false, "Basic x": false, "x": false, "": false} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", hdr)
		a, err := toks.Authenticate(r)
		if (err == nil) != ok || (ok && (a.ID != "a" || a.AuthenticatedBy != "api_token")) {
			t.Errorf("%q: %+v, %v", hdr, a, err)
		}
	}
}
