package aais

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

var (
	t0 = time.Date(2026, 8, 30, 18, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

func shellParams() RequestParams {
	return RequestParams{
		ID:        "apr_shell_001",
		CreatedAt: t0,
		ExpiresAt: t0.Add(10 * time.Minute),
		Origin: Origin{Harness: "example-harness", SessionID: "s-1", RunID: "r-7", GraphID: "website-build",
			NodeID: "verify", Project: "/workspace/example"},
		Action: json.RawMessage(`{
      "kind": "process.exec",
      "name": "shell.exec",
      "summary": "Run the JavaScript syntax check",
      "arguments": { "command": "node --check script.js" },
      "working_directory": "/workspace/example",
      "effects": ["Starts a local Node.js process", "Reads script.js"]
    }`),
		Risk: Risk{Level: RiskMedium, Reasons: []string{"Executes a local process"}},
		Choices: []Choice{
			{Decision: Approve, Scope: ScopeOnce, Label: "Allow once"},
			{Decision: Approve, Scope: ScopeSession, Label: "Allow matching checks for this session",
				ScopeConstraints: Constraints{"action_name": json.RawMessage(`"shell.exec"`), "command_prefix": json.RawMessage(`"node --check "`)}},
			{Decision: Deny, Scope: ScopeOnce, Label: "Deny"},
		},
	}
}

func TestNewRequestReproducesFixture(t *testing.T) {
	r, err := NewRequest(shellParams())
	if err != nil {
		t.Fatal(err)
	}
	if r.ActionDigest != fixtureDigest {
		t.Fatalf("digest %s", r.ActionDigest)
	}
	m, err := NewMessage(Header{ID: "evt_shell_001", OccurredAt: t0, Sequence: 41, Stream: "session_s1"}, r)
	if err != nil {
		t.Fatal(err)
	}
	want := mustParse(t, readFile(t, requestFixture))
	// Same value as the upstream example; the action bytes differ only in
	// insignificant whitespace.
	got := mustMarshal(t, m)
	if string(got) != string(mustMarshal(t, want)) {
		t.Errorf("built request differs from the fixture\n got %s\nwant %s", got, mustMarshal(t, want))
	}
}

func TestNewRequestFromGenericValue(t *testing.T) {
	p := shellParams()
	p.Action = map[string]any{
		"kind": "process.exec", "name": "shell.exec", "summary": "Run the JavaScript syntax check",
		"arguments":         map[string]any{"command": "node --check script.js"},
		"working_directory": "/workspace/example",
		"effects":           []any{"Starts a local Node.js process", "Reads script.js"},
	}
	r, err := NewRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.ActionDigest != fixtureDigest {
		t.Errorf("digest %s", r.ActionDigest)
	}
	// An Action value is taken as is.
	p.Action = r.Action
	if r2, err := NewRequest(p); err != nil || r2.ActionDigest != fixtureDigest {
		t.Errorf("from Action: %v", err)
	}
}

func TestNewRequestRefuses(t *testing.T) {
	type action struct {
		Kind string `json:"kind"`
	}
	cases := []struct {
		name   string
		mutate func(p *RequestParams)
		want   error
	}{
		{"go struct", func(p *RequestParams) { p.Action = action{Kind: "x"} }, ErrUnsupportedValue},
		{"pointer to struct", func(p *RequestParams) { p.Action = &action{Kind: "x"} }, ErrUnsupportedValue},
		{"bytes", func(p *RequestParams) { p.Action = []byte(`{}`) }, ErrUnsupportedValue},
		{"no action", func(p *RequestParams) { p.Action = nil }, ErrBuild},
		{"action not an object", func(p *RequestParams) { p.Action = json.RawMessage(`[1]`) }, ErrSchema},
		{"action misses arguments", func(p *RequestParams) { p.Action = map[string]any{"kind": "a", "name": "b", "summary": "c"} }, ErrSchema},
		{"action with duplicate key", func(p *RequestParams) { p.Action = json.RawMessage(`{"kind":"a","kind":"b"}`) }, ErrMalformed},
		{"redacted without hint", func(p *RequestParams) {
			p.Action = json.RawMessage(`{"kind":"a","name":"b","summary":"c","arguments":{},"presentation":{"redacted":true}}`)
		}, ErrSchema},
		{"no created_at", func(p *RequestParams) { p.CreatedAt = time.Time{} }, ErrBuild},
		{"year 10000", func(p *RequestParams) { p.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, ErrBuild},
		{"expiry before creation", func(p *RequestParams) { p.ExpiresAt = t0 }, ErrSemantic},
		{"no exit", func(p *RequestParams) { p.Choices = p.Choices[:2] }, ErrSemantic},
		{"unbounded session", func(p *RequestParams) { p.Choices[1].ScopeConstraints = nil }, ErrSchema},
		{"bad id", func(p *RequestParams) { p.ID = "has space" }, ErrSchema},
		{"no origin", func(p *RequestParams) { p.Origin = Origin{} }, ErrSchema},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := shellParams()
			c.mutate(&p)
			r, err := NewRequest(p)
			if !errors.Is(err, c.want) || r != nil {
				t.Errorf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestGeneratedIDs(t *testing.T) {
	p := shellParams()
	p.ID = ""
	o := &Options{Rand: &seqReader{}}
	r, err := o.NewRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "apr_000102030405060708090a0b0c0d0e0f" {
		t.Errorf("id %s", r.ID)
	}
	// crypto/rand by default; two ids differ.
	a, _ := NewRequest(p)
	b, _ := NewRequest(p)
	if a == nil || b == nil || a.ID == b.ID || !strings.HasPrefix(a.ID, "apr_") || len(a.ID) != 36 {
		t.Errorf("ids %v %v", a, b)
	}
	// A failing source fails the build instead of producing a weak id.
	bad := &Options{Rand: io.LimitReader(&seqReader{}, 3)}
	if _, err := bad.NewRequest(p); !errors.Is(err, ErrBuild) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short randomness: %v", err)
	}
}

func TestNewDecision(t *testing.T) {
	r := fixtureRequest(t)
	actor := Actor{ID: "user_alex", Type: ActorHuman, DisplayName: "Alex", AuthenticatedBy: "local-session"}
	d, err := NewDecision(r, DecisionParams{ID: "dec_001", Decision: Approve, Scope: ScopeOnce, Actor: actor, DecidedAt: t1})
	if err != nil {
		t.Fatal(err)
	}
	if d.RequestID != r.ID || d.ActionDigest != r.ActionDigest {
		t.Errorf("decision %+v", d)
	}
	m, err := NewMessage(Header{ID: "evt_decision_001", OccurredAt: t1, Sequence: 1, Stream: "presenter_alex"}, d)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustMarshal(t, m), mustMarshal(t, mustParse(t, readFile(t, decisionFixture))); string(got) != string(want) {
		t.Errorf("built decision differs from the fixture\n got %s\nwant %s", got, want)
	}

	for _, c := range []struct {
		name string
		p    DecisionParams
		want error
	}{
		{"unoffered scope", DecisionParams{Decision: Approve, Scope: ScopePersistent, Actor: actor, DecidedAt: t1}, ErrNotOffered},
		{"unoffered cancel", DecisionParams{Decision: Cancel, Scope: ScopeOnce, Actor: actor, DecidedAt: t1}, ErrNotOffered},
		{"no time", DecisionParams{Decision: Deny, Scope: ScopeOnce, Actor: actor}, ErrBuild},
		{"no actor", DecisionParams{Decision: Deny, Scope: ScopeOnce, DecidedAt: t1}, ErrSchema},
	} {
		if _, err := NewDecision(r, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := NewDecision(nil, DecisionParams{}); !errors.Is(err, ErrBuild) {
		t.Errorf("nil request: %v", err)
	}
}

func TestNewResolution(t *testing.T) {
	r := fixtureRequest(t)
	d := mustParse(t, readFile(t, decisionFixture)).Decision
	res, err := NewResolution(ResolutionParams{ID: "res_1", Request: r, Decision: d, Outcome: OutcomeApproved, ResolvedAt: t1})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequestID != r.ID || res.DecisionID != d.ID || res.ActionDigest != r.ActionDigest ||
		res.EffectiveScope != ScopeOnce || res.Message == "" || res.ResolvedAt.String() != "2026-08-30T18:01:00Z" {
		t.Errorf("receipt %+v", res)
	}
	// Failed outcomes carry no scope; every outcome has a stock message.
	for o := range stockMessages {
		p := ResolutionParams{Request: r, Decision: d, Outcome: o, ResolvedAt: t1}
		if o == OutcomeDenied || o == OutcomeCancelled {
			p.Decision = nil
		}
		res, err := NewResolution(p)
		if err != nil {
			t.Errorf("%s: %v", o, err)
			continue
		}
		if o != OutcomeApproved && res.EffectiveScope != "" {
			t.Errorf("%s receipt has scope %s", o, res.EffectiveScope)
		}
	}
	for _, c := range []struct {
		name string
		p    ResolutionParams
		want error
	}{
		{"no request", ResolutionParams{Outcome: OutcomeExpired, ResolvedAt: t1}, ErrBuild},
		{"outcome contradicts decision", ResolutionParams{Request: r, Decision: d, Outcome: OutcomeDenied, ResolvedAt: t1}, ErrBuild},
		{"scope wider than decided", ResolutionParams{Request: r, Decision: d, Outcome: OutcomeApproved, EffectiveScope: ScopeSession, ResolvedAt: t1}, ErrBuild},
		{"scope on expired", ResolutionParams{Request: r, Outcome: OutcomeExpired, EffectiveScope: ScopeOnce, ResolvedAt: t1}, ErrSemantic},
		{"decision for another request", ResolutionParams{Request: &Request{ID: "other"}, Decision: d, Outcome: OutcomeApproved, ResolvedAt: t1}, ErrBuild},
		{"unknown outcome", ResolutionParams{Request: r, Outcome: "done", Message: "x", ResolvedAt: t1}, ErrSchema},
		{"no time", ResolutionParams{Request: r, Outcome: OutcomeExpired}, ErrBuild},
	} {
		if _, err := NewResolution(c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestNewMessage(t *testing.T) {
	r := fixtureRequest(t)
	snap, err := NewMessage(Header{ID: "evt_snap", OccurredAt: t1, Sequence: 41, Stream: "session_s1"},
		&Snapshot{AsOfSequence: 41, Pending: []Request{*r}})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Type != TypeSnapshot || len(snap.Snapshot.Pending) != 1 || snap.Snapshot.Pending[0].ID != r.ID {
		t.Errorf("snapshot %+v", snap)
	}
	empty, err := NewMessage(Header{ID: "evt_snap", OccurredAt: t1}, &Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	if b := mustMarshal(t, empty); !strings.Contains(string(b), `"pending":[]`) {
		t.Errorf("empty snapshot: %s", b)
	}
	act, err := NewMessage(Header{OccurredAt: t1, Sequence: 42}, &Activity{RequestID: r.ID, Message: "Waiting"})
	if err != nil || !strings.HasPrefix(act.ID, "evt_") {
		t.Fatalf("activity: %v", err)
	}

	// The message is a copy: changing the payload afterwards does not reach it.
	a := &Activity{RequestID: r.ID, Message: "Waiting"}
	m, _ := NewMessage(Header{OccurredAt: t1}, a)
	a.Message = "changed"
	if m.Activity.Message != "Waiting" {
		t.Error("message shares the payload")
	}

	for _, c := range []struct {
		name string
		h    Header
		p    Payload
		want error
	}{
		{"nil payload", Header{OccurredAt: t1}, nil, ErrBuild},
		{"typed nil payload", Header{OccurredAt: t1}, (*Request)(nil), ErrBuild},
		{"no time", Header{}, &Activity{RequestID: "a", Message: "m"}, ErrBuild},
		{"invalid payload", Header{OccurredAt: t1}, &Activity{RequestID: "a"}, ErrSchema},
		{"request with zero action", Header{OccurredAt: t1}, &Request{ID: "x"}, ErrInvalid},
	} {
		if _, err := NewMessage(c.h, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestMarshalRefusesInvalid(t *testing.T) {
	m := mustParse(t, readFile(t, requestFixture))
	m.Request.ActionDigest = "sha256:" + strings.Repeat("1", 64)
	if _, err := Marshal(m); !errors.Is(err, ErrDigestMismatch) {
		t.Errorf("tampered digest: %v", err)
	}
	m = mustParse(t, readFile(t, requestFixture))
	m.Decision = &Decision{}
	if _, err := Marshal(m); !errors.Is(err, ErrInvalid) {
		t.Errorf("two payloads: %v", err)
	}
	m = mustParse(t, readFile(t, requestFixture))
	m.Type = TypeDecided
	if _, err := Marshal(m); !errors.Is(err, ErrInvalid) {
		t.Errorf("type mismatch: %v", err)
	}
	if _, err := Marshal(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil: %v", err)
	}
	if _, err := json.Marshal(&Message{}); err == nil {
		t.Error("json.Marshal of an empty message succeeded")
	}
	var zero Action
	if _, err := json.Marshal(zero); err == nil {
		t.Error("zero Action marshalled")
	}
	if _, err := zero.Digest(); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero Action digest: %v", err)
	}
}

func TestBuilderIssuePaths(t *testing.T) {
	p := shellParams()
	p.Action = json.RawMessage(`{"kind":"a","name":"b","summary":"c","arguments":[]}`)
	_, err := NewRequest(p)
	wantIssue(t, err, ErrSchema, "schema.type", "/request/action/arguments")
	p.Choices = p.Choices[:1]
	p.Action = shellParams().Action
	_, err = NewRequest(p)
	wantIssue(t, err, ErrSemantic, RuleExitChoice, "/request/choices")
}
