package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// Payload types of the MCP and A2A carriage (ARSIA §8): the inner JSON-RPC
// 2.0 request travels verbatim in payload.args.
const (
	PayloadTypeMCPToolCall = "arsiaprotocol.mcp/tool-call"
	PayloadTypeA2ATask     = "arsiaprotocol.a2a/task"
)

// maxToolNameLen bounds an MCP tool name (the MCP specification suggests 1
// to 128 characters).
const maxToolNameLen = 128

// MCPConfig configures the mcp handler. Exactly one of Command, URL and
// Transport says where the MCP server is.
type MCPConfig struct {
	// Command runs a local MCP server speaking MCP over stdio (argv, no
	// shell). The program is looked up in PATH once, by NewMCP; the
	// command line (absolute program path and arguments) is the action's
	// resource. The server is started on the first call and kept; when it
	// exits it is started again on the next call.
	Command []string
	// Dir is the server's working directory ("" means the gateway's, when
	// NewMCP runs); it is the action's working_directory.
	Dir string
	// Env is the server's complete environment, as "NAME=value" entries;
	// nothing is inherited from the gateway. It is not part of the action.
	Env []string
	// URL is a Streamable HTTP MCP endpoint (http or https, no user
	// information or fragment). It is the action's resource.
	URL string
	// Headers are sent with every HTTP request to URL, typically
	// credentials. They are not part of the action.
	Headers http.Header
	// Client sends the HTTP requests to URL; nil means a client on
	// http.DefaultTransport. Redirects are never followed.
	Client *http.Client
	// Transport, when set, replaces Command and URL: it is called for every
	// (re)connection and returns the transport to the server. Resource
	// then names the server for the reviewer (required). It exists for
	// tests and for embedding an in-process server.
	Transport func() (mcp.Transport, error)
	Resource  string
	// Tools, when not empty, lists the tool names this handler may call;
	// a call of any other tool is refused before it reaches the server
	// (and before any approval is asked).
	Tools []string
	// Timeout bounds one call, connecting included. 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes caps the tool result (as JSON). 0 means
	// DefaultMaxResponseBytes; at most MaxResponseBytesLimit.
	MaxResponseBytes int64
}

// MCP is the built-in handler for ARSIA requests carrying an MCP tools/call
// (payload type arsiaprotocol.mcp/tool-call): it calls the tool on the
// configured MCP server with the official Go SDK's client and answers the
// CallToolResult as the result.
//
// The action a reviewer approves is kind "tool.call", the capability as
// name, the JSON-RPC request exactly as carried as arguments (so the tool
// name, params.name, and its arguments, params.arguments, are hashed), and
// the server as resource. The summary and the first effect name the tool.
//
// The session with the server is kept between calls. A stdio server that
// exits, or an HTTP session that fails, is reconnected on the next call.
// Close ends the session (and a stdio server).
type MCP struct {
	resource string
	dir      string
	effect   string
	risk     aais.RiskLevel
	reason   string
	tools    map[string]bool
	timeout  time.Duration
	max      int64
	connect  func() (mcp.Transport, error)
	client   *mcp.Client

	mu     sync.Mutex
	live   *mcp.ClientSession
	closed bool
}

// NewMCP validates cfg and returns the handler. Nothing is started: the
// server is connected on the first call. Errors wrap ErrConfig.
func NewMCP(cfg MCPConfig) (*MCP, error) {
	h := &MCP{}
	var err error
	if h.timeout, h.max, err = handlerLimits(cfg.Timeout, cfg.MaxResponseBytes, "MaxResponseBytes"); err != nil {
		return nil, err
	}
	n := 0
	for _, set := range []bool{len(cfg.Command) > 0, cfg.URL != "", cfg.Transport != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%w: mcp: exactly one of command and url is required", ErrConfig)
	}
	switch {
	case cfg.Transport != nil:
		if err := checkText("resource", cfg.Resource, 1, maxResourceLen); err != nil {
			return nil, fmt.Errorf("%w: mcp: a transport needs a resource naming the server", ErrConfig)
		}
		h.resource = cfg.Resource
		h.effect = "Calls the MCP server " + truncateRunes(cfg.Resource, maxEffectLen-len("Calls the MCP server "))
		h.risk, h.reason = aais.RiskMedium, "Calls a tool on an MCP server, which may act on the arguments"
		h.connect = cfg.Transport
	case cfg.URL != "":
		if len(cfg.Env) > 0 || cfg.Dir != "" {
			return nil, fmt.Errorf("%w: mcp: env and dir apply to a command, not a url", ErrConfig)
		}
		u, err := checkUpstreamURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("%w: mcp: %v", ErrConfig, err)
		}
		h.resource = u.String()
		h.effect = "Sends the tool call to the MCP server at " + u.Host
		h.risk, h.reason = aais.RiskMedium, "Calls a tool on a remote MCP server, which may act on the arguments"
		hc, err := mcpHTTPClient(cfg.Client, cfg.Headers)
		if err != nil {
			return nil, err
		}
		endpoint := h.resource
		h.connect = func() (mcp.Transport, error) {
			return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil
		}
	default:
		if err := h.setCommand(cfg); err != nil {
			return nil, err
		}
	}
	if len(cfg.Tools) > 0 {
		h.tools = make(map[string]bool, len(cfg.Tools))
		for _, t := range cfg.Tools {
			if err := checkToolName(t); err != nil {
				return nil, fmt.Errorf("%w: mcp: tools: %v", ErrConfig, err)
			}
			h.tools[t] = true
		}
	}
	h.client = mcp.NewClient(&mcp.Implementation{Name: "custos", Version: "1"}, nil)
	return h, nil
}

func (h *MCP) setCommand(cfg MCPConfig) error {
	if cfg.Command[0] == "" {
		return fmt.Errorf("%w: mcp: no command", ErrConfig)
	}
	for i, a := range cfg.Command {
		if strings.IndexByte(a, 0) >= 0 || !utf8.ValidString(a) {
			return fmt.Errorf("%w: mcp: command argument %d is not valid text", ErrConfig, i)
		}
	}
	path, err := exec.LookPath(cfg.Command[0])
	if err != nil {
		return fmt.Errorf("%w: mcp: command: %w", ErrConfig, err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return fmt.Errorf("%w: mcp: command: %w", ErrConfig, err)
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return fmt.Errorf("%w: mcp: working directory: %w", ErrConfig, err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fmt.Errorf("%w: mcp: working directory: %w", ErrConfig, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: mcp: working directory %q is not a directory", ErrConfig, dir)
	}
	env, err := checkEnv(cfg.Env)
	if err != nil {
		return fmt.Errorf("%w: mcp: %v", ErrConfig, err)
	}
	args := append([]string(nil), cfg.Command[1:]...)
	line := commandLine(path, args)
	if utf8.RuneCountInString(line) > maxResourceLen || !utf8.ValidString(dir) || len(dir) > maxResourceLen {
		return fmt.Errorf("%w: mcp: the command line or working directory is longer than %d characters", ErrConfig, maxResourceLen)
	}
	h.resource, h.dir = line, dir
	h.effect = "Runs the MCP server " + filepath.Base(path) + " (the resource) with the gateway's privileges"
	h.risk, h.reason = aais.RiskHigh, "Calls a tool of a local MCP server running with the gateway's privileges"
	h.connect = func() (mcp.Transport, error) {
		cmd := exec.Command(path, args...)
		cmd.Dir = dir
		cmd.Env = append([]string{}, env...) // non-nil: nothing is inherited
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
	}
	return nil
}

// checkEnv checks NAME=value entries without quoting them (they may hold
// secrets).
func checkEnv(entries []string) ([]string, error) {
	env := make([]string, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for i, kv := range entries {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("environment entry %d is not NAME=value", i)
		}
		if seen[name] {
			return nil, fmt.Errorf("environment variable %s is set twice", name)
		}
		seen[name] = true
		env = append(env, kv)
	}
	return env, nil
}

// checkUpstreamURL applies the HTTP handler's rules to an upstream URL.
func checkUpstreamURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("url: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("url: scheme must be http or https")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("url: no host")
	case u.User != nil:
		return nil, errors.New("url: user information is not allowed (it would be shown to reviewers)")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, errors.New("url: a fragment is not allowed")
	case u.Opaque != "":
		return nil, errors.New("url: opaque URLs are not allowed")
	}
	if s := u.String(); len(s) > maxResourceLen || !utf8.ValidString(s) {
		return nil, fmt.Errorf("url: longer than %d bytes", maxResourceLen)
	}
	return u, nil
}

// mcpHTTPClient copies c (or a default client), refuses redirects, drops
// the cookie jar and adds headers to every request.
func mcpHTTPClient(c *http.Client, headers http.Header) (*http.Client, error) {
	client := http.Client{}
	if c != nil {
		client = *c
	}
	client.Jar = nil
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	// Every request names the handler's span (W3C traceparent) when the
	// gateway traces.
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	client.Transport = traceTransport{base: base}
	if len(headers) > 0 {
		hs := make(http.Header, len(headers))
		for name, values := range headers {
			if !validHeaderName(name) {
				return nil, fmt.Errorf("%w: header name %q", ErrConfig, name)
			}
			for _, v := range values {
				if !validHeaderValue(v) {
					return nil, fmt.Errorf("%w: header %s has an invalid value", ErrConfig, http.CanonicalHeaderKey(name))
				}
				hs.Add(name, v)
			}
		}
		client.Transport = headerTransport{base: client.Transport, headers: hs}
	}
	return &client, nil
}

type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.headers {
		r.Header[k] = append([]string(nil), vs...)
	}
	return t.base.RoundTrip(r)
}

// checkToolName accepts 1 to 128 printable characters without white space.
func checkToolName(name string) error {
	n := utf8.RuneCountInString(name)
	if n == 0 || n > maxToolNameLen || !utf8.ValidString(name) {
		return fmt.Errorf("tool name must be 1 to %d characters", maxToolNameLen)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || !strconv.IsPrint(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("tool name %q has a space, control or format character", name)
		}
	}
	return nil
}

// rpcRequest is a JSON-RPC 2.0 request carried in payload.args.
type rpcRequest struct {
	Method string
	// Params holds the members of the params object, as received.
	Params map[string]json.RawMessage
	// ID is the request id as received.
	ID json.RawMessage
}

// parseRPC reads the JSON-RPC 2.0 request object strictly: members
// jsonrpc ("2.0"), method (a string), params (an object) and id (a string or
// an integer; a notification is refused, it would have no answer); nothing
// else.
func parseRPC(args json.RawMessage, what string) (rpcRequest, error) {
	if _, err := argsLimits.Decode(args); err != nil {
		return rpcRequest{}, callError("%s: payload.args: %v", what, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(args, &top); err != nil || top == nil {
		return rpcRequest{}, callError("%s: payload.args must be a JSON-RPC 2.0 request object", what)
	}
	for k := range top {
		switch k {
		case "jsonrpc", "method", "params", "id":
		default:
			return rpcRequest{}, callError("%s: payload.args: unknown JSON-RPC member %q", what, k)
		}
	}
	var version string
	if err := json.Unmarshal(top["jsonrpc"], &version); err != nil || version != "2.0" {
		return rpcRequest{}, callError(`%s: payload.args.jsonrpc must be "2.0"`, what)
	}
	var r rpcRequest
	if err := json.Unmarshal(top["method"], &r.Method); err != nil || r.Method == "" {
		return rpcRequest{}, callError("%s: payload.args.method must be a non-empty string", what)
	}
	id, ok := top["id"]
	if !ok {
		return rpcRequest{}, callError("%s: payload.args.id is required (a notification has no answer)", what)
	}
	switch id[0] {
	case '"':
	default:
		if _, err := strconv.ParseInt(string(id), 10, 64); err != nil {
			return rpcRequest{}, callError("%s: payload.args.id must be a string or an integer", what)
		}
	}
	r.ID = id
	p, ok := top["params"]
	if !ok || len(p) == 0 || p[0] != '{' {
		return rpcRequest{}, callError("%s: payload.args.params must be an object", what)
	}
	if err := json.Unmarshal(p, &r.Params); err != nil {
		return rpcRequest{}, callError("%s: payload.args.params: %v", what, err)
	}
	return r, nil
}

// toolCall is a parsed MCP tools/call.
type toolCall struct {
	name      string
	arguments json.RawMessage // nil when absent
	meta      map[string]any
}

func parseToolCall(args json.RawMessage) (toolCall, error) {
	r, err := parseRPC(args, "mcp")
	if err != nil {
		return toolCall{}, err
	}
	if r.Method != "tools/call" {
		return toolCall{}, callError("mcp: method %q is not supported; only tools/call", r.Method)
	}
	var tc toolCall
	for k, v := range r.Params {
		switch k {
		case "name":
			if err := json.Unmarshal(v, &tc.name); err != nil {
				return toolCall{}, callError("mcp: params.name must be a string")
			}
		case "arguments":
			if len(v) == 0 || v[0] != '{' {
				return toolCall{}, callError("mcp: params.arguments must be an object")
			}
			tc.arguments = v
		case "_meta":
			if len(v) == 0 || v[0] != '{' {
				return toolCall{}, callError("mcp: params._meta must be an object")
			}
			if err := json.Unmarshal(v, &tc.meta); err != nil {
				return toolCall{}, callError("mcp: params._meta: %v", err)
			}
		default:
			return toolCall{}, callError("mcp: params: unknown member %q", k)
		}
	}
	if _, ok := r.Params["name"]; !ok {
		return toolCall{}, callError("mcp: params.name is required")
	}
	if err := checkToolName(tc.name); err != nil {
		return toolCall{}, callError("mcp: params.name: %v", err)
	}
	return tc, nil
}

// Describe says that the call runs the named tool on the configured server.
// A call that is not one tools/call request, or names a tool outside
// Tools, is refused here: it is never put before a reviewer.
func (h *MCP) Describe(c Call) (Descriptor, error) {
	tc, err := parseToolCall(c.Args)
	if err != nil {
		return Descriptor{}, err
	}
	if err := h.allowed(tc.name); err != nil {
		return Descriptor{}, err
	}
	return Descriptor{
		Kind:             "tool.call",
		Summary:          truncateRunes(fmt.Sprintf("Calls the MCP tool %q on %s", tc.name, h.resource), maxSummaryLen),
		Resource:         h.resource,
		WorkingDirectory: h.dir,
		Effects: []string{
			fmt.Sprintf("Calls the MCP tool %q with params.arguments", tc.name),
			h.effect,
		},
		Risk:        h.risk,
		RiskReasons: []string{h.reason},
	}, nil
}

func (h *MCP) allowed(name string) error {
	if h.tools != nil && !h.tools[name] {
		return fail(asc.PermissionDenied, refused, "mcp: the tool %q is not in this handler's tools list", name)
	}
	return nil
}

// Execute calls the tool and returns the CallToolResult as JSON, in the
// call's payload type. A result with isError is an ASC error: the status
// the tool embedded (an application/agent-status+json resource), or 5005
// TOOL_EXECUTION_FAILED.
func (h *MCP) Execute(ctx context.Context, c Call) (Result, error) {
	tc, err := parseToolCall(c.Args)
	if err != nil {
		return Result{}, err
	}
	if err := h.allowed(tc.name); err != nil {
		return Result{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	cs, err := h.session(tctx)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return Result{}, fail(cancelCode(ctx), refused, "mcp: not connected: %v", ctx.Err())
		case tctx.Err() != nil:
			return Result{}, fail(asc.Timeout, nothingHappened, "mcp: connecting to the server took longer than %s", h.timeout)
		}
		var ae *asc.Error
		if errors.As(err, &ae) {
			return Result{}, err
		}
		return Result{}, fail(asc.DependencyUnavailable, nothingHappened, "mcp: connecting to the server: %s", sanitize([]byte(err.Error())))
	}
	params := &mcp.CallToolParams{Name: tc.name, Meta: traceMeta(ctx, tc.meta)}
	if tc.arguments != nil {
		params.Arguments = tc.arguments
	}
	// Over HTTP the trace tells whether the tools/call POST may have left;
	// over stdio (no trace events) it was written to the server: sent.
	sctx, sent := withSendTrace(tctx)
	res, err := cs.CallTool(sctx, params)
	if err != nil {
		return Result{}, h.callFailed(ctx, tctx, cs, tc.name, err, sent.mayHaveSent())
	}
	data, err := json.Marshal(res)
	if err != nil {
		return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "mcp: the tool result cannot be encoded: %v", err)
	}
	if int64(len(data)) > h.max {
		return Result{}, fail(asc.ResourceExhausted, mayHaveRun, "mcp: the tool result exceeds %d bytes", h.max)
	}
	if err := checkObject(data, int(h.max)); err != nil {
		return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "mcp: the tool result is not one strict JSON object: %v", err)
	}
	if res.IsError {
		return Result{}, toolError(tc.name, data, res)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "mcp: %v", err)
	}
	out := Result{PayloadType: c.PayloadType, Data: json.RawMessage(buf.Bytes())}
	setExplanation(&out, res.Meta)
	return out, nil
}

// toolError maps a CallToolResult with isError: the embedded ASC status
// when the tool sent one (ASC MCP binding), else TOOL_EXECUTION_FAILED. The
// message quotes the tool's first text item, sanitised and cut short.
func toolError(name string, data []byte, res *mcp.CallToolResult) error {
	code, o := asc.ToolExecutionFailed, mayHaveRun
	var retry *asc.Retry
	if r, err := asc.ParseMCPToolResult(data); err == nil {
		if st, err := asc.FromMCPToolResult(r); err == nil {
			if c := st.Code(); c >= 4000 && c <= 7999 {
				code = c
				if st.Envelope != nil && st.Envelope.Retry != nil {
					rc := *st.Envelope.Retry
					retry = &rc
				}
			}
		}
	}
	text := ""
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = sanitize([]byte(t.Text))
			break
		}
	}
	e := fail(code, o, "mcp: the tool %q reported an error: %s", name, text)
	if retry != nil {
		// The tool's contract is taken, within bounds: no negative or
		// longer-than-a-day delay, and a side-effect state the ASC
		// vocabulary has (else what the handler knows: possible).
		retry.AfterMS = min(max(retry.AfterMS, 0), maxRetryAfter.Milliseconds())
		switch retry.SideEffectState {
		case asc.SideEffectNone, asc.SideEffectPossible, asc.SideEffectConfirmed, asc.SideEffectUnknown:
		default:
			retry.SideEffectState = o.effects
		}
		e.Envelope.Retry = retry
	}
	return e
}

// callFailed maps an error of tools/call.
func (h *MCP) callFailed(ctx, tctx context.Context, cs *mcp.ClientSession, name string, err error, sent bool) error {
	var rpcErr *jsonrpc.Error
	switch {
	case tctx.Err() != nil && sent:
		// The server has the call and may be running the tool (ASC §5).
		return unanswered(ctx, "mcp: the tool %q did not answer within %s", name, h.timeout)
	case tctx.Err() != nil:
		return notSent(ctx, "mcp: the call of %q could not be sent within %s", name, h.timeout)
	case errors.As(err, &rpcErr) && !localRPCError(rpcErr.Code):
		msg := sanitize([]byte(rpcErr.Message))
		switch rpcErr.Code {
		case jsonrpc.CodeMethodNotFound:
			return fail(asc.UnsupportedCapability, refused, "mcp: the server does not support tools/call: %s", msg)
		case jsonrpc.CodeInvalidParams:
			if h.toolMissing(tctx, cs, name, rpcErr.Message) {
				return fail(asc.NotFound, refused, "mcp: the server has no tool %q: %s", name, msg)
			}
			return fail(asc.InvalidRequest, refused, "mcp: the server refused the arguments of %q: %s", name, msg)
		case jsonrpc.CodeInvalidRequest, jsonrpc.CodeParseError:
			return fail(asc.InvalidRequest, refused, "mcp: the server refused the request: %s", msg)
		}
		return fail(asc.ToolExecutionFailed, mayHaveRun, "mcp: the server answered error %d: %s", rpcErr.Code, msg)
	}
	// The connection failed: drop the session, the next call reconnects
	// (and restarts a stdio server).
	h.drop(cs)
	o := unknown
	if notConnected(err) || !sent {
		o = nothingHappened
	}
	return fail(asc.DependencyUnavailable, o, "mcp: calling %q: %s", name, sanitize([]byte(err.Error())))
}

// localRPCError reports whether a JSON-RPC error code is one the SDK makes
// up on the client side for a transport failure (rejected by the transport,
// client or server closing, unknown), not an answer of the server.
func localRPCError(code int64) bool {
	switch code {
	case -32001, -32003, -32004, -32005:
		return true
	}
	return false
}

// toolMissing reports whether the server does not list the tool. When the
// list cannot be read, the error message decides.
func (h *MCP) toolMissing(ctx context.Context, cs *mcp.ClientSession, name, msg string) bool {
	found, listed := false, true
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			listed = false
			break
		}
		if t.Name == name {
			found = true
			break
		}
	}
	if listed {
		return !found
	}
	m := strings.ToLower(msg)
	return strings.Contains(m, "unknown tool") || strings.Contains(m, "not found")
}

// session returns the live session, connecting (and for a command, starting
// the server) when there is none.
func (h *MCP) session(ctx context.Context) (*mcp.ClientSession, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fail(asc.DependencyUnavailable, refused, "mcp: the handler is closed")
	}
	if h.live != nil {
		return h.live, nil
	}
	t, err := h.connect()
	if err != nil {
		return nil, err
	}
	cs, err := h.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	h.live = cs
	go func() {
		// The session ends when the server exits or the connection
		// fails: forget it so the next call reconnects.
		_ = cs.Wait()
		h.drop(cs)
	}()
	return cs, nil
}

// drop forgets cs if it is the current session and closes it.
func (h *MCP) drop(cs *mcp.ClientSession) {
	h.mu.Lock()
	if h.live == cs {
		h.live = nil
	}
	h.mu.Unlock()
	go func() { _ = cs.Close() }()
}

// Close ends the session with the server (a stdio server is asked to exit,
// then terminated). Calls after Close fail with DEPENDENCY_UNAVAILABLE.
func (h *MCP) Close() error {
	h.mu.Lock()
	cs := h.live
	h.live, h.closed = nil, true
	h.mu.Unlock()
	if cs == nil {
		return nil
	}
	return cs.Close()
}
