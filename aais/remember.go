package aais

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// ErrNotRemembered: the authority's remember policy does not allow the
// approval to be remembered as asked (a scope the policy does not offer
// for the action, a constraint the policy requires left out or changed).
// Errors wrapping it say exactly which.
var ErrNotRemembered = errors.New("aais: the remember policy does not allow this")

// RememberPolicy is the authority's policy on remembered approvals: which
// actions may be approved for a session or persistently, under which
// constraints and for how long. AAIS lets decisions narrow within the
// authority's policy ceiling and never widen it (§5); with a policy set
// (AuthorityOptions.Remember) an Authority holds every session and
// persistent choice, every rule it makes and every rule it matches to it:
//
//   - Submit refuses a request offering a bounded approve choice the
//     policy refuses, or whose scope_constraints leave out or change a
//     constraint the policy requires;
//   - Decide refuses to make a rule the policy (as it is now) refuses,
//     and ends the rule after MaxAge;
//   - Submit matches a rule to a new request only while the policy still
//     allows that rule's scope for that request, the rule still carries
//     the required constraints, and the rule is younger than MaxAge, so
//     tightening the policy takes effect on rules already saved.
//
// Remember must be pure and quick: it runs for every rule at every match.
type RememberPolicy interface {
	// Remember says whether an approval of req with scope (session or
	// persistent) may be remembered, and within which limits. A refusal
	// is an error wrapping ErrNotRemembered that says why in words a
	// reviewer understands.
	Remember(req *Request, scope Scope) (RememberLimits, error)
}

// RememberLimits is what a RememberPolicy allows for one action and scope.
type RememberLimits struct {
	// MaxAge caps a rule's life from its creation; zero means no cap.
	MaxAge time.Duration
	// Required are constraints every remembered choice must carry with
	// exactly these values (compared in RFC 8785 canonical form), such as
	// an argument_range the policy puts on every remembered refund.
	Required Constraints
}

// RememberRule is one entry of a RememberRules policy.
type RememberRule struct {
	// Capabilities are globs (path.Match) on action.name; empty matches
	// every action.
	Capabilities []string
	// Profiles are the compliance profiles the entry applies to (see
	// RememberRules.ProfileOf); empty matches every request, with or
	// without a profile.
	Profiles []string
	// Scopes are the scopes that may be remembered: ScopeSession and/or
	// ScopePersistent. Empty remembers nothing (an entry that forbids).
	Scopes []Scope
	// MaxAge and Constraints are the entry's RememberLimits.
	MaxAge      time.Duration
	Constraints Constraints
}

// RememberRules is the RememberPolicy of a configuration file: entries
// tried in order, the first whose capabilities and profiles cover the
// request deciding. A request no entry covers may not be remembered at
// all.
type RememberRules struct {
	Rules []RememberRule
	// ProfileOf returns a request's compliance profile ("" for none); nil
	// reads origin.profile.
	ProfileOf func(*Request) string
}

// Validate checks the entries: known scopes (never once), globs that
// compile, constraints that parse with no unknown key, no negative age.
// Each problem names the entry by its position from 1.
func (p *RememberRules) Validate() error {
	var problems []string
	for i, r := range p.Rules {
		where := fmt.Sprintf("remember entry %d", i+1)
		for _, g := range r.Capabilities {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				problems = append(problems, fmt.Sprintf("%s: capability pattern %q is not a glob", where, g))
			}
		}
		for _, s := range r.Scopes {
			if !s.Bounded() {
				problems = append(problems, fmt.Sprintf("%s: scope %q: want session or persistent", where, s))
			}
		}
		if r.MaxAge < 0 {
			problems = append(problems, where+": max_age is negative")
		}
		if len(r.Constraints) > 0 {
			cs, err := ParseConstraints(r.Constraints)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: constraints: %v", where, err))
			} else if len(cs.Unknown) > 0 {
				problems = append(problems, fmt.Sprintf("%s: constraints: unknown constraint %s", where, strings.Join(cs.Unknown, ", ")))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// Entry returns the entry that decides for an action name and profile,
// and its position from 1; ok is false when none covers them.
func (p *RememberRules) Entry(name, profile string) (r RememberRule, index int, ok bool) {
	if p == nil {
		return RememberRule{}, 0, false
	}
	for i, r := range p.Rules {
		if !r.covers(name, profile) {
			continue
		}
		return r, i + 1, true
	}
	return RememberRule{}, 0, false
}

func (r RememberRule) covers(name, profile string) bool {
	if len(r.Profiles) > 0 && !slices.Contains(r.Profiles, profile) {
		return false
	}
	if len(r.Capabilities) == 0 {
		return true
	}
	return slices.ContainsFunc(r.Capabilities, func(g string) bool {
		ok, err := path.Match(g, name)
		return err == nil && ok
	})
}

// Remember implements RememberPolicy.
func (p *RememberRules) Remember(req *Request, scope Scope) (RememberLimits, error) {
	if req == nil {
		return RememberLimits{}, fmt.Errorf("%w: no request", ErrNotRemembered)
	}
	name, profile := req.Action.Name(), req.Origin.Profile
	if p.ProfileOf != nil {
		profile = p.ProfileOf(req)
	}
	r, i, ok := p.Entry(name, profile)
	if !ok {
		return RememberLimits{}, fmt.Errorf("%w: no remember policy entry covers %s%s; only approve once is allowed", ErrNotRemembered, name, profileWords(profile))
	}
	if !slices.Contains(r.Scopes, scope) {
		allowed := "no approval may be remembered"
		if len(r.Scopes) > 0 {
			words := make([]string, len(r.Scopes))
			for k, s := range r.Scopes {
				words[k] = string(s)
			}
			allowed = "only " + strings.Join(words, " and ") + " approvals may be remembered"
		}
		return RememberLimits{}, fmt.Errorf("%w: a %s approval of %s%s is refused: by remember policy entry %d %s", ErrNotRemembered, scope, name, profileWords(profile), i, allowed)
	}
	return RememberLimits{MaxAge: r.MaxAge, Required: cloneConstraints(r.Constraints)}, nil
}

func profileWords(profile string) string {
	if profile == "" {
		return ""
	}
	return " under profile " + profile
}

// Choice is the remembered approval of scope to offer, bound by base
// (Offer): its label says what it allows, then the limits (the rule's
// longest life, that the policy adds constraints); a label over AAIS's 200
// characters becomes short instead.
func (l RememberLimits) Choice(scope Scope, label, short string, base Constraints) (Choice, error) {
	if l.MaxAge > 0 {
		label += " (at most " + l.MaxAge.String() + ")"
	}
	if len(l.Required) > 0 {
		label += ", within the policy's limits"
	}
	if len(label) > 200 {
		label = short
	}
	c, err := l.Offer(base)
	if err != nil {
		return Choice{}, err
	}
	return Choice{Decision: Approve, Scope: scope, Label: label, ScopeConstraints: c}, nil
}

// Offer returns the constraints of a choice to offer: base (what the
// caller binds the choice to, such as the action name) with the required
// constraints of limits added. A required key base also sets with a
// different value is an error: the choice could not satisfy the policy.
func (l RememberLimits) Offer(base Constraints) (Constraints, error) {
	out := cloneConstraints(base)
	if out == nil {
		out = Constraints{}
	}
	for _, k := range sortedKeys(l.Required) {
		if v, ok := out[k]; ok {
			if !sameConstraint(v, l.Required[k]) {
				return nil, fmt.Errorf("%w: constraint %s conflicts with the one the policy requires", ErrNotRemembered, k)
			}
			continue
		}
		out[k] = l.Required[k]
	}
	return out, nil
}

// Holds checks that c carries every constraint the limits require, with
// the same value; the error names the first one missing or changed.
func (l RememberLimits) Holds(c Constraints) error {
	for _, k := range sortedKeys(l.Required) {
		v, ok := c[k]
		if !ok {
			return fmt.Errorf("%w: the policy requires the constraint %s, which is missing", ErrNotRemembered, k)
		}
		if !sameConstraint(v, l.Required[k]) {
			return fmt.Errorf("%w: the constraint %s differs from the one the policy requires", ErrNotRemembered, k)
		}
	}
	return nil
}

func sameConstraint(a, b []byte) bool {
	same, err := sameJSON(a, b)
	return err == nil && same
}

// Remembers reports whether the authority has a remember policy.
func (a *Authority) Remembers() bool { return a.remember != nil }

// checkRemember holds req's bounded approve choices to the policy.
func (a *Authority) checkRemember(req *Request) error {
	if a.remember == nil {
		return nil
	}
	for _, c := range req.Choices {
		if c.Decision != Approve || !c.Scope.Bounded() {
			continue
		}
		lim, err := a.remember.Remember(req, c.Scope)
		if err == nil {
			err = lim.Holds(c.ScopeConstraints)
		}
		if err != nil {
			return fmt.Errorf("%w: the %s choice: %w", ErrInvalid, c.Scope, err)
		}
	}
	return nil
}

// ruleLimits returns the policy's limits for a rule about to be made, or
// why it may not be.
func (a *Authority) ruleLimits(req *Request, scope Scope, c Constraints) (RememberLimits, error) {
	if a.remember == nil {
		return RememberLimits{}, nil
	}
	lim, err := a.remember.Remember(req, scope)
	if err != nil {
		return RememberLimits{}, err
	}
	return lim, lim.Holds(c)
}

// explainRule is Rule.Explain under the authority's current remember
// policy.
func (a *Authority) explainRule(r *Rule, req *Request, now time.Time) (bool, string, []string) {
	ok, why, because := r.Explain(req, now)
	if !ok || a.remember == nil {
		return ok, why, because
	}
	lim, err := a.remember.Remember(req, r.Scope)
	if err != nil {
		return false, "the remember policy no longer allows it: " + strings.TrimPrefix(err.Error(), ErrNotRemembered.Error()+": "), nil
	}
	if err := lim.Holds(r.constraints); err != nil {
		return false, strings.TrimPrefix(err.Error(), ErrNotRemembered.Error()+": "), nil
	}
	if lim.MaxAge > 0 {
		end := r.CreatedAt.Add(lim.MaxAge)
		if !now.Before(end) {
			return false, "the rule is older than the remember policy's max_age " + lim.MaxAge.String(), nil
		}
		because = append(because, fmt.Sprintf("the remember policy allows %s approvals of it, for at most %s (until %s)", r.Scope, lim.MaxAge, end.UTC().Format(time.RFC3339)))
	} else {
		because = append(because, fmt.Sprintf("the remember policy allows %s approvals of it", r.Scope))
	}
	return true, "", because
}
