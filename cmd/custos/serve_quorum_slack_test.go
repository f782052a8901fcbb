package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/notify"
)

// The reviewers issue's whole story: a call under a two-person rule is
// announced on a webhook (signed the Standard Webhooks way) and on a
// (fake) Slack; one approval comes back from a Slack click, signed with
// the signing secret, the other from the inbox API; the call runs once,
// and the audit names both approvers.
func TestServeQuorumFromSlackAndTheInbox(t *testing.T) {
	secret := notify.WebhookSecret(bytes.Repeat([]byte{7}, 32))
	var mu sync.Mutex
	var hooks [][]byte
	var hookErr error
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, err := notify.VerifyWebhook(r.Header, b, time.Now(), secret)
		mu.Lock()
		hooks = append(hooks, b)
		if err != nil {
			hookErr = err
		}
		mu.Unlock()
	}))
	defer hook.Close()
	slackCalls := map[string][]string{}
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		slackCalls[strings.TrimPrefix(r.URL.Path, "/api/")] = append(slackCalls[strings.TrimPrefix(r.URL.Path, "/api/")], string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"channel":"C0PS","ts":"1700000000.000100"}`)
	}))
	defer slack.Close()
	slackOf := func(m string) []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), slackCalls[m]...) }

	_, aliceHash := reviewerToken(t)
	bobTok, bobHash := reviewerToken(t)
	data := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, data, nil, quorumYAML+
		"reviewers:\n  - id: alice\n    roles: [finance]\n    token_sha256: "+aliceHash+
		"\n  - id: bob\n    roles: [security]\n    token_sha256: "+bobHash+"\n"+
		"notifications:\n  webhooks:\n    - name: siem\n      url: "+hook.URL+"/custos\n      secret: "+secret.String()+"\n"+
		"  slack:\n    - name: ops\n      channel: C0PS\n      token: xoxb-quorum\n      signing_secret: quorum-signing-secret\n"+
		"      api: "+slack.URL+"/api/\n      users: {UALICE: alice}\n")
	stopped := false
	defer func() {
		if !stopped {
			g.stop()
		}
	}()
	code, reply, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "250.00"}, nil)
	if code != 202 || reply["intent"] != "pending_approval" {
		t.Fatalf("request: %d %v", code, reply)
	}
	id := hdr.Get("Custos-Exchange")
	r := g.onlyPending(t)

	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(hooks)
		mu.Unlock()
		if n > 0 && len(slackOf("chat.postMessage")) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	if len(hooks) == 0 || hookErr != nil || !bytes.Contains(hooks[0], []byte(r.ID)) {
		mu.Unlock()
		t.Fatalf("webhook deliveries %d (signature: %v)\n%s", len(hooks), hookErr, g.log.String())
	}
	mu.Unlock()
	posts := slackOf("chat.postMessage")
	if len(posts) != 1 {
		t.Fatalf("chat.postMessage calls: %v\n%s", posts, g.log.String())
	}
	// Alice approves from Slack: counted, not yet enough.
	if code := slackApproveClick(t, g, posts[0], "UALICE", "quorum-signing-secret"); code != 200 {
		t.Fatalf("alice's click: %d\n%s", code, g.log.String())
	}
	if tl := g.inboxTally(t, bobTok, r.ID); len(tl.Approvals) != 1 || tl.Approvals[0].Actor.ID != "alice" {
		t.Fatalf("after the Slack approval the inbox shows %+v", tl)
	}
	if c, _ := g.status(t, id); c != 202 || g.upstream.Load() != 0 {
		t.Fatalf("one approval of two ran the call: status %d, upstream %d", c, g.upstream.Load())
	}

	// Bob approves from the inbox: the quorum is reached, the call runs.
	code, rb := g.vote(t, r, bobTok, aais.Approve)
	if m, err := aais.Parse(rb); code != 200 || err != nil || m.Resolution == nil || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("bob: %d %s", code, rb)
	}
	if code, _ := g.awaitFinal(t, id); code != 200 || g.upstream.Load() != 1 {
		t.Fatalf("after the quorum: %d, upstream called %d times", code, g.upstream.Load())
	}
	g.stop()
	stopped = true
	if g.upstream.Load() != 1 {
		t.Fatalf("upstream called %d times", g.upstream.Load())
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(mustCustos(t, "", "audit", "export", "--log", data)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["kind"] != "approval" {
			continue
		}
		details, _ := rec["details"].(map[string]any)
		approvers, _ := details["approvers"].([]any)
		for _, a := range approvers {
			ids = append(ids, a.(map[string]any)["id"].(string))
		}
	}
	if strings.Join(ids, ",") != "alice,bob" {
		t.Fatalf("the audit's approvers: %v", ids)
	}
}
