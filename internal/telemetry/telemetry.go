// Package telemetry sets up the OpenTelemetry traces of custos serve: an
// SDK tracer provider exporting over OTLP (HTTP or gRPC), configured by
// the standard OTEL_* environment variables and the tracing section of the
// configuration, and off unless one of them asks for it.
package telemetry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config is the tracing section of the configuration. The environment
// wins over it, as CUSTOS_* variables win over the file: a setting here
// applies only when its OTEL_* variable is unset.
type Config struct {
	// Exporter is otlp or none; empty means OTEL_TRACES_EXPORTER, or
	// otlp when an OTLP endpoint is set (here or in the environment),
	// else none.
	Exporter string
	// Protocol is http/protobuf (the default) or grpc
	// (OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL).
	Protocol string
	// Endpoint is the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
	// (http://collector:4318; /v1/traces is added over HTTP). An http
	// URL exports without TLS.
	Endpoint string
	// Headers go with every export, typically credentials
	// (OTEL_EXPORTER_OTLP_HEADERS).
	Headers map[string]string
	// ServiceName is the service.name resource attribute ("custos" when
	// empty; OTEL_SERVICE_NAME).
	ServiceName string
	// SampleRatio, when set, samples that share of the traces that start
	// here, and follows the caller's decision for the others
	// (OTEL_TRACES_SAMPLER).
	SampleRatio *float64
	// Version is the service.version resource attribute.
	Version string
}

// Protocols.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Check reports what is wrong with c alone (nothing is read from the
// environment).
func (c Config) Check() error {
	var errs []error
	switch c.Exporter {
	case "", "none", "otlp":
	default:
		errs = append(errs, fmt.Errorf("tracing.exporter %q: want otlp or none", c.Exporter))
	}
	switch c.Protocol {
	case "", ProtocolHTTP, ProtocolGRPC:
	default:
		errs = append(errs, fmt.Errorf("tracing.protocol %q: want %s or %s", c.Protocol, ProtocolHTTP, ProtocolGRPC))
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			errs = append(errs, fmt.Errorf("tracing.endpoint %q: want an http or https URL without credentials", c.Endpoint))
		}
	}
	if r := c.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		errs = append(errs, fmt.Errorf("tracing.sample_ratio %v: want a number from 0 to 1", *r))
	}
	for k, v := range c.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			errs = append(errs, fmt.Errorf("tracing.headers: %q is not a header", k))
		}
	}
	return errors.Join(errs...)
}

// Tracing is the tracer provider custos serve uses: nil Provider when off.
type Tracing struct {
	// Provider is the SDK provider (nil when tracing is off).
	Provider *sdktrace.TracerProvider
	// Protocol and Endpoint say where spans go ("" when off).
	Protocol, Endpoint string
}

// Shutdown exports what is buffered and stops; nothing when off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.Provider == nil {
		return nil
	}
	return t.Provider.Shutdown(ctx)
}

// Setup builds the tracing c and the environment (getenv is os.Getenv in
// production) ask for. Off, it returns a Tracing with no provider and
// costs nothing.
func Setup(ctx context.Context, c Config, getenv func(string) string) (*Tracing, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return &Tracing{}, nil
	}
	envEndpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if exporter == "" {
		exporter = c.Exporter
	}
	if exporter == "" && (envEndpoint || c.Endpoint != "") {
		exporter = "otlp"
	}
	switch exporter {
	case "", "none":
		return &Tracing{}, nil
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: custos exports otlp or none", exporter)
	}
	protocol := first(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), c.Protocol, ProtocolHTTP)
	endpoint := ""
	if !envEndpoint && c.Endpoint != "" {
		endpoint = strings.TrimSuffix(c.Endpoint, "/")
	}
	headers := c.Headers
	if getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS") != "" || getenv("OTEL_EXPORTER_OTLP_HEADERS") != "" {
		headers = nil
	}
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case ProtocolHTTP:
		var opts []otlptracehttp.Option
		if endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
		}
		if len(headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(headers))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
		}
		if len(headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(headers))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("OTLP protocol %q: custos exports %s or %s", protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	name := c.ServiceName
	if name == "" {
		name = "custos"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if c.Version != "" {
		attrs = append(attrs, attribute.String("service.version", c.Version))
	}
	// Later detectors win: the environment over the file.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithIDGenerator(IDs{})}
	if c.SampleRatio != nil && getenv("OTEL_TRACES_SAMPLER") == "" {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*c.SampleRatio))))
	}
	shown := endpoint
	if shown == "" {
		shown = first(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "the exporter's default")
	}
	return &Tracing{Provider: sdktrace.NewTracerProvider(opts...), Protocol: protocol, Endpoint: shown}, nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// traceIDKey carries the trace id a root span takes (WithTraceID).
type traceIDKey struct{}

// WithTraceID returns ctx with the trace id a span started from it without
// a parent takes, with IDs as the provider's generator: a request that
// names its trace only in its ARSIA envelope (context.trace_id) gets its
// spans in that trace.
func WithTraceID(ctx context.Context, id trace.TraceID) context.Context {
	if !id.IsValid() {
		return ctx
	}
	return context.WithValue(ctx, traceIDKey{}, id)
}

// IDs generates random trace and span ids, and the trace id WithTraceID
// put in the context for a root span.
type IDs struct{}

// NewIDs returns the ids of a root span.
func (IDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, ok := ctx.Value(traceIDKey{}).(trace.TraceID)
	if !ok {
		for !tid.IsValid() {
			_, _ = rand.Read(tid[:]) // never fails (crypto/rand, Go 1.24+)
		}
	}
	return tid, newSpanID()
}

// NewSpanID returns the id of a child span.
func (IDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		_, _ = rand.Read(s[:])
	}
	return s
}
