package aais

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/custos-runtime/custos/jcs"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fpFull runs the full validator over the whole schema, bypassing the fast
// path.
func fpFull(t testing.TB, doc any) error {
	t.Helper()
	s, err := schemas()
	if err != nil {
		t.Fatal(err)
	}
	return s.root.Validate(doc)
}

// fpCheck fails when the fast path accepts doc but the full validator
// rejects it. It returns whether the fast path accepted doc.
func fpCheck(t testing.TB, what string, doc any) bool {
	t.Helper()
	if !fastValid(doc) {
		return false
	}
	if err := fpFull(t, doc); err != nil {
		b, _ := json.Marshal(doc)
		t.Fatalf("%s: fast path accepted a document the schema rejects:\n%s\n%v", what, b, err)
	}
	return true
}

func fpDecode(t testing.TB, data []byte) any {
	t.Helper()
	v, err := jcs.Decode(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return v
}

// fpClone deep-copies decoded JSON.
func fpClone(v any) any {
	switch c := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(c))
		for k, e := range c {
			out[k] = fpClone(e)
		}
		return out
	case []any:
		out := make([]any, len(c))
		for i, e := range c {
			out[i] = fpClone(e)
		}
		return out
	}
	return v
}

// fpFixtureFiles are this package's fixtures (valid documents) and, when
// present, the upstream examples.
func fpFixtureFiles(t testing.TB) []string {
	t.Helper()
	files, _ := filepath.Glob("testdata/*.json")
	golden, _ := filepath.Glob("testdata/golden/*.json")
	upstream, _ := filepath.Glob(filepath.Join(sharedAAIS, "examples", "*.json"))
	files = append(append(files, golden...), upstream...)
	if len(files) < 2 {
		t.Fatal("no fixtures")
	}
	return files
}

const fpDigest = "sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8"

// fpExtraValid are valid documents of shapes the fixtures do not show;
// the fast path must decide every one of them.
var fpExtraValid = []string{
	// request: offsets, fractions, every origin member, presentation,
	// choices of every kind, extensions at both levels.
	`{"aais":"1.0","type":"approval.requested","id":"evt:1","occurred_at":"2024-02-29T23:59:59.123456789+05:30",
	  "sequence":0,"extensions":{"https://example.com/x":1,"a-b.c-d/e":[null],"http://":{}},
	  "request":{"id":"apr.1","created_at":"2026-08-30t18:00:00z","expires_at":"2026-08-30T18:10:00-00:00","status":"pending",
	   "origin":{"harness":"h","session_id":"s","run_id":"r","task_id":"t","graph_id":"g","node_id":"n","agent_id":"a",
	    "profile":"p","subagent_run_id":"sr","parent_run_id":"pr","project":"ééé"},
	   "action":{"kind":"k","name":"n","summary":"s","arguments":{},"resource":"r","working_directory":"/",
	    "effects":[],"presentation":{"redacted":false,"details":"d"}},
	   "action_digest":"` + fpDigest + `",
	   "risk":{"level":"critical","reasons":["x"]},
	   "choices":[{"decision":"cancel","scope":"once","label":"Cancel"},
	    {"decision":"approve","scope":"persistent","label":"Always","scope_constraints":{"x":null}}],
	   "extensions":{"example.org/y":"z"}}}`,
	// request with a redacted action and no optional members
	`{"aais":"1.0","type":"approval.requested","id":"e","occurred_at":"2026-08-30T18:00:00Z","sequence":9007199254740991,
	  "request":{"id":"r","created_at":"2026-08-30T18:00:00Z","status":"pending","origin":{"harness":"h","session_id":"s"},
	   "action":{"kind":"k","name":"n","summary":"s","arguments":{"nested":{"deep":[1,2.5,-3e7]}},"presentation":{"redacted":true,"binding_hint":"b"}},
	   "action_digest":"` + fpDigest + `","risk":{"level":"low","reasons":["a","b"]},
	   "choices":[{"decision":"deny","scope":"once","label":"No"}]}}`,
	// decisions
	`{"aais":"1.0","type":"approval.decided","id":"e","occurred_at":"2026-08-30T18:00:00Z","sequence":7,"stream":"s",
	  "decision":{"id":"d","request_id":"r","action_digest":"` + fpDigest + `","decided_at":"2026-08-30T18:00:00.5Z",
	   "decision":"deny","scope":"once","actor":{"id":"policy_1","type":"policy"},"extensions":{}}}`,
	`{"aais":"1.0","type":"approval.decided","id":"e","occurred_at":"2026-08-30T18:00:00Z","sequence":7,
	  "decision":{"id":"d","request_id":"r","action_digest":"` + fpDigest + `","decided_at":"2026-08-30T18:00:00Z",
	   "decision":"approve","scope":"persistent","actor":{"id":"u","type":"human","display_name":"Ünïcödé"}}}`,
	// resolution, minimal
	`{"aais":"1.0","type":"approval.resolved","id":"e","occurred_at":"2026-08-30T18:00:00Z","sequence":9,
	  "resolution":{"id":"res","request_id":"r","action_digest":"` + fpDigest + `","resolved_at":"2026-08-30T18:00:00Z",
	   "outcome":"invalid","message":"m","extensions":{"x.y/":true}}}`,
	// snapshot with nothing pending, activity without a stage
	`{"aais":"1.0","type":"approval.snapshot","id":"e","occurred_at":"2026-08-30T18:00:00Z","sequence":0,"extensions":{},
	  "snapshot":{"as_of_sequence":0,"pending":[]}}`,
	`{"aais":"1.0","type":"approval.activity","id":"e","occurred_at":"2026-08-30T18:00:00Z","sequence":1,
	  "activity":{"request_id":"r","message":"Waiting"}}`,
}

// fpValidDocs are every valid base document: fixtures and fpExtraValid.
func fpValidDocs(t testing.TB) map[string]any {
	t.Helper()
	docs := map[string]any{}
	for _, name := range fpFixtureFiles(t) {
		docs[name] = fpDecode(t, readFile(t, name))
	}
	for i, text := range fpExtraValid {
		docs[fmt.Sprintf("extra[%d]", i)] = fpDecode(t, []byte(text))
	}
	for name, d := range docs {
		if err := fpFull(t, d); err != nil {
			t.Fatalf("%s is not valid: %v", name, err)
		}
	}
	return docs
}

// fpUniqueDocs is fpValidDocs without duplicates (the upstream examples
// and the marshalled goldens repeat the fixtures).
func fpUniqueDocs(t testing.TB) map[string]any {
	t.Helper()
	seen := map[string]bool{}
	out := map[string]any{}
	docs := fpValidDocs(t)
	names := make([]string, 0, len(docs))
	for name := range docs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b, err := json.Marshal(docs[name])
		if err != nil {
			t.Fatal(err)
		}
		if !seen[string(b)] {
			seen[string(b)] = true
			out[name] = docs[name]
		}
	}
	return out
}

func TestFastPathPinned(t *testing.T) {
	if !fastPathUsable(schemaJSON, nil) || !fastPathEnabled() {
		t.Fatal("FAST PATH DISABLED: schema/aais-1.0.schema.json is not the file aais/fastpath.go was audited against. " +
			"Re-audit every check in fastpath.go against the new schema, then update fastPathPin.")
	}
	if fastPathUsable(append(bytes.Clone(schemaJSON), ' '), nil) {
		t.Error("fast path usable over other schema bytes")
	}
	if fastPathUsable(schemaJSON, errors.New("compile failed")) {
		t.Error("fast path usable although the schema does not compile")
	}
}

// TestFastPathAcceptsCommonShapes: the fast path decides the common valid
// documents, so that the full validator runs only for the rare ones.
func TestFastPathAcceptsCommonShapes(t *testing.T) {
	docs := fpValidDocs(t)
	for _, name := range []string{requestFixture, decisionFixture} {
		if !fastValid(docs[name]) {
			t.Errorf("%s: fast path declined", name)
		}
	}
	accepted := 0
	for name, d := range docs {
		if fpCheck(t, name, d) {
			accepted++
		} else {
			t.Errorf("%s: fast path declined a common valid document", name)
		}
		issues, err := schemaIssues(d)
		if err != nil || issues != nil {
			t.Errorf("%s: schemaIssues: %v %v", name, issues, err)
		}
	}
	t.Logf("fast path accepted %d of %d valid fixtures", accepted, len(docs))

	// Go integers, as hand-built maps may carry them.
	d := fpClone(docs[requestFixture]).(map[string]any)
	for _, n := range []any{41, int64(41), uint8(41), uint64(math.MaxUint64)} {
		d["sequence"] = n
		if !fpCheck(t, fmt.Sprintf("sequence %T", n), d) {
			t.Errorf("fast path declined Go integer %T", n)
		}
	}
}

// TestFastPathDeclines: what the schema accepts but the fast path leaves
// to the full validator, and what both reject, at the edges of each check.
func TestFastPathDeclines(t *testing.T) {
	docs := fpValidDocs(t)
	type edit struct {
		path  string
		value any // fpDelete removes the member
		valid bool
		fast  bool // the fast path decides it (only when valid)
	}
	req := []edit{
		{"/sequence", json.Number("41.0"), true, false},
		{"/sequence", json.Number("4.1e1"), true, false},
		{"/sequence", json.Number("-0"), true, false},
		{"/sequence", 41.0, true, false},
		{"/sequence", json.Number("-1"), false, false},
		{"/sequence", json.Number("1.5"), false, false},
		{"/sequence", -1, false, false},
		{"/occurred_at", "2016-12-31T23:59:60Z", true, false},
		{"/occurred_at", "2026-08-30T18:00:60Z", false, false},
		{"/occurred_at", "2026-08-30T18:00:00", false, false},
		{"/occurred_at", "2026-02-29T18:00:00Z", false, false},
		{"/occurred_at", "2026-08-30T18:00:00+24:00", false, false},
		{"/occurred_at", "2026-08-30T18:00:00.Z", false, false},
		{"/occurred_at", "2026-08-30 18:00:00Z", false, false},
		{"/id", strings.Repeat("a", 201), false, false},
		{"/id", "a\n", false, false},
		{"/id", "_a", false, false},
		{"/stream", "", false, false},
		{"/extensions", map[string]any{"com.example.feature": true}, false, false},
		{"/extensions", map[string]any{"urn:x:y": true}, false, false},
		{"/extensions", map[string]any{".a/": true}, false, false},
		{"/extensions", map[string]any{"a./": true}, false, false},
		{"/extensions", map[string]any{"a.b": true}, false, false},
		{"/extensions", []any{}, false, false},
		{"/request/status", "approved", false, false},
		{"/request/action_digest", strings.ToUpper(fpDigest), false, false},
		{"/request/action_digest", fpDigest + "\n", false, false},
		{"/request/origin/project", strings.Repeat("é", 4096), true, true},
		{"/request/origin/project", strings.Repeat("\xff", 4096), true, true},
		{"/request/origin/project", strings.Repeat("\xff", 4097), false, false},
		{"/request/origin/project", strings.Repeat("é", 4097), false, false},
		{"/request/origin/session_id", fpDelete{}, false, false},
		{"/request/action/arguments", []any{}, false, false},
		{"/request/action/presentation", map[string]any{"redacted": true}, false, false},
		{"/request/action/presentation", map[string]any{"redacted": true, "binding_hint": ""}, false, false},
		{"/request/choices/2/scope", "session", false, false},
		{"/request/choices/1/scope_constraints", fpDelete{}, false, false},
		{"/request/choices/1/scope_constraints", map[string]any{}, false, false},
		{"/request/choices/0/allow_edits", true, false, false},
		{"/request/risk/reasons", []any{}, false, false},
		{"/decision", map[string]any{}, false, false},
		{"/decision", fpClone(fpGet(docs[decisionFixture], []any{"decision"})), false, false}, // a second, valid body
		{"/activity", map[string]any{"request_id": "r", "message": "m"}, false, false},
		{"/request2", fpClone(fpGet(docs[requestFixture], []any{"request"})), false, false}, // unknown member, valid body
		{"/aais", json.Number("1.0"), false, false},
	}
	for _, e := range req {
		d := fpClone(docs[requestFixture])
		fpSet(d, fpPath(e.path), e.value)
		if err := fpFull(t, d); (err == nil) != e.valid {
			t.Errorf("%s = %v: full validator: %v, want valid=%v", e.path, e.value, err, e.valid)
		}
		if fastValid(d) != e.fast {
			t.Errorf("%s = %.40q: fast path says %v", e.path, e.value, !e.fast)
		}
	}
	dec := []edit{
		{"/decision/scope", "session", false, false}, // deny below
		{"/decision/decision", "deny", true, false},
	}
	d := fpClone(docs[decisionFixture])
	fpSet(d, fpPath(dec[0].path), dec[0].value)
	fpSet(d, fpPath(dec[1].path), dec[1].value)
	if fpFull(t, d) == nil || fastValid(d) {
		t.Error("deny/session decision: accepted")
	}
}

// ---- Mutations ----

type fpDelete struct{}

// fpPath splits a slash path ("/request/choices/0") into tokens, indexes
// as ints.
func fpPath(p string) []any {
	var out []any
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		var i int
		if _, err := fmt.Sscanf(tok, "%d", &i); err == nil && fmt.Sprint(i) == tok {
			out = append(out, i)
		} else {
			out = append(out, tok)
		}
	}
	return out
}

// fpSet sets (or with fpDelete removes) the value at path in root; a
// missing last member is added. It reports whether the path existed up to
// its parent.
func fpSet(root any, path []any, v any) bool {
	cur := root
	for _, tok := range path[:len(path)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok.(string)]
		case []any:
			cur = c[tok.(int)]
		default:
			return false
		}
	}
	last := path[len(path)-1]
	switch c := cur.(type) {
	case map[string]any:
		if _, del := v.(fpDelete); del {
			delete(c, last.(string))
		} else {
			c[last.(string)] = v
		}
	case []any:
		c[last.(int)] = v
	default:
		return false
	}
	return true
}

func fpGet(root any, path []any) any {
	cur := root
	for _, tok := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok.(string)]
		case []any:
			cur = c[tok.(int)]
		}
	}
	return cur
}

// fpPaths lists the path of every value below root.
func fpPaths(root any) [][]any {
	var out [][]any
	var walk func(v any, at []any)
	walk = func(v any, at []any) {
		switch c := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(c))
			for k := range c {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				p := append(slices.Clip(at), k)
				out = append(out, p)
				walk(c[k], p)
			}
		case []any:
			for i, e := range c {
				p := append(slices.Clip(at), i)
				out = append(out, p)
				walk(e, p)
			}
		}
	}
	walk(root, nil)
	return out
}

// fpValues are the replacement values of the mutation test.
func fpValues() []any {
	vals := []any{
		nil, true, false,
		json.Number("0"), json.Number("-1"), json.Number("1"), json.Number("1.5"), json.Number("1e2"),
		json.Number("41.0"), json.Number("-0"), json.Number("01"), json.Number("18446744073709551616"),
		0, -1, 3, uint8(1), 1.5, 2.0, math.NaN(), math.Inf(1), int64(-5),
		"", "x", "a", " ", "-a", "a b", "a\n", "\n", "é", "\xff", "a\x00",
		strings.Repeat("x", 5000), strings.Repeat("é", 3000),
		"1.0", "1.1", "pending", "approved",
		"approval.requested", "approval.decided", "approval.resolved", "approval.snapshot", "approval.activity", "approval.x",
		"approve", "deny", "cancel", "once", "session", "persistent", "human", "policy",
		"low", "medium", "high", "critical", "denied", "cancelled", "expired", "stale", "conflict", "invalid",
		fpDigest, strings.ToUpper(fpDigest), fpDigest[:70], fpDigest + "0", fpDigest + "\n", "sha256:" + strings.Repeat("g", 64),
		"2026-08-30T18:00:00Z", "2026-08-30T18:00:00.000001Z", "2026-08-30T18:00:00+01:00", "2026-08-30t18:00:00z",
		"2026-08-30T18:00:00", "2026-08-30T24:00:00Z", "2026-08-30T23:59:60Z", "2026-12-31T23:59:60Z", "2026-12-31T22:59:60-01:00",
		"2026-02-29T00:00:00Z", "2024-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
		"2026-08-30T18:00:00+23:59", "2026-08-30T18:00:00+24:00", "2026-08-30T18:00:00+0100", "2026-08-30T18:00:00.Z",
		"+026-08-30T18:00:00Z", "2026-8-30T18:00:00Z", "2026-08-30T+1:00:00Z", "2026-08-30T18:00:00ZZ", "2026-08-30T18:00:00Z\n",
		"com.example/x", "https://x", "urn:x",
		[]any{}, []any{"x"}, []any{""}, []any{nil}, []any{map[string]any{}},
		map[string]any{}, map[string]any{"k": "v"}, map[string]any{"com.example/k": "v"},
		map[string]any{"redacted": true}, map[string]any{"redacted": true, "binding_hint": "b"},
	}
	for _, n := range []int{200, 1000, 2000, 4096, 10000} {
		vals = append(vals, strings.Repeat("a", n), strings.Repeat("a", n+1), strings.Repeat("é", n), strings.Repeat("é", n+1),
			strings.Repeat("\xff", n), strings.Repeat("\xff", n+1))
	}
	return vals
}

// fpNames are member names added to every object.
var fpNames = []string{
	"zz_unknown", "x", "com.example/x", "https://x", "http://", "a.b", "a./", ".a/", "a-b.c-d/e", "a.b/", "é.b/", "HTTP://x",
	"aais", "type", "id", "occurred_at", "sequence", "stream", "extensions",
	"request", "decision", "resolution", "snapshot", "activity",
	"created_at", "expires_at", "status", "origin", "action", "action_digest", "risk", "choices",
	"scope", "scope_constraints", "label", "presentation", "redacted", "binding_hint", "details",
	"effects", "resource", "working_directory", "arguments", "summary", "kind", "name",
	"project", "harness", "session_id", "run_id", "level", "reasons", "actor", "display_name", "decided_at",
	"outcome", "message", "effective_scope", "decision_id", "resolved_at", "as_of_sequence", "pending", "request_id", "stage",
}

// fpMutants calls f with every single mutation of base.
func fpMutants(base any, f func(what string, m any)) {
	vals := fpValues()
	paths := fpPaths(base)
	var strs []string
	for _, p := range paths {
		if s, ok := fpGet(base, p).(string); ok && !slices.Contains(strs, s) {
			strs = append(strs, s)
		}
	}
	for _, p := range paths {
		at := fmt.Sprint(p)
		// Inside free-form values the schema checks nothing, and every
		// mutation there costs a full validation: take a sample.
		free := fpInFree(p)
		m := fpClone(base)
		if _, isIndex := p[len(p)-1].(int); !isIndex {
			fpSet(m, p, fpDelete{})
			f("delete "+at, m)
		} else {
			// drop the element
			m := fpClone(base)
			parent := p[:len(p)-1]
			a := fpGet(m, parent).([]any)
			i := p[len(p)-1].(int)
			fpSet(m, parent, slices.Delete(slices.Clone(a), i, i+1))
			f("drop "+at, m)
		}
		for i, v := range vals {
			if free && i%10 != 0 {
				continue
			}
			m := fpClone(base)
			fpSet(m, p, fpClone(v))
			f(fmt.Sprintf("set %s to value %d", at, i), m)
		}
		for _, s := range strs {
			if free {
				break
			}
			m := fpClone(base)
			fpSet(m, p, s)
			f(fmt.Sprintf("set %s to %q", at, s), m)
		}
		orig := fpGet(base, p)
		if s, ok := orig.(string); ok && !free {
			for i, s2 := range []string{s + "\n", "\n" + s, " " + s, s + "x", strings.ToUpper(s), strings.ToLower(s),
				s[:len(s)/2], s + s, s + "é", "é" + s} {
				m := fpClone(base)
				fpSet(m, p, s2)
				f(fmt.Sprintf("edit %s (%d)", at, i), m)
			}
		}
		if a, ok := orig.([]any); ok && len(a) > 0 {
			for _, n := range []int{1, 2, 9, 10, 11, 19, 20, 21, 99, 100, 101} {
				grown := make([]any, n)
				for i := range grown {
					grown[i] = fpClone(a[i%len(a)])
				}
				m := fpClone(base)
				fpSet(m, p, grown)
				f(fmt.Sprintf("grow %s to %d", at, n), m)
			}
		}
	}
	// add a member to every object
	objects := [][]any{nil}
	for _, p := range paths {
		if _, ok := fpGet(base, p).(map[string]any); ok && !fpInFree(p) {
			objects = append(objects, p)
		}
	}
	for _, p := range objects {
		for _, name := range fpNames {
			for _, v := range []any{"abc", "2026-08-30T18:00:00Z", json.Number("1"), map[string]any{}} {
				m := fpClone(base)
				o := fpGet(m, p).(map[string]any)
				if _, exists := o[name]; exists {
					continue
				}
				o[name] = v
				f(fmt.Sprintf("add %q=%v to %v", name, v, p), m)
			}
		}
	}
}

// fpInFree reports whether path lies inside a value the schema leaves
// free: the members of arguments, scope_constraints and extensions.
func fpInFree(path []any) bool {
	for _, tok := range path[:len(path)-1] {
		switch tok {
		case "arguments", "scope_constraints", "extensions":
			return true
		}
	}
	return false
}

// TestFastPathMutations: over every single mutation of every valid base
// document, fast path acceptance implies validity; and random chains of
// mutations likewise.
func TestFastPathMutations(t *testing.T) {
	docs := fpUniqueDocs(t)
	names := make([]string, 0, len(docs))
	for name := range docs {
		names = append(names, name)
	}
	slices.Sort(names)
	s, err := schemas()
	if err != nil {
		t.Fatal(err)
	}
	// The full validator is slow (it dominates this test), so it runs on
	// every document the fast path accepts, which is what soundness needs,
	// and on a sample of the others, for the coverage figures; and it runs
	// on all CPUs.
	const sample = 16
	type job struct {
		what    string
		doc     any
		fast    bool
		counted bool
	}
	var (
		total, accepted                        int
		sampled, valid, acceptedSampled, fails atomic.Int64
		jobs                                   chan job
		wg                                     sync.WaitGroup
	)
	start := func() {
		jobs = make(chan job, 64)
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for j := range jobs {
					full := s.root.Validate(j.doc)
					if j.fast && full != nil {
						if fails.Add(1) <= 3 {
							b, _ := json.Marshal(j.doc)
							t.Errorf("%s: fast path accepted a document the schema rejects:\n%s\n%v", j.what, b, full)
						}
					}
					if j.counted {
						sampled.Add(1)
						if full == nil {
							valid.Add(1)
							if j.fast {
								acceptedSampled.Add(1)
							}
						}
					}
				}
			})
		}
	}
	stop := func() {
		close(jobs)
		wg.Wait()
		if fails.Load() > 0 {
			t.FailNow()
		}
	}
	check := func(what string, m any) {
		total++
		fast := fastValid(m)
		if fast {
			accepted++
		}
		counted := total%sample == 0
		if fast || counted {
			jobs <- job{what, m, fast, counted}
		}
	}

	start()
	for _, name := range names {
		fpMutants(docs[name], func(what string, m any) { check(name+": "+what, m) })
	}
	stop()
	t.Logf("single mutations: %d documents, %d accepted by the fast path (all valid); "+
		"in a 1/%d sample of %d: %d valid, %d of them accepted (%.1f%%)",
		total, accepted, sample, sampled.Load(), valid.Load(), acceptedSampled.Load(),
		100*float64(acceptedSampled.Load())/float64(max(valid.Load(), 1)))
	if acceptedSampled.Load()*10 < valid.Load()*9 {
		t.Errorf("fast path accepted only %d of %d valid sampled mutants", acceptedSampled.Load(), valid.Load())
	}

	// Chains: two to four random mutations.
	rng := rand.New(rand.NewPCG(1, 2))
	rounds := 10000
	if testing.Short() {
		rounds = 1000
	}
	vals := fpValues()
	total, accepted = 0, 0
	sampled.Store(0)
	valid.Store(0)
	acceptedSampled.Store(0)
	start()
	for range rounds {
		cur := fpClone(docs[names[rng.IntN(len(names))]])
		for range rng.IntN(3) + 2 {
			fpRandomMutation(rng, cur, vals)
		}
		check("chain", cur)
	}
	stop()
	t.Logf("mutation chains: %d documents, %d accepted by the fast path (all valid); in the sample: %d valid, %d accepted",
		total, accepted, valid.Load(), acceptedSampled.Load())
}

// fpRandomMutation applies one random mutation to root in place.
func fpRandomMutation(rng *rand.Rand, root any, vals []any) {
	paths := fpPaths(root)
	if len(paths) == 0 {
		return
	}
	p := paths[rng.IntN(len(paths))]
	switch rng.IntN(6) {
	case 0: // delete a member
		if _, isIndex := p[len(p)-1].(int); !isIndex {
			fpSet(root, p, fpDelete{})
		}
	case 1: // add a member to an object
		if o, ok := fpGet(root, p).(map[string]any); ok {
			o[fpNames[rng.IntN(len(fpNames))]] = fpClone(vals[rng.IntN(len(vals))])
		}
	case 2: // copy another value here
		q := paths[rng.IntN(len(paths))]
		fpSet(root, p, fpClone(fpGet(root, q)))
	default:
		fpSet(root, p, fpClone(vals[rng.IntN(len(vals))]))
	}
}

// TestFastPathDifferentialFixtures checks the implication on every object
// and array in the fixtures, the upstream examples and the schema itself.
func TestFastPathDifferentialFixtures(t *testing.T) {
	checked, accepted := 0, 0
	var walk func(what string, v any)
	walk = func(what string, v any) {
		checked++
		if fpCheck(t, what, v) {
			accepted++
		}
		switch c := v.(type) {
		case map[string]any:
			for k, e := range c {
				walk(what+"/"+k, e)
			}
		case []any:
			for i, e := range c {
				walk(fmt.Sprintf("%s/%d", what, i), e)
			}
		}
	}
	for _, name := range fpFixtureFiles(t) {
		walk(name, fpDecode(t, readFile(t, name)))
	}
	for i, text := range fpExtraValid {
		walk(fmt.Sprintf("extra[%d]", i), fpDecode(t, []byte(text)))
	}
	walk("schema", fpDecode(t, Schema()))
	for _, name := range []string{"conformance/cases.json", "MANIFEST.json"} {
		if data, err := os.ReadFile(filepath.Join(sharedAAIS, name)); err == nil {
			if v, err := jcs.Decode(data); err == nil {
				walk(name, v)
			}
		}
	}
	t.Logf("%d values checked, %d accepted by the fast path, 0 disagreements", checked, accepted)
}

// ---- The hand-written checkers against the schema's own text ----

// fpSchemaString returns the string at a JSON pointer in the embedded
// schema, so the tests compare against the exact text the validator
// compiles.
func fpSchemaString(t testing.TB, pointer string) string {
	t.Helper()
	var cur any = fpDecode(t, Schema())
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: not found", pointer)
		}
		cur = m[tok]
	}
	s, ok := cur.(string)
	if !ok {
		t.Fatalf("%s: not a string", pointer)
	}
	return s
}

func fpRandString(rng *rand.Rand, alphabet []string, maxLen int) string {
	var b strings.Builder
	for range rng.IntN(maxLen + 1) {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func TestFastPathPatternCheckers(t *testing.T) {
	for _, p := range []string{"/$defs/decision/properties/action_digest/pattern", "/$defs/resolution/properties/action_digest/pattern"} {
		if got, want := fpSchemaString(t, p), fpSchemaString(t, "/$defs/request/properties/action_digest/pattern"); got != want {
			t.Fatalf("%s is %q, not the request's %q", p, got, want)
		}
	}
	idRE := regexp.MustCompile(fpSchemaString(t, "/$defs/id/pattern"))
	digestRE := regexp.MustCompile(fpSchemaString(t, "/$defs/request/properties/action_digest/pattern"))
	extRE := regexp.MustCompile(fpSchemaString(t, "/$defs/extensions/propertyNames/pattern"))
	idSchema := func(s string) bool {
		n := utf8.RuneCountInString(s)
		return n >= 1 && n <= 200 && idRE.MatchString(s)
	}
	cases := []struct {
		name     string
		check    func(string) bool
		schema   func(string) bool
		alphabet []string
		maxLen   int
		samples  []string
	}{
		{"id", isID, idSchema, []string{"a", "Z", "0", ".", "_", ":", "-", "/", " ", "\n", "é", "\xff"}, 8,
			[]string{"a", "0", "_", strings.Repeat("a", 200), strings.Repeat("a", 201), "a\n", "a.b_c:d-e"}},
		{"digest", isDigestPattern, digestRE.MatchString, []string{"sha256:", "0", "9", "a", "f", "g", "A", "\n"}, 70,
			[]string{fpDigest, fpDigest + "\n", strings.ToUpper(fpDigest)}},
		{"extension name", isExtensionName, extRE.MatchString,
			[]string{"a", "Z", "0", "-", ".", "/", ":", "http", "https", "://", "é", " ", "\n", "\xff"}, 8,
			[]string{"http://", "https://", "http:/", "https:", "a.b/", "a.b", "a./", ".a/", "a..b/", "a.b.c/d", "a-b.-/x", "é.b/", "a.é/"}},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range cases {
		strs := slices.Clone(c.samples)
		for range 200000 {
			strs = append(strs, fpRandString(rng, c.alphabet, c.maxLen))
		}
		for _, s := range c.samples {
			for range 200 {
				b := []byte(s)
				i := rng.IntN(len(b) + 1)
				strs = append(strs, string(b[:i])+c.alphabet[rng.IntN(len(c.alphabet))]+string(b[i:]))
			}
		}
		agree := 0
		for _, s := range strs {
			got, want := c.check(s), c.schema(s)
			if got && !want {
				t.Fatalf("%s: checker accepts %q, the schema does not", c.name, s)
			}
			if got != want {
				t.Errorf("%s: checker declines %q, which the schema accepts", c.name, s)
			} else {
				agree++
			}
		}
		t.Logf("%s: %d strings, all agree", c.name, agree)
	}
}

// fpDateTime compiles {type: string, format: date-time} the way schemas()
// does, so it runs the validator's own date-time check.
func fpDateTime(t testing.TB) *jsonschema.Schema {
	t.Helper()
	if got := fpSchemaString(t, "/$defs/timestamp/format"); got != "date-time" {
		t.Fatalf("timestamp format is %q", got)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("ts.json", map[string]any{"type": "string", "format": "date-time"}); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("ts.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFastPathDateTime: isDateTime agrees exactly with the validator over
// the forms it decides (digits everywhere, no leap second), and accepts
// nothing the validator rejects.
func TestFastPathDateTime(t *testing.T) {
	ts := fpDateTime(t)
	valid := func(s string) bool { return ts.Validate(s) == nil }
	exact := func(s string) {
		t.Helper()
		if got, want := isDateTime(s), valid(s); got != want {
			t.Fatalf("isDateTime(%q) = %v, validator %v", s, got, want)
		}
	}
	for _, year := range []int{0, 1, 4, 100, 400, 1600, 1900, 1970, 2000, 2023, 2024, 2026, 2100, 9999} {
		for month := 0; month <= 13; month++ {
			for day := 0; day <= 32; day++ {
				exact(fmt.Sprintf("%04d-%02d-%02dT12:00:00Z", year, month, day))
			}
		}
	}
	for h := 0; h <= 25; h++ {
		for m := 0; m <= 60; m++ {
			exact(fmt.Sprintf("2026-08-30T%02d:%02d:00Z", h, m))
			exact(fmt.Sprintf("2026-08-30T12:00:00+%02d:%02d", h, m))
			exact(fmt.Sprintf("2026-08-30T12:00:00-%02d:%02d", h, m))
		}
	}
	for s := 0; s <= 59; s++ {
		exact(fmt.Sprintf("2026-08-30T12:00:%02dz", s))
		exact(fmt.Sprintf("2026-08-30t12:00:%02d.%sZ", s, strings.Repeat("9", s+1)))
	}
	// Near misses: implication only (the fast path may decline).
	alphabet := []string{"0", "1", "2", "3", "5", "9", "-", ":", ".", "T", "t", "Z", "z", "+", " ", "\n", "é", "6", "4"}
	seeds := []string{"2026-08-30T18:00:00Z", "2026-08-30T18:00:00.123+05:30", "2016-12-31T23:59:60Z",
		"2024-02-29t00:00:00z", "0000-01-01T00:00:00-23:59"}
	rng := rand.New(rand.NewPCG(5, 6))
	decided := 0
	for range 300000 {
		b := []byte(seeds[rng.IntN(len(seeds))])
		for range rng.IntN(3) + 1 {
			i := rng.IntN(len(b))
			switch rng.IntN(3) {
			case 0:
				b = slices.Concat(b[:i], []byte(alphabet[rng.IntN(len(alphabet))]), b[i+1:])
			case 1:
				b = slices.Concat(b[:i], []byte(alphabet[rng.IntN(len(alphabet))]), b[i:])
			default:
				b = slices.Delete(b, i, i+1)
			}
			if len(b) == 0 {
				break
			}
		}
		s := string(b)
		if isDateTime(s) {
			decided++
			if !valid(s) {
				t.Fatalf("isDateTime accepts %q, which the validator rejects", s)
			}
		}
	}
	t.Logf("date-time near misses: %d of 300000 accepted, all valid", decided)
}

// ---- Fuzzing and benchmarks ----

// FuzzFastPath: whatever strictly decoded document the fast path accepts,
// the full validator accepts.
func FuzzFastPath(f *testing.F) {
	for _, name := range fpFixtureFiles(f) {
		f.Add(readFile(f, name))
	}
	for _, text := range fpExtraValid {
		f.Add([]byte(text))
	}
	s, err := schemas()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := jcs.Decode(data)
		if err != nil {
			return
		}
		if fastValid(doc) {
			if err := s.root.Validate(doc); err != nil {
				t.Fatalf("fast path accepted a document the schema rejects:\n%s\n%v", data, err)
			}
		}
	})
}

func BenchmarkSchemaFastPath(b *testing.B) {
	s, err := schemas()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, file string }{{"request", requestFixture}, {"decision", decisionFixture}} {
		doc := fpDecode(b, readFile(b, c.file))
		if !fastValid(doc) {
			b.Fatalf("%s: fast path declined", c.file)
		}
		b.Run(c.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !fastValid(doc) {
					b.Fatal("declined")
				}
			}
		})
		b.Run(c.name+"/full", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := s.root.Validate(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
