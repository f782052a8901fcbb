package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
)

// otlpSink keeps the spans an OTLP receiver got, with the service name of
// their resource.
type otlpSink struct {
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string
	*tracepb.Span
}

func (s *otlpSink) add(req *coltrace.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attrString(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans = append(s.spans, receivedSpan{service, sp})
			}
		}
	}
}

func (s *otlpSink) all() []receivedSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]receivedSpan(nil), s.spans...)
}

// Export is the OTLP/gRPC trace service.
type grpcSink struct {
	coltrace.UnimplementedTraceServiceServer
	sink *otlpSink
}

func (g grpcSink) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.sink.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// otlpHTTPReceiver is an OTLP/HTTP receiver on loopback: POST /v1/traces,
// a protobuf ExportTraceServiceRequest (gzip or not), decoded.
func otlpHTTPReceiver(t *testing.T) (*otlpSink, string) {
	sink := &otlpSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sink.add(&req)
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return sink, srv.URL
}

func attrString(attrs []*commonpb.KeyValue, key string) string {
	for _, a := range attrs {
		if a.GetKey() == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

func attrValue(attrs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, a := range attrs {
		if a.GetKey() == key {
			return a.GetValue()
		}
	}
	return nil
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

// byName returns the spans of a trace with that name.
func byName(spans []receivedSpan, traceID, name string) []receivedSpan {
	var out []receivedSpan
	for _, s := range spans {
		if hexOf(s.GetTraceId()) == traceID && s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

// children are the names of the spans whose parent is id.
func children(spans []receivedSpan, id []byte) []string {
	var out []string
	for _, s := range spans {
		if bytes.Equal(s.GetParentSpanId(), id) {
			out = append(out, s.GetName())
		}
	}
	return out
}

// custos serve, with OTLP/HTTP export configured the standard way (the
// OTEL_* variables), traces what it receives into an OTLP receiver on
// loopback: a request with a W3C traceparent is its child (tracestate
// kept), with its stages and handler call as children and the ASC status
// as attributes; a request naming its trace only in the envelope starts a
// span in that trace, notes the wait for a human (pending approval,
// agent.human_action.required), and the exchange resumes in a child span
// whose handler call propagates its traceparent to the upstream. Logs name
// the request's span.
func TestServeTracesOverOTLPHTTP(t *testing.T) {
	sink, endpoint := otlpHTTPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_SERVICE_NAME", "custos-under-test")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil)
	stopped := false
	defer func() {
		if !stopped {
			g.stop()
		}
	}()

	const (
		inTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		inSpan   = "00f067aa0ba902b7"
		envTrace = "5bf92f3577b34da6a3ce929d0e0e4737"
	)
	hdr := http.Header{"Traceparent": {"00-" + inTrace + "-" + inSpan + "-01"}, "Tracestate": {"vendor=opaque"}}
	code, reply, _ := g.sendBuilt(t, "demo.echo", map[string]any{"text": "hi"},
		arsia.BuildOptions{Compliance: map[string]any{"profile": "GDPR-STANDARD"}}, hdr)
	if code != 200 {
		t.Fatalf("echo: %d %v", code, reply)
	}
	// The inbound trace is the request's: the reply names it.
	if c, _ := reply["context"].(map[string]any); c["trace_id"] != inTrace {
		got := c["trace_id"]
		t.Errorf("reply context.trace_id %v, want the traceparent's %s", got, inTrace)
	}

	code, _, rh := g.sendBuilt(t, "billing.invoice.create", map[string]any{"amount": "1.00"},
		arsia.BuildOptions{Context: &arsia.Context{TraceID: envTrace}, Compliance: map[string]any{"profile": "EU-AI-ACT-HIGH-RISK"}}, nil)
	if code != 202 {
		t.Fatalf("high-risk request: %d", code)
	}
	g.decide(t, aais.Approve)
	if code, _ := g.awaitFinal(t, rh.Get("Custos-Exchange")); code != 200 {
		t.Fatalf("after approval: %d", code)
	}
	upstreamTP, _ := g.upstreamTrace.Load().(string)
	logs := g.log.String()
	g.stop() // flushes the batch to the receiver
	stopped = true
	spans := sink.all()

	// 1. The traceparent's child.
	recv := byName(spans, inTrace, "custos.receive")
	if len(recv) != 1 {
		t.Fatalf("%d custos.receive spans in %s; spans: %v", len(recv), inTrace, names(spans))
	}
	r := recv[0]
	if hexOf(r.GetParentSpanId()) != inSpan || r.GetKind() != tracepb.Span_SPAN_KIND_SERVER || r.GetTraceState() != "vendor=opaque" {
		t.Errorf("receive span: parent %x kind %v tracestate %q", r.GetParentSpanId(), r.GetKind(), r.GetTraceState())
	}
	if r.service != "custos-under-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", r.service)
	}
	for k, want := range map[string]string{"custos.result": "ok", "arsia.capability": "demo.echo", "arsia.sender": sender, "agent.status.name": "SUCCESS"} {
		if got := attrString(r.GetAttributes(), k); got != want {
			t.Errorf("receive span %s = %q, want %q", k, got, want)
		}
	}
	if v := attrValue(r.GetAttributes(), "http.response.status_code"); v.GetIntValue() != 200 {
		t.Errorf("http.response.status_code %v", v)
	}
	kids := strings.Join(children(spans, r.GetSpanId()), ",")
	if kids != "custos.verify,custos.validate,custos.authorize,custos.commit,custos.handler,custos.commit" {
		t.Errorf("children of the receive span: %s", kids)
	}
	if !strings.Contains(logs, "span_id="+hexOf(r.GetSpanId())) || !strings.Contains(logs, "trace_id="+inTrace) {
		t.Errorf("the request log names neither its trace nor its span (%x):\n%s", r.GetSpanId(), logs)
	}

	// 2. The envelope's trace, the wait, the resumption.
	recv = byName(spans, envTrace, "custos.receive")
	if len(recv) != 1 {
		t.Fatalf("%d custos.receive spans in %s; spans: %v", len(recv), envTrace, names(spans))
	}
	p := recv[0]
	if len(p.GetParentSpanId()) != 0 {
		t.Errorf("the envelope-traced request has parent %x", p.GetParentSpanId())
	}
	if v := attrValue(p.GetAttributes(), "agent.human_action.required"); !v.GetBoolValue() {
		t.Errorf("pending request: agent.human_action.required %v", v)
	}
	if v := attrValue(p.GetAttributes(), "agent.status.code"); v.GetIntValue() != 3002 {
		t.Errorf("pending request: agent.status.code %v, want 3002", v)
	}
	if ev := p.GetEvents(); len(ev) != 1 || ev[0].GetName() != "approval.pending" {
		t.Errorf("pending request events: %v", ev)
	}
	if kids := strings.Join(children(spans, p.GetSpanId()), ","); kids != "custos.verify,custos.validate,custos.authorize,custos.commit,custos.resume" {
		t.Errorf("children of the pending request's span: %s", kids)
	}
	res := byName(spans, envTrace, "custos.resume")
	if len(res) != 1 {
		t.Fatalf("%d custos.resume spans", len(res))
	}
	if ev := res[0].GetEvents(); len(ev) != 1 || ev[0].GetName() != "approval.resolved" || attrString(ev[0].GetAttributes(), "aais.outcome") != "approved" {
		t.Errorf("resume events: %v", ev)
	}
	if attrString(res[0].GetAttributes(), "agent.status.name") != "SUCCESS" {
		t.Errorf("resume span attributes: %v", res[0].GetAttributes())
	}
	if kids := strings.Join(children(spans, res[0].GetSpanId()), ","); kids != "custos.handler,custos.commit" {
		t.Errorf("children of the resume span: %s", kids)
	}
	h := byName(spans, envTrace, "custos.handler")
	if len(h) != 1 {
		t.Fatalf("%d handler spans", len(h))
	}
	if want := "00-" + envTrace + "-" + hexOf(h[0].GetSpanId()) + "-01"; upstreamTP != want {
		t.Errorf("upstream traceparent %q, want the handler span's %q", upstreamTP, want)
	}
}

func names(spans []receivedSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, hexOf(s.GetTraceId())+"/"+s.GetName())
	}
	return out
}

// The gRPC exporter, configured in YAML: the spans reach an OTLP/gRPC
// receiver on loopback, under the default service name.
func TestServeTracesOverOTLPGRPC(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME"} {
		t.Setenv(k, "")
	}
	sink := &otlpSink{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, grpcSink{sink: sink})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil,
		"tracing:\n  exporter: otlp\n  protocol: grpc\n  endpoint: http://"+ln.Addr().String()+"\n")
	code, reply, _ := g.send(t, "demo.echo", "GDPR-STANDARD", map[string]any{"text": "hi"}, nil)
	if code != 200 {
		t.Fatalf("echo: %d %v", code, reply)
	}
	g.stop()
	var recv []receivedSpan
	for _, s := range sink.all() {
		if s.GetName() == "custos.receive" {
			recv = append(recv, s)
		}
	}
	if len(recv) != 1 || recv[0].service != "custos" || len(recv[0].GetParentSpanId()) != 0 {
		t.Fatalf("receive spans over gRPC: %v", names(sink.all()))
	}
	if kids := strings.Join(children(sink.all(), recv[0].GetSpanId()), ","); kids != "custos.verify,custos.validate,custos.authorize,custos.commit,custos.handler,custos.commit" {
		t.Errorf("children: %s", kids)
	}
}
