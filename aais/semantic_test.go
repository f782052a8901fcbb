package aais

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSemanticRules: one negative test per rule the schema cannot express,
// through Parse.
func TestSemanticRules(t *testing.T) {
	zero := "sha256:" + strings.Repeat("0", 64)
	cases := []struct {
		name    string
		fixture func(t testing.TB) map[string]any
		mutate  func(t *testing.T, d map[string]any)
		class   error
		rule    string
		path    string
	}{
		{"all-zero digest", reqDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/request/action_digest", zero)
		}, ErrDigestMismatch, RuleActionDigest, "/request/action_digest"},
		{"action changed after hashing", reqDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/request/action/summary", "Run the JavaScript syntax check ")
		}, ErrDigestMismatch, RuleActionDigest, "/request/action_digest"},
		{"decision digest is not checked against an action", decDoc, func(t *testing.T, d map[string]any) {
			// A decision carries no action: any well-formed digest is
			// accepted here and compared by the authority (stale).
			set(t, d, "/decision/action_digest", zero)
			set(t, d, "/decision/id", "ok")
		}, nil, "", ""},
		{"no exit choice", reqDoc, func(t *testing.T, d map[string]any) {
			cs := get(t, d, "/request/choices").([]any)
			set(t, d, "/request/choices", cs[:2])
		}, ErrSemantic, RuleExitChoice, "/request/choices"},
		{"duplicate choice", reqDoc, func(t *testing.T, d map[string]any) {
			cs := get(t, d, "/request/choices").([]any)
			dup := map[string]any{"decision": "approve", "scope": "once", "label": "Yes, once"}
			set(t, d, "/request/choices", append(cs, dup))
		}, ErrSemantic, RuleUniqueChoice, "/request/choices/3"},
		{"duplicate deny", reqDoc, func(t *testing.T, d map[string]any) {
			cs := get(t, d, "/request/choices").([]any)
			set(t, d, "/request/choices", append(cs, map[string]any{"decision": "deny", "scope": "once", "label": "No"}))
		}, ErrSemantic, RuleUniqueChoice, "/request/choices/3"},
		{"expires_at equals created_at", reqDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/request/expires_at", "2026-08-30T18:00:00Z")
		}, ErrSemantic, RuleExpiry, "/request/expires_at"},
		{"expires_at before created_at", reqDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/request/expires_at", "2026-08-30T17:59:59.999Z")
		}, ErrSemantic, RuleExpiry, "/request/expires_at"},
		{"expires_at earlier as an instant though later as a string", reqDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/request/expires_at", "2026-08-30T19:05:00+02:00") // 17:05Z
		}, ErrSemantic, RuleExpiry, "/request/expires_at"},
		{"lower-case z", reqDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/occurred_at", "2026-08-30T18:00:00z")
		}, ErrSemantic, RuleTimestamp, "/occurred_at"},
		{"lower-case t", decDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/decision/decided_at", "2026-08-30t18:01:00Z")
		}, ErrSemantic, RuleTimestamp, "/decision/decided_at"},
		{"leap second", resDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/resolution/resolved_at", "2026-12-31T23:59:60Z")
		}, ErrSemantic, RuleTimestamp, "/resolution/resolved_at"},
		{"sequence beyond 2^53-1", reqDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/sequence", json.Number("9007199254740992"))
		}, ErrSemantic, RuleSequence, "/sequence"},
		{"huge sequence as exponent", actDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/sequence", json.Number("1e300"))
		}, ErrSemantic, RuleSequence, "/sequence"},
		{"as_of_sequence beyond 2^53-1", snapDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/snapshot/as_of_sequence", json.Number("1e20"))
		}, ErrSemantic, RuleSequence, "/snapshot/as_of_sequence"},
		{"snapshot entry with wrong digest", snapDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/snapshot/pending/0/action_digest", zero)
		}, ErrDigestMismatch, RuleActionDigest, "/snapshot/pending/0/action_digest"},
		{"snapshot lists a request twice", snapDoc, func(t *testing.T, d map[string]any) {
			p := get(t, d, "/snapshot/pending").([]any)
			set(t, d, "/snapshot/pending", append(p, p[0]))
		}, ErrSemantic, RuleUniquePending, "/snapshot/pending/1/id"},
		{"stale receipt with a scope", resDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/resolution/outcome", "stale")
		}, ErrSemantic, RuleEffectiveScope, "/resolution/effective_scope"},
		{"denied receipt with session scope", resDoc, func(t *testing.T, d map[string]any) {
			set(t, d, "/resolution/outcome", "denied")
			set(t, d, "/resolution/effective_scope", "session")
		}, ErrSemantic, RuleEffectiveScope, "/resolution/effective_scope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.fixture(t)
			c.mutate(t, d)
			_, err := Parse(encodeDoc(t, d))
			if c.rule == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			wantIssue(t, err, c.class, c.rule, c.path)
		})
	}
}

// TestSemanticBackstops: the conditional rules the schema already enforces
// (deny/cancel only once, constraints on wide scopes, binding_hint) are
// also enforced by the semantic layer, so they hold even if the schema
// library misjudged them. The schema rejects such documents first, so these
// rules are exercised on the parsed value directly.
func TestSemanticBackstops(t *testing.T) {
	yes := true
	cases := []struct {
		name   string
		mutate func(m *Message)
		rule   string
		path   string
	}{
		{"deny with session scope", func(m *Message) {
			m.Request.Choices[2].Scope = ScopeSession
			m.Request.Choices[2].ScopeConstraints = Constraints{"x": json.RawMessage(`1`)}
		}, RuleOnceOnly, "/request/choices/2/scope"},
		{"cancel with persistent scope", func(m *Message) {
			m.Request.Choices[2] = Choice{Decision: Cancel, Scope: ScopePersistent, Label: "x",
				ScopeConstraints: Constraints{"x": json.RawMessage(`1`)}}
		}, RuleOnceOnly, "/request/choices/2/scope"},
		{"session without constraints", func(m *Message) {
			m.Request.Choices[1].ScopeConstraints = nil
		}, RuleScopeConstraints, "/request/choices/1"},
		{"persistent with empty constraints", func(m *Message) {
			m.Request.Choices[1].Scope = ScopePersistent
			m.Request.Choices[1].ScopeConstraints = Constraints{}
		}, RuleScopeConstraints, "/request/choices/1"},
		{"redacted without binding_hint", func(m *Message) {
			m.Request.Action.view.Presentation = &Presentation{Redacted: &yes}
		}, RuleBindingHint, "/request/action/presentation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := mustParse(t, readFile(t, requestFixture))
			c.mutate(m)
			var is issues
			checkMessage(&is, m)
			wantIssue(t, is.err(), ErrSemantic, c.rule, c.path)
			// And Validate (schema first) refuses it too, except for the
			// action: Validate writes the action's raw bytes, which the
			// mutation of its read-only view does not touch.
			if c.rule != RuleBindingHint && Validate(m) == nil {
				t.Error("Validate accepted it")
			}
		})
	}

	m := mustParse(t, readFile(t, decisionFixture))
	m.Decision.Decision, m.Decision.Scope = Deny, ScopeSession
	var is issues
	checkMessage(&is, m)
	wantIssue(t, is.err(), ErrSemantic, RuleOnceOnly, "/decision/scope")
}

func TestRedactedWithBindingHint(t *testing.T) {
	d := reqDoc(t)
	set(t, d, "/request/action/presentation", map[string]any{"redacted": true, "binding_hint": "GitHub account octo-org (token omitted)"})
	raw, _ := json.Marshal(get(t, d, "/request/action"))
	digest, _ := ActionDigest(raw)
	set(t, d, "/request/action_digest", digest)
	m := mustParse(t, encodeDoc(t, d))
	if !m.Request.Action.Redacted() || m.Request.Action.Presentation().BindingHint == "" {
		t.Errorf("presentation: %+v", m.Request.Action.Presentation())
	}
}

func TestTimestamps(t *testing.T) {
	good := []string{"2026-08-30T18:00:00Z", "2026-08-30T18:00:00.123456789Z", "2026-08-30T18:00:00.123456789012Z", "2026-08-30T18:00:00+02:00", "2026-08-30T18:00:00-00:00", "0001-01-01T00:00:00Z"}
	for _, s := range good {
		ts, err := ParseTimestamp(s)
		if err != nil || ts.String() != s {
			t.Errorf("ParseTimestamp(%q) = %v, %v", s, ts, err)
		}
	}
	bad := []string{"", "2026-08-30", "2026-08-30T18:00:00", "2026-08-30 18:00:00Z", "2026-08-30t18:00:00Z",
		"2026-08-30T18:00:00z", "2026-08-30T18:00:00.Z", "2026-08-30T18:00:00+0200", "2026-08-30T24:00:00Z",
		"2026-02-30T18:00:00Z", "2026-12-31T23:59:60Z", "２026-08-30T18:00:00Z", "2026-08-30T18:00:00+02:00x"}
	for _, s := range bad {
		if _, err := ParseTimestamp(s); err == nil {
			t.Errorf("ParseTimestamp(%q) accepted", s)
		}
	}
	a, _ := ParseTimestamp("2026-08-30T20:00:00+02:00")
	b, _ := ParseTimestamp("2026-08-30T18:00:00Z")
	if !a.Time().Equal(b.Time()) || a == b {
		t.Errorf("instants %v %v", a.Time(), b.Time())
	}
	if (Timestamp{}).IsZero() != true || a.IsZero() {
		t.Error("IsZero")
	}
	var ts Timestamp
	if err := json.Unmarshal([]byte(`"2026-08-30T18:00:00Z"`), &ts); err != nil || ts != b {
		t.Errorf("UnmarshalJSON: %v %v", ts, err)
	}
	if err := json.Unmarshal([]byte(`"yesterday"`), &ts); err == nil {
		t.Error("UnmarshalJSON accepted garbage")
	}
}

func TestOfferedChoice(t *testing.T) {
	r := fixtureRequest(t)
	d := mustParse(t, readFile(t, decisionFixture)).Decision
	for _, c := range []struct {
		v    Verdict
		s    Scope
		want bool
	}{
		{Approve, ScopeOnce, true}, {Approve, ScopeSession, true}, {Deny, ScopeOnce, true},
		{Approve, ScopePersistent, false}, {Cancel, ScopeOnce, false}, {Deny, ScopeSession, false},
	} {
		d.Decision, d.Scope = c.v, c.s
		got, ok := OfferedChoice(r, d)
		if ok != c.want || ok && (got.Decision != c.v || got.Scope != c.s) {
			t.Errorf("(%s, %s): %+v %v", c.v, c.s, got, ok)
		}
	}
	if _, ok := OfferedChoice(nil, d); ok {
		t.Error("nil request")
	}
	if _, ok := OfferedChoice(r, nil); ok {
		t.Error("nil decision")
	}
}
