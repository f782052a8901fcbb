package aais_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/memstore"
)

var (
	alice = aais.Actor{ID: "alice", Type: aais.ActorHuman, AuthenticatedBy: "api_token"}
	bob   = aais.Actor{ID: "bob", Type: aais.ActorHuman, AuthenticatedBy: "api_token"}
)

// supersedeRequest is a request with an exchange-like extension and a
// session choice pinned to its action digest.
func supersedeRequest(t *testing.T, now time.Time, id string) *aais.Request {
	t.Helper()
	act := json.RawMessage(`{"kind":"tool.call","name":"billing.refund","summary":"Refund ACME",` +
		`"arguments":{"amount":"100.00","customer":"ACME"},"resource":"https://billing.example","effects":["Moves money"]}`)
	a, err := aais.NewAction(act)
	if err != nil {
		t.Fatal(err)
	}
	d, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dj, _ := json.Marshal(d)
	r, err := aais.NewRequest(aais.RequestParams{
		ID: id, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Origin: aais.Origin{Harness: "custos", SessionID: "agent:acme", AgentID: "agent:acme"},
		Action: a,
		Risk:   aais.Risk{Level: aais.RiskHigh, Reasons: []string{"Moves money"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
			{Decision: aais.Approve, Scope: aais.ScopeSession, Label: "Allow this exact call for the session",
				ScopeConstraints: aais.Constraints{"action_digest": dj}},
		},
		Extensions: aais.Extensions{"custos.dev/exchange": json.RawMessage(`{"exchange_id":"exc_1","sender":"agent:acme"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func supersedeFixture(t *testing.T) (*aais.Authority, *memstore.Store, *aaistest.Clock, *aais.Request) {
	t.Helper()
	s := memstore.New()
	c := aaistest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	a := aaistest.NewAuthority(t, s, c)
	r := supersedeRequest(t, c.Now(), "apr_1")
	if _, _, err := a.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return a, s, c, r
}

func TestSupersede(t *testing.T) {
	a, s, c, orig := supersedeFixture(t)
	ctx := t.Context()
	c.Advance(time.Second)
	edited := json.RawMessage(`{ "customer": "ACME", "amount": "10.00" }`)
	cancelled, created, err := a.Supersede(ctx, orig.ID, edited, alice, "  Only the disputed part.  ")
	if err != nil {
		t.Fatal(err)
	}

	// The new request.
	nr := created.Request
	if created.Type != aais.TypeRequested || nr.ID != "apr_1-e1" {
		t.Fatalf("created: %s %s", created.Type, nr.ID)
	}
	if nr.ActionDigest == orig.ActionDigest {
		t.Fatal("the edited request kept the original digest")
	}
	if d, err := nr.Action.Digest(); err != nil || d != nr.ActionDigest {
		t.Fatalf("digest %s, recomputed %s %v", nr.ActionDigest, d, err)
	}
	var args map[string]string
	if err := json.Unmarshal(nr.Action.Arguments(), &args); err != nil || args["amount"] != "10.00" || args["customer"] != "ACME" {
		t.Fatalf("edited arguments: %s", nr.Action.Arguments())
	}
	if nr.Action.Kind() != orig.Action.Kind() || nr.Action.Name() != orig.Action.Name() || nr.Action.Summary() != orig.Action.Summary() ||
		nr.Action.Resource() != orig.Action.Resource() || len(nr.Action.Effects()) != 1 {
		t.Errorf("the action changed beyond its arguments: %s", nr.Action.Raw())
	}
	if nr.Origin != orig.Origin || !nr.ExpiresAt.Time().Equal(orig.ExpiresAt.Time()) || !nr.CreatedAt.Time().Equal(c.Now()) {
		t.Errorf("origin/expiry/creation: %+v %s %s", nr.Origin, nr.ExpiresAt, nr.CreatedAt)
	}
	if len(nr.Choices) != 3 {
		t.Fatalf("choices: %+v", nr.Choices)
	}
	var pinned string
	if err := json.Unmarshal(nr.Choices[2].ScopeConstraints["action_digest"], &pinned); err != nil || pinned != nr.ActionDigest {
		t.Errorf("the session choice pins %s, want the new digest %s", pinned, nr.ActionDigest)
	}
	if string(nr.Extensions["custos.dev/exchange"]) != string(orig.Extensions["custos.dev/exchange"]) {
		t.Errorf("the exchange extension did not follow: %s", nr.Extensions["custos.dev/exchange"])
	}
	ref, ok := aais.Supersedes(nr)
	if !ok || ref.RequestID != orig.ID || ref.RootRequestID != orig.ID || ref.ProposedBy != alice ||
		ref.Justification != "Only the disputed part." || len(ref.EarlierProposers) != 0 {
		t.Errorf("supersedes: %+v %v", ref, ok)
	}

	// The original: cancelled, linked.
	res := cancelled.Resolution
	if cancelled.Type != aais.TypeResolved || res.RequestID != orig.ID || res.Outcome != aais.OutcomeCancelled {
		t.Fatalf("cancelled: %+v", res)
	}
	link, ok := aais.SupersededBy(res)
	if !ok || link.RequestID != nr.ID || link.Actor != alice || link.Justification != "Only the disputed part." {
		t.Errorf("superseded_by: %+v %v", link, ok)
	}
	if who, _, ok := aais.DecidedBy(res); !ok || who != alice {
		t.Errorf("decided by: %+v %v", who, ok)
	}
	st, err := s.RequestState(ctx, orig.ID)
	if err != nil || st.Resolution == nil || st.Resolution.Event.ID != cancelled.ID {
		t.Fatalf("stored original: %+v %v", st.Resolution, err)
	}
	if err := a.CheckSupersession(ctx, nr); err != nil {
		t.Errorf("CheckSupersession: %v", err)
	}
	// The log: the new request, then the cancellation.
	page := aaistest.CheckLog(t, s, 3)
	if page.Events[1].Type != aais.TypeRequested || page.Events[2].Type != aais.TypeResolved {
		t.Errorf("log order: %s %s", page.Events[1].Type, page.Events[2].Type)
	}

	// The chain leads to the new request.
	chain, err := a.Chain(ctx, orig.ID)
	if err != nil || len(chain) != 2 || chain[1].Request.Event.Request.ID != nr.ID || !chain[1].Pending() {
		t.Fatalf("chain: %d %v", len(chain), err)
	}

	// The original can no longer be edited; the new one can, by another
	// reviewer, and remembers the first proposer.
	if _, _, err := a.Supersede(ctx, orig.ID, json.RawMessage(`{"amount":"1.00"}`), bob, ""); !errors.Is(err, aais.ErrNotPending) {
		t.Errorf("editing a cancelled request: %v", err)
	}
	_, second, err := a.Supersede(ctx, nr.ID, json.RawMessage(`{"amount":"5.00","customer":"ACME"}`), bob, "")
	if err != nil {
		t.Fatal(err)
	}
	if second.Request.ID != "apr_1-e2" {
		t.Errorf("second edit id %s", second.Request.ID)
	}
	ref2, _ := aais.Supersedes(second.Request)
	if ref2.RequestID != nr.ID || ref2.RootRequestID != orig.ID || ref2.ProposedBy != bob ||
		len(ref2.Proposers()) != 2 || ref2.Proposers()[0] != "alice" {
		t.Errorf("second supersedes: %+v", ref2)
	}
	chain, err = a.Chain(ctx, orig.ID)
	if err != nil || len(chain) != 3 || chain[2].Request.Event.Request.ID != "apr_1-e2" {
		t.Fatalf("chain after two edits: %d %v", len(chain), err)
	}

	// The edited request is an ordinary request: bob approves it.
	d := aaistest.Decision(t, second.Request, aais.Approve, "", c.Now())
	receipt, err := a.Decide(ctx, d, bob, second.Request.Action.Raw())
	if err != nil || receipt.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("approving the edit: %+v %v", receipt, err)
	}
	if chain, err = a.Chain(ctx, orig.ID); err != nil || len(chain) != 3 || chain[2].Pending() {
		t.Fatalf("chain after approval: %d %v", len(chain), err)
	}
}

func TestSupersedeRefusals(t *testing.T) {
	a, s, c, orig := supersedeFixture(t)
	ctx := t.Context()
	for name, args := range map[string]string{
		"identical":       `{"customer":"ACME","amount":"100.00"}`,
		"not an object":   `["amount"]`,
		"a string":        `"x"`,
		"malformed":       `{"amount":`,
		"duplicate":       `{"amount":"1","amount":"2"}`,
		"empty":           ``,
		"big number":      `{"amount":1e400}`,
		"invalid unicode": "{\"amount\":\"\xff\"}",
	} {
		if _, _, err := a.Supersede(ctx, orig.ID, json.RawMessage(args), alice, ""); !errors.Is(err, aais.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, _, err := a.Supersede(ctx, orig.ID, json.RawMessage(`{"amount":"1"}`), aais.Actor{}, ""); !errors.Is(err, aais.ErrInvalid) {
		t.Errorf("no actor: %v", err)
	}
	long := make([]byte, 2001)
	for i := range long {
		long[i] = 'x'
	}
	if _, _, err := a.Supersede(ctx, orig.ID, json.RawMessage(`{"amount":"1"}`), alice, string(long)); !errors.Is(err, aais.ErrInvalid) {
		t.Errorf("long justification: %v", err)
	}
	if _, _, err := a.Supersede(ctx, "apr_nope", json.RawMessage(`{"amount":"1"}`), alice, ""); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Errorf("unknown: %v", err)
	}
	// Nothing was written.
	aaistest.CheckLog(t, s, 1)

	// A denied request cannot be edited.
	d := aaistest.Decision(t, orig, aais.Deny, "", c.Now())
	if _, err := a.Decide(ctx, d, bob, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Supersede(ctx, orig.ID, json.RawMessage(`{"amount":"1"}`), alice, ""); !errors.Is(err, aais.ErrNotPending) {
		t.Errorf("denied: %v", err)
	}

	// An expired one neither.
	r2 := supersedeRequest(t, c.Now(), "apr_2")
	if _, _, err := a.Create(ctx, r2); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Hour)
	if _, _, err := a.Supersede(ctx, r2.ID, json.RawMessage(`{"amount":"1"}`), alice, ""); !errors.Is(err, aais.ErrNotPending) {
		t.Errorf("expired: %v", err)
	}
}

// TestSupersedeOrphan: a new request whose original is still pending (the
// crash window between the two writes) cannot be approved, is not part of
// the chain, and is withdrawn by the next edit.
func TestSupersedeOrphan(t *testing.T) {
	a, s, c, orig := supersedeFixture(t)
	ctx := t.Context()
	// Simulate the first write alone: a request claiming to supersede
	// the original, under the first edit id.
	ref, _ := json.Marshal(aais.SupersedesRef{RequestID: orig.ID, RootRequestID: orig.ID, ProposedBy: alice})
	act, err := aais.NewAction(json.RawMessage(`{"kind":"tool.call","name":"billing.refund","summary":"Refund ACME","arguments":{"amount":"1.00"}}`))
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := aais.NewRequest(aais.RequestParams{ID: orig.ID + "-e1", CreatedAt: c.Now(), ExpiresAt: orig.ExpiresAt.Time(),
		Origin: orig.Origin, Action: act, Risk: orig.Risk, Choices: orig.Choices[:2],
		Extensions: aais.Extensions{aais.SupersedesExtension: ref}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckSupersession(ctx, orphan); !errors.Is(err, aais.ErrSupersessionIncomplete) {
		t.Errorf("CheckSupersession on an orphan: %v", err)
	}
	if chain, err := a.Chain(ctx, orig.ID); err != nil || len(chain) != 1 {
		t.Errorf("chain with an orphan: %d %v", len(chain), err)
	}
	_, created, err := a.Supersede(ctx, orig.ID, json.RawMessage(`{"amount":"2.00"}`), bob, "")
	if err != nil {
		t.Fatal(err)
	}
	if created.Request.ID != orig.ID+"-e2" {
		t.Errorf("created %s", created.Request.ID)
	}
	st, err := s.RequestState(ctx, orphan.ID)
	if err != nil || st.Resolution == nil || st.Resolution.Event.Resolution.Outcome != aais.OutcomeCancelled {
		t.Errorf("the orphan was not withdrawn: %+v %v", st.Resolution, err)
	}
	if chain, err := a.Chain(ctx, orig.ID); err != nil || len(chain) != 2 || chain[1].Request.Event.Request.ID != orig.ID+"-e2" {
		t.Errorf("chain: %d %v", len(chain), err)
	}
}

// TestSupersedeRace: concurrent edits and a decision on one request; at
// most one edit wins, and every losing edit leaves no pending request.
func TestSupersedeRace(t *testing.T) {
	a, s, c, orig := supersedeFixture(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	wins := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			args, _ := json.Marshal(map[string]any{"amount": i + 1})
			if _, created, err := a.Supersede(ctx, orig.ID, args, alice, ""); err == nil {
				wins <- created.Request.ID
			} else if !errors.Is(err, aais.ErrNotPending) {
				t.Errorf("edit %d: %v", i, err)
			}
		})
	}
	wg.Go(func() {
		d := aaistest.Decision(t, orig, aais.Deny, "", c.Now())
		if _, err := a.Decide(ctx, d, bob, nil); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	close(wins)
	var won []string
	for id := range wins {
		won = append(won, id)
	}
	if len(won) > 1 {
		t.Fatalf("%d edits won: %v", len(won), won)
	}
	pending, _, err := s.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != len(won) || (len(won) == 1 && pending[0].Event.Request.ID != won[0]) {
		t.Errorf("pending after the race: %d, winners %v", len(pending), won)
	}
}
