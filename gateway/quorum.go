package gateway

import (
	"fmt"
	"path"
	"slices"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway/handler"
)

// QuorumRule makes the calls it matches need several approvals: the calls
// of a capability matching one of Capabilities (path.Match patterns; empty:
// any) under one of Profiles (compliance profiles; empty: any, including
// none). Quorum.ApprovalsRequired distinct reviewers must approve the same
// action digest, among them a different reviewer for each of
// Quorum.FromRoles; Quorum.Deny says whether one denial ends the request
// (aais.DenyAny, the default) or denials are counted too
// (aais.DenyQuorum).
type QuorumRule struct {
	Capabilities []string
	Profiles     []string
	aais.Quorum
}

func (r QuorumRule) matches(capability, profile string) bool {
	if len(r.Profiles) > 0 && !slices.Contains(r.Profiles, profile) {
		return false
	}
	return len(r.Capabilities) == 0 || slices.ContainsFunc(r.Capabilities, func(p string) bool {
		ok, err := path.Match(p, capability)
		return err == nil && ok
	})
}

// checkQuorums checks the rules New is given.
func checkQuorums(rules []QuorumRule) error {
	for i, r := range rules {
		if err := r.Quorum.Check(); err != nil {
			return fmt.Errorf("gateway: quorum rule %d: %w", i, err)
		}
		for _, p := range r.Capabilities {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("gateway: quorum rule %d: capability pattern %q: %w", i, p, err)
			}
		}
	}
	return nil
}

// quorumOf is what a call needs: the largest approvals_required of the
// matching rules and of the descriptor's RequiredApprovals (at least one
// approver per role asked for), every role a matching rule asks for, and
// denials counted (DenyQuorum) only when every matching rule says so.
// Its ApprovalsRequired is 1 and it is not Multi for a call nothing asks
// more of.
func (g *Gateway) quorumOf(capability, profile string, desc handler.Descriptor) aais.Quorum {
	q := aais.Quorum{ApprovalsRequired: max(desc.RequiredApprovals, 1)}
	quorumDeny, matched := true, false
	for _, r := range g.o.Quorums {
		if !r.matches(capability, profile) {
			continue
		}
		matched = true
		q.ApprovalsRequired = max(q.ApprovalsRequired, r.ApprovalsRequired)
		for _, role := range r.FromRoles {
			if !slices.Contains(q.FromRoles, role) {
				q.FromRoles = append(q.FromRoles, role)
			}
		}
		quorumDeny = quorumDeny && r.Deny == aais.DenyQuorum
	}
	q.ApprovalsRequired = min(max(q.ApprovalsRequired, len(q.FromRoles)), aais.MaxApprovalsRequired)
	if matched && quorumDeny {
		q.Deny = aais.DenyQuorum
	}
	return q
}
