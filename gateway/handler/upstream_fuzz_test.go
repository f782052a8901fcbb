package handler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/jcs"
)

// upstreamMax is the response cap the fuzzed handlers are configured with.
const upstreamMax = 16 << 10

// upstream is a fake server whose answers a fuzz iteration sets. Iterations
// of one worker run one after the other, so a mutex is enough.
type upstream struct {
	mu          sync.Mutex
	status      int
	contentType string
	headers     http.Header
	body        []byte
}

func (u *upstream) set(status int, contentType string, headers http.Header, body []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.status, u.contentType, u.headers, u.body = status, contentType, headers, body
}

func (u *upstream) answer(w http.ResponseWriter, id json.RawMessage) {
	u.mu.Lock()
	status, ct, hdr, body := u.status, u.contentType, u.headers, u.body
	u.mu.Unlock()
	for k, vs := range hdr {
		w.Header()[k] = vs
	}
	if ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if id != nil {
		// "$ID" stands for the id of the request being answered, so
		// that the fuzzer can write responses the client correlates.
		body = bytes.ReplaceAll(body, []byte(`"$ID"`), id)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// rpcID reads a JSON-RPC request's method and id.
func rpcID(r *http.Request) (string, json.RawMessage) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(b, &req)
	return req.Method, req.ID
}

// checkUpstreamOutcome holds for every answer of every upstream: a result
// is one strict JSON object within the cap; a failure is an ASC error (never
// INTERNAL_ERROR nor success) with a retry contract that says what is known
// about side effects and waits at most a day, and a developer message that
// is one bounded line: whatever the upstream sent is sanitised before it is
// quoted.
func checkUpstreamOutcome(t *testing.T, res handler.Result, err error) {
	t.Helper()
	if err == nil {
		v, derr := (&jcs.Options{MaxSize: upstreamMax}).Decode(res.Data)
		if _, ok := v.(map[string]any); derr != nil || !ok || len(res.Data) > upstreamMax {
			t.Fatalf("result %q is not one strict JSON object within %d bytes (%v)", res.Data, upstreamMax, derr)
		}
		return
	}
	var ae *asc.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%v is not an ASC error", err)
	}
	env := ae.Envelope
	if c := env.Status.Code; c == asc.InternalError || c == asc.Success {
		t.Fatalf("code %d for an upstream answer: %v", c, err)
	}
	if r := env.Retry; r == nil || r.SideEffectState == "" || r.AfterMS < 0 || r.AfterMS > (24*time.Hour).Milliseconds() {
		t.Fatalf("retry contract %+v: %v", r, err)
	}
	if env.Message == nil {
		t.Fatalf("no message: %v", err)
	}
	dev := env.Message.Developer
	if !utf8.ValidString(dev) || len(dev) > 2048 {
		t.Fatalf("developer message of %d bytes: %q", len(dev), dev)
	}
	for _, r := range dev {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			t.Fatalf("developer message quotes the upstream unsanitised (%U): %q", r, dev)
		}
	}
}

// printable reports whether an HTTP/1.1 server can send s as a header value
// that a client reads back.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(s) == s
}

// FuzzHTTPUpstream: the http handler's mapping of whatever the upstream
// answers (status, content type, Retry-After, Location, body). Besides
// checkUpstreamOutcome: only a 2xx answer is a success, a 2xx JSON object
// is the result exactly (compacted), and an error answer's body is never
// quoted.
func FuzzHTTPUpstream(f *testing.F) {
	const secret = "UPSTREAM-INTERNALS"
	u := &upstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.answer(w, nil)
	}))
	f.Cleanup(srv.Close)
	h, err := handler.NewHTTP(handler.HTTPConfig{URL: srv.URL + "/hook", Timeout: 2 * time.Second, MaxResponseBytes: upstreamMax})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []struct {
		status      uint16
		ct, ra, loc string
		body        string
	}{
		{0, "application/json", "", "", `{"ok":true,"n":[1,2.50,{"x":null}]}`},
		{0, "application/problem+json; charset=utf-8", "", "", ` { "a" : "\u00e9" } `},
		{0, "", "", "", `{"a":1,"a":2}`},
		{0, "text/html", "", "", `<html>`},
		{4, "application/json", "", "", ``},
		{0, "application/json", "", "", `[1]`},
		{0, "application/json", "", "", `{"n":1e400}`},
		{101, "", "", "https://evil.example/\x1b[2J\u202eexe.txt", ``},
		{229, "", "120", "", `{"error":"slow down"}`},
		{229, "", "Wed, 21 Oct 2099 07:28:00 GMT", "", ``},
		{303, "", "99999999999999999999", "", ``},
		{304, "", "", "", ``},
		{300, "application/json", "", "", `{"error":"boom"}`},
	} {
		f.Add(s.status, s.ct, s.ra, s.loc, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, code uint16, ct, retryAfter, location string, body []byte) {
		status := 200 + int(code)%400
		hdr := http.Header{}
		if retryAfter != "" {
			hdr.Set("Retry-After", retryAfter)
		}
		if location != "" {
			hdr.Set("Location", location)
		}
		sent := body
		if status >= 300 {
			sent = append(bytes.Clone(body), secret...)
		}
		u.set(status, ct, hdr, sent)
		c := handler.Call{Capability: "acme.hook.call", PayloadType: "com.acme/hook", Args: json.RawMessage(`{"a":1}`), MessageID: "m-1"}
		res, err := h.Execute(t.Context(), c)
		checkUpstreamOutcome(t, res, err)
		if err != nil {
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error quotes the upstream's body: %v", err)
			}
			v, derr := jcs.Decode(body)
			_, obj := v.(map[string]any)
			if status < 300 && status != http.StatusNoContent && printable(retryAfter) && printable(location) && status != http.StatusResetContent && ct == "application/json" && derr == nil && obj && len(body) < upstreamMax {
				t.Fatalf("%d %s %s refused: %v", status, ct, body, err)
			}
			return
		}
		if status >= 300 {
			t.Fatalf("status %d is a success: %s", status, res.Data)
		}
		if res.PayloadType != c.PayloadType {
			t.Fatalf("payload type %q", res.PayloadType)
		}
		if status != http.StatusNoContent {
			var want bytes.Buffer
			if err := json.Compact(&want, body); err != nil || !bytes.Equal(want.Bytes(), res.Data) {
				t.Fatalf("result %s for the answer %s (%v)", res.Data, body, err)
			}
		}
	})
}

// FuzzMCPUpstream: the mcp handler over Streamable HTTP, against a server
// that completes the handshake and then answers tools/call with the fuzz
// input (as JSON or as an event stream). Besides checkUpstreamOutcome: a
// success is a CallToolResult that is not an error.
func FuzzMCPUpstream(f *testing.F) {
	u := &upstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		method, id := rpcID(r)
		w.Header().Set("Mcp-Session-Id", "fuzz-session")
		switch {
		case method == "tools/call":
			u.answer(w, id)
		case id == nil:
			w.WriteHeader(http.StatusAccepted)
		case method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"capabilities":{"tools":{}},"protocolVersion":"2025-11-25","serverInfo":{"name":"fuzz","version":"1"}}}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32601,"message":"method not found"}}`))
		}
	}))
	f.Cleanup(srv.Close)
	for _, s := range []struct {
		sse  bool
		body string
	}{
		{false, `{"jsonrpc":"2.0","id":"$ID","result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`},
		{true, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"$ID\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"3\"}]}}\n\n"},
		{false, `{"jsonrpc":"2.0","id":"$ID","result":{"content":[{"type":"text","text":"The authenticated principal is not authorised for the operation."},{"type":"resource","resource":{"uri":"urn:agent-status:envelope:sha256:63bef7eb1b551c8797c5bc6617db1183f079231c02e0b8d92ea131c22c1cf7b3","mimeType":"application/agent-status+json","text":"{\"spec_version\":\"0.1.0\",\"status\":{\"code\":4002,\"name\":\"PERMISSION_DENIED\",\"kind\":\"status\",\"scope\":\"tool_call\",\"terminal\":true,\"severity\":\"error\"},\"message\":{\"user\":\"no\",\"developer\":\"no access\"},\"retry\":{\"retryable\":true,\"safe\":true,\"after_ms\":-5,\"side_effect_state\":\"none\"},\"occurred_at\":\"2026-12-01T20:43:56.536Z\"}"}}],"isError":true}}`},
		{false, `{"jsonrpc":"2.0","id":"$ID","result":{"content":[{"type":"text","text":"boom: the \u001b[31mdisk\u202e is full\n"}],"isError":true}}`},
		{false, `{"jsonrpc":"2.0","id":"$ID","error":{"code":-32000,"message":"tool \u001b[2J exploded","data":{"x":1}}}`},
		{false, `{"jsonrpc":"2.0","id":"$ID","error":{"code":-32602,"message":"unknown tool"}}`},
		{false, `{"jsonrpc":"2.0","id":"$ID","result":{"content":"not a list"}}`},
		{false, `{"jsonrpc":"2.0","id":"$ID","result":{"content":[{"type":"image","data":"!!","mimeType":"image/png"}]}}`},
		{false, `{"jsonrpc":"2.0","id":"$ID","result":{"content":[],"structuredContent":{"n":1e400}}}`},
		{true, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"$ID\",\"result\":{\"content\":[]}}\n\n"},
		{false, `{"jsonrpc":"2.0","id":999,"result":{"content":[]}}`},
	} {
		f.Add(s.sse, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, sse bool, body []byte) {
		ct := "application/json"
		if sse {
			ct = "text/event-stream"
		}
		u.set(http.StatusOK, ct, nil, body)
		h, err := handler.NewMCP(handler.MCPConfig{URL: srv.URL, Timeout: 300 * time.Millisecond, MaxResponseBytes: upstreamMax})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		c := toolCall("add", `{"a":1,"b":2}`)
		res, err := h.Execute(t.Context(), c)
		checkUpstreamOutcome(t, res, err)
		if err == nil {
			var r struct {
				IsError bool `json:"isError"`
			}
			if json.Unmarshal(res.Data, &r) != nil || r.IsError || res.PayloadType != c.PayloadType {
				t.Fatalf("success with %s (%s)", res.Data, res.PayloadType)
			}
		}
	})
}

// FuzzA2AUpstream: the a2a handler against an agent that answers
// SendMessage (and GetTask, when polled) with the fuzz input. Besides
// checkUpstreamOutcome: a success is a completed task or a message.
func FuzzA2AUpstream(f *testing.F) {
	u := &upstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, id := rpcID(r)
		u.answer(w, id)
	}))
	f.Cleanup(srv.Close)
	h, err := handler.NewA2A(handler.A2AConfig{URL: srv.URL, Timeout: 300 * time.Millisecond, Poll: 50 * time.Millisecond, MaxResponseBytes: upstreamMax})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"$ID","result":{"task":{"id":"t-1","contextId":"c-1","status":{"message":{"messageId":"s-1","parts":[{"text":"because \u001b[1mdone"}],"role":"ROLE_AGENT"},"state":"TASK_STATE_COMPLETED","timestamp":"2026-12-01T20:43:56.52924235Z"}}}}`,
		`{"jsonrpc":"2.0","id":"$ID","result":{"message":{"messageId":"m-2","parts":[{"text":"hello back"}],"role":"ROLE_AGENT"}}}`,
		`{"jsonrpc":"2.0","id":"$ID","result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_FAILED","message":{"messageId":"s","role":"ROLE_AGENT","parts":[{"text":"disk\nfull\u202e"}]}}}}}`,
		`{"jsonrpc":"2.0","id":"$ID","result":{"task":{"id":"t-\u001b[2J\n1","contextId":"c-1","status":{"state":"TASK_STATE_REJECTED"}}}}`,
		`{"jsonrpc":"2.0","id":"$ID","result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}}`,
		`{"jsonrpc":"2.0","id":"$ID","result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_BOGUS"}}}}`,
		`{"jsonrpc":"2.0","id":"$ID","result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_INPUT_REQUIRED"}},"message":{}}}`,
		`{"jsonrpc":"2.0","id":"$ID","error":{"code":-32001,"message":"task \u001b[31mnot found"}}`,
		`{"jsonrpc":"2.0","id":"$ID","error":{"code":-32603,"message":"internal","data":[1]}}`,
		`{"jsonrpc":"2.0","id":"$ID","result":null}`,
		`{"jsonrpc":"2.0","id":"other","result":{"message":{"messageId":"m","parts":[],"role":"ROLE_AGENT"}}}`,
	} {
		f.Add(uint16(0), []byte(s))
	}
	f.Add(uint16(300), []byte(`{"error":"x"}`))
	f.Fuzz(func(t *testing.T, code uint16, body []byte) {
		u.set(200+int(code)%400, "application/json", nil, body)
		c := a2aCall("hello", "")
		res, err := h.Execute(t.Context(), c)
		checkUpstreamOutcome(t, res, err)
		if err == nil {
			var r struct {
				Task *struct {
					Status struct{ State string } `json:"status"`
				} `json:"task"`
				Message json.RawMessage `json:"message"`
			}
			if json.Unmarshal(res.Data, &r) != nil || (r.Message == nil) == (r.Task == nil) ||
				(r.Task != nil && r.Task.Status.State != "TASK_STATE_COMPLETED") {
				t.Fatalf("success with %s", res.Data)
			}
		}
	})
}
