package aais

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/jcs"
)

// copySeeds are the valid messages the copy-path tests start from: every
// fixture and golden file, and messages the builders make.
func copySeeds(t testing.TB) []*Message {
	t.Helper()
	names, _ := filepath.Glob("testdata/*.json")
	golden, _ := filepath.Glob("testdata/golden/*.json")
	var out []*Message
	for _, name := range append(names, golden...) {
		m, err := Parse(readFile(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, m)
	}
	now := time.Date(2026, 8, 30, 18, 0, 0, 123456789, time.UTC)
	req, err := NewRequest(RequestParams{
		ID: "apr_copy", CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Origin: Origin{Harness: "h", SessionID: "s", Project: "/wörk"},
		Action: json.RawMessage(`{"kind":"process.exec","name":"shell.exec","summary":"Run \"x\" <now> & \u2028","arguments":{"command":"x","n":[1,2.5,{"d":{}}]}}`),
		Risk:   Risk{Level: RiskHigh, Reasons: []string{"é", "b"}},
		Choices: []Choice{
			{Decision: Approve, Scope: ScopeOnce, Label: "Allow once"},
			{Decision: Approve, Scope: ScopePersistent, Label: "Always",
				ScopeConstraints: Constraints{"action_name": json.RawMessage(`"shell.exec"`), "x": json.RawMessage(`{"a":[true,null]}`)}},
			{Decision: Cancel, Scope: ScopeOnce, Label: "Cancel"},
		},
		Extensions: Extensions{"com.example/x": json.RawMessage(`{"k":"v"}`), "https://e.example/y": json.RawMessage(`1e3`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecision(req, DecisionParams{ID: "dec_copy", Decision: Approve, Scope: ScopePersistent,
		Actor: Actor{ID: "alice", Type: ActorHuman, DisplayName: "Alice", AuthenticatedBy: "oidc"}, DecidedAt: now,
		Extensions: Extensions{JustificationExtension: json.RawMessage(`"because"`)}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := NewResolution(ResolutionParams{ID: "res_copy", Request: req, Decision: dec, Outcome: OutcomeApproved, ResolvedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []Payload{req, dec, res} {
		m, err := NewMessage(Header{ID: "evt_copy", OccurredAt: now, Sequence: uint64(i), Stream: "s.1"}, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// checkFastCopy is the property the copy path must keep: when it returns a
// copy, Parse accepts the bytes Marshal writes and returns a message deeply
// equal to that copy. It reports whether the copy path answered.
func checkFastCopy(t *testing.T, m *Message) bool {
	t.Helper()
	w, err := m.toWire()
	if err != nil {
		return false
	}
	b, err := encode(w)
	if err != nil {
		return false
	}
	if n := sizeBound(m); n >= 0 && n < len(b) {
		t.Fatalf("sizeBound = %d, below the %d bytes Marshal writes:\n%s", n, len(b), b)
	}
	fast := (*Options)(nil).fastCopy(m, len(b))
	if fast == nil {
		return false
	}
	if c, err := Copy(m); err != nil || !reflect.DeepEqual(c, fast) {
		t.Fatalf("Copy = %v, %v; want the copy MarshalCopy makes", c, err)
	}
	slow, err := Parse(b)
	if err != nil {
		t.Fatalf("the copy path accepted a message Parse rejects: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("the copy path's copy differs from what Parse reads back:\nfast %#v\nslow %#v\n%s", fast, slow, b)
	}
	return true
}

func TestFastCopyAgreesWithParse(t *testing.T) {
	for _, m := range copySeeds(t) {
		answered := checkFastCopy(t, m)
		want := m.Extensions == nil && (m.Type == TypeRequested || m.Type == TypeDecided || m.Type == TypeResolved)
		if answered != want {
			t.Errorf("%s %s: copy path answered %v, want %v", m.Type, m.ID, answered, want)
		}
		for op := range copyMutations {
			for _, v := range copyValues {
				c := m.clone()
				mutateCopy(c, op, v)
				checkFastCopy(t, c)
			}
		}
	}
}

// TestFastCopyDeclines lists values that are valid Go but would not read
// back as themselves, or are invalid only by a rule Parse checks: the copy
// path must leave each to Parse.
func TestFastCopyDeclines(t *testing.T) {
	var req0, dec0, res0 *Message
	for _, m := range copySeeds(t) {
		if m.ID == "evt_copy" {
			switch m.Type {
			case TypeRequested:
				req0 = m
			case TypeDecided:
				dec0 = m
			case TypeResolved:
				res0 = m
			}
		}
	}
	var req, dec, res *Message
	deep := strings.Repeat("[", 62) + strings.Repeat("]", 62)
	for name, mut := range map[string]func(){
		"invalid UTF-8 label":           func() { req.Request.Choices[0].Label = "a\xffb" },
		"invalid UTF-8 reason":          func() { req.Request.Risk.Reasons[0] = "\xc3" },
		"invalid UTF-8 constraint key":  func() { req.Request.Choices[1].ScopeConstraints["\xff"] = json.RawMessage(`1`) },
		"empty constraints":             func() { req.Request.Choices[1].ScopeConstraints = Constraints{} },
		"nil constraints on persistent": func() { req.Request.Choices[1].ScopeConstraints = nil },
		"nil reasons":                   func() { req.Request.Risk.Reasons = nil },
		"no choices":                    func() { req.Request.Choices = nil },
		"no exit choice":                func() { req.Request.Choices = req.Request.Choices[:2] },
		"duplicate choice":              func() { req.Request.Choices[2] = req.Request.Choices[0] },
		"non-compact extension":         func() { req.Request.Extensions["com.example/x"] = json.RawMessage(`{ "k":"v"}`) },
		"null-less nil extension":       func() { req.Request.Extensions["com.example/x"] = nil },
		"duplicate key in extension":    func() { req.Request.Extensions["com.example/x"] = json.RawMessage(`{"k":1,"k":2}`) },
		"big number in constraint":      func() { req.Request.Choices[1].ScopeConstraints["x"] = json.RawMessage(`12345678901234567890`) },
		"deep constraint":               func() { req.Request.Choices[1].ScopeConstraints["x"] = json.RawMessage(deep) },
		"bad extension name":            func() { req.Request.Extensions["plain"] = json.RawMessage(`1`) },
		"digest mismatch":               func() { req.Request.ActionDigest = "sha256:" + strings.Repeat("0", 64) },
		"expiry before creation":        func() { req.Request.ExpiresAt = req.Request.CreatedAt },
		"timestamp instant differs":     func() { req.Request.CreatedAt.utc = req.Request.CreatedAt.utc.Add(time.Second) },
		"lower-case timestamp":          func() { req.OccurredAt.text = strings.ToLower(req.OccurredAt.text) },
		"long id":                       func() { req.ID = strings.Repeat("a", 201) },
		"empty session":                 func() { req.Request.Origin.SessionID = "" },
		"envelope extensions":           func() { req.Extensions = Extensions{} },
		"sequence too big":              func() { req.Sequence = MaxSequence + 1 },
		"two payloads":                  func() { req.Decision = dec.Decision },
		"wrong type":                    func() { req.Type = TypeDecided },
		"deny with session scope":       func() { dec.Decision.Decision = Deny },
		"actor without id":              func() { dec.Decision.Actor.ID = "" },
		"long display name":             func() { dec.Decision.Actor.DisplayName = strings.Repeat("é", 201) },
		"scope on an expiry":            func() { res.Resolution.Outcome = OutcomeExpired },
		"empty message":                 func() { res.Resolution.Message = "" },
	} {
		t.Run(name, func(t *testing.T) {
			req, dec, res = req0.clone(), dec0.clone(), res0.clone()
			mut()
			for _, m := range []*Message{req, dec, res} {
				w, err := m.toWire()
				if err != nil {
					continue
				}
				b, err := encode(w)
				if err != nil {
					continue
				}
				if c := (*Options)(nil).fastCopy(m, len(b)); c != nil {
					if _, err := Parse(b); err == nil && reflect.DeepEqual(c, mustParse(t, b)) {
						continue // still valid and faithful: fine
					}
					t.Errorf("copy path answered for %s", m.Type)
				}
			}
		})
	}
	// Exactly at the size limit the copy path declines; Parse decides.
	b, _ := Marshal(req0)
	if c := (&Options{MaxSize: len(b)}).fastCopy(req0, len(b)); c != nil {
		t.Error("copy path answered at the size limit")
	}
}

// TestMarshalCopySharesNothing: changing what MarshalCopy returns leaves
// the message it copied alone, and the other way round.
func TestMarshalCopySharesNothing(t *testing.T) {
	for _, m := range copySeeds(t) {
		before, err := Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		_, c, err := MarshalCopy(m)
		if err != nil {
			t.Fatal(err)
		}
		scribble(c)
		if after, err := Marshal(m); err != nil || !bytes.Equal(after, before) {
			t.Fatalf("changing the copy changed the original: %v\n%s\n%s", err, before, after)
		}
		_, c, err = MarshalCopy(m)
		if err != nil {
			t.Fatal(err)
		}
		scribble(m)
		if after, err := Marshal(c); err != nil || !bytes.Equal(after, before) {
			t.Fatalf("changing the original changed the copy: %v\n%s\n%s", err, before, after)
		}
	}
}

// scribble changes, in place, everything of m that a caller can reach:
// maps, raw values, slices and payloads.
func scribble(m *Message) {
	scribbleRaw := func(e map[string]json.RawMessage) {
		for k, v := range e {
			for i := range v {
				v[i] = ' '
			}
			e[k+"x"] = v
		}
	}
	scribbleRaw(m.Extensions)
	m.ID = "changed"
	if r := m.Request; r != nil {
		scribbleRequest(r, scribbleRaw)
	}
	if d := m.Decision; d != nil {
		d.ID = "changed"
		scribbleRaw(d.Extensions)
	}
	if r := m.Resolution; r != nil {
		r.Message = "changed"
		scribbleRaw(r.Extensions)
	}
	if s := m.Snapshot; s != nil {
		for i := range s.Pending {
			scribbleRequest(&s.Pending[i], scribbleRaw)
		}
		s.Pending = append(s.Pending, Request{})
	}
	if a := m.Activity; a != nil {
		a.Message = "changed"
	}
}

func scribbleRequest(r *Request, scribbleRaw func(map[string]json.RawMessage)) {
	r.ID = "changed"
	for i := range r.Risk.Reasons {
		r.Risk.Reasons[i] = "changed"
	}
	for i := range r.Choices {
		r.Choices[i].Label = "changed"
		scribbleRaw(r.Choices[i].ScopeConstraints)
	}
	scribbleRaw(r.Extensions)
	if raw := r.Action.Raw(); len(raw) > 0 {
		raw[0] = ' ' // a copy: the action cannot be changed
	}
}

// copyMutations change one field of a message to a value derived from v;
// TestFastCopyAgreesWithParse and FuzzFastCopy run each on the seeds.
var copyMutations = []func(m *Message, v string){
	func(m *Message, v string) { m.ID = v },
	func(m *Message, v string) { m.Stream = v },
	func(m *Message, v string) { m.OccurredAt, _ = ParseTimestamp(v) },
	func(m *Message, v string) { m.Sequence = uint64(len(v)) << (len(v) % 64) },
	func(m *Message, v string) { m.Extensions = Extensions{v: json.RawMessage(v)} },
	func(m *Message, v string) {
		if r := m.Request; r != nil {
			r.Origin.Project = v
		}
	},
	func(m *Message, v string) {
		if r := m.Request; r != nil && len(r.Risk.Reasons) > 0 {
			r.Risk.Reasons[0] = v
		}
	},
	func(m *Message, v string) {
		if r := m.Request; r != nil && len(r.Choices) > 0 {
			r.Choices[len(r.Choices)-1].Label = v
		}
	},
	func(m *Message, v string) {
		if r := m.Request; r != nil && len(r.Choices) > 0 {
			r.Choices[0].ScopeConstraints = Constraints{v: json.RawMessage(v)}
		}
	},
	func(m *Message, v string) {
		if r := m.Request; r != nil && len(r.Choices) > 0 {
			r.Choices[0].Scope = Scope(v)
		}
	},
	func(m *Message, v string) {
		if r := m.Request; r != nil {
			r.Extensions = Extensions{"com.example/" + v: json.RawMessage(v)}
		}
	},
	func(m *Message, v string) {
		if r := m.Request; r != nil {
			r.ExpiresAt, _ = ParseTimestamp(v)
		}
	},
	func(m *Message, v string) {
		if d := m.Decision; d != nil {
			d.Actor.DisplayName = v
		}
	},
	func(m *Message, v string) {
		if d := m.Decision; d != nil {
			d.Decision = Verdict(v)
		}
	},
	func(m *Message, v string) {
		if d := m.Decision; d != nil {
			d.Extensions = Extensions{"https://" + v: json.RawMessage(v)}
		}
	},
	func(m *Message, v string) {
		if r := m.Resolution; r != nil {
			r.Message = v
		}
	},
	func(m *Message, v string) {
		if r := m.Resolution; r != nil {
			r.EffectiveScope = Scope(v)
		}
	},
	func(m *Message, v string) {
		if r := m.Resolution; r != nil {
			r.Outcome = Outcome(v)
		}
	},
	func(m *Message, v string) {
		if r := m.Resolution; r != nil {
			r.DecisionID = v
		}
	},
}

var copyValues = []string{
	"", "x", "a\xffb", "\"q\"", "1", "1.0", "-0", "1e400", "null", "{}", "[]", `{"a":1}`, `{ "a":1}`,
	`{"a":1,"a":2}`, `"\ud800"`, "once", "session", "approve", "deny", "approved", "denied",
	"2026-08-30T18:00:00Z", "2026-08-30t18:00:00z", "2026-08-30T18:00:60Z", "2026-08-30T20:00:00+02:00",
	strings.Repeat("é", 200), strings.Repeat("é", 201), strings.Repeat("a", 2001),
	strings.Repeat("[", 70) + strings.Repeat("]", 70),
}

func mutateCopy(m *Message, op int, v string) {
	copyMutations[op%len(copyMutations)](m, v)
}

// FuzzFastCopy: for any valid message and any one-field change, the copy
// path either declines or returns exactly what Parse reads back.
func FuzzFastCopy(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	golden, _ := filepath.Glob("testdata/golden/*.json")
	for _, name := range append(seeds, golden...) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for op := range copyMutations {
			f.Add(b, uint8(op), "x")
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, op uint8, v string) {
		m, err := Parse(data)
		if err != nil {
			return
		}
		checkFastCopy(t, m)
		mutateCopy(m, int(op), v)
		checkFastCopy(t, m)
	})
}

// TestSizeBound: the bound holds where escaping multiplies the size.
func TestSizeBound(t *testing.T) {
	ctl := strings.Repeat("\x01", 1000)
	for _, m := range copySeeds(t) {
		for op := range copyMutations {
			c := m.clone()
			mutateCopy(c, op, ctl)
			w, err := c.toWire()
			if err != nil {
				continue
			}
			b, err := encode(w)
			if err != nil {
				continue
			}
			if n := sizeBound(c); n >= 0 && n < len(b) {
				t.Fatalf("sizeBound = %d, below the %d bytes Marshal writes", n, len(b))
			}
		}
	}
}

// TestCloneValuesDoNotOverlap: appending to one raw value of a copy never
// writes into another (they are cut from one buffer).
func TestCloneValuesDoNotOverlap(t *testing.T) {
	m := &Message{Type: TypeDecided, Decision: &Decision{Extensions: Extensions{
		"a.b/1": json.RawMessage(`"one"`), "a.b/2": json.RawMessage(`"two"`), "a.b/3": json.RawMessage{}, "a.b/4": nil}}}
	c := m.Clone()
	var grown [][]byte
	for _, v := range c.Decision.Extensions {
		grown = append(grown, append(v, 'x'))
	}
	if len(grown) != len(m.Decision.Extensions) {
		t.Fatal("lost a value")
	}
	for k, v := range m.Decision.Extensions {
		got := c.Decision.Extensions[k]
		if !bytes.Equal(got, v) || (got == nil) != (v == nil) {
			t.Errorf("%s: copy holds %q after appending to its neighbours, want %q", k, got, v)
		}
	}
}

var plainCases = []struct {
	in    string
	plain bool
}{
	{`"a"`, true}, {`""`, true}, {`"é"`, true}, {`0`, true}, {`123456789012345`, true}, {`true`, true},
	{`null`, true}, {`[]`, true}, {`{}`, true}, {`{"a":[1,{"b":"c"}],"b":null}`, true}, {`[[],{}]`, true},
	{`1234567890123456`, false}, {`01`, false}, {`-1`, false}, {`1.5`, false}, {`1e2`, false},
	{`"\n"`, false}, {`"a` + "\x01" + `"`, false}, {`"\xff"`, false}, {`{"a":1,"a":2}`, false},
	{`{"a":1,}`, false}, {`[1,]`, false}, {`[1 2]`, false}, {`{"a"}`, false}, {`{a:1}`, false},
	{`tru`, false}, {`"a`, false}, {`[`, false}, {`{"a":1`, false}, {``, false},
}

// TestPlainValue: plain JSON is what it says, and jcs agrees it is valid.
func TestPlainValue(t *testing.T) {
	for _, c := range plainCases {
		end, ok := plainValue([]byte(c.in), 0)
		got := ok && end == len(c.in)
		if got != c.plain {
			t.Errorf("plainValue(%q) = %v, want %v", c.in, got, c.plain)
		}
		if got {
			if _, err := jcs.Decode([]byte(c.in)); err != nil {
				t.Errorf("plain %q, but jcs refuses it: %v", c.in, err)
			}
		}
	}
}

// FuzzPlainValue: whatever plainValue accepts, jcs accepts.
func FuzzPlainValue(f *testing.F) {
	for _, c := range plainCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if end, ok := plainValue(v, 0); ok && end == len(v) {
			if _, err := jcs.Decode(v); err != nil {
				t.Fatalf("plain %q, but jcs refuses it: %v", v, err)
			}
		}
	})
}
