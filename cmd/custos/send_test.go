package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/client"
)

// sendGateway is a custos serve for custos send: the sender's key made by
// custos keygen and trusted by the gateway, an echo handler and a
// billing capability that EU-AI-ACT-HIGH-RISK puts before a human. The
// port is fixed before the start, because the discovery document names
// the inbox and keys by the configured address.
func sendGateway(t *testing.T) (g *gatewayUnderTest, keyFile, jwksFile string) {
	t.Helper()
	dir := t.TempDir()
	if code, out, errOut := custos(t, "", "keygen", "--agent", sender, "--out", dir); code != 0 {
		t.Fatalf("keygen: %d %s %s", code, out, errOut)
	}
	keyFile, jwksFile = filepath.Join(dir, "key-1.private.jwk.json"), filepath.Join(dir, "jwks.json")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cfg := "listen: 127.0.0.1:" + strconv.Itoa(port) + "\ndata: " + filepath.Join(dir, "data") + "\nagent: agent:acme.gateway\n" +
		"trust:\n  jwks_files: [" + jwksFile + "]\n" +
		"senders:\n  - agent: " + sender + "\n    capabilities: [\"billing.*\", \"demo.*\"]\n" +
		"handlers:\n  demo.echo:\n    type: echo\n  billing.invoice.create:\n    type: echo\n"
	configPath := filepath.Join(dir, "custos.yaml")
	if err := os.WriteFile(configPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g = startGateway(t, filepath.Join(dir, "data"), &gatewayUnderTest{configPath: configPath,
		upstream: new(atomic.Int64), upstreamTrace: new(atomic.Value)})
	t.Cleanup(g.stop)
	return g, keyFile, jwksFile
}

// runAsync runs a custos command line in the background.
func runAsync(args ...string) (out, errOut *syncBuffer, done <-chan int) {
	out, errOut = &syncBuffer{}, &syncBuffer{}
	ch := make(chan int, 1)
	go func() { ch <- run(context.Background(), args, strings.NewReader(""), out, errOut) }()
	return out, errOut, ch
}

// decideNext waits on the approvals event stream for the next pending
// request and decides it with v, through the client's approvals API.
func decideNext(t *testing.T, a *client.Approvals, v aais.Verdict) *aais.Message {
	t.Helper()
	var receipt *aais.Message
	err := a.Watch(t.Context(), client.WatchOptions{}, func(ev client.Event) error {
		var req *aais.Request
		switch m := ev.Message; m.Type {
		case aais.TypeSnapshot:
			if len(m.Snapshot.Pending) > 0 {
				req = &m.Snapshot.Pending[0]
			}
		case aais.TypeRequested:
			req = m.Request
		}
		if req == nil {
			return nil
		}
		r, err := a.Decide(t.Context(), req, client.Decision{Verdict: v, Justification: "checked by the test"})
		if errors.Is(err, client.ErrConflict) {
			// An earlier request, resolved since the stream's snapshot
			// (seen once under load): its resolution follows.
			t.Logf("skipping %s: %s", req.ID, r.Resolution.Message)
			return nil
		}
		if err != nil {
			return err
		}
		receipt = r
		return client.ErrStopWatch
	})
	if err != nil {
		t.Fatalf("watching for the pending request: %v", err)
	}
	return receipt
}

func TestSendEndToEnd(t *testing.T) {
	g, key, ownJWKS := sendGateway(t)
	approvals, err := client.NewApprovals(g.url, g.token, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"send", "--key", key, "--to", g.url}

	// A call that runs at once: the verified result is printed.
	code, out, errOut := custos(t, "", append(base, "--capability", "demo.echo", "--type", "com.acme/echo", "--args", `{"text":"hi"}`)...)
	if code != 0 {
		t.Fatalf("echo: exit %d\n%s\n%s", code, out, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["echo"].(map[string]any)["text"] != "hi" {
		t.Fatalf("echo result: %s (%v)", out, err)
	}

	// The agent id form with --server, and --json for the whole envelope.
	code, out, errOut = custos(t, "", "send", "--key", key, "--to", "agent:acme.gateway", "--server", g.url, "--json",
		"--capability", "demo.echo", "--type", "com.acme/echo", "--args", `{"text":"again"}`)
	if code != 0 || !strings.Contains(out, `"intent": "response"`) || !strings.Contains(out, `"from": "agent:acme.gateway"`) {
		t.Fatalf("--to AGENT --json: exit %d\n%s\n%s", code, out, errOut)
	}
	// The discovery document must name the agent --to asks for.
	code, _, errOut = custos(t, "", "send", "--key", key, "--to", "agent:acme.other", "--server", g.url,
		"--capability", "demo.echo", "--type", "com.acme/echo")
	if code != exitFailure || !strings.Contains(errOut, "agent:acme.other") {
		t.Fatalf("another agent's URL: exit %d %s", code, errOut)
	}

	billing := append(base, "--capability", "billing.invoice.create", "--type", "com.acme/invoice",
		"--args", `{"amount":"100.00"}`, "--profile", "EU-AI-ACT-HIGH-RISK")

	// Without --wait a pending approval is printed and exits 3
	// (HUMAN_APPROVAL_REQUIRED, interrupted); a reviewer then denies it.
	code, out, errOut = custos(t, "", billing...)
	if code != 3 || !strings.Contains(out, `"intent": "pending_approval"`) || !strings.Contains(errOut, "waiting for a human: approval ") {
		t.Fatalf("pending without --wait: exit %d\n%s\n%s", code, out, errOut)
	}
	if r := decideNext(t, approvals, aais.Deny); r.Resolution.Outcome != aais.OutcomeDenied {
		t.Fatalf("deny: %+v", r.Resolution)
	}

	// With --wait: the call pends, a reviewer approves it through the
	// client's approvals API, and the final reply is verified and printed.
	sOut, sErr, done := runAsync(append(billing, "--wait")...)
	receipt := decideNext(t, approvals, aais.Approve)
	if receipt.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("approve: %+v", receipt.Resolution)
	}
	if code := <-done; code != 0 {
		t.Fatalf("send --wait: exit %d\n%s\n%s", code, sOut.String(), sErr.String())
	}
	if !strings.Contains(sOut.String(), `"amount": "100.00"`) || !strings.Contains(sErr.String(), "waiting for a human: approval "+receipt.Resolution.RequestID) {
		t.Fatalf("send --wait output:\n%s\n%s", sOut.String(), sErr.String())
	}

	// Denied while waiting: the refusal's ASC class is the exit status.
	sOut, sErr, done = runAsync(append(billing, "--wait")...)
	decideNext(t, approvals, aais.Deny)
	code = <-done
	if code < 3 || code > 7 || !strings.Contains(sErr.String(), "refused: HTTP 403") {
		t.Fatalf("denied: exit %d\n%s\n%s", code, sOut.String(), sErr.String())
	}
	t.Logf("denied: exit %d: %s", code, sErr.String())
	if want := ascExit(codeOf(t, sErr.String())); code != want {
		t.Fatalf("denied: exit %d, want %d for %s", code, want, sErr.String())
	}

	// A capability the sender holds no grant for: 403, exit 4.
	code, _, errOut = custos(t, "", append(base, "--capability", "admin.delete", "--type", "com.acme/x")...)
	if code != 4 || !strings.Contains(errOut, "PERMISSION_DENIED") {
		t.Fatalf("no grant: exit %d %s", code, errOut)
	}

	// A key the gateway does not trust: its unsigned 401, ASC 7005, exit 7.
	other := t.TempDir()
	if code, _, errOut := custos(t, "", "keygen", "--agent", sender, "--label", "key-2", "--out", other); code != 0 {
		t.Fatal(errOut)
	}
	code, _, errOut = custos(t, "", "send", "--key", filepath.Join(other, "key-2.private.jwk.json"), "--to", g.url,
		"--capability", "demo.echo", "--type", "com.acme/echo")
	if code != 7 || !strings.Contains(errOut, "HTTP 401, ASC-7005 INTEGRITY_CHECK_FAILED") {
		t.Fatalf("untrusted key: exit %d %s", code, errOut)
	}

	// Replies checked against another JWKS (the sender's own keys) are
	// refused: exit 1, nothing printed.
	code, out, errOut = custos(t, "", append(base, "--jwks", ownJWKS, "--capability", "demo.echo", "--type", "com.acme/echo")...)
	if code != exitFailure || out != "" || !strings.Contains(errOut, "could not be verified") {
		t.Fatalf("wrong JWKS: exit %d\n%s\n%s", code, out, errOut)
	}

	// Nobody decides within --timeout: exit 5 (ASC TIMEOUT's class).
	code, out, errOut = custos(t, "", append(billing, "--wait", "--timeout", "300ms")...)
	if code != 5 || out != "" || !strings.Contains(errOut, "no final reply within --timeout 300ms") {
		t.Fatalf("--timeout: exit %d\n%s\n%s", code, out, errOut)
	}

	// A receiver that cannot be reached: exit 1.
	code, _, errOut = custos(t, "", "send", "--key", key, "--to", "http://127.0.0.1:1", "--capability", "demo.echo", "--type", "com.acme/echo")
	if code != exitFailure || !strings.Contains(errOut, "discovery document") {
		t.Fatalf("unreachable: exit %d %s", code, errOut)
	}
}

// codeOf finds the ASC code in a refusal message.
func codeOf(t *testing.T, s string) asc.Code {
	t.Helper()
	i := strings.Index(s, "ASC-")
	if i < 0 {
		t.Fatalf("no ASC code in %q", s)
	}
	c, err := asc.ParseCode(s[i : i+8])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A reply changed on the way is refused: a proxy in front of the gateway
// serves its real keys but alters what the inbox answers.
func TestSendRefusesATamperedReply(t *testing.T) {
	g, key, _ := sendGateway(t)
	var proxyURL string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, g.url+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		switch r.URL.Path {
		case "/.well-known/arsia": // the inbox is the proxy's; the keys stay the gateway's
			body = bytes.ReplaceAll(body, []byte(g.url+"/v1/arsia/inbox"), []byte(proxyURL+"/v1/arsia/inbox"))
		case "/v1/arsia/inbox":
			body = bytes.ReplaceAll(body, []byte(`"hi"`), []byte(`"HI"`))
		}
		for k, v := range resp.Header {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	defer proxy.Close()
	proxyURL = proxy.URL
	code, out, errOut := custos(t, "", "send", "--key", key, "--to", proxyURL,
		"--capability", "demo.echo", "--type", "com.acme/echo", "--args", `{"text":"hi"}`)
	if code != exitFailure || out != "" || !strings.Contains(errOut, "could not be verified") {
		t.Fatalf("tampered reply: exit %d\n%s\n%s", code, out, errOut)
	}
}
