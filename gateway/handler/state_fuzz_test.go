package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/gateway/handler"
)

// FuzzStateHandler sends the state handler arbitrary operations,
// capabilities and args: it never panics, answers a refusal with an
// ARSIA error whose details the code's rules accept, and a success with
// one JSON object (or null for GET).
func FuzzStateHandler(f *testing.F) {
	f.Add("set", arsia.CapStateWrite, `{"key":"agent:acme.alpha/agent/k","value":{"a":[1,2]},"scope":"agent","pii_classification":"none","expected_version":1}`)
	f.Add("get", arsia.CapStateRead, `{"key":"agent:acme.alpha/agent/k"}`)
	f.Add("query", arsia.CapStateRead, `{"key_prefix":"agent:acme.alpha/","limit":5000,"offset":2}`)
	f.Add("snapshot", arsia.CapStateSnapshot, `{"as_of":"2026-04-13T12:00:00.000Z","filter":{"scope":"agent"}}`)
	f.Add("grant", arsia.CapStateWrite, `{"key_pattern":"agent:acme.alpha/shared/*","grantee_agent_id":"agent:acme.beta","access_level":"read_write","valid_until":"2027-01-01T00:00:00.000Z"}`)
	f.Add("revoke", arsia.CapStateWrite, `{"grant_id":"00000000-0000-4000-8000-000000000001"}`)
	f.Add("purge", arsia.CapStatePurge, `{"key":"agent:acme.alpha/agent/k","reason":"x"}`)
	f.Add("delete", arsia.CapStateWrite, `{"key":"agent:acme.alpha/agent/k"}`)
	f.Fuzz(func(t *testing.T, op, capability, args string) {
		h := newStateHandler(t)
		c := stateCall(op, capability, args)
		if _, err := h.Describe(c); err != nil {
			t.Fatal(err)
		}
		res, err := handler.Run(context.Background(), h, c)
		if err != nil {
			var pe *handler.ARSIAError
			if !errors.As(err, &pe) {
				t.Fatalf("not an ARSIA error: %v", err)
			}
			if err := arsia.CheckErrorDetails(pe.E.Code, pe.E.Details); err != nil {
				t.Fatalf("%s: %v", pe.E.Code, err)
			}
			return
		}
		if res.Null {
			if op != "get" {
				t.Fatalf("null result for %s", op)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(res.Data, &m); err != nil || m == nil {
			t.Fatalf("result %q: %v", res.Data, err)
		}
	})
}
