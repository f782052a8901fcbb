package mcpproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/store/memstore"
)

// The wrapped server of these tests is this test binary, re-executed with
// childEnv set: a real stdio MCP server built with the SDK, whose tools
// append one line per call to the file named by logEnv.
const (
	childEnv = "MCPPROXY_TEST_CHILD"
	logEnv   = "MCPPROXY_TEST_LOG"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type pathArgs struct {
	Path string `json:"path"`
}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func record(tool string, args any) {
	f, err := os.OpenFile(os.Getenv(logEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	b, _ := json.Marshal(args)
	fmt.Fprintf(f, "%s %s\n", tool, b)
}

func runChild() {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-files", Version: "0.1"}, &mcp.ServerOptions{Instructions: "Test file tools."})
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file"}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		record("read_file", a)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents of " + a.Path}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write a file"}, func(_ context.Context, _ *mcp.CallToolRequest, a writeArgs) (*mcp.CallToolResult, any, error) {
		record("write_file", a)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.Path)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_file", Description: "Delete a file"}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		record("delete_file", a)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + a.Path}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit the server"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		record("crash", struct{}{})
		os.Exit(3)
		return nil, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Say hello"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///readme", Name: "readme", MIMEType: "text/plain"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "text/plain", Text: "read me"}}}, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test child:", err)
	}
}

type env struct {
	t      *testing.T
	log    string
	auth   *aais.Authority
	proxy  *Proxy
	child  *mcp.ClientSession // direct session on a second child, for comparisons
	client *mcp.ClientSession // the host's session on the proxy
}

func startChild(t *testing.T, log string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", logEnv+"="+log)
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "test-proxy"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func setup(t *testing.T, policy string) *env {
	t.Helper()
	p, err := ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := aais.NewAuthority(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return setupWith(t, p, auth, NewEmbedded(auth, 10*time.Millisecond))
}

func setupWith(t *testing.T, p *Policy, auth *aais.Authority, approvals Approvals, mods ...func(*Options, *mcp.ClientOptions)) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, log: filepath.Join(dir, "calls.log"), auth: auth}
	wrapped := startChild(t, e.log)
	e.child = startChild(t, filepath.Join(dir, "direct.log"))
	o := Options{Policy: p, Approvals: approvals}
	var co mcp.ClientOptions
	for _, m := range mods {
		m(&o, &co)
	}
	proxy, err := New(wrapped, o)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = proxy
	ct, st := mcp.NewInMemoryTransports()
	ss, err := proxy.Server().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	host := mcp.NewClient(&mcp.Implementation{Name: "test-host"}, &co)
	e.client, err = host.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Close() })
	return e
}

// calls returns the lines the wrapped server logged: one per tool run.
func (e *env) calls() []string {
	f, err := os.Open(e.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func (e *env) call(name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.client.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

type callResult struct {
	res *mcp.CallToolResult
	err error
}

func (e *env) callAsync(name string, args map[string]any) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		res, err := e.call(name, args)
		ch <- callResult{res, err}
	}()
	return ch
}

// pending waits until n requests are pending and returns them.
func (e *env) pending(n int) []aais.Request {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap, err := e.auth.Snapshot(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		if got := snap.Snapshot.Pending; len(got) == n {
			return got
		} else if len(got) > n || time.Now().After(deadline) {
			e.t.Fatalf("%d requests pending, want %d", len(got), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var reviewer = aais.Actor{ID: "alice", Type: aais.ActorHuman, AuthenticatedBy: "test"}

func (e *env) decide(req *aais.Request, v aais.Verdict, s aais.Scope, digest string) *aais.Message {
	e.t.Helper()
	d, err := aais.NewDecision(req, aais.DecisionParams{Decision: v, Scope: s, Actor: reviewer, DecidedAt: time.Now()})
	if err != nil {
		e.t.Fatal(err)
	}
	if digest != "" {
		d.ActionDigest = digest
	}
	m, err := e.auth.Decide(context.Background(), d, reviewer, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) result(ch <-chan callResult) *mcp.CallToolResult {
	e.t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			e.t.Fatal(r.err)
		}
		return r.res
	case <-time.After(30 * time.Second):
		e.t.Fatal("the call did not return")
	}
	return nil
}

// status reads the ASC envelope of an error result as a host would.
func status(t *testing.T, res *mcp.CallToolResult) *asc.Envelope {
	t.Helper()
	if !res.IsError {
		t.Fatalf("isError is false: %s", jsonOf(t, res))
	}
	r, err := asc.ParseMCPToolResult(jsonOf(t, res))
	if err != nil {
		t.Fatal(err)
	}
	st, err := asc.FromMCPToolResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Complete() {
		t.Fatal("partial ASC status")
	}
	if err := asc.Validate(st.Envelope); err != nil {
		t.Fatalf("invalid ASC envelope: %v", err)
	}
	return st.Envelope
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func text(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

const gatedPolicy = `
store: "memory:"
rules:
  - tool: "read_*"
    action: allow
  - tool: write_file
    args: {path: "/etc/*"}
    action: deny
    message: "Writing under /etc is never allowed."
  - tool: write_file
    action: require_approval
    profile: EU-AI-ACT-HIGH-RISK
    risk: high
    allow_session: true
    summary: "Write {args.path}"
    resource: "file://{args.path}"
    effects: ["Writes a file"]
  - tool: delete_file
    action: require_approval
    ttl: 1s
  - tool: crash
    action: allow
`

func TestAllowedCallPassesThroughUnchanged(t *testing.T) {
	t.Parallel()
	e := setup(t, gatedPolicy)
	ctx := context.Background()
	viaProxy, err := e.client.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := e.child.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := jsonOf(t, viaProxy), jsonOf(t, direct); string(a) != string(b) {
		t.Fatalf("tools differ:\nproxy  %s\ndirect %s", a, b)
	}
	res, err := e.call("read_file", map[string]any{"path": "/tmp/a"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.child.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/tmp/a"}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := jsonOf(t, res), jsonOf(t, want); string(a) != string(b) {
		t.Fatalf("result differs:\nproxy  %s\ndirect %s", a, b)
	}
	if got := e.calls(); len(got) != 1 || got[0] != `read_file {"path":"/tmp/a"}` {
		t.Fatalf("calls = %q", got)
	}
	// Prompts and resources pass through too.
	prompts, err := e.client.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "greet" {
		t.Fatalf("prompts = %+v, %v", prompts, err)
	}
	pr, err := e.client.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
	if err != nil || len(pr.Messages) != 1 {
		t.Fatalf("prompt = %+v, %v", pr, err)
	}
	rr, err := e.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///readme"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "read me" {
		t.Fatalf("resource = %+v, %v", rr, err)
	}
	if ir := e.client.InitializeResult(); ir.Instructions != "Test file tools." || ir.Capabilities.Tools == nil || ir.Capabilities.Prompts == nil || ir.Capabilities.Resources == nil {
		t.Fatalf("initialize result = %+v", ir)
	}
}

func TestGatedCallWaitsAndRunsOnceApproved(t *testing.T) {
	t.Parallel()
	e := setup(t, gatedPolicy)
	args := map[string]any{"path": "/tmp/report.txt", "content": "hello <world> & co"}
	ch := e.callAsync("write_file", args)
	reqs := e.pending(1)
	req := &reqs[0]
	select {
	case r := <-ch:
		t.Fatalf("the call returned before a decision: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	if n := len(e.calls()); n != 0 {
		t.Fatalf("the tool ran %d times before approval", n)
	}
	// The request is exactly this call.
	var action map[string]any
	if err := json.Unmarshal(req.Action.Raw(), &action); err != nil {
		t.Fatal(err)
	}
	if action["kind"] != "tool.call" || action["name"] != "write_file" || action["summary"] != "Write /tmp/report.txt" ||
		action["resource"] != "file:///tmp/report.txt" || fmt.Sprint(action["arguments"]) != fmt.Sprint(args) {
		t.Fatalf("action = %s", req.Action.Raw())
	}
	if req.Origin.Harness != Harness || req.Origin.SessionID != e.proxy.SessionID() || req.Origin.Profile != "EU-AI-ACT-HIGH-RISK" || req.Risk.Level != aais.RiskHigh {
		t.Fatalf("request = %+v", req)
	}
	if _, ok := req.Choice(aais.Approve, aais.ScopeSession); !ok {
		t.Fatal("approve for session is not offered though the rule allows it")
	}
	if m := e.decide(req, aais.Approve, aais.ScopeOnce, ""); m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("outcome %s", m.Resolution.Outcome)
	}
	res := e.result(ch)
	if res.IsError || text(res) != "wrote 18 bytes to /tmp/report.txt" {
		t.Fatalf("result = %s", jsonOf(t, res))
	}
	if got := e.calls(); len(got) != 1 || got[0] != `write_file {"path":"/tmp/report.txt","content":"hello \u003cworld\u003e \u0026 co"}` {
		t.Fatalf("calls = %q", got)
	}
	// A once approval covers nothing else: the same call asks again.
	ch = e.callAsync("write_file", args)
	again := e.pending(1)
	if again[0].ID == req.ID {
		t.Fatal("the second call reused the first request")
	}
	e.decide(&again[0], aais.Deny, aais.ScopeOnce, "")
	if env := status(t, e.result(ch)); env.Status.Code != asc.PermissionDenied {
		t.Fatalf("code %d", env.Status.Code)
	}
	if n := len(e.calls()); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

func TestDeniedCallNeverRuns(t *testing.T) {
	t.Parallel()
	e := setup(t, gatedPolicy)
	ch := e.callAsync("write_file", map[string]any{"path": "/tmp/x", "content": "x"})
	reqs := e.pending(1)
	e.decide(&reqs[0], aais.Deny, aais.ScopeOnce, "")
	res := e.result(ch)
	env := status(t, res)
	if env.Status.Code != asc.PermissionDenied || env.Status.Scope != asc.ScopeToolCall || !env.Status.Terminal {
		t.Fatalf("status = %+v", env.Status)
	}
	if !strings.Contains(text(res), "denied") {
		t.Fatalf("text = %q", text(res))
	}
	info, _ := env.Details[DetailsKey].(map[string]any)
	if info["outcome"] != "denied" || info["approval_request_id"] != reqs[0].ID {
		t.Fatalf("details = %v", env.Details)
	}
	if n := len(e.calls()); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}

func TestChangedArgumentsNeedTheirOwnApproval(t *testing.T) {
	t.Parallel()
	e := setup(t, gatedPolicy)
	ch := e.callAsync("write_file", map[string]any{"path": "/tmp/a", "content": "A"})
	first := e.pending(1)[0]
	e.decide(&first, aais.Approve, aais.ScopeOnce, "")
	if res := e.result(ch); res.IsError {
		t.Fatalf("first call: %s", jsonOf(t, res))
	}
	// Different arguments: a new request with another digest; a decision
	// carrying the digest the reviewer saw for the first is stale.
	ch = e.callAsync("write_file", map[string]any{"path": "/tmp/a", "content": "B"})
	second := e.pending(1)[0]
	if second.ID == first.ID || second.ActionDigest == first.ActionDigest {
		t.Fatal("the changed call reused the first approval")
	}
	if m := e.decide(&second, aais.Approve, aais.ScopeOnce, first.ActionDigest); m.Resolution.Outcome != aais.OutcomeStale {
		t.Fatalf("outcome %s, want stale", m.Resolution.Outcome)
	}
	env := status(t, e.result(ch))
	if env.Status.Code != asc.FailedPrecondition {
		t.Fatalf("code %d, want FAILED_PRECONDITION", env.Status.Code)
	}
	if got := e.calls(); len(got) != 1 || !strings.Contains(got[0], `"content":"A"`) {
		t.Fatalf("calls = %q", got)
	}
}

func TestExpiryWhileWaiting(t *testing.T) {
	t.Parallel()
	e := setup(t, gatedPolicy)
	start := time.Now()
	res, err := e.call("delete_file", map[string]any{"path": "/tmp/x"})
	if err != nil {
		t.Fatal(err)
	}
	env := status(t, res)
	if env.Status.Code != asc.Timeout {
		t.Fatalf("code %d, want TIMEOUT", env.Status.Code)
	}
	if info, _ := env.Details[DetailsKey].(map[string]any); info["outcome"] != "expired" {
		t.Fatalf("details = %v", env.Details)
	}
	if env.Retry == nil || !env.Retry.Retryable || env.Retry.SideEffectState != asc.SideEffectNone {
		t.Fatalf("retry = %+v", env.Retry)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("answered after %s, before the 1s ttl", d)
	}
	if n := len(e.calls()); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}

func TestWaitShorterThanTTLWithdrawsTheRequest(t *testing.T) {
	t.Parallel()
	e := setup(t, `
store: "memory:"
wait: 1s
rules: [{tool: "*", action: require_approval, ttl: 1h}]
`)
	res, err := e.call("write_file", map[string]any{"path": "/tmp/x", "content": "x"})
	if err != nil {
		t.Fatal(err)
	}
	env := status(t, res)
	if env.Status.Code != asc.Timeout {
		t.Fatalf("code %d, want TIMEOUT", env.Status.Code)
	}
	info, _ := env.Details[DetailsKey].(map[string]any)
	id, _ := info["approval_request_id"].(string)
	st, err := e.auth.State(context.Background(), id)
	if err != nil || st.Resolution == nil || st.Resolution.Event.Resolution.Outcome != aais.OutcomeCancelled {
		t.Fatalf("the request was not withdrawn: %+v, %v", st.Resolution, err)
	}
	e.pending(0)
}

func TestDenyRuleAndNoMatchingRule(t *testing.T) {
	t.Parallel()
	e := setup(t, gatedPolicy)
	res, err := e.call("write_file", map[string]any{"path": "/etc/ssh/sshd_config", "content": "x"})
	if err != nil {
		t.Fatal(err)
	}
	env := status(t, res)
	if env.Status.Code != asc.PermissionDenied || text(res) != "Writing under /etc is never allowed." {
		t.Fatalf("status %d, text %q", env.Status.Code, text(res))
	}
	if env.Provenance == nil || env.Provenance.PolicyID != "mcp-proxy/rule-2" {
		t.Fatalf("provenance = %+v", env.Provenance)
	}
	// A tool no rule names is denied: fail closed.
	res, err = e.call("format_disk", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if env := status(t, res); env.Status.Code != asc.PermissionDenied {
		t.Fatalf("code %d", env.Status.Code)
	}
	e.pending(0)
	if n := len(e.calls()); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}

func TestSessionApprovalCoversLaterMatchingCalls(t *testing.T) {
	t.Parallel()
	e := setup(t, gatedPolicy)
	ch := e.callAsync("write_file", map[string]any{"path": "/tmp/1", "content": "one"})
	first := e.pending(1)[0]
	if m := e.decide(&first, aais.Approve, aais.ScopeSession, ""); m.Resolution.EffectiveScope != aais.ScopeSession {
		t.Fatalf("receipt = %+v", m.Resolution)
	}
	if res := e.result(ch); res.IsError {
		t.Fatalf("first: %s", jsonOf(t, res))
	}
	// The next matching call is approved by the session rule at once.
	res, err := e.call("write_file", map[string]any{"path": "/tmp/2", "content": "two"})
	if err != nil || res.IsError {
		t.Fatalf("second: %v %s", err, jsonOf(t, res))
	}
	if got := e.calls(); len(got) != 2 {
		t.Fatalf("calls = %q", got)
	}
	// It does not cover a call a stricter rule denies, nor another tool.
	res, err = e.call("write_file", map[string]any{"path": "/etc/passwd", "content": "x"})
	if err != nil || status(t, res).Status.Code != asc.PermissionDenied {
		t.Fatalf("/etc: %v %s", err, jsonOf(t, res))
	}
	ch = e.callAsync("delete_file", map[string]any{"path": "/tmp/1"})
	other := e.pending(1)[0]
	e.decide(&other, aais.Deny, aais.ScopeOnce, "")
	e.result(ch)
	if got := e.calls(); len(got) != 2 {
		t.Fatalf("calls = %q", got)
	}
	// Ending the proxy's session revokes the session approval.
	e.proxy.End(context.Background())
	rules, err := e.auth.Rules(context.Background())
	if err != nil || len(rules) != 1 || rules[0].Active(time.Now()) {
		t.Fatalf("rules after End: %+v, %v", rules, err)
	}
}

func TestSessionApprovalIsNotOfferedUnlessAllowed(t *testing.T) {
	t.Parallel()
	e := setup(t, `
store: "memory:"
rules: [{tool: "*", action: require_approval}]
`)
	ch := e.callAsync("write_file", map[string]any{"path": "/tmp/x", "content": "x"})
	req := e.pending(1)[0]
	if _, ok := req.Choice(aais.Approve, aais.ScopeSession); ok {
		t.Fatal("session approval offered")
	}
	e.decide(&req, aais.Deny, aais.ScopeOnce, "")
	e.result(ch)
}

func TestChildDeath(t *testing.T) {
	t.Parallel()
	e := setup(t, gatedPolicy)
	res, err := e.call("crash", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if code := status(t, res).Status.Code; code != asc.ResultStateUnknown && code != asc.DependencyUnavailable {
		t.Fatalf("crash: code %d", code)
	}
	e.proxy.ChildStopped() // what Run does when the child session ends
	res, err = e.call("read_file", map[string]any{"path": "/tmp/a"})
	if err != nil {
		t.Fatal(err)
	}
	if code := status(t, res).Status.Code; code != asc.DependencyUnavailable {
		t.Fatalf("after the crash: code %d", code)
	}
}

func TestArgumentsMustBeStrictJSON(t *testing.T) {
	t.Parallel()
	e := setup(t, gatedPolicy)
	// The SDK client encodes maps itself; send raw JSON with a duplicate
	// member through a raw message.
	res, err := e.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file",
		Arguments: json.RawMessage(`{"path":"/etc/passwd","path":"/tmp/a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if code := status(t, res).Status.Code; code != asc.InvalidRequest {
		t.Fatalf("code %d", code)
	}
	if n := len(e.calls()); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}

func TestRemoteAuthority(t *testing.T) {
	t.Parallel()
	auth, err := aais.NewAuthority(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const tok = "proxy-token"
	toks, err := httpapi.NewTokens(map[string]aais.Actor{httpapi.TokenHash(tok): {ID: "mcp-proxy", Type: aais.ActorPolicy}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.NewSubmit(httpapi.SubmitOptions{Authority: auth, Auth: toks})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p, err := ParsePolicy([]byte(fmt.Sprintf(`
authority: %s
token: %s
rules:
  - {tool: write_file, action: require_approval, allow_session: true}
  - {tool: delete_file, action: require_approval, wait: 1s}
`, srv.URL, tok)))
	if err != nil {
		t.Fatal(err)
	}
	remote := NewRemote(p.Authority, p.Token, nil)
	remote.LongPoll = 300 * time.Millisecond
	e := setupWith(t, p, auth, remote)

	ch := e.callAsync("write_file", map[string]any{"path": "/tmp/r", "content": "remote"})
	req := e.pending(1)[0]
	e.decide(&req, aais.Approve, aais.ScopeSession, "")
	if res := e.result(ch); res.IsError {
		t.Fatalf("approved call: %s", jsonOf(t, res))
	}
	// The session rule approves the next one on submission.
	if res, err := e.call("write_file", map[string]any{"path": "/tmp/r2", "content": "again"}); err != nil || res.IsError {
		t.Fatalf("session call: %v %s", err, jsonOf(t, res))
	}
	if got := e.calls(); len(got) != 2 {
		t.Fatalf("calls = %q", got)
	}
	// Giving up waiting withdraws the remote request.
	res, err := e.call("delete_file", map[string]any{"path": "/tmp/r"})
	if err != nil {
		t.Fatal(err)
	}
	env := status(t, res)
	info, _ := env.Details[DetailsKey].(map[string]any)
	id, _ := info["approval_request_id"].(string)
	if env.Status.Code != asc.Timeout || id == "" {
		t.Fatalf("status %d, details %v", env.Status.Code, env.Details)
	}
	if st, err := auth.State(context.Background(), id); err != nil || st.Resolution == nil || st.Resolution.Event.Resolution.Outcome != aais.OutcomeCancelled {
		t.Fatalf("not withdrawn: %v", err)
	}
	// A wrong token is an unavailable authority: nothing runs.
	bad := NewRemote(p.Authority, "wrong", nil)
	if _, err := bad.Submit(context.Background(), &req); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestProgressWhileWaiting(t *testing.T) {
	t.Parallel()
	p, err := ParsePolicy([]byte(gatedPolicy))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := aais.NewAuthority(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	progress := make(chan string, 100)
	e := setupWith(t, p, auth, NewEmbedded(auth, 10*time.Millisecond), func(o *Options, co *mcp.ClientOptions) {
		o.Progress = 20 * time.Millisecond
		co.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		}
	})
	ch := make(chan callResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "/tmp/p", "content": "p"}}
		params.SetProgressToken("tok-1")
		res, err := e.client.CallTool(context.Background(), params)
		ch <- callResult{res, err}
	}()
	req := e.pending(1)[0]
	select {
	case msg := <-progress:
		if !strings.Contains(msg, req.ID) {
			t.Fatalf("progress message %q does not name the request", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification while waiting")
	}
	e.decide(&req, aais.Approve, aais.ScopeOnce, "")
	if res := e.result(ch); res.IsError {
		t.Fatalf("result: %s", jsonOf(t, res))
	}
}

// A rule's remember block offers the scopes it names, with its
// constraints; the embedded authority holds requests to it, and a
// persistent approval covers a later call within the constraints only.
func TestRememberBlock(t *testing.T) {
	t.Parallel()
	p, err := ParsePolicy([]byte(`
store: x
rules:
  - tool: write_file
    action: require_approval
    remember:
      scopes: [session, persistent]
      max_age: 1h
      constraints:
        argument_glob: {/path: "/tmp/*"}
  - {tool: delete_file, action: require_approval, allow_session: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := aais.NewAuthority(memstore.New(), &aais.AuthorityOptions{Remember: p.RememberPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	e := setupWith(t, p, auth, NewEmbedded(auth, 10*time.Millisecond))
	ch := e.callAsync("write_file", map[string]any{"path": "/tmp/a", "content": "x"})
	req := e.pending(1)[0]
	c, ok := req.Choice(aais.Approve, aais.ScopePersistent)
	if !ok || string(c.ScopeConstraints[aais.ConstraintArgumentGlob]) != `{"/path":"/tmp/*"}` ||
		string(c.ScopeConstraints[aais.ConstraintOriginProject]) != `"mcp-proxy rule 1"` || !strings.Contains(c.Label, "at most 1h0m0s") {
		t.Fatalf("persistent choice: %v %+v", ok, c)
	}
	if _, ok := req.Choice(aais.Approve, aais.ScopeSession); !ok {
		t.Fatal("no session choice")
	}
	e.decide(&req, aais.Approve, aais.ScopePersistent, "")
	if res := e.result(ch); res.IsError {
		t.Fatalf("approved call: %s", jsonOf(t, res))
	}
	if res, err := e.call("write_file", map[string]any{"path": "/tmp/b", "content": "y"}); err != nil || res.IsError {
		t.Fatalf("a call the persistent rule covers: %v %s", err, jsonOf(t, res))
	}
	if got := e.calls(); len(got) != 2 {
		t.Fatalf("calls = %q", got)
	}
	// Outside the glob: asks again.
	ch = e.callAsync("write_file", map[string]any{"path": "/etc/passwd", "content": "z"})
	if out := e.pending(1); out[0].Action.Name() != "write_file" {
		t.Fatalf("pending: %+v", out)
	}
	e.decide(ptr(e.pending(1)[0]), aais.Deny, aais.ScopeOnce, "")
	e.result(ch)
	// The policy refuses a persistent choice for the allow_session rule,
	// whoever builds the request.
	rp := p.RememberPolicy()
	if _, err := rp.Remember(&aais.Request{Origin: aais.Origin{Harness: Harness, Project: "mcp-proxy rule 2"}}, aais.ScopePersistent); !errors.Is(err, aais.ErrNotRemembered) ||
		!strings.Contains(err.Error(), "policy rule 2 remembers only session approvals") {
		t.Fatalf("persistent under allow_session: %v", err)
	}
	for _, project := range []string{"mcp-proxy rule 9", "mcp-proxy rule 1x", "other"} {
		if _, err := rp.Remember(&aais.Request{Origin: aais.Origin{Harness: Harness, Project: project}}, aais.ScopeSession); !errors.Is(err, aais.ErrNotRemembered) {
			t.Errorf("project %q: %v", project, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
