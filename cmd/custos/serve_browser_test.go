package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/custos-runtime/custos/internal/browsertest"
)

// The web inbox of a real custos serve shows the reviews a post-execution
// profile queued; a reviewer signed in with the printed login token
// accepts one in the browser, and the review API records the reviewer.
func TestServeBrowserReviews(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer g.stop()
	code, _, hdr := g.send(t, "demo.echo", "PAC-AGRICULTURE", map[string]any{"parcel": "FR-12"}, nil)
	if code != 200 {
		t.Fatalf("post-execution request: %d", code)
	}
	id := hdr.Get("Custos-Exchange")

	page := browsertest.Open(t)
	waitFor, bctx := page.WaitFor, page.Ctx
	if err := chromedp.Do(bctx,
		chromedp.Navigate(g.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login-view")),
		chromedp.Click(chromedp.CSS(".token-login summary")),
		chromedp.SendKeys(chromedp.CSS("#login-token-value"), g.token),
		chromedp.Click(chromedp.CSS("#login-token-submit")),
		chromedp.WaitVisible(chromedp.CSS("#app-view")),
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	waitFor("the review", `!document.getElementById("reviews-pane").hidden && document.querySelectorAll("#reviews-list li").length === 1`)
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.CSS("#reviews-list .review-why"), "parcel matches the register"),
		chromedp.Click(chromedp.CSS("#reviews-list button")),
	); err != nil {
		t.Fatalf("accept: %v", err)
	}
	waitFor("the review to leave the open list", `document.querySelectorAll("#reviews-list li").length === 0`)

	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/v1/reviews/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+g.token)
	c, m, _ := g.do(t, req)
	if c != 200 || m["verdict"] != "accepted" || m["reviewer"] != "admin" || m["justification"] != "parcel matches the register" {
		t.Fatalf("the recorded review: %d %v", c, m)
	}
}

// A high-risk request through the echo handler: the inbox shows it as
// high risk (its profile demands a human before execution) while saying
// the handler alone is low; approved in the browser, the resolved view and
// the history say that the call ran.
func TestServeBrowserApproveShowsOutcome(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test in -short mode")
	}
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer g.stop()
	code, _, hdr := g.send(t, "demo.echo", "EU-AI-ACT-HIGH-RISK", map[string]any{"text": "hi"}, nil)
	if code != 202 {
		t.Fatalf("high-risk request: %d", code)
	}
	id := hdr.Get("Custos-Exchange")
	apr := "apr_" + strings.TrimPrefix(id, "exc_")

	page := browsertest.Open(t)
	page.Step("sign in",
		chromedp.Navigate(g.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login-view")),
		chromedp.Click(chromedp.CSS(".token-login summary")),
		chromedp.SendKeys(chromedp.CSS("#login-token-value"), g.token),
		chromedp.Click(chromedp.CSS("#login-token-submit")),
		chromedp.WaitVisible(chromedp.CSS("#app-view")),
	)
	sel := `document.querySelector('#pending-list [data-request="` + apr + `"]')`
	page.WaitFor("the request in the list, shown high", sel+` !== null && `+sel+`.querySelector(".risk").textContent === "high"`)
	page.Step("open it", chromedp.Click(chromedp.CSS(`[data-request="`+apr+`"]`)), chromedp.WaitVisible(chromedp.CSS("#detail-risk")))
	if r := page.Text(`document.getElementById("detail-risk").textContent`); !strings.Contains(r, "high") ||
		!strings.Contains(r, "EU-AI-ACT-HIGH-RISK demands human oversight required_before_execution") || !strings.Contains(r, "the handler alone: low") {
		t.Errorf("risk shown: %q", r)
	}
	page.WaitFor("the choices", `document.querySelector('button[data-decision="approve"][data-scope="once"]') !== null`)
	page.Step("approve", chromedp.Click(chromedp.CSS(`button[data-decision="approve"][data-scope="once"]`)))
	if c, _ := g.awaitFinal(t, id); c != 200 {
		t.Fatalf("after approval: %d", c)
	}
	page.WaitFor("the history's execution cell", `(document.querySelector('#history-body [data-execution="`+apr+`"]') || {textContent: ""}).textContent.includes("ran: succeeded (HTTP 200)")`)
	page.Step("open the resolved request", chromedp.Navigate(g.url+"/#/request/"+apr))
	page.WaitFor("the execution in the resolved view", `(document.getElementById("detail-execution") || {textContent: ""}).textContent.includes("Execution: ran: succeeded")`)
}
