package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
)

// countingHandler describes calls like an HTTP handler for url and counts
// executions.
type countingHandler struct {
	url      string
	runs     atomic.Int64
	result   handler.Result
	err      error
	descErr  error
	describe func(handler.Call) handler.Descriptor
}

func (h *countingHandler) Describe(c handler.Call) (handler.Descriptor, error) {
	if h.descErr != nil {
		return handler.Descriptor{}, h.descErr
	}
	if h.describe != nil {
		return h.describe(c), nil
	}
	return handler.Descriptor{
		Kind: "http.request", Resource: h.url,
		Effects: []string{"Sends the arguments to " + h.url}, Risk: aais.RiskMedium,
	}, nil
}

func (h *countingHandler) Execute(context.Context, handler.Call) (handler.Result, error) {
	h.runs.Add(1)
	if h.err != nil {
		return handler.Result{}, h.err
	}
	if h.result.Data == nil {
		return handler.Result{PayloadType: "t", Data: json.RawMessage(`{"ok":true}`)}, nil
	}
	return h.result, nil
}

// approve returns the digest a reviewer would approve for c with h.
func approve(t *testing.T, h handler.Handler, c handler.Call) string {
	t.Helper()
	d, err := h.Describe(c)
	if err != nil {
		t.Fatal(err)
	}
	_, digest, err := handler.Action(c, d)
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

func TestDispatchRunsApproved(t *testing.T) {
	h := &countingHandler{url: "https://a.example/x"}
	digest := approve(t, h, goldenCall)
	res, err := handler.Dispatch(context.Background(), h, goldenCall, digest)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Data) != `{"ok":true}` || h.runs.Load() != 1 {
		t.Errorf("result %s, runs %d", res.Data, h.runs.Load())
	}
}

func TestDispatchStale(t *testing.T) {
	approved := &countingHandler{url: "https://a.example/x"}
	digest := approve(t, approved, goldenCall)

	changedArgs := goldenCall
	changedArgs.Args = json.RawMessage(`{"amount":"99999.00","currency":"EUR","lines":[{"sku":"A-1","qty":2}]}`)
	changedCap := goldenCall
	changedCap.Capability = "billing.invoice.delete"

	cases := []struct {
		name   string
		h      *countingHandler
		c      handler.Call
		digest string
	}{
		{"changed args", &countingHandler{url: "https://a.example/x"}, changedArgs, digest},
		{"changed capability", &countingHandler{url: "https://a.example/x"}, changedCap, digest},
		{"handler URL changed", &countingHandler{url: "https://b.example/x"}, goldenCall, digest},
		{"descriptor no longer valid", &countingHandler{describe: func(handler.Call) handler.Descriptor {
			return handler.Descriptor{Kind: "bad kind", Risk: aais.RiskLow}
		}}, goldenCall, digest},
		{"malformed approved digest", &countingHandler{url: "https://a.example/x"}, goldenCall, "sha256:abc"},
		{"empty approved digest", &countingHandler{url: "https://a.example/x"}, goldenCall, ""},
		{"args no longer an object", &countingHandler{url: "https://a.example/x"}, handler.Call{Capability: goldenCall.Capability, Args: json.RawMessage(`[]`)}, digest},
	}
	for _, tc := range cases {
		_, err := handler.Dispatch(context.Background(), tc.h, tc.c, tc.digest)
		if !errors.Is(err, handler.ErrStale) {
			t.Errorf("%s: err = %v, want ErrStale", tc.name, err)
		}
		env := asc.FromError(err)
		if env.Status.Code != asc.FailedPrecondition || env.Status.Scope != asc.ScopeToolCall {
			t.Errorf("%s: status %v %s", tc.name, env.Status.Code, env.Status.Scope)
		}
		if err := asc.Validate(&env); err != nil {
			t.Errorf("%s: envelope invalid: %v", tc.name, err)
		}
		if tc.h.runs.Load() != 0 {
			t.Errorf("%s: Execute was called", tc.name)
		}
	}
}

func TestDispatchErrors(t *testing.T) {
	base := &countingHandler{url: "https://a.example/x"}
	digest := approve(t, base, goldenCall)

	// A Describe failure: nothing runs, the handler's status is kept.
	h := &countingHandler{descErr: asc.Errorf(asc.DependencyUnavailable, asc.ScopeToolCall, "down")}
	if _, err := handler.Dispatch(context.Background(), h, goldenCall, digest); asc.CodeOf(err) != asc.DependencyUnavailable || h.runs.Load() != 0 {
		t.Errorf("describe error: %v", err)
	}
	// A plain error from Describe or Execute becomes INTERNAL_ERROR.
	h = &countingHandler{descErr: errors.New("boom")}
	if _, err := handler.Dispatch(context.Background(), h, goldenCall, digest); asc.CodeOf(err) != asc.InternalError {
		t.Errorf("plain describe error: %v", err)
	}
	h = &countingHandler{url: base.url, err: errors.New("secret internals")}
	_, err := handler.Dispatch(context.Background(), h, goldenCall, digest)
	env := asc.FromError(err)
	if env.Status.Code != asc.InternalError || env.Status.Scope != asc.ScopeToolCall {
		t.Errorf("plain execute error: %v", err)
	}
	if env.Message != nil && (strings.Contains(env.Message.User, "secret") || strings.Contains(env.Message.Developer, "secret")) {
		t.Errorf("internal text leaked into the envelope: %+v", env.Message)
	}
	// An ASC error from Execute is passed through unchanged.
	want := asc.Errorf(asc.RateLimited, asc.ScopeToolCall, "slow down")
	h = &countingHandler{url: base.url, err: want}
	if _, err := handler.Dispatch(context.Background(), h, goldenCall, digest); !errors.Is(err, want) {
		t.Errorf("asc error: %v", err)
	}
	// A result that is not a JSON object is refused.
	for _, data := range []string{`[]`, `nope`, `{"a":1,"a":2}`, ``} {
		h = &countingHandler{url: base.url, result: handler.Result{Data: json.RawMessage(data)}}
		if data == "" {
			h.result.Data = json.RawMessage{}
		}
		_, err := handler.Dispatch(context.Background(), h, goldenCall, digest)
		if !errors.Is(err, handler.ErrInvalidResult) || asc.CodeOf(err) != asc.InternalError {
			t.Errorf("result %q: %v", data, err)
		}
	}
	if _, err := handler.Dispatch(context.Background(), nil, goldenCall, digest); asc.CodeOf(err) != asc.InternalError {
		t.Errorf("nil handler: %v", err)
	}
}

func TestEcho(t *testing.T) {
	e := handler.NewEcho()
	c := goldenCall
	digest := approve(t, e, c)
	res, err := handler.Dispatch(context.Background(), e, c, digest)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"echo":{"amount":"12.50","currency":"EUR","lines":[{"sku":"A-1","qty":2}]}}`
	if string(res.Data) != want || res.PayloadType != c.PayloadType {
		t.Errorf("got %s %s", res.PayloadType, res.Data)
	}
	d, _ := e.Describe(c)
	if d.Kind != "echo" || d.Risk != aais.RiskLow {
		t.Errorf("descriptor %+v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Execute(ctx, c); asc.CodeOf(err) != asc.Cancelled {
		t.Errorf("cancelled: %v", err)
	}
	c.Args = json.RawMessage(`[1]`)
	if _, err := e.Execute(context.Background(), c); !errors.Is(err, handler.ErrInvalidCall) {
		t.Errorf("array args: %v", err)
	}
}

// Run, for calls that need no approval, runs the call once and checks
// the result as Dispatch does; its errors carry ASC statuses.
func TestRun(t *testing.T) {
	h := &countingHandler{url: "https://a.example/x"}
	res, err := handler.Run(context.Background(), h, goldenCall)
	if err != nil || string(res.Data) != `{"ok":true}` || h.runs.Load() != 1 {
		t.Fatalf("Run = %s, %v; runs %d", res.Data, err, h.runs.Load())
	}
	if _, err := handler.Run(context.Background(), nil, goldenCall); asc.CodeOf(err) != asc.InternalError {
		t.Errorf("nil handler: %v", err)
	}
	h = &countingHandler{url: h.url, err: errors.New("boom")}
	if _, err := handler.Run(context.Background(), h, goldenCall); asc.CodeOf(err) != asc.InternalError {
		t.Errorf("plain execute error: %v", err)
	}
}
