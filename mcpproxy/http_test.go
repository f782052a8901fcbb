package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/store/memstore"
)

// The tests of this file put everything on loopback and on the official
// SDK: a remote MCP server (an SDK server behind httptest, refusing
// requests without its API key), the proxy in front of it over Streamable
// HTTP, serving over Streamable HTTP, and SDK clients as the hosts.

const upstreamKey = "k-7d1f0c2a9e"

// remote is the gated server: an SDK server over Streamable HTTP.
type remote struct {
	server *mcp.Server
	http   *httptest.Server

	mu       sync.Mutex
	ran      []string // tools that ran
	keys     []string // the X-Api-Key of every request
	subs     []string // "+uri" and "-uri" as subscribe and unsubscribe arrive
	refusals int
}

func startRemote(t *testing.T) *remote {
	t.Helper()
	r := &remote{}
	r.server = mcp.NewServer(&mcp.Implementation{Name: "remote-files", Version: "0.1"}, &mcp.ServerOptions{
		Instructions: "Remote file tools.",
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			r.note(&r.subs, "+"+req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			r.note(&r.subs, "-"+req.Params.URI)
			return nil
		},
	})
	mcp.AddTool(r.server, &mcp.Tool{Name: "read_file"}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		r.note(&r.ran, "read_file "+a.Path)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "remote contents of " + a.Path}}}, nil, nil
	})
	mcp.AddTool(r.server, &mcp.Tool{Name: "write_file"}, func(_ context.Context, _ *mcp.CallToolRequest, a writeArgs) (*mcp.CallToolResult, any, error) {
		r.note(&r.ran, "write_file "+a.Path)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + a.Path}}}, nil, nil
	})
	r.server.AddResource(&mcp.Resource{URI: "file:///readme", Name: "readme", MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "read me"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return r.server }, nil)
	r.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key := req.Header.Get("X-Api-Key")
		r.note(&r.keys, key)
		if key != upstreamKey {
			r.mu.Lock()
			r.refusals++
			r.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `ApiKey realm="remote-files"`)
			http.Error(w, "bad api key", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.http.Close)
	return r
}

func (r *remote) note(list *[]string, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, s)
}

func (r *remote) snapshot(list *[]string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), *list...)
}

// host is an SDK client on the proxy, with the notifications it received.
type host struct {
	cs           *mcp.ClientSession
	toolsChanged chan struct{}
	updated      chan string
}

// httpEnv is the proxy in front of a remote, serving over HTTP.
type httpEnv struct {
	*env
	remote *remote
	url    string // the proxy's MCP endpoint
	token  string
}

const httpPolicy = `
store: "memory:"
rules:
  - tool: "read_*"
    action: allow
  - tool: write_file
    args: {path: "/etc/*"}
    action: deny
  - tool: write_file
    action: require_approval
    allow_session: true
`

func setupHTTP(t *testing.T, mods ...func(*Listen)) *httpEnv {
	t.Helper()
	p, err := ParsePolicy([]byte(httpPolicy))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := aais.NewAuthority(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rem := startRemote(t)
	up := &Upstream{URL: rem.http.URL, Header: http.Header{}}
	if err := ParseHeaderFlag(up.Header, "X-Api-Key: "+upstreamKey); err != nil {
		t.Fatal(err)
	}
	ht := &headerTransport{base: http.DefaultTransport, header: up.Header}
	proxy, err := Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: up.URL, HTTPClient: &http.Client{Transport: ht}},
		Options{Policy: p, Approvals: NewEmbedded(auth, 10*time.Millisecond), PerSession: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.child.Close() })
	l := &Listen{Addr: "127.0.0.1:0", Token: "proxy-token-1"}
	for _, m := range mods {
		m(l)
	}
	srv := httptest.NewServer(proxy.Handler(l))
	t.Cleanup(srv.Close)
	e := &httpEnv{env: &env{t: t, auth: auth, proxy: proxy}, remote: rem, url: srv.URL + DefaultPath, token: l.Token}
	e.client = e.connect(t).cs
	return e
}

// bearer adds the proxy's token to a host's requests.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	return bearerOn{b.token, http.DefaultTransport}.RoundTrip(r)
}

type bearerOn struct {
	token string
	base  http.RoundTripper
}

func (b bearerOn) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func (e *httpEnv) connect(t *testing.T) *host {
	t.Helper()
	h := &host{toolsChanged: make(chan struct{}, 10), updated: make(chan string, 10)}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { h.toolsChanged <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { h.updated <- r.Params.URI },
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url,
		HTTPClient: &http.Client{Transport: bearer{e.token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	h.cs = cs
	return h
}

func callOn(cs *mcp.ClientSession, name string, args map[string]any) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		ch <- callResult{res, err}
	}()
	return ch
}

func TestHTTPGatedCalls(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	ir := e.client.InitializeResult()
	if ir.Instructions != "Remote file tools." || ir.Capabilities.Tools == nil || !ir.Capabilities.Tools.ListChanged ||
		ir.Capabilities.Resources == nil || !ir.Capabilities.Resources.Subscribe {
		t.Fatalf("initialize result = %s", jsonOf(t, ir))
	}
	// Allowed: forwarded as is.
	res := e.result(callOn(e.client, "read_file", map[string]any{"path": "/tmp/a"}))
	if res.IsError || text(res) != "remote contents of /tmp/a" {
		t.Fatalf("read_file = %s", jsonOf(t, res))
	}
	// Denied by the policy: never reaches the remote.
	if env := status(t, e.result(callOn(e.client, "write_file", map[string]any{"path": "/etc/passwd", "content": "x"}))); env.Status.Code != asc.PermissionDenied {
		t.Fatalf("code %d", env.Status.Code)
	}
	// Gated and approved: runs once.
	ch := callOn(e.client, "write_file", map[string]any{"path": "/tmp/ok", "content": "x"})
	req := e.pending(1)[0]
	if !strings.HasPrefix(req.Origin.SessionID, "mcp-") || req.Origin.SessionID == e.proxy.SessionID() {
		t.Fatalf("an HTTP host session's requests are in session %q, want one of its own", req.Origin.SessionID)
	}
	e.decide(&req, aais.Approve, aais.ScopeOnce, "")
	if res := e.result(ch); res.IsError || text(res) != "wrote /tmp/ok" {
		t.Fatalf("approved write_file = %s", jsonOf(t, res))
	}
	// Gated and denied: does not run.
	ch = callOn(e.client, "write_file", map[string]any{"path": "/tmp/no", "content": "x"})
	req = e.pending(1)[0]
	e.decide(&req, aais.Deny, aais.ScopeOnce, "")
	if env := status(t, e.result(ch)); env.Status.Code != asc.PermissionDenied {
		t.Fatalf("code %d", env.Status.Code)
	}
	if got := e.remote.snapshot(&e.remote.ran); fmt.Sprint(got) != "[read_file /tmp/a write_file /tmp/ok]" {
		t.Fatalf("the remote ran %q", got)
	}
	// Every request the proxy made upstream carried the key.
	keys := e.remote.snapshot(&e.remote.keys)
	if len(keys) == 0 {
		t.Fatal("the remote saw no request")
	}
	for _, k := range keys {
		if k != upstreamKey {
			t.Fatalf("a request reached the remote with X-Api-Key %q", k)
		}
	}
}

func TestHTTPSessionApprovalIsPerHostSession(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	ch := callOn(e.client, "write_file", map[string]any{"path": "/tmp/1", "content": "x"})
	req := e.pending(1)[0]
	e.decide(&req, aais.Approve, aais.ScopeSession, "")
	if res := e.result(ch); res.IsError {
		t.Fatalf("result = %s", jsonOf(t, res))
	}
	// The same host session: covered by its session approval.
	if res := e.result(callOn(e.client, "write_file", map[string]any{"path": "/tmp/2", "content": "x"})); res.IsError {
		t.Fatalf("result = %s", jsonOf(t, res))
	}
	// Another host on the same proxy: asks again.
	other := e.connect(t)
	ch = callOn(other.cs, "write_file", map[string]any{"path": "/tmp/3", "content": "x"})
	again := e.pending(1)[0]
	if again.Origin.SessionID == req.Origin.SessionID {
		t.Fatal("two host sessions share one approval session")
	}
	e.decide(&again, aais.Deny, aais.ScopeOnce, "")
	if env := status(t, e.result(ch)); env.Status.Code != asc.PermissionDenied {
		t.Fatalf("code %d", env.Status.Code)
	}
}

func TestHTTPListChangedReachesHosts(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	h := e.connect(t)
	ctx := context.Background()
	if _, err := h.cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mcp.AddTool(e.remote.server, &mcp.Tool{Name: "read_logs"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		e.remote.note(&e.remote.ran, "read_logs")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "logs"}}}, nil, nil
	})
	select {
	case <-h.toolsChanged:
	case <-time.After(20 * time.Second):
		t.Fatal("no tools/list_changed reached the host")
	}
	tools, err := h.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if fmt.Sprint(names) != "[read_file read_logs write_file]" {
		t.Fatalf("tools after the change: %v", names)
	}
	// The new tool is gated like any other: read_* is allowed.
	if res := e.result(callOn(h.cs, "read_logs", nil)); res.IsError || text(res) != "logs" {
		t.Fatalf("read_logs = %s", jsonOf(t, res))
	}
}

func TestHTTPResourceSubscriptionRelayed(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	a, b := e.connect(t), e.connect(t)
	ctx := context.Background()
	const uri = "file:///readme"
	for _, h := range []*host{a, b} {
		if err := h.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	// Two host sessions, one subscription upstream.
	if got := e.remote.snapshot(&e.remote.subs); fmt.Sprint(got) != "[+"+uri+"]" {
		t.Fatalf("the remote saw %q", got)
	}
	if err := e.remote.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	for i, h := range []*host{a, b} {
		select {
		case got := <-h.updated:
			if got != uri {
				t.Fatalf("host %d: updated %q", i, got)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("host %d: no resources/updated arrived", i)
		}
	}
	// The last host leaving unsubscribes upstream: one by unsubscribe,
	// one by hanging up.
	if err := a.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if got := e.remote.snapshot(&e.remote.subs); len(got) != 1 {
		t.Fatalf("the remote saw %q while a host is still subscribed", got)
	}
	_ = b.cs.Close()
	waitFor(t, "the upstream unsubscribe", func() bool { return len(e.remote.snapshot(&e.remote.subs)) == 2 })
	if got := e.remote.snapshot(&e.remote.subs); got[1] != "-"+uri {
		t.Fatalf("the remote saw %q", got)
	}
}

// conns remembers the connections of a host, to cut them as a host that
// vanishes would.
type conns struct {
	mu   sync.Mutex
	list []net.Conn
	gone bool // after cut, no new connection: not even the SDK's DELETE
}

func (c *conns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	gone := c.gone
	c.mu.Unlock()
	if gone {
		return nil, errors.New("this host has vanished")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		c.mu.Lock()
		c.list = append(c.list, conn)
		c.mu.Unlock()
	}
	return conn, err
}

func (c *conns) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone = true
	for _, conn := range c.list {
		_ = conn.Close()
	}
}

// TestHTTPHostHangsUpMidCall: a host leaves while its call waits for a
// human — by cancelling the call, by ending its session, or by vanishing
// (its connections cut, its session then idle). Each time the request is
// withdrawn (no reviewer can approve a call nobody waits for), the tool
// never runs, the host's call returns, and the proxy serves the next host.
func TestHTTPHostHangsUpMidCall(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t, func(l *Listen) { l.SessionTimeout = time.Second })
	for _, how := range []string{"cancel", "delete", "vanish"} {
		var cs conns
		c := mcp.NewClient(&mcp.Implementation{Name: "test-host"}, nil)
		session, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearerOn{e.token, &http.Transport{DialContext: cs.dial}}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "/tmp/" + how, "content": "x"}})
			done <- err
		}()
		req := e.pending(1)[0]
		switch how {
		case "cancel":
			cancel()
		case "delete":
			r, _ := http.NewRequest(http.MethodDelete, e.url, nil)
			r.Header.Set("Authorization", "Bearer "+e.token)
			r.Header.Set("Mcp-Session-Id", session.ID())
			// The SDK closes a session only once its calls return.
			resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(r)
			if err != nil {
				t.Fatalf("DELETE while a call waits: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("DELETE: %s", resp.Status)
			}
		case "vanish":
			cs.cut()
		}
		// The request is withdrawn, not left for a reviewer to approve.
		waitFor(t, how+": the request withdrawn", func() bool {
			st, err := e.auth.State(context.Background(), req.ID)
			return err == nil && st.Resolution != nil && st.Resolution.Event.Resolution.Outcome == aais.OutcomeCancelled
		})
		e.pending(0)
		cancel()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("%s: the call returned no error", how)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the host's call is stuck", how)
		}
		cs.cut()
	}
	// Nothing ran, and the proxy serves the next host.
	if got := e.remote.snapshot(&e.remote.ran); len(got) != 0 {
		t.Fatalf("the remote ran %q", got)
	}
	h := e.connect(t)
	if res := e.result(callOn(h.cs, "read_file", map[string]any{"path": "/tmp/after"})); res.IsError {
		t.Fatalf("result = %s", jsonOf(t, res))
	}
}

func TestHTTPProxyRefusesHostsWithoutItsToken(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	for _, tok := range []string{"", "wrong"} {
		c := mcp.NewClient(&mcp.Implementation{Name: "intruder"}, nil)
		var hc *http.Client
		if tok != "" {
			hc = &http.Client{Transport: bearer{tok}}
		}
		_, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: hc, MaxRetries: -1}, nil)
		if err == nil || !strings.Contains(err.Error(), "nauthorized") {
			t.Fatalf("token %q: err = %v", tok, err)
		}
	}
	resp, err := http.Get(strings.TrimSuffix(e.url, DefaultPath) + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another path: %s", resp.Status)
	}
	if got := e.remote.snapshot(&e.remote.ran); len(got) != 0 {
		t.Fatalf("the remote ran %q", got)
	}
}

// TestHTTPUpstreamGone: the remote server goes away; calls say so, and
// what protocol each side speaks is the session-based one.
func TestHTTPUpstreamGone(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	if v := e.client.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("the host speaks %q with the proxy", v)
	}
	if v := e.proxy.child.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("the proxy speaks %q with the remote", v)
	}
	e.remote.http.CloseClientConnections()
	e.remote.http.Close()
	env := status(t, e.result(callOn(e.client, "read_file", map[string]any{"path": "/x"})))
	if env.Status.Code != asc.DependencyUnavailable && env.Status.Code != asc.ResultStateUnknown {
		t.Fatalf("code %d", env.Status.Code)
	}
	// Nothing is left for a reviewer: a gated call is refused without asking.
	env = status(t, e.result(callOn(e.client, "write_file", map[string]any{"path": "/x", "content": "x"})))
	if env.Status.Code != asc.DependencyUnavailable {
		t.Fatalf("code %d", env.Status.Code)
	}
	e.pending(0)
}

// TestRunUpstreamRefusal runs the proxy as custos mcp-proxy does, against a
// remote that refuses a missing or wrong key: the error says so precisely
// and never shows the key.
func TestRunUpstreamRefusal(t *testing.T) {
	t.Parallel()
	rem := startRemote(t)
	p, err := ParsePolicy([]byte(httpPolicy))
	if err != nil {
		t.Fatal(err)
	}
	const wrong = "k-wrong-secret-value"
	for _, c := range []struct {
		name   string
		header http.Header
		want   string
	}{
		{"missing", http.Header{}, "no credential headers were sent"},
		{"wrong", http.Header{"X-Api-Key": {wrong}}, "sent the headers X-Api-Key (values not shown)"},
	} {
		var stderr strings.Builder
		err := Run(context.Background(), RunConfig{Policy: p, Upstream: &Upstream{URL: rem.http.URL, Header: c.header},
			Stdin: strings.NewReader(""), Stdout: &strings.Builder{}, Stderr: &stderr})
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.Status != "401 Unauthorized" || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), rem.http.URL) || !strings.Contains(err.Error(), `ApiKey realm="remote-files"`) {
			t.Fatalf("%s: err = %v", c.name, err)
		}
		if strings.Contains(err.Error(), wrong) || strings.Contains(stderr.String(), wrong) {
			t.Fatalf("%s: the secret was shown: %v\n%s", c.name, err, stderr.String())
		}
	}
}

// TestRunServesHTTP runs the whole proxy on loopback ports: a host
// reaches the remote through it, and ending ctx stops everything.
func TestRunServesHTTP(t *testing.T) {
	t.Parallel()
	rem := startRemote(t)
	p, err := ParsePolicy([]byte(httpPolicy))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, RunConfig{Policy: p, Upstream: &Upstream{URL: rem.http.URL, Header: http.Header{"X-Api-Key": {upstreamKey}}},
			Listen: &Listen{Addr: "127.0.0.1:0"}, Stderr: os.Stderr, Ready: func(a net.Addr) { ready <- a }})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-errc:
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr.String() + DefaultPath}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/x"}})
	if err != nil || res.IsError || text(res) != "remote contents of /x" {
		t.Fatalf("read_file = %v, %v", res, err)
	}
	_ = cs.Close()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
}

func TestListenChecks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		l    Listen
		want string
	}{
		{Listen{Addr: "127.0.0.1:0"}, ""},
		{Listen{Addr: "[::1]:8931"}, ""},
		{Listen{Addr: "localhost:8931", Path: "/custom/mcp"}, ""},
		{Listen{Addr: "0.0.0.0:8931"}, "not loopback: anyone who reaches it"},
		{Listen{Addr: ":8931"}, "not loopback"},
		{Listen{Addr: "0.0.0.0:8931", AllowRemote: true}, "a token is required"},
		{Listen{Addr: "0.0.0.0:8931", AllowRemote: true, Token: "t"}, ""},
		{Listen{Addr: "127.0.0.1"}, "want HOST:PORT"},
		{Listen{Addr: "127.0.0.1:1", Path: "mcp"}, "absolute path"},
		{Listen{Addr: "127.0.0.1:1", TLSCert: "c.pem"}, "both tls_cert and tls_key"},
	} {
		err := c.l.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: err = %v, want %q", c.l, err, c.want)
		}
	}
}

func TestHeaderFlags(t *testing.T) {
	t.Setenv("MCPPROXY_TEST_AUTH", "Bearer s3cret")
	for _, c := range []struct {
		arg, env string // env: an --upstream-header-env argument instead
		want     string // "" OK; else a part of the error
	}{
		{arg: "X-Api-Key: abc"},
		{arg: "x-api-key:abc"},
		{arg: "X-Api-Key abc", want: `want "Name: value"`},
		{arg: ": abc", want: "is not an HTTP header name"},
		{arg: "Bad Name: abc", want: "is not an HTTP header name"},
		{arg: "Mcp-Session-Id: abc", want: "set by the MCP transport"},
		{arg: "Content-Type: text/plain", want: "set by the MCP transport"},
		{arg: "X-Empty:   ", want: "is empty"},
		{env: "Authorization=MCPPROXY_TEST_AUTH"},
		{env: "Authorization=MCPPROXY_TEST_UNSET", want: "MCPPROXY_TEST_UNSET is not set"},
		{env: "Authorization", want: "want Name=VARIABLE"},
	} {
		h := http.Header{}
		var err error
		if c.env != "" {
			err = ParseHeaderEnvFlag(h, c.env)
		} else {
			err = ParseHeaderFlag(h, c.arg)
		}
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q%q: err = %v, want %q", c.arg, c.env, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the secret: %v", err)
		}
		if err == nil && len(h) != 1 {
			t.Errorf("%q%q: headers %v", c.arg, c.env, h)
		}
	}
	h := http.Header{}
	_ = ParseHeaderFlag(h, "X-Api-Key: a")
	if err := ParseHeaderFlag(h, "x-api-key: b"); err == nil || !strings.Contains(err.Error(), "set twice") {
		t.Errorf("a doubled header: %v", err)
	}
	// A value with a line break cannot be split into another header.
	if err := addHeader(http.Header{}, "X-A", "a\r\nX-B: b", "test"); err == nil {
		t.Error("a value with CRLF was accepted")
	}
}

func FuzzParseHeaderFlag(f *testing.F) {
	for _, s := range []string{"X-Api-Key: abc", "Authorization: Bearer x", ":", "a:b:c", "Mcp-Session-Id: 1", "X: \r\nY: z", "\x00: \x00", "ключ: значение"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		h := http.Header{}
		if err := ParseHeaderFlag(h, arg); err != nil {
			if len(h) != 0 {
				t.Fatalf("%q refused but added %v", arg, h)
			}
			return
		}
		for k, v := range h {
			if reservedHeaders[k] || len(v) != 1 || strings.ContainsAny(v[0], "\r\n\x00") || strings.ContainsAny(k, ": \r\n") {
				t.Fatalf("%q accepted as %q: %q", arg, k, v)
			}
		}
	})
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConnectRelaysOverStreams: the same relaying and gating over
// stream transports (as stdio), a host and the gated server in memory.
func TestConnectRelaysOverStreams(t *testing.T) {
	t.Parallel()
	rem := startRemote(t) // its SDK server, here reached in memory
	upC, upS := mcp.NewInMemoryTransports()
	if _, err := rem.server.Connect(context.Background(), upS, nil); err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy([]byte(httpPolicy))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := aais.NewAuthority(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := Connect(context.Background(), upC, Options{Policy: p, Approvals: NewEmbedded(auth, 10*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.child.Close() })
	hostC, hostS := mcp.NewInMemoryTransports()
	if _, err := proxy.Server().Connect(context.Background(), hostS, nil); err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 10)
	updated := make(chan string, 10)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	}).Connect(context.Background(), hostC, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	e := &env{t: t, auth: auth, proxy: proxy, client: cs}

	ch := callOn(cs, "write_file", map[string]any{"path": "/tmp/s", "content": "x"})
	req := e.pending(1)[0]
	if req.Origin.SessionID != proxy.SessionID() {
		t.Fatalf("over a stream the session is the proxy's: %q", req.Origin.SessionID)
	}
	e.decide(&req, aais.Approve, aais.ScopeOnce, "")
	if res := e.result(ch); res.IsError || text(res) != "wrote /tmp/s" {
		t.Fatalf("result = %s", jsonOf(t, res))
	}
	rem.server.RemoveTools("read_file")
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no tools/list_changed reached the host")
	}
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "file:///readme"}); err != nil {
		t.Fatal(err)
	}
	// Between in-memory peers both legs speak the 2026-07-28 revision,
	// where a subscription is a subscriptions/listen stream that Subscribe
	// does not wait for: the remote repeats its update until one arrives.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		if err := rem.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "file:///readme"}); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-updated:
			if got != "file:///readme" {
				t.Fatalf("updated %q", got)
			}
			return
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no resources/updated reached the host; the remote saw %q", rem.snapshot(&rem.subs))
		}
	}
}
