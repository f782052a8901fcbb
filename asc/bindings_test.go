package asc

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHTTPStatus(t *testing.T) {
	tests := map[Code]int{
		Accepted: 202, Running: 200, Success: 200, HumanApprovalRequired: 202, AuthenticationRequired: 401,
		InvalidRequest: 400, PermissionDenied: 403, NotFound: 404, Conflict: 409, RateLimited: 429,
		DependencyUnavailable: 503, Timeout: 504, InternalError: 500, ResultStateUnknown: 502,
		HallucinationDetected: 422, PromptCacheHit: 200,
		1999: 202, 2999: 200, 3999: 202, 4999: 400, 5999: 503, 6999: 500, 7999: 422, 8999: 200, 9501: 500, 42: 500,
	}
	for c, want := range tests {
		if got := HTTPStatus(c); got != want {
			t.Errorf("HTTPStatus(%d) = %d, want %d", c, got, want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for ms, want := range map[int64]string{1: "1", 1000: "1", 1001: "2", 2000: "2", 2500: "3"} {
		e := New(RateLimited, ScopeToolCall, false, t0)
		e.Retry = &Retry{AfterMS: ms}
		if got, ok := RetryAfter(e); !ok || got != want {
			t.Errorf("after_ms %d: %q, want %q", ms, got, want)
		}
	}
	if _, ok := RetryAfter(New(RateLimited, ScopeToolCall, false, t0)); ok {
		t.Error("Retry-After without a contract")
	}
}

// bindingVectors are the valid vectors rendered through the bindings.
var bindingVectors = []string{"minimum", "full", "result-state-unknown", "extension-code-and-scope", "success-terminal"}

func parseVector(t *testing.T, name string) *Envelope {
	t.Helper()
	e, err := Parse(readFile(t, filepath.Join("testdata", "valid", name+".json")))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func indentJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, data, "", "  "); err != nil {
		t.Fatal(err)
	}
	return append(out.Bytes(), '\n')
}

func TestProblemGolden(t *testing.T) {
	for _, name := range bindingVectors {
		t.Run(name, func(t *testing.T) {
			e := parseVector(t, name)
			p := ToProblem(e)
			golden(t, name+".problem.json", indentJSON(t, p))

			data, _ := json.Marshal(p)
			back, err := ParseProblem(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromProblem(back, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Code != e.Status.Code || got.Status.Name != e.Status.Name ||
				got.Status.Scope != e.Status.Scope || got.Status.Terminal != e.Status.Terminal {
				t.Errorf("status lost: %+v", got.Status)
			}
			if (e.Retry == nil) != (got.Retry == nil) {
				t.Error("retry lost")
			}
			if e.Message != nil && e.Message.Developer != "" && strings.Contains(string(data), e.Message.Developer) {
				t.Error("developer message leaked into problem details")
			}
			if err := Validate(got); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestProblemUpstreamExample(t *testing.T) {
	doc := `{"type":"urn:agent-status:RATE_LIMITED","title":"Agent dependency rate-limited","status":429,
	"agent_status":{"code":5001,"name":"RATE_LIMITED","scope":"tool_call","terminal":false},
	"retry":{"retryable":true,"safe":true,"after_ms":2000},"x-trace":"kept"}`
	p, err := ParseProblem([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if p.Extra["x-trace"] != "kept" {
		t.Error("unknown member lost")
	}
	e, err := FromProblem(p, t0)
	if err != nil {
		t.Fatal(err)
	}
	if ra, _ := RetryAfter(e); ra != "2" {
		t.Errorf("Retry-After %q", ra)
	}
	if HTTPStatus(e.Status.Code) != p.Status {
		t.Error("HTTP status disagrees with the example")
	}
}

func TestFromProblemRejects(t *testing.T) {
	base := func() *ProblemDetails {
		return &ProblemDetails{Type: "urn:agent-status:RATE_LIMITED", Status: 429,
			AgentStatus: &ProblemStatus{Code: RateLimited, Name: "RATE_LIMITED", Scope: ScopeToolCall}}
	}
	tests := []struct {
		name string
		edit func(p *ProblemDetails)
		want error
	}{
		{"type and agent_status disagree", func(p *ProblemDetails) { p.Type = "urn:agent-status:TIMEOUT" }, ErrBinding},
		{"not an ASC type", func(p *ProblemDetails) { p.Type = "about:blank" }, ErrBinding},
		{"no agent_status", func(p *ProblemDetails) { p.AgentStatus = nil }, ErrBinding},
		{"registered pair broken", func(p *ProblemDetails) {
			p.Type = "urn:agent-status:TIMEOUT"
			p.AgentStatus.Name = "TIMEOUT"
		}, ErrNameMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			tt.edit(p)
			if _, err := FromProblem(p, t0); !errors.Is(err, tt.want) {
				t.Fatalf("FromProblem() = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := ParseProblem([]byte(`{"type":"urn:agent-status:X","type":"y"}`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("duplicate member accepted: %v", err)
	}
	if _, err := ParseProblem([]byte(`{"status":"429"}`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("string status accepted: %v", err)
	}
}

func TestMCPGolden(t *testing.T) {
	for _, name := range bindingVectors {
		t.Run(name, func(t *testing.T) {
			e := parseVector(t, name)
			r, err := ToMCPToolResult(e)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".mcp.json", indentJSON(t, r))
			if r.IsError != (e.Status.Terminal && e.Status.Code >= 4000 && e.Status.Code < 8000) {
				t.Errorf("isError = %t", r.IsError)
			}
			if !strings.HasPrefix(r.Content[1].Resource.URI, MCPEnvelopeURIPrefix+"sha256:") {
				t.Errorf("uri %q", r.Content[1].Resource.URI)
			}
			data, _ := json.Marshal(r)
			parsed, err := ParseMCPToolResult(data)
			if err != nil {
				t.Fatal(err)
			}
			st, err := FromMCPToolResult(parsed)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Complete() || st.Code() != e.Status.Code {
				t.Fatalf("%+v", st)
			}
			want, _ := Marshal(e)
			got, _ := Marshal(st.Envelope)
			if !bytes.Equal(want, got) {
				t.Error("envelope changed through MCP")
			}
		})
	}
}

func TestMCPStableURI(t *testing.T) {
	a, _ := ToMCPToolResult(parseVector(t, "full"))
	b, _ := ToMCPToolResult(parseVector(t, "full"))
	if a.Content[1].Resource.URI != b.Content[1].Resource.URI {
		t.Fatal("uri not stable")
	}
}

func TestMCPUpstreamCompactForm(t *testing.T) {
	doc := `{"content":[{"type":"text","text":"The customer record is read-only for this principal."},
	{"type":"resource","resource":{"mimeType":"application/agent-status+json","text":"{\"code\":4002,\"name\":\"PERMISSION_DENIED\",\"scope\":\"tool_call\"}"}}],"isError":true}`
	r, err := ParseMCPToolResult([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	st, err := FromMCPToolResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if st.Complete() || st.Partial == nil || st.Code() != PermissionDenied || st.Partial.Scope != ScopeToolCall || !st.IsError {
		t.Fatalf("%+v", st)
	}
}

func TestMCPRejects(t *testing.T) {
	tests := map[string]string{
		"no resource":   `{"content":[{"type":"text","text":"x"}],"isError":true}`,
		"wrong mime":    `{"content":[{"type":"resource","resource":{"mimeType":"text/plain","text":"{}"}}]}`,
		"bad json text": `{"content":[{"type":"resource","resource":{"mimeType":"application/agent-status+json","text":"{"}}]}`,
		"name mismatch": `{"content":[{"type":"resource","resource":{"mimeType":"application/agent-status+json","text":"{\"code\":4002,\"name\":\"NOT_FOUND\"}"}}]}`,
		"bad envelope":  `{"content":[{"type":"resource","resource":{"mimeType":"application/agent-status+json","text":"{\"status\":{}}"}}]}`,
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := ParseMCPToolResult([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := FromMCPToolResult(r); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := ParseMCPToolResult([]byte(`{"content":"x"}`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("content string accepted: %v", err)
	}
}

func TestA2A(t *testing.T) {
	tests := []struct {
		code     Code
		terminal bool
		want     A2AState
	}{
		{Accepted, false, A2ASubmitted},
		{Running, false, A2AWorking},
		{RetryScheduled, false, A2AWorking},
		{WaitingDependency, false, A2AWorking},
		{HumanInputRequired, false, A2AInputRequired},
		{HumanApprovalRequired, false, A2AInputRequired},
		{AuthenticationRequired, false, A2AAuthRequired},
		{Success, true, A2ACompleted},
		{SuccessWithWarnings, true, A2ACompleted},
		{PartialSuccess, true, A2ACompleted},
		{GuardrailBlocked, true, A2ARejected},
		{PermissionDenied, true, A2ARejected},
		{UnsupportedCapability, true, A2ARejected},
		{PolicyRedacted, true, A2ACompleted},
		{InvalidRequest, true, A2AFailed},
		{RateLimited, true, A2AFailed},
		{RateLimited, false, A2AWorking},
		{InternalError, true, A2AFailed},
		{HallucinationDetected, true, A2AFailed},
		{Cancelled, true, A2ACanceled},
		{5999, true, A2AFailed},
	}
	for _, tt := range tests {
		s := Status{Code: tt.code, Name: tt.code.Name(), Terminal: tt.terminal}
		got, ok := A2AStateFor(s)
		if !ok || got != tt.want {
			t.Errorf("A2AStateFor(%d, %t) = %s, want %s", tt.code, tt.terminal, got, tt.want)
		}
		if err := CheckA2A(tt.want, s); err != nil {
			t.Error(err)
		}
	}
	for _, c := range []Code{PromptCacheHit, 9501, 42} {
		if _, ok := A2AStateFor(Status{Code: c, Terminal: true}); ok {
			t.Errorf("%d has an A2A state", c)
		}
		if err := CheckA2A(A2AFailed, Status{Code: c}); !errors.Is(err, ErrBinding) {
			t.Errorf("CheckA2A(%d) = %v", c, err)
		}
	}
	if err := CheckA2A(A2ACompleted, Status{Code: PermissionDenied, Terminal: true}); !errors.Is(err, ErrBinding) {
		t.Errorf("CheckA2A(completed, PERMISSION_DENIED) = %v", err)
	}
}

func TestA2AAllowedCodes(t *testing.T) {
	tests := map[A2AState][]Code{
		A2ASubmitted:     {Accepted},
		A2AInputRequired: {HumanInputRequired, HumanApprovalRequired},
		A2AAuthRequired:  {AuthenticationRequired},
		A2ACompleted:     {Success, SuccessWithWarnings, PartialSuccess, NoActionRequired, PolicyRedacted},
		A2ARejected:      {PermissionDenied, GuardrailBlocked, UnsupportedCapability},
		A2ACanceled:      {Cancelled},
	}
	for state, want := range tests {
		if got := A2AAllowedCodes(state); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", state, got, want)
		}
	}
	failed := A2AAllowedCodes(A2AFailed)
	for _, c := range []Code{RateLimited, Timeout, ResultStateUnknown, HallucinationDetected, IntegrityCheckFailed} {
		if !slices.Contains(failed, c) {
			t.Errorf("failed lacks %d", c)
		}
	}
	working := A2AAllowedCodes(A2AWorking)
	for _, c := range []Code{Running, RetryScheduled, RateLimited} {
		if !slices.Contains(working, c) {
			t.Errorf("working lacks %d", c)
		}
	}
	if len(A2AStates()) != 8 {
		t.Error("A2AStates")
	}
}

func TestSpanAttributes(t *testing.T) {
	e := parseVector(t, "full") // 5004 TIMEOUT, terminal, FINISHED, safe retry
	got := map[string]any{}
	for _, a := range SpanAttributes(e) {
		got[a.Key] = a.Value
	}
	want := map[string]any{
		"agent.status.code": int64(5004), "agent.status.name": "TIMEOUT", "agent.status.class": "transient_failure",
		"agent.status.kind": "status", "agent.status.scope": "tool_call", "agent.status.terminal": true,
		"agent.status.retryable": true, "agent.status.retry_safe": true, "agent.lifecycle.phase": "FINISHED",
		"error.type": "TIMEOUT",
	}
	if len(got) != len(want) {
		t.Errorf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if !SpanIsError(e) {
		t.Error("terminal 5004 not an error")
	}

	rl := New(RateLimited, ScopeToolCall, false, t0)
	if SpanIsError(rl) {
		t.Error("non-terminal attempt marks the span as error")
	}
	for _, a := range SpanAttributes(rl) {
		switch a.Key {
		case "error.type", "agent.lifecycle.phase":
			t.Errorf("unexpected %s", a.Key)
		case "agent.status.retry_safe", "agent.status.retryable":
			if a.Value != false {
				t.Errorf("%s assumed without a contract", a.Key)
			}
		}
	}
	for code, want := range map[Code]bool{Success: false, InvalidRequest: false, InternalError: true, IntegrityCheckFailed: true, 9501: false} {
		if got := SpanIsError(New(code, ScopeTask, true, t0)); got != want {
			t.Errorf("SpanIsError(%d) = %t", code, got)
		}
	} // agent.human_action.required: only while a person must act.
	for code, want := range map[Code]bool{HumanApprovalRequired: true, HumanInputRequired: true, AuthenticationRequired: false, Running: false, Success: false} {
		got := false
		for _, a := range SpanAttributes(New(code, ScopeTask, false, t0)) {
			if a.Key == "agent.human_action.required" {
				got = a.Value == true
			}
		}
		if got != want {
			t.Errorf("agent.human_action.required of %d: %t, want %t", code, got, want)
		}
	}
}
