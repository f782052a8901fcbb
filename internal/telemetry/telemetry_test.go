package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// Off by default; on when the file or the standard variables ask; the
// variables win over the file.
func TestSetup(t *testing.T) {
	ratio := 0.5
	for _, tc := range []struct {
		name     string
		cfg      Config
		env      map[string]string
		on       bool
		protocol string
		endpoint string
		err      string
	}{
		{name: "default", on: false},
		{name: "file otlp", cfg: Config{Exporter: "otlp", Endpoint: "http://127.0.0.1:4318"}, on: true, protocol: ProtocolHTTP, endpoint: "http://127.0.0.1:4318"},
		{name: "file endpoint alone", cfg: Config{Endpoint: "http://127.0.0.1:4317", Protocol: ProtocolGRPC}, on: true, protocol: ProtocolGRPC},
		{name: "file none", cfg: Config{Exporter: "none", Endpoint: "http://127.0.0.1:4318"}, on: false},
		{name: "env endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true, protocol: ProtocolHTTP, endpoint: "http://127.0.0.1:4318"},
		{name: "env traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		{name: "env exporter none wins", cfg: Config{Exporter: "otlp"}, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, on: false},
		{name: "env protocol wins", cfg: Config{Exporter: "otlp", Protocol: ProtocolHTTP}, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, protocol: ProtocolGRPC},
		{name: "env endpoint wins", cfg: Config{Exporter: "otlp", Endpoint: "http://file:4318"}, env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"}, on: true, endpoint: "http://env:4318"},
		{name: "sdk disabled", cfg: Config{Exporter: "otlp"}, env: map[string]string{"OTEL_SDK_DISABLED": "true"}, on: false},
		{name: "sampled", cfg: Config{Exporter: "otlp", SampleRatio: &ratio}, on: true},
		{name: "env exporter unknown", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "zipkin"},
		{name: "env protocol unknown", cfg: Config{Exporter: "otlp"}, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "http/json"},
		{name: "bad file", cfg: Config{Exporter: "jaeger"}, err: "tracing.exporter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Setup(context.Background(), tc.cfg, func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			if on := tr.Provider != nil; on != tc.on {
				t.Fatalf("on = %t, want %t", on, tc.on)
			}
			if tc.protocol != "" && tr.Protocol != tc.protocol {
				t.Errorf("protocol %q, want %q", tr.Protocol, tc.protocol)
			}
			if tc.endpoint != "" && tr.Endpoint != tc.endpoint {
				t.Errorf("endpoint %q, want %q", tr.Endpoint, tc.endpoint)
			}
		})
	}
}

// A root span takes the trace id WithTraceID put in its context; others a
// random one; span ids are never zero.
func TestIDs(t *testing.T) {
	want, _ := trace.TraceIDFromHex("5bf92f3577b34da6a3ce929d0e0e4737")
	tid, sid := IDs{}.NewIDs(WithTraceID(context.Background(), want))
	if tid != want || !sid.IsValid() {
		t.Errorf("ids %s %s, want trace %s", tid, sid, want)
	}
	a, _ := IDs{}.NewIDs(context.Background())
	b, _ := IDs{}.NewIDs(WithTraceID(context.Background(), trace.TraceID{}))
	if !a.IsValid() || !b.IsValid() || a == b || a == want {
		t.Errorf("random trace ids %s %s", a, b)
	}
	if s := (IDs{}).NewSpanID(context.Background(), want); !s.IsValid() {
		t.Error("zero span id")
	}
}
