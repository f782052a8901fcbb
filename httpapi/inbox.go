package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/internal/limits"
	"github.com/custos-runtime/custos/internal/routes"
)

// ARSIAMediaType is the media type of ARSIA messages on the wire.
const ARSIAMediaType = "application/arsia+json"

// InboxOptions configures the ARSIA endpoints of a gateway.
type InboxOptions struct {
	Gateway *gateway.Gateway
	// MaxBody caps a request (1 MiB when zero).
	MaxBody int64
	// Metadata is the discovery document served at /.well-known/arsia and
	// JWKS the gateway's public keys at /.well-known/arsia/jwks.json.
	Metadata, JWKS json.RawMessage
	// Discovery, when set, gives the discovery document at each request
	// instead of Metadata: a gateway whose capabilities change on reload
	// publishes the ones it serves now.
	Discovery func() json.RawMessage
	// PublicURL is the gateway's external base URL (the DPoP htu of the
	// inbox is PublicURL + the request path); empty means the request's
	// own scheme and Host.
	PublicURL string
	// Logger receives the store failures the inbox answers 503 for
	// (nothing is logged when nil).
	Logger *slog.Logger
	// Ready reports whether the gateway can serve (its stores answer).
	Ready func(context.Context) error
	// Limits, when set, are the transport limits in front of the inbox
	// (Limits.Handler, Limits.Listener): the inbox counts its own
	// refusals there and /metrics reports them.
	Limits *Limits
	// Brokers, when set, answers broker discovery (ARSIA-Routing §7.2):
	// the Compliance Brokers that serve a residency zone, for
	// GET /.well-known/arsia/brokers?residency={zone}.
	Brokers func(residency string) []arsia.BrokerEntry
	// Metrics are gathered on /metrics after the gateway's registry
	// (Gateway.Metrics) and the transport's counters: other surfaces'
	// metrics on registries of their own (nil for none).
	Metrics prometheus.Gatherer
}

// NewInbox returns the handler of
//
//	POST /v1/arsia/inbox               a signed ARSIA request in, the signed reply out
//	GET  /v1/arsia/inbox               405: a short page (or problem JSON) saying what the endpoint is
//	GET  /v1/arsia/exchanges/{id}      the current reply of an exchange (status URL)
//	GET  /v1/arsia/exchanges/{id}/decision  its signed approval_decision, once decided
//	GET  /.well-known/arsia            the gateway's discovery document
//	GET  /.well-known/arsia/jwks.json  its public keys (signing; encryption, "use": "enc")
//	GET  /.well-known/arsia/brokers    the brokers for ?residency={zone} (when Brokers is set)
//	GET  /healthz, /readyz             liveness and readiness
//	GET  /metrics                      Prometheus text format (OpenMetrics, with
//	                                   exemplars, when the scraper asks for it)
//
// The inbox accepts only application/arsia+json (v=1 when the parameter is
// given): anything else is 415; a body over MaxBody is 413, one that does
// not arrive within the read deadline 408.
func NewInbox(o InboxOptions) (http.Handler, error) {
	if o.Gateway == nil {
		return nil, errors.New("httpapi: inbox without a gateway")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = limits.MessageBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// lookupFailed answers a failed read of an exchange: an unknown id is
	// 404, a store that failed 503 (logged, not told to the client).
	lookupFailed := func(w http.ResponseWriter, r *http.Request, err error) {
		if errors.Is(err, exchange.ErrNotFound) {
			problem(w, asc.NotFound, http.StatusNotFound, "No such exchange.")
			return
		}
		o.Logger.ErrorContext(r.Context(), "reading an exchange", "exchange", r.PathValue("id"), "err", err)
		problem(w, asc.DependencyUnavailable, http.StatusServiceUnavailable, "The exchange store is unavailable; try again.")
	}
	mux := routes.New()
	mux.HandleFunc("POST /v1/arsia/inbox", func(w http.ResponseWriter, r *http.Request) {
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != ARSIAMediaType || (params["v"] != "" && params["v"] != "1") {
			problem(w, asc.InvalidRequest, http.StatusUnsupportedMediaType, "Send ARSIA messages as application/arsia+json; v=1.")
			return
		}
		body, ok := readInboxBody(w, r, o.MaxBody, o.Limits)
		if !ok {
			return
		}
		writeReply(w, o.Gateway.Receive(r.Context(), gateway.Inbound{Body: body,
			Authorization: r.Header.Get("Authorization"), DPoP: r.Header.Get("DPoP"),
			IdempotencyKey: r.Header.Get("Idempotency-Key"), Method: r.Method, URL: requestURL(r, o.PublicURL),
			TraceParent: r.Header.Get("Traceparent"), TraceState: r.Header.Get("Tracestate"),
			RelayVia: r.Header.Values(gateway.RelayViaHeader)}))
	})
	// Someone who opens the agents' endpoint in a browser learns what it
	// is and where the reviewers' inbox is, instead of a bare 405.
	mux.HandleFunc("GET /v1/arsia/inbox", inboxGuide)
	mux.HandleFunc("GET /v1/arsia/exchanges/{id}", func(w http.ResponseWriter, r *http.Request) {
		rep, err := o.Gateway.Exchange(r.Context(), r.PathValue("id"))
		if err != nil {
			lookupFailed(w, r, err)
			return
		}
		writeReply(w, rep)
	})
	mux.HandleFunc("GET /v1/arsia/exchanges/{id}/decision", func(w http.ResponseWriter, r *http.Request) {
		d, err := o.Gateway.Decision(r.Context(), r.PathValue("id"))
		switch {
		case err != nil:
			lookupFailed(w, r, err)
		case d == nil:
			problem(w, asc.NotFound, http.StatusNotFound, "No approval decision: the request needed none, or it is still waiting.")
		default:
			w.Header().Set("Content-Type", ARSIAMediaType+"; v=1")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(d)
		}
	})
	static := func(path string, body json.RawMessage, ct string) {
		if body == nil {
			return
		}
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", ct)
			w.Header().Set("Cache-Control", "max-age=300")
			_, _ = w.Write(body)
		})
	}
	if o.Discovery != nil {
		mux.HandleFunc("GET /.well-known/arsia", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "max-age=300")
			_, _ = w.Write(o.Discovery())
		})
	} else {
		static("/.well-known/arsia", o.Metadata, "application/json")
	}
	static("/.well-known/arsia/jwks.json", o.JWKS, "application/jwk-set+json")
	if o.Brokers != nil {
		mux.HandleFunc("GET /.well-known/arsia/brokers", func(w http.ResponseWriter, r *http.Request) {
			zone := r.URL.Query().Get("residency")
			if zone == "" || len(zone) > 64 {
				problem(w, asc.InvalidRequest, http.StatusBadRequest, "Name the data residency zone: /.well-known/arsia/brokers?residency=EU.")
				return
			}
			list := []map[string]any{}
			for _, b := range o.Brokers(zone) {
				list = append(list, b.Map())
			}
			b, err := json.Marshal(list)
			if err != nil {
				problem(w, asc.InternalError, http.StatusInternalServerError, "The broker list could not be encoded.")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "max-age=300")
			_, _ = w.Write(b)
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	gather := prometheus.Gatherers{o.Gateway.Metrics()}
	if o.Limits != nil {
		transport := prometheus.NewRegistry()
		if err := transport.Register(o.Limits); err != nil {
			return nil, err
		}
		gather = append(gather, transport)
	}
	if o.Metrics != nil {
		gather = append(gather, o.Metrics)
	}
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		serveMetrics(w, r, gather, o.Logger)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if o.Ready != nil {
			if err := o.Ready(r.Context()); err != nil {
				o.Logger.WarnContext(r.Context(), "not ready", "err", err)
				problem(w, asc.DependencyUnavailable, http.StatusServiceUnavailable, "Not ready: a store does not answer.")
				return
			}
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	return mux, nil
}

// inboxGuideText says what the agents' endpoint is, for a person.
const inboxGuideText = "This is the ARSIA inbox of a Custos gateway: agents send signed requests here " +
	"with POST, as application/arsia+json; v=1. Reviewers open / in a browser (the web inbox). " +
	"The gateway describes itself at /.well-known/arsia; docs/gateway.md in the Custos repository explains the endpoints."

const inboxGuideHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Custos: the agents' endpoint</title></head>
<body>
<h1>This is the agents' endpoint</h1>
<p>Agents send signed ARSIA requests here with <code>POST</code>, as <code>application/arsia+json; v=1</code>.
It has nothing to show in a browser.</p>
<p>Reviewers: the web inbox is at <a href="/">/</a>.</p>
<p>The gateway describes itself at <a href="/.well-known/arsia">/.well-known/arsia</a>;
<code>docs/gateway.md</code> in the Custos repository explains the endpoints.</p>
</body></html>
`

// inboxGuide answers GET on the inbox: 405 (only POST is served there)
// with a page for a browser, a problem document for anything else.
func inboxGuide(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST")
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		problem(w, asc.InvalidRequest, http.StatusMethodNotAllowed, inboxGuideText)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusMethodNotAllowed)
	_, _ = io.WriteString(w, inboxGuideHTML)
}

func writeReply(w http.ResponseWriter, rep gateway.Reply) {
	if rep.ExchangeID != "" {
		w.Header().Set("Custos-Exchange", rep.ExchangeID)
	}
	if rep.RetryAfter > 0 {
		secs := int64(rep.RetryAfter.Seconds())
		if time.Duration(secs)*time.Second < rep.RetryAfter {
			secs++
		}
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if rep.Envelope == nil {
		code := asc.InternalError
		detail := "The gateway could not answer."
		if rep.Problem != nil {
			code, detail = rep.Problem.Code(), rep.Problem.Envelope.UserMessage()
			// The gateway's problems describe the sender's own input.
			if m := rep.Problem.Envelope.Message; m != nil && m.Developer != "" {
				detail = m.Developer
			}
		}
		problem(w, code, rep.Status, detail)
		return
	}
	ct := ARSIAMediaType + "; v=1"
	if rep.ContentType != "" {
		// A relayed reply, as the recipient labelled it.
		ct = rep.ContentType
		w.Header().Set("X-Content-Type-Options", "nosniff")
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(rep.Status)
	_, _ = w.Write(rep.Envelope)
}

// serveMetrics writes what g gathers in the format the scraper asked for
// (text, OpenMetrics with exemplars, protobuf); a store that does not
// answer makes it 503, as a half-read scrape would mislead.
func serveMetrics(w http.ResponseWriter, r *http.Request, g prometheus.Gatherer, log *slog.Logger) {
	mfs, err := g.Gather()
	if err != nil {
		log.ErrorContext(r.Context(), "gathering metrics", "err", err)
		problem(w, asc.DependencyUnavailable, http.StatusServiceUnavailable, "Metrics unavailable: a store does not answer.")
		return
	}
	format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultOpenMetricsAcceptedFormats()...)
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			problem(w, asc.InternalError, http.StatusInternalServerError, "Metrics could not be encoded.")
			return
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil {
			problem(w, asc.InternalError, http.StatusInternalServerError, "Metrics could not be encoded.")
			return
		}
	}
	w.Header().Set("Content-Type", string(format))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// requestURL is the absolute URL a request was sent to, without its query.
func requestURL(r *http.Request, public string) string {
	if public != "" {
		return strings.TrimSuffix(public, "/") + r.URL.Path
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.Path
}
