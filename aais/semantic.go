package aais

import (
	"fmt"
)

// checkMessage applies the rules the JSON Schema cannot express, and
// re-checks the conditional ones it can (deny/cancel only once, constraints
// on wide scopes, binding_hint) so that they hold even if a schema library
// got them wrong. Paths are JSON Pointers into the document.
func checkMessage(is *issues, m *Message) {
	switch {
	case m.Request != nil:
		checkRequest(is, "/request", m.Request)
	case m.Decision != nil:
		checkDecision(is, "/decision", m.Decision)
	case m.Resolution != nil:
		checkResolution(is, "/resolution", m.Resolution)
	case m.Snapshot != nil:
		checkSnapshot(is, "/snapshot", m.Snapshot)
	}
}

func checkRequest(is *issues, at string, r *Request) {
	if !r.ExpiresAt.IsZero() && r.CreatedAt.valid() && r.ExpiresAt.valid() &&
		!r.ExpiresAt.Time().After(r.CreatedAt.Time()) {
		is.add(at+"/expires_at", RuleExpiry,
			fmt.Sprintf("expires_at %s is not after created_at %s", r.ExpiresAt, r.CreatedAt))
	}

	if !r.Action.IsZero() {
		switch got, err := r.Action.Digest(); {
		case err != nil:
			is.add(at+"/action", RuleJSON, err.Error())
		case got != r.ActionDigest:
			is.add(at+"/action_digest", RuleActionDigest,
				fmt.Sprintf("%s does not match the action received, whose digest is %s", r.ActionDigest, got))
		}
		checkPresentation(is, at+"/action", r.Action.view.Presentation)
	}

	checkChoices(is, at+"/choices", r.Choices)
}

// checkPresentation: an opaque reference must say what identity it binds.
func checkPresentation(is *issues, actionAt string, p *Presentation) {
	if p != nil && p.Redacted != nil && *p.Redacted && p.BindingHint == "" {
		is.add(actionAt+"/presentation", RuleBindingHint,
			"a redacted action must name what it is bound to in binding_hint")
	}
}

func checkChoices(is *issues, at string, choices []Choice) {
	type pair struct {
		v Verdict
		s Scope
	}
	// The schema allows at most 10 choices; a linear search for an
	// earlier equal pair beats allocating a map for them.
	firstIndex := func(k pair, before int) (int, bool) {
		for j := range before {
			if (pair{choices[j].Decision, choices[j].Scope}) == k {
				return j, true
			}
		}
		return 0, false
	}
	exit := false
	for i, c := range choices {
		ci := index(at, i)
		if c.Decision.Exits() {
			exit = true
			if c.Scope != ScopeOnce {
				is.add(ci+"/scope", RuleOnceOnly,
					fmt.Sprintf("%s is only offered with scope once, not %q", c.Decision, c.Scope))
			}
		}
		if c.Scope.Bounded() && len(c.ScopeConstraints) == 0 {
			is.add(ci, RuleScopeConstraints,
				fmt.Sprintf("a %s choice must carry scope_constraints: an authority never offers an unbounded approval", c.Scope))
		}
		if j, dup := firstIndex(pair{c.Decision, c.Scope}, i); dup {
			is.add(ci, RuleUniqueChoice,
				fmt.Sprintf("(%s, %s) is already offered by choice %d", c.Decision, c.Scope, j))
		}
	}
	if !exit {
		is.add(at, RuleExitChoice, "at least one choice must deny or cancel")
	}
}

func checkDecision(is *issues, at string, d *Decision) {
	if d.Decision.Exits() && d.Scope != ScopeOnce {
		is.add(at+"/scope", RuleOnceOnly,
			fmt.Sprintf("%s is only given with scope once, not %q", d.Decision, d.Scope))
	}
}

// checkResolution: a receipt may only state a scope that some decision
// could have granted. An approval carries the scope approved; a denial or a
// cancellation is always once; no other outcome grants anything, so a
// scope there would read as a grant that never happened.
func checkResolution(is *issues, at string, r *Resolution) {
	if r.EffectiveScope == "" {
		return
	}
	switch r.Outcome {
	case OutcomeApproved:
	case OutcomeDenied, OutcomeCancelled:
		if r.EffectiveScope != ScopeOnce {
			is.add(at+"/effective_scope", RuleEffectiveScope,
				fmt.Sprintf("a %s receipt can only have effective_scope once, not %q", r.Outcome, r.EffectiveScope))
		}
	default:
		is.add(at+"/effective_scope", RuleEffectiveScope,
			fmt.Sprintf("a %s receipt grants nothing and carries no effective_scope", r.Outcome))
	}
}

func checkSnapshot(is *issues, at string, s *Snapshot) {
	seen := map[string]int{}
	for i := range s.Pending {
		ri := index(at+"/pending", i)
		r := &s.Pending[i]
		checkRequest(is, ri, r)
		if j, dup := seen[r.ID]; dup {
			is.add(ri+"/id", RuleUniquePending,
				fmt.Sprintf("request %q is already listed at pending/%d", r.ID, j))
		} else {
			seen[r.ID] = i
		}
	}
}

// valid reports whether ts holds a timestamp ParseTimestamp accepts.
func (ts Timestamp) valid() bool {
	_, err := ParseTimestamp(ts.text)
	return err == nil
}
