package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
)

// stateAgent answers a message whose text is an A2A task state with a task
// ending in that state; "message" gets a direct message, "slow" completes
// after a while, "hang" never ends.
type stateAgent struct{ runs atomic.Int64 }

func (a *stateAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		a.runs.Add(1)
		text := ec.Message.Parts[0].Text()
		if text == "message" {
			yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("hello back")), nil)
			return
		}
		if text == "explain" {
			m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("screened"))
			m.Metadata = map[string]any{handler.ExplanationMeta: map[string]any{
				"reasoning": "The candidate meets the three listed requirements.", "confidence": 0.6, "inputs_used": []any{"cv", "job:42"}}}
			yield(m, nil)
			return
		}
		task := &a2a.Task{ID: ec.TaskID, ContextID: ec.ContextID}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil), nil) {
			return
		}
		state := a2a.TaskState(text)
		switch text {
		case "slow":
			time.Sleep(150 * time.Millisecond)
			state = a2a.TaskStateCompleted
		case "hang":
			<-ctx.Done()
			return
		}
		yield(a2a.NewStatusUpdateEvent(task, state, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("because \x1b[1m"+text))), nil)
	}
}

func (a *stateAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func newA2AServer(t *testing.T) (*stateAgent, *httptest.Server) {
	t.Helper()
	agent := &stateAgent{}
	ts := httptest.NewServer(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agent)))
	t.Cleanup(ts.Close)
	return agent, ts
}

func newA2A(t *testing.T, url string, timeout time.Duration) *handler.A2A {
	t.Helper()
	h, err := handler.NewA2A(handler.A2AConfig{URL: url, Timeout: timeout, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func a2aCall(text, config string) handler.Call {
	params := `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"` + text + `"}]}` + config + `}`
	return handler.Call{
		Capability:  "hiringco.recruitment.screen",
		PayloadType: handler.PayloadTypeA2ATask,
		Args:        json.RawMessage(`{"jsonrpc":"2.0","method":"SendMessage","params":` + params + `,"id":"r-1"}`),
		MessageID:   "msg-1",
	}
}

func TestA2AStates(t *testing.T) {
	agent, ts := newA2AServer(t)
	h := newA2A(t, ts.URL, 5*time.Second)
	for _, tc := range []struct {
		text string
		code asc.Code
	}{
		{"TASK_STATE_COMPLETED", asc.Success},
		{"message", asc.Success},
		{"TASK_STATE_FAILED", asc.ToolExecutionFailed},
		{"TASK_STATE_CANCELED", asc.Cancelled},
		{"TASK_STATE_REJECTED", asc.PermissionDenied},
		{"TASK_STATE_INPUT_REQUIRED", asc.HumanInputRequired},
		{"TASK_STATE_AUTH_REQUIRED", asc.AuthenticationRequired},
	} {
		t.Run(tc.text, func(t *testing.T) {
			c := a2aCall(tc.text, "")
			res, err := handler.Dispatch(context.Background(), h, c, approve(t, h, c))
			if tc.code == asc.Success {
				if err != nil {
					t.Fatal(err)
				}
				var out map[string]map[string]any
				if err := json.Unmarshal(res.Data, &out); err != nil {
					t.Fatal(err)
				}
				if tc.text == "message" {
					if out["message"] == nil || !strings.Contains(string(res.Data), "hello back") {
						t.Errorf("result %s", res.Data)
					}
				} else if st, _ := out["task"]["status"].(map[string]any); st["state"] != "TASK_STATE_COMPLETED" {
					t.Errorf("result %s", res.Data)
				}
				if res.PayloadType != handler.PayloadTypeA2ATask {
					t.Errorf("payload type %s", res.PayloadType)
				}
				return
			}
			wantCode(t, err, tc.code)
			if strings.Contains(err.Error(), "\x1b") || !strings.Contains(err.Error(), "because") {
				t.Errorf("message %q", err)
			}
		})
	}
	if n := agent.runs.Load(); n != 7 {
		t.Errorf("%d runs, want 7", n)
	}
}

func TestA2AWorking(t *testing.T) {
	_, ts := newA2AServer(t)
	// Returned at once while working, then polled until completed.
	h := newA2A(t, ts.URL, 5*time.Second)
	res, err := h.Execute(context.Background(), a2aCall("slow", `,"configuration":{"returnImmediately":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Data), "TASK_STATE_COMPLETED") {
		t.Errorf("result %s", res.Data)
	}
	// Still working when the wait ends (the send blocks, or the task is
	// polled): the agent has the task and may act on it, so the outcome is
	// 6005 RESULT_STATE_UNKNOWN, not a retryable TIMEOUT (ASC §5).
	h = newA2A(t, ts.URL, 300*time.Millisecond)
	for _, cfg := range []string{"", `,"configuration":{"returnImmediately":true}`} {
		_, err = h.Execute(context.Background(), a2aCall("hang", cfg))
		wantCode(t, err, asc.ResultStateUnknown)
		if env := asc.FromError(err); env.Retry == nil || env.Retry.SideEffectState != asc.SideEffectUnknown ||
			env.Retry.Retryable || env.Retry.Safe {
			t.Errorf("%q: retry %+v", cfg, env.Retry)
		}
	}
	// The caller's context ends while the task is working: the same.
	h = newA2A(t, ts.URL, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = h.Execute(ctx, a2aCall("hang", `,"configuration":{"returnImmediately":true}`))
	wantCode(t, err, asc.ResultStateUnknown)
}

// The agent cannot be reached in time: nothing was sent, TIMEOUT, safe to
// retry.
func TestA2ATimeoutBeforeSending(t *testing.T) {
	hang := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}}
	h, err := handler.NewA2A(handler.A2AConfig{URL: "http://agent.invalid/", Timeout: 100 * time.Millisecond, Client: hang})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Execute(context.Background(), a2aCall("hi", ""))
	wantCode(t, err, asc.Timeout)
	if env := asc.FromError(err); env.Retry == nil || env.Retry.SideEffectState != asc.SideEffectNone || !env.Retry.Safe {
		t.Errorf("retry %+v", env.Retry)
	}
}

func TestA2ALegacyMethods(t *testing.T) {
	agent, ts := newA2AServer(t)
	h := newA2A(t, ts.URL, 5*time.Second)
	for _, args := range []string{
		`{"jsonrpc":"2.0","method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"TASK_STATE_COMPLETED"}]}},"id":1}`,
		`{"jsonrpc":"2.0","method":"tasks/send","params":{"id":"task-1","sessionId":"s-1","message":{"role":"user","parts":[{"type":"text","text":"TASK_STATE_COMPLETED"}]}},"id":1}`,
	} {
		c := handler.Call{Capability: "hiringco.recruitment.screen", PayloadType: handler.PayloadTypeA2ATask, Args: json.RawMessage(args), MessageID: "msg-2"}
		d, err := h.Describe(c)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if d.Kind != "a2a.task" || d.Resource != ts.URL {
			t.Errorf("descriptor %+v", d)
		}
		if _, err := handler.Dispatch(context.Background(), h, c, approve(t, h, c)); err != nil {
			t.Errorf("%s: %v", args, err)
		}
	}
	if agent.runs.Load() != 2 {
		t.Errorf("%d runs", agent.runs.Load())
	}
}

func TestA2AInvalid(t *testing.T) {
	agent, ts := newA2AServer(t)
	h := newA2A(t, ts.URL, 5*time.Second)
	for _, args := range []string{
		`{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"},"id":1}`,
		`{"jsonrpc":"2.0","method":"SendMessage","params":{},"id":1}`,
		`{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}},"id":1}`,
		`{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_X","parts":[{"text":"a"}]}},"id":1}`,
		`{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a"}]},"bogus":1},"id":1}`,
		`{"jsonrpc":"2.0","method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text"}]}},"id":1}`,
		`{"jsonrpc":"2.0","method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"a"}]},"id":"t"},"id":1}`,
		`{"jsonrpc":"2.0","method":"tasks/send","params":{"message":{"role":"boss","parts":[{"type":"text","text":"a"}]}},"id":1}`,
	} {
		c := handler.Call{Capability: "hiringco.recruitment.screen", Args: json.RawMessage(args)}
		if _, err := h.Describe(c); !errors.Is(err, handler.ErrInvalidCall) {
			t.Errorf("Describe(%s) = %v", args, err)
		}
		if _, err := h.Execute(context.Background(), c); !errors.Is(err, handler.ErrInvalidCall) {
			t.Errorf("Execute(%s) = %v", args, err)
		}
	}
	if agent.runs.Load() != 0 {
		t.Errorf("%d runs", agent.runs.Load())
	}
	// The agent is gone: DEPENDENCY_UNAVAILABLE.
	ts.Close()
	_, err := h.Execute(context.Background(), a2aCall("TASK_STATE_COMPLETED", ""))
	wantCode(t, err, asc.DependencyUnavailable)
	if _, err := handler.NewA2A(handler.A2AConfig{URL: "ftp://x"}); !errors.Is(err, handler.ErrConfig) {
		t.Errorf("NewA2A(ftp) = %v", err)
	}
}

// An A2A agent may explain its answer in the metadata member
// handler.ExplanationMeta: the handler hands it on.
func TestA2AExplanation(t *testing.T) {
	_, ts := newA2AServer(t)
	h := newA2A(t, ts.URL, 5*time.Second)
	res, err := handler.Run(t.Context(), h, a2aCall("explain", ""))
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(res.Explanation, &e); err != nil || e["confidence"] != 0.6 || res.ExplanationIssue != "" {
		t.Fatalf("explanation %s (%q), %v", res.Explanation, res.ExplanationIssue, err)
	}
	res, err = handler.Run(t.Context(), h, a2aCall("message", ""))
	if err != nil || res.Explanation != nil {
		t.Fatalf("an answer without one: %s, %v", res.Explanation, err)
	}
}
