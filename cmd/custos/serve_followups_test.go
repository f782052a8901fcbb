package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
)

// sendBuilt signs a request built with opts and posts it with the given
// headers.
func (g *gatewayUnderTest) sendBuilt(t *testing.T, capability string, args any, opts arsia.BuildOptions, header http.Header) (int, map[string]any, http.Header) {
	t.Helper()
	opts.Now = time.Now()
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
	body, _ := json.Marshal(signed)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/v1/arsia/inbox", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/arsia+json; v=1")
	for k, v := range header {
		req.Header[k] = v
	}
	return g.do(t, req)
}

func TestServeOneGatewayPerDataDir(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer g.stop()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out, errOut syncBuffer
	if code := run(ctx, []string{"serve", "--config", g.configPath, "--listen", "127.0.0.1:0"}, strings.NewReader(""), &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), "another custos serve is running") {
		t.Fatalf("a second gateway on the same data directory: exit %d, %s", code, errOut.String())
	}
}

func TestServeIdempotencyKeyAndTrace(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer g.stop()
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	opts := arsia.BuildOptions{Compliance: map[string]any{"profile": "GDPR-STANDARD"}, Context: &arsia.Context{TraceID: trace}}
	key := http.Header{"Idempotency-Key": {"invoice-2026-0001"}}
	code, first, _ := g.sendBuilt(t, "billing.invoice.create", map[string]any{"amount": "10.00"}, opts, key)
	if code != 200 || first["intent"] != "response" {
		t.Fatalf("first: %d %v", code, first)
	}
	if c, _ := first["context"].(map[string]any); c["trace_id"] != trace {
		t.Fatalf("the reply lost the trace: %v", first["context"])
	}
	// A retry, rebuilt with a new message id: the first reply, and the
	// upstream was called once.
	code, again, _ := g.sendBuilt(t, "billing.invoice.create", map[string]any{"amount": "10.00"}, opts, key)
	if code != 200 || again["id"] != first["id"] || g.upstream.Load() != 1 {
		t.Fatalf("retry: %d, reply id %v (first %v), upstream %d", code, again["id"], first["id"], g.upstream.Load())
	}
	// The key with other arguments: conflict, nothing runs; the error
	// carries the ASC status with the trace.
	code, refused, _ := g.sendBuilt(t, "billing.invoice.create", map[string]any{"amount": "99.00"}, opts, key)
	if code != 409 || refused["intent"] != "error" || g.upstream.Load() != 1 {
		t.Fatalf("reused key: %d %v, upstream %d", code, refused, g.upstream.Load())
	}
	details := refused["payload"].(map[string]any)["error"].(map[string]any)["details"].(map[string]any)
	prov := details["agent_status"].(map[string]any)["provenance"].(map[string]any)
	if details["reason"] != "idempotency_key_reused" || prov["trace_id"] != trace || prov["agent_id"] != "agent:acme.gateway" {
		t.Fatalf("details: %v", details)
	}
	if !strings.Contains(g.log.String(), "trace_id="+trace) {
		t.Fatalf("no request log line with the trace id:\n%s", g.log.String())
	}
}

func TestServeApprovalDecisionNamesTheReviewer(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "100.00"}, nil)
	if code != 202 {
		t.Fatalf("high-risk request: %d", code)
	}
	id := hdr.Get("Custos-Exchange")
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/v1/arsia/exchanges/"+id+"/decision", nil)
	if c, _, _ := g.do(t, req); c != 404 {
		t.Fatalf("a decision before anyone decided: %d", c)
	}
	g.decide(t, aais.Approve)
	if c, _ := g.awaitFinal(t, id); c != 200 {
		t.Fatalf("final: %d", c)
	}
	req, _ = http.NewRequestWithContext(t.Context(), "GET", g.url+"/v1/arsia/exchanges/"+id+"/decision", nil)
	c, d, _ := g.do(t, req)
	if c != 200 || d["intent"] != "approval_decision" {
		t.Fatalf("decision: %d %v", c, d)
	}
	g.verifyReply(t, d)
	res := d["payload"].(map[string]any)["result"].(map[string]any)
	if res["decision"] != "approved" || res["approver_id"] != "admin" {
		t.Fatalf("decision result: %v", res)
	}
	g.stop()
	// The audit log names the reviewer the token authenticated, not the
	// actor the decision body claimed ("x").
	var out, errOut syncBuffer
	if code := run(t.Context(), []string{"audit", "export", "--log", filepath.Join(g.dataDir, "custos.db")}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("audit export: %d %s", code, errOut.String())
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["kind"] == "approval" {
			actor, _ := rec["actor"].(map[string]any)
			found = actor["id"] == "admin" && actor["authenticated_by"] == "api_token"
		}
	}
	if !found {
		t.Fatalf("no approval record with the reviewer:\n%s", out.String())
	}
}

// A sender demanding a newer protocol than this gateway speaks learns
// which versions it does (Core §7.4), and nothing runs.
func TestServeVersionNegotiation(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer g.stop()
	code, reply, _ := g.sendBuilt(t, "billing.invoice.create", map[string]any{"amount": "1.00"},
		arsia.BuildOptions{MinV: "1.5", Compliance: map[string]any{"profile": "GDPR-STANDARD"}}, nil)
	if code != 501 || reply["intent"] != "error" || g.upstream.Load() != 0 {
		t.Fatalf("min_v 1.5: %d %v, upstream %d", code, reply, g.upstream.Load())
	}
	e := reply["payload"].(map[string]any)["error"].(map[string]any)
	if e["code"] != "not_implemented" || e["details"].(map[string]any)["supported_versions"] == nil {
		t.Fatalf("error: %v", e)
	}
}

// What was approved is what runs: a handler reconfigured while a request
// waits changes the action, so the approved call is stale and nothing
// runs.
func TestServeChangedActionAtDispatch(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, data, nil)
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "5.00"}, nil)
	if code != 202 {
		t.Fatalf("%d", code)
	}
	id := hdr.Get("Custos-Exchange")
	g.stop()
	cfg, err := os.ReadFile(g.configPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.configPath, bytes.Replace(cfg, []byte("/invoices"), []byte("/invoices-v2"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	g2 := startGateway(t, data, g)
	defer g2.stop()
	g2.decide(t, aais.Approve)
	code, reply := g2.awaitFinal(t, id)
	if code != 409 || reply["intent"] != "error" || g2.upstream.Load() != 0 {
		t.Fatalf("a changed action: %d %v, upstream %d", code, reply, g2.upstream.Load())
	}
	if e := reply["payload"].(map[string]any)["error"].(map[string]any); e["code"] != "conflict" {
		t.Fatalf("a stale action: %v", e)
	}
}

// A decision sent twice gets the same receipt; a different decision after
// it gets a conflict; the action runs once.
func TestServeReplayedDecision(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer g.stop()
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "7.00"}, nil)
	if code != 202 {
		t.Fatalf("%d", code)
	}
	r := g.onlyPending(t)
	post := func(v aais.Verdict, id string, want int) map[string]any {
		d, err := aais.NewDecision(&r, aais.DecisionParams{ID: id, Decision: v, Scope: aais.ScopeOnce,
			Actor: aais.Actor{ID: "x", Type: aais.ActorHuman}, DecidedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := aais.NewMessage(aais.Header{ID: "msg_" + id, OccurredAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}, d)
		body, _ := aais.Marshal(m)
		req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/approvals/"+r.ID+"/decisions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+g.token)
		req.Header.Set("Content-Type", "application/json")
		code, out, _ := g.do(t, req)
		if code != want {
			t.Fatalf("decision %s: %d %v, want %d", id, code, out, want)
		}
		return out["resolution"].(map[string]any)
	}
	first := post(aais.Approve, "dec_1", 200)
	again := post(aais.Approve, "dec_1", 200)
	if first["id"] != again["id"] || first["outcome"] != "approved" {
		t.Fatalf("replayed decision: %v then %v", first, again)
	}
	if other := post(aais.Deny, "dec_2", 409); other["outcome"] != "conflict" {
		t.Fatalf("a second decision: %v", other)
	}
	if code, _ := g.awaitFinal(t, hdr.Get("Custos-Exchange")); code != 200 || g.upstream.Load() != 1 {
		t.Fatalf("final %d, upstream %d", code, g.upstream.Load())
	}
}

// A profile whose oversight comes after execution runs the call, queues a
// review, and reviewers record their verdict through the review API.
func TestServePostExecutionReview(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer g.stop()
	code, _, hdr := g.send(t, "demo.echo", "PAC-AGRICULTURE", map[string]any{"parcel": "FR-12"}, nil)
	if code != 200 {
		t.Fatalf("post-execution request: %d", code)
	}
	id := hdr.Get("Custos-Exchange")
	call := func(method, path, body string, token string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(t.Context(), method, g.url+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		c, m, _ := g.do(t, req)
		return c, m
	}
	if c, _ := call("GET", "/v1/reviews", "", ""); c != 401 {
		t.Fatalf("reviews without credentials: %d", c)
	}
	c, list := call("GET", "/v1/reviews?state=open", "", g.token)
	reviews, _ := list["reviews"].([]any)
	if c != 200 || len(reviews) != 1 || reviews[0].(map[string]any)["exchange_id"] != id || reviews[0].(map[string]any)["mode"] != "required_post_execution" {
		t.Fatalf("open reviews: %d %v", c, list)
	}
	if c, m := call("POST", "/v1/reviews/"+id, `{"verdict":"accepted","justification":"parcel matches"}`, g.token); c != 200 || m["reviewer"] != "admin" {
		t.Fatalf("verdict: %d %v", c, m)
	}
	if c, _ := call("POST", "/v1/reviews/"+id, `{"verdict":"flagged"}`, g.token); c != 409 {
		t.Fatalf("a second verdict: %d", c)
	}
	if c, _ := call("POST", "/v1/reviews/"+id, `{"verdict":"maybe"}`, g.token); c != 400 && c != 409 {
		t.Fatalf("a bad verdict: %d", c)
	}
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	_, _ = metrics.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(metrics.String(), "custos_reviews_open 0") {
		t.Fatalf("metrics:\n%s", metrics.String())
	}
}

// An AG-UI front end resumes an interrupted run: the decision in
// resume.metadata.aais is decided as the authenticated reviewer, and the
// gateway's waiting call runs.
func TestServeAGUIResume(t *testing.T) {
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	defer g.stop()
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "3.00"}, nil)
	if code != 202 {
		t.Fatalf("%d", code)
	}
	r := g.onlyPending(t)
	d, _ := aais.NewDecision(&r, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeOnce,
		Actor: aais.Actor{ID: "forged", Type: aais.ActorHuman}, DecidedAt: time.Now()})
	m, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, d)
	decided, _ := aais.Marshal(m)
	body := `{"resume":{"interruptId":"` + r.ID + `","metadata":{"aais":` + string(decided) + `}}}`
	post := func(token string) int {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/agui/resume", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		c, out, _ := g.do(t, req)
		if c == 200 && out["continue"] != true {
			t.Fatalf("resume answered %v", out)
		}
		return c
	}
	if c := post(""); c != 401 {
		t.Fatalf("resume without credentials: %d", c)
	}
	if c := post(g.token); c != 200 {
		t.Fatalf("resume: %d", c)
	}
	if c, _ := g.awaitFinal(t, hdr.Get("Custos-Exchange")); c != 200 || g.upstream.Load() != 1 {
		t.Fatalf("after the AG-UI resume: %d, upstream %d", c, g.upstream.Load())
	}
}
