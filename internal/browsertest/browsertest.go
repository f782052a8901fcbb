// Package browsertest finds the headless browser the browser tests drive
// (with chromedp).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns the path of Debian's chromium (/usr/bin/chromium) or of
// one on PATH. Without one the test skips, unless
// CUSTOS_TEST_REQUIRE_CHROMIUM=1 (CI), where it fails.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CUSTOS_TEST_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium is not installed (apt-get install -y chromium) and CUSTOS_TEST_REQUIRE_CHROMIUM=1")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); set CUSTOS_TEST_REQUIRE_CHROMIUM=1 to fail instead")
	return ""
}

// Page is a headless Chromium tab a test drives; it ends with the test.
type Page struct {
	t   testing.TB
	Ctx context.Context
}

// Open starts Chromium (Chromium's rules for a missing browser apply) with
// a 1280×900 window and one tab, for at most 90 seconds.
func Open(t testing.TB) *Page {
	t.Helper()
	bin := Chromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-gpu", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel(); cancel() })
	return &Page{t: t, Ctx: bctx}
}

// Step runs actions, failing the test with what when one fails.
func (p *Page) Step(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.Ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// Text evaluates js, a string expression, in the page.
func (p *Page) Text(js string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.Ctx, chromedp.Evaluate[string](js))
	if err != nil {
		p.t.Fatalf("%s: %v", js, err)
	}
	return s
}

// WaitFor waits up to 20 s for js, a boolean expression, to hold; it
// fails the test with the page's text otherwise.
func (p *Page) WaitFor(what, js string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.Ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		p.t.Fatalf("waiting for %s: %v (page: %s)", what, err, p.Text(`document.body.innerText`))
	}
}
