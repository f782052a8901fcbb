package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// sseEvents reads the approvals event stream as a reviewer and sends each
// event's data on the channel.
func sseEvents(t *testing.T, g *gatewayUnderTest, token string) <-chan *aais.Message {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/approvals/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("event stream: %d", resp.StatusCode)
	}
	out := make(chan *aais.Message, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if m, err := aais.Parse([]byte(data)); err == nil {
				out <- m
			}
		}
	}()
	return out
}

// nextActivity waits for the stream's next recorded partial vote.
func nextActivity(t *testing.T, events <-chan *aais.Message) aais.Tally {
	t.Helper()
	for m := range events {
		if aais.Partial(m) {
			tl, _ := aais.TallyOf(m)
			return tl
		}
	}
	t.Fatal("the event stream ended before a partial vote")
	return aais.Tally{}
}

// vote posts a decision on r as the reviewer holding token.
func (g *gatewayUnderTest) vote(t *testing.T, r aais.Request, token string, v aais.Verdict) (int, []byte) {
	t.Helper()
	d, err := aais.NewDecision(&r, aais.DecisionParams{Decision: v, Scope: aais.ScopeOnce, Actor: aais.Actor{ID: "x", Type: aais.ActorHuman}, DecidedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, d)
	body, _ := aais.Marshal(m)
	post, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/approvals/"+r.ID+"/decisions", bytes.NewReader(body))
	post.Header.Set("Authorization", "Bearer "+token)
	post.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// inboxTally is the tally the inbox's snapshot JSON shows for a request.
func (g *gatewayUnderTest) inboxTally(t *testing.T, token, id string) aais.Tally {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/approvals/snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m, err := aais.Parse(b)
	if err != nil {
		t.Fatalf("snapshot %s: %v", b, err)
	}
	return aais.SnapshotTallies(m)[id]
}

const quorumYAML = "roles:\n  finance: {capabilities: [\"billing.*\"]}\n  security: {capabilities: [\"billing.*\"]}\n" +
	"quorum:\n  - capabilities: [\"billing.*\"]\n    approvals_required: 2\n    approvals_from_roles: [finance, security]\n"

// A call under a quorum of two (a finance and a security reviewer) pends
// after the first approval, shows it in the inbox and the event stream,
// runs once after the quorum is reached, and the audit names every
// approver.
func TestServeQuorum(t *testing.T) {
	aliceTok, aliceHash := reviewerToken(t)
	carolTok, carolHash := reviewerToken(t)
	bobTok, bobHash := reviewerToken(t)
	data := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, data, nil, quorumYAML+
		"reviewers:\n  - id: alice\n    roles: [finance]\n    token_sha256: "+aliceHash+
		"\n  - id: carol\n    roles: [finance]\n    token_sha256: "+carolHash+
		"\n  - id: bob\n    roles: [security]\n    token_sha256: "+bobHash+"\n")
	stopped := false
	defer func() {
		if !stopped {
			g.stop()
		}
	}()
	events := sseEvents(t, g, bobTok)

	code, reply, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "100.00"}, nil)
	if code != 202 || reply["intent"] != "pending_approval" {
		t.Fatalf("request: %d %v", code, reply)
	}
	id := hdr.Get("Custos-Exchange")
	r := g.onlyPending(t)
	if q, multi, err := aais.QuorumOf(&r); err != nil || !multi || q.ApprovalsRequired != 2 {
		t.Fatalf("the request's quorum: %+v %v %v", q, multi, err)
	}
	for _, c := range r.Choices {
		if c.Scope != aais.ScopeOnce {
			t.Fatalf("a quorum request offers a %s choice", c.Scope)
		}
	}

	// First approval: 202, a partial vote; nothing runs.
	code, body := g.vote(t, r, aliceTok, aais.Approve)
	if m, err := aais.Parse(body); code != 202 || err != nil || !aais.Partial(m) {
		t.Fatalf("first approval: %d %s", code, body)
	}
	if tl := g.inboxTally(t, bobTok, r.ID); len(tl.Approvals) != 1 || tl.Approvals[0].Actor.ID != "alice" || tl.ApprovalsRequired != 2 {
		t.Fatalf("inbox after the first approval: %+v", tl)
	}
	if tl := nextActivity(t, events); len(tl.Approvals) != 1 || tl.Approvals[0].Actor.ID != "alice" {
		t.Fatalf("event stream after the first approval: %+v", tl)
	}
	// A second finance reviewer: two approvals, but no security one yet.
	if code, body := g.vote(t, r, carolTok, aais.Approve); code != 202 {
		t.Fatalf("carol: %d %s", code, body)
	}
	if tl := nextActivity(t, events); len(tl.Approvals) != 2 {
		t.Fatalf("event stream after carol: %+v", tl)
	} else if n, roles := tl.Missing(); n != 1 || len(roles) != 1 || roles[0] != "security" {
		t.Fatalf("missing after carol: %d %v", n, roles)
	}
	// Alice cannot count twice.
	if code, body := g.vote(t, r, aliceTok, aais.Approve); code != 409 {
		t.Fatalf("alice again: %d %s", code, body)
	}
	if c, _ := g.status(t, id); c != 202 || g.upstream.Load() != 0 {
		t.Fatalf("before the quorum: status %d, upstream called %d times", c, g.upstream.Load())
	}

	code, body = g.vote(t, r, bobTok, aais.Approve)
	receipt, err := aais.Parse(body)
	if code != 200 || err != nil || receipt.Resolution == nil || receipt.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("bob: %d %s", code, body)
	}
	if code, _ := g.awaitFinal(t, id); code != 200 || g.upstream.Load() != 1 {
		t.Fatalf("after the quorum: %d, upstream called %d times", code, g.upstream.Load())
	}
	// Later approvals change nothing and run nothing again.
	if code, _ := g.vote(t, r, carolTok, aais.Approve); code != 409 {
		t.Fatalf("a vote after the resolution: %d", code)
	}
	g.stop()
	stopped = true
	if g.upstream.Load() != 1 {
		t.Fatalf("upstream called %d times", g.upstream.Load())
	}
	var approval map[string]any
	for _, line := range strings.Split(strings.TrimSpace(mustCustos(t, "", "audit", "export", "--log", data)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["kind"] == "approval" {
			approval = rec
		}
	}
	if approval == nil {
		t.Fatal("no approval record in the audit log")
	}
	details, _ := approval["details"].(map[string]any)
	approvers, _ := details["approvers"].([]any)
	var ids []string
	for _, a := range approvers {
		ids = append(ids, a.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "alice,carol,bob" || details["approvals_required"] != float64(2) {
		t.Fatalf("audit approval record: %v", approval)
	}
}

// A denial after a partial approval denies the request, and nothing runs.
func TestServeQuorumDenyAfterPartial(t *testing.T) {
	aliceTok, aliceHash := reviewerToken(t)
	bobTok, bobHash := reviewerToken(t)
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil, quorumYAML+
		"reviewers:\n  - id: alice\n    roles: [finance]\n    token_sha256: "+aliceHash+
		"\n  - id: bob\n    roles: [security]\n    token_sha256: "+bobHash+"\n")
	defer g.stop()
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "100.00"}, nil)
	if code != 202 {
		t.Fatalf("request: %d", code)
	}
	r := g.onlyPending(t)
	if code, body := g.vote(t, r, aliceTok, aais.Approve); code != 202 {
		t.Fatalf("alice: %d %s", code, body)
	}
	code, body := g.vote(t, r, bobTok, aais.Deny)
	receipt, err := aais.Parse(body)
	if code != 200 || err != nil || receipt.Resolution.Outcome != aais.OutcomeDenied {
		t.Fatalf("bob denies: %d %s", code, body)
	}
	if tl, ok := aais.TallyOf(receipt); !ok || len(tl.Approvals) != 1 || len(tl.Denials) != 1 {
		t.Fatalf("the denial's tally: %+v", tl)
	}
	if code, _ := g.awaitFinal(t, hdr.Get("Custos-Exchange")); code == 200 || g.upstream.Load() != 0 {
		t.Fatalf("denied: final %d, upstream called %d times", code, g.upstream.Load())
	}
}

// N+5 reviewers approving at once give one resolution and one execution.
func TestServeQuorumRace(t *testing.T) {
	const n = 2
	yaml := "roles:\n  billing: {capabilities: [\"billing.*\"]}\n" +
		"quorum:\n  - capabilities: [\"billing.*\"]\n    approvals_required: 2\n" +
		"reviewers:\n"
	tokens := make([]string, n+5)
	for i := range tokens {
		tok, hash := reviewerToken(t)
		tokens[i] = tok
		yaml += "  - id: reviewer-" + string(rune('a'+i)) + "\n    roles: [billing]\n    token_sha256: " + hash + "\n"
	}
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil, yaml)
	defer g.stop()
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "100.00"}, nil)
	if code != 202 {
		t.Fatalf("request: %d", code)
	}
	r := g.onlyPending(t)
	codes := make([]int, len(tokens))
	done := make(chan struct{})
	for i, tok := range tokens {
		go func() {
			defer func() { done <- struct{}{} }()
			codes[i], _ = g.vote(t, r, tok, aais.Approve)
		}()
	}
	for range tokens {
		<-done
	}
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[200] != 1 || count[202] != n-1 || count[409] != len(tokens)-n {
		t.Fatalf("answers %v: want one 200, %d 202 and %d 409", count, n-1, len(tokens)-n)
	}
	if code, _ := g.awaitFinal(t, hdr.Get("Custos-Exchange")); code != 200 || g.upstream.Load() != 1 {
		t.Fatalf("final %d, upstream called %d times", code, g.upstream.Load())
	}
}
