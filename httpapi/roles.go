package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway"
)

// ExchangeExtension is the extension of a gateway's approval request that
// names its exchange and compliance profile.
const ExchangeExtension = gateway.ExchangeExtension

// JustificationExtension is the decision extension carrying the reviewer's
// written justification: a string of 1..2000 characters. The receipt
// repeats it (aais.DecisionExtension).
const JustificationExtension = aais.JustificationExtension

// MaxJustification caps a justification, in characters.
const MaxJustification = 2000

// Role says which requests a reviewer holding it may decide.
type Role struct {
	// All grants every request.
	All bool `json:"all,omitempty"`
	// Capabilities are patterns (path.Match: "billing.*") over the
	// action name; empty means any.
	Capabilities []string `json:"capabilities,omitempty"`
	// Profiles are compliance profiles; empty means any, including
	// requests without one.
	Profiles []string `json:"profiles,omitempty"`
}

// covers reports whether r lets its holder decide a request for the
// capability under the profile.
func (r Role) covers(capability, profile string) bool {
	if r.All {
		return true
	}
	if len(r.Capabilities) == 0 && len(r.Profiles) == 0 {
		return false
	}
	if len(r.Capabilities) > 0 && !slices.ContainsFunc(r.Capabilities, func(p string) bool {
		ok, err := path.Match(p, capability)
		return err == nil && ok
	}) {
		return false
	}
	return len(r.Profiles) == 0 || slices.Contains(r.Profiles, profile)
}

// Policy says which reviewer may do what with which request or review. One
// rule (permission) is enforced before anything changes, for decisions
// (HTTP, WebSocket, and AG-UI through Check), edits, withdrawals (NewSubmit),
// rule revocations and post-execution review verdicts (NewReviews). A nil
// *Policy lets every authenticated reviewer do everything.
type Policy struct {
	// Roles by name. When empty, every reviewer may decide every request
	// (only SeparationOfDuties and JustificationRequired apply).
	Roles map[string]Role
	// Grants are each reviewer id's role names. A reviewer without
	// grants may decide nothing once Roles is not empty.
	Grants map[string][]string
	// SeparationOfDuties are the profiles whose requests nobody who took
	// part in them may approve: the requesting principal (origin agent_id,
	// session_id, the exchange's sender), the caller that submitted the
	// request (SubmitterExtension) and the proposers of its arguments
	// (edits); and whose post-execution reviews the call's sender may not
	// close.
	SeparationOfDuties []string
	// JustificationRequired are the profiles whose approvals must carry a
	// justification (decision extension JustificationExtension).
	JustificationRequired []string
	// swapped, once set, is the policy in force (Replace).
	swapped atomic.Pointer[Policy]
}

// Permission is what a reviewer may do with one request.
type Permission struct {
	// Decide is false when the reviewer may not decide the request at all;
	// Approve when they may decide it but not approve it (separation of
	// duties). Edit says they may propose other arguments (POST
	// /approvals/{id}/edits): whoever may decide may edit.
	Decide  bool `json:"decide"`
	Approve bool `json:"approve"`
	Edit    bool `json:"edit"`
	// Reason explains a refusal.
	Reason string `json:"reason,omitempty"`
	// JustificationRequired says an approval needs a justification.
	JustificationRequired bool `json:"justification_required"`
	// Profile is the request's compliance profile ("" when none).
	Profile string `json:"profile,omitempty"`
	// Roles are the reviewer's roles.
	Roles []string `json:"roles"`
}

// RequestProfile is the compliance profile of a gateway's approval request
// (its ExchangeExtension's profile), or "" when it names none.
func RequestProfile(req *aais.Request) string {
	ref, _ := gateway.ExchangeRefOf(req)
	return ref.Profile
}

// SubmitterExtension is the extension NewSubmit records on a submitted
// request: the authenticated caller that submitted it (an aais.Actor), so
// that separation of duties and withdrawals know who asked. A submitted
// request may not carry it itself.
const SubmitterExtension = "custos.dev/submitter"

// Submitter returns the actor that submitted req through NewSubmit, if it
// was submitted there.
func Submitter(req *aais.Request) (aais.Actor, bool) {
	var a aais.Actor
	raw, ok := req.Extensions[SubmitterExtension]
	if !ok || json.Unmarshal(raw, &a) != nil || a.ID == "" {
		return aais.Actor{}, false
	}
	return a, true
}

// requesters are the principals that asked for req: its origin session and
// agent, the sender of the gateway's exchange, and the caller that
// submitted it.
func requesters(req *aais.Request) []string {
	var out []string
	if req.Origin.SessionID != "" {
		out = append(out, req.Origin.SessionID)
	}
	if req.Origin.AgentID != "" {
		out = append(out, req.Origin.AgentID)
	}
	if ref, ok := gateway.ExchangeRefOf(req); ok && ref.Sender != "" {
		out = append(out, ref.Sender)
	}
	if sub, ok := Submitter(req); ok {
		out = append(out, sub.ID)
	}
	return out
}

// subject is what a reviewer acts on: a pending request, or an executed
// call under post-execution review.
type subject struct {
	// capability is the action name; profile the compliance profile ("":
	// none).
	capability, profile string
	// requesters asked for it; proposers proposed its arguments (edits).
	requesters, proposers []string
}

func requestSubject(req *aais.Request) subject {
	s := subject{capability: req.Action.Name(), profile: RequestProfile(req), requesters: requesters(req)}
	if ref, ok := aais.Supersedes(req); ok {
		s.proposers = ref.Proposers()
	}
	return s
}

// Permission returns what actor may do with req.
func (p *Policy) Permission(actor aais.Actor, req *aais.Request) Permission {
	p = p.current()
	return p.permission(actor, requestSubject(req))
}

// permission is the one policy rule every act on a request or a review
// passes: the reviewer's roles must cover the subject, and under
// separation of duties nobody who took part in it (requested, submitted,
// proposed its arguments) may approve it.
func (p *Policy) permission(actor aais.Actor, s subject) Permission {
	p = p.current()
	perm := Permission{Decide: true, Approve: true, Edit: true, Profile: s.profile, Roles: []string{}}
	if p == nil {
		return perm
	}
	perm.Roles = append(perm.Roles, p.Grants[actor.ID]...)
	perm.JustificationRequired = s.profile != "" && slices.Contains(p.JustificationRequired, s.profile)
	if len(p.Roles) > 0 && !slices.ContainsFunc(perm.Roles, func(name string) bool {
		r, ok := p.Roles[name]
		return ok && r.covers(s.capability, s.profile)
	}) {
		perm.Decide, perm.Approve, perm.Edit = false, false, false
		what := "capability " + s.capability
		if s.profile != "" {
			what += " under profile " + s.profile
		}
		if len(perm.Roles) == 0 {
			perm.Reason = fmt.Sprintf("You hold no role, so you may not decide requests (%s).", what)
		} else {
			perm.Reason = fmt.Sprintf("Your roles (%s) do not cover %s.", strings.Join(perm.Roles, ", "), what)
		}
		return perm
	}
	if s.profile == "" || !slices.Contains(p.SeparationOfDuties, s.profile) || actor.ID == "" {
		return perm
	}
	switch {
	case slices.Contains(s.requesters, actor.ID):
		perm.Approve = false
		perm.Reason = fmt.Sprintf("Separation of duties (%s): you requested this action, so someone else must approve it.", s.profile)
	case slices.Contains(s.proposers, actor.ID):
		// An edit is a proposal: whoever proposed the arguments of the
		// chain may not approve them.
		perm.Approve = false
		perm.Reason = fmt.Sprintf("Separation of duties (%s): you proposed these arguments, so someone else must approve them.", s.profile)
	}
	return perm
}

// mayView reports whether actor may see the resolution res of req in the
// history: every reviewer may when the policy has no roles; otherwise the
// reviewer who decided it, and whoever holds a role that covers the
// request.
func (p *Policy) mayView(actor aais.Actor, req *aais.Request, res *aais.Resolution) bool {
	p = p.current()
	if p == nil || len(p.Roles) == 0 || (actor.ID != "" && aais.ReviewerOf(res) == actor.ID) {
		return true
	}
	capability, profile := req.Action.Name(), RequestProfile(req)
	return slices.ContainsFunc(p.Grants[actor.ID], func(name string) bool {
		r, ok := p.Roles[name]
		return ok && r.covers(capability, profile)
	})
}

// Check is the policy check for bindings outside this package (AG-UI): nil
// when actor may make decision d on req, otherwise an error saying why
// (its ASC code is PERMISSION_DENIED or INVALID_REQUEST).
func (p *Policy) Check(actor aais.Actor, req *aais.Request, d *aais.Decision) error {
	p = p.current()
	if f := p.check(actor, req, d); f != nil {
		return fmt.Errorf("%s: %s", f.code.Name(), f.detail)
	}
	return nil
}

// check is the policy check every decision passes before the authority
// sees it; nil means the decision may go ahead.
func (p *Policy) check(actor aais.Actor, req *aais.Request, d *aais.Decision) *failure {
	p = p.current()
	perm := p.Permission(actor, req)
	if !perm.Decide || (d.Decision == aais.Approve && !perm.Approve) {
		return &failure{http.StatusForbidden, asc.PermissionDenied, perm.Reason}
	}
	just, err := Justification(d)
	if err != nil {
		return &failure{http.StatusBadRequest, asc.InvalidRequest, err.Error()}
	}
	if err := aais.CheckResponse(req, d); err != nil {
		// A question approved without a reply, or a reply where none
		// belongs: nothing is decided.
		return &failure{http.StatusUnprocessableEntity, asc.InvalidRequest, strings.TrimPrefix(err.Error(), aais.ErrInvalid.Error()+": ") + "."}
	}
	if d.Decision == aais.Approve && perm.JustificationRequired && just == "" {
		return &failure{http.StatusUnprocessableEntity, asc.InvalidRequest,
			fmt.Sprintf("Profile %s requires a justification for an approval (decision extension %s).", perm.Profile, JustificationExtension)}
	}
	return nil
}

// editCheck is the policy check of an edit (other arguments proposed for
// req): whoever may decide a request may propose, with a justification
// where the profile requires one for approvals.
func (p *Policy) editCheck(actor aais.Actor, req *aais.Request, justification string) *failure {
	p = p.current()
	perm := p.Permission(actor, req)
	if !perm.Edit {
		return &failure{http.StatusForbidden, asc.PermissionDenied, perm.Reason}
	}
	if perm.JustificationRequired && justification == "" {
		return &failure{http.StatusUnprocessableEntity, asc.InvalidRequest,
			fmt.Sprintf("Profile %s requires a justification for an edit.", perm.Profile)}
	}
	return nil
}

// withdrawCheck is the policy check of a withdrawal (POST
// /approvals/requests/{id}/withdraw): the caller submitted req, or may
// decide it (a withdrawal cancels it, which they could do by deciding).
func (p *Policy) withdrawCheck(actor aais.Actor, req *aais.Request) *failure {
	p = p.current()
	if sub, ok := Submitter(req); ok && actor.ID != "" && sub.ID == actor.ID && sub.Type == actor.Type {
		return nil
	}
	if perm := p.Permission(actor, req); !perm.Decide {
		return &failure{http.StatusForbidden, asc.PermissionDenied,
			"You did not submit request " + req.ID + " and may not decide it, so you may not withdraw it. " + perm.Reason}
	}
	return nil
}

// revokeCheck is the policy check of a rule's revocation: the reviewer who
// approved the rule may revoke it, and so may whoever may decide the
// request it came from (req; nil when that request is no longer known,
// and then only a role granting everything covers it).
func (p *Policy) revokeCheck(actor aais.Actor, rule *aais.Rule, req *aais.Request) *failure {
	p = p.current()
	if p == nil || len(p.Roles) == 0 || (actor.ID != "" && rule.Actor.ID == actor.ID) {
		return nil
	}
	if req != nil {
		if perm := p.Permission(actor, req); perm.Decide {
			return nil
		}
	} else if slices.ContainsFunc(p.Grants[actor.ID], func(name string) bool { return p.Roles[name].All }) {
		return nil
	}
	return &failure{http.StatusForbidden, asc.PermissionDenied,
		fmt.Sprintf("Your roles do not cover the request rule %s came from, and you did not approve it; you may not revoke it.", rule.ID)}
}

// ReviewSubject is an executed call under post-execution review.
type ReviewSubject struct {
	// Capability, Profile and Sender describe the call.
	Capability, Profile, Sender string
}

// ReviewPermission returns what actor may do with a post-execution
// review: Decide says they may give a verdict (their roles cover the
// call), Approve false that separation of duties forbids it (they sent
// the call themselves; the first verdict is final, so the sender may
// give none).
func (p *Policy) ReviewPermission(actor aais.Actor, s ReviewSubject) Permission {
	p = p.current()
	var who []string
	if s.Sender != "" {
		who = []string{s.Sender}
	}
	perm := p.permission(actor, subject{capability: s.Capability, profile: s.Profile, requesters: who})
	perm.Edit = false
	if perm.Decide && !perm.Approve {
		perm.Reason = fmt.Sprintf("Separation of duties (%s): you sent this call, so someone else must review it.", s.Profile)
	}
	return perm
}

// reviewCheck is the policy check of a post-execution review verdict.
func (p *Policy) reviewCheck(actor aais.Actor, s ReviewSubject, accepted bool, justification string) *failure {
	p = p.current()
	perm := p.ReviewPermission(actor, s)
	if !perm.Decide || !perm.Approve {
		return &failure{http.StatusForbidden, asc.PermissionDenied, perm.Reason}
	}
	if accepted && perm.JustificationRequired && strings.TrimSpace(justification) == "" {
		return &failure{http.StatusUnprocessableEntity, asc.InvalidRequest,
			fmt.Sprintf("Profile %s requires a justification for accepting a review.", perm.Profile)}
	}
	return nil
}

// Justification returns the justification a decision carries ("" when
// none), or an error when the extension is not a string of 1..2000
// characters.
func Justification(d *aais.Decision) (string, error) {
	raw, ok := d.Extensions[JustificationExtension]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("the %s extension must be a string", JustificationExtension)
	}
	s = strings.TrimSpace(s)
	if n := utf8.RuneCountInString(s); n > MaxJustification {
		return "", fmt.Errorf("the justification is %d characters long; at most %d are allowed", n, MaxJustification)
	}
	return s, nil
}
