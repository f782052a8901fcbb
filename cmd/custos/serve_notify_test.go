package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/notify"
)

// custos serve announces a request that waits for a human on Slack (a
// loopback fake of the Web API), takes the reviewer's click back through
// the signed interaction endpoint, runs the call and updates the message.
func TestServeNotifiesSlackAndTakesTheDecision(t *testing.T) {
	var mu sync.Mutex
	calls := map[string][]string{}
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		method := strings.TrimPrefix(r.URL.Path, "/api/")
		mu.Lock()
		calls[method] = append(calls[method], string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer xoxb-serve-test" {
			io.WriteString(w, `{"ok":false,"error":"invalid_auth"}`)
			return
		}
		io.WriteString(w, `{"ok":true,"channel":"C0PS","ts":"1700000000.000100"}`)
	}))
	defer slack.Close()
	of := func(m string) []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), calls[m]...) }

	code, out, _ := custos(t, "", "serve", "token")
	hash := regexp.MustCompile(`token_sha256:\s+(sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || hash == nil {
		t.Fatalf("serve token: %d %s", code, out)
	}
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil,
		"reviewers:\n  - id: alice\n    token_sha256: "+hash[1]+"\n"+
			"notifications:\n  slack:\n    - name: ops\n      channel: C0PS\n      token: xoxb-serve-test\n      signing_secret: serve-signing-secret\n"+
			"      api: "+slack.URL+"/api/\n      users: {UALICE: alice}\n")
	defer g.stop()
	_, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "1.00"}, nil)

	deadline := time.Now().Add(10 * time.Second)
	for len(of("chat.postMessage")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	posts := of("chat.postMessage")
	if len(posts) != 1 {
		t.Fatalf("chat.postMessage calls: %v\n%s", posts, g.log.String())
	}
	post := func(secret string) int { return slackApproveClick(t, g, posts[0], "UALICE", secret) }
	if code := post("not-the-signing-secret"); code != 401 {
		t.Fatalf("a forged click: %d", code)
	}
	if code := post("serve-signing-secret"); code != 200 {
		t.Fatalf("alice's click: %d\n%s", code, g.log.String())
	}
	if code, reply := g.awaitFinal(t, hdr.Get("Custos-Exchange")); code != 200 || reply["intent"] != "response" {
		t.Fatalf("after the Slack approval: %d %v", code, reply)
	}
	for len(of("chat.update")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if ups := of("chat.update"); len(ups) != 1 || !strings.Contains(ups[0], "(via slack/ops)") {
		t.Fatalf("chat.update: %v", ups)
	}
}

// slackApproveClick clicks Approve on the Slack message posted (the
// chat.postMessage body) as the Slack user, posting the interaction to
// the ops channel's endpoint signed with secret; it returns the status.
func slackApproveClick(t *testing.T, g *gatewayUnderTest, posted, user, secret string) int {
	t.Helper()
	value := regexp.MustCompile(`"action_id":"custos_approve"[^}]*"value":"([^"]+)"`).FindStringSubmatch(posted)
	if value == nil {
		value = regexp.MustCompile(`"value":"(apr_[^"]+)"`).FindStringSubmatch(posted)
	}
	if value == nil {
		t.Fatalf("no approve button: %s", posted)
	}
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]any{"id": user},
		"channel": map[string]any{"id": "C0PS"}, "actions": []map[string]any{{"action_id": "custos_approve", "value": value[1]}}})
	body := "payload=" + url.QueryEscape(string(payload))
	req, _ := http.NewRequestWithContext(t.Context(), "POST", g.url+"/notify/slack/ops/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set(notify.HeaderSlackTimestamp, ts)
	req.Header.Set(notify.HeaderSlackSignature, notify.SlackSignature(secret, ts, []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
