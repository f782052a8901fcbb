package aais

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

// slowFingerprint is the definition: the JCS digest of the marshalled
// payload.
func slowFingerprint(p interface{ MarshalJSON() ([]byte, error) }) (string, error) {
	b, err := p.MarshalJSON()
	if err != nil {
		return "", err
	}
	d, err := jcs.Digest(b)
	if err != nil {
		return "", errors.Join(ErrInvalid, err)
	}
	return d, nil
}

// sameFingerprint fails unless fingerprint agrees with the definition on
// every payload of m that it fingerprints, errors included.
func sameFingerprint(t *testing.T, m *Message) {
	t.Helper()
	var ps []interface{ MarshalJSON() ([]byte, error) }
	if m.Request != nil {
		ps = append(ps, m.Request)
	}
	if m.Decision != nil {
		ps = append(ps, m.Decision)
	}
	for _, p := range ps {
		got, gerr := fingerprint(p)
		want, werr := slowFingerprint(p)
		if got != want || (gerr != nil) != (werr != nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			b, _ := p.MarshalJSON()
			t.Fatalf("%T: fingerprint = %q, %v; JCS digest of the JSON = %q, %v\n%s", p, got, gerr, want, werr, b)
		}
	}
}

func TestFingerprintMatchesJCS(t *testing.T) {
	values := append(append([]string{}, copyValues...), encodeValues...)
	values = append(values, "\u00e9\U0001F600", `{"b":1,"a":[1.50,1e2,"\u00e9"]}`, `"\u2028"`,
		strings.Repeat("[", 59)+strings.Repeat("]", 59), strings.Repeat("[", 60)+strings.Repeat("]", 60),
		strings.Repeat("[", 61)+strings.Repeat("]", 61), strings.Repeat("[", 62)+strings.Repeat("]", 62))
	for _, m := range copySeeds(t) {
		sameFingerprint(t, m)
		for op := range copyMutations {
			for _, v := range values {
				c := m.clone()
				mutateCopy(c, op, v)
				sameFingerprint(t, c)
			}
		}
	}
	// Non-ASCII and ordering-sensitive keys, every origin member, nils.
	act, err := NewAction(json.RawMessage(`{"kind":"k","name":"n","summary":"s","arguments":{"z":1,"a":{"é":2,"e":3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	all := Origin{Harness: "h", SessionID: "s", RunID: "r", TaskID: "t", GraphID: "g", NodeID: "n",
		AgentID: "a", Profile: "p", SubagentRunID: "sr", ParentRunID: "pr", Project: "x\x7f\u2029\x01"}
	for _, r := range []*Request{
		{ID: "r", Origin: all, Action: act, Choices: []Choice{}, Extensions: Extensions{}},
		{ID: "r", Action: act},
		{ID: "r", Action: act, Choices: []Choice{{ScopeConstraints: Constraints{"\ue000": json.RawMessage(`1`), "\U0001F600": json.RawMessage(`2`)}}}},
		{ID: "r", Action: act, Extensions: Extensions{"b": json.RawMessage(`1`), "a": nil, "B": json.RawMessage(` 2 `)}},
		{ID: "r", Action: act, Extensions: Extensions{"a": json.RawMessage{}}},
		{ID: "r"},
	} {
		sameFingerprint(t, &Message{Request: r})
	}
	sameFingerprint(t, &Message{Decision: &Decision{Actor: Actor{DisplayName: "d", AuthenticatedBy: "\x00"}, Extensions: Extensions{}}})
}

// FuzzFingerprint: fingerprint is the JCS digest of the marshalled payload
// for any valid message with any one-field change.
func FuzzFingerprint(f *testing.F) {
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
		sameFingerprint(t, m)
		mutateCopy(m, int(op), v)
		sameFingerprint(t, m)
	})
}
