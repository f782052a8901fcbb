package gateway

import (
	"context"
	"testing"

	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
)

// failingHandler fails every call with an ASC status.
type failingHandler struct {
	handler.Handler
	status *asc.Error
}

func (h failingHandler) Execute(context.Context, handler.Call) (handler.Result, error) {
	return handler.Result{}, h.status
}

// A handler's failure reaches the sender as the ARSIA error the one table
// of docs/arsia-errors.md gives it: a refused task is forbidden (not a
// conflict), input required is not a retryable internal error, and a call
// whose outcome is unknown says so with its side-effect state.
func TestHandlerOutcomesTellTheSenderWhatToDo(t *testing.T) {
	unknown := asc.Errorf(asc.ResultStateUnknown, asc.ScopeTask, "the upstream timed out after the request was sent")
	tests := []struct {
		name   string
		status *asc.Error
		http   int
		wire   string
		effect string
	}{
		{"task rejected", asc.Errorf(asc.PermissionDenied, asc.ScopeTask, "rejected"), 403, "forbidden", ""},
		{"input required", asc.Errorf(asc.HumanInputRequired, asc.ScopeTask, "which account?"), 409, "conflict", ""},
		{"not found", asc.Errorf(asc.NotFound, asc.ScopeTask, "no such file"), 404, "not_found", ""},
		{"upstream down", asc.Errorf(asc.DependencyUnavailable, asc.ScopeTask, "connection refused"), 503, "service_unavailable", ""},
		{"result unknown", unknown, 500, "internal_error", "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newPipeRig(t, func(o *Options, _ *pipeRig) {
				o.Handlers["demo.fail"] = failingHandler{Handler: handler.NewEcho(), status: tc.status}
				o.Grants[pipeSender] = append(o.Grants[pipeSender], "demo.fail")
			})
			rep, _ := r.send(t, req{caps: []string{"demo.fail"}}, "")
			if rep.Status != tc.http {
				t.Fatalf("status %d, want %d: %s", rep.Status, tc.http, rep.Envelope)
			}
			m := r.verified(t, rep.Envelope)
			if got := get(m, "payload", "error", "code"); got != tc.wire {
				t.Errorf("wire code %v, want %s", got, tc.wire)
			}
			if got := get(m, "payload", "error", "details", "agent_status", "code"); got != float64(tc.status.Code()) {
				t.Errorf("agent_status.code %v, want %d", got, tc.status.Code())
			}
			if tc.effect != "" {
				if got := get(m, "payload", "error", "details", "agent_status", "retry", "side_effect_state"); got != tc.effect {
					t.Errorf("side_effect_state %v, want %s", got, tc.effect)
				}
				if got := get(m, "payload", "error", "details", "agent_status", "retry", "retryable"); got != false {
					t.Errorf("retryable %v, want false", got)
				}
			}
		})
	}
}
