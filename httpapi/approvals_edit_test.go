package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// editAnswer is the 201 answer of POST /approvals/{id}/edits.
type editAnswer struct {
	Cancelled json.RawMessage `json:"cancelled"`
	Created   json.RawMessage `json:"created"`
}

func parseEdit(t *testing.T, body []byte) (cancelled, created *aais.Message) {
	t.Helper()
	var ans editAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatalf("edit answer %s: %v", body, err)
	}
	c, err := aais.Parse(ans.Cancelled)
	if err != nil || c.Type != aais.TypeResolved {
		t.Fatalf("cancelled %s: %v", ans.Cancelled, err)
	}
	n, err := aais.Parse(ans.Created)
	if err != nil || n.Type != aais.TypeRequested {
		t.Fatalf("created %s: %v", ans.Created, err)
	}
	return c, n
}

func TestEditThenApprove(t *testing.T) {
	e := newSessionEnv(t, false)
	bob := e.browser(t)
	bearer := map[string]string{"Authorization": "Bearer " + bobToken, "Origin": ""}
	r := e.gwRequest(t, "1", "billing.refund", "MIFID-II", "agent:acme.advisor")
	path := "/approvals/" + r.ID + "/edits"

	// Refusals that change nothing.
	for _, c := range []struct {
		body   string
		status int
		code   asc.Code
	}{
		{`{"arguments":{"amount":"10.00","customer":"ACME"}}`, 422, asc.InvalidRequest},                         // MIFID-II needs a why
		{`{"arguments":{"amount":"100.00","customer":"ACME"},"justification":"x"}`, 400, asc.InvalidRequest},    // identical
		{`{"arguments":{ "customer":"ACME", "amount":"100.00" },"justification":"x"}`, 400, asc.InvalidRequest}, // identical, reordered
		{`{"arguments":["amount"],"justification":"x"}`, 400, asc.InvalidRequest},                               // not an object
		{`{"arguments":{"amount":"1"},"justification":"x","actor":{"id":"carol"}}`, 400, asc.InvalidRequest},    // unknown member
		{`{"arguments":{"amount":"1","amount":"2"},"justification":"x"}`, 400, asc.InvalidRequest},              // duplicate member
		{`not json`, 400, asc.InvalidRequest},
	} {
		resp, body := bob.do(t, "POST", path, c.body, bearer)
		wantProblem(t, resp, body, c.status, c.code)
	}
	resp, body := bob.do(t, "POST", path, `{"arguments":{"amount":"1"}}`, map[string]string{"Authorization": "Bearer " + bobToken, "Origin": "", "Content-Type": "text/plain"})
	wantProblem(t, resp, body, 415, asc.InvalidRequest)
	resp, body = bob.do(t, "POST", path, `{"arguments":{"amount":"1"},"justification":"x"}`, map[string]string{"Authorization": ""})
	wantProblem(t, resp, body, 401, asc.AuthenticationRequired)
	resp, body = bob.do(t, "POST", "/approvals/apr_nope/edits", `{"arguments":{"amount":"1"},"justification":"x"}`, bearer)
	wantProblem(t, resp, body, 404, asc.NotFound)
	if !e.pending(t, r.ID) {
		t.Fatal("a refused edit resolved the request")
	}

	// dave's role (ops) does not cover billing: he may not edit.
	dave := e.browser(t)
	dave.loginPassword(t, "dave")
	resp, body = dave.do(t, "POST", path, `{"arguments":{"amount":"10.00","customer":"ACME"},"justification":"smaller"}`, nil)
	wantProblem(t, resp, body, 403, asc.PermissionDenied)

	// bob edits with his API token.
	const why = "Only the disputed invoice line."
	resp, body = bob.do(t, "POST", path, `{"arguments":{"amount":"10.00","customer":"ACME"},"justification":"`+why+`"}`, bearer)
	if resp.StatusCode != 201 {
		t.Fatalf("edit: %d %s", resp.StatusCode, body)
	}
	cancelled, created := parseEdit(t, body)
	if res := cancelled.Resolution; res.RequestID != r.ID || res.Outcome != aais.OutcomeCancelled {
		t.Errorf("cancelled: %+v", res)
	}
	link, ok := aais.SupersededBy(cancelled.Resolution)
	nr := created.Request
	if !ok || link.RequestID != nr.ID || link.Actor.ID != "bob" || link.Justification != why {
		t.Errorf("superseded_by: %+v", link)
	}
	ref, ok := aais.Supersedes(nr)
	if !ok || ref.RequestID != r.ID || ref.ProposedBy.ID != "bob" || ref.ProposedBy.AuthenticatedBy != AuthAPIToken {
		t.Errorf("supersedes: %+v", ref)
	}
	if nr.ActionDigest == r.ActionDigest || RequestProfile(nr) != "MIFID-II" || e.pending(t, r.ID) || !e.pending(t, nr.ID) {
		t.Errorf("new request %s digest %s profile %q", nr.ID, nr.ActionDigest, RequestProfile(nr))
	}
	// The original can no longer be edited.
	resp, body = bob.do(t, "POST", path, `{"arguments":{"amount":"9.00"},"justification":"x"}`, bearer)
	wantProblem(t, resp, body, 409, asc.Conflict)

	// bob proposed the arguments: under separation of duties he may not
	// approve them (HTTP and WebSocket share decideBody), but he may deny.
	resp, body = bob.do(t, "GET", "/approvals/"+nr.ID+"/permission", "", bearer)
	var perm Permission
	if err := json.Unmarshal(body, &perm); err != nil || !perm.Decide || perm.Approve || !perm.Edit || perm.Reason == "" {
		t.Errorf("bob's permission on the edit: %d %s", resp.StatusCode, body)
	}
	_, dec := decision(t, nr, aais.Approve, aais.ScopeOnce, "fine")
	resp, body = bob.do(t, "POST", "/approvals/"+nr.ID+"/decisions", dec, bearer)
	wantProblem(t, resp, body, 403, asc.PermissionDenied)
	if !e.pending(t, nr.ID) {
		t.Fatal("the proposer's refused approval resolved the edit")
	}

	// carol, signed in with a cookie, approves it.
	carol := e.browser(t)
	carol.loginPassword(t, "carol")
	_, dec = decision(t, nr, aais.Approve, aais.ScopeOnce, "Checked the smaller amount.")
	resp, body = carol.do(t, "POST", "/approvals/"+nr.ID+"/decisions", dec, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("carol's approval: %d %s", resp.StatusCode, body)
	}
	e.decidedBy(t, nr.ID, aais.Actor{ID: "carol", Type: aais.ActorHuman, DisplayName: "Carol", AuthenticatedBy: AuthSessionPassword})

	// The history shows the original as superseded.
	resp, body = carol.do(t, "GET", "/approvals/history", "", nil)
	var hist struct {
		Resolved []HistoryEntry `json:"resolved"`
	}
	if err := json.Unmarshal(body, &hist); err != nil || resp.StatusCode != 200 {
		t.Fatalf("history: %d %s", resp.StatusCode, body)
	}
	found := false
	for _, h := range hist.Resolved {
		if h.RequestID == r.ID {
			found = h.SupersededBy == nr.ID && h.Outcome == aais.OutcomeCancelled && h.Actor != nil && h.Actor.ID == "bob"
		}
	}
	if !found {
		t.Errorf("history lacks the superseded original: %s", body)
	}
}

func TestEditWithCookie(t *testing.T) {
	e := newSessionEnv(t, false)
	r := e.gwRequest(t, "2", "billing.refund", "MIFID-II", "agent:acme.advisor")
	path := "/approvals/" + r.ID + "/edits"
	edit := `{"arguments":{"amount":"1.00","customer":"ACME"},"justification":"Goodwill only."}`
	carol := e.browser(t)
	carol.loginPassword(t, "carol")

	// Without the CSRF token, or from another origin: refused.
	resp, body := carol.do(t, "POST", path, edit, map[string]string{CSRFHeader: ""})
	wantProblem(t, resp, body, 403, asc.PermissionDenied)
	resp, body = carol.do(t, "POST", path, edit, map[string]string{"Origin": "https://evil.example"})
	wantProblem(t, resp, body, 403, asc.PermissionDenied)
	if !e.pending(t, r.ID) {
		t.Fatal("a forged edit resolved the request")
	}

	resp, body = carol.do(t, "POST", path, edit, nil)
	if resp.StatusCode != 201 {
		t.Fatalf("edit: %d %s", resp.StatusCode, body)
	}
	_, created := parseEdit(t, body)
	nr := created.Request
	if ref, ok := aais.Supersedes(nr); !ok || ref.ProposedBy.ID != "carol" || ref.ProposedBy.AuthenticatedBy != AuthSessionPassword {
		t.Errorf("supersedes: %+v", ref)
	}

	// carol may not approve her own edit; bob may.
	_, dec := decision(t, nr, aais.Approve, aais.ScopeOnce, "mine")
	resp, body = carol.do(t, "POST", "/approvals/"+nr.ID+"/decisions", dec, nil)
	wantProblem(t, resp, body, 403, asc.PermissionDenied)
	bob := e.browser(t)
	bob.loginPassword(t, "bob")
	_, dec = decision(t, nr, aais.Approve, aais.ScopeOnce, "Agreed with the goodwill amount.")
	resp, body = bob.do(t, "POST", "/approvals/"+nr.ID+"/decisions", dec, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("bob's approval: %d %s", resp.StatusCode, body)
	}
	m, err := aais.Parse(body)
	if err != nil || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("receipt %s: %v", body, err)
	}
}

// TestEditOrphanNotApprovable: a request claiming to supersede one that
// is still pending (an edit interrupted between its two writes) cannot be
// approved.
func TestEditOrphanNotApprovable(t *testing.T) {
	e := newSessionEnv(t, false)
	r := e.gwRequest(t, "3", "billing.refund", "MIFID-II", "agent:acme.advisor")
	ref, _ := json.Marshal(aais.SupersedesRef{RequestID: r.ID, RootRequestID: r.ID, ProposedBy: aais.Actor{ID: "carol", Type: aais.ActorHuman}})
	ext := aais.Extensions{aais.SupersedesExtension: ref}
	for k, v := range r.Extensions {
		ext[k] = v
	}
	orphan, err := aais.NewRequest(aais.RequestParams{ID: r.ID + "-e1", CreatedAt: e.clock.Now(), ExpiresAt: r.ExpiresAt.Time(),
		Origin: r.Origin, Action: json.RawMessage(`{"kind":"tool.call","name":"billing.refund","summary":"Refund","arguments":{"amount":"1"}}`),
		Risk: r.Risk, Choices: r.Choices[:2], Extensions: ext})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.auth.Create(t.Context(), orphan); err != nil {
		t.Fatal(err)
	}
	bob := e.browser(t)
	bob.loginPassword(t, "bob")
	_, dec := decision(t, orphan, aais.Approve, aais.ScopeOnce, "Looks right.")
	resp, body := bob.do(t, "POST", "/approvals/"+orphan.ID+"/decisions", dec, nil)
	wantProblem(t, resp, body, 409, asc.FailedPrecondition)
	// Denying it is fine.
	_, dec = decision(t, orphan, aais.Deny, aais.ScopeOnce, "")
	if resp, body = bob.do(t, "POST", "/approvals/"+orphan.ID+"/decisions", dec, nil); resp.StatusCode != 200 {
		t.Fatalf("deny: %d %s", resp.StatusCode, body)
	}
}
