// Package browsertest finds the headless browser the browser tests drive
// (with chromedp).
package browsertest

import (
	"os"
	"os/exec"
	"testing"
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
