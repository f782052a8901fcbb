package main

import (
	"sort"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/config"
)

// quorumRules are the gateway's quorum rules from cfg: the quorum section,
// and a handler's required_approvals (its action descriptor's) as a rule
// for its capability.
func quorumRules(cfg config.Config) []gateway.QuorumRule {
	var out []gateway.QuorumRule
	for _, r := range cfg.Quorum {
		out = append(out, gateway.QuorumRule{Capabilities: r.Capabilities, Profiles: r.Profiles, Quorum: r.Quorum()})
	}
	names := make([]string, 0, len(cfg.Handlers))
	for name := range cfg.Handlers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if n := cfg.Handlers[name].RequiredApprovals; n > 1 {
			out = append(out, gateway.QuorumRule{Capabilities: []string{name}, Quorum: aais.Quorum{ApprovalsRequired: n}})
		}
	}
	return out
}
