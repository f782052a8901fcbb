package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
)

// mcpHelperEnv makes the test binary an MCP server over stdio (init runs
// before TestMain, which belongs to exec_test.go).
const mcpHelperEnv = "CUSTOS_MCP_HELPER"

func init() {
	if os.Getenv(mcpHelperEnv) == "stdio" {
		err := newMCPServer(nil).Run(context.Background(), &mcp.StdioTransport{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "mcp helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

var objectSchema = map[string]any{"type": "object"}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// newMCPServer builds the test MCP server. runs, when set, counts every
// tool execution.
func newMCPServer(runs *atomic.Int64) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "custos-test", Version: "1"}, nil)
	count := func() {
		if runs != nil {
			runs.Add(1)
		}
	}
	s.AddTool(&mcp.Tool{Name: "add", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		count()
		var in struct{ A, B float64 }
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		r := textResult(fmt.Sprint(in.A + in.B))
		r.StructuredContent = map[string]any{"sum": in.A + in.B}
		return r, nil
	})
	s.AddTool(&mcp.Tool{Name: "explain", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		count()
		var in struct{ Explanation any }
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		r := textResult("explained")
		r.Meta = mcp.Meta{handler.ExplanationMeta: in.Explanation}
		return r, nil
	})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		count()
		r := textResult("boom: the \x1b[31mdisk is full")
		r.IsError = true
		return r, nil
	})
	s.AddTool(&mcp.Tool{Name: "deny", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		count()
		env := asc.Errorf(asc.PermissionDenied, asc.ScopeToolCall, "no access").Envelope
		tr, err := asc.ToMCPToolResult(&env)
		if err != nil {
			return nil, err
		}
		r := &mcp.CallToolResult{IsError: tr.IsError}
		for _, c := range tr.Content {
			if c.Resource != nil {
				r.Content = append(r.Content, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
					URI: c.Resource.URI, MIMEType: c.Resource.MIMEType, Text: c.Resource.Text}})
			} else {
				r.Content = append(r.Content, &mcp.TextContent{Text: c.Text})
			}
		}
		return r, nil
	})
	s.AddTool(&mcp.Tool{Name: "pid", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		count()
		return textResult(fmt.Sprint(os.Getpid())), nil
	})
	s.AddTool(&mcp.Tool{Name: "die", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		count()
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "sleep", InputSchema: objectSchema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		count()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return textResult("late"), nil
	})
	return s
}

// inMemoryMCP returns a handler connected to an in-process server over the
// SDK's in-memory transport; connects counts the connections.
func inMemoryMCP(t *testing.T, mod func(*handler.MCPConfig)) (*handler.MCP, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var runs, connects atomic.Int64
	srv := newMCPServer(&runs)
	cfg := handler.MCPConfig{
		Resource: "inmemory:custos-test",
		Transport: func() (mcp.Transport, error) {
			connects.Add(1)
			ct, st := mcp.NewInMemoryTransports()
			if _, err := srv.Connect(context.Background(), st, nil); err != nil {
				return nil, err
			}
			return ct, nil
		},
		Timeout: 5 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	h, err := handler.NewMCP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, &runs, &connects
}

func toolCall(name, args string) handler.Call {
	return handler.Call{
		Capability:  "acme.crm.lookup",
		PayloadType: handler.PayloadTypeMCPToolCall,
		Args:        json.RawMessage(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `},"id":7}`),
		MessageID:   "msg-1",
	}
}

func wantCode(t *testing.T, err error, code asc.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %d", code)
	}
	if got := asc.CodeOf(err); got != code {
		t.Fatalf("code %d, want %d: %v", got, code, err)
	}
}

func TestMCPToolCall(t *testing.T) {
	h, runs, _ := inMemoryMCP(t, nil)
	c := toolCall("add", `{"a": 2, "b": 3.5}`)
	d, err := h.Describe(c)
	if err != nil {
		t.Fatal(err)
	}
	action, digest, err := handler.Action(c, d)
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Kind      string         `json:"kind"`
		Name      string         `json:"name"`
		Summary   string         `json:"summary"`
		Resource  string         `json:"resource"`
		Arguments map[string]any `json:"arguments"`
		Effects   []string       `json:"effects"`
	}
	if err := json.Unmarshal(action, &a); err != nil {
		t.Fatal(err)
	}
	params, _ := a.Arguments["params"].(map[string]any)
	if a.Kind != "tool.call" || a.Name != "acme.crm.lookup" || a.Resource != "inmemory:custos-test" ||
		params["name"] != "add" || !strings.Contains(a.Summary, `"add"`) || !strings.Contains(a.Effects[0], `"add"`) {
		t.Fatalf("action %s", action)
	}
	if args, _ := params["arguments"].(map[string]any); args["b"] != 3.5 {
		t.Fatalf("the action lacks the tool's arguments: %s", action)
	}
	if d.AAISRisk().Level != aais.RiskMedium {
		t.Errorf("risk %s", d.Risk)
	}
	res, err := handler.Dispatch(context.Background(), h, c, digest)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured map[string]float64 `json:"structuredContent"`
	}
	if err := json.Unmarshal(res.Data, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Content) != 1 || out.Content[0].Text != "5.5" || out.Structured["sum"] != 5.5 {
		t.Errorf("result %s", res.Data)
	}
	if res.PayloadType != handler.PayloadTypeMCPToolCall || runs.Load() != 1 {
		t.Errorf("payload type %s, runs %d", res.PayloadType, runs.Load())
	}
}

func TestMCPDigestCoversToolAndArguments(t *testing.T) {
	h, runs, _ := inMemoryMCP(t, nil)
	approved := approve(t, h, toolCall("add", `{"a":1,"b":2}`))
	for _, c := range []handler.Call{
		toolCall("add", `{"a":1,"b":3}`),
		toolCall("pid", `{"a":1,"b":2}`),
		toolCall("add", `{"a":1,"b":2,"c":0}`),
	} {
		if approve(t, h, c) == approved {
			t.Errorf("%s has the approved digest", c.Args)
		}
		_, err := handler.Dispatch(context.Background(), h, c, approved)
		if !errors.Is(err, handler.ErrStale) {
			t.Errorf("%s ran under another approval: %v", c.Args, err)
		}
	}
	if runs.Load() != 0 {
		t.Errorf("%d tool runs", runs.Load())
	}
	// Whitespace is not significant.
	if approve(t, h, toolCall("add", `{ "a" : 1, "b" : 2 }`)) != approved {
		t.Error("whitespace changed the digest")
	}
}

func TestMCPToolErrors(t *testing.T) {
	h, _, _ := inMemoryMCP(t, nil)
	ctx := context.Background()
	_, err := h.Execute(ctx, toolCall("fail", `{}`))
	wantCode(t, err, asc.ToolExecutionFailed)
	if env := asc.FromError(err); env.Retry == nil || env.Retry.SideEffectState != asc.SideEffectPossible {
		t.Errorf("retry %+v", env.Retry)
	}
	if !strings.Contains(err.Error(), "disk is full") || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("message %q", err)
	}
	// A tool that embeds an ASC status (ASC MCP binding) reports it.
	_, err = h.Execute(ctx, toolCall("deny", `{}`))
	wantCode(t, err, asc.PermissionDenied)
	// An unknown tool is NOT_FOUND.
	_, err = h.Execute(ctx, toolCall("nosuchtool", `{}`))
	wantCode(t, err, asc.NotFound)
	// The session survived all of these.
	if _, err := h.Execute(ctx, toolCall("add", `{"a":1,"b":1}`)); err != nil {
		t.Fatal(err)
	}
}

// wantUnknown checks for 6005 RESULT_STATE_UNKNOWN with side effects
// unknown and a contract that allows no blind retry.
func wantUnknown(t *testing.T, err error) {
	t.Helper()
	wantCode(t, err, asc.ResultStateUnknown)
	env := asc.FromError(err)
	if env.Retry == nil || env.Retry.SideEffectState != asc.SideEffectUnknown || env.Retry.Retryable || env.Retry.Safe {
		t.Errorf("retry %+v", env.Retry)
	}
	if d := asc.DecideRetry(&env, asc.RetryContext{Now: time.Now(), Idempotent: true}); d.Outcome != asc.ReconcileFirst {
		t.Errorf("DecideRetry: %v", d.Outcome)
	}
}

// A tools/call the server received and did not answer in time may have
// run: 6005, whether the handler's timeout or the caller ends the wait.
func TestMCPTimeout(t *testing.T) {
	h, _, _ := inMemoryMCP(t, func(c *handler.MCPConfig) { c.Timeout = 200 * time.Millisecond })
	_, err := h.Execute(context.Background(), toolCall("sleep", `{}`))
	wantUnknown(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err = h.Execute(ctx, toolCall("sleep", `{}`))
	wantUnknown(t, err)
	// The session is still usable.
	if _, err := h.Execute(context.Background(), toolCall("add", `{"a":1,"b":1}`)); err != nil {
		t.Fatal(err)
	}
}

// The same over stdio, with a real server process that hangs in the tool,
// and over Streamable HTTP.
func TestMCPTimeoutStdioAndHTTP(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	stdio, err := handler.NewMCP(handler.MCPConfig{
		Command: []string{self, "-test.run=^$"},
		Dir:     t.TempDir(),
		Env:     []string{mcpHelperEnv + "=stdio", "GORACE=atexit_sleep_ms=0"},
		Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdio.Close() })
	// Start the server first, so that the timeout below is the tool's.
	if _, err := stdio.Execute(context.Background(), toolCall("add", `{"a":1,"b":1}`)); err != nil {
		t.Fatal(err)
	}
	_, err = stdio.Execute(context.Background(), toolCall("sleep", `{}`))
	wantUnknown(t, err)

	srv := newMCPServer(nil)
	release := make(chan struct{})
	srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-release
		return textResult("late"), nil
	})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(mh)
	t.Cleanup(ts.Close)
	remote, err := handler.NewMCP(handler.MCPConfig{URL: ts.URL + "/mcp", Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Close() })
	if _, err := remote.Execute(context.Background(), toolCall("add", `{"a":1,"b":1}`)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release) }) // first: lets the server and the session close
	_, err = remote.Execute(context.Background(), toolCall("hang", `{}`))
	wantUnknown(t, err)
}

// A server that cannot be reached in time never got the call: TIMEOUT,
// side effects none, safe to retry.
func TestMCPTimeoutBeforeSending(t *testing.T) {
	hang := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}}
	h, err := handler.NewMCP(handler.MCPConfig{URL: "http://mcp.invalid/mcp", Timeout: 100 * time.Millisecond, Client: hang})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Execute(context.Background(), toolCall("add", `{}`))
	wantCode(t, err, asc.Timeout)
	if env := asc.FromError(err); env.Retry == nil || env.Retry.SideEffectState != asc.SideEffectNone || !env.Retry.Safe {
		t.Errorf("retry %+v", env.Retry)
	}
}

func TestMCPToolsAllowlist(t *testing.T) {
	h, runs, connects := inMemoryMCP(t, func(c *handler.MCPConfig) { c.Tools = []string{"add"} })
	c := toolCall("pid", `{}`)
	_, err := h.Describe(c)
	wantCode(t, err, asc.PermissionDenied)
	_, err = h.Execute(context.Background(), c)
	wantCode(t, err, asc.PermissionDenied)
	if runs.Load() != 0 || connects.Load() != 0 {
		t.Errorf("a refused tool reached the server: %d runs, %d connections", runs.Load(), connects.Load())
	}
	if _, err := h.Execute(context.Background(), toolCall("add", `{"a":1,"b":1}`)); err != nil {
		t.Fatal(err)
	}
}

func TestMCPInvalidCalls(t *testing.T) {
	h, _, connects := inMemoryMCP(t, nil)
	for _, args := range []string{
		`{"jsonrpc":"2.0","method":"tools/list","params":{},"id":1}`,
		`{"jsonrpc":"2.0","method":"resources/read","params":{"uri":"file:///etc/passwd"},"id":1}`,
		`{"jsonrpc":"1.0","method":"tools/call","params":{"name":"add"},"id":1}`,
		`{"method":"tools/call","params":{"name":"add"},"id":1}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add"}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add"},"id":null}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add"},"id":1.5}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":[],"id":1}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{},"id":1}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":""},"id":1}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a b"},"id":1}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":7},"id":1}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","arguments":[1]},"id":1}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","extra":1},"id":1}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add"},"id":1,"x":1}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","name":"pid"},"id":1}`,
		`[]`,
	} {
		c := handler.Call{Capability: "acme.crm.lookup", Args: json.RawMessage(args)}
		if _, err := h.Describe(c); !errors.Is(err, handler.ErrInvalidCall) || asc.CodeOf(err) != asc.InvalidRequest {
			t.Errorf("Describe(%s) = %v", args, err)
		}
		if _, err := h.Execute(context.Background(), c); !errors.Is(err, handler.ErrInvalidCall) {
			t.Errorf("Execute(%s) = %v", args, err)
		}
	}
	if connects.Load() != 0 {
		t.Errorf("%d connections for invalid calls", connects.Load())
	}
}

func TestMCPConfig(t *testing.T) {
	for _, cfg := range []handler.MCPConfig{
		{},
		{URL: "https://a.example/mcp", Command: []string{"/bin/true"}},
		{URL: "ftp://a.example/mcp"},
		{URL: "https://user:pw@a.example/mcp"},
		{URL: "https://a.example/mcp", Env: []string{"A=1"}},
		{URL: "https://a.example/mcp", Tools: []string{"bad name"}},
		{Command: []string{"/nonexistent/program"}},
		{Command: []string{"/bin/sh"}, Env: []string{"NOEQUALS"}},
		{Transport: func() (mcp.Transport, error) { return nil, nil }},
		{URL: "https://a.example/mcp", Timeout: -1},
	} {
		if _, err := handler.NewMCP(cfg); !errors.Is(err, handler.ErrConfig) {
			t.Errorf("NewMCP(%+v) = %v", cfg, err)
		}
	}
	h, err := handler.NewMCP(handler.MCPConfig{URL: "https://a.example/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.Describe(toolCall("add", `{}`))
	if err != nil || d.Resource != "https://a.example/mcp" || d.Kind != "tool.call" {
		t.Errorf("%+v %v", d, err)
	}
}

// The server dies in the middle of a call: DEPENDENCY_UNAVAILABLE with side
// effects unknown; the next call starts a new server.
func TestMCPStdioRestart(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	h, err := handler.NewMCP(handler.MCPConfig{
		Command: []string{self, "-test.run=^$"},
		Dir:     t.TempDir(),
		Env:     []string{mcpHelperEnv + "=stdio", "GORACE=atexit_sleep_ms=0"},
		Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	d, _ := h.Describe(toolCall("add", `{}`))
	if !strings.HasPrefix(d.Resource, self+" ") || d.WorkingDirectory == "" || d.Risk != aais.RiskHigh {
		t.Errorf("descriptor %+v", d)
	}
	ctx := context.Background()
	pid := func() string {
		t.Helper()
		c := toolCall("pid", `{}`)
		res, err := handler.Dispatch(ctx, h, c, approve(t, h, c))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Content []struct{ Text string } `json:"content"`
		}
		_ = json.Unmarshal(res.Data, &out)
		if len(out.Content) != 1 || out.Content[0].Text == "" {
			t.Fatalf("result %s", res.Data)
		}
		return out.Content[0].Text
	}
	first := pid()
	if again := pid(); again != first {
		t.Errorf("the server was not kept: pid %s then %s", first, again)
	}
	_, err = h.Execute(ctx, toolCall("die", `{}`))
	wantCode(t, err, asc.DependencyUnavailable)
	if env := asc.FromError(err); env.Retry == nil || env.Retry.SideEffectState != asc.SideEffectUnknown {
		t.Errorf("retry %+v", env.Retry)
	}
	if second := pid(); second == first {
		t.Errorf("no new server after the first died (pid %s)", second)
	}
}

func TestMCPStreamableHTTP(t *testing.T) {
	var runs atomic.Int64
	srv := newMCPServer(&runs)
	var auth atomic.Value
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		mh.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h, err := handler.NewMCP(handler.MCPConfig{URL: ts.URL + "/mcp", Headers: http.Header{"Authorization": {"Bearer s3cret"}}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	c := toolCall("add", `{"a":40,"b":2}`)
	res, err := handler.Dispatch(context.Background(), h, c, approve(t, h, c))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Data), `"42"`) || runs.Load() != 1 {
		t.Errorf("result %s, runs %d", res.Data, runs.Load())
	}
	if auth.Load() != "Bearer s3cret" {
		t.Errorf("Authorization %v", auth.Load())
	}
	_, err = h.Execute(context.Background(), toolCall("nosuchtool", `{}`))
	wantCode(t, err, asc.NotFound)

	// The server goes away: DEPENDENCY_UNAVAILABLE.
	ts.Close()
	_, err = h.Execute(context.Background(), c)
	wantCode(t, err, asc.DependencyUnavailable)
}

// FuzzMCPDescribe: any payload.args is described or refused with
// ErrInvalidCall, never a panic; a described call always makes an action.
func FuzzMCPDescribe(f *testing.F) {
	h, err := handler.NewMCP(handler.MCPConfig{URL: "https://a.example/mcp", Tools: []string{"add"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(toolCall("add", `{"a":1}`).Args))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","_meta":{"progressToken":1}},"id":"x"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"pid"},"id":1}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1e400}`))
	f.Fuzz(func(t *testing.T, args []byte) {
		c := handler.Call{Capability: "acme.crm.lookup", Args: args}
		d, err := h.Describe(c)
		if err != nil {
			if !errors.Is(err, handler.ErrInvalidCall) && asc.CodeOf(err) != asc.PermissionDenied {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if _, _, err := handler.Action(c, d); err != nil {
			t.Fatalf("described but no action: %v", err)
		}
	})
}

// A tool may explain its result in _meta (handler.ExplanationMeta): a
// valid explanation is kept, an invalid one dropped with the reason.
func TestMCPExplanation(t *testing.T) {
	h, _, _ := inMemoryMCP(t, nil)
	for _, c := range []struct {
		exp   string
		kept  bool
		issue string
	}{
		{`{"reasoning":"Found the customer by e-mail.","confidence":0.7,"inputs_used":["crm:customers"]}`, true, ""},
		{`{"reasoning":"Found it.","confidence":0.7}`, false, "inputs_used"},
		{`"because"`, false, "not one JSON object"},
	} {
		res, err := handler.Run(t.Context(), h, toolCall("explain", `{"explanation":`+c.exp+`}`))
		if err != nil {
			t.Fatal(err)
		}
		var want, got any
		_ = json.Unmarshal([]byte(c.exp), &want)
		_ = json.Unmarshal(res.Explanation, &got)
		if kept := len(res.Explanation) != 0; kept != c.kept || (kept && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: explanation %s, want kept %v", c.exp, res.Explanation, c.kept)
		}
		if !strings.Contains(res.ExplanationIssue, c.issue) || (c.issue == "") != (res.ExplanationIssue == "") {
			t.Errorf("%s: issue %q, want one about %q", c.exp, res.ExplanationIssue, c.issue)
		}
	}
}
