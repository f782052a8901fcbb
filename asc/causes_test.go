package asc

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 8, 8, 12, 0, 0, 0, time.UTC)

// causeChainJSON nests n envelopes, each the only cause of its parent.
func causeChainJSON(n int) string {
	const open = `{"status":{"code":5003,"name":"DEPENDENCY_UNAVAILABLE","kind":"status","scope":"step","terminal":true},"causes":[`
	inner := strings.Repeat(open, n-1) +
		`{"status":{"code":5003,"name":"DEPENDENCY_UNAVAILABLE","kind":"status","scope":"tool_call","terminal":true}}` +
		strings.Repeat("]}", n-1)
	return `{"spec_version":"0.1.0","status":{"code":6001,"name":"INTERNAL_ERROR","kind":"status","scope":"task","terminal":true},"occurred_at":"2026-08-08T12:00:00Z","causes":[` + inner + `]}`
}

func hasRule(issues []Issue, rule string) bool {
	return slices.ContainsFunc(issues, func(is Issue) bool { return is.Rule == rule && is.Level == LevelError })
}

func TestCauseDepthLimitJSON(t *testing.T) {
	if _, err := Parse([]byte(causeChainJSON(MaxCauseDepth))); err != nil {
		t.Fatalf("depth %d: %v", MaxCauseDepth, err)
	}
	_, err := Parse([]byte(causeChainJSON(MaxCauseDepth + 1)))
	if !errors.Is(err, ErrCauseTree) {
		t.Fatalf("depth %d: Parse() = %v, want ErrCauseTree", MaxCauseDepth+1, err)
	}
	if !hasRule(CheckJSON([]byte(causeChainJSON(MaxCauseDepth+1))), RuleCauseDepth) {
		t.Error("CheckJSON does not report causes.depth")
	}
}

// TestDeepDocument: 10 000 levels of nesting are refused by the strict
// decoder long before any recursion could hurt.
func TestDeepDocument(t *testing.T) {
	doc := causeChainJSON(10_000)
	_, err := Parse([]byte(doc))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("Parse() = %v, want ErrMalformed", err)
	}
	raw := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	if _, err := Parse([]byte(raw)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Parse(deep arrays) = %v", err)
	}
}

func chain(n int) *Envelope {
	root := New(InternalError, ScopeTask, true, t0)
	cur := root
	for range n {
		next := New(DependencyUnavailable, ScopeStep, true, t0)
		cur.Causes = []Cause{{Envelope: next}}
		cur = next
	}
	return root
}

func TestCauseDepthLimitGo(t *testing.T) {
	if err := Validate(chain(MaxCauseDepth)); err != nil {
		t.Fatal(err)
	}
	deep := chain(10_000)
	err := Validate(deep)
	if !errors.Is(err, ErrCauseTree) {
		t.Fatalf("Validate() = %v, want ErrCauseTree", err)
	}
	if _, err := Marshal(deep); !errors.Is(err, ErrCauseTree) {
		t.Fatalf("Marshal() = %v, want ErrCauseTree", err)
	}
}

func TestCauseNodeLimit(t *testing.T) {
	env := New(PartialSuccess, ScopeTask, true, t0)
	for i := range MaxCauseNodes + 1 {
		env.Causes = append(env.Causes, Cause{Ref: &CauseRef{Ref: "urn:example:" + string(rune('a'+i%26))}})
	}
	if !hasRule(Check(env), RuleCauseNodes) {
		t.Fatal("no causes.nodes error")
	}
	env.Causes = env.Causes[:MaxCauseNodes]
	if err := Validate(env); err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data); err != nil {
		t.Fatal(err)
	}
}

func TestCauseCycle(t *testing.T) {
	a := New(InternalError, ScopeTask, true, t0)
	b := New(DependencyUnavailable, ScopeStep, true, t0)
	a.Causes = []Cause{{Envelope: b}}
	b.Causes = []Cause{{Envelope: a}}
	if !hasRule(Check(a), RuleCauseCycle) {
		t.Fatalf("no cycle found: %v", Check(a))
	}
	if _, err := Marshal(a); !errors.Is(err, ErrCauseTree) {
		t.Fatalf("Marshal() = %v", err)
	}

	self := New(InternalError, ScopeTask, true, t0)
	self.Conditions = []Condition{{Envelope: self}}
	if !hasRule(Check(self), RuleCauseCycle) {
		t.Fatal("self-cycle through conditions not found")
	}
}

func TestCauseRepeatedNode(t *testing.T) {
	shared := New(DependencyUnavailable, ScopeStep, true, t0)
	root := New(InternalError, ScopeTask, true, t0)
	root.Causes = []Cause{{Envelope: shared}, {Envelope: shared}}
	if !hasRule(Check(root), RuleCauseRepeated) {
		t.Fatal("repeated node not found")
	}
}

func TestCauseShapes(t *testing.T) {
	tests := []struct {
		name  string
		cause Cause
		rule  string
	}{
		{"empty", Cause{}, RuleCauseShape},
		{"both", Cause{Envelope: New(Timeout, ScopeStep, true, t0), Ref: &CauseRef{Ref: "x"}}, RuleCauseShape},
		{"empty ref", Cause{Ref: &CauseRef{}}, RuleCauseShape},
		{"ref name mismatch", Cause{Ref: &CauseRef{Code: Timeout, Name: "RATE_LIMITED"}}, RuleNameMismatch},
		{"ref code without name", Cause{Ref: &CauseRef{Code: Timeout}}, RuleRequired},
		{"ref bad scope", Cause{Ref: &CauseRef{Ref: "x", Scope: "conversation"}}, RuleScope},
		{"nested without status code", Cause{Envelope: &Envelope{Status: Status{Name: "X", Kind: KindStatus, Scope: ScopeStep}}}, RuleRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := New(InternalError, ScopeTask, true, t0)
			env.Causes = []Cause{tt.cause}
			if !hasRule(Check(env), tt.rule) {
				t.Fatalf("want %s, got %v", tt.rule, Check(env))
			}
		})
	}
}

func TestNestedEnvelopeInheritsVersionAndTime(t *testing.T) {
	env := New(InternalError, ScopeTask, true, t0)
	env.Causes = []Cause{{Envelope: &Envelope{Status: Status{Code: Timeout, Name: "TIMEOUT", Kind: KindStatus, Scope: ScopeToolCall, Terminal: true}}}}
	if err := Validate(env); err != nil {
		t.Fatal(err)
	}
	env.Causes[0].Envelope.OccurredAt = "yesterday"
	if !hasRule(Check(env), RuleTimestamp) {
		t.Fatal("a present nested occurred_at is still validated")
	}
}
