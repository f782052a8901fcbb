package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/store/memstore"
)

// The Decider is the approvals API's decision path: the policy refuses
// what it refuses there, nothing changes, and what it lets through is
// decided by the authority and reported to OnDecision.
func TestDeciderAppliesThePolicy(t *testing.T) {
	s := memstore.New()
	c := aaistest.NewClock(time.Now().UTC())
	a := aaistest.NewAuthority(t, s, c)
	var decided []DecisionRecord
	policy := &Policy{
		Roles:                 map[string]Role{"ops": {Capabilities: []string{"*"}}},
		Grants:                map[string][]string{"alice": {"ops"}, "s-1": {"ops"}},
		SeparationOfDuties:    []string{"EU-AI-ACT-HIGH"},
		JustificationRequired: []string{"EU-AI-ACT-HIGH"},
	}
	d, err := NewDecider(ApprovalsOptions{Authority: a, Policy: policy,
		OnDecision: func(_ context.Context, r DecisionRecord) { decided = append(decided, r) }})
	if err != nil {
		t.Fatal(err)
	}
	ext, _ := json.Marshal(map[string]string{"profile": "EU-AI-ACT-HIGH"})
	r := aaistest.Request(t, c.Now(), "1")
	r.Extensions = aais.Extensions{ExchangeExtension: ext}
	if _, _, err := a.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	just, _ := json.Marshal("checked the ticket")
	cases := []struct {
		name   string
		actor  aais.Actor
		ext    aais.Extensions
		status int
		code   asc.Code
	}{
		{"no reviewer", aais.Actor{}, nil, 401, asc.AuthenticationRequired},
		{"no role", aais.Actor{ID: "bob", Type: aais.ActorHuman}, nil, 403, asc.PermissionDenied},
		{"requester", aais.Actor{ID: "s-1", Type: aais.ActorHuman}, aais.Extensions{JustificationExtension: just}, 403, asc.PermissionDenied},
		{"no justification", aais.Actor{ID: "alice", Type: aais.ActorHuman}, nil, 422, asc.InvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dec := aaistest.Decision(t, r, aais.Approve, "", c.Now())
			dec.Extensions = tc.ext
			_, err := d.Decide(t.Context(), dec, tc.actor)
			var de *DecisionError
			if !errors.As(err, &de) || de.Status != tc.status || de.Code != tc.code {
				t.Fatalf("Decide: %v, want %d %s", err, tc.status, tc.code.Name())
			}
			if st, _ := a.State(t.Context(), r.ID); !st.Pending() {
				t.Fatal("a refused decision resolved the request")
			}
		})
	}
	if len(decided) != 0 {
		t.Fatalf("OnDecision called for refused decisions: %v", decided)
	}
	dec := aaistest.Decision(t, r, aais.Approve, "", c.Now())
	dec.Extensions = aais.Extensions{JustificationExtension: just}
	alice := aais.Actor{ID: "alice", Type: aais.ActorHuman, AuthenticatedBy: "slack"}
	receipt, err := d.Decide(t.Context(), dec, alice)
	if err != nil || receipt.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("Decide: %v %v", receipt, err)
	}
	who, words, ok := aais.DecidedBy(receipt.Resolution)
	if !ok || who != alice || words != "checked the ticket" {
		t.Fatalf("receipt names %v %q", who, words)
	}
	if len(decided) != 1 || decided[0].Actor != alice {
		t.Fatalf("OnDecision: %v", decided)
	}
	if p := d.Permission(aais.Actor{ID: "s-1"}, r); p.Approve || !p.JustificationRequired {
		t.Fatalf("Permission: %+v", p)
	}
}
