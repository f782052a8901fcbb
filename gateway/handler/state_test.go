package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
)

const stateSender = "agent:acme.alpha"

func newStateHandler(t *testing.T) *handler.State {
	t.Helper()
	now := time.Date(2026, 4, 13, 12, 0, 0, 0, time.UTC)
	h, err := handler.NewState(state.NewMemoryStore(nil), handler.StateOptions{Now: func() time.Time { now = now.Add(time.Second); return now }})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func stateCall(op, capability, args string) handler.Call {
	return handler.Call{Capability: capability, PayloadType: "arsiaprotocol.state/" + op, Args: json.RawMessage(args),
		From: stateSender, To: "agent:local.custos", MessageID: "00000000-0000-4000-8000-000000000001",
		Timestamp: "2026-04-13T12:00:00.000Z", Compliance: map[string]any{"profile": "GDPR-STANDARD"}}
}

// wire returns the ARSIA error the sender gets for err.
func wire(t *testing.T, err error) *arsia.Error {
	t.Helper()
	var pe *handler.ARSIAError
	if !errors.As(err, &pe) {
		t.Fatalf("not an ARSIA error: %v", err)
	}
	if asc.FromError(err).Status.Code != arsia.ToASC(pe.E.Code) {
		t.Errorf("ASC status %d for %s", asc.FromError(err).Status.Code, pe.E.Code)
	}
	return pe.E
}

func TestStateHandler(t *testing.T) {
	ctx := context.Background()
	h := newStateHandler(t)
	key := stateSender + "/agent/prefs"
	run := func(c handler.Call) (handler.Result, error) {
		if _, err := h.Describe(c); err != nil {
			t.Fatal(err)
		}
		return handler.Run(ctx, h, c)
	}
	res, err := run(stateCall("get", arsia.CapStateRead, `{"key":"`+key+`"}`))
	if err != nil || !res.Null || res.Data != nil || res.PayloadType != "arsiaprotocol.state/get" {
		t.Fatalf("GET of a missing key = %+v, %v", res, err)
	}
	res, err = run(stateCall("set", arsia.CapStateWrite, `{"key":"`+key+`","value":{"lang":"pt"},"scope":"agent","pii_classification":"none"}`))
	if err != nil || res.Null {
		t.Fatalf("SET = %+v, %v", res, err)
	}
	var e map[string]any
	if err := json.Unmarshal(res.Data, &e); err != nil || e["version"] != 1.0 || e["owner_agent_id"] != stateSender {
		t.Fatalf("SET result %s", res.Data)
	}
	rec, _ := res.Audit["state_audit"].(map[string]any)
	if rec["event_type"] != "state_set" || rec["key"] != key || rec["version"] != 1 || rec["operator_id"] != "agent:local.custos" || rec["payload_hash"] == nil {
		t.Errorf("SET audit record %v", rec)
	}
	if _, ok := rec["value"]; ok {
		t.Error("the audit record holds the value")
	}
	res, err = run(stateCall("get", arsia.CapStateRead, `{"key":"`+key+`"}`))
	if err != nil || res.Null || string(res.Data) == "" || res.Audit != nil {
		t.Fatalf("GET = %+v, %v", res, err)
	}
	_, err = run(stateCall("set", arsia.CapStateWrite, `{"key":"`+key+`","value":2,"scope":"agent","pii_classification":"none","expected_version":7}`))
	if e := wire(t, err); e.Code != arsia.CodeConflict || e.Details["current_version"] != 1 || e.Details["expected_version"] != 7 || e.HTTPStatus() != 409 {
		t.Errorf("stale SET = %+v", e)
	}
	_, err = run(stateCall("delete", arsia.CapStateWrite, `{"key":"`+stateSender+`/agent/ghost"}`))
	if e := wire(t, err); e.Code != arsia.CodeNotFound || e.HTTPStatus() != 404 {
		t.Errorf("DELETE missing = %+v", e)
	}
	res, err = run(stateCall("query", arsia.CapStateRead, `{"key_prefix":"`+stateSender+`/agent/","scope":"agent"}`))
	if err != nil || !json.Valid(res.Data) || string(res.Data) == "" {
		t.Fatalf("QUERY = %+v, %v", res, err)
	}
	var q struct{ Total int }
	if json.Unmarshal(res.Data, &q); q.Total != 1 {
		t.Errorf("QUERY result %s", res.Data)
	}
	res, err = run(stateCall("snapshot", arsia.CapStateSnapshot, `{"as_of":"2026-04-13T12:00:10.000Z"}`))
	if err != nil {
		t.Fatalf("SNAPSHOT = %v", err)
	}
	var sn struct {
		Entries []any
		Hash    string
	}
	if json.Unmarshal(res.Data, &sn); len(sn.Entries) != 1 || sn.Hash == "" {
		t.Errorf("SNAPSHOT result %s", res.Data)
	}
	res, err = run(stateCall("grant", arsia.CapStateWrite, `{"key_pattern":"`+stateSender+`/shared/*","grantee_agent_id":"agent:acme.beta","access_level":"read"}`))
	if err != nil || res.Audit["state_audit"].(map[string]any)["event_type"] != "state_grant" {
		t.Fatalf("GRANT = %+v, %v", res, err)
	}
	res, err = run(stateCall("purge", arsia.CapStatePurge, `{"key":"`+key+`","reason":"gdpr_erasure"}`))
	if err != nil || res.Audit["state_audit"].(map[string]any)["event_type"] != "state_purge" {
		t.Fatalf("PURGE = %+v, %v", res, err)
	}
	res, err = run(stateCall("purge", arsia.CapStatePurge, `{"key":"`+key+`"}`))
	if err != nil || res.Audit != nil {
		t.Fatalf("second PURGE = %+v, %v (no second audit event)", res, err)
	}
}

// What a strict peer sends wrong: each is an ARSIA error and changes
// nothing.
func TestStateHandlerRefusals(t *testing.T) {
	ctx := context.Background()
	h := newStateHandler(t)
	key := stateSender + "/agent/k"
	tests := []struct {
		name string
		call handler.Call
		code string
	}{
		{"SET under read", stateCall("set", arsia.CapStateRead, `{"key":"`+key+`","value":1,"scope":"agent","pii_classification":"none"}`), arsia.CodeForbidden},
		{"PURGE under write", stateCall("purge", arsia.CapStateWrite, `{"key":"`+key+`"}`), arsia.CodeForbidden},
		{"SNAPSHOT under read", stateCall("snapshot", arsia.CapStateRead, `{"as_of":"2026-04-13T12:00:00.000Z"}`), arsia.CodeForbidden},
		{"GET under snapshot", stateCall("get", arsia.CapStateSnapshot, `{"key":"`+key+`"}`), arsia.CodeForbidden},
		{"unknown op", stateCall("list", arsia.CapStateRead, `{}`), arsia.CodeInvalidRequest},
		{"upper-case op", stateCall("GET", arsia.CapStateRead, `{"key":"`+key+`"}`), arsia.CodeInvalidRequest},
		{"missing key", stateCall("get", arsia.CapStateRead, `{}`), arsia.CodeInvalidRequest},
		{"extra member", stateCall("get", arsia.CapStateRead, `{"key":"`+key+`","x":1}`), arsia.CodeInvalidRequest},
		{"foreign key", stateCall("set", arsia.CapStateWrite, `{"key":"agent:acme.beta/agent/k","value":1,"scope":"agent","pii_classification":"none"}`), arsia.CodeForbidden},
		{"global", stateCall("set", arsia.CapStateWrite, `{"key":"`+stateSender+`/global/k","value":1,"scope":"global","pii_classification":"none"}`), arsia.CodeForbidden},
		{"personal without legal basis", stateCall("set", arsia.CapStateWrite, `{"key":"`+key+`","value":1,"scope":"agent","pii_classification":"personal"}`), arsia.CodeInvalidRequest},
		{"not an object", stateCall("get", arsia.CapStateRead, `[1]`), arsia.CodeInvalidRequest},
		{"args not JSON", stateCall("get", arsia.CapStateRead, `{`), arsia.CodeInvalidRequest},
	}
	for _, tt := range tests {
		_, err := h.Execute(ctx, tt.call)
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		if e := wire(t, err); e.Code != tt.code || arsia.CheckErrorDetails(e.Code, e.Details) != nil {
			t.Errorf("%s: %s %v (%v), want %s", tt.name, e.Code, e.Details, e.Description, tt.code)
		}
	}
	res, err := h.Execute(ctx, stateCall("query", arsia.CapStateRead, `{}`))
	if err != nil || string(res.Data) != `{"entries":[],"limit":100,"offset":0,"total":0}` {
		t.Errorf("after the refusals: %s, %v", res.Data, err)
	}
	if _, err := handler.NewState(nil, handler.StateOptions{}); !errors.Is(err, handler.ErrConfig) {
		t.Errorf("no store: %v", err)
	}
	if _, err := handler.NewState(state.NewMemoryStore(nil), handler.StateOptions{OperatorID: "operator"}); !errors.Is(err, handler.ErrConfig) {
		t.Errorf("bad operator: %v", err)
	}
}
