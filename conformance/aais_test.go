package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/aais"
)

const sharedAAIS = "../../shared/conformance/aais"

func TestAAISUpstreamCorpus(t *testing.T) {
	if _, err := os.Stat(filepath.Join(sharedAAIS, "conformance", "cases.json")); err != nil {
		t.Skip("shared AAIS corpus not present:", err)
	}
	r, err := AAIS(sharedAAIS)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Text())
	if r.Failed != 0 {
		t.Errorf("%d checks failed", r.Failed)
	}
}

// aaisCorpusDir builds a corpus in a temp dir from the aais/testdata
// fixtures, the embedded schema and the given cases.json.
func aaisCorpusDir(t *testing.T, cases string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"shell-approval.json", "approve-once.json"} {
		b, err := os.ReadFile(filepath.Join("..", "aais", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, "examples/"+f, string(b))
	}
	write(t, dir, "schema/v1/aais-1.0.schema.json", string(aais.Schema()))
	if cases != "" {
		write(t, dir, "conformance/cases.json", cases)
	}
	return dir
}

const aaisHeader = `"aais":"1.0","request_fixture":"examples/shell-approval.json","decision_fixture":"examples/approve-once.json",
"action_digest":"sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8"`

func TestAAISOwnCorpus(t *testing.T) {
	dir := aaisCorpusDir(t, `{`+aaisHeader+`,"cases":[
 {"name":"approve_once","now":"2026-08-30T18:01:00Z","outcome":"approved"},
 {"name":"expired","now":"2026-08-30T19:00:00Z","outcome":"expired"},
 {"name":"expired_at_boundary","now":"2026-08-30T18:10:00Z","outcome":"expired"},
 {"name":"changed_action","mutation":"current_action.summary","outcome":"stale"},
 {"name":"changed_arguments","mutation":"current_action.arguments","outcome":"stale"},
 {"name":"changed_effects","mutation":"current_action.effects","outcome":"stale"},
 {"name":"unoffered_scope","mutation":"decision.scope=persistent","outcome":"invalid"},
 {"name":"offered_session","mutation":"decision.scope=session","outcome":"approved"},
 {"name":"stale_digest","mutation":"decision.action_digest=sha256:0000000000000000000000000000000000000000000000000000000000000000","outcome":"stale"},
 {"name":"identical_replay","outcome":"same_resolution"},
 {"name":"conflicting_replay","mutation":"decision.id+decision.decision","outcome":"conflict"},
 {"name":"conflicting_scope","mutation":"decision.id+decision.scope","outcome":"conflict"},
 {"name":"unknown_mutation","mutation":"decision.frobnicate","outcome":"approved"},
 {"name":"unknown_field","mutation":"decision.frobnicate=x","outcome":"approved"},
 {"name":"unknown_action_field","mutation":"current_action.kind.x","outcome":"stale"},
 {"name":"noop_mutation","mutation":"decision.scope=once","outcome":"approved"},
 {"name":"unknown_outcome","outcome":"maybe"},
 {"name":"wrong_outcome","outcome":"denied"},
 {"name":"replay_not_conflict","outcome":"conflict"}
]}`)
	r, err := AAIS(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Text())
	fails := map[string]bool{
		"case/unknown_mutation": true, "case/unknown_field": true, "case/unknown_action_field": true,
		"case/noop_mutation": true, "case/unknown_outcome": true, "case/wrong_outcome": true,
		"case/replay_not_conflict": true,
	}
	for _, res := range r.Results {
		want := string(Passed)
		if fails[res.Name] {
			want = string(Failed)
		}
		if res.Outcome != want {
			t.Errorf("%s: %s (%s), want %s", res.Name, res.Outcome, res.Reason, want)
		}
	}
	if r.Failed != len(fails) || r.Skipped != 0 || r.Passed+r.Failed != len(r.Results) {
		t.Errorf("counts: %s over %d results", r, len(r.Results))
	}
	if res, ok := r.Result("case/unknown_mutation"); !ok || !strings.Contains(res.Reason, "unknown mutation") {
		t.Errorf("unknown mutation: %+v", res)
	}
	if r.String() != fmt.Sprintf("aais conformance: %d passed, %d failed, 0 skipped", r.Passed, r.Failed) {
		t.Errorf("summary %q", r.String())
	}
	if !strings.HasSuffix(r.Text(), r.String()+"\n") || !strings.Contains(r.Text(), "fail case/unknown_outcome: ") {
		t.Errorf("text:\n%s", r.Text())
	}
}

func TestAAISBrokenCorpus(t *testing.T) {
	t.Run("schema differs", func(t *testing.T) {
		dir := aaisCorpusDir(t, `{`+aaisHeader+`,"cases":[{"name":"a","outcome":"approved"}]}`)
		write(t, dir, "schema/v1/aais-1.0.schema.json", "{}")
		r, err := AAIS(dir)
		if err != nil {
			t.Fatal(err)
		}
		if res, _ := r.Result("embedded_schema"); res.Outcome != string(Failed) || r.Failed != 1 {
			t.Errorf("%+v\n%s", res, r.Text())
		}
	})
	t.Run("fixtures missing", func(t *testing.T) {
		dir := aaisCorpusDir(t, `{"aais":"1.0","request_fixture":"../outside.json","decision_fixture":"examples/none.json",
"action_digest":"sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8","cases":[{"name":"a","outcome":"approved"}]}`)
		r, err := AAIS(dir)
		if err != nil {
			t.Fatal(err)
		}
		// Everything but the header and the schema needs the fixtures.
		if r.Passed != 2 || r.Failed != len(r.Results)-2 {
			t.Errorf("%s\n%s", r, r.Text())
		}
	})
	t.Run("bad header", func(t *testing.T) {
		dir := aaisCorpusDir(t, `{"aais":"2.0","request_fixture":"examples/shell-approval.json","decision_fixture":"examples/approve-once.json",
"action_digest":"sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8","cases":[]}`)
		r, err := AAIS(dir)
		if err != nil {
			t.Fatal(err)
		}
		if res, _ := r.Result("corpus_header"); res.Outcome != string(Failed) {
			t.Errorf("%+v", res)
		}
	})
	for name, cases := range map[string]string{
		"missing cases.json": "",
		"not JSON":           "cases",
		"duplicate key":      `{"aais":"1.0","aais":"1.0"}`,
		"unknown member":     `{` + aaisHeader + `,"cases":[],"extra":1}`,
		"trailing data":      `{` + aaisHeader + `,"cases":[]} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			r, err := AAIS(aaisCorpusDir(t, cases))
			if err == nil {
				t.Errorf("no error, report %v", r)
			}
		})
	}
	t.Run("missing dir", func(t *testing.T) {
		if _, err := AAIS(filepath.Join(t.TempDir(), "none")); err == nil {
			t.Error("no error")
		}
	})
}
