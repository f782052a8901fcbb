package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/gatewaytest"
)

func newTestInbox(t *testing.T, maxBody int64, l *Limits) http.Handler {
	t.Helper()
	signer, _ := gatewaytest.Signer(t)
	a, xs, log := gatewaytest.State(t)
	g, err := gateway.New(gateway.Options{Agent: "agent:acme.gateway", Signer: signer, KID: "agent:acme.gateway#k",
		Keys: sig.NewStaticJWKS(jose.JSONWebKeySet{}), Authority: a, Exchanges: xs, Audit: log})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewInbox(InboxOptions{Gateway: g, MaxBody: maxBody, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func inboxHead(length string) string {
	h := "POST /v1/arsia/inbox HTTP/1.1\r\nHost: gw\r\nContent-Type: application/arsia+json; v=1\r\n"
	if length == "chunked" {
		return h + "Transfer-Encoding: chunked\r\n\r\n"
	}
	return h + "Content-Length: " + length + "\r\n\r\n"
}

// A body that stops arriving gets 408 Request Timeout, whether the
// limits' body deadline or the server's own ReadTimeout passes first;
// never 413, which says the body was too large.
func TestInboxSlowBodyIs408(t *testing.T) {
	t.Run("body deadline", func(t *testing.T) {
		l := newLimits(t, LimitsOptions{BodyTimeout: 200 * time.Millisecond})
		srv := httptest.NewServer(l.Handler(newTestInbox(t, 1<<20, l)))
		defer srv.Close()
		c := rawRequest(t, srv.Listener.Addr().String(), inboxHead("2000"), `{"intent":`)
		if code, err := readStatus(t, c, 5*time.Second); err != nil || code != http.StatusRequestTimeout {
			t.Fatalf("slow body: %d %v, want 408", code, err)
		}
		if n := l.refusedCount(ReasonTooSlow); n != 1 {
			t.Fatalf("too_slow counted %d", n)
		}
	})
	t.Run("server ReadTimeout", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(newTestInbox(t, 1<<20, nil))
		srv.Config.ReadTimeout = 200 * time.Millisecond
		srv.Start()
		defer srv.Close()
		c := rawRequest(t, srv.Listener.Addr().String(), inboxHead("chunked"), "a\r\n{\"intent\":\r\n")
		if code, err := readStatus(t, c, 5*time.Second); err != nil || code != http.StatusRequestTimeout {
			t.Fatalf("slow body: %d %v, want 408", code, err)
		}
	})
}

// A body over max_body is 413: refused from its Content-Length before a
// byte is read, and, without one, once it passes the limit.
func TestInboxOversizeIs413(t *testing.T) {
	l := newLimits(t, LimitsOptions{BodyBytes: 1 << 20, MaxBody: 1 << 10, BodyTimeout: 5 * time.Second})
	inbox := newTestInbox(t, 1<<10, l)
	body := &readRecorder{r: strings.NewReader(strings.Repeat("x", 2<<10))}
	req := httptest.NewRequest("POST", "/v1/arsia/inbox", body)
	req.Header.Set("Content-Type", "application/arsia+json; v=1")
	req.ContentLength = 2 << 10
	rec := httptest.NewRecorder()
	l.Handler(inbox).ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || body.reads.Load() != 0 {
		t.Fatalf("declared oversize: %d after %d reads, want 413 after none", rec.Code, body.reads.Load())
	}

	// The inbox alone refuses it the same way.
	body = &readRecorder{r: strings.NewReader(strings.Repeat("x", 2<<10))}
	req = httptest.NewRequest("POST", "/v1/arsia/inbox", body)
	req.Header.Set("Content-Type", "application/arsia+json; v=1")
	req.ContentLength = 2 << 10
	rec = httptest.NewRecorder()
	newTestInbox(t, 1<<10, nil).ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || body.reads.Load() != 0 {
		t.Fatalf("declared oversize, inbox alone: %d after %d reads", rec.Code, body.reads.Load())
	}

	srv := httptest.NewServer(l.Handler(inbox))
	defer srv.Close()
	chunk := strings.Repeat("x", 512)
	c := rawRequest(t, srv.Listener.Addr().String(), inboxHead("chunked"), strings.Repeat("200\r\n"+chunk+"\r\n", 4)+"0\r\n\r\n")
	if code, err := readStatus(t, c, 5*time.Second); err != nil || code != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked oversize: %d %v, want 413", code, err)
	}
	if n := l.refusedCount(ReasonTooLarge); n != 2 {
		t.Fatalf("too_large counted %d", n)
	}
	if l.bodies.inUse() != 0 {
		t.Fatalf("%d bytes still reserved", l.bodies.inUse())
	}
}

// A client that goes away mid-body is counted, and nothing else happens.
func TestInboxAbortedBody(t *testing.T) {
	l := newLimits(t, LimitsOptions{BodyTimeout: 5 * time.Second})
	srv := httptest.NewServer(l.Handler(newTestInbox(t, 1<<20, l)))
	defer srv.Close()
	c := rawRequest(t, srv.Listener.Addr().String(), inboxHead("5000"), `{"intent":"request"`)
	time.Sleep(50 * time.Millisecond)
	c.Close()
	deadline := time.Now().Add(3 * time.Second)
	for l.refusedCount(ReasonAborted) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := l.refusedCount(ReasonAborted); n != 1 {
		t.Fatalf("aborted counted %d", n)
	}
}

// /metrics carries the transport's counters after the gateway's.
func TestInboxMetricsCarryTransportCounters(t *testing.T) {
	l := newLimits(t, LimitsOptions{})
	l.Refuse(ReasonRateLimited, netip.Addr{})
	rec := httptest.NewRecorder()
	newTestInbox(t, 1<<20, l).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		"# TYPE custos_transport_refused_total counter\n",
		`custos_transport_refused_total{reason="rate_limited"} 1` + "\n",
		`custos_transport_refused_total{reason="too_slow"} 0` + "\n",
		"# TYPE custos_transport_connections gauge\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("metrics lack %q:\n%s", want, b)
		}
	}
	if !strings.Contains(string(b), "custos_requests_total") {
		t.Fatalf("the gateway's own metrics are gone:\n%s", b)
	}
}
