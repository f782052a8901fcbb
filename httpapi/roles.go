package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// ExchangeExtension is the extension of a gateway's approval request that
// names its exchange and compliance profile (gateway.ExchangeExtension).
const ExchangeExtension = "custos.dev/exchange"

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

// Policy says which reviewer may decide which request. It is enforced in
// one place, before the authority sees a decision, for every binding (HTTP
// and WebSocket). A nil *Policy lets every authenticated reviewer decide
// every request.
type Policy struct {
	// Roles by name. When empty, every reviewer may decide every request
	// (only SeparationOfDuties and JustificationRequired apply).
	Roles map[string]Role
	// Grants are each reviewer id's role names. A reviewer without
	// grants may decide nothing once Roles is not empty.
	Grants map[string][]string
	// SeparationOfDuties are the profiles whose requests the requesting
	// principal (origin agent_id, session_id, the exchange's sender) may
	// not approve.
	SeparationOfDuties []string
	// JustificationRequired are the profiles whose approvals must carry a
	// justification (decision extension JustificationExtension).
	JustificationRequired []string
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
	var ref struct {
		Profile string `json:"profile"`
	}
	if raw, ok := req.Extensions[ExchangeExtension]; ok && json.Unmarshal(raw, &ref) == nil {
		return ref.Profile
	}
	return ""
}

// requesters are the principals that asked for req.
func requesters(req *aais.Request) []string {
	var ref struct {
		Sender string `json:"sender"`
	}
	out := []string{req.Origin.SessionID}
	if req.Origin.AgentID != "" {
		out = append(out, req.Origin.AgentID)
	}
	if raw, ok := req.Extensions[ExchangeExtension]; ok && json.Unmarshal(raw, &ref) == nil && ref.Sender != "" {
		out = append(out, ref.Sender)
	}
	return out
}

// Permission returns what actor may do with req.
func (p *Policy) Permission(actor aais.Actor, req *aais.Request) Permission {
	profile := RequestProfile(req)
	perm := Permission{Decide: true, Approve: true, Edit: true, Profile: profile, Roles: []string{}}
	if p == nil {
		return perm
	}
	perm.Roles = append(perm.Roles, p.Grants[actor.ID]...)
	perm.JustificationRequired = profile != "" && slices.Contains(p.JustificationRequired, profile)
	if len(p.Roles) > 0 && !slices.ContainsFunc(perm.Roles, func(name string) bool {
		r, ok := p.Roles[name]
		return ok && r.covers(req.Action.Name(), profile)
	}) {
		perm.Decide, perm.Approve, perm.Edit = false, false, false
		what := "capability " + req.Action.Name()
		if profile != "" {
			what += " under profile " + profile
		}
		if len(perm.Roles) == 0 {
			perm.Reason = fmt.Sprintf("You hold no role, so you may not decide requests (%s).", what)
		} else {
			perm.Reason = fmt.Sprintf("Your roles (%s) do not cover %s.", strings.Join(perm.Roles, ", "), what)
		}
		return perm
	}
	if profile != "" && slices.Contains(p.SeparationOfDuties, profile) && slices.Contains(requesters(req), actor.ID) {
		perm.Approve = false
		perm.Reason = fmt.Sprintf("Separation of duties (%s): you requested this action, so someone else must approve it.", profile)
	}
	// An edit is a proposal: under separation of duties, whoever proposed
	// the arguments of the chain may not approve them.
	if ref, ok := aais.Supersedes(req); ok && perm.Approve && profile != "" && slices.Contains(p.SeparationOfDuties, profile) &&
		slices.Contains(ref.Proposers(), actor.ID) {
		perm.Approve = false
		perm.Reason = fmt.Sprintf("Separation of duties (%s): you proposed these arguments, so someone else must approve them.", profile)
	}
	return perm
}

// Check is the policy check for bindings outside this package (AG-UI): nil
// when actor may make decision d on req, otherwise an error saying why
// (its ASC code is PERMISSION_DENIED or INVALID_REQUEST).
func (p *Policy) Check(actor aais.Actor, req *aais.Request, d *aais.Decision) error {
	if f := p.check(actor, req, d); f != nil {
		return fmt.Errorf("%s: %s", f.code.Name(), f.detail)
	}
	return nil
}

// check is the policy check every decision passes before the authority
// sees it; nil means the decision may go ahead.
func (p *Policy) check(actor aais.Actor, req *aais.Request, d *aais.Decision) *failure {
	perm := p.Permission(actor, req)
	if !perm.Decide || (d.Decision == aais.Approve && !perm.Approve) {
		return &failure{http.StatusForbidden, asc.PermissionDenied, perm.Reason}
	}
	just, err := Justification(d)
	if err != nil {
		return &failure{http.StatusBadRequest, asc.InvalidRequest, err.Error()}
	}
	if d.Decision == aais.Approve && perm.JustificationRequired && just == "" {
		return &failure{http.StatusUnprocessableEntity, asc.InvalidRequest,
			fmt.Sprintf("Profile %s requires a justification for an approval (decision extension %s).", perm.Profile, JustificationExtension)}
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
