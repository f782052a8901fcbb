package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// custos serve refuses at the transport, before the gateway sees the
// request: a client address over its rate gets 429 problem+json with
// Retry-After on every endpoint, no request line is logged for it (the
// gateway never ran), a body that stalls gets 408, and /metrics counts
// both.
func TestServeTransportLimits(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil,
		"limits:\n  per_address:\n    per_second: 0.001\n    burst: 4\n    exempt: []\n  body_timeout: 300ms\n")
	defer g.stop()
	forge := func(m map[string]any) { m["id"] = "forged" }
	if code, _, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"i": 0}, nil); code != 200 {
		t.Fatalf("signed request within the burst: %d", code)
	}
	if code, _, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"i": 1}, forge); code == 429 || code == 200 {
		t.Fatalf("forged request within the burst: %d", code)
	}

	c, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST /v1/arsia/inbox HTTP/1.1\r\nHost: gw\r\nContent-Type: application/arsia+json; v=1\r\nContent-Length: 900\r\n\r\n{\"intent\":")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %v %v, want 408", resp, err)
	}

	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/metrics", nil)
	mresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if mresp.StatusCode != 200 || !strings.Contains(string(metrics), `custos_transport_refused_total{reason="too_slow"} 1`+"\n") {
		t.Fatalf("metrics: %d\n%s", mresp.StatusCode, metrics)
	}
	logged := strings.Count(g.log.String(), "msg=request")
	if logged < 1 {
		t.Fatalf("the signed request left %d request lines:\n%s", logged, g.log.String())
	}

	code, body, hdr := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"i": 9}, forge)
	if code != 429 || hdr.Get("Retry-After") == "" || hdr.Get("Content-Type") != "application/problem+json" || body["status"] != 429.0 {
		t.Fatalf("over the address's rate: %d %v %v", code, hdr, body)
	}
	// The signed request of a trusted sender is refused the same way:
	// the address is limited before anyone is authenticated.
	if code, _, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"i": 10}, nil); code != 429 {
		t.Fatalf("signed request over the address's rate: %d", code)
	}
	if code, _, _ := g.do(t, req); code != 429 {
		t.Fatalf("metrics over the address's rate: %d", code)
	}
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(g.log.String(), "msg=request"); n != logged {
		t.Fatalf("the refused requests reached the gateway: %d request lines, %d before\n%s", n, logged, g.log.String())
	}
}
