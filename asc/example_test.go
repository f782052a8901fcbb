package asc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/asc"
)

func ExampleParse() {
	env, err := asc.Parse([]byte(`{
	  "spec_version": "0.1.0",
	  "status": {"code": 5001, "name": "RATE_LIMITED", "kind": "status", "scope": "tool_call", "terminal": false},
	  "occurred_at": "2026-08-08T12:00:00Z",
	  "x-vendor": {"kept": true}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(env.Status.Code, env.Status.Name, asc.ClassOf(env.Status.Code))
	out, _ := asc.Marshal(env)
	fmt.Println(string(out))
	// Output:
	// ASC-5001 RATE_LIMITED transient_failure
	// {"spec_version":"0.1.0","status":{"code":5001,"name":"RATE_LIMITED","kind":"status","scope":"tool_call","terminal":false},"occurred_at":"2026-08-08T12:00:00Z","x-vendor":{"kept":true}}
}

func ExampleValidateJSON() {
	err := asc.ValidateJSON([]byte(`{
	  "spec_version": "0.1.0",
	  "status": {"code": 5001, "name": "TIMEOUT", "kind": "status", "scope": "conversation", "terminal": false},
	  "occurred_at": "2026-08-08T12:00:00Z",
	  "details": {"remaining": 0}
	}`))
	var ve *asc.ValidationError
	if errors.As(err, &ve) {
		for _, is := range ve.Issues {
			fmt.Println(is)
		}
	}
	fmt.Println(errors.Is(err, asc.ErrNameMismatch))
	// Output:
	// error /status/name [name.mismatch]: code 5001 is registered as RATE_LIMITED, not TIMEOUT
	// error /status/scope [scope]: scope "conversation" is neither a registered scope nor a namespaced extension (such as org.example.conversation)
	// warning /details/remaining [details.namespace]: public details keys should use a reverse-domain namespace such as org.example.remaining
	// true
}

func ExampleDecideRetry() {
	now := time.Date(2026, 8, 8, 12, 0, 0, 0, time.UTC)
	env := asc.New(asc.RateLimited, asc.ScopeToolCall, false, now)
	env.Retry = &asc.Retry{Retryable: true, Safe: true, AfterMS: 2000, IdempotencyKey: "cal-7c27b9", SideEffectState: asc.SideEffectNone}
	d := asc.DecideRetry(env, asc.RetryContext{Now: now})
	fmt.Println(d.Outcome, d.After)

	unknown := asc.New(asc.ResultStateUnknown, asc.ScopeToolCall, true, now)
	fmt.Println(asc.DecideRetry(unknown, asc.RetryContext{Now: now, Idempotent: true}).Outcome)
	// Output:
	// retry 2s
	// reconcile_first
}

func ExampleExplain() {
	fmt.Print(asc.Explain(asc.ResultStateUnknown))
	// Output:
	// Code:            ASC-6005
	// Name:            RESULT_STATE_UNKNOWN
	// Class:           fatal_or_indeterminate - Fatal, indeterminate, or integrity-threatening failures
	// Meaning:         The system cannot determine whether a potentially side-effecting operation committed.
	// Terminal:        yes (default; the envelope's flag wins)
	// Retry hint:      Never blindly (hint only; the retry contract decides)
	// Kind:            status, condition or event
	// HTTP:            502 (advisory: 502 or 504)
	// gRPC:            none defined
	// Severity:        critical (advisory)
}

func ExampleErrorf() {
	err := fmt.Errorf("refund: %w", asc.Errorf(asc.PermissionDenied, asc.ScopeToolCall, "principal lacks orders.refund"))
	env := asc.FromError(err)
	fmt.Println(env.Status.Code, env.Status.Name, env.Status.Terminal)
	fmt.Println(env.Message.User)

	internal := asc.FromError(errors.New("pq: connection refused"))
	fmt.Println(internal.Status.Name, internal.Message.User)
	// Output:
	// ASC-4002 PERMISSION_DENIED true
	// The authenticated principal is not authorised for the operation.
	// INTERNAL_ERROR An unexpected exception, invariant violation, or implementation defect occurred.
}

func ExampleToProblem() {
	env := asc.New(asc.RateLimited, asc.ScopeToolCall, false, time.Date(2026, 8, 8, 12, 0, 0, 0, time.UTC))
	env.Retry = &asc.Retry{Retryable: true, Safe: true, AfterMS: 2000}
	p := asc.ToProblem(env)
	body, _ := json.Marshal(p)
	retryAfter, _ := asc.RetryAfter(env)
	fmt.Println(p.Status, retryAfter)
	fmt.Println(string(body))
	// Output:
	// 429 2
	// {"type":"urn:agent-status:RATE_LIMITED","title":"Rate limited","status":429,"agent_status":{"code":5001,"name":"RATE_LIMITED","scope":"tool_call","terminal":false},"retry":{"retryable":true,"safe":true,"after_ms":2000}}
}
