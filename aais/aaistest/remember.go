package aaistest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// The remembered-decision cases: a remember policy decides which
// approvals may be remembered, for how long and under which constraints;
// the store keeps the rules, revocations take effect at once on every
// handle.

// refundPolicy remembers billing.refund for a session or persistently,
// for at most an hour, only for amounts up to 100; billing.void only for
// a session; nothing else.
func refundPolicy() *aais.RememberRules {
	return &aais.RememberRules{Rules: []aais.RememberRule{
		{Capabilities: []string{"billing.refund"}, Scopes: []aais.Scope{aais.ScopeSession, aais.ScopePersistent},
			MaxAge: time.Hour, Constraints: aais.Constraints{aais.ConstraintArgumentRange: json.RawMessage(`{"/amount":"value <= 100"}`)}},
		{Capabilities: []string{"billing.void"}, Scopes: []aais.Scope{aais.ScopeSession}},
	}}
}

// withPolicy returns f with an authority holding p, on the same store.
func (f *fixture) withPolicy(t *testing.T, p aais.RememberPolicy) *fixture {
	t.Helper()
	a, err := aais.NewAuthority(f.store, &aais.AuthorityOptions{Now: f.clock.Now, Stream: "conformance.approvals", Remember: p})
	if err != nil {
		t.Fatal(err)
	}
	g := *f
	g.auth = a
	return &g
}

// refund builds request apr_<n>: name refunding amount in session,
// offering once, and session and persistent under constraints c (nil: the
// policy's, bound to the action name).
func (f *fixture) refund(t *testing.T, n, name, amount, session string, c aais.Constraints) *aais.Request {
	t.Helper()
	if c == nil {
		c = aais.Constraints{aais.ConstraintActionName: json.RawMessage(`"` + name + `"`),
			aais.ConstraintArgumentRange: json.RawMessage(`{"/amount":"value <= 100"}`)}
	}
	r, err := aais.NewRequest(aais.RequestParams{
		ID: "apr_" + n, CreatedAt: f.clock.Now(), ExpiresAt: f.clock.Now().Add(10 * time.Minute),
		Origin: aais.Origin{Harness: "conformance", SessionID: session},
		Action: json.RawMessage(`{"kind":"tool.call","name":"` + name + `","summary":"Refund an order","arguments":{"order":"o-` + n + `","amount":` + amount + `}}`),
		Risk:   aais.Risk{Level: aais.RiskHigh, Reasons: []string{"Moves money"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Approve, Scope: aais.ScopeSession, Label: "Allow for the session", ScopeConstraints: c},
			{Decision: aais.Approve, Scope: aais.ScopePersistent, Label: "Always allow", ScopeConstraints: c},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
	})
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	return r
}

// testRememberPolicyRefuses: a request offering what the policy does not
// allow is refused with a precise error and changes nothing.
func testRememberPolicyRefuses(t *testing.T, f *fixture) {
	g := f.withPolicy(t, refundPolicy())
	for _, tc := range []struct {
		name string
		req  *aais.Request
		want string
	}{
		{"persistent where the policy says session only", g.refund(t, "1", "billing.void", "5", "s-1",
			aais.Constraints{aais.ConstraintActionName: json.RawMessage(`"billing.void"`)}),
			"a persistent approval of billing.void is refused: by remember policy entry 2 only session approvals may be remembered"},
		{"a required constraint dropped", g.refund(t, "2", "billing.refund", "5", "s-1",
			aais.Constraints{aais.ConstraintActionName: json.RawMessage(`"billing.refund"`)}),
			"the policy requires the constraint argument_range, which is missing"},
		{"a required constraint widened", g.refund(t, "3", "billing.refund", "5", "s-1",
			aais.Constraints{aais.ConstraintActionName: json.RawMessage(`"billing.refund"`),
				aais.ConstraintArgumentRange: json.RawMessage(`{"/amount":"value <= 1000"}`)}),
			"the constraint argument_range differs from the one the policy requires"},
		{"an action no entry covers", g.refund(t, "4", "billing.charge", "5", "s-1", nil),
			"no remember policy entry covers billing.charge"},
	} {
		_, err := g.auth.Submit(g.ctx, tc.req)
		if !errors.Is(err, aais.ErrInvalid) || !errors.Is(err, aais.ErrNotRemembered) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrInvalid and ErrNotRemembered saying %q", tc.name, err, tc.want)
		}
		if _, err := g.store.RequestState(g.ctx, tc.req.ID); !errors.Is(err, aais.ErrUnknownRequest) {
			t.Errorf("%s: the refused request was recorded (%v)", tc.name, err)
		}
	}
	// The same requests without a policy are accepted: the policy, not
	// the constraints alone, refused them.
	if _, err := f.auth.Submit(f.ctx, f.refund(t, "5", "billing.void", "5", "s-1",
		aais.Constraints{aais.ConstraintActionName: json.RawMessage(`"billing.void"`)})); err != nil {
		t.Fatalf("without a policy: %v", err)
	}
}

// testPersistentRuleByPolicy: a persistent approval saves a rule that
// approves a later matching request from another session, says why, and
// stops at the policy's max_age, checked when it matches.
func testPersistentRuleByPolicy(t *testing.T, f *fixture) {
	g := f.withPolicy(t, refundPolicy())
	r := g.refund(t, "1", "billing.refund", "50", "s-1", nil)
	if _, err := g.auth.Submit(g.ctx, r); err != nil {
		t.Fatal(err)
	}
	m := g.decide(t, g.decision(t, r, aais.Approve, aais.ScopePersistent, ""), nil)
	wantOutcome(t, m, aais.OutcomeApproved, aais.ScopePersistent)
	rules := g.rules(t)
	if len(rules) != 1 || rules[0].Scope != aais.ScopePersistent {
		t.Fatalf("rules after a persistent approval: %+v", rules)
	}
	rule := rules[0]
	if want := f.clock.Now().Add(time.Hour); !rule.ExpiresAt.Equal(want) {
		t.Fatalf("rule expires at %v, want the policy's max_age, %v", rule.ExpiresAt, want)
	}

	f.clock.Advance(time.Minute)
	s, err := g.auth.Submit(g.ctx, g.refund(t, "2", "billing.refund", "1e2", "s-other", nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Rule == nil || s.Rule.ID != rule.ID || s.Receipt == nil {
		t.Fatalf("a matching request from another session: rule %v, receipt %v; want approved by %s", s.Rule, s.Receipt != nil, rule.ID)
	}
	wantOutcome(t, s.Receipt, aais.OutcomeApproved, aais.ScopePersistent)
	var ext struct {
		RuleID  string   `json:"rule_id"`
		Because []string `json:"because"`
	}
	if err := json.Unmarshal(s.Receipt.Resolution.Extensions[aais.RuleExtension], &ext); err != nil || ext.RuleID != rule.ID {
		t.Fatalf("receipt's rule extension: %v %+v", err, ext)
	}
	because := strings.Join(ext.Because, "\n")
	for _, want := range []string{"rule " + rule.ID + ": a persistent approval by " + Actor.ID, `argument "/amount": value <= 100 holds`,
		`action_name is "billing.refund"`, "the remember policy allows persistent approvals of it, for at most 1h0m0s"} {
		if !strings.Contains(because, want) {
			t.Errorf("receipt explains %q, missing %q", because, want)
		}
	}

	over := g.refund(t, "3", "billing.refund", "100.5", "s-other", nil)
	if s := g.submitOK(t, over); s.Rule != nil || s.Receipt != nil {
		t.Fatal("an amount above the range was approved by the rule")
	}
	exp, err := g.auth.ExplainRules(g.ctx, over)
	if err != nil || len(exp) != 1 || exp[0].Matched || !strings.Contains(exp[0].Reason, `argument_range "/amount": outside value <= 100`) {
		t.Fatalf("explanation of a non-match: %v %+v", err, exp)
	}

	// A tighter policy takes effect on the saved rule at match time.
	tight := refundPolicy()
	tight.Rules[0].MaxAge = 30 * time.Second
	h := f.withPolicy(t, tight)
	if s := h.submitOK(t, h.refund(t, "4", "billing.refund", "5", "s-other", nil)); s.Rule != nil {
		t.Fatal("a rule older than the policy's max_age approved a request")
	}
	session := refundPolicy()
	session.Rules[0].Scopes = []aais.Scope{aais.ScopeSession}
	h = f.withPolicy(t, session)
	exp, err = h.auth.ExplainRules(h.ctx, h.refund(t, "5", "billing.refund", "5", "s-other", nil))
	if err != nil || len(exp) != 1 || exp[0].Matched || !strings.Contains(exp[0].Reason, "the remember policy no longer allows it") {
		t.Fatalf("a persistent rule under a session-only policy: %v %+v", err, exp)
	}

	// At the rule's own expiry it stops, with no sweep in between.
	f.clock.Advance(time.Hour)
	late := g.refund(t, "6", "billing.refund", "5", "s-other", nil)
	if s := g.submitOK(t, late); s.Rule != nil || s.Receipt != nil {
		t.Fatal("an expired rule approved a request")
	}
	if exp, _ := g.auth.ExplainRules(g.ctx, late); len(exp) != 1 || exp[0].Reason != "the rule has expired" {
		t.Fatalf("explanation of an expired rule: %+v", exp)
	}
}

// submitOK submits r and fails on an error.
func (f *fixture) submitOK(t *testing.T, r *aais.Request) aais.Submission {
	t.Helper()
	s, err := f.auth.Submit(f.ctx, r)
	if err != nil {
		t.Fatalf("Submit(%s): %v", r.ID, err)
	}
	return s
}

// testPolicyChangedBeforeDecision: a persistent choice offered under one
// policy and decided under a stricter one saves no rule and resolves
// nothing: the reviewer learns why and may approve once.
func testPolicyChangedBeforeDecision(t *testing.T, f *fixture) {
	g := f.withPolicy(t, refundPolicy())
	r := g.refund(t, "1", "billing.refund", "50", "s-1", nil)
	g.submitOK(t, r)
	strict := refundPolicy()
	strict.Rules[0].Scopes = []aais.Scope{aais.ScopeSession}
	h := f.withPolicy(t, strict)
	_, err := h.auth.Decide(h.ctx, h.decision(t, r, aais.Approve, aais.ScopePersistent, ""), Actor, nil)
	if !errors.Is(err, aais.ErrNotRemembered) || !strings.Contains(err.Error(), "only session approvals may be remembered") {
		t.Fatalf("persistent approval under a session-only policy: %v", err)
	}
	if !h.state(t, r.ID).Pending() || len(h.rules(t)) != 0 {
		t.Fatal("a refused persistent approval changed the store")
	}
	wantOutcome(t, h.decide(t, h.decision(t, r, aais.Approve, aais.ScopeOnce, ""), nil), aais.OutcomeApproved, aais.ScopeOnce)
}

// testRevokeRace: requests matching a rule race its revocation, the
// revocation made through another handle when the storage has one (a
// second replica). Whatever was approved before, no request submitted
// after RevokeRule returned is approved by the rule.
func testRevokeRace(t *testing.T, f *fixture) {
	_, _, rule := f.sessionRule(t, "1", "s-1")
	revoker := f
	if f.reopen != nil {
		revoker = f.other(t)
	}
	const workers, each = 4, 15
	var (
		revoked  atomic.Bool
		approved = make(chan struct{}, workers*each)
		wg       sync.WaitGroup
		mu       sync.Mutex
		problems []string
	)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				after := revoked.Load()
				s, err := f.auth.Submit(f.ctx, f.request(t, fmt.Sprintf("r%d_%d", w, i), reqOpt{session: "s-1"}))
				mu.Lock()
				switch {
				case err != nil:
					problems = append(problems, err.Error())
				case s.Rule != nil && after:
					problems = append(problems, fmt.Sprintf("request r%d_%d, submitted after the revocation returned, was approved by the rule", w, i))
				case s.Rule != nil:
					approved <- struct{}{}
				}
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-approved: // a request was approved by the rule before
	case <-done:
		mu.Lock()
		t.Errorf("no request was approved by the rule before its revocation: %q", problems)
		mu.Unlock()
	}
	if _, ok, err := revoker.auth.RevokeRule(revoker.ctx, rule.ID, Actor); err != nil || !ok {
		t.Fatalf("RevokeRule: %v %v", ok, err)
	}
	revoked.Store(true)
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	if s := f.submit(t, f.request(t, "after", reqOpt{session: "s-1"})); s.Rule != nil || s.Receipt != nil {
		t.Fatal("a request after the race was approved by the revoked rule")
	}
}
