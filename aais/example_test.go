package aais_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/custos-runtime/custos/aais"
)

func ExampleParse() {
	data, err := os.ReadFile("testdata/shell-approval.json")
	if err != nil {
		panic(err)
	}
	m, err := aais.Parse(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	r := m.Request
	fmt.Println(m.Type, r.ID, r.Action.Name(), r.Risk.Level)
	fmt.Println(r.ActionDigest)
	for _, c := range r.Choices {
		fmt.Printf("%s/%s: %s\n", c.Decision, c.Scope, c.Label)
	}
	// Output:
	// approval.requested apr_shell_001 shell.exec medium
	// sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8
	// approve/once: Allow once
	// approve/session: Allow matching checks for this session
	// deny/once: Deny
}

func ExampleParse_rejected() {
	_, err := aais.Parse([]byte(`{"aais":"1.0","type":"approval.activity","id":"e1",
		"occurred_at":"2026-08-30T18:00:00Z","sequence":1,"sequence":2,
		"activity":{"request_id":"r1","message":"m"}}`))
	var ve *aais.ValidationError
	if errors.As(err, &ve) {
		for _, is := range ve.Issues {
			fmt.Println(is.Path, is.Rule)
		}
	}
	fmt.Println(errors.Is(err, aais.ErrMalformed))
	// Output:
	// /sequence json
	// true
}

func ExampleNewRequest() {
	created := time.Date(2026, 8, 30, 18, 0, 0, 0, time.UTC)
	req, err := aais.NewRequest(aais.RequestParams{
		ID:        "apr_1",
		CreatedAt: created,
		ExpiresAt: created.Add(10 * time.Minute),
		Origin:    aais.Origin{Harness: "custos", SessionID: "s-1"},
		// The exact action, as raw JSON: it is hashed and sent as given.
		Action: json.RawMessage(`{"kind":"process.exec","name":"shell.exec",
			"summary":"List the workspace","arguments":{"command":"ls","all":false},"effects":[]}`),
		Risk: aais.Risk{Level: aais.RiskLow, Reasons: []string{"Reads the workspace"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := aais.NewMessage(aais.Header{ID: "evt_1", OccurredAt: created, Sequence: 1, Stream: "authority"}, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := aais.Marshal(m)
	fmt.Println(req.ActionDigest)
	fmt.Println(string(b))
	// Output:
	// sha256:56426bc645d435d550ad3ce490ae2346ee1a1101df8df74707a4a8fb7d43a5d1
	// {"aais":"1.0","type":"approval.requested","id":"evt_1","occurred_at":"2026-08-30T18:00:00Z","sequence":1,"stream":"authority","request":{"id":"apr_1","created_at":"2026-08-30T18:00:00Z","expires_at":"2026-08-30T18:10:00Z","status":"pending","origin":{"harness":"custos","session_id":"s-1"},"action":{"kind":"process.exec","name":"shell.exec","summary":"List the workspace","arguments":{"command":"ls","all":false},"effects":[]},"action_digest":"sha256:56426bc645d435d550ad3ce490ae2346ee1a1101df8df74707a4a8fb7d43a5d1","risk":{"level":"low","reasons":["Reads the workspace"]},"choices":[{"decision":"approve","scope":"once","label":"Allow once"},{"decision":"deny","scope":"once","label":"Deny"}]}}
}

func ExampleOfferedChoice() {
	data, _ := os.ReadFile("testdata/shell-approval.json")
	m, _ := aais.Parse(data)
	d := &aais.Decision{Decision: aais.Approve, Scope: aais.ScopePersistent}
	_, ok := aais.OfferedChoice(m.Request, d)
	fmt.Println("approve/persistent offered:", ok)
	d.Scope = aais.ScopeSession
	c, ok := aais.OfferedChoice(m.Request, d)
	fmt.Println("approve/session offered:", ok, string(c.ScopeConstraints["command_prefix"]))
	// Output:
	// approve/persistent offered: false
	// approve/session offered: true "node --check "
}

func ExampleActionDigest() {
	a, _ := aais.ActionDigest([]byte(`{"b":2,"a":1}`))
	b, _ := aais.ActionDigest([]byte(`{ "a": 1.0, "b": 2 }`))
	fmt.Println(a == b)
	// Output: true
}
