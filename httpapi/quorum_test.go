package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/browsertest"
)

// gwQuorumRequest is gwRequest for a request that needs q: it offers
// approve once and deny only.
func (e *sessionEnv) gwQuorumRequest(t *testing.T, n, capability, profile, agent string, q aais.Quorum) *aais.Request {
	t.Helper()
	now := e.clock.Now()
	ext, _ := json.Marshal(map[string]string{"exchange_id": "x_" + n, "sender": agent, "message_id": "m_" + n,
		"payload_type": "com.example/test", "profile": profile})
	qx, err := q.Extension()
	if err != nil {
		t.Fatal(err)
	}
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
		},
		Extensions: aais.Extensions{ExchangeExtension: ext, aais.QuorumExtension: qx},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.auth.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Separation of duties and roles hold for every approver of a quorum: the
// requester may not be one, a reviewer without a covering role may not
// vote, and the roles the policy grants are what fill from_roles.
func TestQuorumPolicyPerApprover(t *testing.T) {
	e := newSessionEnv(t, false)
	// bob asked for it (he is the requesting agent): he may not approve.
	r := e.gwQuorumRequest(t, "q1", "billing.refund", "MIFID-II", "bob", aais.Quorum{ApprovalsRequired: 2, FromRoles: []string{"finance"}})
	bob, carol, dave, admin := e.browser(t), e.browser(t), e.browser(t), e.browser(t)
	bob.loginPassword(t, "bob")
	carol.loginPassword(t, "carol")
	dave.loginPassword(t, "dave")
	admin.login(t, `{"token":"`+loginToken+`"}`)
	_, dec := decision(t, r, aais.Approve, aais.ScopeOnce, "Checked")
	if resp, out := bob.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, nil); resp.StatusCode != 403 {
		t.Fatalf("the requester's approval: %d %s", resp.StatusCode, out)
	}
	if resp, out := dave.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, nil); resp.StatusCode != 403 {
		t.Fatalf("an approval without a covering role: %d %s", resp.StatusCode, out)
	}
	// admin holds "admin", not "finance": the vote counts, the role stays missing.
	resp, out := admin.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, nil)
	m, err := aais.Parse(out)
	if resp.StatusCode != 202 || err != nil || !aais.Partial(m) {
		t.Fatalf("admin's approval: %d %s", resp.StatusCode, out)
	}
	if resp, out := admin.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, nil); resp.StatusCode != 202 {
		t.Fatalf("admin's approval replayed: %d %s", resp.StatusCode, out)
	}
	_, again := decision(t, r, aais.Approve, aais.ScopeOnce, "Checked again")
	if resp, out := admin.do(t, "POST", "/approvals/"+r.ID+"/decisions", again, nil); resp.StatusCode != 409 {
		t.Fatalf("admin's second approval: %d %s", resp.StatusCode, out)
	}
	if !e.pending(t, r.ID) {
		t.Fatal("resolved before the quorum")
	}
	resp, out = carol.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, nil)
	if m, err := aais.Parse(out); resp.StatusCode != 200 || err != nil || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("carol's approval: %d %s", resp.StatusCode, out)
	} else if tl, _ := aais.TallyOf(m); len(tl.Approvals) != 2 || tl.Approvals[1].Roles[0] != "finance" {
		t.Fatalf("receipt tally %+v", tl)
	}
	// Every vote reached OnDecision, the audit hook (admin's replay too,
	// as a replayed receipt does), the refused ones none.
	e.mu.Lock()
	var ids []string
	for _, d := range e.decisions {
		ids = append(ids, d.Actor.ID)
	}
	e.mu.Unlock()
	if len(ids) != 3 || ids[0] != "admin" || ids[1] != "admin" || ids[2] != "carol" {
		t.Fatalf("OnDecision saw %v, want admin, admin (replay), carol", ids)
	}
}

// The inbox shows a quorum's progress, live and after a reload, and a
// reviewer's vote says it was recorded while the request stays pending.
func TestBrowserQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	e := newSessionEnv(t, false)
	r := e.gwQuorumRequest(t, "q2", "billing.invoice.create", "MIFID-II", "agent:acme.advisor", aais.Quorum{ApprovalsRequired: 2})
	page := browsertest.Open(t)
	step, text, waitFor := page.Step, page.Text, page.WaitFor
	step("sign in",
		chromedp.Navigate(e.srv.URL+"/#/request/"+r.ID),
		chromedp.WaitVisible(chromedp.CSS("#login-id")),
		chromedp.SendKeys(chromedp.CSS("#login-id"), "bob"),
		chromedp.SendKeys(chromedp.CSS("#login-pass"), testPasswords["bob"]),
		chromedp.Click(chromedp.CSS("#login-password-submit")),
		chromedp.WaitVisible(chromedp.CSS("#app-view")),
	)
	waitFor("the live stream", `document.getElementById("live").dataset.state === "live"`)
	waitFor("the quorum line", `(document.querySelector('[data-quorum="apr_q2"]') || {textContent: ""}).textContent === "0 of 2 approvals"`)
	waitFor("the detail", `document.getElementById("detail-quorum") !== null`)

	// carol approves through the API: the page follows without a reload.
	carol := e.browser(t)
	carol.loginPassword(t, "carol")
	_, dec := decision(t, r, aais.Approve, aais.ScopeOnce, "PO-2291 matches")
	if resp, out := carol.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, nil); resp.StatusCode != 202 {
		t.Fatalf("carol: %d %s", resp.StatusCode, out)
	}
	waitFor("the partial vote", `document.getElementById("detail-quorum").innerText.includes("Approved by Carol")`)
	if s := text(`document.querySelector('[data-quorum="apr_q2"]').textContent`); s != "1 of 2 approvals" {
		t.Fatalf("list shows %q", s)
	}
	// After a reload the snapshot carries the tally.
	step("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#app-view")))
	waitFor("the tally after a reload", `(document.getElementById("detail-quorum") || {innerText: ""}).innerText.includes("1 of 2 approvals")`)

	step("justify and approve",
		chromedp.WaitVisible(chromedp.CSS("#justification")),
		chromedp.SendKeys(chromedp.CSS("#justification"), "Second pair of eyes"),
		chromedp.Click(chromedp.CSS(`button[data-decision="approve"][data-scope="once"]`)),
	)
	waitFor("the outcome", `document.getElementById("detail-pane").innerText.includes("Outcome: approved")`)
	st, err := e.store.RequestState(t.Context(), r.ID)
	if err != nil || st.Resolution == nil {
		t.Fatalf("store: %v %+v", err, st)
	}
	if tl, _ := aais.TallyOf(st.Resolution.Event); len(tl.Approvals) != 2 || tl.Approvals[0].Actor.ID != "carol" || tl.Approvals[1].Actor.ID != "bob" {
		t.Fatalf("receipt tally %+v", tl)
	}
}
