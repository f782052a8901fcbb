package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/mcpproxy"
	"github.com/custos-runtime/custos/store"
)

func writePolicy(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMCPProxyCheck(t *testing.T) {
	path := writePolicy(t, `
store: ./custos-data
rules:
  - tool: "read_*"
    action: allow
  - tool: "*"
    action: require_approval
    profile: EU-AI-ACT-HIGH-RISK
    allow_session: true
`)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"mcp-proxy", "--config", path, "--check"}, nil, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"embedded store " + filepath.Join(filepath.Dir(path), "custos-data"), `rule 1     allow            "read_*"`, "profile EU-AI-ACT-HIGH-RISK", "session approvals offered", "otherwise  deny"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestMCPProxyCheckRemote(t *testing.T) {
	t.Setenv("CUSTOS_TEST_MCP_AUTH", "Bearer do-not-print-me")
	t.Setenv("CUSTOS_TEST_LISTEN_TOKEN", "listen-do-not-print")
	path := writePolicy(t, "store: x\nrules: [{tool: x, action: allow}]\n")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"mcp-proxy", "--config", path, "--check", "--upstream", "https://mcp.example.com/mcp",
		"--upstream-header-env", "Authorization=CUSTOS_TEST_MCP_AUTH", "--upstream-header", "X-Tenant: acme",
		"--listen", "0.0.0.0:9000", "--listen-remote", "--listen-token-env", "CUSTOS_TEST_LISTEN_TOKEN"}, nil, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"upstream   https://mcp.example.com/mcp (headers Authorization, X-Tenant)", "serve      http://0.0.0.0:9000/mcp (bearer token required)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String()+errb.String(), "do-not-print") {
		t.Fatalf("a secret was printed:\n%s%s", out.String(), errb.String())
	}
}

func TestMCPProxyUsage(t *testing.T) {
	good := writePolicy(t, "store: x\nrules: [{tool: x, action: allow}]\n")
	bad := writePolicy(t, "store: x\nrules: [{tool: x, action: perhaps}]\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mcp-proxy", "--config", good}, exitUsage, "after --"},
		{[]string{"mcp-proxy", "--config", good, "server"}, exitUsage, "after --"},
		{[]string{"mcp-proxy", "--", "server"}, exitUsage, "--config"},
		{[]string{"mcp-proxy", "--config", good, "--check", "--", "x"}, exitUsage, "--check takes no command"},
		{[]string{"mcp-proxy", "--config", bad, "--", "server"}, exitFailure, `rules[0].action: "perhaps"`},
		{[]string{"mcp-proxy", "--config", filepath.Join(t.TempDir(), "none.yaml"), "--", "server"}, exitFailure, "no such file"},
		{[]string{"mcp-proxy", "--config", good, "--upstream", "https://mcp.example.com/mcp", "--", "server"}, exitUsage, "not both"},
		{[]string{"mcp-proxy", "--config", good, "--upstream", "http://mcp.example.com/mcp"}, exitUsage, "plain http is allowed only to localhost"},
		{[]string{"mcp-proxy", "--config", good, "--upstream-header", "X-Api-Key: k"}, exitUsage, "needs --upstream URL"},
		{[]string{"mcp-proxy", "--config", good, "--upstream-header", "X-Api-Key: k", "--", "server"}, exitUsage, "not a command"},
		{[]string{"mcp-proxy", "--config", good, "--upstream", "https://h/mcp", "--upstream-header", "X-Api-Key k"}, exitUsage, `want "Name: value"`},
		{[]string{"mcp-proxy", "--config", good, "--upstream", "https://h/mcp", "--upstream-header-env", "Authorization=CUSTOS_TEST_NO_SUCH_VAR"}, exitUsage, "CUSTOS_TEST_NO_SUCH_VAR is not set"},
		{[]string{"mcp-proxy", "--config", good, "--listen", "0.0.0.0:8931", "--", "server"}, exitUsage, "is not loopback"},
		{[]string{"mcp-proxy", "--config", good, "--listen", "0.0.0.0:8931", "--listen-remote", "--", "server"}, exitUsage, "a token is required"},
		{[]string{"mcp-proxy", "--config", good, "--listen", "nonsense", "--", "server"}, exitUsage, "want HOST:PORT"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, nil, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%v wrote to standard output: %q", c.args, out.String())
		}
	}
}

// TestMCPProxyHelperServer is not a test: re-executed with
// CUSTOS_MCP_HELPER set, it is a minimal stdio MCP server written against
// the wire protocol, whose tools log each call to $CUSTOS_MCP_HELPER_LOG.
func TestMCPProxyHelperServer(t *testing.T) {
	if os.Getenv("CUSTOS_MCP_HELPER") == "" {
		t.Skip("helper process")
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &msg) != nil || msg.ID == nil {
			continue
		}
		var result any
		var params struct {
			ProtocolVersion string          `json:"protocolVersion"`
			Name            string          `json:"name"`
			Arguments       json.RawMessage `json:"arguments"`
		}
		_ = json.Unmarshal(msg.Params, &params)
		switch msg.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "helper", "version": "1"}}
		case "ping":
			result = map[string]any{}
		case "tools/list":
			schema := map[string]any{"type": "object"}
			result = map[string]any{"tools": []any{
				map[string]any{"name": "read_file", "inputSchema": schema},
				map[string]any{"name": "write_file", "inputSchema": schema}}}
		case "tools/call":
			f, err := os.OpenFile(os.Getenv("CUSTOS_MCP_HELPER_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				fmt.Fprintf(f, "%s %s\n", params.Name, params.Arguments)
				f.Close()
			}
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "ran " + params.Name}}}
		default:
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			continue
		}
		_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
	}
	os.Exit(0)
}

// host speaks JSON-RPC to the proxy's standard input and output.
type host struct {
	t   *testing.T
	w   io.Writer
	r   *bufio.Scanner
	ids int
}

func (h *host) send(method string, params any, notify bool) int {
	h.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if !notify {
		h.ids++
		msg["id"] = h.ids
	}
	b, _ := json.Marshal(msg)
	if _, err := h.w.Write(append(b, '\n')); err != nil {
		h.t.Fatal(err)
	}
	return h.ids
}

func (h *host) answer(id int) map[string]any {
	h.t.Helper()
	for h.r.Scan() {
		var msg map[string]any
		if err := json.Unmarshal(h.r.Bytes(), &msg); err != nil {
			h.t.Fatalf("the proxy wrote something that is not JSON on standard output: %q", h.r.Text())
		}
		if got, _ := msg["id"].(float64); int(got) == id && msg["method"] == nil {
			if msg["error"] != nil {
				h.t.Fatalf("error answer: %v", msg["error"])
			}
			res, _ := msg["result"].(map[string]any)
			return res
		}
	}
	h.t.Fatalf("standard output ended: %v", h.r.Err())
	return nil
}

func TestMCPProxyEndToEnd(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls.log")
	dbPath := filepath.Join(dir, "approvals.db")
	path := writePolicy(t, fmt.Sprintf(`
store: %q
agent: agent:test.assistant
rules:
  - {tool: "read_*", action: allow}
  - {tool: write_file, action: require_approval, profile: EU-AI-ACT-HIGH-RISK}
`, dbPath))
	t.Setenv("CUSTOS_MCP_HELPER", "1")
	t.Setenv("CUSTOS_MCP_HELPER_LOG", calls)

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb syncBuffer
	done := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() {
		code := run(ctx, []string{"mcp-proxy", "--config", path, "--", os.Args[0], "-test.run=^TestMCPProxyHelperServer$"}, inR, outW, &errb)
		outW.Close()
		done <- code
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	h := &host{t: t, w: inW, r: sc}

	init := h.answer(h.send("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "test-host", "version": "1"}}, false))
	if info, _ := init["serverInfo"].(map[string]any); info["name"] != mcpproxy.Harness {
		t.Fatalf("initialize: %v", init)
	}
	h.send("notifications/initialized", map[string]any{}, true)
	tools := h.answer(h.send("tools/list", map[string]any{}, false))
	if list, _ := tools["tools"].([]any); len(list) != 2 {
		t.Fatalf("tools: %v", tools)
	}
	res := h.answer(h.send("tools/call", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "/tmp/a"}}, false))
	if res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "ran read_file") {
		t.Fatalf("read_file: %v", res)
	}

	// The gated call waits for a decision made on the same store.
	id := h.send("tools/call", map[string]any{"name": "write_file", "arguments": map[string]any{"path": "/tmp/b", "content": "x"}}, false)
	loc, err := store.Parse(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenApprovals(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	auth, err := aais.NewAuthority(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var req *aais.Request
	for req == nil {
		snap, err := auth.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Snapshot.Pending) == 1 {
			req = &snap.Snapshot.Pending[0]
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if req.Origin.AgentID != "agent:test.assistant" || req.Origin.Harness != mcpproxy.Harness || req.Action.Name() != "write_file" {
		t.Fatalf("request: %+v", req)
	}
	stt, err := auth.State(ctx, req.ID)
	if err != nil || stt.Request.Owner == nil || stt.Request.Owner.PID != os.Getpid() {
		t.Fatalf("the proxy process is not recorded as the owner: %+v, %v", stt.Request.Owner, err)
	}
	actor := aais.Actor{ID: "alice", Type: aais.ActorHuman}
	d, err := aais.NewDecision(req, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeOnce, Actor: actor, DecidedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Decide(ctx, d, actor, nil); err != nil {
		t.Fatal(err)
	}
	res = h.answer(id)
	if res["isError"] == true {
		t.Fatalf("write_file: %v", res)
	}
	log, _ := os.ReadFile(calls)
	if got := strings.Split(strings.TrimSpace(string(log)), "\n"); len(got) != 2 || got[1] != `write_file {"content":"x","path":"/tmp/b"}` {
		t.Fatalf("calls = %q", got)
	}

	// The host disconnects: the proxy stops and stops its child.
	inW.Close()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy did not stop when the host disconnected")
	}
	if !strings.Contains(errb.String(), "custos mcp-proxy ready") {
		t.Errorf("stderr: %s", errb.String())
	}
}
