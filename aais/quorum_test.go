package aais

import (
	"encoding/json"
	"errors"
	"testing"
)

func v(id string, d Verdict, roles ...string) Vote {
	return Vote{Actor: Actor{ID: id, Type: ActorHuman}, Decision: d, Roles: roles}
}

func TestJudgeQuorum(t *testing.T) {
	two := Quorum{ApprovalsRequired: 2}
	roles := Quorum{ApprovalsRequired: 2, FromRoles: []string{"finance", "security"}}
	denyQ := Quorum{ApprovalsRequired: 2, Deny: DenyQuorum}
	tests := []struct {
		name  string
		q     Quorum
		votes []Vote
		want  Outcome // "" = still pending
	}{
		{"no votes", two, nil, ""},
		{"one of two", two, []Vote{v("a", Approve)}, ""},
		{"two of two", two, []Vote{v("a", Approve), v("b", Approve)}, OutcomeApproved},
		{"the same reviewer twice counts once", two, []Vote{v("a", Approve), v("a", Approve)}, ""},
		{"a vote without an actor counts nothing", two, []Vote{v("a", Approve), v("", Approve)}, ""},
		{"more than needed", two, []Vote{v("a", Approve), v("b", Approve), v("c", Approve)}, OutcomeApproved},
		{"any deny denies", two, []Vote{v("a", Approve), v("b", Deny)}, OutcomeDenied},
		{"a reviewer's first vote counts", two, []Vote{v("a", Approve), v("a", Deny)}, ""},
		{"deny quorum: one deny pends", denyQ, []Vote{v("a", Approve), v("b", Deny)}, ""},
		{"deny quorum: two denies deny", denyQ, []Vote{v("b", Deny), v("c", Deny)}, OutcomeDenied},
		{"deny quorum: approvals still win", denyQ, []Vote{v("b", Deny), v("a", Approve), v("c", Approve)}, OutcomeApproved},
		{"roles: both filled", roles, []Vote{v("a", Approve, "finance"), v("b", Approve, "security")}, OutcomeApproved},
		{"roles: one role twice", roles, []Vote{v("a", Approve, "finance"), v("b", Approve, "finance")}, ""},
		{"roles: one person cannot fill both", roles, []Vote{v("a", Approve, "finance", "security")}, ""},
		{"roles: matching needs reassignment", roles, []Vote{v("a", Approve, "finance", "security"), v("b", Approve, "finance")}, OutcomeApproved},
		{"roles: three approvers, roles filled late", roles, []Vote{v("a", Approve, "finance"), v("b", Approve, "finance"), v("c", Approve, "security")}, OutcomeApproved},
		{"roles: a denial's roles fill nothing", roles, []Vote{v("a", Approve, "finance"), v("b", Approve, "finance")}, ""},
		{"one approval, role required", Quorum{ApprovalsRequired: 1, FromRoles: []string{"security"}}, []Vote{v("a", Approve, "finance")}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, done := judgeQuorum(tc.q, tc.votes)
			if done != (tc.want != "") || got != tc.want {
				t.Fatalf("judgeQuorum = %q, %v; want %q", got, done, tc.want)
			}
		})
	}
}

func TestQuorumOf(t *testing.T) {
	tests := []struct {
		ext   string // "" = absent
		multi bool
		ok    bool
	}{
		{"", false, true},
		{`{"approvals_required":2}`, true, true},
		{`{"approvals_required":1,"from_roles":["security"]}`, true, true},
		{`{"approvals_required":1}`, false, true},
		{`{"approvals_required":2,"deny":"quorum"}`, true, true},
		{`{"approvals_required":0}`, false, false},
		{`{"approvals_required":21}`, false, false},
		{`{"approvals_required":2,"deny":"some"}`, false, false},
		{`{"approvals_required":1,"from_roles":["a","b"]}`, false, false},
		{`{"approvals_required":2,"from_roles":["a","a"]}`, false, false},
		{`{"approvals_required":2,"from_roles":["a b"]}`, false, false},
		{`{"approvals_required":2,"extra":1}`, false, false},
		{`{"approvals_required":"2"}`, false, false},
		{`{"approvals_required":2} {}`, false, false},
		{`[]`, false, false},
	}
	for _, tc := range tests {
		req := &Request{}
		if tc.ext != "" {
			req.Extensions = Extensions{QuorumExtension: json.RawMessage(tc.ext)}
		}
		q, present, err := QuorumOf(req)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: err %v, want ok=%v", tc.ext, err, tc.ok)
			continue
		}
		if err == nil && (present && q.Multi()) != tc.multi {
			t.Errorf("%s: multi %v, want %v", tc.ext, present && q.Multi(), tc.multi)
		}
	}
}

func TestTallyMissing(t *testing.T) {
	tl := Tally{Quorum: Quorum{ApprovalsRequired: 3, FromRoles: []string{"finance", "security"}},
		Approvals: []Vote{v("a", Approve, "finance")}}
	if n, roles := tl.Missing(); n != 2 || len(roles) != 1 || roles[0] != "security" {
		t.Fatalf("Missing = %d %v", n, roles)
	}
}

func FuzzQuorumOf(f *testing.F) {
	for _, s := range []string{`{"approvals_required":2}`, `{"approvals_required":2,"from_roles":["finance","security"],"deny":"quorum"}`, `{}`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, ok, err := QuorumOf(&Request{Extensions: Extensions{QuorumExtension: json.RawMessage(s)}})
		if err != nil {
			return
		}
		if !ok || q.Check() != nil {
			t.Fatalf("accepted %q as %+v (ok %v)", s, q, ok)
		}
	})
}
