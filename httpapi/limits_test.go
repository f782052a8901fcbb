package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// readRecorder is a request body that records whether anything read it.
type readRecorder struct {
	r     io.Reader
	reads atomic.Int64
}

func (b *readRecorder) Read(p []byte) (int, error) { b.reads.Add(1); return b.r.Read(p) }
func (b *readRecorder) Close() error               { return nil }

func newLimits(t *testing.T, o LimitsOptions) *Limits {
	t.Helper()
	l, err := NewLimits(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A client address over its rate gets 429 with Retry-After before its
// body is read or the handler behind (the signature check, the audit
// log) sees it; another address, and an exempt one, still pass.
func TestLimitsRateRefusesBeforeTheBody(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newLimits(t, LimitsOptions{PerSecond: 0.5, Burst: 2, Tracked: 16,
		Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Now: func() time.Time { return now }})
	var reached atomic.Int64
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	send := func(remote string) (*httptest.ResponseRecorder, *readRecorder) {
		body := &readRecorder{r: strings.NewReader(`{"a forged":"envelope"}`)}
		req := httptest.NewRequest("POST", "/v1/arsia/inbox", body)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec, body
	}
	for i := range 2 {
		if rec, _ := send("203.0.113.7:4000"); rec.Code != 200 {
			t.Fatalf("request %d within the burst: %d", i, rec.Code)
		}
	}
	rec, body := send("203.0.113.7:4001")
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("over the burst: %d, want 429", rec.Code)
	}
	if n := body.reads.Load(); n != 0 {
		t.Fatalf("the refused body was read %d times", n)
	}
	if reached.Load() != 2 {
		t.Fatalf("the handler saw %d requests, want 2", reached.Load())
	}
	// One token refills in 2 s at 0.5/s.
	if ra := rec.Header().Get("Retry-After"); ra != "2" {
		t.Fatalf("Retry-After %q, want 2", ra)
	}
	var p map[string]any
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(rec.Body.Bytes(), &p) != nil || p["status"] != 429.0 {
		t.Fatalf("answer %s %s", ct, rec.Body)
	}
	if got := l.refusedCount(ReasonRateLimited); got != 1 {
		t.Fatalf("rate_limited counted %d", got)
	}
	if rec, _ := send("203.0.113.8:4000"); rec.Code != 200 {
		t.Fatalf("another address: %d", rec.Code)
	}
	for range 10 {
		if rec, _ := send("127.0.0.1:5000"); rec.Code != 200 {
			t.Fatalf("exempt loopback: %d", rec.Code)
		}
	}
	// An IPv6 client is its /64: another host in it shares the bucket,
	// the next /64 does not.
	send("[2001:db8:1:2::1]:443")
	send("[2001:db8:1:2::2]:443")
	if rec, _ := send("[2001:db8:1:2:ffff::9]:443"); rec.Code != 429 {
		t.Fatalf("third address of one /64: %d, want 429", rec.Code)
	}
	if rec, _ := send("[2001:db8:1:3::1]:443"); rec.Code != 200 {
		t.Fatalf("next /64: %d", rec.Code)
	}
	// Time refills the bucket.
	now = now.Add(2 * time.Second)
	if rec, _ := send("203.0.113.7:4002"); rec.Code != 200 {
		t.Fatalf("after the refill: %d", rec.Code)
	}
	if m := collectText(t, l); !strings.Contains(m, `custos_transport_refused_total{reason="rate_limited"} 2`+"\n") {
		t.Fatalf("metrics:\n%s", m)
	}
}

// Any number of source addresses keeps at most Tracked buckets, and the
// addresses seen last keep theirs: a limited address is not set free by
// a stream of fresh ones shorter than the table.
func TestLimitsTrackedAddressesBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newLimits(t, LimitsOptions{PerSecond: 1e-6, Burst: 1, Tracked: 64, Now: func() time.Time { return now }})
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	code := func(remote string) int {
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	code("198.51.100.1:1")
	if code("198.51.100.1:2") != 429 {
		t.Fatal("the second request of a burst of 1 passed")
	}
	for i := range 63 {
		code(fmt.Sprintf("10.0.%d.%d:80", i/256, i%256))
	}
	if code("198.51.100.1:3") != 429 {
		t.Fatal("an address seen within the last Tracked was forgotten")
	}
	for i := range 20000 {
		code(fmt.Sprintf("10.%d.%d.%d:80", 1+i/65536, i/256%256, i%256))
		if i%4096 == 0 {
			code(fmt.Sprintf("[2001:db8:%x::%x]:80", i, i))
		}
	}
	if n := l.rate.len(); n > 64 {
		t.Fatalf("%d addresses tracked, the bound is 64", n)
	}
	if m := collectText(t, l); !strings.Contains(m, "custos_transport_addresses_tracked 64\n") {
		t.Fatalf("metrics:\n%s", m)
	}
}

// Bodies past the bytes in flight wait, then get 503 with Retry-After;
// however many arrive, the handlers holding a body never exceed what the
// budget admits.
func TestLimitsBodyBytesInFlight(t *testing.T) {
	const size = 256 << 10
	for _, tc := range []struct {
		name    string
		wait    time.Duration
		refused bool
	}{{"queued", 10 * time.Second, false}, {"refused", 10 * time.Millisecond, true}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimits(t, LimitsOptions{BodyBytes: 4 * size, MaxBody: size, BodyWait: tc.wait, BodyTimeout: 10 * time.Second})
			var inFlight, peak atomic.Int64
			srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				_, _ = io.Copy(io.Discard, r.Body)
				time.Sleep(20 * time.Millisecond)
			})))
			defer srv.Close()
			body := bytes.Repeat([]byte("x"), size)
			var wg sync.WaitGroup
			var ok, unavailable, other atomic.Int64
			for range 24 {
				wg.Go(func() {
					resp, err := http.Post(srv.URL, "application/arsia+json", bytes.NewReader(body))
					if err != nil {
						// The server may close a refused request's
						// connection while the client still writes.
						unavailable.Add(1)
						return
					}
					defer resp.Body.Close()
					switch {
					case resp.StatusCode == 200:
						ok.Add(1)
					case resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "1":
						unavailable.Add(1)
					default:
						other.Add(1)
					}
				})
			}
			wg.Wait()
			if p := peak.Load(); p > 4 || p < 1 {
				t.Fatalf("%d bodies in flight at once, the budget admits 4", p)
			}
			if other.Load() != 0 {
				t.Fatalf("%d answers neither 200 nor 503", other.Load())
			}
			if tc.refused && unavailable.Load() == 0 || !tc.refused && unavailable.Load() != 0 {
				t.Fatalf("ok %d, unavailable %d", ok.Load(), unavailable.Load())
			}
			if got := l.refusedCount(ReasonTooManyBodies); got != unavailable.Load() {
				t.Fatalf("too_many_bodies counted %d, refused %d", got, unavailable.Load())
			}
			if l.bodies.inUse() != 0 {
				t.Fatalf("%d bytes still reserved after every request ended", l.bodies.inUse())
			}
		})
	}
}

// Once the body is read its deadline no longer applies: a handler that
// runs longer than the body timeout is not cut off (net/http clears the
// deadline when the body ends; this holds the limits to relying on it).
func TestLimitsBodyDeadlineLiftedAfterTheBody(t *testing.T) {
	l := newLimits(t, LimitsOptions{BodyTimeout: 100 * time.Millisecond})
	srv := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(300 * time.Millisecond)
		if r.Context().Err() != nil {
			http.Error(w, "cancelled", 500)
			return
		}
		_, _ = io.WriteString(w, "done")
	})))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "done" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// rawRequest writes head and part of a body on a fresh connection.
func rawRequest(t *testing.T, addr, head, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	return c
}

func readStatus(t *testing.T, c net.Conn, within time.Duration) (int, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The connection cap holds: the N+1th connection is not served until one
// of the first N closes; a client address over its own cap is closed at
// once.
func TestLimitsListenerCapsConnections(t *testing.T) {
	l := newLimits(t, LimitsOptions{Connections: 2})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(l.Listener(ln)) }()
	defer srv.Close()
	addr := ln.Addr().String()
	get := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	a, b := rawRequest(t, addr, get, ""), rawRequest(t, addr, get, "")
	for _, c := range []net.Conn{a, b} {
		if code, err := readStatus(t, c, 2*time.Second); err != nil || code != 200 {
			t.Fatalf("within the cap: %d %v", code, err)
		}
	}
	third := rawRequest(t, addr, get, "")
	if code, err := readStatus(t, third, 300*time.Millisecond); err == nil {
		t.Fatalf("the third connection was served (%d) while two were open, cap 2", code)
	}
	if m := collectText(t, l); !strings.Contains(m, "custos_transport_connections 2\n") || !strings.Contains(m, "custos_transport_accept_waits_total 1\n") {
		t.Fatalf("metrics:\n%s", m)
	}
	a.Close()
	// The timed-out read above spoiled that reader; a new one reads the
	// answer the server now sends.
	if code, err := readStatus(t, third, 2*time.Second); err != nil || code != 200 {
		t.Fatalf("after one closed, the third: %d %v", code, err)
	}

	per := newLimits(t, LimitsOptions{ConnectionsPerAddress: 1})
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv2 := &http.Server{Handler: srv.Handler}
	go func() { _ = srv2.Serve(per.Listener(ln2)) }()
	defer srv2.Close()
	first := rawRequest(t, ln2.Addr().String(), get, "")
	if code, err := readStatus(t, first, 2*time.Second); err != nil || code != 200 {
		t.Fatalf("first connection: %d %v", code, err)
	}
	second := rawRequest(t, ln2.Addr().String(), get, "")
	if code, err := readStatus(t, second, 2*time.Second); err == nil {
		t.Fatalf("a second connection from one address was served (%d), cap 1", code)
	}
	for deadline := time.Now().Add(2 * time.Second); per.refusedCount(ReasonConnections) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if per.refusedCount(ReasonConnections) != 1 {
		t.Fatalf("connections refused: %d", per.refusedCount(ReasonConnections))
	}
	first.Close()
	deadline := time.Now().Add(2 * time.Second)
	for per.conns.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	again := rawRequest(t, ln2.Addr().String(), get, "")
	if code, err := readStatus(t, again, 2*time.Second); err != nil || code != 200 {
		t.Fatalf("after the first closed: %d %v", code, err)
	}
}

// Closing the listener wakes an Accept waiting at the cap.
func TestLimitsListenerCloseWakesAccept(t *testing.T) {
	l := newLimits(t, LimitsOptions{Connections: 1})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listener(inner)
	go func() { c, _ := net.Dial("tcp", inner.Addr().String()); time.Sleep(time.Second); c.Close() }()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Accept on a closed listener returned a connection")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
}

func TestNewLimitsRefusesNonsense(t *testing.T) {
	for name, o := range map[string]LimitsOptions{
		"negative rate":     {PerSecond: -1},
		"rate no burst":     {PerSecond: 1, Tracked: 1},
		"rate no tracked":   {PerSecond: 1, Burst: 1},
		"budget below max":  {BodyBytes: 10, MaxBody: 11},
		"budget no max":     {BodyBytes: 10},
		"per address < max": {BodyBytes: 100, MaxBody: 50, BodyBytesPerAddress: 49},
		"negative conns":    {Connections: -1},
		"invalid prefix":    {Exempt: []netip.Prefix{{}}},
	} {
		if _, err := NewLimits(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The byte budget grants in order and hands back what a waiter that gave
// up had queued for.
func TestByteBudgetOrder(t *testing.T) {
	b := newByteBudget(10)
	ctx := t.Context()
	if !b.acquire(ctx, 8, 0) {
		t.Fatal("first")
	}
	if b.acquire(ctx, 5, 0) {
		t.Fatal("over the budget without waiting")
	}
	got := make(chan bool, 1)
	go func() { got <- b.acquire(ctx, 5, 5*time.Second) }()
	time.Sleep(20 * time.Millisecond)
	// A small request behind a waiting large one waits its turn.
	if b.acquire(ctx, 1, 0) {
		t.Fatal("a small request overtook a waiting one")
	}
	b.release(8)
	if !<-got {
		t.Fatal("the waiter was not granted")
	}
	if b.inUse() != 5 {
		t.Fatalf("in use %d", b.inUse())
	}
	if b.acquire(ctx, 6, 10*time.Millisecond) {
		t.Fatal("granted past the budget")
	}
	b.release(5)
	if b.inUse() != 0 {
		t.Fatalf("in use %d", b.inUse())
	}
}

// Refusals are counted one by one but logged at most once per LogEvery,
// with the peer address and the count since the last line.
func TestLimitsRefusalsLoggedSampled(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var logBuf bytes.Buffer
	l := newLimits(t, LimitsOptions{PerSecond: 1, Burst: 1, Tracked: 8, Now: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	send := func() {
		req := httptest.NewRequest("GET", "/v1/arsia/inbox?kid=%0a%1b[31mforged", nil)
		req.RemoteAddr = "192.0.2.1:999"
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	for range 500 {
		send()
	}
	if n := l.refusedCount(ReasonRateLimited); n != 499 {
		t.Fatalf("counted %d refusals, want 499", n)
	}
	if lines := strings.Count(logBuf.String(), "\n"); lines != 1 {
		t.Fatalf("%d log lines for 499 refusals, want 1:\n%s", lines, logBuf.String())
	}
	now = now.Add(61 * time.Second)
	send() // refilled: passes
	send()
	out := logBuf.String()
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, "since_last_line=499") || !strings.Contains(out, "addr=192.0.2.1") || strings.Contains(out, "forged") {
		t.Fatalf("log:\n%s", out)
	}
}

// A Content-Length no handler behind would read is refused before a byte
// is read or a byte of the budget reserved, whatever the handler's own
// limit.
func TestLimitsRefuseDeclaredOversize(t *testing.T) {
	l := newLimits(t, LimitsOptions{BodyBytes: 8 << 10, MaxBody: 4 << 10})
	var reached atomic.Int64
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	}))
	body := &readRecorder{r: strings.NewReader(strings.Repeat("x", 5<<10))}
	req := httptest.NewRequest("POST", "/login", body)
	req.ContentLength = 5 << 10
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || body.reads.Load() != 0 || reached.Load() != 0 {
		t.Fatalf("%d after %d reads, handler reached %d times", rec.Code, body.reads.Load(), reached.Load())
	}
	if l.refusedCount(ReasonTooLarge) != 1 || l.bodies.inUse() != 0 {
		t.Fatalf("too_large %d, reserved %d", l.refusedCount(ReasonTooLarge), l.bodies.inUse())
	}
	// Without a length: cut at MaxBody.
	req = httptest.NewRequest("POST", "/login", &readRecorder{r: strings.NewReader(strings.Repeat("x", 5<<10))})
	req.ContentLength = -1
	var got int64
	var rerr error
	l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, rerr = io.Copy(io.Discard, r.Body)
	})).ServeHTTP(httptest.NewRecorder(), req)
	var mbe *http.MaxBytesError
	if got != 4<<10 || !errors.As(rerr, &mbe) {
		t.Fatalf("chunked: read %d, %v; want 4096 and a MaxBytesError", got, rerr)
	}
}

// One client address holds at most BodyBytesPerAddress of the body
// budget: its next body is refused at once, another address's still gets
// in, and what it held is returned when its handlers end.
func TestLimitsBodyBytesPerAddress(t *testing.T) {
	l := newLimits(t, LimitsOptions{BodyBytes: 64 << 10, MaxBody: 8 << 10, BodyBytesPerAddress: 16 << 10, BodyWait: time.Second})
	release := make(chan struct{})
	var entered atomic.Int64
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		<-release
	}))
	post := func(remote string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/arsia/inbox", strings.NewReader(strings.Repeat("x", 8<<10)))
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { post("198.51.100.9:1") })
	}
	for entered.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	if rec := post("198.51.100.9:2"); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("third body of one address: %d, want 429", rec.Code)
	}
	wg.Go(func() { post("203.0.113.50:1") })
	for entered.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if l.refusedCount(ReasonTooManyBodies) != 1 || len(l.held) != 0 || l.bodies.inUse() != 0 {
		t.Fatalf("refused %d, held %v, in use %d", l.refusedCount(ReasonTooManyBodies), l.held, l.bodies.inUse())
	}
	if rec := post("198.51.100.9:3"); rec.Code != 200 {
		t.Fatalf("after its bodies ended: %d", rec.Code)
	}
}

// collectText is what c collects, in the Prometheus text format.
func collectText(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
