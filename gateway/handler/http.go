package handler

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/jcs"
)

// Defaults and bounds shared by the built-in handlers.
const (
	// DefaultTimeout bounds one execution when a configuration says 0.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxResponseBytes caps an upstream answer or a program's output
	// when a configuration says 0.
	DefaultMaxResponseBytes = 1 << 20
	// MaxResponseBytesLimit is the largest cap a configuration may set: the
	// most package jcs decodes.
	MaxResponseBytesLimit = jcs.DefaultMaxSize
	// maxRetryAfter caps a Retry-After delay taken from an upstream.
	maxRetryAfter = 24 * time.Hour
)

// HTTPConfig configures the http handler.
type HTTPConfig struct {
	// URL is the upstream endpoint: an absolute http or https URL without
	// user information or fragment, at most 4096 bytes. It is the action's
	// resource, so changing it makes pending approvals stale.
	URL string
	// Timeout bounds one call, from connecting to reading the whole answer.
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes caps the answer's body. 0 means
	// DefaultMaxResponseBytes; at most MaxResponseBytesLimit.
	MaxResponseBytes int64
	// Headers are sent with every call, typically the gateway's credentials
	// for the upstream. They are not part of the action (they may hold
	// secrets). Headers the handler sets itself, hop-by-hop headers and
	// X-Custos-* are refused.
	Headers http.Header
	// Client sends the requests; nil means a client on
	// http.DefaultTransport. The handler uses a copy whose redirect policy
	// refuses every redirect and which has no cookie jar, so that nothing
	// one caller's upstream answer sets reaches another caller's call.
	Client *http.Client
}

// HTTP is the built-in handler that POSTs the arguments to an upstream URL
// and maps its answer: a 2xx JSON object is the result, anything else an
// ASC error (see the package documentation for the table).
//
// Redirects are never followed, to the same host or another: the reviewer
// approved sending the arguments to one URL, and a 307/308 would resend them
// elsewhere while a 303 after a POST means the upstream has already acted.
// A 3xx answer is reported as 4003 GUARDRAIL_BLOCKED with side effects
// possible; configure the final URL instead.
type HTTP struct {
	url     string
	host    string
	timeout time.Duration
	max     int64
	headers http.Header
	client  *http.Client
	now     func() time.Time
}

// reservedHeaders are set by the handler or by net/http and may not be
// configured.
var reservedHeaders = map[string]bool{
	"Accept": true, "Connection": true, "Content-Length": true, "Content-Type": true,
	"Expect": true, "Host": true, "Idempotency-Key": true, "Keep-Alive": true,
	"Proxy-Connection": true, "Te": true, "Traceparent": true, "Tracestate": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "X-Correlation-Id": true,
}

// NewHTTP validates cfg and returns the handler. Errors wrap ErrConfig.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	u, err := url.Parse(cfg.URL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: url: %v", ErrConfig, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: url: scheme must be http or https", ErrConfig)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w: url: no host", ErrConfig)
	case u.User != nil:
		return nil, fmt.Errorf("%w: url: user information is not allowed (it would be shown to reviewers); use Headers", ErrConfig)
	case u.Fragment != "" || strings.Contains(cfg.URL, "#"):
		return nil, fmt.Errorf("%w: url: a fragment is not allowed", ErrConfig)
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: url: opaque URLs are not allowed", ErrConfig)
	}
	resource := u.String()
	if len(resource) > maxResourceLen || !utf8.ValidString(resource) {
		return nil, fmt.Errorf("%w: url: longer than %d bytes", ErrConfig, maxResourceLen)
	}
	h := &HTTP{url: resource, host: u.Host, timeout: cfg.Timeout, max: cfg.MaxResponseBytes, now: time.Now}
	if h.timeout, h.max, err = handlerLimits(cfg.Timeout, cfg.MaxResponseBytes, "MaxResponseBytes"); err != nil {
		return nil, err
	}
	h.headers = make(http.Header, len(cfg.Headers))
	for name, values := range cfg.Headers {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("%w: header name %q", ErrConfig, name)
		}
		key := http.CanonicalHeaderKey(name)
		if reservedHeaders[key] || strings.HasPrefix(key, "X-Custos-") {
			return nil, fmt.Errorf("%w: header %s is set by the handler", ErrConfig, key)
		}
		for _, v := range values {
			if !validHeaderValue(v) {
				return nil, fmt.Errorf("%w: header %s has an invalid value", ErrConfig, key)
			}
			h.headers.Add(key, v)
		}
	}
	client := http.Client{}
	if cfg.Client != nil {
		client = *cfg.Client
	}
	client.Jar = nil
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h.client = &client
	return h, nil
}

// Describe says that the call sends its arguments to the configured URL.
func (h *HTTP) Describe(Call) (Descriptor, error) {
	return Descriptor{
		Kind:        "http.request",
		Resource:    h.url,
		Effects:     []string{"Sends the arguments to " + h.host},
		Risk:        aais.RiskMedium,
		RiskReasons: []string{"Sends the arguments to an upstream service, which may act on them"},
	}, nil
}

// Execute POSTs c.Args, exactly as received, to the URL with Content-Type
// application/json, X-Custos-Capability, X-Custos-Payload-Type,
// X-Custos-From and X-Custos-Message-ID, X-Correlation-ID (the correlation
// id, or else the message id), a W3C traceparent (and tracestate) naming
// the handler's span when the gateway traces, else when c.TraceID is a
// valid trace id (with a fresh span id), Idempotency-Key when the call has one,
// and the configured headers. Identifiers that cannot travel in a header
// (control characters) are left out rather than sent altered.
func (h *HTTP) Execute(ctx context.Context, c Call) (Result, error) {
	if _, err := argsLimits.Decode(c.Args); err != nil {
		return Result{}, callError("arguments: %v", err)
	}
	if !validHeaderValue(c.Capability) || c.Capability == "" {
		return Result{}, callError("capability %q cannot be sent", c.Capability)
	}
	tctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	tctx, sent := withSendTrace(tctx)
	req, err := http.NewRequestWithContext(tctx, http.MethodPost, h.url, bytes.NewReader(c.Args))
	if err != nil {
		return Result{}, fail(asc.InternalError, refused, "http: %v", err)
	}
	for k, vs := range h.headers {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Custos-Capability", c.Capability)
	setIfValid(req.Header, "X-Custos-Payload-Type", c.PayloadType)
	setIfValid(req.Header, "X-Custos-From", c.From)
	setIfValid(req.Header, "X-Custos-Message-ID", c.MessageID)
	corr := c.CorrelationID
	if corr == "" {
		corr = c.MessageID
	}
	setIfValid(req.Header, "X-Correlation-ID", corr)
	setIfValid(req.Header, "Idempotency-Key", c.IdempotencyKey)
	if c.ExplanationRequired {
		req.Header.Set(ExplanationRequiredHeader, "true")
	}
	if !injectTrace(ctx, req.Header) {
		if tp := traceparent(c.TraceID); tp != "" {
			req.Header.Set("Traceparent", tp)
		}
	}

	resp, err := h.client.Do(req)
	if err != nil {
		return Result{}, transportError(ctx, tctx, err, sent.mayHaveSent(), h.timeout)
	}
	defer func() {
		// Drain a little so the connection can be reused; never much.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return h.success(ctx, tctx, resp, c)
	}
	return Result{}, h.statusError(resp)
}

func (h *HTTP) success(ctx, tctx context.Context, resp *http.Response, c Call) (Result, error) {
	if resp.StatusCode == http.StatusNoContent {
		return Result{PayloadType: c.PayloadType, Data: json.RawMessage(`{}`), Explanation: explanationHeader(resp.Header)}, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun,
				"http: upstream answered %d with content type %q, not JSON", resp.StatusCode, sanitize([]byte(ct)))
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.max+1))
	if err != nil {
		if tctx.Err() != nil {
			// The upstream answered 2xx and the rest of its answer did
			// not come in time: it may well have acted.
			return Result{}, unanswered(ctx, "http: upstream answered %d but its body did not arrive within %s", resp.StatusCode, h.timeout)
		}
		return Result{}, fail(asc.DependencyUnavailable, mayHaveRun, "http: reading the answer: %v", err)
	}
	if int64(len(body)) > h.max {
		return Result{}, fail(asc.ResourceExhausted, mayHaveRun, "http: upstream answer exceeds %d bytes", h.max)
	}
	if err := checkObject(body, int(h.max)); err != nil {
		return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun,
			"http: upstream answered %d with a body that is not one strict JSON object: %v", resp.StatusCode, err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, body); err != nil {
		return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "http: %v", err)
	}
	return Result{PayloadType: c.PayloadType, Data: json.RawMessage(buf.Bytes()),
		Explanation: explanationHeader(resp.Header)}, nil
}

// explanationHeader is the upstream's ExplanationHeader, nil when absent.
func explanationHeader(h http.Header) json.RawMessage {
	if v := h.Get(ExplanationHeader); v != "" {
		return json.RawMessage(v)
	}
	return nil
}

// statusError maps a non-2xx answer. The body is not quoted: it may hold
// internals of the upstream.
func (h *HTTP) statusError(resp *http.Response) error {
	s := resp.StatusCode
	switch {
	case s >= 300 && s < 400:
		loc := sanitize([]byte(resp.Header.Get("Location")))
		return fail(asc.GuardrailBlocked, mayHaveRun,
			"http: upstream answered %d redirecting to %q; redirects are not followed, configure the final URL", s, loc)
	case s == http.StatusRequestTimeout:
		return fail(asc.Timeout, nothingHappened, "http: upstream answered 408")
	case s == http.StatusTooManyRequests:
		o := nothingHappened
		o.after = retryAfter(resp.Header.Get("Retry-After"), h.now())
		return fail(asc.RateLimited, o, "http: upstream answered 429")
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return fail(asc.PermissionDenied, refused, "http: upstream answered %d", s)
	case s == http.StatusNotFound || s == http.StatusGone:
		return fail(asc.NotFound, refused, "http: upstream answered %d", s)
	case s == http.StatusConflict || s == http.StatusPreconditionFailed:
		return fail(asc.Conflict, refused, "http: upstream answered %d", s)
	case s >= 400 && s < 500:
		return fail(asc.InvalidRequest, refused, "http: upstream answered %d", s)
	case s == http.StatusNotImplemented:
		return fail(asc.UnsupportedCapability, refused, "http: upstream answered 501")
	case s == http.StatusServiceUnavailable:
		o := nothingHappened
		o.after = retryAfter(resp.Header.Get("Retry-After"), h.now())
		return fail(asc.DependencyUnavailable, o, "http: upstream answered 503")
	case s == http.StatusBadGateway:
		return fail(asc.DependencyUnavailable, unknown, "http: upstream answered 502")
	case s == http.StatusGatewayTimeout:
		// A gateway in front of the service forwarded the call and gave
		// up waiting: whether it committed is unknown (ASC §5).
		return fail(asc.ResultStateUnknown, resultUnknown, "http: upstream answered 504")
	default:
		return fail(asc.ToolExecutionFailed, unknown, "http: upstream answered %d", s)
	}
}

// transportError maps a failure to get an answer at all. sent says whether
// the request may have reached the upstream (sendTrace): a call whose time
// ran out after that is 6005 RESULT_STATE_UNKNOWN, before it 5004 TIMEOUT
// (or 3004 CANCELLED), safe to send again.
func transportError(ctx, tctx context.Context, err error, sent bool, timeout time.Duration) error {
	switch {
	case tctx.Err() != nil && sent:
		return unanswered(ctx, "http: the request was sent and no answer came within %s", timeout)
	case tctx.Err() != nil:
		return notSent(ctx, "http: the request could not be sent within %s", timeout)
	case notConnected(err) || !sent:
		return fail(asc.DependencyUnavailable, nothingHappened, "http: %s", sanitize([]byte(err.Error())))
	default:
		// net/http's errors quote what the upstream sent (a malformed
		// header line, say): sanitised and cut short like any upstream text.
		return fail(asc.DependencyUnavailable, unknown, "http: %s", sanitize([]byte(err.Error())))
	}
}

// notConnected reports whether err happened before the request could have
// been sent: connecting (DNS, TCP, proxy) or the TLS handshake failed.
func notConnected(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
		return true
	}
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	var alert tls.AlertError
	return errors.As(err, &cv) || errors.As(err, &rh) || errors.As(err, &alert)
}

// cancelCode is the status of a call whose context ended: 5004 TIMEOUT for a
// deadline, 3004 CANCELLED otherwise.
func cancelCode(ctx context.Context) asc.Code {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return asc.Timeout
	}
	return asc.Cancelled
}

// retryAfter reads Retry-After (delay-seconds or an HTTP-date), capped at
// maxRetryAfter; 0 when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// traceparent returns a W3C traceparent header for traceID with a fresh
// span id, or "" when traceID is not 32 lower-case hex digits or is all
// zero. The sampled flag is set: the gateway does not know the caller's
// sampling decision and prefers keeping the trace.
func traceparent(traceID string) string {
	if len(traceID) != 32 || strings.Trim(traceID, "0") == "" {
		return ""
	}
	for i := 0; i < len(traceID); i++ {
		if ch := traceID[i]; !('0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f') {
			return ""
		}
	}
	var span [8]byte
	for span == [8]byte{} {
		_, _ = rand.Read(span[:]) // never fails (crypto/rand, Go 1.24+)
	}
	return "00-" + traceID + "-" + hex.EncodeToString(span[:]) + "-01"
}

func setIfValid(h http.Header, key, value string) {
	if value != "" && validHeaderValue(value) {
		h.Set(key, value)
	}
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", ch) >= 0:
		default:
			return false
		}
	}
	return true
}
