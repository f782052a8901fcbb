package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/store/memstore"
)

// The reviewers of the authorization tests, each with an API token named
// after them: two submitters (programs that submit requests, like custos
// mcp-proxy), a reviewer whose role covers write_file, one whose role
// covers only billing, and one without any role.
var authzActors = []string{"proxy-a", "proxy-b", "writer", "biller", "nobody"}

func authzToken(id string) string { return "tok-" + id }

func authzPolicy() *Policy {
	return &Policy{
		Roles: map[string]Role{
			"files":   {Capabilities: []string{"write_file"}},
			"billing": {Capabilities: []string{"billing.*"}},
		},
		Grants: map[string][]string{"proxy-a": {"files"}, "proxy-b": {"files"}, "writer": {"files"}, "biller": {"billing"}},
		// The test requests carry MIFID-II in custos.dev/exchange.
		SeparationOfDuties:    []string{"MIFID-II"},
		JustificationRequired: []string{"DORA"},
	}
}

type authzEnv struct {
	srv    *httptest.Server
	auth   *aais.Authority
	policy *Policy
}

// newAuthzEnv mounts NewSubmit and NewApprovals with real bearer tokens
// and the same policy, as custos serve does.
func newAuthzEnv(t *testing.T) *authzEnv {
	t.Helper()
	s := memstore.New()
	a, err := aais.NewAuthority(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[string]aais.Actor{}
	for _, id := range authzActors {
		typ := aais.ActorHuman
		if strings.HasPrefix(id, "proxy") {
			typ = aais.ActorPolicy
		}
		hashes[TokenHash(authzToken(id))] = aais.Actor{ID: id, Type: typ}
	}
	toks, err := NewTokens(hashes)
	if err != nil {
		t.Fatal(err)
	}
	pol := authzPolicy()
	quiet := slog.New(slog.DiscardHandler)
	approvals, err := NewApprovals(ApprovalsOptions{Authority: a, Store: s, Auth: toks, Policy: pol, Logger: quiet,
		Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	submit, err := NewSubmit(SubmitOptions{Authority: a, Auth: toks, Policy: pol, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals/", approvals)
	mux.Handle("/approvals/requests", submit)
	mux.Handle("/approvals/requests/", submit)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &authzEnv{srv: srv, auth: a, policy: pol}
}

func (e *authzEnv) call(t *testing.T, method, path, body, who string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+authzToken(who))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// submitAs submits a request as who, under MIFID-II, and returns it as
// recorded.
func (e *authzEnv) submitAs(t *testing.T, who string, o reqOpts) *aais.Request {
	t.Helper()
	prof, _ := json.Marshal(map[string]string{"profile": "MIFID-II"})
	if o.ext == nil {
		o.ext = aais.Extensions{ExchangeExtension: prof}
	}
	req, body := submitRequest(t, o)
	if code, out := e.call(t, "POST", "/approvals/requests", body, who); code != http.StatusAccepted {
		t.Fatalf("submit as %s: %d %s", who, code, out)
	}
	st, err := e.auth.State(t.Context(), req.ID)
	if err != nil {
		t.Fatal(err)
	}
	return st.Request.Event.Request
}

func (e *authzEnv) pending(t *testing.T, id string) bool {
	t.Helper()
	st, err := e.auth.State(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st.Resolution == nil
}

func decisionJSON(t *testing.T, req *aais.Request, v aais.Verdict, ext aais.Extensions) string {
	t.Helper()
	// The actor named here is a lie on purpose: the authenticated one
	// decides.
	d, err := aais.NewDecision(req, aais.DecisionParams{Decision: v, Scope: aais.ScopeOnce,
		Actor: aais.Actor{ID: "someone-else", Type: aais.ActorHuman}, DecidedAt: time.Now(), Extensions: ext})
	if err != nil {
		t.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, d)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The submitter is recorded on the request as authenticated, and a
// request may not bring its own.
func TestSubmitRecordsTheSubmitter(t *testing.T) {
	e := newAuthzEnv(t)
	req := e.submitAs(t, "proxy-a", reqOpts{run: "call-1"})
	sub, ok := Submitter(req)
	if !ok || sub.ID != "proxy-a" || sub.Type != aais.ActorPolicy || sub.AuthenticatedBy != AuthAPIToken {
		t.Fatalf("submitter: %+v %v (extensions %s)", sub, ok, req.Extensions)
	}
	forged, _ := json.Marshal(aais.Actor{ID: "writer", Type: aais.ActorHuman})
	_, body := submitRequest(t, reqOpts{ext: aais.Extensions{SubmitterExtension: forged}})
	if code, out := e.call(t, "POST", "/approvals/requests", body, "proxy-a"); code != http.StatusBadRequest || !strings.Contains(out, SubmitterExtension) {
		t.Fatalf("a request naming its own submitter: %d %s", code, out)
	}
	// Resubmitting the same request as the same caller changes nothing.
	_, body = submitRequest(t, reqOpts{run: "call-2"})
	for i := range 2 {
		if code, out := e.call(t, "POST", "/approvals/requests", body, "proxy-a"); code != http.StatusAccepted {
			t.Fatalf("submission %d: %d %s", i, code, out)
		}
	}
}

// Reserved harness names are reserved whatever their case.
func TestSubmitReservedHarnessAnyCase(t *testing.T) {
	e := newAuthzEnv(t)
	for _, h := range []string{"custos", "Custos", "CUSTOS", "cUsToS"} {
		_, body := submitRequest(t, reqOpts{harness: h})
		if code, out := e.call(t, "POST", "/approvals/requests", body, "proxy-a"); code != http.StatusBadRequest || !strings.Contains(out, "reserved") {
			t.Errorf("harness %q: %d %s", h, code, out)
		}
	}
}

// Under separation of duties, whoever submitted a request may not approve
// it, over HTTP or the WebSocket; someone else may. They may still deny.
func TestSubmitterMayNotApproveOwnRequest(t *testing.T) {
	e := newAuthzEnv(t)
	req := e.submitAs(t, "proxy-a", reqOpts{run: "call-1"})
	path := "/approvals/" + req.ID + "/decisions"
	if code, out := e.call(t, "GET", "/approvals/"+req.ID+"/permission", "", "proxy-a"); code != 200 ||
		!strings.Contains(out, `"approve":false`) || !strings.Contains(out, "you requested this action") {
		t.Fatalf("permission: %d %s", code, out)
	}
	if code, out := e.call(t, "POST", path, decisionJSON(t, req, aais.Approve, nil), "proxy-a"); code != http.StatusForbidden ||
		!strings.Contains(out, "Separation of duties") {
		t.Fatalf("the submitter's approval over HTTP: %d %s", code, out)
	}

	// Another reviewer whose role covers it approves.
	if code, out := e.call(t, "POST", path, decisionJSON(t, req, aais.Approve, nil), "writer"); code != http.StatusOK ||
		!strings.Contains(out, `"outcome":"approved"`) || !strings.Contains(out, `"id":"writer"`) {
		t.Fatalf("writer's approval: %d %s", code, out)
	}
	// The submitter may deny its own request.
	other := e.submitAs(t, "proxy-a", reqOpts{run: "call-2", content: "y"})
	if code, out := e.call(t, "POST", "/approvals/"+other.ID+"/decisions", decisionJSON(t, other, aais.Deny, nil), "proxy-a"); code != http.StatusOK {
		t.Fatalf("the submitter's denial: %d %s", code, out)
	}
}

// The same over the WebSocket: the submitter's approval is refused on the
// connection, and the request stays pending.
func TestSubmitterMayNotApproveOverWebSocket(t *testing.T) {
	e := newAuthzEnv(t)
	req := e.submitAs(t, "proxy-a", reqOpts{run: "call-1"})
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/approvals/ws"
	c, _, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + authzToken("proxy-a")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(t.Context(), websocket.MessageText, []byte(decisionJSON(t, req, aais.Approve, nil))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var answer string
	for time.Now().Before(deadline) {
		_, b, err := c.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"status":403`) || strings.Contains(string(b), "approval.resolved") {
			answer = string(b)
			break
		}
	}
	if !strings.Contains(answer, `"status":403`) || !strings.Contains(answer, "Separation of duties") {
		t.Fatalf("the submitter's approval over the WebSocket: %s", answer)
	}
	if !e.pending(t, req.ID) {
		t.Fatal("a refused approval resolved the request")
	}

}

// An edit keeps the submitter: the submitter may not approve the edited
// request either.
func TestSubmitterMayNotApproveAnEditOfOwnRequest(t *testing.T) {
	e := newAuthzEnv(t)
	req := e.submitAs(t, "proxy-a", reqOpts{run: "call-1"})
	code, out := e.call(t, "POST", "/approvals/"+req.ID+"/edits", `{"arguments":{"path":"/tmp/b","content":"x"}}`, "writer")
	if code != http.StatusCreated {
		t.Fatalf("edit: %d %s", code, out)
	}
	var ans struct {
		Created json.RawMessage `json:"created"`
	}
	if err := json.Unmarshal([]byte(out), &ans); err != nil {
		t.Fatal(err)
	}
	m, err := aais.Parse(ans.Created)
	if err != nil {
		t.Fatal(err)
	}
	edited := m.Request
	if code, out := e.call(t, "POST", "/approvals/"+edited.ID+"/decisions", decisionJSON(t, edited, aais.Approve, nil), "proxy-a"); code != http.StatusForbidden {
		t.Fatalf("the submitter's approval of the edit: %d %s", code, out)
	}
	// The proposer may not either; a third reviewer may.
	if code, out := e.call(t, "POST", "/approvals/"+edited.ID+"/decisions", decisionJSON(t, edited, aais.Approve, nil), "writer"); code != http.StatusForbidden {
		t.Fatalf("the proposer's approval: %d %s", code, out)
	}
	if code, out := e.call(t, "POST", "/approvals/"+edited.ID+"/decisions", decisionJSON(t, edited, aais.Approve, nil), "proxy-b"); code != http.StatusOK {
		t.Fatalf("a third reviewer's approval: %d %s", code, out)
	}
	// A reviewer without a role may not propose at all.
	third := e.submitAs(t, "proxy-a", reqOpts{run: "call-3", content: "z"})
	if code, out := e.call(t, "POST", "/approvals/"+third.ID+"/edits", `{"arguments":{"path":"/etc/passwd","content":"x"}}`, "nobody"); code != http.StatusForbidden {
		t.Fatalf("an edit without a role: %d %s", code, out)
	}
}

// Only the submitter, or a reviewer who may decide the request, may
// withdraw it.
func TestWithdrawNeedsSubmitterOrReviewer(t *testing.T) {
	e := newAuthzEnv(t)
	req := e.submitAs(t, "proxy-a", reqOpts{run: "call-1"})
	withdraw := "/approvals/requests/" + req.ID + "/withdraw"
	for _, who := range []string{"nobody", "biller"} {
		if code, out := e.call(t, "POST", withdraw, "{}", who); code != http.StatusForbidden || !strings.Contains(out, "may not withdraw") {
			t.Fatalf("%s withdrawing proxy-a's request: %d %s", who, code, out)
		}
	}
	if !e.pending(t, req.ID) {
		t.Fatal("a refused withdrawal cancelled the request")
	}
	if code, out := e.call(t, "POST", withdraw, "{}", "proxy-a"); code != http.StatusOK || !strings.Contains(out, `"outcome":"cancelled"`) {
		t.Fatalf("the submitter's withdrawal: %d %s", code, out)
	}
	other := e.submitAs(t, "proxy-a", reqOpts{run: "call-2", content: "y"})
	if code, out := e.call(t, "POST", "/approvals/requests/"+other.ID+"/withdraw", "{}", "writer"); code != http.StatusOK {
		t.Fatalf("a reviewer who may decide it: %d %s", code, out)
	}
}

// A withdrawal cancels by run id, but never another harness's request, nor
// one the caller may not withdraw: then nothing is cancelled.
func TestWithdrawStaysWithinTheCallersRequests(t *testing.T) {
	e := newAuthzEnv(t)
	victim := e.submitAs(t, "proxy-a", reqOpts{harness: "harness-a", run: "call-shared"})
	mine := e.submitAs(t, "proxy-b", reqOpts{harness: "harness-b", run: "call-shared", content: "y"})
	code, out := e.call(t, "POST", "/approvals/requests/"+mine.ID+"/withdraw", "{}", "proxy-b")
	if code != http.StatusConflict || !strings.Contains(out, "Another harness") {
		t.Fatalf("withdrawing across harnesses: %d %s", code, out)
	}
	if !e.pending(t, victim.ID) || !e.pending(t, mine.ID) {
		t.Fatal("a refused withdrawal cancelled something")
	}

	// The same harness and run, another submitter, and a caller without
	// a role: proxy-b may withdraw its own request, but the run holds
	// proxy-a's too.
	e.policy.Grants["proxy-b"] = nil
	victim2 := e.submitAs(t, "proxy-a", reqOpts{harness: "harness-a", run: "call-2"})
	mine2 := e.submitAs(t, "proxy-b", reqOpts{harness: "harness-a", run: "call-2", content: "z"})
	code, out = e.call(t, "POST", "/approvals/requests/"+mine2.ID+"/withdraw", "{}", "proxy-b")
	if code != http.StatusForbidden || !strings.Contains(out, "not yours") {
		t.Fatalf("withdrawing another submitter's request of the same run: %d %s", code, out)
	}
	if !e.pending(t, victim2.ID) || !e.pending(t, mine2.ID) {
		t.Fatal("a refused withdrawal cancelled something")
	}
}

// Revoking a rule needs the policy too: its approver, or a reviewer whose
// roles cover the request it came from.
func TestRevokeNeedsThePolicy(t *testing.T) {
	e := newAuthzEnv(t)
	req := e.submitAs(t, "proxy-a", reqOpts{session: true, ext: aais.Extensions{}})
	d, err := aais.NewDecision(req, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeSession,
		Actor: aais.Actor{ID: "x", Type: aais.ActorHuman}, DecidedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, d)
	body, _ := aais.Marshal(m)
	if code, out := e.call(t, "POST", "/approvals/"+req.ID+"/decisions", string(body), "writer"); code != http.StatusOK {
		t.Fatalf("session approval: %d %s", code, out)
	}
	rules, err := e.auth.Rules(t.Context())
	if err != nil || len(rules) != 1 {
		t.Fatalf("rules: %v %v", rules, err)
	}
	id := rules[0].ID
	for _, who := range []string{"nobody", "biller"} {
		if code, out := e.call(t, "POST", "/approvals/rules/"+id+"/revoke", "", who); code != http.StatusForbidden {
			t.Fatalf("%s revoking: %d %s", who, code, out)
		}
	}
	if rs, _ := e.auth.Rules(t.Context()); rs[0].Revoked() {
		t.Fatal("a refused revocation revoked the rule")
	}
	if code, out := e.call(t, "POST", "/approvals/rules/rul_nope/revoke", "", "writer"); code != http.StatusNotFound {
		t.Fatalf("an unknown rule: %d %s", code, out)
	}
	// proxy-b's role covers the request the rule came from.
	if code, out := e.call(t, "POST", "/approvals/rules/"+id+"/revoke", "", "proxy-b"); code != http.StatusOK || !strings.Contains(out, `"revoked":true`) {
		t.Fatalf("a covering reviewer revoking: %d %s", code, out)
	}
}

// reviewQueue is a post-execution review queue with the gateway's rule:
// the first verdict is final.
type reviewQueue struct {
	mu sync.Mutex
	rs map[string]exchange.Review
}

func (q *reviewQueue) Reviews(context.Context, exchange.ReviewFilter) ([]exchange.Review, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []exchange.Review
	for _, r := range q.rs {
		out = append(out, r)
	}
	return out, nil
}

func (q *reviewQueue) Review(_ context.Context, id string) (exchange.Review, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.rs[id]
	if !ok {
		return exchange.Review{}, exchange.ErrNotFound
	}
	return r, nil
}

func (q *reviewQueue) CompleteReview(_ context.Context, id string, who audit.Actor, v exchange.Verdict, just string) (exchange.Review, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.rs[id]
	if !ok {
		return exchange.Review{}, exchange.ErrNotFound
	}
	if !r.Open() {
		return r, fmt.Errorf("%w (%s by %s)", gateway.ErrReviewed, r.Verdict, r.Reviewer)
	}
	r.ReviewedAt, r.Reviewer, r.Verdict, r.Justification = time.Now(), who.ID, v, just
	q.rs[id] = r
	return r, nil
}

func newReviewsEnv(t *testing.T) (*httptest.Server, *reviewQueue) {
	t.Helper()
	now := time.Now()
	q := &reviewQueue{rs: map[string]exchange.Review{
		"exc_1": {ExchangeID: "exc_1", Mode: "required_post_execution", Profile: "DSA-VLOP", Sender: "writer",
			Capability: "write_file", Outcome: exchange.Done, CreatedAt: now, DueAt: now.Add(time.Hour)},
		"exc_2": {ExchangeID: "exc_2", Mode: "required_post_execution", Profile: "DORA", Sender: "agent:acme.bot",
			Capability: "write_file", Outcome: exchange.Done, CreatedAt: now, DueAt: now.Add(time.Hour)},
	}}
	hashes := map[string]aais.Actor{}
	for _, id := range authzActors {
		hashes[TokenHash(authzToken(id))] = aais.Actor{ID: id, Type: aais.ActorHuman}
	}
	toks, err := NewTokens(hashes)
	if err != nil {
		t.Fatal(err)
	}
	pol := authzPolicy()
	pol.SeparationOfDuties = append(pol.SeparationOfDuties, "DSA-VLOP")
	h, err := NewReviews(ReviewsOptions{Gateway: q, Auth: toks, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, q
}

func postReview(t *testing.T, srv *httptest.Server, id, body, who string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/v1/reviews/"+id, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+authzToken(who))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A review verdict is final, so it needs the policy: a reviewer whose
// roles do not cover the call may not give one, nor, under separation of
// duties, its sender.
func TestReviewVerdictNeedsThePolicy(t *testing.T) {
	srv, q := newReviewsEnv(t)
	for _, who := range []string{"nobody", "biller"} {
		if code, out := postReview(t, srv, "exc_1", `{"verdict":"accepted","justification":"fine"}`, who); code != http.StatusForbidden {
			t.Fatalf("%s closing a review: %d %s", who, code, out)
		}
	}
	// writer sent the call: under separation of duties, no verdict at all.
	for _, v := range []string{"accepted", "flagged"} {
		if code, out := postReview(t, srv, "exc_1", `{"verdict":"`+v+`"}`, "writer"); code != http.StatusForbidden || !strings.Contains(out, "Separation of duties") {
			t.Fatalf("the sender's own verdict %s: %d %s", v, code, out)
		}
	}
	if r, _ := q.Review(t.Context(), "exc_1"); !r.Open() {
		t.Fatalf("a refused verdict closed the review: %+v", r)
	}
	// The queue says who may review what.
	for who, want := range map[string]string{"nobody": `"may_review":false,"refusal":"You hold no role`,
		"writer": `"may_review":false,"refusal":"Separation of duties (DSA-VLOP): you sent this call`, "proxy-b": `"may_review":true`} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/reviews/exc_1", nil)
		req.Header.Set("Authorization", "Bearer "+authzToken(who))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET as %s: %d %s, want %s", who, resp.StatusCode, b, want)
		}
	}
	if code, out := postReview(t, srv, "exc_1", `{"verdict":"accepted","justification":"fine"}`, "proxy-b"); code != http.StatusOK || !strings.Contains(out, `"reviewer":"proxy-b"`) {
		t.Fatalf("a covering reviewer: %d %s", code, out)
	}
	// DORA requires a justification for accepting.
	if code, out := postReview(t, srv, "exc_2", `{"verdict":"accepted"}`, "writer"); code != http.StatusUnprocessableEntity {
		t.Fatalf("accepting without a justification: %d %s", code, out)
	}
	if code, out := postReview(t, srv, "exc_2", `{"verdict":"flagged"}`, "writer"); code != http.StatusOK {
		t.Fatalf("flagging without a justification: %d %s", code, out)
	}
	if code, out := postReview(t, srv, "exc_nope", `{"verdict":"flagged"}`, "writer"); code != http.StatusNotFound {
		t.Fatalf("an unknown review: %d %s", code, out)
	}
}

// The verdict body is decoded strictly: duplicate members (the last one
// would win), members in another case, trailing data and unknown verdicts
// are refused and change nothing.
func TestReviewBodyIsStrict(t *testing.T) {
	srv, q := newReviewsEnv(t)
	for _, body := range []string{
		`{"verdict":"flagged","verdict":"accepted"}`,
		`{"verdict":"flagged","VERDICT":"accepted"}`,
		`{"verdict":"accepted","justification":"a","justification":"b"}`,
		`{"verdict":"accepted"} {"verdict":"flagged"}`,
		`{"verdict":"accepted"}x`,
		`{"verdict":"accepted","reviewer":"someone-else"}`,
		`{"verdict":"maybe"}`,
		`["accepted"]`,
		`{"verdict":"accepted","justification":"\xff"}`,
		``,
	} {
		if code, out := postReview(t, srv, "exc_1", body, "proxy-b"); code != http.StatusBadRequest {
			t.Errorf("%q: %d %s", body, code, out)
		}
	}
	if r, _ := q.Review(t.Context(), "exc_1"); !r.Open() {
		t.Fatalf("a refused body closed the review: %+v", r)
	}
}

// The Origin check does not trust the Host header alone: a page whose DNS
// name now points at the server (DNS rebinding) sends an Origin and a
// Host that agree, and may not sign in or decide with a session.
func TestOriginNotTrustedFromHostAlone(t *testing.T) {
	e := newSessionEnv(t, false)
	login := func(host, origin string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", e.srv.URL+"/login", strings.NewReader(`{"token":"`+loginToken+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	port := e.srv.URL[strings.LastIndex(e.srv.URL, ":"):]
	if code := login("rebound.example"+port, "http://rebound.example"+port); code != http.StatusForbidden {
		t.Fatalf("sign-in from a rebound name: %d", code)
	}
	if code := login("localhost"+port, "http://localhost"+port); code != http.StatusOK {
		t.Fatalf("sign-in from localhost: %d", code)
	}
	if code := login(strings.TrimPrefix(e.srv.URL, "http://"), e.srv.URL); code != http.StatusOK {
		t.Fatalf("sign-in from the loopback address: %d", code)
	}
}
