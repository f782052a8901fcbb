package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
)

const sender = "agent:acme.advisor"

// gatewayUnderTest is a custos serve running in-process on a random port.
type gatewayUnderTest struct {
	url, token string
	signer     sig.Signer
	kid        string
	upstream   *atomic.Int64
	// upstreamTrace is the traceparent of the upstream's last call.
	upstreamTrace *atomic.Value
	stop          func()
	dataDir       string
	configPath    string
	// sendersJWKS is the trust store's JWKS file of the sender's keys.
	sendersJWKS string
	log         *syncBuffer
	banner      *syncBuffer
}

// startGateway writes a configuration (a sender key in a JWKS file, an
// echo handler and an http handler counting its calls) and runs serve.
func startGateway(t *testing.T, dataDir string, prev *gatewayUnderTest, extraYAML ...string) *gatewayUnderTest {
	t.Helper()
	return startGatewayIn(t, context.Background(), dataDir, prev, extraYAML...)
}

// startGatewayIn is startGateway with serve running in (a child of) base.
func startGatewayIn(t *testing.T, base context.Context, dataDir string, prev *gatewayUnderTest, extraYAML ...string) *gatewayUnderTest {
	t.Helper()
	g := &gatewayUnderTest{dataDir: dataDir, upstream: new(atomic.Int64), upstreamTrace: new(atomic.Value)}
	if prev != nil {
		g.signer, g.kid, g.upstream, g.configPath, g.sendersJWKS = prev.signer, prev.kid, prev.upstream, prev.configPath, prev.sendersJWKS
		g.upstreamTrace = prev.upstreamTrace
	} else {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		g.kid = sender + "#key-1"
		if g.signer, err = sig.NewEd25519Signer(priv.Seed()); err != nil {
			t.Fatal(err)
		}
		jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: g.kid, Algorithm: "EdDSA", Use: "sig"}}})
		if err != nil {
			t.Fatal(err)
		}
		jwksPath := filepath.Join(t.TempDir(), "senders.jwks.json")
		if err := os.WriteFile(jwksPath, jwks, 0o600); err != nil {
			t.Fatal(err)
		}
		g.sendersJWKS = jwksPath
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			g.upstream.Add(1)
			g.upstreamTrace.Store(r.Header.Get("Traceparent"))
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"invoice":"inv-1"}`)
		}))
		t.Cleanup(up.Close)
		cfg := "listen: 127.0.0.1:0\ndata: " + dataDir + "\nagent: agent:acme.gateway\n" +
			"trust:\n  jwks_files: [" + jwksPath + "]\n" +
			"senders:\n  - agent: " + sender + "\n    capabilities: [\"billing.*\", \"demo.*\"]\n" +
			"handlers:\n  demo.echo:\n    type: echo\n  billing.invoice.create:\n    type: http\n    url: " + up.URL + "/invoices\n" +
			strings.Join(extraYAML, "")
		g.configPath = filepath.Join(t.TempDir(), "custos.yaml")
		if err := os.WriteFile(g.configPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(base)
	var out, errOut syncBuffer
	g.log, g.banner = &errOut, &out
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", g.configPath}, strings.NewReader(""), &out, &errOut)
	}()
	g.stop = func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exit %d: %s", code, errOut.String())
		}
	}
	waitFor(t, &out, "the listening line", func(s string) bool {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, errOut.String())
		default:
		}
		return strings.Contains(s, "Bearer ")
	})
	g.url = regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(out.String())[1]
	g.token = regexp.MustCompile(`Bearer ([0-9a-f]+)`).FindStringSubmatch(out.String())[1]
	return g
}

// send signs and posts a request; it returns the status and the reply.
func (g *gatewayUnderTest) send(t *testing.T, capability, profile string, args any, tamper func(map[string]any)) (int, map[string]any, http.Header) {
	t.Helper()
	opts := arsia.BuildOptions{Now: time.Now()}
	if profile != "" {
		opts.Compliance = map[string]any{"profile": profile}
	}
	e, err := arsia.NewRequest(sender, "agent:acme.gateway", []string{capability}, "com.acme/call", args, opts)
	if err != nil {
		t.Fatal(err)
	}
	env, err := e.Map()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sig.Sign(env, g.signer, g.kid)
	if err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		tamper(signed)
	}
	body, _ := json.Marshal(signed)
	return g.post(t, body, "application/arsia+json; v=1")
}

func (g *gatewayUnderTest) post(t *testing.T, body []byte, ct string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/v1/arsia/inbox", bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	return g.do(t, req)
}

func (g *gatewayUnderTest) do(t *testing.T, req *http.Request) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, resp.Header
}

// verifyReply checks the reply is signed by the gateway's published key.
func (g *gatewayUnderTest) verifyReply(t *testing.T, reply map[string]any) {
	t.Helper()
	resp, err := http.Get(g.url + "/.well-known/arsia/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	keys, err := sig.ParseStaticJWKS(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sig.Verify(t.Context(), reply, keys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}}); err != nil {
		t.Fatalf("the gateway's reply does not verify: %v", err)
	}
}

func (g *gatewayUnderTest) status(t *testing.T, id string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/v1/arsia/exchanges/"+id, nil)
	code, m, _ := g.do(t, req)
	return code, m
}

// approve decides the one pending request through the approvals API.
func (g *gatewayUnderTest) decide(t *testing.T, v aais.Verdict) {
	t.Helper()
	r := g.onlyPending(t)
	d, err := aais.NewDecision(&r, aais.DecisionParams{Decision: v, Scope: aais.ScopeOnce, Actor: aais.Actor{ID: "x", Type: aais.ActorHuman}, DecidedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, d)
	body, _ := aais.Marshal(m)
	post, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/approvals/"+r.ID+"/decisions", bytes.NewReader(body))
	post.Header.Set("Authorization", "Bearer "+g.token)
	post.Header.Set("Content-Type", "application/json")
	if code, m, _ := g.do(t, post); code != 200 {
		t.Fatalf("decision: %d %v", code, m)
	}
}

// onlyPending returns the one pending approval request of the snapshot.
func (g *gatewayUnderTest) onlyPending(t *testing.T) aais.Request {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/approvals/snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+g.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	snap, err := aais.Parse(b)
	if err != nil || len(snap.Snapshot.Pending) != 1 {
		t.Fatalf("snapshot: %s (%v)", b, err)
	}
	return snap.Snapshot.Pending[0]
}

// awaitFinal polls the status URL until the exchange has its final reply.
func (g *gatewayUnderTest) awaitFinal(t *testing.T, id string) (int, map[string]any) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, m := g.status(t, id)
		if code != 202 {
			return code, m
		}
		if time.Now().After(deadline) {
			t.Fatalf("exchange %s never finished; log:\n%s", id, g.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeEndToEnd(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer func() { g.stop() }()

	// not_required: runs at once, the signed response verifies.
	code, reply, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"text": "hi"}, nil)
	if code != 200 || reply["intent"] != "response" {
		t.Fatalf("echo: %d %v", code, reply)
	}
	g.verifyReply(t, reply)
	if res := reply["payload"].(map[string]any)["result"].(map[string]any); res["echo"].(map[string]any)["text"] != "hi" {
		t.Fatalf("echo result: %v", res)
	}

	// required_before_execution: pauses, approved, runs exactly once.
	code, reply, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "100.00"}, nil)
	if code != 202 || reply["intent"] != "pending_approval" {
		t.Fatalf("high-risk request: %d %v", code, reply)
	}
	g.verifyReply(t, reply)
	id := hdr.Get("Custos-Exchange")
	if c, _ := g.status(t, id); c != 202 || g.upstream.Load() != 0 {
		t.Fatalf("before the decision: status %d, upstream called %d times", c, g.upstream.Load())
	}
	g.decide(t, aais.Approve)
	code, reply = g.awaitFinal(t, id)
	if code != 200 || reply["intent"] != "response" || g.upstream.Load() != 1 {
		t.Fatalf("after approval: %d %v, upstream called %d times", code, reply, g.upstream.Load())
	}
	g.verifyReply(t, reply)

	// Denied: an error, nothing runs.
	_, _, hdr = g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "999.00"}, nil)
	g.decide(t, aais.Deny)
	if code, reply = g.awaitFinal(t, hdr.Get("Custos-Exchange")); code != 403 || reply["intent"] != "error" || g.upstream.Load() != 1 {
		t.Fatalf("after denial: %d %v, upstream %d", code, reply, g.upstream.Load())
	}

	// Refusals, each a precise error and nothing run: a signed error to a
	// verified sender, an unsigned problem (the same words) to anyone else.
	for name, tc := range map[string]struct {
		capability string
		tamper     func(map[string]any)
		want       int
		signed     bool
	}{
		"forged signature": {"demo.echo", func(m map[string]any) { m["payload"].(map[string]any)["args"] = map[string]any{"text": "changed"} }, 401, false},
		"unknown kid":      {"demo.echo", func(m map[string]any) { m["security"].(map[string]any)["kid"] = sender + "#nope" }, 401, false},
		"not granted":      {"admin.delete", nil, 403, true},
	} {
		code, reply, _ := g.send(t, tc.capability, "GDPR-STANDARD", map[string]any{"x": 1}, tc.tamper)
		switch {
		case code != tc.want:
			t.Errorf("%s: %d %v, want %d", name, code, reply, tc.want)
		case tc.signed && reply["intent"] != "error":
			t.Errorf("%s: %v, want a signed error", name, reply)
		case !tc.signed && (reply["security"] != nil || reply["detail"] != "The request could not be authenticated."):
			t.Errorf("%s: %v, want an unsigned problem in fixed words", name, reply)
		}
	}
	if code, _, _ := g.post(t, []byte(`{}`), "application/json"); code != 415 {
		t.Errorf("wrong content type: %d", code)
	}
	if code, _, _ := g.post(t, bytes.Repeat([]byte(" "), 2<<20), "application/arsia+json"); code != 413 {
		t.Errorf("oversize body: %d", code)
	}
	if g.upstream.Load() != 1 {
		t.Fatalf("upstream called %d times", g.upstream.Load())
	}

	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`custos_requests_total{result="ok"} 1`,
		`custos_requests_total{result="pending_approval"} 2`,
		`custos_requests_total{result="refused"} 3`,
		`custos_executions_total{outcome="succeeded"} 2`,
		`custos_approvals_total{outcome="approved"} 1`,
		`custos_approvals_total{outcome="denied"} 1`,
		"custos_approvals_waiting 0",
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
}

// A gateway stopped while a request waits for approval: after a restart
// the approval still resolves and the action runs once.
func TestServeRestartWithPendingApproval(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, data, nil)
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "5.00"}, nil)
	if code != 202 {
		t.Fatalf("%d", code)
	}
	id := hdr.Get("Custos-Exchange")
	g.stop()

	g2 := startGateway(t, data, g)
	defer g2.stop()
	g2.decide(t, aais.Approve)
	if code, reply := g2.awaitFinal(t, id); code != 200 || reply["intent"] != "response" {
		t.Fatalf("after the restart: %d %v", code, reply)
	}
	if n := g2.upstream.Load(); n != 1 {
		t.Fatalf("upstream called %d times, want once", n)
	}
}

// A sender over its rate gets 429 with Retry-After, and nothing runs.
func TestServeRateLimit(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil, "rate_limit:\n  per_second: 0.01\n  burst: 2\n")
	defer g.stop()
	for i := range 2 {
		if code, _, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"i": i}, nil); code != 200 {
			t.Fatalf("request %d within the burst: %d", i, code)
		}
	}
	code, reply, hdr := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"i": 3}, nil)
	if code != 429 || reply["intent"] != "error" || hdr.Get("Retry-After") == "" {
		t.Fatalf("over the limit: %d %v Retry-After %q", code, reply, hdr.Get("Retry-After"))
	}
	g.verifyReply(t, reply)
	// A forged request claiming the sender does not use its allowance:
	// it fails verification first.
	if code, _, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{}, func(m map[string]any) { m["id"] = "x" }); code == 429 {
		t.Fatal("an unverified request was counted against the sender")
	}
}

func TestDemo(t *testing.T) {
	code, out, errOut := custos(t, "", "demo", "--approve", "--data", filepath.Join(t.TempDir(), "demo"))
	if code != 0 {
		t.Fatalf("demo exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"-> 200 response, signed by agent:demo.gateway", "-> 202 pending_approval",
		"--approve: approved apr_", "called 0 times", "-> 200 response; the payments agent has been called 1 time(s)",
		"approval_decision: approved by admin", "approval    payments.transfer", "checkpoint", "chain verified: 7 records"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// The load generator runs and every request is answered 200 (a smoke
// test: figures belong in docs/benchmarks.md, not in assertions).
func TestBenchGatewaySmoke(t *testing.T) {
	code, out, errOut := custos(t, "", "bench", "gateway", "--requests", "40", "--concurrency", "4")
	if code != 0 || !strings.Contains(out, "custos serve") || !strings.Contains(out, "(failed 0)") {
		t.Fatalf("bench exit %d: %s\n%s", code, out, errOut)
	}
}

// A reviewer from the configuration decides with their own token.
func TestServeConfiguredReviewer(t *testing.T) {
	code, out, _ := custos(t, "", "serve", "token")
	tok := regexp.MustCompile(`token:\s+([0-9a-f]+)`).FindStringSubmatch(out)
	hash := regexp.MustCompile(`token_sha256:\s+(sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || tok == nil || hash == nil {
		t.Fatalf("serve token: %d %s", code, out)
	}
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil,
		"reviewers:\n  - id: alice\n    display_name: Alice Example\n    token_sha256: "+hash[1]+"\n")
	defer g.stop()
	_, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "1.00"}, nil)
	g.token = tok[1]
	g.decide(t, aais.Approve)
	if code, reply := g.awaitFinal(t, hdr.Get("Custos-Exchange")); code != 200 || reply["intent"] != "response" {
		t.Fatalf("after alice's approval: %d %v", code, reply)
	}
	g.token = "0000"
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/approvals/snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+g.token)
	if code, _, _ := g.do(t, req); code != 401 {
		t.Fatalf("an unknown token: %d", code)
	}
}

// An approval nobody gives in time expires: an error, nothing runs.
func TestServeApprovalExpires(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil, "oversight:\n  ttl: 1s\n")
	defer g.stop()
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "7.00"}, nil)
	if code != 202 {
		t.Fatalf("%d", code)
	}
	code, reply := g.awaitFinal(t, hdr.Get("Custos-Exchange"))
	details, _ := reply["payload"].(map[string]any)["error"].(map[string]any)["details"].(map[string]any)
	if code != 403 || reply["intent"] != "error" || details["reason"] != "approval_expired" || g.upstream.Load() != 0 {
		t.Fatalf("after the deadline: %d %v, upstream %d", code, reply, g.upstream.Load())
	}
}

// custos serve signs a checkpoint of the audit chain when it starts and
// when it stops (and every checkpointEvery): custos audit verify --keys
// checks them against the gateway's key, and without the key says what it
// did not check.
func TestServeSignsAuditCheckpoints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, dir, nil)
	if code, _, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"text": "hi"}, nil); code != 200 {
		t.Fatalf("request: %d", code)
	}
	g.stop()
	key := filepath.Join(dir, "gateway.key.jwk.json")
	out := mustCustos(t, "", "audit", "verify", "--log", dir, "--keys", key)
	if !strings.Contains(out, "2 signed checkpoints, the last vouching for every record up to 3") ||
		!strings.Contains(out, "tail: the chain ends with a clean-stop checkpoint (record 4") {
		t.Fatalf("verify with the gateway's key: %s", out)
	}
	if out := mustCustos(t, "", "audit", "verify", "--log", dir); !strings.Contains(out, "2 checkpoints not checked") {
		t.Fatalf("verify without a key: %s", out)
	}
	// Another key does not vouch for it.
	other := filepath.Join(t.TempDir(), "other")
	mustCustos(t, "", "keygen", "--agent", "agent:com.example.other", "--out", other)
	files, _ := filepath.Glob(filepath.Join(other, "jwks.json"))
	if len(files) != 1 {
		t.Fatalf("keygen wrote %v", files)
	}
	// (The head file's copy of the last checkpoint is refused first.)
	if code, _, errOut := custos(t, "", "audit", "verify", "--log", dir, "--keys", files[0]); code != 1 || !strings.Contains(errOut, "signature") {
		t.Fatalf("verify with another key: exit %d, %s", code, errOut)
	}
	if code, _, errOut := custos(t, "", "audit", "verify", "--log", dir, "--head", key+".none", "--keys", files[0]); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("verify with a missing head file: exit %d, %s", code, errOut)
	}
	if err := os.Rename(filepath.Join(dir, "audit.head.json"), filepath.Join(dir, "head.moved")); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := custos(t, "", "audit", "verify", "--log", dir, "--keys", files[0]); code != 1 || !strings.Contains(errOut, "bad_checkpoint") {
		t.Fatalf("verify with another key: exit %d, %s", code, errOut)
	}
}
