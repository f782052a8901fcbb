package arsia

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/jcs"
)

func statusOf(code asc.Code, retry *asc.Retry) asc.Envelope {
	env := asc.New(code, asc.ScopeToolCall, true, time.Unix(0, 0))
	env.Retry = retry
	return *env
}

func agentStatusOf(t *testing.T, e *Error) map[string]any {
	t.Helper()
	st, ok := e.Details["agent_status"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no details.agent_status: %v", e.Code, e.Details)
	}
	return st
}

// Every registered ASC code has its own row, and each row gives an error
// the gateway can sign: a standard wire code, its required details, and a
// printable ASCII description.
func TestFromASCCoversRegistry(t *testing.T) {
	reg := asc.Registry()
	if len(reg) != len(ascOutcomes) {
		t.Errorf("registry has %d codes, the table %d rows", len(reg), len(ascOutcomes))
	}
	for _, entry := range reg {
		if _, ok := ascOutcomes[entry.Code]; !ok {
			t.Errorf("%d %s has no row in ascOutcomes (and docs/arsia-errors.md)", entry.Code, entry.Name)
			continue
		}
		e := FromASC(statusOf(entry.Code, nil))
		info, ok := LookupError(e.Code)
		if !ok {
			t.Errorf("%d: wire code %q is not a standard code", entry.Code, e.Code)
			continue
		}
		if e.HTTPStatus() != info.HTTPStatus || e.WireCode() != e.Code {
			t.Errorf("%d: HTTP %d wire %s", entry.Code, e.HTTPStatus(), e.WireCode())
		}
		if _, err := NewError("agent:acme.gw", "agent:acme.client", NewID(), e, BuildOptions{Now: time.Unix(1, 0)}); err != nil {
			t.Errorf("%d: the error cannot be sent: %v", entry.Code, err)
		}
		st := agentStatusOf(t, e)
		if st["code"] != int(entry.Code) || st["name"] != entry.Name {
			t.Errorf("%d: agent_status %v", entry.Code, st)
		}
		if !strings.Contains(e.Description, entry.Name) {
			t.Errorf("%d: description %q does not name the ASC status", entry.Code, e.Description)
		}
	}
}

func TestFromASCTable(t *testing.T) {
	for _, tc := range []struct {
		code asc.Code
		wire string
		http int
	}{
		{asc.HumanInputRequired, CodeConflict, 409},
		{asc.HumanApprovalRequired, CodeConflict, 409},
		{asc.AuthenticationRequired, CodeForbidden, 403},
		{asc.Cancelled, CodeConflict, 409},
		{asc.InvalidRequest, CodeInvalidRequest, 400},
		{asc.FailedPrecondition, CodeConflict, 409},
		{asc.PermissionDenied, CodeForbidden, 403},
		{asc.GuardrailBlocked, CodeForbidden, 403},
		{asc.Conflict, CodeConflict, 409},
		{asc.NotFound, CodeNotFound, 404},
		{asc.UnsupportedCapability, CodeNotImplemented, 501},
		{asc.RetryableError, CodeServiceUnavailable, 503},
		{asc.RateLimited, CodeRateLimited, 429},
		{asc.ResourceExhausted, CodeServiceUnavailable, 503},
		{asc.DependencyUnavailable, CodeServiceUnavailable, 503},
		{asc.Timeout, CodeServiceUnavailable, 503},
		{asc.ToolExecutionFailed, CodeInternalError, 500},
		{asc.AbortedConcurrency, CodeConflict, 409},
		{asc.InternalError, CodeInternalError, 500},
		{asc.ResultStateUnknown, CodeInternalError, 500},
		{asc.IntegrityCheckFailed, CodeInternalError, 500},
		{asc.Running, CodeInternalError, 500},
		// Unregistered codes go by their class.
		{3999, CodeConflict, 409},
		{4999, CodeInvalidRequest, 400},
		{5999, CodeServiceUnavailable, 503},
		{6999, CodeInternalError, 500},
		{7999, CodeInternalError, 500},
		{9500, CodeInternalError, 500},
		{0, CodeInternalError, 500},
		{-4002, CodeInternalError, 500},
	} {
		e := FromASC(statusOf(tc.code, nil))
		if e.Code != tc.wire || e.HTTPStatus() != tc.http {
			t.Errorf("%d: %s %d, want %s %d", tc.code, e.Code, e.HTTPStatus(), tc.wire, tc.http)
		}
		if _, err := NewError("agent:acme.gw", "agent:acme.client", NewID(), e, BuildOptions{Now: time.Unix(1, 0)}); err != nil {
			t.Errorf("%d: %v", tc.code, err)
		}
	}
}

// 6005, and anything that says nothing final about the action, is never
// passed on as retryable or safe, whatever the producer claimed.
func TestFromASCResultUnknownNeverRetryable(t *testing.T) {
	for _, tc := range []struct {
		code  asc.Code
		retry *asc.Retry
		state string
	}{
		{asc.ResultStateUnknown, nil, "unknown"},
		{asc.ResultStateUnknown, &asc.Retry{Retryable: true, Safe: true, SideEffectState: asc.SideEffectNone}, "unknown"},
		{asc.ResultStateUnknown, &asc.Retry{Retryable: true, Safe: true, SideEffectState: asc.SideEffectConfirmed}, "unknown"},
		{asc.ResultStateUnknown, &asc.Retry{SideEffectState: asc.SideEffectPossible}, "possible"},
		{asc.Running, &asc.Retry{Retryable: true, Safe: true}, "unknown"},
		{asc.Success, nil, "unknown"},
		{asc.FallbackUsed, nil, "unknown"},
		{9123, &asc.Retry{Retryable: true, Safe: true}, "unknown"},
	} {
		e := FromASC(statusOf(tc.code, tc.retry))
		r, _ := agentStatusOf(t, e)["retry"].(map[string]any)
		if r == nil || r["retryable"] != false || r["safe"] != false || r["side_effect_state"] != tc.state {
			t.Errorf("%d %+v: retry %v, want not retryable, not safe, %s", tc.code, tc.retry, r, tc.state)
		}
	}
	e := FromASC(statusOf(asc.ResultStateUnknown, nil))
	if !strings.Contains(e.Description, "RESULT_STATE_UNKNOWN") || !strings.Contains(e.Description, "check its effect") {
		t.Errorf("6005 description does not say what to do: %q", e.Description)
	}
}

func TestFromASCRetryContract(t *testing.T) {
	// A delay becomes retry_after_seconds, rounded up.
	e := FromASC(statusOf(asc.RateLimited, &asc.Retry{Retryable: true, Safe: true, AfterMS: 1500, SideEffectState: asc.SideEffectNone}))
	if e.Details["retry_after_seconds"] != int64(2) {
		t.Errorf("retry_after_seconds = %v", e.Details["retry_after_seconds"])
	}
	r := agentStatusOf(t, e)["retry"].(map[string]any)
	if r["retryable"] != true || r["safe"] != true || r["after_ms"] != int64(1500) || r["side_effect_state"] != "none" {
		t.Errorf("retry %v", r)
	}
	// An absurd delay is capped at a day.
	e = FromASC(statusOf(asc.DependencyUnavailable, &asc.Retry{Retryable: true, AfterMS: 1 << 60}))
	if r := agentStatusOf(t, e)["retry"].(map[string]any); r["after_ms"] != int64(maxRetryAfterMS) || e.Details["retry_after_seconds"] != int64(86400) {
		t.Errorf("capped retry %v, %v", r, e.Details["retry_after_seconds"])
	}
	// Possible or unknown side effects are never passed on as safe.
	for _, s := range []asc.SideEffectState{asc.SideEffectPossible, asc.SideEffectUnknown} {
		e = FromASC(statusOf(asc.ToolExecutionFailed, &asc.Retry{Retryable: true, Safe: true, SideEffectState: s}))
		if r := agentStatusOf(t, e)["retry"].(map[string]any); r["safe"] != false || r["side_effect_state"] != string(s) {
			t.Errorf("%s: retry %v", s, r)
		}
	}
	// An unknown side-effect state is dropped, not echoed.
	e = FromASC(statusOf(asc.Timeout, &asc.Retry{Retryable: true, SideEffectState: "<script>"}))
	if r := agentStatusOf(t, e)["retry"].(map[string]any); r["side_effect_state"] != nil {
		t.Errorf("unknown state echoed: %v", r)
	}
	// Without a contract there is no retry member (the wire code's
	// registry default applies).
	if _, ok := agentStatusOf(t, FromASC(statusOf(asc.PermissionDenied, nil)))["retry"]; ok {
		t.Error("retry member without a contract")
	}
	// not_implemented carries the supported versions ARSIA requires.
	e = FromASC(statusOf(asc.UnsupportedCapability, nil))
	if err := CheckErrorDetails(e.Code, e.Details); err != nil {
		t.Error(err)
	}
}

// Nothing but the code and the retry contract crosses over: a service's
// messages and details may hold anything.
func TestFromASCCopiesNoText(t *testing.T) {
	env := statusOf(asc.PermissionDenied, &asc.Retry{Retryable: true, IdempotencyKey: "secret-key", Strategy: "evil"})
	env.Status.Name = "HACKED\u202e"
	env.Message = &asc.Message{User: "visit https://evil.example", Developer: "upstream said: secret"}
	env.Details = map[string]any{"token": "secret"}
	b, err := json.Marshal(FromASC(env).Object())
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"evil", "secret", "HACKED"} {
		if strings.Contains(string(b), bad) {
			t.Errorf("%q copied into %s", bad, b)
		}
	}
}

func TestAgentStatusValue(t *testing.T) {
	for name, tc := range map[string]struct {
		s    AgentStatus
		want string
	}{
		"code only":     {AgentStatus{Code: asc.PermissionDenied}, `{"code":4002,"name":"PERMISSION_DENIED"}`},
		"unregistered":  {AgentStatus{Code: 4999}, `{"code":4999}`},
		"possible side": {AgentStatus{Code: asc.Timeout, Retry: &asc.Retry{Retryable: true, Safe: true, SideEffectState: asc.SideEffectPossible, AfterMS: 1500}}, `{"code":5004,"name":"TIMEOUT","retry":{"after_ms":1500,"retryable":true,"safe":false,"side_effect_state":"possible"}}`},
		"capped delay":  {AgentStatus{Code: asc.RateLimited, Retry: &asc.Retry{Retryable: true, Safe: true, AfterMS: 1 << 40}}, `{"code":5001,"name":"RATE_LIMITED","retry":{"after_ms":86400000,"retryable":true,"safe":true}}`},
		"provenance":    {AgentStatus{Code: asc.Cancelled, Provenance: &asc.Provenance{AgentID: "agent:acme.gw", TraceID: "t1"}}, `{"code":3004,"name":"CANCELLED","provenance":{"agent_id":"agent:acme.gw","trace_id":"t1"}}`},
	} {
		got, err := jcs.CanonicalizeValue(tc.s.Value())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: %s\nwant %s", name, got, tc.want)
		}
	}
}

func TestSetProvenanceKeepsTheStatus(t *testing.T) {
	e := FromASC(*asc.New(asc.ResultStateUnknown, asc.ScopeTask, true, time.Unix(0, 0)))
	e.SetProvenance(asc.Provenance{AgentID: "agent:acme.gw"})
	st := e.Details["agent_status"].(map[string]any)
	if st["code"] != int(asc.ResultStateUnknown) || st["retry"] == nil || st["provenance"].(map[string]any)["agent_id"] != "agent:acme.gw" {
		t.Fatalf("agent_status = %v", st)
	}
	bare := &Error{Code: CodeForbidden}
	bare.SetProvenance(asc.Provenance{AgentID: "agent:acme.gw", TraceID: "abc"})
	st = bare.Details["agent_status"].(map[string]any)
	if st["code"] != int(bare.AsASC().Code()) || st["provenance"].(map[string]any)["trace_id"] != "abc" {
		t.Fatalf("agent_status of a bare error = %v", st)
	}
}
