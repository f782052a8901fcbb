package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
)

var httpCall = handler.Call{
	Capability:     "billing.invoice.create",
	PayloadType:    "com.example.billing/invoice-create",
	Args:           json.RawMessage(`{"amount": "12.50",  "currency":"EUR"}`),
	From:           "agent:com.example.alice",
	To:             "agent:com.example.billing",
	MessageID:      "msg-1",
	TraceID:        "4bf92f3577b34da6a3ce929d0e0e4736",
	IdempotencyKey: "idem-1",
}

func newHTTP(t *testing.T, cfg handler.HTTPConfig) *handler.HTTP {
	t.Helper()
	h, err := handler.NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// wantStatus checks err's ASC status and that its envelope is valid.
func wantStatus(t *testing.T, err error, code asc.Code, effects asc.SideEffectState) *asc.Envelope {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code.Name())
	}
	var ae *asc.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%v is not an *asc.Error", err)
	}
	env := asc.FromError(err)
	if env.Status.Code != code || env.Status.Scope != asc.ScopeToolCall {
		t.Fatalf("status %s %s (%v), want %s", env.Status.Code.Name(), env.Status.Scope, err, code.Name())
	}
	if env.Retry == nil || env.Retry.SideEffectState != effects {
		t.Fatalf("retry %+v, want side effects %s", env.Retry, effects)
	}
	if err := asc.Validate(&env); err != nil {
		t.Fatalf("envelope invalid: %v", err)
	}
	return &env
}

func TestHTTPSuccess(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, "{\"invoice\": \"inv-1\", \"total\": 12.5}\n")
	}))
	defer srv.Close()
	h := newHTTP(t, handler.HTTPConfig{URL: srv.URL + "/invoices", Headers: http.Header{"authorization": {"Bearer s3cret"}}})
	digest := approve(t, h, httpCall)

	res, err := handler.Dispatch(context.Background(), h, httpCall, digest)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Data) != `{"invoice":"inv-1","total":12.5}` || res.PayloadType != httpCall.PayloadType {
		t.Errorf("result %s %s", res.PayloadType, res.Data)
	}
	if got.Method != http.MethodPost || got.URL.Path != "/invoices" {
		t.Errorf("%s %s", got.Method, got.URL.Path)
	}
	if string(body) != string(httpCall.Args) {
		t.Errorf("body %q, want the arguments as received %q", body, httpCall.Args)
	}
	for k, want := range map[string]string{
		"Content-Type":          "application/json",
		"X-Custos-Capability":   "billing.invoice.create",
		"X-Custos-Payload-Type": httpCall.PayloadType,
		"X-Custos-From":         httpCall.From,
		"X-Custos-Message-Id":   "msg-1",
		"X-Correlation-Id":      "msg-1",
		"Idempotency-Key":       "idem-1",
		"Authorization":         "Bearer s3cret",
	} {
		if v := got.Header.Get(k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	tp := regexp.MustCompile(`^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$`)
	if v := got.Header.Get("Traceparent"); !tp.MatchString(v) {
		t.Errorf("traceparent %q", v)
	}

	// Without a trace id no traceparent; a correlation id wins over the
	// message id.
	c := httpCall
	c.TraceID, c.CorrelationID = "", "corr-9"
	if _, err := h.Execute(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if got.Header.Get("Traceparent") != "" || got.Header.Get("X-Correlation-Id") != "corr-9" {
		t.Errorf("headers %v", got.Header)
	}
}

func TestHTTPDescribe(t *testing.T) {
	h := newHTTP(t, handler.HTTPConfig{URL: "https://billing.example:8443/v1/invoices?x=1"})
	d, err := h.Describe(httpCall)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != "http.request" || d.Resource != "https://billing.example:8443/v1/invoices?x=1" ||
		len(d.Effects) != 1 || d.Effects[0] != "Sends the arguments to billing.example:8443" || d.Risk != aais.RiskMedium {
		t.Errorf("%+v", d)
	}
}

// The handler's URL changes between approval and dispatch: stale, and the
// upstream is never contacted.
func TestHTTPStaleURL(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	approved := newHTTP(t, handler.HTTPConfig{URL: srv.URL + "/a"})
	digest := approve(t, approved, httpCall)
	changed := newHTTP(t, handler.HTTPConfig{URL: srv.URL + "/b"})
	if _, err := handler.Dispatch(context.Background(), changed, httpCall, digest); !errors.Is(err, handler.ErrStale) {
		t.Fatalf("err = %v", err)
	}
	if hits.Load() != 0 {
		t.Error("the upstream was called")
	}
	// Headers are not part of the action: changing them is not stale.
	rotated := newHTTP(t, handler.HTTPConfig{URL: srv.URL + "/a", Headers: http.Header{"Authorization": {"Bearer new"}}})
	if _, err := handler.Dispatch(context.Background(), rotated, httpCall, digest); err != nil {
		t.Fatal(err)
	}
}

func TestHTTPAnswers(t *testing.T) {
	type answer struct {
		status int
		ctype  string
		body   string
		header map[string]string
	}
	cases := []struct {
		name    string
		a       answer
		code    asc.Code
		effects asc.SideEffectState
		check   func(*testing.T, *asc.Envelope)
	}{
		{"non-JSON", answer{200, "text/html", "<html>ok</html>", nil}, asc.IntegrityCheckFailed, asc.SideEffectPossible, nil},
		{"JSON type, not JSON", answer{200, "application/json", "ok", nil}, asc.IntegrityCheckFailed, asc.SideEffectPossible, nil},
		{"no type, not JSON", answer{200, "", "ok", nil}, asc.IntegrityCheckFailed, asc.SideEffectPossible, nil},
		{"array", answer{200, "application/json", "[1]", nil}, asc.IntegrityCheckFailed, asc.SideEffectPossible, nil},
		{"duplicate member", answer{200, "application/json", `{"a":1,"a":2}`, nil}, asc.IntegrityCheckFailed, asc.SideEffectPossible, nil},
		{"oversize", answer{200, "application/json", `{"a":"` + strings.Repeat("x", 100) + `"}`, nil}, asc.ResourceExhausted, asc.SideEffectPossible, nil},
		{"400", answer{400, "application/json", `{"error":"bad"}`, nil}, asc.InvalidRequest, asc.SideEffectNone, nil},
		{"422", answer{422, "", "", nil}, asc.InvalidRequest, asc.SideEffectNone, nil},
		{"401", answer{401, "", "", nil}, asc.PermissionDenied, asc.SideEffectNone, nil},
		{"403", answer{403, "", "", nil}, asc.PermissionDenied, asc.SideEffectNone, nil},
		{"404", answer{404, "", "", nil}, asc.NotFound, asc.SideEffectNone, nil},
		{"409", answer{409, "", "", nil}, asc.Conflict, asc.SideEffectNone, nil},
		{"408", answer{408, "", "", nil}, asc.Timeout, asc.SideEffectNone, nil},
		{"501", answer{501, "", "", nil}, asc.UnsupportedCapability, asc.SideEffectNone, nil},
		{"429 Retry-After", answer{429, "", "", map[string]string{"Retry-After": "7"}}, asc.RateLimited, asc.SideEffectNone,
			func(t *testing.T, e *asc.Envelope) {
				if !e.Retry.Retryable || !e.Retry.Safe || e.Retry.AfterMS != 7000 {
					t.Errorf("retry %+v", e.Retry)
				}
				if v, ok := asc.RetryAfter(e); !ok || v != "7" {
					t.Errorf("Retry-After %q %v", v, ok)
				}
			}},
		{"429 huge Retry-After", answer{429, "", "", map[string]string{"Retry-After": "99999999999"}}, asc.RateLimited, asc.SideEffectNone,
			func(t *testing.T, e *asc.Envelope) {
				if e.Retry.AfterMS != (24 * time.Hour).Milliseconds() {
					t.Errorf("retry %+v", e.Retry)
				}
			}},
		{"429 bad Retry-After", answer{429, "", "", map[string]string{"Retry-After": "soon"}}, asc.RateLimited, asc.SideEffectNone,
			func(t *testing.T, e *asc.Envelope) {
				if e.Retry.AfterMS != 0 || !e.Retry.Retryable {
					t.Errorf("retry %+v", e.Retry)
				}
			}},
		{"503 Retry-After", answer{503, "", "", map[string]string{"Retry-After": "2"}}, asc.DependencyUnavailable, asc.SideEffectNone,
			func(t *testing.T, e *asc.Envelope) {
				if !e.Retry.Safe || e.Retry.AfterMS != 2000 {
					t.Errorf("retry %+v", e.Retry)
				}
			}},
		{"500", answer{500, "application/json", `{"error":"internal detail"}`, nil}, asc.ToolExecutionFailed, asc.SideEffectUnknown,
			func(t *testing.T, e *asc.Envelope) {
				if e.Retry.Safe {
					t.Error("500 marked safe to retry")
				}
				if strings.Contains(e.Message.Developer, "internal detail") {
					t.Error("upstream body quoted")
				}
				d := asc.DecideRetry(e, asc.RetryContext{Now: time.Now(), Idempotent: true})
				if d.Outcome == asc.RetryAllowed {
					t.Errorf("DecideRetry allows a blind retry: %+v", d)
				}
			}},
		{"502", answer{502, "", "", nil}, asc.DependencyUnavailable, asc.SideEffectUnknown, nil},
		{"504", answer{504, "", "", nil}, asc.ResultStateUnknown, asc.SideEffectUnknown, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				for k, v := range tc.a.header {
					w.Header().Set(k, v)
				}
				if tc.a.ctype != "" {
					w.Header().Set("Content-Type", tc.a.ctype)
				}
				w.WriteHeader(tc.a.status)
				_, _ = io.WriteString(w, tc.a.body)
			}))
			defer srv.Close()
			h := newHTTP(t, handler.HTTPConfig{URL: srv.URL, MaxResponseBytes: 64})
			_, err := h.Execute(context.Background(), httpCall)
			env := wantStatus(t, err, tc.code, tc.effects)
			if tc.check != nil {
				tc.check(t, env)
			}
		})
	}
}

func TestHTTPNoContent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	res, err := newHTTP(t, handler.HTTPConfig{URL: srv.URL}).Execute(context.Background(), httpCall)
	if err != nil || string(res.Data) != `{}` {
		t.Errorf("%s %v", res.Data, err)
	}
}

// An upstream that received the request and does not answer in time may
// have acted: 6005 RESULT_STATE_UNKNOWN, side effects unknown, not
// retryable (ASC §5), whether the handler's timeout or the caller's
// context ends the wait, and whether the headers or the body are late.
func TestHTTPSlowServer(t *testing.T) {
	release := make(chan struct{})
	var received atomic.Int64
	got := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		received.Add(1)
		got <- struct{}{}
		if r.URL.Path == "/late-body" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"partial":`)
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	for _, path := range []string{"/", "/late-body"} {
		h := newHTTP(t, handler.HTTPConfig{URL: srv.URL + path, Timeout: 100 * time.Millisecond})
		_, err := h.Execute(context.Background(), httpCall)
		env := wantStatus(t, err, asc.ResultStateUnknown, asc.SideEffectUnknown)
		if env.Retry.Safe || env.Retry.Retryable {
			t.Errorf("%s: retry %+v: a timeout after sending is marked retryable or safe", path, env.Retry)
		}
		<-got
	}

	// The caller's context ends while the upstream holds the request.
	h := newHTTP(t, handler.HTTPConfig{URL: srv.URL, Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-got; cancel() }()
	_, err := h.Execute(ctx, httpCall)
	wantStatus(t, err, asc.ResultStateUnknown, asc.SideEffectUnknown)
	if received.Load() != 3 {
		t.Errorf("%d requests received, want 3", received.Load())
	}
}

// A call whose time runs out before a connection exists never reached the
// upstream: 5004 TIMEOUT, retryable and safe (or 3004 CANCELLED, side
// effects none, when the caller cancelled).
func TestHTTPTimeoutBeforeSending(t *testing.T) {
	var dials atomic.Int64
	hang := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			dials.Add(1)
			<-ctx.Done() // a SYN into the void
			return nil, ctx.Err()
		},
	}}
	h := newHTTP(t, handler.HTTPConfig{URL: "http://upstream.invalid/", Timeout: 50 * time.Millisecond, Client: hang})
	_, err := h.Execute(context.Background(), httpCall)
	env := wantStatus(t, err, asc.Timeout, asc.SideEffectNone)
	if !env.Retry.Safe || !env.Retry.Retryable {
		t.Errorf("retry %+v: nothing was sent, a retry is safe", env.Retry)
	}
	h = newHTTP(t, handler.HTTPConfig{URL: "http://upstream.invalid/", Timeout: time.Hour, Client: hang})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = h.Execute(ctx, httpCall)
	wantStatus(t, err, asc.Timeout, asc.SideEffectNone)
	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(30 * time.Millisecond); cancel() }()
	_, err = h.Execute(ctx, httpCall)
	wantStatus(t, err, asc.Cancelled, asc.SideEffectNone)
	if dials.Load() != 3 {
		t.Errorf("%d dials, want 3", dials.Load())
	}
}

func TestHTTPRedirectNotFollowed(t *testing.T) {
	var targetHits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
		_, _ = io.WriteString(w, `{"stolen":true}`)
	}))
	defer target.Close()
	for _, status := range []int{301, 302, 303, 307, 308} {
		for _, to := range []string{target.URL + "/elsewhere", "/same-host"} {
			var sameHits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/same-host" {
					sameHits.Add(1)
					_, _ = io.WriteString(w, `{}`)
					return
				}
				http.Redirect(w, r, to, status)
			}))
			h := newHTTP(t, handler.HTTPConfig{URL: srv.URL + "/start"})
			_, err := h.Execute(context.Background(), httpCall)
			wantStatus(t, err, asc.GuardrailBlocked, asc.SideEffectPossible)
			if sameHits.Load() != 0 {
				t.Errorf("%d to %s: followed", status, to)
			}
			srv.Close()
		}
	}
	if targetHits.Load() != 0 {
		t.Error("redirect to another host followed")
	}
	// A caller-supplied client with its own redirect policy is overridden,
	// not modified.
	follow := &http.Client{}
	srv := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer srv.Close()
	h := newHTTP(t, handler.HTTPConfig{URL: srv.URL, Client: follow})
	_, err := h.Execute(context.Background(), httpCall)
	wantStatus(t, err, asc.GuardrailBlocked, asc.SideEffectPossible)
	if follow.CheckRedirect != nil || targetHits.Load() != 0 {
		t.Error("client modified or redirect followed")
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := newHTTP(t, handler.HTTPConfig{URL: url}).Execute(context.Background(), httpCall)
	env := wantStatus(t, err, asc.DependencyUnavailable, asc.SideEffectNone)
	if !env.Retry.Safe || !env.Retry.Retryable {
		t.Errorf("retry %+v", env.Retry)
	}
}

func TestHTTPRefusesArguments(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	c := httpCall
	c.Args = json.RawMessage(`{"a":1,"a":2}`)
	_, err := newHTTP(t, handler.HTTPConfig{URL: srv.URL}).Execute(context.Background(), c)
	if !errors.Is(err, handler.ErrInvalidCall) || hits.Load() != 0 {
		t.Errorf("%v, %d hits", err, hits.Load())
	}
}

func TestNewHTTPConfig(t *testing.T) {
	bad := map[string]handler.HTTPConfig{
		"empty":           {},
		"relative":        {URL: "/invoices"},
		"ftp":             {URL: "ftp://example.com/"},
		"no host":         {URL: "http:///x"},
		"userinfo":        {URL: "https://user:pw@example.com/"},
		"fragment":        {URL: "https://example.com/#x"},
		"too long":        {URL: "https://example.com/" + strings.Repeat("a", 5000)},
		"negative time":   {URL: "https://example.com/", Timeout: -1},
		"negative max":    {URL: "https://example.com/", MaxResponseBytes: -1},
		"huge max":        {URL: "https://example.com/", MaxResponseBytes: handler.MaxResponseBytesLimit + 1},
		"content-type":    {URL: "https://example.com/", Headers: http.Header{"Content-Type": {"text/plain"}}},
		"host":            {URL: "https://example.com/", Headers: http.Header{"host": {"evil"}}},
		"x-custos":        {URL: "https://example.com/", Headers: http.Header{"X-Custos-Capability": {"x"}}},
		"traceparent":     {URL: "https://example.com/", Headers: http.Header{"traceparent": {"x"}}},
		"bad name":        {URL: "https://example.com/", Headers: http.Header{"Bad Name": {"x"}}},
		"CRLF in value":   {URL: "https://example.com/", Headers: http.Header{"X-Key": {"a\r\nInjected: 1"}}},
		"idempotency-key": {URL: "https://example.com/", Headers: http.Header{"Idempotency-Key": {"x"}}},
	}
	for name, cfg := range bad {
		if _, err := handler.NewHTTP(cfg); !errors.Is(err, handler.ErrConfig) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// An upstream learns that the result must be explained, and may give the
// explanation in a header: Run keeps a valid one and drops, saying why,
// one that is not.
func TestHTTPExplanation(t *testing.T) {
	const valid = `{"reasoning":"Created the invoice the caller asked for.","confidence":0.9,"inputs_used":["args:amount"]}`
	cases := []struct {
		name, header string
		required     bool
		kept         bool
		issue        string
	}{
		{"none asked, none given", "", false, false, ""},
		{"asked, given", valid, true, true, ""},
		{"given unasked", valid, false, true, ""},
		{"not JSON", "because", true, false, "not one JSON object"},
		{"not an explanation", `{"reasoning":"x","confidence":1.5,"inputs_used":["a"]}`, true, false, "/confidence"},
		{"a member too many", `{"reasoning":"x","confidence":1,"inputs_used":["a"],"chain_of_thought":"..."}`, true, false, "chain_of_thought"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var asked string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked = r.Header.Get(handler.ExplanationRequiredHeader)
				if c.header != "" {
					w.Header().Set(handler.ExplanationHeader, c.header)
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ok":true}`)
			}))
			defer srv.Close()
			call := httpCall
			call.ExplanationRequired = c.required
			res, err := handler.Run(t.Context(), newHTTP(t, handler.HTTPConfig{URL: srv.URL}), call)
			if err != nil {
				t.Fatal(err)
			}
			if (asked == "true") != c.required {
				t.Fatalf("%s = %q, want it only when required", handler.ExplanationRequiredHeader, asked)
			}
			if kept := len(res.Explanation) != 0; kept != c.kept || (c.kept && string(res.Explanation) != c.header) {
				t.Fatalf("explanation %s, want kept %v", res.Explanation, c.kept)
			}
			if !strings.Contains(res.ExplanationIssue, c.issue) || (c.issue == "") != (res.ExplanationIssue == "") {
				t.Fatalf("issue %q, want one about %q", res.ExplanationIssue, c.issue)
			}
		})
	}
}
