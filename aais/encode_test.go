package aais

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sameEncoding fails unless the hand-written encoder writes exactly what
// encoding/json writes for every wire value of m, or both refuse it.
func sameEncoding(t *testing.T, m *Message) {
	t.Helper()
	w, err := m.toWire()
	if err != nil {
		return
	}
	values := []any{w}
	if w.Request != nil {
		values = append(values, w.Request)
	}
	if w.Decision != nil {
		values = append(values, w.Decision)
	}
	if w.Resolution != nil {
		values = append(values, w.Resolution)
	}
	if w.Snapshot != nil {
		values = append(values, w.Snapshot)
	}
	for _, v := range values {
		got, gerr := encode(v)
		want, werr := encodeReflect(v)
		if (gerr != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%T: encode = %s, %v\nencoding/json = %s, %v", v, got, gerr, want, werr)
		}
		if gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("%T: encode error %q, encoding/json error %q", v, gerr, werr)
		}
	}
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	for _, m := range copySeeds(t) {
		sameEncoding(t, m)
		for op := range copyMutations {
			for _, v := range append(copyValues, encodeValues...) {
				c := m.clone()
				mutateCopy(c, op, v)
				sameEncoding(t, c)
			}
		}
	}
	// Shapes the mutations do not reach.
	all := Origin{Harness: "h", SessionID: "s", RunID: "r", TaskID: "t", GraphID: "g", NodeID: "n",
		AgentID: "a", Profile: "p", SubagentRunID: "sr", ParentRunID: "pr", Project: "x\x7f\u2029"}
	act, err := NewAction(json.RawMessage(`{"kind":"k","name":"n","summary":"s","arguments":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req := Request{ID: "r", Origin: all, Action: act, Choices: []Choice{}, Extensions: Extensions{}}
	for _, m := range []*Message{
		{Type: TypeRequested, ID: "e", Request: &req},
		{Type: TypeRequested, ID: "e", Request: &Request{ID: "r", Action: act}},
		{Type: TypeRequested, ID: "e", Request: &Request{ID: "r", Action: act, Choices: []Choice{{ScopeConstraints: Constraints{}}},
			Extensions: Extensions{"a": nil, "b": json.RawMessage{}}}},
		{Type: TypeRequested, ID: "e", Request: &Request{ID: "r", Action: act, Extensions: Extensions{"a": json.RawMessage(" [ 1 , {\"x\" : 2 } ] ")}}},
		{Type: TypeRequested, ID: "e", Request: &Request{ID: "r", Action: act, Extensions: Extensions{"a": json.RawMessage(`{"a":1,}`)}}},
		{Type: TypeSnapshot, ID: "e", Snapshot: &Snapshot{}},
		{Type: TypeSnapshot, ID: "e", Snapshot: &Snapshot{Pending: []Request{req, req}}},
		{Type: TypeActivity, ID: "e", Activity: &Activity{RequestID: "r", Message: "<&>", Stage: "s"}},
		{Type: TypeActivity, ID: "e", Activity: &Activity{}},
		{Type: TypeDecided, ID: "e", Decision: &Decision{Actor: Actor{DisplayName: "d", AuthenticatedBy: "a"}, Extensions: Extensions{}}},
		{Type: TypeResolved, ID: "e", Resolution: &Resolution{DecisionID: "d", EffectiveScope: "x", Extensions: Extensions{"z": json.RawMessage(`1`), "a": json.RawMessage(`2`)}}},
	} {
		sameEncoding(t, m)
	}
}

// encodeValues are strings that exercise escaping.
var encodeValues = []string{
	"\x00\x01\x1f\b\f\n\r\t\"\\/", "\x7f", "<script>&amp;", "\u2028\u2029\u2027", "\xe2\x80", "\xf0\x9f\x98\x80",
	"\xed\xa0\x80", "é\xffé", strings.Repeat("\\", 3),
}

// FuzzEncode: the hand-written encoder writes what encoding/json writes
// for any valid message with any one-field change.
func FuzzEncode(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	golden, _ := filepath.Glob("testdata/golden/*.json")
	for _, name := range append(seeds, golden...) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for op := range copyMutations {
			f.Add(b, uint8(op), "\x00é\xff\u2028")
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, op uint8, v string) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		sameEncoding(t, m)
		mutateCopy(m, int(op), v)
		sameEncoding(t, m)
	})
}
