package httpapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/browsertest"
)

// The web inbox in a real browser: sign in, see a request submitted after
// the page loaded appear live, open it, approve it with a justification,
// see it resolved; the store records the signed-in reviewer.
// CUSTOS_UPDATE_SCREENSHOTS=1 writes docs/images/inbox.png and detail.png.
func TestBrowserInbox(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	e := newSessionEnv(t, false)
	// A request bob's roles do not cover, there before the page loads.
	e.gwRequest(t, "ops1", "shell.exec", "", "agent:acme.ops")
	// One already resolved, for the history.
	old := e.gwRequest(t, "old", "billing.refund", "MIFID-II", "agent:acme.advisor")
	admin := e.browser(t)
	admin.login(t, `{"token":"`+loginToken+`"}`)
	_, dec := decision(t, old, aais.Deny, aais.ScopeOnce, "Duplicate refund")
	if resp, out := admin.do(t, "POST", "/approvals/"+old.ID+"/decisions", dec, nil); resp.StatusCode != 200 {
		t.Fatalf("deny: %d %s", resp.StatusCode, out)
	}

	page := browsertest.Open(t)
	step, text, waitFor, bctx := page.Step, page.Text, page.WaitFor, page.Ctx
	shot := func(name string, full bool) {
		t.Helper()
		if os.Getenv("CUSTOS_UPDATE_SCREENSHOTS") != "1" {
			return
		}
		a := chromedp.CaptureScreenshot()
		if full {
			a = chromedp.FullScreenshot(100)
		}
		png, err := chromedp.Run(bctx, a)
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join("..", "docs", "images", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}

	step("sign in",
		chromedp.Navigate(e.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login-id")),
		chromedp.SendKeys(chromedp.CSS("#login-id"), "bob"),
		chromedp.SendKeys(chromedp.CSS("#login-pass"), testPasswords["bob"]),
		chromedp.Click(chromedp.CSS("#login-password-submit")),
		chromedp.WaitVisible(chromedp.CSS("#app-view")),
	)
	waitFor("the live stream", `document.getElementById("live").dataset.state === "live"`)
	waitFor("the snapshot", `document.querySelector('[data-request="apr_ops1"]') !== null`)
	waitFor("the history", `document.querySelector('#history-body tr[data-request="apr_old"]') !== null`)

	// Submitted after the page loaded: it appears without a reload.
	r := e.gwRequest(t, "live1", "billing.invoice.create", "MIFID-II", "agent:acme.advisor")
	waitFor("the new request", `document.querySelector('[data-request="apr_live1"]') !== null`)
	if n := text(`document.getElementById("pending-count").textContent`); n != "2" {
		t.Fatalf("pending count %s", n)
	}
	shot("inbox.png", false)

	// Open it: exactly what will run.
	step("open the request",
		chromedp.Click(chromedp.CSS(`[data-request="apr_live1"]`)),
		chromedp.WaitVisible(chromedp.CSS("#detail-args")),
	)
	waitFor("the choices", `document.querySelector('button[data-decision="approve"][data-scope="once"]') !== null`)
	args := text(`document.getElementById("detail-args").textContent`)
	if !strings.Contains(args, `"customer": "ACME"`) || !strings.Contains(args, `"amount": "100.00"`) {
		t.Fatalf("arguments shown: %q", args)
	}
	if d := text(`document.getElementById("detail-digest").textContent`); d != r.ActionDigest {
		t.Fatalf("digest shown %q, want %q", d, r.ActionDigest)
	}
	detail := text(`document.getElementById("detail-pane").innerText`)
	for _, want := range []string{"billing.invoice.create", "MIFID-II", "agent:acme.advisor", "Moves money", "left",
		"https://billing.example/invoices", "Approves this one request only", "required to approve"} {
		if !strings.Contains(detail, want) {
			t.Errorf("the detail view lacks %q:\n%s", want, detail)
		}
	}
	// Approving without the required justification is stopped in the page.
	step("approve without a justification", chromedp.Click(chromedp.CSS(`button[data-decision="approve"][data-scope="once"]`)))
	waitFor("the justification error", `document.getElementById("decision-result").textContent.includes("justification")`)
	if !e.pending(t, r.ID) {
		t.Fatal("approved without a justification")
	}
	step("write a justification",
		chromedp.SendKeys(chromedp.CSS("#justification"), "Matches purchase order PO-2291"),
	)
	shot("detail.png", true)
	step("approve", chromedp.Click(chromedp.CSS(`button[data-decision="approve"][data-scope="once"]`)))
	waitFor("the outcome", `document.getElementById("detail-pane").innerText.includes("Outcome: approved")`)
	waitFor("the history row", `(document.querySelector('#history-body tr[data-request="apr_live1"]') || {innerText: ""}).innerText.includes("Bob")`)
	waitFor("the list", `document.querySelector('#pending-list [data-request="apr_live1"]') === null`)

	// The store: resolved, approved, decided as bob signed in with his password.
	st, err := e.store.RequestState(t.Context(), r.ID)
	if err != nil || st.Resolution == nil || st.Resolution.Event.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("store: %+v %v", st.Resolution, err)
	}
	e.decidedBy(t, r.ID, aais.Actor{ID: "bob", Type: aais.ActorHuman, DisplayName: "Bob", AuthenticatedBy: AuthSessionPassword})
	e.mu.Lock()
	just := e.decisions[len(e.decisions)-1].Justification
	e.mu.Unlock()
	if just != "Matches purchase order PO-2291" {
		t.Fatalf("justification %q", just)
	}

	// The request bob's roles do not cover: the page says so and offers no
	// enabled approval.
	step("open the uncovered request",
		chromedp.Click(chromedp.CSS(`[data-request="apr_ops1"]`)),
	)
	waitFor("the refusal", `(document.getElementById("detail-permission") || {textContent: ""}).textContent.includes("do not cover")`)
	if v := text(`String(document.querySelector('button[data-decision="approve"]').disabled)`); v != "true" {
		t.Fatal("an approval button is enabled for a request outside bob's roles")
	}

	// At phone width nothing scrolls sideways.
	step("phone width", chromedp.EmulateViewport(390, 844))
	waitFor("the phone layout", `document.getElementById("pending-pane").offsetParent === null`)
	if w := text(`String(document.documentElement.scrollWidth)`); w != "390" {
		t.Fatalf("at 390 px the page is %s px wide", w)
	}

	// Sign out: back to the sign-in form, and the session is gone.
	step("sign out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login-id")))
	if n := e.sessions.Len(); n != 1 { // the admin's API session remains
		t.Fatalf("%d sessions after signing out", n)
	}
}

// Edit, then approve, in a real browser: carol edits the arguments of a
// request; the page opens the new request (edited by her, which she may not
// approve under separation of duties) and the history shows the original as
// superseded; bob then approves the edit through the API.
func TestBrowserEditArguments(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	e := newSessionEnv(t, false)
	r := e.gwRequest(t, "ed1", "billing.refund", "MIFID-II", "agent:acme.advisor")

	page := browsertest.Open(t)
	step, text, waitFor := page.Step, page.Text, page.WaitFor

	step("sign in",
		chromedp.Navigate(e.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login-id")),
		chromedp.SendKeys(chromedp.CSS("#login-id"), "carol"),
		chromedp.SendKeys(chromedp.CSS("#login-pass"), testPasswords["carol"]),
		chromedp.Click(chromedp.CSS("#login-password-submit")),
		chromedp.WaitVisible(chromedp.CSS("#app-view")),
	)
	waitFor("the live stream", `document.getElementById("live").dataset.state === "live"`)
	waitFor("the request", `document.querySelector('[data-request="apr_ed1"]') !== null`)
	step("open it", chromedp.Click(chromedp.CSS(`[data-request="apr_ed1"]`)))
	waitFor("the edit form", `document.getElementById("edit-box") !== null`)
	if v := text(`document.getElementById("edit-args").value`); !strings.Contains(v, `"amount": "100.00"`) {
		t.Fatalf("the edit form is not pre-filled: %q", v)
	}
	step("open the edit form", chromedp.Click(chromedp.CSS("#edit-box summary")))

	// Invalid JSON is stopped in the page.
	step("type invalid JSON", chromedp.SetValue(chromedp.CSS("#edit-args"), `{"amount": `),
		chromedp.SendKeys(chromedp.CSS("#edit-justification"), "Refund only the disputed line."),
		chromedp.Click(chromedp.CSS("#edit-submit")))
	waitFor("the JSON error", `document.getElementById("edit-result").textContent.includes("Not valid JSON")`)
	if !e.pending(t, r.ID) {
		t.Fatal("invalid JSON reached the server")
	}

	step("edit", chromedp.SetValue(chromedp.CSS("#edit-args"), "{\n  \"amount\": \"10.00\",\n  \"customer\": \"ACME\"\n}"),
		chromedp.Click(chromedp.CSS("#edit-submit")))
	waitFor("the new request", `location.hash === "#/request/apr_ed1-e1" && document.getElementById("detail-edited") !== null`)
	waitFor("the new arguments", `document.getElementById("detail-args").textContent.includes('"10.00"')`)
	waitFor("the choices", `document.querySelector('button[data-decision="approve"][data-scope="once"]') !== null`)
	if v := text(`String(document.querySelector('button[data-decision="approve"][data-scope="once"]').disabled)`); v != "true" {
		t.Fatal("carol may approve her own edit")
	}
	waitFor("the separation of duties reason", `(document.getElementById("detail-permission") || {textContent: ""}).textContent.includes("proposed")`)
	waitFor("the list", `document.querySelector('#pending-list [data-request="apr_ed1-e1"]') !== null && document.querySelector('#pending-list [data-request="apr_ed1"]') === null`)
	waitFor("the history", `(document.querySelector('#history-body tr[data-request="apr_ed1"]') || {innerText: ""}).innerText.includes("superseded")`)

	// The store: the original cancelled in favour of the edit, proposed by carol.
	st, err := e.store.RequestState(t.Context(), r.ID)
	if err != nil || st.Resolution == nil {
		t.Fatalf("original: %+v %v", st.Resolution, err)
	}
	if link, ok := aais.SupersededBy(st.Resolution.Event.Resolution); !ok || link.RequestID != "apr_ed1-e1" || link.Actor.ID != "carol" {
		t.Fatalf("superseded_by: %+v", link)
	}
	nst, err := e.store.RequestState(t.Context(), "apr_ed1-e1")
	if err != nil || !nst.Pending() {
		t.Fatalf("the edit: %v", err)
	}
	// bob approves the edit (he proposed nothing); the page shows it resolved.
	_, dec := decision(t, nst.Request.Event.Request, aais.Approve, aais.ScopeOnce, "The smaller amount is right.")
	bob := e.browser(t)
	if resp, out := bob.do(t, "POST", "/approvals/apr_ed1-e1/decisions", dec, map[string]string{"Authorization": "Bearer " + bobToken, "Origin": ""}); resp.StatusCode != 200 {
		t.Fatalf("bob's approval: %d %s", resp.StatusCode, out)
	}
	waitFor("the outcome", `document.getElementById("detail-pane").innerText.includes("Outcome: approved")`)
}

// Before sign-in the page shows the sign-in form and nothing else: no
// panes, no "connecting…", no Sign out (the hidden attribute must win over
// the style sheet's display rules).
func TestBrowserSignInOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	e := newSessionEnv(t, false)
	page := browsertest.Open(t)
	page.Step("open the inbox", chromedp.Navigate(e.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#login-view")))
	// Every element that takes room on the screen, outside the sign-in
	// form, the page title and the skip link (off-screen until focused).
	visible := page.Text(`(() => {
		const shown = el => { const s = getComputedStyle(el); const r = el.getBoundingClientRect();
			return s.display !== "none" && s.visibility !== "hidden" && r.width > 1 && r.height > 1 && r.right > 0 && r.bottom > 0; };
		const allowed = el => el.closest("#login-view") || el.closest(".top h1") || el.matches(".skip") ||
			["HTML", "BODY", "HEADER", "MAIN"].includes(el.tagName);
		return [...document.querySelectorAll("body *")].filter(el => shown(el) && !allowed(el))
			.map(el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : "")).join(" ");
	})()`)
	if visible != "" {
		t.Errorf("visible before sign-in besides the form: %s", visible)
	}
	for _, id := range []string{"app-view", "whoami", "logout", "live", "pending-pane", "history-pane", "rules-pane"} {
		if got := page.Text(`(() => { const el = document.getElementById("` + id + `"); return String(el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden"); })()`); got != "false" {
			t.Errorf("#%s is visible before sign-in", id)
		}
	}
}
