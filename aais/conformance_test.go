package aais

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

// sharedAAIS is the upstream corpus as laid out in the workspace (corpus
// root: the directory holding conformance/, examples/ and schema/).
const sharedAAIS = "../../shared/conformance/aais"

func corpusRoot(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(sharedAAIS, "conformance", "cases.json")); err != nil {
		t.Skipf("%s not present", sharedAAIS)
	}
	return sharedAAIS
}

type corpusFile struct {
	AAIS            string       `json:"aais"`
	RequestFixture  string       `json:"request_fixture"`
	DecisionFixture string       `json:"decision_fixture"`
	ActionDigest    string       `json:"action_digest"`
	Cases           []corpusCase `json:"cases"`
}

type corpusCase struct {
	Name     string `json:"name"`
	Now      string `json:"now"`
	Mutation string `json:"mutation"`
	Outcome  string `json:"outcome"`
}

func readCorpus(t *testing.T, root string) corpusFile {
	t.Helper()
	data := readFile(t, filepath.Join(root, "conformance", "cases.json"))
	if _, err := jcs.Decode(data); err != nil {
		t.Fatalf("cases.json is not strict JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c corpusFile
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("cases.json: %v", err)
	}
	if c.AAIS != Version || !jcs.IsDigest(c.ActionDigest) || len(c.Cases) == 0 {
		t.Fatalf("cases.json header: %+v", c)
	}
	return c
}

// TestUpstreamCorpus checks what the message layer can check on its own:
// the schema embedded here is the upstream one, both fixtures validate,
// the published digest reproduces, and each case's input document
// validates (or not) as its description implies. Outcomes that depend on
// authority state or its clock are left to the authority's runner; see
// needsAuthority.
func TestUpstreamCorpus(t *testing.T) {
	root := corpusRoot(t)
	c := readCorpus(t, root)

	if upstream := readFile(t, filepath.Join(root, "schema", "v1", "aais-1.0.schema.json")); !bytes.Equal(upstream, Schema()) {
		t.Error("embedded schema differs from the upstream copy")
	}
	reqBytes := readFile(t, filepath.Join(root, c.RequestFixture))
	decBytes := readFile(t, filepath.Join(root, c.DecisionFixture))
	if !bytes.Equal(reqBytes, readFile(t, requestFixture)) || !bytes.Equal(decBytes, readFile(t, decisionFixture)) {
		t.Error("testdata copies of the upstream examples differ from the corpus")
	}
	reqMsg := mustParse(t, reqBytes)
	decMsg := mustParse(t, decBytes)
	req, d := reqMsg.Request, decMsg.Decision
	if req == nil || d == nil {
		t.Fatal("fixtures carry the wrong payloads")
	}
	if got, err := req.Action.Digest(); err != nil || got != c.ActionDigest || req.ActionDigest != c.ActionDigest || d.ActionDigest != c.ActionDigest {
		t.Fatalf("digest vector: got %s (%v), request %s, decision %s, want %s", got, err, req.ActionDigest, d.ActionDigest, c.ActionDigest)
	}

	for _, tc := range c.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			if tc.Now != "" {
				if _, err := ParseTimestamp(tc.Now); err != nil {
					t.Fatalf("now: %v", err)
				}
			}
			switch tc.Mutation {
			case "":
				// The fixture decision is offered, for this request, over
				// the same action: every input is valid, and only the
				// authority (clock, replay memory) decides the outcome.
				if _, ok := OfferedChoice(req, d); !ok || d.RequestID != req.ID || d.ActionDigest != req.ActionDigest {
					t.Error("fixture decision does not match the fixture request")
				}
				if tc.Now != "" && tc.Outcome == string(OutcomeExpired) {
					now, _ := ParseTimestamp(tc.Now)
					if now.Time().Before(req.ExpiresAt.Time()) {
						t.Errorf("case says expired but now %s is before expires_at %s", tc.Now, req.ExpiresAt)
					}
				}
			case "current_action.summary":
				// The action about to run differs only in its summary: a
				// valid action whose digest differs from the request's,
				// which the authority must resolve as stale.
				v, err := jcs.Decode(req.Action.Raw())
				if err != nil {
					t.Fatal(err)
				}
				a := v.(map[string]any)
				a["summary"] = "Run something else"
				current, err := NewAction(a)
				if err != nil {
					t.Fatalf("mutated action is not a valid action: %v", err)
				}
				if got, _ := current.Digest(); got == req.ActionDigest {
					t.Error("changed action kept the request's digest")
				}
				if tc.Outcome != string(OutcomeStale) {
					t.Errorf("outcome %s", tc.Outcome)
				}
			case "decision.scope=persistent":
				// approve/persistent is schema-valid on a decision (it
				// carries no constraints) but not offered: invalid.
				doc := decDoc(t)
				set(t, doc, "/decision/scope", "persistent")
				m := mustParse(t, encodeDoc(t, doc))
				if _, ok := OfferedChoice(req, m.Decision); ok {
					t.Error("approve/persistent reported as offered")
				}
				if tc.Outcome != string(OutcomeInvalid) {
					t.Errorf("outcome %s", tc.Outcome)
				}
			case "decision.id+decision.decision":
				// The second, conflicting decision is itself valid and
				// offered; the conflict exists only against the authority's
				// record of the first.
				doc := decDoc(t)
				set(t, doc, "/decision/id", "dec_other")
				set(t, doc, "/decision/decision", "deny")
				m := mustParse(t, encodeDoc(t, doc))
				if _, ok := OfferedChoice(req, m.Decision); !ok {
					t.Error("deny/once not offered")
				}
			default:
				t.Fatalf("unknown mutation %q: fail closed", tc.Mutation)
			}
			if needsAuthority[tc.Name] {
				t.Logf("outcome %q needs the authority state machine", tc.Outcome)
			}
		})
	}
}

// needsAuthority lists the cases whose expected outcome the message layer
// cannot produce: it takes the authority's clock (expired), its record of
// an earlier resolution (identical_replay, conflicting_replay), or the
// resolution it builds (approve_once). changed_action and unoffered_scope
// are decidable here (digest comparison, OfferedChoice) but are still
// outcomes the authority must emit.
var needsAuthority = map[string]bool{
	"approve_once":       true,
	"expired":            true,
	"identical_replay":   true,
	"conflicting_replay": true,
}
