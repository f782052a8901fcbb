package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The banner names the agents' endpoint and the reviewers' inbox so they
// cannot be mixed up, and the CLI line it prints works as printed.
func TestServeBanner(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, data, nil)
	defer g.stop()
	waitFor(t, g.banner, "the CLI line", func(s string) bool { return strings.Contains(s, "CLI: ") })
	out := g.banner.String()
	self, installed := selfCommand()
	for _, want := range []string{
		"  agents send to  " + g.url + "/v1/arsia/inbox (signed ARSIA requests, POST; not a web page)\n",
		"  reviewers open  " + g.url + "/ in a browser (the web inbox) and sign in with the login token " + g.token,
		"  data            " + data + "\n",
		"CLI: " + self + " approvals --data " + data + " list\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the banner lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "go install ./cmd/custos") == installed {
		t.Errorf("installed %v, banner:\n%s", installed, out)
	}
	if strings.Contains(out, "  inbox ") {
		t.Errorf("a line labelled inbox is back:\n%s", out)
	}
	// The printed command, run as printed (without the program's name).
	line := regexp.MustCompile(`CLI: ` + regexp.QuoteMeta(self) + ` (.*)\n`).FindStringSubmatch(out)
	if code, stdout, errOut := custos(t, "", strings.Fields(line[1])...); code != 0 || !strings.Contains(stdout, "No pending requests.") {
		t.Errorf("%s: exit %d, %s%s", line[1], code, stdout, errOut)
	}
	// A browser opening the agents' endpoint learns where to go.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/v1/arsia/inbox", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(b), `href="/"`) {
		t.Errorf("GET the agents' endpoint: %d %s", resp.StatusCode, b)
	}
}

// serve on an address in use fails before it creates anything.
func TestServeBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	code, _, errOut := custos(t, "", "serve", "--listen", ln.Addr().String(), "--data", data)
	if code != exitFailure || !strings.Contains(errOut, "address already in use") || !strings.Contains(errOut, "--listen") {
		t.Errorf("exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the data directory was created: %v", err)
	}
}
