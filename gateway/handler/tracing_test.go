package handler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/custos-runtime/custos/gateway/handler"
)

// spanCtx is a context holding a span of this process (what the gateway's
// handler span is), with a tracestate.
func spanCtx(t *testing.T) (context.Context, string) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ts, err := trace.ParseTraceState("vendor=opaque")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	return trace.ContextWithSpanContext(context.Background(), sc), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
}

// headers records the trace headers of the requests a server got.
type headers struct {
	mu                sync.Mutex
	parents, statesIn []string
}

func (h *headers) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.parents = append(h.parents, r.Header.Get("Traceparent"))
		h.statesIn = append(h.statesIn, r.Header.Get("Tracestate"))
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *headers) saw(tp, ts string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.parents {
		if h.parents[i] == tp && h.statesIn[i] == ts {
			return true
		}
	}
	return false
}

func (h *headers) any() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.parents {
		if p != "" {
			return true
		}
	}
	return false
}

// The handler's span goes to the http upstream as traceparent and
// tracestate; without one, the call's trace id with a fresh span id, as
// before tracing.
func TestHTTPPropagatesTheSpan(t *testing.T) {
	var seen headers
	ts := httptest.NewServer(seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	})))
	t.Cleanup(ts.Close)
	h := newHTTP(t, handler.HTTPConfig{URL: ts.URL})
	ctx, tp := spanCtx(t)
	if _, err := h.Execute(ctx, httpCall); err != nil {
		t.Fatal(err)
	}
	if !seen.saw(tp, "vendor=opaque") {
		t.Errorf("traceparents %q, tracestates %q; want %s", seen.parents, seen.statesIn, tp)
	}
	if _, err := h.Execute(context.Background(), httpCall); err != nil {
		t.Fatal(err)
	}
	if p := seen.parents[len(seen.parents)-1]; !strings.HasPrefix(p, "00-"+httpCall.TraceID+"-") || p == tp || seen.statesIn[len(seen.statesIn)-1] != "" {
		t.Errorf("without a span: traceparent %q", p)
	}
}

// An MCP tool call carries the span in params._meta (traceparent,
// tracestate, the sender's own _meta kept) and, over Streamable HTTP, in
// the request headers; without a span, neither.
func TestMCPPropagatesTheSpan(t *testing.T) {
	var mu sync.Mutex
	var metas []map[string]any
	srv := mcp.NewServer(&mcp.Implementation{Name: "custos-test", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "add", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		metas = append(metas, req.Params.Meta)
		mu.Unlock()
		return textResult("ok"), nil
	})
	var seen headers
	ts := httptest.NewServer(seen.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	t.Cleanup(ts.Close)
	h, err := handler.NewMCP(handler.MCPConfig{URL: ts.URL + "/mcp", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })

	c := handler.Call{Capability: "acme.crm.lookup", PayloadType: handler.PayloadTypeMCPToolCall, MessageID: "msg-1",
		Args: []byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","arguments":{},"_meta":{"progressToken":"p1"}},"id":7}`)}
	if _, err := h.Execute(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if seen.any() {
		t.Errorf("without a span, traceparents %q", seen.parents)
	}
	ctx, tp := spanCtx(t)
	if _, err := h.Execute(ctx, c); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(metas) != 2 {
		t.Fatalf("%d calls", len(metas))
	}
	if _, ok := metas[0]["traceparent"]; ok || metas[0]["progressToken"] != "p1" {
		t.Errorf("_meta without a span: %v", metas[0])
	}
	if m := metas[1]; m["traceparent"] != tp || m["tracestate"] != "vendor=opaque" || m["progressToken"] != "p1" {
		t.Errorf("_meta with a span: %v", m)
	}
	if !seen.saw(tp, "vendor=opaque") {
		t.Errorf("the tools/call POST carried no traceparent: %q", seen.parents)
	}
}

// An A2A message goes with the span's traceparent.
func TestA2APropagatesTheSpan(t *testing.T) {
	agent := &stateAgent{}
	var seen headers
	ts := httptest.NewServer(seen.wrap(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agent))))
	t.Cleanup(ts.Close)
	h := newA2A(t, ts.URL, 5*time.Second)
	ctx, tp := spanCtx(t)
	if _, err := h.Execute(ctx, a2aCall("message", "")); err != nil {
		t.Fatal(err)
	}
	if !seen.saw(tp, "vendor=opaque") {
		t.Errorf("traceparents %q, want %s", seen.parents, tp)
	}
}
