package asc

import (
	"bytes"
	"testing"
)

// FuzzParse: Parse never panics, and whatever it accepts marshals to a
// document that parses again to the same bytes.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		for _, path := range vectors(f, dir) {
			f.Add(readFile(f, path))
		}
	}
	f.Add([]byte(causeChainJSON(MaxCauseDepth + 1)))
	f.Add([]byte(`{"status":{"terminal":true},"causes":[{"status":{}},{"ref":"x"},{}],"conditions":[{"status":{}},{}],"confidence":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = CheckJSON(data)
		env, err := Parse(data)
		if err != nil {
			return
		}
		_ = Check(env)
		first, err := Marshal(env)
		if err != nil {
			t.Fatalf("Marshal of a parsed envelope failed: %v", err)
		}
		again, err := Parse(first)
		if err != nil {
			t.Fatalf("re-Parse failed: %v\n%s", err, first)
		}
		second, err := Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("round trip differs:\n%s\n%s", first, second)
		}
	})
}

// FuzzBindings: the binding parsers never panic.
func FuzzBindings(f *testing.F) {
	f.Add([]byte(`{"type":"urn:agent-status:RATE_LIMITED","status":429,"agent_status":{"code":5001,"name":"RATE_LIMITED","scope":"tool_call","terminal":false}}`))
	f.Add([]byte(`{"content":[{"type":"resource","resource":{"mimeType":"application/agent-status+json","text":"{\"code\":4002,\"name\":\"PERMISSION_DENIED\"}"}}],"isError":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if p, err := ParseProblem(data); err == nil {
			_, _ = FromProblem(p, t0)
		}
		if r, err := ParseMCPToolResult(data); err == nil {
			_, _ = FromMCPToolResult(r)
		}
	})
}
