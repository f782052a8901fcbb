package gateway

import (
	"slices"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway/handler"
)

func TestQuorumOf(t *testing.T) {
	rules := []QuorumRule{
		{Capabilities: []string{"billing.*"}, Quorum: aais.Quorum{ApprovalsRequired: 2, FromRoles: []string{"finance"}}},
		{Profiles: []string{"MIFID-II"}, Quorum: aais.Quorum{ApprovalsRequired: 3, FromRoles: []string{"security", "finance"}, Deny: aais.DenyQuorum}},
		{Capabilities: []string{"ops.*"}, Quorum: aais.Quorum{ApprovalsRequired: 2, Deny: aais.DenyQuorum}},
	}
	g := &Gateway{o: Options{Quorums: rules}}
	tests := []struct {
		name, capability, profile string
		descriptor                int
		want                      aais.Quorum
	}{
		{"nothing matches", "demo.echo", "", 0, aais.Quorum{ApprovalsRequired: 1}},
		{"the descriptor alone", "demo.echo", "", 3, aais.Quorum{ApprovalsRequired: 3}},
		{"one rule", "billing.pay", "", 0, aais.Quorum{ApprovalsRequired: 2, FromRoles: []string{"finance"}}},
		{"the descriptor asks more", "billing.pay", "", 4, aais.Quorum{ApprovalsRequired: 4, FromRoles: []string{"finance"}}},
		{"two rules: the larger, roles merged, deny any wins", "billing.pay", "MIFID-II", 0,
			aais.Quorum{ApprovalsRequired: 3, FromRoles: []string{"finance", "security"}}},
		{"every matching rule counts denials", "ops.restart", "", 0, aais.Quorum{ApprovalsRequired: 2, Deny: aais.DenyQuorum}},
		{"a profile rule", "shell.exec", "MIFID-II", 0, aais.Quorum{ApprovalsRequired: 3, FromRoles: []string{"security", "finance"}, Deny: aais.DenyQuorum}},
	}
	for _, tc := range tests {
		got := g.quorumOf(tc.capability, tc.profile, handler.Descriptor{RequiredApprovals: tc.descriptor})
		if got.ApprovalsRequired != tc.want.ApprovalsRequired || got.Deny != tc.want.Deny || !slices.Equal(got.FromRoles, tc.want.FromRoles) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if got.Multi() != tc.want.Multi() {
			t.Errorf("%s: Multi %v", tc.name, got.Multi())
		}
	}
	if err := checkQuorums([]QuorumRule{{Quorum: aais.Quorum{ApprovalsRequired: 0}}}); err == nil {
		t.Error("a rule of 0 approvals accepted")
	}
	if err := checkQuorums([]QuorumRule{{Capabilities: []string{"["}, Quorum: aais.Quorum{ApprovalsRequired: 2}}}); err == nil {
		t.Error("a bad pattern accepted")
	}
}
