package arsia_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

func ExampleParseAgentID() {
	id, err := arsia.ParseAgentID("agent:arsialabs.demo.risk-assessor/session_1")
	if err != nil {
		panic(err)
	}
	fmt.Println(id.Org, id.Name, id.Sub, id.Resource)

	_, err = arsia.ParseAgentID("agent:-acme.bot")
	fmt.Println(errors.Is(err, arsia.ErrInvalidAgentID), err)
	// Output:
	// arsialabs demo [risk-assessor] session_1
	// true arsia: invalid agent identifier: 'agent:-acme.bot': segment '-acme' starts with a hyphen
}

func ExampleDowngradeCapabilities() {
	effective, _ := arsia.DowngradeCapabilities(
		[]string{"notes.read", "notes.write", "billing.export"},
		[]string{"notes.*"})
	fmt.Println(effective)

	_, err := arsia.DowngradeCapabilities([]string{"arsiaprotocol.state.purge"}, []string{"arsiaprotocol.*"})
	var ae *arsia.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.Code, ae.Details["required_capabilities"])
	}
	// Output:
	// [notes.read notes.write]
	// forbidden [arsiaprotocol.state.purge]
}

func ExampleNewRequest() {
	// An MCP tool call carried verbatim in an ARSIA request.
	call := map[string]any{"jsonrpc": "2.0", "method": "tools/call", "id": 1,
		"params": map[string]any{"name": "get_customer", "arguments": map[string]any{"id": "C-1"}}}
	now := time.Date(2026, 3, 24, 10, 0, 0, 0, time.UTC)
	req, err := arsia.NewRequest("agent:acme.crm-client", "agent:acme.crm",
		[]string{"acme.crm.getCustomerData"}, arsia.PayloadTypeMCPToolCall, call,
		arsia.BuildOptions{Now: now, ID: "0f8fad5b-d9cb-469f-a165-70867728950e"})
	if err != nil {
		panic(err)
	}
	fmt.Println(req.TS, req.ExpiresAt)
	fmt.Println(string(req.Payload.Args))
	// Output:
	// 2026-03-24T10:00:00.000Z 2026-03-24T10:05:00.000Z
	// {"id":1,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"id":"C-1"},"name":"get_customer"}}
}

func ExampleValidateSemantic() {
	env, err := arsia.ParseEnvelope([]byte(`{
		"v": "1.0", "id": "0f8fad5b-d9cb-469f-a165-70867728950e", "ts": "2026-03-24T10:00:00.000Z",
		"from": "agent:acme.echo-client", "to": "agent:acme.echo-server", "intent": "request",
		"capabilities": ["echo.ping"], "payload": {"type": "com.acme.echo/ping", "args": {}},
		"security": {"alg": "EdDSA", "kid": "agent:other.agent#key1", "sig": "c2ln"}}`))
	if err != nil {
		panic(err)
	}
	for _, issue := range arsia.ValidateSemantic(env, arsia.SemanticOptions{}) {
		fmt.Println(issue, "->", arsia.WireCode(issue.Code))
	}
	// Output:
	// missing_expires_at: expires_at is required when intent='request' -> invalid_request
	// kid_prefix_mismatch: security.kid 'agent:other.agent#key1' must start with 'agent:acme.echo-client#' -> unauthorized
}

func ExampleNegotiate() {
	err := arsia.Negotiate("1.0", "1.2", arsia.SupportedVersions())
	var ae *arsia.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.Code, ae.Details["supported_versions"])
	}
	// Output:
	// not_implemented map[max:1.0 min:1.0]
}

func ExampleError_AsASC() {
	e := &arsia.Error{Code: arsia.CodeRateLimited, Description: "Too many requests.",
		Details: map[string]any{"retry_after_seconds": 2}}
	ae := e.AsASC()
	fmt.Println(ae.Code(), ae.Envelope.Status.Name, ae.Envelope.Retry.AfterMS)
	// Output:
	// ASC-5001 RATE_LIMITED 2000
}
