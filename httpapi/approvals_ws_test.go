package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
)

func TestApprovalsWebSocket(t *testing.T) {
	e := newEnv(t)
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/approvals/ws"
	ctx := t.Context()
	hdr := http.Header{"Authorization": {"Bearer " + token}}

	if _, resp, err := websocket.Dial(ctx, url, nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("unauthenticated dial: %v", err)
	}
	bad := hdr.Clone()
	bad.Set("Origin", "https://evil.example")
	if _, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: bad}); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("foreign origin: %v", err)
	}

	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	read := func() *aais.Message {
		t.Helper()
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, err := aais.Parse(b)
		if err != nil {
			t.Fatalf("frame %s: %v", b, err)
		}
		return m
	}
	if m := read(); m.Type != aais.TypeSnapshot || m.Snapshot.AsOfSequence != 0 {
		t.Fatalf("first frame: %s", m.Type)
	}
	r := aaistest.Request(t, e.clock.Now(), "1")
	if _, _, err := e.auth.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if m := read(); m.Type != aais.TypeRequested || m.Request.ID != r.ID {
		t.Fatalf("second frame: %s", m.Type)
	}
	d, body := e.decisionBody(t, r, aais.Approve)
	if err := c.Write(ctx, websocket.MessageText, []byte(body)); err != nil {
		t.Fatal(err)
	}
	// The receipt answering the decision and the resolved event, in
	// either order; both are the same message.
	var got []*aais.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		got = append(got, read())
	}
	for _, m := range got {
		if m.Type != aais.TypeResolved || m.Resolution.DecisionID != d.ID || m.Resolution.Outcome != aais.OutcomeApproved {
			t.Fatalf("after the decision: %+v", m.Resolution)
		}
	}
	// A bad frame gets a problem document, and the connection stays.
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"nope":1}`)); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.Read(ctx)
	if err != nil || !strings.Contains(string(b), `"code":4000`) {
		t.Fatalf("bad frame answer: %s %v", b, err)
	}
}

// A browser's WebSocket is authenticated by the session cookie; it needs an
// allowed Origin and the session's CSRF token (the csrf parameter), and
// its decisions pass the same policy as HTTP ones.
func TestApprovalsWebSocketSession(t *testing.T) {
	e := newSessionEnv(t, false)
	b := e.browser(t)
	b.loginPassword(t, "dave") // ops: shell.* only
	u, _ := url.Parse(e.srv.URL)
	cookies := b.c.Jar.Cookies(u)
	hdr := http.Header{"Origin": {e.srv.URL}}
	for _, c := range cookies {
		hdr.Add("Cookie", c.Name+"="+c.Value)
	}
	base := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/approvals/ws"
	ctx := t.Context()
	for name, h := range map[string]http.Header{"no origin": {"Cookie": hdr["Cookie"]}, "foreign origin": {"Cookie": hdr["Cookie"], "Origin": {"https://evil.example"}}} {
		if _, resp, err := websocket.Dial(ctx, base+"?csrf="+url.QueryEscape(b.csrf), &websocket.DialOptions{HTTPHeader: h}); err == nil || resp == nil || resp.StatusCode != 403 {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, resp, err := websocket.Dial(ctx, base, &websocket.DialOptions{HTTPHeader: hdr}); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("without the CSRF token: %v", err)
	}
	c, _, err := websocket.Dial(ctx, base+"?csrf="+url.QueryEscape(b.csrf), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if _, first, err := c.Read(ctx); err != nil || !strings.Contains(string(first), `"approval.snapshot"`) {
		t.Fatalf("first frame: %s %v", first, err)
	}
	r := e.gwRequest(t, "ws", "billing.invoice.create", "MIFID-II", "agent:acme.advisor")
	if _, b, err := c.Read(ctx); err != nil || !strings.Contains(string(b), r.ID) {
		t.Fatalf("requested frame: %s %v", b, err)
	}
	_, dec := decision(t, r, aais.Approve, aais.ScopeOnce, "x")
	if err := c.Write(ctx, websocket.MessageText, []byte(dec)); err != nil {
		t.Fatal(err)
	}
	_, out, err := c.Read(ctx)
	if err != nil || !strings.Contains(string(out), `"code":4002`) || !e.pending(t, r.ID) {
		t.Fatalf("a decision dave's roles do not cover: %s %v", out, err)
	}
	// Signing out closes the connection.
	if resp, out := b.do(t, "POST", "/logout", "", nil); resp.StatusCode != 204 {
		t.Fatalf("logout: %d %s", resp.StatusCode, out)
	}
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Fatalf("closed with %v", err)
			}
			break
		}
	}
}
