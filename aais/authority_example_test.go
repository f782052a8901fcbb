package aais_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/store/memstore"
)

// An authority records a request, then turns the reviewer's decision into
// the receipt that authorizes exactly that action once.
func ExampleAuthority_Decide() {
	now := time.Date(2026, 8, 30, 18, 0, 0, 0, time.UTC)
	authority, err := aais.NewAuthority(memstore.New(), &aais.AuthorityOptions{
		Now: func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	action := json.RawMessage(`{"kind":"process.exec","name":"shell.exec","summary":"Run the syntax check","arguments":{"command":"node --check script.js"}}`)
	req, err := aais.NewRequest(aais.RequestParams{
		ID: "apr_1", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute),
		Origin: aais.Origin{Harness: "example", SessionID: "s-1"},
		Action: action,
		Risk:   aais.Risk{Level: aais.RiskMedium, Reasons: []string{"Executes a local process"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if _, _, err := authority.Create(ctx, req); err != nil {
		panic(err)
	}
	reviewer := aais.Actor{ID: "alex", Type: aais.ActorHuman, AuthenticatedBy: "local-session"}
	dec, err := aais.NewDecision(req, aais.DecisionParams{ID: "dec_1", Decision: aais.Approve, Scope: aais.ScopeOnce, Actor: reviewer, DecidedAt: now})
	if err != nil {
		panic(err)
	}
	// Pass the action about to run: a changed action resolves as stale.
	receipt, err := authority.Decide(ctx, dec, reviewer, action)
	if err != nil {
		panic(err)
	}
	fmt.Println(receipt.Sequence, receipt.Resolution.Outcome, receipt.Resolution.EffectiveScope)
	// Output: 2 approved once
}
