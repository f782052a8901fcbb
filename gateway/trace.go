package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/custos-runtime/custos/arsia"
)

// traceKey carries a request's W3C trace id through the pipeline, so that
// replies, ASC provenance and logs name the trace the sender started.
type traceKey struct{}

func withTrace(ctx context.Context, traceID string) context.Context {
	if !validTraceID(traceID) {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, traceID)
}

func traceOf(ctx context.Context) string {
	t, _ := ctx.Value(traceKey{}).(string)
	return t
}

// envelopeTrace is the trace id of a decoded envelope's context, "" when it
// has none or a malformed one (L1 validation refuses the latter later).
func envelopeTrace(env map[string]any) string {
	c, _ := env["context"].(map[string]any)
	t, _ := c["trace_id"].(string)
	if !validTraceID(t) {
		return ""
	}
	return t
}

// validTraceID: 32 lower-case hex digits, not all zero (W3C Trace Context).
func validTraceID(t string) bool {
	if len(t) != 32 {
		return false
	}
	zero := true
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '0':
		case c >= '1' && c <= '9', c >= 'a' && c <= 'f':
			zero = false
		default:
			return false
		}
	}
	return !zero
}

// build returns the options of a reply: its time and the request's trace.
func (g *Gateway) build(ctx context.Context, now time.Time) arsia.BuildOptions {
	o := arsia.BuildOptions{Now: now}
	if t := traceOf(ctx); t != "" {
		o.Context = &arsia.Context{TraceID: t}
	}
	return o
}

func (g *Gateway) buildTTL(ctx context.Context, now time.Time, ttl time.Duration) arsia.BuildOptions {
	o := g.build(ctx, now)
	o.TTL = ttl
	return o
}

// log is the logger with the request's trace id, and the id of the span
// the record is written in when tracing is on.
func (g *Gateway) log(ctx context.Context) *slog.Logger {
	t := traceOf(ctx)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !sc.IsRemote() {
		if st := sc.TraceID().String(); t == "" || t == st {
			return g.o.Logger.With("trace_id", st, "span_id", sc.SpanID().String())
		}
	}
	if t != "" {
		return g.o.Logger.With("trace_id", t)
	}
	return g.o.Logger
}

// agentStatus puts the ASC status in an ARSIA error's details
// (details.agent_status): its code, unless already set, and the
// provenance — this gateway and the request's trace.
func (g *Gateway) agentStatus(ctx context.Context, e *arsia.Error) {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	st, _ := e.Details["agent_status"].(map[string]any)
	if st == nil {
		st = map[string]any{"code": int(e.AsASC().Code())}
		e.Details["agent_status"] = st
	}
	prov := map[string]any{"agent_id": g.o.Agent}
	if t := traceOf(ctx); t != "" {
		prov["trace_id"] = t
	}
	st["provenance"] = prov
}

// signError signs an ARSIA error to the sender, with its ASC status.
func (g *Gateway) signError(ctx context.Context, to, correlationID string, e *arsia.Error, now time.Time) (json.RawMessage, error) {
	g.agentStatus(ctx, e)
	// ARSIA errors carry printable ASCII: a description that is not (a
	// handler's or validator's words) is escaped, never a reason to
	// answer unsigned.
	e.Description = asciiDescription(e.Description)
	// Nor are missing required details (a validator's not_implemented
	// without supported_versions, a certificate refusal without a reason).
	switch arsia.WireCode(e.Code) {
	case arsia.CodeNotImplemented:
		if _, ok := e.Details["supported_versions"]; !ok {
			e.Details["supported_versions"] = arsia.SupportedVersions().Details()
		}
	case arsia.CodeCertificateInvalid, arsia.CodeCertificateExpired, arsia.CodeKeyMismatch, arsia.CodeCertificateRevoked:
		if _, ok := e.Details["reason"]; !ok {
			e.Details["reason"] = e.Code
		}
	}
	// Nor is a message id that is no UUID: the error correlates to one
	// derived from it (correlationOf), and says so.
	if !arsia.ValidMessageID(strings.ToLower(correlationID)) {
		correlationID = correlationOf(correlationID)
		e.Details["correlation_id_derived_from"] = "/id"
	}
	return g.sign(arsia.NewError(g.o.Agent, to, correlationID, e, g.build(ctx, now)))
}

// correlationOf is the correlation id of an error answering a message
// whose id is not a UUID v4 (ARSIA correlation ids must be): the first 16
// bytes of the SHA-256 of the id, formatted as a UUID v4 (version and
// variant bits set), so that the sender can compute it too.
func correlationOf(id string) string {
	h := sha256.Sum256([]byte(id))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}
