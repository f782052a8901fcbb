package aais

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

func TestFixturesParse(t *testing.T) {
	req := mustParse(t, readFile(t, requestFixture))
	if req.Type != TypeRequested || req.Request == nil || req.Payload() != req.Request {
		t.Fatalf("request fixture: %+v", req)
	}
	r := req.Request
	if r.ID != "apr_shell_001" || req.Sequence != 41 || req.Stream != "session_s1" ||
		r.CreatedAt.String() != "2026-08-30T18:00:00Z" || r.ExpiresAt.String() != "2026-08-30T18:10:00Z" ||
		r.Action.Kind() != "process.exec" || r.Action.Name() != "shell.exec" ||
		r.Action.WorkingDirectory() != "/workspace/example" || len(r.Action.Effects()) != 2 ||
		r.Action.Presentation() != nil || r.Origin.Project != "/workspace/example" ||
		r.Risk.Level != RiskMedium || len(r.Choices) != 3 {
		t.Errorf("request fields: %+v", r)
	}
	if c, ok := r.Choice(Approve, ScopeSession); !ok || string(c.ScopeConstraints["command_prefix"]) != `"node --check "` {
		t.Errorf("session choice: %+v %v", c, ok)
	}

	dec := mustParse(t, readFile(t, decisionFixture))
	d := dec.Decision
	if dec.Type != TypeDecided || d == nil || d.ID != "dec_001" || d.RequestID != r.ID ||
		d.ActionDigest != fixtureDigest || d.Decision != Approve || d.Scope != ScopeOnce ||
		d.Actor != (Actor{ID: "user_alex", Type: ActorHuman, DisplayName: "Alex", AuthenticatedBy: "local-session"}) ||
		dec.Stream != "presenter_alex" || dec.Sequence != 1 {
		t.Errorf("decision fields: %+v", d)
	}
	if c, ok := OfferedChoice(r, d); !ok || c.Label != "Allow once" {
		t.Errorf("OfferedChoice = %+v, %v", c, ok)
	}
}

func TestPublishedDigest(t *testing.T) {
	r := fixtureRequest(t)
	if r.ActionDigest != fixtureDigest {
		t.Fatalf("action_digest %s", r.ActionDigest)
	}
	got, err := r.Action.Digest()
	if err != nil || got != fixtureDigest {
		t.Fatalf("Action.Digest = %s, %v", got, err)
	}
	// From the action's bytes exactly as they appear in the file.
	var raw struct {
		Request struct {
			Action json.RawMessage `json:"action"`
		} `json:"request"`
	}
	if err := json.Unmarshal(readFile(t, requestFixture), &raw); err != nil {
		t.Fatal(err)
	}
	if got, err := ActionDigest(raw.Request.Action); err != nil || got != fixtureDigest {
		t.Fatalf("ActionDigest(raw) = %s, %v", got, err)
	}
	const canonical = `{"arguments":{"command":"node --check script.js"},"effects":["Starts a local Node.js process","Reads script.js"],"kind":"process.exec","name":"shell.exec","summary":"Run the JavaScript syntax check","working_directory":"/workspace/example"}`
	if c, _ := jcs.Canonicalize(r.Action.Raw()); string(c) != canonical {
		t.Errorf("canonical form\n got %s\nwant %s", c, canonical)
	}
}

func TestActionDigestKeyOrder(t *testing.T) {
	a, err1 := ActionDigest([]byte(`{"b":2,"a":1}`))
	b, err2 := ActionDigest([]byte(`{"a":1,"b":2}`))
	if err1 != nil || err2 != nil || a != b {
		t.Fatalf("%s %v / %s %v", a, err1, b, err2)
	}
	for _, bad := range []string{`[1]`, `"x"`, ``, `{"a":1,"a":2}`, `{"a":"\ud800"}`} {
		if _, err := ActionDigest([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ActionDigest(%s) err = %v", bad, err)
		}
	}
}

// TestRoundTrip: a parsed message marshals to JSON that parses to the same
// message, and marshalling again gives the same bytes.
func TestRoundTrip(t *testing.T) {
	docs := map[string][]byte{
		"request":    readFile(t, requestFixture),
		"decision":   readFile(t, decisionFixture),
		"snapshot":   encodeDoc(t, snapshotDoc(t)),
		"resolution": encodeDoc(t, resolutionDoc()),
		"activity":   encodeDoc(t, activityDoc()),
	}
	for name, b := range docs {
		t.Run(name, func(t *testing.T) {
			m1 := mustParse(t, b)
			b1 := mustMarshal(t, m1)
			m2 := mustParse(t, b1)
			if !reflect.DeepEqual(m1, m2) {
				t.Errorf("parse∘marshal∘parse changed the message\n%+v\n%+v", m1, m2)
			}
			if b2 := mustMarshal(t, m2); !bytes.Equal(b1, b2) {
				t.Errorf("marshal not stable\n%s\n%s", b1, b2)
			}
			// Same JSON value as the input, member for member.
			c0, _ := jcs.Canonicalize(b)
			c1, _ := jcs.Canonicalize(b1)
			if !bytes.Equal(c0, c1) {
				t.Errorf("value changed\n%s\n%s", c0, c1)
			}
			// json.Marshal / json.Unmarshal go through the same checks.
			jb, err := json.Marshal(m1)
			if err != nil {
				t.Fatal(err)
			}
			var m3 Message
			if err := json.Unmarshal(jb, &m3); err != nil || !reflect.DeepEqual(m1, &m3) {
				t.Errorf("json round trip: %v", err)
			}
		})
	}
}

// TestStructTrap: an action holding an empty array and false values keeps
// its digest through Parse → Marshal → Parse, because it is never
// re-encoded from a struct. A struct with omitempty would lose both.
func TestStructTrap(t *testing.T) {
	const action = `{"kind":"filesystem.write","name":"fs.write","summary":"Write <config> & save",` +
		`"arguments":{"path":"/etc/app.conf","append":false,"tags":[],"mode":420.0,"note":"caf\u00e9"},` +
		`"effects":[],"presentation":{"redacted":false,"details":"plain"}}`
	want, err := ActionDigest([]byte(action))
	if err != nil {
		t.Fatal(err)
	}
	req, err := NewRequest(RequestParams{
		ID: "apr_trap", CreatedAt: t0, Origin: Origin{Harness: "h", SessionID: "s"},
		Action: json.RawMessage(action), Risk: Risk{Level: RiskLow, Reasons: []string{"writes a file"}},
		Choices: []Choice{{Decision: Approve, Scope: ScopeOnce, Label: "Allow"}, {Decision: Deny, Scope: ScopeOnce, Label: "Deny"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if req.ActionDigest != want {
		t.Fatalf("built digest %s, want %s", req.ActionDigest, want)
	}
	m1, err := NewMessage(Header{ID: "evt_trap", OccurredAt: t0}, req)
	if err != nil {
		t.Fatal(err)
	}
	b1 := mustMarshal(t, m1)
	m2 := mustParse(t, b1)
	if got, _ := m2.Request.Action.Digest(); got != want || m2.Request.ActionDigest != want {
		t.Fatalf("digest after round trip %s, want %s", got, want)
	}
	if !bytes.Contains(b1, []byte(action)) {
		t.Errorf("action not emitted as received:\n%s", b1)
	}
	if e := m2.Request.Action.Effects(); e == nil || len(e) != 0 {
		t.Errorf("Effects() = %#v, want empty non-nil", e)
	}
	if p := m2.Request.Action.Presentation(); p == nil || p.Redacted == nil || *p.Redacted {
		t.Errorf("Presentation() = %+v, want redacted false kept", p)
	}

	// The trap itself: re-encoding through an omitempty struct drops
	// "effects": [] and "redacted": false and changes the digest.
	type presentation struct {
		Redacted bool   `json:"redacted,omitempty"`
		Details  string `json:"details,omitempty"`
	}
	type naive struct {
		Kind         string         `json:"kind"`
		Name         string         `json:"name"`
		Summary      string         `json:"summary"`
		Arguments    map[string]any `json:"arguments"`
		Effects      []string       `json:"effects,omitempty"`
		Presentation *presentation  `json:"presentation,omitempty"`
	}
	var n naive
	if err := json.Unmarshal([]byte(action), &n); err != nil {
		t.Fatal(err)
	}
	reencoded, _ := json.Marshal(n)
	if d, _ := ActionDigest(reencoded); d == want {
		t.Error("re-encoding a struct kept the digest; the trap test proves nothing")
	}
	// And the builder refuses the struct outright.
	if _, err := NewAction(n); !errors.Is(err, ErrUnsupportedValue) {
		t.Errorf("NewAction(struct) err = %v", err)
	}
}

func TestStrictJSON(t *testing.T) {
	good := string(readFile(t, requestFixture))
	cases := []struct {
		name, doc, path string
		sentinel        error
	}{
		{"duplicate key", strings.Replace(good, `"sequence": 41,`, `"sequence": 41, "sequence": 42,`, 1), "/sequence", jcs.ErrDuplicateKey},
		{"duplicate key in action", strings.Replace(good, `"command": "node --check script.js"`, `"command": "a", "command": "node --check script.js"`, 1), "/request/action/arguments/command", jcs.ErrDuplicateKey},
		{"escaped duplicate", strings.Replace(good, `"stream": "session_s1",`, `"stream": "session_s1", "str\u0065am": "x",`, 1), "/stream", jcs.ErrDuplicateKey},
		{"invalid UTF-8", strings.Replace(good, `"Deny"`, "\"D\xffny\"", 1), "/request/choices/2/label", jcs.ErrInvalidUTF8},
		{"lone surrogate", strings.Replace(good, `"Deny"`, `"D\ud800ny"`, 1), "/request/choices/2/label", jcs.ErrLoneSurrogate},
		{"unsafe integer", strings.Replace(good, `"command": "node --check script.js"`, `"n": 9007199254740993`, 1), "/request/action/arguments/n", jcs.ErrNumber},
		{"trailing data", good + "{}", "", jcs.ErrSyntax},
		{"not JSON", "aais", "", jcs.ErrSyntax},
		{"empty", "", "", jcs.ErrSyntax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc))
			wantIssue(t, err, ErrMalformed, RuleJSON, c.path)
			if !errors.Is(err, c.sentinel) {
				t.Errorf("err %v does not wrap %v", err, c.sentinel)
			}
			var je *jcs.Error
			if !errors.As(err, &je) {
				t.Errorf("err %v does not carry a *jcs.Error", err)
			}
		})
	}

	// Limits come from Options.
	small := &Options{MaxSize: 100}
	if _, err := small.Parse([]byte(good)); !errors.Is(err, jcs.ErrSize) {
		t.Errorf("MaxSize: %v", err)
	}
	shallow := &Options{MaxDepth: 3}
	if _, err := shallow.Parse([]byte(good)); !errors.Is(err, jcs.ErrDepth) {
		t.Errorf("MaxDepth: %v", err)
	}
	deep := `{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`
	if _, err := Parse([]byte(deep)); !errors.Is(err, jcs.ErrDepth) {
		t.Errorf("default depth: %v", err)
	}
}

// TestSchemaMistakes: one test per kind of mistake the JSON Schema catches.
func TestSchemaMistakes(t *testing.T) {
	type mutation func(t *testing.T, d map[string]any)
	setTo := func(path string, v any) mutation {
		return func(t *testing.T, d map[string]any) { set(t, d, path, v) }
	}
	remove := func(path string) mutation {
		return func(t *testing.T, d map[string]any) { del(t, d, path) }
	}
	cases := []struct {
		name    string
		fixture func(t testing.TB) map[string]any
		mutate  mutation
		rule    string
		path    string
	}{
		{"missing aais", reqDoc, remove("/aais"), "schema.required", ""},
		{"aais 1.1", reqDoc, setTo("/aais", "1.1"), "schema.const", "/aais"},
		{"missing type", reqDoc, remove("/type"), RuleType, "/type"},
		{"unknown type", reqDoc, setTo("/type", "approval.cancelled"), RuleType, "/type"},
		{"type without its payload", reqDoc, setTo("/type", "approval.decided"), "schema.required", ""},
		{"unknown top-level member", reqDoc, setTo("/signature", "x"), "schema.unevaluatedProperties", "/signature"},
		{"second payload", reqDoc, func(t *testing.T, d map[string]any) {
			d["decision"] = doc(t, decisionFixture)["decision"]
		}, "schema.unevaluatedProperties", "/decision"},
		{"id pattern", reqDoc, setTo("/id", "-evt"), "schema.pattern", "/id"},
		{"id empty", reqDoc, setTo("/request/id", ""), "schema.minLength", "/request/id"},
		{"id too long", reqDoc, setTo("/request/id", strings.Repeat("a", 201)), "schema.maxLength", "/request/id"},
		{"occurred_at without offset", reqDoc, setTo("/occurred_at", "2026-08-30T18:00:00"), "schema.format", "/occurred_at"},
		{"occurred_at not a date", reqDoc, setTo("/occurred_at", "2026-02-30T18:00:00Z"), "schema.format", "/occurred_at"},
		{"negative sequence", reqDoc, setTo("/sequence", json.Number("-1")), "schema.minimum", "/sequence"},
		{"fractional sequence", reqDoc, setTo("/sequence", json.Number("1.5")), "schema.type", "/sequence"},
		{"sequence as string", reqDoc, setTo("/sequence", "41"), "schema.type", "/sequence"},
		{"empty stream", reqDoc, setTo("/stream", ""), "schema.minLength", "/stream"},
		{"dotted extension key", reqDoc, setTo("/extensions", map[string]any{"com.example.feature": true}), "schema.propertyNames", "/extensions/com.example.feature"},
		{"urn extension key", reqDoc, setTo("/request/extensions", map[string]any{"urn:x:y": true}), "schema.propertyNames", "/request/extensions/urn:x:y"},
		{"status not pending", reqDoc, setTo("/request/status", "approved"), "schema.const", "/request/status"},
		{"unknown request member", reqDoc, setTo("/request/note", "x"), "schema.additionalProperties", "/request"},
		{"missing origin.session_id", reqDoc, remove("/request/origin/session_id"), "schema.required", "/request/origin"},
		{"unknown origin member", reqDoc, setTo("/request/origin/user", "x"), "schema.additionalProperties", "/request/origin"},
		{"missing arguments", reqDoc, remove("/request/action/arguments"), "schema.required", "/request/action"},
		{"arguments not an object", reqDoc, setTo("/request/action/arguments", []any{"node"}), "schema.type", "/request/action/arguments"},
		{"unknown action member", reqDoc, setTo("/request/action/hidden", "x"), "schema.additionalProperties", "/request/action"},
		{"empty effect", reqDoc, setTo("/request/action/effects/0", ""), "schema.minLength", "/request/action/effects/0"},
		{"redacted without binding_hint", reqDoc, setTo("/request/action/presentation", map[string]any{"redacted": true}), "schema.required", "/request/action/presentation"},
		{"digest upper-case hex", reqDoc, setTo("/request/action_digest", strings.ToUpper(fixtureDigest)), "schema.pattern", "/request/action_digest"},
		{"risk level unknown", reqDoc, setTo("/request/risk/level", "extreme"), "schema.enum", "/request/risk/level"},
		{"no risk reasons", reqDoc, setTo("/request/risk/reasons", []any{}), "schema.minItems", "/request/risk/reasons"},
		{"no choices", reqDoc, setTo("/request/choices", []any{}), "schema.minItems", "/request/choices"},
		{"eleven choices", reqDoc, func(t *testing.T, d map[string]any) {
			cs := make([]any, 11)
			for i := range cs {
				cs[i] = map[string]any{"decision": "deny", "scope": "once", "label": "Deny"}
			}
			set(t, d, "/request/choices", cs)
		}, "schema.maxItems", "/request/choices"},
		{"deny with session scope", reqDoc, setTo("/request/choices/2/scope", "session"), "schema.const", "/request/choices/2/scope"},
		{"session without constraints", reqDoc, remove("/request/choices/1/scope_constraints"), "schema.required", "/request/choices/1"},
		{"empty constraints", reqDoc, setTo("/request/choices/1/scope_constraints", map[string]any{}), "schema.minProperties", "/request/choices/1/scope_constraints"},
		{"allow_edits (pre-1.0)", reqDoc, setTo("/request/choices/0/allow_edits", true), "schema.additionalProperties", "/request/choices/0"},
		{"edited-action decision", decDoc, setTo("/decision/replacement_arguments", map[string]any{"command": "rm -rf /"}), "schema.additionalProperties", "/decision"},
		{"decision deny session", decDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/decision/decision", "deny")
			set(t, d, "/decision/scope", "session")
		}, "schema.const", "/decision/scope"},
		{"decision unknown verdict", decDoc, setTo("/decision/decision", "allow"), "schema.enum", "/decision/decision"},
		{"actor type robot", decDoc, setTo("/decision/actor/type", "robot"), "schema.enum", "/decision/actor/type"},
		{"actor without id", decDoc, remove("/decision/actor/id"), "schema.required", "/decision/actor"},
		{"decided_at missing", decDoc, remove("/decision/decided_at"), "schema.required", "/decision"},
		{"resolution unknown outcome", resDoc, setTo("/resolution/outcome", "done"), "schema.enum", "/resolution/outcome"},
		{"resolution without message", resDoc, remove("/resolution/message"), "schema.required", "/resolution"},
		{"resolution with signature", resDoc, setTo("/resolution/signature", "x"), "schema.additionalProperties", "/resolution"},
		{"snapshot without pending", snapDoc, remove("/snapshot/pending"), "schema.required", "/snapshot"},
		{"snapshot negative as_of", snapDoc, setTo("/snapshot/as_of_sequence", json.Number("-2")), "schema.minimum", "/snapshot/as_of_sequence"},
		{"snapshot bad pending entry", snapDoc, setTo("/snapshot/pending/0/status", "expired"), "schema.const", "/snapshot/pending/0/status"},
		{"activity without message", actDoc, remove("/activity/message"), "schema.required", "/activity"},
		{"activity bad stage", actDoc, setTo("/activity/stage", "waiting for you"), "schema.pattern", "/activity/stage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.fixture(t)
			c.mutate(t, d)
			_, err := Parse(encodeDoc(t, d))
			wantIssue(t, err, ErrSchema, c.rule, c.path)
		})
	}
}

func reqDoc(t testing.TB) map[string]any  { return doc(t, requestFixture) }
func decDoc(t testing.TB) map[string]any  { return doc(t, decisionFixture) }
func resDoc(testing.TB) map[string]any    { return resolutionDoc() }
func snapDoc(t testing.TB) map[string]any { return snapshotDoc(t) }
func actDoc(testing.TB) map[string]any    { return activityDoc() }

func TestNotAnObject(t *testing.T) {
	for _, s := range []string{`[]`, `"approval.requested"`, `null`, `41`} {
		_, err := Parse([]byte(s))
		wantIssue(t, err, ErrSchema, RuleType, "")
	}
}

func TestExtensionsPassThrough(t *testing.T) {
	d := reqDoc(t)
	ext := map[string]any{"com.example/feature": map[string]any{"level": json.Number("2.50"), "on": false}, "https://example.org/x": []any{}}
	d["extensions"] = ext
	set(t, d, "/request/extensions", map[string]any{"example.com/empty": map[string]any{}})
	m := mustParse(t, encodeDoc(t, d))
	if string(m.Extensions["com.example/feature"]) != `{"level":2.50,"on":false}` ||
		string(m.Extensions["https://example.org/x"]) != `[]` ||
		string(m.Request.Extensions["example.com/empty"]) != `{}` {
		t.Errorf("extensions: %s / %s", m.Extensions, m.Request.Extensions)
	}
	b := mustMarshal(t, m)
	if !bytes.Contains(b, []byte(`"com.example/feature":{"level":2.50,"on":false}`)) {
		t.Errorf("extension not passed through: %s", b)
	}
	// An empty extensions object is kept distinct from an absent one.
	d = reqDoc(t)
	d["extensions"] = map[string]any{}
	m = mustParse(t, encodeDoc(t, d))
	if m.Extensions == nil || len(m.Extensions) != 0 {
		t.Errorf("empty extensions: %#v", m.Extensions)
	}
	if b := mustMarshal(t, m); !bytes.Contains(b, []byte(`"extensions":{}`)) {
		t.Errorf("empty extensions dropped: %s", b)
	}
	if fixtureRequest(t).Extensions != nil {
		t.Error("absent extensions became non-nil")
	}
}

func TestSequenceForms(t *testing.T) {
	for lit, want := range map[string]uint64{"0": 0, "41.0": 41, "4.1e1": 41, "-0": 0, "9007199254740991": MaxSequence} {
		d := reqDoc(t)
		d["sequence"] = json.Number(lit)
		m := mustParse(t, encodeDoc(t, d))
		if m.Sequence != want {
			t.Errorf("sequence %s read as %d", lit, m.Sequence)
		}
	}
}

// TestConcurrentParse exercises the lazily compiled schema from many
// goroutines (run with -race).
func TestConcurrentParse(t *testing.T) {
	data := readFile(t, requestFixture)
	done := make(chan error, 8)
	for range 8 {
		go func() {
			var err error
			for range 20 {
				if _, err = Parse(data); err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
