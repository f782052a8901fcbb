package schema_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/custos-runtime/custos/arsia/schema"
)

func ExampleValidateEnvelope() {
	dec := json.NewDecoder(strings.NewReader(`{
		"v": "1.0", "id": "550e8400-e29b-41d4-a716-446655440000",
		"ts": "2026-03-24T10:00:00Z", "to": "agent:acme.crm", "intent": "event",
		"payload": {"type": "com.acme.billing/invoice-paid", "data": {}}}`))
	dec.UseNumber()
	var envelope any
	if err := dec.Decode(&envelope); err != nil {
		panic(err)
	}
	for _, e := range schema.ValidateEnvelope(envelope) {
		fmt.Println(e)
	}
	// Output:
	// <root>: 'from' is a required property
	// /ts: '2026-03-24T10:00:00Z' does not match '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$'
}

func ExampleValidate() {
	errs, err := schema.Validate("acme", "arsia-common.schema.json#/$defs/agent-id")
	if err != nil {
		panic(err)
	}
	for _, e := range errs {
		fmt.Printf("%s [%s]\n", e, e.Keyword)
	}
	// Output:
	// <root>: 'acme' must be in agent:org.name format (e.g., agent:acme.billing) [pattern]
}
