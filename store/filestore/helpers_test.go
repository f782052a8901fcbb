package filestore_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/store/filestore"
)

var (
	t0    = time.Date(2026, 9, 27, 15, 4, 5, 0, time.UTC)
	actor = aais.Actor{ID: "tester", Type: aais.ActorHuman, AuthenticatedBy: "test"}
)

func fixedNow() time.Time { return t0.Add(time.Hour) }

// newRequest builds request id created at t0 expiring in a day.
func newRequest(t testing.TB, id string) *aais.Request {
	t.Helper()
	r, err := aais.NewRequest(aais.RequestParams{
		ID:        id,
		CreatedAt: t0,
		ExpiresAt: t0.Add(24 * time.Hour),
		Origin:    aais.Origin{Harness: "filestore-test", SessionID: "s-1", RunID: "run-1"},
		Action: json.RawMessage(`{"kind":"process.exec","name":"shell.exec","summary":"Check ` + id + `",` +
			`"arguments":{"command":"node --check ` + id + `.js"},"working_directory":"/tmp","effects":["Runs node"]}`),
		Risk: aais.Risk{Level: aais.RiskMedium, Reasons: []string{"Executes a local process"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
			{Decision: aais.Cancel, Scope: aais.ScopeOnce, Label: "Cancel"},
		},
	})
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	return r
}

func newDecision(t testing.TB, r *aais.Request, v aais.Verdict, id string) *aais.Decision {
	t.Helper()
	d, err := aais.NewDecision(r, aais.DecisionParams{ID: id, Decision: v, Scope: aais.ScopeOnce, Actor: actor, DecidedAt: t0.Add(time.Minute)})
	if err != nil {
		t.Fatalf("NewDecision: %v", err)
	}
	return d
}

func authority(t testing.TB, s aais.Store) *aais.Authority {
	t.Helper()
	a, err := aais.NewAuthority(s, &aais.AuthorityOptions{Now: fixedNow, Stream: "test.approvals"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func create(t testing.TB, a *aais.Authority, id string) *aais.Message {
	t.Helper()
	ev, created, err := a.Create(t.Context(), newRequest(t, id))
	if err != nil || !created {
		t.Fatalf("Create(%s) = %v, %v", id, created, err)
	}
	return ev
}

func wantRecovery(t testing.TB, err error) *filestore.RecoveryRequiredError {
	t.Helper()
	var rr *filestore.RecoveryRequiredError
	if !errors.As(err, &rr) || !errors.Is(err, filestore.ErrRecoveryRequired) {
		t.Fatalf("err = %v, want a *RecoveryRequiredError", err)
	}
	return rr
}

func wire(t testing.TB, m *aais.Message) string {
	t.Helper()
	b, err := aais.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
