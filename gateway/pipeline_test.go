package gateway

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/store/memstore"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

const (
	pipeSender  = "agent:acme.advisor"
	pipeGateway = "agent:acme.gateway"
	pipeTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// pipeClock is a controllable clock shared by the gateway, the exchange
// store and the AAIS authority.
type pipeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *pipeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *pipeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// countingHandler counts the calls it runs; with block set, Execute
// signals started and waits for block to close.
type countingHandler struct {
	handler.Handler
	n       atomic.Int64
	started chan struct{}
	block   chan struct{}
	mu      sync.Mutex
	calls   []handler.Call
}

func (h *countingHandler) Execute(ctx context.Context, c handler.Call) (handler.Result, error) {
	h.n.Add(1)
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	if h.started != nil {
		h.started <- struct{}{}
	}
	if h.block != nil {
		<-h.block
	}
	return h.Handler.Execute(ctx, c)
}

// callbackHit is one POST the callback server received.
type callbackHit struct {
	status      int
	contentType string
	exchange    string
	body        []byte
}

// callbackSink is a sender's callback endpoint; it answers 500 to the
// first failFirst POSTs.
type callbackSink struct {
	mu        sync.Mutex
	hits      []callbackHit
	failFirst int
	srv       *httptest.Server
}

func newCallbackSink(t testing.TB) *callbackSink {
	s := &callbackSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		status := 200
		if s.failFirst > 0 {
			s.failFirst--
			status = 500
		}
		s.hits = append(s.hits, callbackHit{status, r.Header.Get("Content-Type"), r.Header.Get("Custos-Exchange"), b})
		s.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *callbackSink) all() []callbackHit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hits)
}

// delivered returns the bodies answered 2xx, in order.
func (s *callbackSink) delivered() []callbackHit {
	var out []callbackHit
	for _, h := range s.all() {
		if h.status == 200 {
			out = append(out, h)
		}
	}
	return out
}

// pipeRig is a real gateway with its stores, a sender and a clock.
type pipeRig struct {
	g    *Gateway
	xs   exchange.Backend
	auth *aais.Authority
	mem  *audit.Memory
	// ab is where the audit records are (mem unless an option changes it).
	ab     audit.Backend
	clk    *pipeClock
	signer sig.Signer
	kid    string
	gwKeys sig.KeySource
	echo   *countingHandler
	other  *countingHandler
	sink   *callbackSink
}

type rigOption func(*Options, *pipeRig)

func withCallback(failFirst int) rigOption {
	return func(o *Options, r *pipeRig) {
		r.sink.failFirst = failFirst
		o.Callbacks = map[string]string{pipeSender: r.sink.srv.URL}
	}
}

func newPipeRig(t testing.TB, opts ...rigOption) *pipeRig {
	t.Helper()
	r := &pipeRig{clk: &pipeClock{t: time.Now().UTC().Truncate(time.Millisecond)}}
	// The sender.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	r.kid = pipeSender + "#key-1"
	if r.signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
		t.Fatal(err)
	}
	senders := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: r.kid, Algorithm: "EdDSA", Use: "sig"}}})
	// The gateway.
	gwPub, gwPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	gwSigner, err := sig.NewEd25519Signer(gwPriv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	gwKID := pipeGateway + "#gw-1"
	r.gwKeys = sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: gwPub, KeyID: gwKID, Algorithm: "EdDSA", Use: "sig"}}})

	if r.auth, err = aais.NewAuthority(memstore.New(), &aais.AuthorityOptions{Now: r.clk.Now}); err != nil {
		t.Fatal(err)
	}
	if r.xs, err = sqliteexchange.Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), &sqliteexchange.Options{Now: r.clk.Now}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.xs.Close() })
	r.mem = audit.NewMemory()
	r.echo = &countingHandler{Handler: handler.NewEcho()}
	r.other = &countingHandler{Handler: handler.NewEcho()}
	r.sink = newCallbackSink(t)
	o := Options{
		Agent: pipeGateway, Signer: gwSigner, KID: gwKID, Keys: senders,
		Grants:    map[string][]string{pipeSender: {"demo.echo"}},
		Handlers:  map[string]handler.Handler{"demo.echo": r.echo, "demo.other": r.other},
		Authority: r.auth, Exchanges: r.xs, Audit: audit.New(r.mem, nil),
		Now:    r.clk.Now,
		Logger: slog.New(slog.NewTextHandler(logSink(t), nil)),
	}
	for _, f := range opts {
		f(&o, r)
	}
	if r.g, err = New(o); err != nil {
		t.Fatal(err)
	}
	return r
}

// req describes a request to send.
type req struct {
	caps       []string
	args       any
	compliance map[string]any
	trace      string
	idemKey    string // the envelope's idempotency.key ("" for none)
	id         string // the message id ("" for a fresh one)
}

func profile(name string) map[string]any { return map[string]any{"profile": name} }

// build signs a request and returns its body and message id.
func (r *pipeRig) build(t testing.TB, q req) ([]byte, string) {
	t.Helper()
	if q.caps == nil {
		q.caps = []string{"demo.echo"}
	}
	if q.args == nil {
		q.args = map[string]any{"text": "hello"}
	}
	if q.compliance == nil {
		q.compliance = profile("GDPR-STANDARD")
	}
	now := r.clk.Now()
	opts := arsia.BuildOptions{Now: now, Compliance: q.compliance, ID: q.id}
	if q.trace != "" {
		opts.Context = &arsia.Context{TraceID: q.trace}
	}
	if q.idemKey != "" {
		opts.Idempotency = &arsia.Idempotency{Key: q.idemKey, ExpiresAt: arsia.FormatTimestamp(now.Add(time.Hour))}
	}
	e, err := arsia.NewRequest(pipeSender, pipeGateway, q.caps, "com.acme/call", q.args, opts)
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.Map()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sig.Sign(env, r.signer, r.kid)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(signed)
	if err != nil {
		t.Fatal(err)
	}
	return body, e.ID
}

// send builds, signs and receives a request.
func (r *pipeRig) send(t *testing.T, q req, header string) (Reply, string) {
	t.Helper()
	body, id := r.build(t, q)
	return r.g.Receive(t.Context(), Inbound{Body: body, IdempotencyKey: header}), id
}

// verified decodes a signed gateway envelope and checks its signature.
func (r *pipeRig) verified(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	if len(raw) == 0 {
		t.Fatal("no envelope")
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("envelope %s: %v", raw, err)
	}
	if _, err := sig.Verify(t.Context(), m, r.gwKeys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}}); err != nil {
		t.Fatalf("the gateway's envelope does not verify: %v\n%s", err, raw)
	}
	return m
}

// records returns the audit records, oldest first.
func (r *pipeRig) records(t *testing.T) []audit.Record {
	t.Helper()
	var out []audit.Record
	ab := r.ab
	if ab == nil {
		ab = r.mem
	}
	if err := ab.Range(t.Context(), 0, func(_ uint64, data []byte) error {
		rec, err := audit.ParseRecord(data)
		out = append(out, rec)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func (r *pipeRig) recordsOf(t *testing.T, kind audit.Kind, msgID string) []audit.Record {
	t.Helper()
	var out []audit.Record
	for _, rec := range r.records(t) {
		if rec.Kind == kind && (msgID == "" || rec.MessageID == msgID) {
			out = append(out, rec)
		}
	}
	return out
}

func (r *pipeRig) metrics(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.g.WriteMetrics(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// step runs one round of a background loop and fails on its error.
func step(t *testing.T, f func(context.Context) error) {
	t.Helper()
	if err := f(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// get walks a decoded JSON value along keys.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func wantLine(t *testing.T, metrics, line string) {
	t.Helper()
	for _, l := range strings.Split(metrics, "\n") {
		if l == line {
			return
		}
	}
	t.Errorf("metrics lack %q:\n%s", line, metrics)
}

// noExchange checks nothing was recorded for a message.
func (r *pipeRig) noExchange(t *testing.T, msgID string) {
	t.Helper()
	if x, err := r.xs.BySender(t.Context(), pipeSender, msgID); !errors.Is(err, exchange.ErrNotFound) {
		t.Errorf("an exchange was recorded for %s: %+v, %v", msgID, x, err)
	}
}

// ---------------------------------------------------------------------
// 1. Idempotency

func TestPipelineIdempotentRetry(t *testing.T) {
	for _, tc := range []struct {
		name          string
		header        string // Idempotency-Key of the first request
		retryHeader   string // of the retry
		envKey        string // envelope idempotency.key of the first request
		retryEnvKey   string // of the retry
		wantNewRunFor bool   // the retry is another request (different key)
	}{
		{name: "header", header: "order-1", retryHeader: "order-1"},
		{name: "envelope", envKey: "order-1", retryEnvKey: "order-1"},
		// The header wins over the envelope's key: the retry names the
		// same header key with no envelope key at all.
		{name: "header wins", header: "order-1", envKey: "ignored", retryHeader: "order-1"},
		{name: "envelope key then same in header", envKey: "order-1", retryHeader: "order-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPipeRig(t)
			first, id1 := r.send(t, req{idemKey: tc.envKey}, tc.header)
			if first.Status != 200 {
				t.Fatalf("first: %d %s %v", first.Status, first.Envelope, first.Problem)
			}
			r.clk.Advance(time.Second)
			retry, id2 := r.send(t, req{idemKey: tc.retryEnvKey}, tc.retryHeader)
			if id1 == id2 {
				t.Fatal("the retry must have a new message id")
			}
			if retry.Status != 200 || !bytes.Equal(retry.Envelope, first.Envelope) {
				t.Fatalf("retry: %d %s\nwant the first reply %s", retry.Status, retry.Envelope, first.Envelope)
			}
			if retry.ExchangeID != first.ExchangeID {
				t.Errorf("retry exchange %s, want %s", retry.ExchangeID, first.ExchangeID)
			}
			if n := r.echo.n.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
			if n := len(r.recordsOf(t, audit.KindExecution, "")); n != 1 {
				t.Errorf("%d execution records, want 1", n)
			}
			r.noExchange(t, id2)
			// The reply answers the first request.
			m := r.verified(t, retry.Envelope)
			if m["correlation_id"] != id1 || m["intent"] != "response" {
				t.Errorf("replayed reply: %v", m)
			}
		})
	}
}

func TestPipelineIdempotencyKeyReused(t *testing.T) {
	for _, tc := range []struct{ name, header, envKey string }{
		{"header", "order-2", ""},
		{"envelope", "", "order-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPipeRig(t)
			first, _ := r.send(t, req{idemKey: tc.envKey, args: map[string]any{"amount": 1}}, tc.header)
			if first.Status != 200 {
				t.Fatalf("first: %d %s", first.Status, first.Envelope)
			}
			other, id2 := r.send(t, req{idemKey: tc.envKey, args: map[string]any{"amount": 2}}, tc.header)
			if other.Status != 409 {
				t.Fatalf("reused key: %d %s, want 409", other.Status, other.Envelope)
			}
			m := r.verified(t, other.Envelope)
			if m["intent"] != "error" || get(m, "payload", "error", "code") != "conflict" ||
				get(m, "payload", "error", "details", "reason") != "idempotency_key_reused" {
				t.Errorf("reused key reply: %s", other.Envelope)
			}
			if m["correlation_id"] != id2 {
				t.Errorf("correlation_id %v, want %s", m["correlation_id"], id2)
			}
			if n := r.echo.n.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
			r.noExchange(t, id2)
			rej := r.recordsOf(t, audit.KindReceived, id2)
			if len(rej) != 1 || rej[0].Outcome != audit.OutcomeRejected {
				t.Errorf("received records of the reused key: %+v", rej)
			}
		})
	}
}

func TestPipelineIdempotencyKeyInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, header, envKey, reason string
	}{
		{name: "header too long", header: strings.Repeat("k", 200), reason: "idempotency_key_too_long"},
		{name: "header control character", header: "order\x01-3", reason: arsia.IssueIdempotencyKeyInvalidChar},
		{name: "header non-ASCII", header: "ordré", reason: arsia.IssueIdempotencyKeyInvalidChar},
		// In the envelope, the schema (L1) refuses the key first.
		{name: "envelope too long", envKey: strings.Repeat("k", 200)},
		{name: "envelope control character", envKey: "order\x01-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPipeRig(t)
			rep, id := r.send(t, req{idemKey: tc.envKey}, tc.header)
			if rep.Status != 400 {
				t.Fatalf("invalid key: %d %s, want 400", rep.Status, rep.Envelope)
			}
			m := r.verified(t, rep.Envelope)
			if get(m, "payload", "error", "code") != "invalid_request" {
				t.Errorf("reply: %s", rep.Envelope)
			}
			if tc.reason != "" && get(m, "payload", "error", "details", "reason") != tc.reason {
				t.Errorf("details.reason = %v, want %s", get(m, "payload", "error", "details", "reason"), tc.reason)
			}
			if n := r.echo.n.Load(); n != 0 {
				t.Errorf("the handler ran %d times", n)
			}
			r.noExchange(t, id)
			if n := len(r.recordsOf(t, audit.KindExecution, "")); n != 0 {
				t.Errorf("%d execution records", n)
			}
			// The key was not recorded: a valid key works afterwards.
			ok, _ := r.send(t, req{}, "order-3")
			if ok.Status != 200 {
				t.Errorf("a valid key after an invalid one: %d %s", ok.Status, ok.Envelope)
			}
		})
	}
}

func TestPipelineIdempotencyInProgress(t *testing.T) {
	r := newPipeRig(t)
	r.echo.started = make(chan struct{}, 1)
	r.echo.block = make(chan struct{})
	body1, id1 := r.build(t, req{})
	done := make(chan Reply, 1)
	go func() { done <- r.g.Receive(context.Background(), Inbound{Body: body1, IdempotencyKey: "order-4"}) }()
	select {
	case <-r.echo.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never ran")
	}
	x, err := r.xs.BySender(t.Context(), pipeSender, id1)
	if err != nil || x.State != exchange.Executing {
		t.Fatalf("first exchange: %+v, %v", x, err)
	}

	// Another message with the same key while the first runs.
	busy, id2 := r.send(t, req{}, "order-4")
	if busy.Status != 409 {
		t.Errorf("in flight: %d %s, want 409", busy.Status, busy.Envelope)
	}
	if len(busy.Envelope) != 0 {
		m := r.verified(t, busy.Envelope)
		if get(m, "payload", "error", "code") != "conflict" ||
			get(m, "payload", "error", "details", "reason") != "idempotency_in_progress" ||
			get(m, "payload", "error", "details", "exchange_id") != x.ID {
			t.Errorf("in-flight reply: %s", busy.Envelope)
		}
		if m["correlation_id"] != id2 {
			t.Errorf("correlation_id %v, want %s", m["correlation_id"], id2)
		}
	}
	// The same message again while it runs: in progress as well.
	again := r.g.Receive(t.Context(), Inbound{Body: body1, IdempotencyKey: "order-4"})
	if again.Status != 409 {
		t.Errorf("same message in flight: %d %s, want 409", again.Status, again.Envelope)
	}

	close(r.echo.block)
	first := <-done
	if first.Status != 200 {
		t.Fatalf("first: %d %s", first.Status, first.Envelope)
	}
	after, _ := r.send(t, req{}, "order-4")
	if after.Status != 200 || !bytes.Equal(after.Envelope, first.Envelope) {
		t.Errorf("after completion: %d %s, want the first reply", after.Status, after.Envelope)
	}
	if n := r.echo.n.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	r.noExchange(t, id2)
}

// An expired key may be used again, for another request.
func TestPipelineIdempotencyKeyExpires(t *testing.T) {
	r := newPipeRig(t)
	first, _ := r.send(t, req{idemKey: "order-5", args: map[string]any{"n": 1}}, "")
	if first.Status != 200 {
		t.Fatalf("first: %d %s", first.Status, first.Envelope)
	}
	r.clk.Advance(time.Hour + time.Second) // past idempotency.expires_at
	step(t, r.g.housekeeping)
	second, _ := r.send(t, req{idemKey: "order-5", args: map[string]any{"n": 2}}, "")
	if second.Status != 200 {
		t.Fatalf("after expiry: %d %s", second.Status, second.Envelope)
	}
	if bytes.Equal(second.Envelope, first.Envelope) {
		t.Error("an expired key replayed the old reply")
	}
	if n := r.echo.n.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
}

// ---------------------------------------------------------------------
// 2. Trace

func TestPipelineTrace(t *testing.T) {
	r := newPipeRig(t)
	ok, id := r.send(t, req{trace: pipeTrace}, "")
	if ok.Status != 200 {
		t.Fatalf("%d %s", ok.Status, ok.Envelope)
	}
	m := r.verified(t, ok.Envelope)
	if got := get(m, "context", "trace_id"); got != pipeTrace {
		t.Errorf("response context.trace_id = %v, want %s", got, pipeTrace)
	}
	for _, kind := range []audit.Kind{audit.KindReceived, audit.KindExecution} {
		recs := r.recordsOf(t, kind, id)
		if len(recs) != 1 || recs[0].TraceID != pipeTrace {
			t.Errorf("%s records: %+v, want one with trace %s", kind, recs, pipeTrace)
		}
	}

	// An error reply: the capability is not granted.
	denied, id2 := r.send(t, req{caps: []string{"demo.other"}, trace: pipeTrace}, "")
	if denied.Status != 403 {
		t.Fatalf("not granted: %d %s", denied.Status, denied.Envelope)
	}
	m = r.verified(t, denied.Envelope)
	if get(m, "payload", "error", "details", "reason") != "capability_not_granted" {
		t.Errorf("reply: %s", denied.Envelope)
	}
	if got := get(m, "context", "trace_id"); got != pipeTrace {
		t.Errorf("error context.trace_id = %v", got)
	}
	prov := get(m, "payload", "error", "details", "agent_status", "provenance")
	if get(prov, "trace_id") != pipeTrace || get(prov, "agent_id") != pipeGateway {
		t.Errorf("agent_status.provenance = %v", prov)
	}
	if code := get(m, "payload", "error", "details", "agent_status", "code"); code != float64(asc.PermissionDenied) {
		t.Errorf("agent_status.code = %v, want %d", code, asc.PermissionDenied)
	}
	recs := r.recordsOf(t, audit.KindReceived, id2)
	if len(recs) != 1 || recs[0].TraceID != pipeTrace || recs[0].Outcome != audit.OutcomeRejected {
		t.Errorf("rejected record: %+v", recs)
	}

	// Without a trace: none is invented.
	plain, _ := r.send(t, req{}, "")
	m = r.verified(t, plain.Envelope)
	if c, has := m["context"]; has {
		t.Errorf("a reply to an untraced request has context %v", c)
	}
}

// ---------------------------------------------------------------------
// 3. Post-execution review

func TestPipelinePostExecutionReview(t *testing.T) {
	for _, tc := range []struct {
		name         string
		compliance   map[string]any
		reviewWithin time.Duration
		mode         string
		due          time.Duration
	}{
		{"post-execution profile", profile("PAC-AGRICULTURE"), 0, "required_post_execution", 24 * time.Hour},
		{"post-execution 48h", profile("PAC-AGRICULTURE"), 48 * time.Hour, "required_post_execution", 48 * time.Hour},
		{"within 24h profile", profile("DSA-VLOP"), 0, "required_within_24h", 24 * time.Hour},
		{"within 24h capped", profile("DSA-VLOP"), 48 * time.Hour, "required_within_24h", 24 * time.Hour},
		{"within 24h short", profile("DORA"), time.Hour, "required_within_24h", time.Hour},
		{"override", map[string]any{"profile": "GDPR-STANDARD", "human_oversight": "required_post_execution"}, 0,
			"required_post_execution", 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPipeRig(t, func(o *Options, _ *pipeRig) { o.ReviewWithin = tc.reviewWithin })
			ctx := t.Context()
			t0 := r.clk.Now()
			rep, id := r.send(t, req{compliance: tc.compliance, trace: pipeTrace}, "")
			if rep.Status != 200 {
				t.Fatalf("%d %s", rep.Status, rep.Envelope)
			}
			if n := r.echo.n.Load(); n != 1 {
				t.Fatalf("the handler ran %d times, want 1 (at once)", n)
			}
			exe := r.recordsOf(t, audit.KindExecution, id)
			if len(exe) != 1 || exe[0].Oversight != tc.mode {
				t.Errorf("execution record: %+v", exe)
			}
			open, err := r.g.Reviews(ctx, exchange.ReviewFilter{Open: true})
			if err != nil || len(open) != 1 {
				t.Fatalf("open reviews: %+v, %v", open, err)
			}
			rv := open[0]
			if rv.ExchangeID != rep.ExchangeID || rv.Mode != tc.mode || rv.Sender != pipeSender ||
				rv.Capability != "demo.echo" || rv.Outcome != exchange.Done || rv.TimedOut {
				t.Errorf("review: %+v", rv)
			}
			if want := t0.Add(tc.due); !rv.DueAt.Equal(want) {
				t.Errorf("review due %v, want %v (+%v)", rv.DueAt, want, tc.due)
			}
			if p, _ := tc.compliance["profile"].(string); rv.Profile != p {
				t.Errorf("review profile %q, want %q", rv.Profile, p)
			}
			m := r.metrics(t)
			wantLine(t, m, "custos_reviews_open 1")
			wantLine(t, m, "custos_reviews_overdue 0")

			// Not yet due: nothing raised.
			r.clk.Advance(tc.due - time.Second)
			step(t, r.g.housekeeping)
			if n := len(r.recordsOf(t, audit.KindOversightTimeout, "")); n != 0 {
				t.Fatalf("%d oversight_timeout records before the deadline", n)
			}
			// Past the deadline: exactly one, however often it runs.
			r.clk.Advance(2 * time.Second)
			step(t, r.g.housekeeping)
			step(t, r.g.housekeeping)
			to := r.recordsOf(t, audit.KindOversightTimeout, "")
			if len(to) != 1 {
				t.Fatalf("%d oversight_timeout records, want 1", len(to))
			}
			if to[0].MessageID != id || to[0].Oversight != tc.mode || to[0].Capability != "demo.echo" ||
				to[0].ASCCode != int(asc.Timeout) || to[0].Details["exchange_id"] != rep.ExchangeID {
				t.Errorf("oversight_timeout record: %+v", to[0])
			}
			m = r.metrics(t)
			wantLine(t, m, "custos_reviews_overdue 1")
			wantLine(t, m, `custos_oversight_timeouts_total{mode="`+tc.mode+`"} 1`)

			bob := audit.Actor{ID: "bob", Type: audit.ActorHuman, AuthenticatedBy: "api_token"}
			done, err := r.g.CompleteReview(ctx, rep.ExchangeID, bob, exchange.Accepted, "checked, fine")
			if err != nil {
				t.Fatal(err)
			}
			if done.Reviewer != "bob" || done.Verdict != exchange.Accepted || !done.TimedOut || done.Open() {
				t.Errorf("completed review: %+v", done)
			}
			revs := r.recordsOf(t, audit.KindReview, id)
			if len(revs) != 1 {
				t.Fatalf("%d review records, want 1", len(revs))
			}
			if revs[0].Actor != bob || revs[0].Outcome != string(exchange.Accepted) || revs[0].Oversight != tc.mode ||
				revs[0].Details["justification"] != "checked, fine" || revs[0].Details["late"] != true {
				t.Errorf("review record: %+v", revs[0])
			}
			// A second reviewer is refused; nothing recorded.
			carol := audit.Actor{ID: "carol", Type: audit.ActorHuman, AuthenticatedBy: "api_token"}
			if _, err := r.g.CompleteReview(ctx, rep.ExchangeID, carol, exchange.Flagged, "no"); !errors.Is(err, ErrReviewed) {
				t.Errorf("second reviewer: %v, want ErrReviewed", err)
			}
			if n := len(r.recordsOf(t, audit.KindReview, id)); n != 1 {
				t.Errorf("%d review records after a refused second verdict", n)
			}
			// The same verdict again is a retry, not an error.
			if _, err := r.g.CompleteReview(ctx, rep.ExchangeID, bob, exchange.Accepted, "checked, fine"); err != nil {
				t.Errorf("retried verdict: %v", err)
			}
			if open, _ := r.g.Reviews(ctx, exchange.ReviewFilter{Open: true}); len(open) != 0 {
				t.Errorf("open reviews after the verdict: %+v", open)
			}
			m = r.metrics(t)
			wantLine(t, m, "custos_reviews_open 0")
			wantLine(t, m, "custos_reviews_overdue 0")
			if vr, err := audit.New(r.mem, nil).Verify(ctx); err != nil || !vr.OK() {
				t.Errorf("audit chain: %+v, %v", vr, err)
			}
		})
	}
}

// Reviewed in time: no oversight_timeout ever.
func TestPipelineReviewInTime(t *testing.T) {
	r := newPipeRig(t)
	rep, _ := r.send(t, req{compliance: profile("PAC-AGRICULTURE")}, "")
	if rep.Status != 200 {
		t.Fatalf("%d %s", rep.Status, rep.Envelope)
	}
	alice := audit.Actor{ID: "alice", Type: audit.ActorHuman, AuthenticatedBy: "api_token"}
	rv, err := r.g.CompleteReview(t.Context(), rep.ExchangeID, alice, exchange.Flagged, "")
	if err != nil || rv.TimedOut {
		t.Fatalf("review: %+v, %v", rv, err)
	}
	r.clk.Advance(48 * time.Hour)
	step(t, r.g.housekeeping)
	if n := len(r.recordsOf(t, audit.KindOversightTimeout, "")); n != 0 {
		t.Errorf("%d oversight_timeout records for a review done in time", n)
	}
	wantLine(t, r.metrics(t), "custos_reviews_overdue 0")
}

// Modes that demand no review queue none.
func TestPipelineNoReview(t *testing.T) {
	r := newPipeRig(t)
	for _, p := range []string{"GDPR-STANDARD", "EU-AI-ACT-LIMITED-RISK"} {
		if rep, _ := r.send(t, req{compliance: profile(p)}, ""); rep.Status != 200 {
			t.Fatalf("%s: %d %s", p, rep.Status, rep.Envelope)
		}
	}
	if all, err := r.g.Reviews(t.Context(), exchange.ReviewFilter{}); err != nil || len(all) != 0 {
		t.Errorf("reviews: %+v, %v", all, err)
	}
	if _, err := r.g.CompleteReview(t.Context(), "exc_nope", audit.Actor{ID: "bob"}, exchange.Accepted, ""); !errors.Is(err, exchange.ErrNotFound) {
		t.Errorf("review of an unknown exchange: %v", err)
	}
}

// ---------------------------------------------------------------------
// 4 and 5. Approvals, decisions and callbacks

var alice = aais.Actor{ID: "alice", Type: aais.ActorHuman, AuthenticatedBy: "api_token"}

// decide records alice's verdict on the exchange's approval.
func (r *pipeRig) decide(t *testing.T, exchangeID string, v aais.Verdict, justification string) *aais.Message {
	t.Helper()
	x, err := r.xs.Get(t.Context(), exchangeID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.auth.State(t.Context(), x.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	p := aais.DecisionParams{Decision: v, Scope: aais.ScopeOnce, Actor: alice, DecidedAt: r.clk.Now()}
	if justification != "" {
		j, _ := json.Marshal(justification)
		p.Extensions = aais.Extensions{aais.JustificationExtension: j}
	}
	d, err := aais.NewDecision(st.Request.Event.Request, p)
	if err != nil {
		t.Fatal(err)
	}
	receipt, err := r.auth.Decide(t.Context(), d, alice, nil)
	if err != nil {
		t.Fatal(err)
	}
	return receipt
}

// pending sends a request that needs approval.
func (r *pipeRig) pending(t *testing.T, q req) (Reply, string) {
	t.Helper()
	if q.compliance == nil {
		q.compliance = profile("EU-AI-ACT-HIGH-RISK")
	}
	rep, id := r.send(t, q, "")
	if rep.Status != 202 {
		t.Fatalf("want pending: %d %s %v", rep.Status, rep.Envelope, rep.Problem)
	}
	m := r.verified(t, rep.Envelope)
	if m["intent"] != "pending_approval" || m["correlation_id"] != id {
		t.Fatalf("pending reply: %s", rep.Envelope)
	}
	if d, err := r.g.Decision(t.Context(), rep.ExchangeID); err != nil || d != nil {
		t.Fatalf("decision while pending: %s, %v", d, err)
	}
	return rep, id
}

// checkDecision checks the signed approval_decision of an exchange.
func (r *pipeRig) checkDecision(t *testing.T, exchangeID, requestID, decision, approver string) map[string]any {
	t.Helper()
	raw, err := r.g.Decision(t.Context(), exchangeID)
	if err != nil || raw == nil {
		t.Fatalf("decision: %s, %v", raw, err)
	}
	m := r.verified(t, raw)
	if m["intent"] != "approval_decision" || m["correlation_id"] != requestID || m["from"] != pipeGateway || m["to"] != pipeSender {
		t.Errorf("decision envelope: %s", raw)
	}
	if get(m, "payload", "type") != arsia.PayloadTypeOversightDecision {
		t.Errorf("decision payload.type = %v", get(m, "payload", "type"))
	}
	if got := get(m, "payload", "result", "decision"); got != decision {
		t.Errorf("decision = %v, want %s", got, decision)
	}
	if got := get(m, "payload", "result", "approver_id"); got != approver {
		t.Errorf("approver_id = %v, want %s", got, approver)
	}
	if caps, _ := m["capabilities"].([]any); len(caps) == 0 {
		t.Errorf("an approval_decision must name capabilities: %s", raw)
	}
	if issues := arsia.ErrorIssues(arsia.Validate(m, arsia.ValidateOptions{})); len(issues) > 0 {
		t.Errorf("the decision envelope is not valid ARSIA: %v\n%s", issues, raw)
	}
	return m
}

func TestPipelineApprovalWithCallback(t *testing.T) {
	r := newPipeRig(t, withCallback(1))
	ctx := t.Context()
	rep, id := r.pending(t, req{trace: pipeTrace})
	xid := rep.ExchangeID

	// Nothing decided yet: resume changes nothing, nothing is delivered.
	step(t, r.g.resume)
	step(t, r.g.deliver)
	if st, _ := r.g.Exchange(ctx, xid); st.Status != 202 || !bytes.Equal(st.Envelope, rep.Envelope) {
		t.Errorf("status while pending: %d %s", st.Status, st.Envelope)
	}
	if n := len(r.sink.all()); n != 0 {
		t.Errorf("%d callbacks before the decision", n)
	}
	wantLine(t, r.metrics(t), "custos_approvals_waiting 1")

	const why = "Checked with the customer on the phone."
	if receipt := r.decide(t, xid, aais.Approve, why); receipt.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("receipt: %+v", receipt.Resolution)
	}
	r.clk.Advance(time.Second)
	step(t, r.g.resume)
	if n := r.echo.n.Load(); n != 1 {
		t.Fatalf("the approved call ran %d times", n)
	}
	// Resuming again never runs it again.
	step(t, r.g.resume)
	if n := r.echo.n.Load(); n != 1 {
		t.Fatalf("the approved call ran %d times after a second resume", n)
	}

	final, err := r.g.Exchange(ctx, xid)
	if err != nil || final.Status != 200 {
		t.Fatalf("final: %d %s, %v", final.Status, final.Envelope, err)
	}
	fm := r.verified(t, final.Envelope)
	if fm["intent"] != "response" || fm["correlation_id"] != id || get(fm, "context", "trace_id") != pipeTrace {
		t.Errorf("final reply: %s", final.Envelope)
	}

	dm := r.checkDecision(t, xid, id, arsia.DecisionApproved, "alice")
	if got := get(dm, "payload", "result", "reason"); got != why {
		t.Errorf("reason = %v, want the justification", got)
	}
	if get(dm, "context", "trace_id") != pipeTrace {
		t.Errorf("decision context: %v", dm["context"])
	}

	apr := r.recordsOf(t, audit.KindApproval, id)
	if len(apr) != 1 {
		t.Fatalf("%d approval records", len(apr))
	}
	if a := apr[0].Actor; a.ID != "alice" || a.Type != "human" || a.AuthenticatedBy != "api_token" ||
		apr[0].Details["justification"] != why || apr[0].Outcome != string(aais.OutcomeApproved) || apr[0].TraceID != pipeTrace {
		t.Errorf("approval record: %+v", apr[0])
	}
	exe := r.recordsOf(t, audit.KindExecution, id)
	x, _ := r.xs.Get(ctx, xid)
	if len(exe) != 1 || exe[0].RequestID != x.ApprovalID || exe[0].TraceID != pipeTrace || exe[0].Oversight != "required_before_execution" {
		t.Errorf("execution records: %+v", exe)
	}

	// Callbacks: the first attempt fails (500) and is retried after the
	// backoff; the final reply never overtakes the decision.
	step(t, r.g.deliver)
	if hits := r.sink.all(); len(hits) != 1 || hits[0].status != 500 {
		t.Fatalf("first delivery: %+v", hits)
	}
	step(t, r.g.deliver) // not due yet
	if n := len(r.sink.all()); n != 1 {
		t.Fatalf("%d posts before the retry is due (the final reply must wait for the decision)", n)
	}
	r.clk.Advance(2 * time.Second)
	for range 3 {
		step(t, r.g.deliver)
	}
	got := r.sink.delivered()
	if len(got) != 2 {
		t.Fatalf("delivered %d envelopes, want 2: %+v", len(got), r.sink.all())
	}
	decision, _ := r.g.Decision(ctx, xid)
	for i, want := range [][]byte{decision, final.Envelope} {
		if !bytes.Equal(got[i].body, want) {
			t.Errorf("callback %d: %s\nwant %s", i, got[i].body, want)
		}
		if got[i].contentType != "application/arsia+json; v=1" || got[i].exchange != xid {
			t.Errorf("callback %d headers: %q %q", i, got[i].contentType, got[i].exchange)
		}
	}
	if all := r.sink.all(); len(all) != 3 || !bytes.Equal(all[0].body, decision) {
		t.Errorf("posts: %d (the failed first one must be the decision)", len(all))
	}
	m := r.metrics(t)
	wantLine(t, m, `custos_callbacks_total{result="failed"} 1`)
	wantLine(t, m, `custos_callbacks_total{result="delivered"} 2`)
	wantLine(t, m, `custos_approvals_total{outcome="approved"} 1`)
	wantLine(t, m, "custos_approvals_waiting 0")
}

func TestPipelineApprovalDenied(t *testing.T) {
	r := newPipeRig(t, withCallback(0))
	ctx := t.Context()
	rep, id := r.pending(t, req{trace: pipeTrace})
	xid := rep.ExchangeID
	r.decide(t, xid, aais.Deny, "Not for this customer.")
	step(t, r.g.resume)

	final, err := r.g.Exchange(ctx, xid)
	if err != nil || final.Status != 403 {
		t.Fatalf("final: %d %s, %v", final.Status, final.Envelope, err)
	}
	fm := r.verified(t, final.Envelope)
	if fm["intent"] != "error" || get(fm, "payload", "error", "details", "reason") != "approval_denied" ||
		get(fm, "payload", "error", "details", "agent_status", "code") != float64(asc.PermissionDenied) {
		t.Errorf("denial reply: %s", final.Envelope)
	}
	dm := r.checkDecision(t, xid, id, arsia.DecisionDenied, "alice")
	if got := get(dm, "payload", "result", "reason"); got != "Not for this customer." {
		t.Errorf("reason = %v", got)
	}
	if n := r.echo.n.Load(); n != 0 {
		t.Errorf("a denied call ran %d times", n)
	}
	if n := len(r.recordsOf(t, audit.KindExecution, "")); n != 0 {
		t.Errorf("%d execution records for a denied call", n)
	}
	apr := r.recordsOf(t, audit.KindApproval, id)
	if len(apr) != 1 || apr[0].Outcome != string(aais.OutcomeDenied) || apr[0].Actor.ID != "alice" || apr[0].TraceID != pipeTrace {
		t.Errorf("approval records: %+v", apr)
	}
	step(t, r.g.resume)
	if n := len(r.recordsOf(t, audit.KindApproval, id)); n != 1 {
		t.Errorf("%d approval records after a second resume", n)
	}

	for range 3 {
		step(t, r.g.deliver)
	}
	got := r.sink.delivered()
	decision, _ := r.g.Decision(ctx, xid)
	if len(got) != 2 || !bytes.Equal(got[0].body, decision) || !bytes.Equal(got[1].body, final.Envelope) {
		t.Fatalf("callbacks: %d, want the decision then the error", len(got))
	}
	for _, h := range got {
		if h.contentType != "application/arsia+json; v=1" {
			t.Errorf("Content-Type %q", h.contentType)
		}
	}
}

func TestPipelineApprovalExpires(t *testing.T) {
	r := newPipeRig(t, withCallback(0))
	ctx := t.Context()
	rep, id := r.pending(t, req{})
	xid := rep.ExchangeID
	r.clk.Advance(10*time.Minute + time.Second) // the default ApprovalTTL
	wantLine(t, r.metrics(t), "custos_approvals_overdue 1")
	// One round expires the approval, the next answers the sender; a few
	// rounds are what Run does anyway.
	for range 3 {
		step(t, r.g.resume)
	}
	final, err := r.g.Exchange(ctx, xid)
	if err != nil || final.Status != 403 {
		t.Fatalf("final: %d %s, %v", final.Status, final.Envelope, err)
	}
	fm := r.verified(t, final.Envelope)
	if get(fm, "payload", "error", "details", "reason") != "approval_expired" ||
		get(fm, "payload", "error", "details", "agent_status", "code") != float64(asc.Timeout) {
		t.Errorf("expiry reply: %s", final.Envelope)
	}
	dm := r.checkDecision(t, xid, id, arsia.DecisionDenied, aais.RuntimeActor.ID)
	if reason, _ := get(dm, "payload", "result", "reason").(string); !strings.HasPrefix(reason, "expired") {
		t.Errorf("reason = %q, want it to start with expired", reason)
	}
	if n := r.echo.n.Load(); n != 0 {
		t.Errorf("an expired call ran %d times", n)
	}
	apr := r.recordsOf(t, audit.KindApproval, id)
	if len(apr) != 1 || apr[0].Outcome != string(aais.OutcomeExpired) {
		t.Errorf("approval records: %+v", apr)
	}
	// A decision after expiry changes nothing.
	if receipt := r.decide(t, xid, aais.Approve, ""); receipt.Resolution.Outcome == aais.OutcomeApproved {
		t.Errorf("approved after expiry: %+v", receipt.Resolution)
	}
	step(t, r.g.resume)
	if n := r.echo.n.Load(); n != 0 {
		t.Errorf("ran after a late approval")
	}
	for range 3 {
		step(t, r.g.deliver)
	}
	if got := r.sink.delivered(); len(got) != 2 {
		t.Errorf("callbacks: %d, want the decision then the error", len(got))
	}
	m := r.metrics(t)
	wantLine(t, m, "custos_approvals_overdue 0")
	wantLine(t, m, `custos_approvals_total{outcome="expired"} 1`)
}

// Callbacks go only where configured; without one, nothing is queued.
func TestPipelineNoCallback(t *testing.T) {
	r := newPipeRig(t)
	rep, _ := r.pending(t, req{})
	r.decide(t, rep.ExchangeID, aais.Approve, "")
	step(t, r.g.resume)
	if due, err := r.xs.DueDeliveries(t.Context(), r.clk.Now().Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Errorf("deliveries without a callback: %+v, %v", due, err)
	}
	if n := r.echo.n.Load(); n != 1 {
		t.Errorf("ran %d times", n)
	}
}

// ---------------------------------------------------------------------
// 6. Capability downgrade

func TestPipelineCapabilityDowngrade(t *testing.T) {
	for _, tc := range []struct {
		name      string
		caps      []string
		status    int
		effective []string // nil: no effective_capabilities member
	}{
		{"granted only", []string{"demo.echo"}, 200, nil},
		{"downgraded", []string{"demo.echo", "demo.other"}, 200, []string{"demo.echo"}},
		{"first not granted", []string{"demo.other", "demo.echo"}, 403, nil},
		{"none granted", []string{"demo.other"}, 403, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPipeRig(t)
			rep, _ := r.send(t, req{caps: tc.caps}, "")
			if rep.Status != tc.status {
				t.Fatalf("%d %s, want %d", rep.Status, rep.Envelope, tc.status)
			}
			m := r.verified(t, rep.Envelope)
			if tc.status != 200 {
				if get(m, "payload", "error", "code") != "forbidden" ||
					get(m, "payload", "error", "details", "reason") != "capability_not_granted" ||
					get(m, "payload", "error", "details", "capability") != tc.caps[0] {
					t.Errorf("refusal: %s", rep.Envelope)
				}
				if n := r.echo.n.Load() + r.other.n.Load(); n != 0 {
					t.Errorf("%d calls ran", n)
				}
				return
			}
			if get(m, "payload", "result", "echo", "text") != "hello" {
				t.Errorf("result: %s", rep.Envelope)
			}
			eff, has := get(m, "payload", "result").(map[string]any)["effective_capabilities"]
			if tc.effective == nil {
				if has {
					t.Errorf("effective_capabilities in a response that was not downgraded: %v", eff)
				}
			} else if got, _ := json.Marshal(eff); string(got) != mustJSON(tc.effective) {
				t.Errorf("effective_capabilities = %s, want %s", got, mustJSON(tc.effective))
			}
			if issues := arsia.ErrorIssues(arsia.Validate(m, arsia.ValidateOptions{})); len(issues) > 0 {
				t.Errorf("response not valid ARSIA: %v", issues)
			}
			if r.echo.n.Load() != 1 || r.other.n.Load() != 0 {
				t.Errorf("calls: echo %d, other %d", r.echo.n.Load(), r.other.n.Load())
			}
		})
	}
}

// A downgraded call that waits for approval still says what was granted.
func TestPipelineDowngradeAfterApproval(t *testing.T) {
	r := newPipeRig(t)
	rep, _ := r.pending(t, req{caps: []string{"demo.echo", "demo.other"}})
	r.decide(t, rep.ExchangeID, aais.Approve, "")
	step(t, r.g.resume)
	final, err := r.g.Exchange(t.Context(), rep.ExchangeID)
	if err != nil || final.Status != 200 {
		t.Fatalf("final: %d %s, %v", final.Status, final.Envelope, err)
	}
	m := r.verified(t, final.Envelope)
	if got, _ := json.Marshal(get(m, "payload", "result", "effective_capabilities")); string(got) != `["demo.echo"]` {
		t.Errorf("effective_capabilities = %s", got)
	}
}

// Run drives the same flow with its own loops.
func TestPipelineRunLoops(t *testing.T) {
	r := newPipeRig(t, withCallback(0), func(o *Options, _ *pipeRig) { o.Poll = 10 * time.Millisecond })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	rep, _ := r.pending(t, req{})
	r.decide(t, rep.ExchangeID, aais.Approve, "ok")
	deadline := time.Now().Add(10 * time.Second)
	for len(r.sink.delivered()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("Run never delivered: %+v", r.sink.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := r.echo.n.Load(); n != 1 {
		t.Errorf("ran %d times", n)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// ---------------------------------------------------------------------
// Audit failures and remembered approvals

var errInjected = errors.New("injected audit failure")

// flakyBackend fails the next `fail` appends of records of kind `kind`
// (nothing is stored for them).
type flakyBackend struct {
	audit.Backend
	mu   sync.Mutex
	kind audit.Kind
	fail int
}

func (b *flakyBackend) Append(ctx context.Context, build func(last *audit.Record) (audit.Record, error)) (audit.Record, error) {
	return b.Backend.Append(ctx, func(last *audit.Record) (audit.Record, error) {
		rec, err := build(last)
		if err != nil {
			return rec, err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if rec.Kind == b.kind && b.fail > 0 {
			b.fail--
			return audit.Record{}, errInjected
		}
		return rec, nil
	})
}

func (b *flakyBackend) failNext(kind audit.Kind, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.kind, b.fail = kind, n
}

func withFlakyAudit(fb **flakyBackend) rigOption {
	return func(o *Options, r *pipeRig) {
		*fb = &flakyBackend{Backend: r.mem}
		o.Audit = audit.New(*fb, nil)
	}
}

// Nothing runs unrecorded: when the approval record cannot be written,
// the approved call must not run without it on a later round.
func TestPipelineApprovalAuditFailure(t *testing.T) {
	var fb *flakyBackend
	r := newPipeRig(t, withFlakyAudit(&fb))
	rep, id := r.pending(t, req{})
	r.decide(t, rep.ExchangeID, aais.Approve, "fine")
	fb.failNext(audit.KindApproval, 1)
	if err := r.g.resume(t.Context()); !errors.Is(err, errInjected) {
		t.Fatalf("resume with a failing audit: %v", err)
	}
	if n := r.echo.n.Load(); n != 0 {
		t.Fatalf("ran %d times although the approval was not recorded", n)
	}
	// The audit works again: the next rounds may run the call, but only
	// with its approval recorded.
	step(t, r.g.resume)
	step(t, r.g.resume)
	ran := r.echo.n.Load()
	apr := r.recordsOf(t, audit.KindApproval, id)
	if ran > 1 {
		t.Errorf("ran %d times", ran)
	}
	if ran == 1 && len(apr) != 1 {
		t.Errorf("BUG: the approved call ran with %d approval records (the failed write was never retried)", len(apr))
	}
}

// A session approval remembers the sender's capability: the next call
// runs at once, recorded as approved by the rule.
func TestPipelineSessionRule(t *testing.T) {
	r := newPipeRig(t, withCallback(0), func(o *Options, _ *pipeRig) { o.AllowSession = true })
	ctx := t.Context()
	rep, _ := r.pending(t, req{})
	x, _ := r.xs.Get(ctx, rep.ExchangeID)
	st, err := r.auth.State(ctx, x.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	d, err := aais.NewDecision(st.Request.Event.Request, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeSession,
		Actor: alice, DecidedAt: r.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.auth.Decide(ctx, d, alice, nil); err != nil {
		t.Fatal(err)
	}
	step(t, r.g.resume)
	for range 3 {
		step(t, r.g.deliver)
	}
	before := len(r.sink.delivered())
	if before != 2 {
		t.Fatalf("callbacks of the first call: %d", before)
	}

	rep2, id2 := r.send(t, req{compliance: profile("EU-AI-ACT-HIGH-RISK"), args: map[string]any{"text": "again"}}, "")
	if rep2.Status != 200 {
		// A rule-approved submission (oversight.go) moving the exchange received -> approved, a
		// transition the exchange state machine lacks.
		x2, _ := r.xs.BySender(ctx, pipeSender, id2)
		t.Fatalf("BUG: a call a session rule approves fails: %d %v (exchange left %s, AAIS request approved)",
			rep2.Status, get(r.verified(t, rep2.Envelope), "payload", "error", "description"), x2.State)
	}
	if n := r.echo.n.Load(); n != 2 {
		t.Errorf("ran %d times, want 2", n)
	}
	apr := r.recordsOf(t, audit.KindApproval, id2)
	if len(apr) != 1 || apr[0].Actor.ID != "custos.rules" || apr[0].Details["rule"] == nil {
		t.Errorf("rule approval record: %+v", apr)
	}
	// The sender got its answer synchronously and was never told to
	// wait: no approval_decision, and no callback either.
	if dec, _ := r.g.Decision(ctx, rep2.ExchangeID); dec != nil {
		t.Logf("decision of a rule-approved call: %s", dec)
	}
	for range 3 {
		step(t, r.g.deliver)
	}
	if got := r.sink.delivered(); len(got) != before {
		t.Errorf("BUG: %d callbacks for a call answered synchronously (200), without an approval_decision before it: %s",
			len(got)-before, got[len(got)-1].body)
	}
}

// With a session rule, a failed approval record fails the request (500,
// "nothing ran"); the call must then never run.
func TestPipelineSessionRuleAuditFailure(t *testing.T) {
	var fb *flakyBackend
	r := newPipeRig(t, withFlakyAudit(&fb), func(o *Options, _ *pipeRig) { o.AllowSession = true })
	ctx := t.Context()
	rep, _ := r.pending(t, req{})
	x, _ := r.xs.Get(ctx, rep.ExchangeID)
	st, err := r.auth.State(ctx, x.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	d, err := aais.NewDecision(st.Request.Event.Request, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeSession,
		Actor: alice, DecidedAt: r.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.auth.Decide(ctx, d, alice, nil); err != nil {
		t.Fatal(err)
	}
	step(t, r.g.resume)
	if n := r.echo.n.Load(); n != 1 {
		t.Fatalf("first call ran %d times", n)
	}

	fb.failNext(audit.KindApproval, 1)
	rep2, id2 := r.send(t, req{compliance: profile("EU-AI-ACT-HIGH-RISK")}, "")
	if rep2.Status != 500 {
		t.Fatalf("second call with a failing audit: %d %s", rep2.Status, rep2.Envelope)
	}
	m := r.verified(t, rep2.Envelope)
	t.Logf("the sender is told: %v", get(m, "payload", "error", "description"))
	for range 3 {
		step(t, r.g.resume)
	}
	if n := r.echo.n.Load(); n != 1 {
		t.Errorf("BUG: the sender was told %q (500), yet the call ran later (%d runs); approval records for it: %d",
			get(m, "payload", "error", "description"), n, len(r.recordsOf(t, audit.KindApproval, id2)))
	}
	x2, err := r.xs.BySender(ctx, pipeSender, id2)
	if err != nil || x2.State != exchange.Failed || x2.ReplyStatus != 500 {
		t.Errorf("exchange after the failure: %+v, %v (want failed, 500)", x2, err)
	}
}

// logSink sends the gateway's log to the test log.
type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func logSink(t testing.TB) io.Writer {
	if testing.Verbose() {
		return testLogWriter{t}
	}
	return io.Discard
}

func (h *countingHandler) lastCall(t *testing.T) handler.Call {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) == 0 {
		t.Fatal("the handler never ran")
	}
	return h.calls[len(h.calls)-1]
}

// The handler gets what the request said: trace id and idempotency key
// (the HTTP handler forwards them upstream as traceparent and
// Idempotency-Key), whether the call ran at once or after an approval.
func TestPipelineHandlerCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile string
	}{
		{"at once", "GDPR-STANDARD"},
		{"after approval", "EU-AI-ACT-HIGH-RISK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPipeRig(t)
			rep, id := r.send(t, req{compliance: profile(tc.profile), trace: pipeTrace}, "order-7")
			if rep.Status == 202 {
				r.decide(t, rep.ExchangeID, aais.Approve, "")
				step(t, r.g.resume)
			}
			c := r.echo.lastCall(t)
			if c.From != pipeSender || c.To != pipeGateway || c.MessageID != id || c.CorrelationID != id ||
				c.Capability != "demo.echo" || c.PayloadType != "com.acme/call" {
				t.Errorf("call: %+v", c)
			}
			if c.TraceID != pipeTrace {
				t.Errorf("call trace id %q, want %s", c.TraceID, pipeTrace)
			}
			if c.IdempotencyKey != "order-7" {
				t.Errorf("BUG: the handler got idempotency key %q, want order-7 (an upstream could not deduplicate)", c.IdempotencyKey)
			}
		})
	}
}

// An idempotent retry of a request that waits for approval gets the
// pending reply, asks no second approval, and after the decision gets the
// final reply; the call runs once.
func TestPipelineIdempotencyWithApproval(t *testing.T) {
	r := newPipeRig(t)
	ctx := t.Context()
	first, _ := r.pending(t, req{idemKey: "order-8"})
	retry, id2 := r.send(t, req{idemKey: "order-8", compliance: profile("EU-AI-ACT-HIGH-RISK")}, "")
	if retry.Status != 202 || !bytes.Equal(retry.Envelope, first.Envelope) || retry.ExchangeID != first.ExchangeID {
		t.Fatalf("retry while pending: %d %s", retry.Status, retry.Envelope)
	}
	r.noExchange(t, id2)
	wantLine(t, r.metrics(t), "custos_approvals_waiting 1")
	snap, err := r.auth.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.Snapshot.Pending); n != 1 {
		t.Errorf("%d approval requests pending, want 1", n)
	}
	r.decide(t, first.ExchangeID, aais.Approve, "")
	step(t, r.g.resume)
	final, err := r.g.Exchange(ctx, first.ExchangeID)
	if err != nil || final.Status != 200 {
		t.Fatalf("final: %d %s, %v", final.Status, final.Envelope, err)
	}
	again, _ := r.send(t, req{idemKey: "order-8", compliance: profile("EU-AI-ACT-HIGH-RISK")}, "")
	if again.Status != 200 || !bytes.Equal(again.Envelope, final.Envelope) {
		t.Errorf("retry after the approval: %d %s", again.Status, again.Envelope)
	}
	if n := r.echo.n.Load(); n != 1 {
		t.Errorf("ran %d times", n)
	}
}

// docs/gateway.md: a request's trace id is "in its audit records" — the
// follow-up records of a traced request too.
func TestPipelineTraceOnFollowUpRecords(t *testing.T) {
	r := newPipeRig(t)
	rep, id := r.send(t, req{compliance: profile("PAC-AGRICULTURE"), trace: pipeTrace}, "")
	if rep.Status != 200 {
		t.Fatalf("%d %s", rep.Status, rep.Envelope)
	}
	r.clk.Advance(25 * time.Hour)
	step(t, r.g.housekeeping)
	if _, err := r.g.CompleteReview(t.Context(), rep.ExchangeID, audit.Actor{ID: "bob", Type: audit.ActorHuman}, exchange.Accepted, ""); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []audit.Kind{audit.KindReceived, audit.KindExecution, audit.KindOversightTimeout, audit.KindReview} {
		recs := r.recordsOf(t, kind, id)
		if len(recs) != 1 {
			t.Errorf("%d %s records", len(recs), kind)
			continue
		}
		if recs[0].TraceID != pipeTrace {
			t.Errorf("BUG: the %s record of a traced request has trace id %q, want %s", kind, recs[0].TraceID, pipeTrace)
		}
	}
}

// A request that failed before anything ran is answered "retry later";
// the retry, with the same idempotency key, must then be able to run.
func TestPipelineIdempotentRetryAfterInternalError(t *testing.T) {
	var fb *flakyBackend
	r := newPipeRig(t, withFlakyAudit(&fb))
	fb.failNext(audit.KindReceived, 1)
	first, id1 := r.send(t, req{}, "order-9")
	if first.Status != 500 {
		t.Fatalf("first with a failing audit: %d %s", first.Status, first.Envelope)
	}
	if n := r.echo.n.Load(); n != 0 {
		t.Fatalf("ran %d times", n)
	}
	desc := get(r.verified(t, first.Envelope), "payload", "error", "description")
	retry, _ := r.send(t, req{}, "order-9")
	if retry.Status != 200 {
		x, _ := r.xs.BySender(t.Context(), pipeSender, id1)
		t.Errorf("BUG: the retry the sender was told to make (%q) replays the failure: %d (first exchange %s, %s); the key is burnt until it expires",
			desc, retry.Status, x.ID, x.State)
	}
}
