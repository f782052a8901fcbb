package config

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia/compliance"
)

// QuorumRule makes the calls it matches need several approvals (M-of-N,
// two-person rules):
//
//	quorum:
//	  - capabilities: ["billing.*"]      # patterns; empty: every capability
//	    profiles: [PSD2]                  # compliance profiles; empty: any
//	    approvals_required: 2             # distinct reviewers, 1..20
//	    approvals_from_roles: [finance, security]  # one different reviewer each
//	    deny: any                         # any (default) or quorum
//
// A call needs the largest approvals_required among the rules that match
// it and its handler's required_approvals, every role any matching rule
// names, and denials are counted (deny: quorum) only when every matching
// rule says so; otherwise the first denial denies it.
type QuorumRule struct {
	Capabilities       []string `yaml:"capabilities"`
	Profiles           []string `yaml:"profiles"`
	ApprovalsRequired  int      `yaml:"approvals_required"`
	ApprovalsFromRoles []string `yaml:"approvals_from_roles"`
	Deny               string   `yaml:"deny"`
}

// Quorum is the rule's requirement as package aais takes it.
func (r QuorumRule) Quorum() aais.Quorum {
	return aais.Quorum{ApprovalsRequired: r.ApprovalsRequired, FromRoles: r.ApprovalsFromRoles, Deny: r.Deny}
}

// checkQuorum checks the quorum rules and the handlers' required_approvals.
func (c *Config) checkQuorum() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	profiles := compliance.Default()
	for i, r := range c.Quorum {
		at := fmt.Sprintf("quorum[%d]", i)
		if r.ApprovalsRequired < 1 || r.ApprovalsRequired > aais.MaxApprovalsRequired {
			bad("%s.approvals_required: %d is not between 1 and %d", at, r.ApprovalsRequired, aais.MaxApprovalsRequired)
		}
		if len(r.ApprovalsFromRoles) > r.ApprovalsRequired {
			bad("%s.approvals_from_roles: %d roles need %d distinct approvers, more than approvals_required %d",
				at, len(r.ApprovalsFromRoles), len(r.ApprovalsFromRoles), r.ApprovalsRequired)
		}
		for j, role := range r.ApprovalsFromRoles {
			if _, ok := c.Roles[role]; !ok {
				bad("%s.approvals_from_roles: unknown role %q (define it under roles)", at, role)
			}
			if slices.Contains(r.ApprovalsFromRoles[:j], role) {
				bad("%s.approvals_from_roles: %q appears twice", at, role)
			}
		}
		if r.Deny != "" && r.Deny != aais.DenyAny && r.Deny != aais.DenyQuorum {
			bad("%s.deny: %q is not %s or %s", at, r.Deny, aais.DenyAny, aais.DenyQuorum)
		}
		for _, p := range r.Capabilities {
			if _, err := path.Match(p, ""); err != nil || strings.TrimSpace(p) == "" {
				bad("%s.capabilities: %q is not a capability pattern", at, p)
			}
		}
		for _, p := range r.Profiles {
			if _, ok := profiles.Get(p); !ok {
				bad("%s.profiles: unknown compliance profile %q (custos profile list)", at, p)
			}
		}
	}
	names := make([]string, 0, len(c.Handlers))
	for name := range c.Handlers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if n := c.Handlers[name].RequiredApprovals; n < 0 || n > aais.MaxApprovalsRequired {
			bad("handlers.%s.required_approvals: %d is not between 0 and %d", name, n, aais.MaxApprovalsRequired)
		}
	}
	return errs
}
