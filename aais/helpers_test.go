package aais

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

// Test documents are the two upstream examples (Apache-2.0), copied
// unmodified into testdata.
const (
	requestFixture  = "testdata/shell-approval.json"
	decisionFixture = "testdata/approve-once.json"
	fixtureDigest   = "sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// doc decodes a fixture into the generic shapes (numbers stay json.Number,
// so re-encoding keeps every literal and the action digest).
func doc(t testing.TB, name string) map[string]any {
	t.Helper()
	v, err := jcs.Decode(readFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

func encodeDoc(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// at walks a slash-separated path of member names and indexes (no
// escaping needed in these tests) and returns the parent container and the
// last token.
func at(t testing.TB, root any, path string) (any, string) {
	t.Helper()
	toks := strings.Split(strings.TrimPrefix(path, "/"), "/")
	cur := root
	for _, tok := range toks[:len(toks)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(c) {
				t.Fatalf("bad path %s", path)
			}
			cur = c[i]
		default:
			t.Fatalf("bad path %s", path)
		}
	}
	return cur, toks[len(toks)-1]
}

func set(t testing.TB, root any, path string, v any) {
	t.Helper()
	parent, last := at(t, root, path)
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i >= len(c) {
			t.Fatalf("bad path %s", path)
		}
		c[i] = v
	default:
		t.Fatalf("bad path %s", path)
	}
}

func del(t testing.TB, root any, path string) {
	t.Helper()
	parent, last := at(t, root, path)
	c, ok := parent.(map[string]any)
	if !ok {
		t.Fatalf("bad path %s", path)
	}
	delete(c, last)
}

func get(t testing.TB, root any, path string) any {
	t.Helper()
	parent, last := at(t, root, path)
	switch c := parent.(type) {
	case map[string]any:
		return c[last]
	case []any:
		i, _ := strconv.Atoi(last)
		return c[i]
	}
	t.Fatalf("bad path %s", path)
	return nil
}

// wantIssue asserts that err is a *ValidationError with an issue of rule
// at path, wrapping class.
func wantIssue(t testing.TB, err error, class error, rule, path string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %s at %q", rule, path)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, class) {
		t.Errorf("error %v does not wrap %v and %v", err, ErrInvalid, class)
	}
	for _, is := range ve.Issues {
		if is.Rule == rule && is.Path == path {
			return
		}
	}
	t.Errorf("no issue %s at %q in %v", rule, path, ve.Issues)
}

func mustParse(t testing.TB, b []byte) *Message {
	t.Helper()
	m, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, b)
	}
	return m
}

func mustMarshal(t testing.TB, m *Message) []byte {
	t.Helper()
	b, err := Marshal(m)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return b
}

// fixtureRequest returns the request of the upstream request example.
func fixtureRequest(t testing.TB) *Request {
	t.Helper()
	return mustParse(t, readFile(t, requestFixture)).Request
}

// snapshotDoc is a valid snapshot holding the fixture request.
func snapshotDoc(t testing.TB) map[string]any {
	t.Helper()
	req := doc(t, requestFixture)["request"]
	return map[string]any{
		"aais": "1.0", "type": "approval.snapshot", "id": "evt_snap_1",
		"occurred_at": "2026-08-30T18:01:00Z", "sequence": json.Number("41"), "stream": "session_s1",
		"snapshot": map[string]any{"as_of_sequence": json.Number("41"), "pending": []any{req}},
	}
}

func resolutionDoc() map[string]any {
	return map[string]any{
		"aais": "1.0", "type": "approval.resolved", "id": "evt_res_1",
		"occurred_at": "2026-08-30T18:01:00Z", "sequence": json.Number("42"), "stream": "session_s1",
		"resolution": map[string]any{
			"id": "res_1", "request_id": "apr_shell_001", "decision_id": "dec_001",
			"action_digest": fixtureDigest, "resolved_at": "2026-08-30T18:01:00Z",
			"outcome": "approved", "message": "Approval accepted.", "effective_scope": "once",
		},
	}
}

func activityDoc() map[string]any {
	return map[string]any{
		"aais": "1.0", "type": "approval.activity", "id": "evt_act_1",
		"occurred_at": "2026-08-30T18:00:30Z", "sequence": json.Number("42"),
		"activity": map[string]any{"request_id": "apr_shell_001", "message": "Waiting for a reviewer", "stage": "waiting"},
	}
}

// seqReader is a deterministic randomness source for ids: bytes 0, 1, 2, ...
type seqReader struct{ n byte }

func (r *seqReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.n
		r.n++
	}
	return len(p), nil
}
