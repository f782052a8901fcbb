package main

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// reviewerToken makes an API token with custos serve token and returns it
// with its token_sha256.
func reviewerToken(t *testing.T) (token, hash string) {
	t.Helper()
	code, out, _ := custos(t, "", "serve", "token")
	tok := regexp.MustCompile(`token:\s+([0-9a-f]+)`).FindStringSubmatch(out)
	h := regexp.MustCompile(`token_sha256:\s+(sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || tok == nil || h == nil {
		t.Fatalf("serve token: %d %s", code, out)
	}
	return tok[1], h[1]
}

// With roles, separation of duties and required justifications
// configured, custos approvals on the gateway's own store refuses to
// decide as the OS user (who holds no role and gave no justification),
// and the action does not run; the gateway's reviewers decide instead.
func TestServeStoreRefusesLocalDecisions(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, data, nil,
		"roles:\n  finance: {capabilities: [\"billing.*\"]}\n"+
			"separation_of_duties: [EU-AI-ACT-HIGH-RISK]\njustification_required: [EU-AI-ACT-HIGH-RISK]\n")
	defer g.stop()
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "9.00"}, nil)
	if code != 202 {
		t.Fatalf("send: %d", code)
	}
	r := g.onlyPending(t)
	st := "--store=" + filepath.Join(data, "custos.db")
	for _, args := range [][]string{
		{"approve", r.ID},
		{"deny", r.ID},
		{"cancel", r.ID},
		{"revoke", "rul_00000000000000000000000000000000"},
		{"sweep"},
		{"stdio"},
		{"submit", "-"},
	} {
		code, out, errOut := custos(t, "", append([]string{"approvals", st}, args...)...)
		if code == 0 || !strings.Contains(errOut, "custos review") || !strings.Contains(errOut, "reviewer policy") {
			t.Fatalf("custos approvals %s on the gateway's store: exit %d\nstdout: %s\nstderr: %s", args[0], code, out, errOut)
		}
	}
	// Reading still works.
	if code, out, errOut := custos(t, "", "approvals", st, "list"); code != 0 || !strings.Contains(out, r.ID) {
		t.Fatalf("list: %d %s %s", code, out, errOut)
	}
	time.Sleep(200 * time.Millisecond)
	if g.upstream.Load() != 0 {
		t.Fatalf("the action ran %d times", g.upstream.Load())
	}
	if c, _ := g.status(t, hdr.Get("Custos-Exchange")); c != 202 {
		t.Fatalf("the exchange is no longer pending: %d", c)
	}
	g.onlyPending(t)
}

// A reviewer without a role may not close a post-execution review (the
// first verdict is final); one whose role covers it may.
func TestServeReviewVerdictNeedsARole(t *testing.T) {
	nobody, nobodyHash := reviewerToken(t)
	auditor, auditorHash := reviewerToken(t)
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil,
		"roles:\n  dsa: {profiles: [DSA-VLOP]}\n"+
			"reviewers:\n  - id: nobody\n    token_sha256: "+nobodyHash+"\n  - id: auditor\n    roles: [dsa]\n    token_sha256: "+auditorHash+"\n")
	defer g.stop()
	code, _, hdr := g.send(t, "demo.echo", "DSA-VLOP", map[string]any{"post": "p-1"}, nil)
	if code != 200 {
		t.Fatalf("send: %d", code)
	}
	id := hdr.Get("Custos-Exchange")
	verdict := func(token string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/v1/reviews/"+id, strings.NewReader(`{"verdict":"accepted","justification":"ok"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		c, m, _ := g.do(t, req)
		return c, m
	}
	if c, m := verdict(nobody); c != http.StatusForbidden {
		t.Fatalf("a reviewer without a role: %d %v", c, m)
	}
	if c, m := verdict(auditor); c != http.StatusOK || m["reviewer"] != "auditor" {
		t.Fatalf("the auditor: %d %v", c, m)
	}
}
