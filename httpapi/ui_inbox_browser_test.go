package httpapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/browsertest"
)

// screenshot writes docs/images/name when CUSTOS_UPDATE_SCREENSHOTS=1.
func screenshot(t *testing.T, page *browsertest.Page, name string, full bool) {
	t.Helper()
	if os.Getenv("CUSTOS_UPDATE_SCREENSHOTS") != "1" {
		return
	}
	a := chromedp.CaptureScreenshot()
	if full {
		a = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(page.Ctx, a)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join("..", "docs", "images", name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// signInBob opens the inbox as bob (role finance: billing.* under
// MIFID-II, which requires a justification).
func signInBob(t *testing.T, e *sessionEnv) *browsertest.Page {
	t.Helper()
	page := browsertest.Open(t)
	page.Step("sign in",
		chromedp.Navigate(e.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login-id")),
		chromedp.SendKeys(chromedp.CSS("#login-id"), "bob"),
		chromedp.SendKeys(chromedp.CSS("#login-pass"), testPasswords["bob"]),
		chromedp.Click(chromedp.CSS("#login-password-submit")),
		chromedp.WaitVisible(chromedp.CSS("#app-view")),
	)
	page.WaitFor("the live stream", `document.getElementById("live").dataset.state === "live"`)
	return page
}

// set sets a form control's value as a person would, firing input.
func set(page *browsertest.Page, id, value string) {
	page.Text(`(() => { const el = document.getElementById(` + quoteJS(id) + `); el.value = ` + quoteJS(value) +
		`; el.dispatchEvent(new Event("input", {bubbles: true})); return ""; })()`)
}

func quoteJS(s string) string { return fmt.Sprintf("%q", s) }

// shownIDs is the pending list as shown, top to bottom.
const shownIDs = `[...document.querySelectorAll("#pending-list button.item")].map(b => b.dataset.request).join(" ")`

// Filters, then a bulk approval of three requests with one justification:
// two are approved, each with its own receipt, and the one bob's roles do
// not cover is refused and stays pending.
func TestBrowserFilterAndBulkApprove(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	e := newSessionEnv(t, false)
	e.gwRequest(t, "b1", "billing.refund", "MIFID-II", "agent:acme.advisor")
	e.gwRequest(t, "b2", "billing.invoice.create", "MIFID-II", "agent:acme.billing")
	e.gwRequest(t, "ops1", "shell.exec", "", "agent:acme.ops")
	page := signInBob(t, e)
	page.WaitFor("the snapshot", `document.querySelectorAll("#pending-list button.item").length === 3`)

	// Filters: on the capability or agent text, the profile, the risk.
	set(page, "filter-text", "shell")
	page.WaitFor("the text filter", shownIDs+` === "apr_ops1"`)
	if s := page.Text(`document.getElementById("pending-shown").textContent`); !strings.Contains(s, "1 of 3") {
		t.Errorf("filtered count %q", s)
	}
	set(page, "filter-text", "acme.billing")
	page.WaitFor("the agent filter", shownIDs+` === "apr_b2"`)
	set(page, "filter-text", "")
	set(page, "filter-profile", "MIFID-II")
	page.WaitFor("the profile filter", shownIDs+` === "apr_b1 apr_b2"`)
	set(page, "filter-profile", "-")
	page.WaitFor("the no-profile filter", shownIDs+` === "apr_ops1"`)
	set(page, "filter-profile", "")
	set(page, "filter-risk", "low")
	page.WaitFor("the risk filter", shownIDs+` === ""`)
	set(page, "filter-risk", "")
	set(page, "filter-age", "3600")
	page.WaitFor("the age filter", shownIDs+` === ""`)
	set(page, "filter-age", "")
	page.WaitFor("no filter", shownIDs+` === "apr_b1 apr_b2 apr_ops1"`)

	page.Step("select three",
		chromedp.Click(chromedp.CSS(`[data-select="apr_b1"]`)),
		chromedp.Click(chromedp.CSS(`[data-select="apr_b2"]`)),
		chromedp.Click(chromedp.CSS(`[data-select="apr_ops1"]`)),
	)
	page.WaitFor("the bulk bar", `!document.getElementById("bulk-bar").hidden && document.getElementById("bulk-count").textContent === "3"`)
	page.Step("approve them", chromedp.SendKeys(chromedp.CSS("#bulk-justification"), "Month-end batch, checked against PO-77"),
		chromedp.Click(chromedp.CSS("#bulk-approve")))
	page.WaitFor("three results", `document.querySelectorAll("#bulk-results li").length === 3`)
	screenshot(t, page, "inbox-bulk.png", false)
	for id, want := range map[string]string{"apr_b1": "good", "apr_b2": "good", "apr_ops1": "bad"} {
		if got := page.Text(`document.querySelector('#bulk-results [data-result="` + id + `"]').className`); got != want {
			t.Errorf("result of %s: %s, want %s", id, got, want)
		}
	}
	if s := page.Text(`document.querySelector('#bulk-results [data-result="apr_ops1"]').textContent`); !strings.Contains(s, "do not cover") {
		t.Errorf("the refusal says %q", s)
	}
	page.WaitFor("the list", shownIDs+` === "apr_ops1"`)
	// The refused one stays selected, the others are gone with their requests.
	if n := page.Text(`document.getElementById("bulk-count").textContent`); n != "1" {
		t.Errorf("%s still selected", n)
	}

	// Each is its own decision, recorded as bob with the justification.
	bob := aais.Actor{ID: "bob", Type: aais.ActorHuman, DisplayName: "Bob", AuthenticatedBy: AuthSessionPassword}
	for _, id := range []string{"apr_b1", "apr_b2"} {
		e.decidedBy(t, id, bob)
		st, _ := e.store.RequestState(t.Context(), id)
		if _, just, _ := aais.DecidedBy(st.Resolution.Event.Resolution); just != "Month-end batch, checked against PO-77" {
			t.Errorf("%s: justification %q", id, just)
		}
		if st.Resolution.Event.Resolution.Outcome != aais.OutcomeApproved {
			t.Errorf("%s: %s", id, st.Resolution.Event.Resolution.Outcome)
		}
	}
	if !e.pending(t, "apr_ops1") {
		t.Fatal("the request outside bob's roles was decided")
	}
	e.mu.Lock()
	n := len(e.decisions)
	e.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d decisions recorded, want 2", n)
	}
}

// The keys move, approve and deny, and do nothing while typing.
func TestBrowserKeyboard(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	e := newSessionEnv(t, false)
	e.gwRequest(t, "k1", "billing.refund", "MIFID-II", "agent:acme.advisor")
	e.gwRequest(t, "k2", "billing.refund", "MIFID-II", "agent:acme.advisor")
	e.gwRequest(t, "k3", "billing.refund", "MIFID-II", "agent:acme.advisor")
	page := signInBob(t, e)
	page.WaitFor("the snapshot", `document.querySelectorAll("#pending-list button.item").length === 3`)
	blur := func() { page.Text(`(document.activeElement && document.activeElement.blur(), "")`) }
	key := func(k string) { page.Step("press "+k, chromedp.KeyEvent(k)) }

	blur()
	key("j")
	page.WaitFor("j opens the first", `location.hash === "#/request/apr_k1"`)
	page.WaitFor("its choices", `document.querySelector('#detail-body button[data-decision="approve"][data-scope="once"]') !== null`)
	blur()
	key("j")
	page.WaitFor("j moves down", `location.hash === "#/request/apr_k2"`)
	blur()
	key("k")
	page.WaitFor("k moves up", `location.hash === "#/request/apr_k1"`)
	page.WaitFor("its choices", `document.querySelector('#justification') !== null`)

	// Typed into the justification, the letters are text, not commands.
	page.Step("type", chromedp.Click(chromedp.CSS("#justification")), chromedp.KeyEvent("ad jkx/?"))
	if v := page.Text(`document.getElementById("justification").value`); v != "ad jkx/?" {
		t.Fatalf("the justification reads %q", v)
	}
	if !e.pending(t, "apr_k1") || page.Text(`location.hash`) != "#/request/apr_k1" || page.Text(`String(document.getElementById("keys-help").open)`) != "false" {
		t.Fatal("a key typed into the justification acted")
	}
	page.Step("leave the field", chromedp.KeyEvent("\x1b"))
	key("x")
	page.WaitFor("x selects", `document.querySelector('[data-select="apr_k1"]').checked && document.getElementById("bulk-count").textContent === "1"`)
	key("x")
	page.WaitFor("x unselects", `!document.querySelector('[data-select="apr_k1"]').checked`)
	key("a")
	page.WaitFor("a approves", `document.getElementById("detail-pane").innerText.includes("Outcome: approved")`)
	if e.pending(t, "apr_k1") {
		t.Fatal("apr_k1 still pending after a")
	}
	page.WaitFor("the list", shownIDs+` === "apr_k2 apr_k3"`)
	blur()
	key("j")
	page.WaitFor("j after a decision", `location.hash === "#/request/apr_k2"`)
	page.WaitFor("its choices", `document.querySelector('#detail-body button[data-decision="deny"]') !== null`)
	blur()
	key("d")
	page.WaitFor("d denies", `document.getElementById("detail-pane").innerText.includes("Outcome: denied")`)
	st, _ := e.store.RequestState(t.Context(), "apr_k2")
	if st.Resolution == nil || st.Resolution.Event.Resolution.Outcome != aais.OutcomeDenied {
		t.Fatal("apr_k2 not denied")
	}
	key("?")
	page.WaitFor("? opens the help", `document.getElementById("keys-help").open`)
	screenshot(t, page, "inbox-keys.png", false)
	page.Step("close it", chromedp.KeyEvent("\x1b"))
	page.WaitFor("the help closed", `!document.getElementById("keys-help").open`)
	key("/")
	page.WaitFor("/ focuses the filter", `document.activeElement === document.getElementById("filter-text")`)
	if !e.pending(t, "apr_k3") {
		t.Fatal("apr_k3 was decided")
	}
}

// The history search pages through the server's results, newest first.
func TestBrowserHistorySearch(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	e := newSessionEnv(t, false)
	admin := e.browser(t)
	admin.login(t, `{"token":"`+loginToken+`"}`)
	// 13 denied refunds, 2 approved invoices, 1 denied shell call (not
	// bob's to see).
	decide := func(n, capability, profile string, v aais.Verdict) {
		r := e.gwRequest(t, n, capability, profile, "agent:acme.advisor")
		_, dec := decision(t, r, v, aais.ScopeOnce, "batch")
		if resp, out := admin.do(t, "POST", "/approvals/"+r.ID+"/decisions", dec, nil); resp.StatusCode != 200 {
			t.Fatalf("decide %s: %d %s", r.ID, resp.StatusCode, out)
		}
	}
	for i := range 13 {
		decide(fmt.Sprintf("r%02d", i), "billing.refund", "MIFID-II", aais.Deny)
	}
	decide("i1", "billing.invoice.create", "MIFID-II", aais.Approve)
	decide("i2", "billing.invoice.create", "MIFID-II", aais.Approve)
	decide("s1", "shell.exec", "", aais.Deny)

	page := signInBob(t, e)
	rows := `[...document.querySelectorAll("#history-body tr")].map(r => r.dataset.request).join(" ")`
	page.WaitFor("the history", `document.querySelectorAll("#history-body tr").length === 15`)
	if strings.Contains(page.Text(rows), "apr_s1") {
		t.Fatal("bob sees the history of a request his roles do not cover")
	}
	page.Step("search denied refunds, ten a page",
		chromedp.Click(chromedp.CSS("#history-search-box summary")),
		chromedp.SendKeys(chromedp.CSS("#hs-capability"), "billing.refund"),
	)
	page.Text(`(document.getElementById("hs-outcome").value = "denied", document.getElementById("hs-limit").value = "10", "")`)
	page.Step("search", chromedp.Click(chromedp.CSS("#hs-submit")))
	page.WaitFor("the first page", `document.querySelectorAll("#history-body tr").length === 10 && !document.getElementById("history-more").hidden`)
	want := []string{}
	for i := 12; i >= 0; i-- {
		want = append(want, fmt.Sprintf("apr_r%02d", i))
	}
	if got := page.Text(rows); got != strings.Join(want[:10], " ") {
		t.Fatalf("first page %s", got)
	}
	screenshot(t, page, "history-search.png", true)
	page.Step("older", chromedp.Click(chromedp.CSS("#history-more")))
	page.WaitFor("the second page", `document.querySelectorAll("#history-body tr").length === 13 && document.getElementById("history-more").hidden`)
	if got := page.Text(rows); got != strings.Join(want, " ") {
		t.Fatalf("both pages %s", got)
	}
	// A bad date is the server's 400, shown.
	page.Text(`(document.getElementById("hs-since").value = "2030-01-02T00:00:00", document.getElementById("hs-until").value = "2030-01-01T00:00:00", "")`)
	page.Step("search backwards", chromedp.Click(chromedp.CSS("#hs-submit")))
	page.WaitFor("the error", `document.getElementById("history-error").textContent.includes("since: must be before until")`)
	page.Step("clear", chromedp.Click(chromedp.CSS("#hs-reset")))
	page.WaitFor("the latest again", `document.querySelectorAll("#history-body tr").length === 15 && document.getElementById("history-error").textContent === ""`)
}

// A question is answered with a reply the receipt carries; a bulk approval
// of it is refused, since an approval of a question needs a reply.
func TestBrowserRespond(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	e := newSessionEnv(t, false)
	e.gwRequest(t, "q0", "billing.refund", "MIFID-II", "agent:acme.advisor") // a plain one beside it
	now := e.clock.Now()
	ask, err := aais.NewRequest(aais.RequestParams{ID: "apr_q1", CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Origin: aais.Origin{Harness: "custos", SessionID: "agent:acme.advisor", AgentID: "agent:acme.advisor"},
		Action: json.RawMessage(`{"kind":"agent.question","name":"billing.refund.account","summary":"Ask which account","arguments":{}}`),
		Risk:   aais.Risk{Level: aais.RiskLow, Reasons: []string{"A question"}},
		Choices: []aais.Choice{{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Reply"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Decline"}},
		Extensions: aais.Extensions{
			ExchangeExtension:      json.RawMessage(`{"exchange_id":"x_q1","sender":"agent:acme.advisor","message_id":"m_q1","payload_type":"com.example/q","profile":"MIFID-II"}`),
			aais.QuestionExtension: json.RawMessage(`{"prompt":"Which account should the refund of INV-2291 go to?"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.auth.Create(t.Context(), ask); err != nil {
		t.Fatal(err)
	}
	page := signInBob(t, e)
	page.WaitFor("the snapshot", `document.querySelectorAll("#pending-list button.item").length === 2`)
	if s := page.Text(`document.querySelector('#pending-list [data-request="apr_q1"]').innerText`); !strings.Contains(s, "question") {
		t.Errorf("the list does not mark the question: %q", s)
	}
	page.Step("bulk-approve the question", chromedp.Click(chromedp.CSS(`[data-select="apr_q1"]`)),
		chromedp.SendKeys(chromedp.CSS("#bulk-justification"), "ok"), chromedp.Click(chromedp.CSS("#bulk-approve")))
	page.WaitFor("its refusal", `(document.querySelector('#bulk-results [data-result="apr_q1"]') || {textContent: ""}).textContent.includes("asks a question")`)
	if !e.pending(t, "apr_q1") {
		t.Fatal("a question was approved without a reply")
	}
	page.Step("open it", chromedp.Click(chromedp.CSS(`#pending-list [data-request="apr_q1"]`)))
	page.WaitFor("the reply form", `document.getElementById("respond-form") !== null`)
	if s := page.Text(`document.getElementById("question-prompt").textContent`); !strings.Contains(s, "Which account should the refund of INV-2291 go to?") {
		t.Errorf("prompt shown: %q", s)
	}
	page.Step("reply", chromedp.SendKeys(chromedp.CSS("#response"), "The account ending 3704."),
		chromedp.SendKeys(chromedp.CSS("#justification"), "Confirmed with the customer"),
		chromedp.Click(chromedp.CSS("#respond-submit")))
	page.WaitFor("the reply sent", `document.getElementById("detail-pane").innerText.includes("Outcome: approved") || document.getElementById("decision-result").textContent.includes("Reply sent")`)
	st, err := e.store.RequestState(t.Context(), "apr_q1")
	if err != nil || st.Resolution == nil || aais.ResponseOf(st.Resolution.Event.Resolution) != "The account ending 3704." {
		t.Fatalf("the receipt does not carry the reply: %v", err)
	}
	page.WaitFor("the history", `(document.querySelector('#history-body [data-response="apr_q1"]') || {textContent: ""}).textContent.includes("3704")`)
}
