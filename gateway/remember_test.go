package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/store/memstore"
)

// withRemember gives the rig's gateway and authority the remember policy.
func withRemember(p *aais.RememberRules) rigOption {
	return func(o *Options, r *pipeRig) {
		p.ProfileOf = RequestProfile
		a, err := aais.NewAuthority(memstore.New(), &aais.AuthorityOptions{Now: r.clk.Now, Remember: p})
		if err != nil {
			panic(err)
		}
		r.auth, o.Authority, o.Remember = a, a, p
	}
}

func rememberPolicy() *aais.RememberRules {
	return &aais.RememberRules{Rules: []aais.RememberRule{
		{Capabilities: []string{"demo.echo"}, Profiles: []string{"EU-AI-ACT-HIGH-RISK"}, Scopes: []aais.Scope{aais.ScopeSession, aais.ScopePersistent},
			MaxAge: time.Hour, Constraints: aais.Constraints{aais.ConstraintArgumentRange: json.RawMessage(`{"/amount":"value <= 100"}`)}},
		{Capabilities: []string{"demo.*"}, Scopes: []aais.Scope{aais.ScopeSession}},
	}}
}

// The approval of a call offers exactly the remembered choices its
// policy entry allows, with the constraints the entry requires; a
// persistent approval then approves a later call within them, and only
// those.
func TestRememberPolicyOffersAndApplies(t *testing.T) {
	r := newPipeRig(t, withRemember(rememberPolicy()))
	ctx := t.Context()
	rep, _ := r.pending(t, req{args: map[string]any{"text": "refund", "amount": 50}})
	x, _ := r.xs.Get(ctx, rep.ExchangeID)
	st, err := r.auth.State(ctx, x.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	areq := st.Request.Event.Request
	var scopes []string
	for _, c := range areq.Choices {
		scopes = append(scopes, string(c.Decision)+"/"+string(c.Scope))
		if !c.Scope.Bounded() {
			continue
		}
		if string(c.ScopeConstraints[aais.ConstraintArgumentRange]) != `{"/amount":"value <= 100"}` ||
			string(c.ScopeConstraints[aais.ConstraintActionName]) != `"demo.echo"` {
			t.Errorf("%s choice constraints: %s", c.Scope, c.ScopeConstraints)
		}
		if c.Scope == aais.ScopePersistent && string(c.ScopeConstraints[aais.ConstraintOriginSession]) != `"`+pipeSender+`"` {
			t.Errorf("the persistent choice is not bound to the sender: %s", c.ScopeConstraints)
		}
		if !strings.Contains(c.Label, "at most 1h0m0s") {
			t.Errorf("%s label does not say the lifetime: %q", c.Scope, c.Label)
		}
	}
	if got := strings.Join(scopes, " "); got != "approve/once deny/once approve/session approve/persistent" {
		t.Fatalf("choices offered: %s", got)
	}
	d, err := aais.NewDecision(areq, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopePersistent, Actor: alice, DecidedAt: r.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := r.auth.Decide(ctx, d, alice, nil); err != nil || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("persistent approval: %v %+v", err, m)
	}
	step(t, r.g.resume)

	rep2, _ := r.send(t, req{compliance: profile("EU-AI-ACT-HIGH-RISK"), args: map[string]any{"text": "again", "amount": 80}}, "")
	if rep2.Status != 200 {
		t.Fatalf("a call within the persistent rule: %d %v", rep2.Status, rep2.Problem)
	}
	if n := r.echo.n.Load(); n != 2 {
		t.Fatalf("ran %d times, want 2", n)
	}
	r.pending(t, req{args: map[string]any{"text": "too much", "amount": 100.5}})
	if n := r.echo.n.Load(); n != 2 {
		t.Fatalf("a call above the range ran: %d runs", n)
	}
}

// Under an entry that allows session approvals only, no persistent
// choice is offered, and deciding one anyway is invalid.
func TestRememberPolicySessionOnly(t *testing.T) {
	ctx := t.Context()
	r2 := newPipeRig(t, withRemember(&aais.RememberRules{Rules: []aais.RememberRule{
		{Capabilities: []string{"demo.*"}, Scopes: []aais.Scope{aais.ScopeSession}}}}))
	rep2, _ := r2.pending(t, req{})
	x, _ := r2.xs.Get(ctx, rep2.ExchangeID)
	st, err := r2.auth.State(ctx, x.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	areq := st.Request.Event.Request
	if _, ok := areq.Choice(aais.Approve, aais.ScopePersistent); ok {
		t.Fatal("a persistent choice was offered under a session-only entry")
	}
	if _, ok := areq.Choice(aais.Approve, aais.ScopeSession); !ok {
		t.Fatal("no session choice under a session entry")
	}
	d, err := aais.NewDecision(areq, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeSession, Actor: alice, DecidedAt: r2.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	d.Scope = aais.ScopePersistent // what a presenter that widened the choice would send
	m, err := r2.auth.Decide(ctx, d, alice, nil)
	if err != nil || m.Resolution.Outcome != aais.OutcomeInvalid {
		t.Fatalf("an unoffered persistent decision: %v %+v", err, m)
	}
	if rules, _ := r2.auth.Rules(ctx); len(rules) != 0 {
		t.Fatal("an unoffered persistent decision saved a rule")
	}
	// No entry: approve once only.
	r3 := newPipeRig(t, withRemember(&aais.RememberRules{Rules: []aais.RememberRule{{Capabilities: []string{"billing.*"}, Scopes: []aais.Scope{aais.ScopeSession}}}}))
	rep3, _ := r3.pending(t, req{})
	x3, _ := r3.xs.Get(ctx, rep3.ExchangeID)
	st3, err := r3.auth.State(ctx, x3.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st3.Request.Event.Request.Choices); n != 2 {
		t.Fatalf("a capability no entry covers offers %d choices, want approve once and deny", n)
	}
}
