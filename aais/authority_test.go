package aais_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/memstore"
)

func readFixture(t *testing.T, name string) *aais.Message {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := aais.Parse(b)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return m
}

// TestAuthorityFixtures runs the published request and decision through an
// Authority: the decision arrives before expires_at and is approved.
func TestAuthorityFixtures(t *testing.T) {
	req := readFixture(t, "shell-approval.json").Request
	dec := readFixture(t, "approve-once.json").Decision
	clock := aaistest.NewClock(time.Date(2026, 8, 30, 18, 1, 0, 0, time.UTC))
	a, err := aais.NewAuthority(memstore.New(), &aais.AuthorityOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ev, created, err := a.Create(ctx, req)
	if err != nil || !created || ev.Sequence != 1 || ev.Stream != aais.DefaultStream {
		t.Fatalf("Create = seq %v, created %v, %v", ev, created, err)
	}
	m, err := a.Decide(ctx, dec, aais.Actor{}, req.Action.Raw())
	if err != nil {
		t.Fatal(err)
	}
	r := m.Resolution
	if r.Outcome != aais.OutcomeApproved || r.EffectiveScope != aais.ScopeOnce || r.DecisionID != "dec_001" || m.Sequence != 2 {
		t.Fatalf("receipt = %+v (sequence %d)", r, m.Sequence)
	}
	// With no authenticated actor passed, the body's actor stands, and a
	// replay of the same body is identical.
	again, err := a.Decide(ctx, dec, aais.Actor{}, nil)
	if err != nil || again.ID != m.ID || again.Resolution.ID != r.ID {
		t.Fatalf("replay = %+v, %v", again, err)
	}
	// The same body from another authenticated actor is another decision.
	other, err := a.Decide(ctx, dec, aaistest.Actor, nil)
	if err != nil || other.Resolution.Outcome != aais.OutcomeConflict {
		t.Fatalf("other actor = %+v, %v; want conflict", other, err)
	}
}

func TestAuthorityFixtureExpired(t *testing.T) {
	req := readFixture(t, "shell-approval.json").Request
	dec := readFixture(t, "approve-once.json").Decision
	clock := aaistest.NewClock(time.Date(2026, 8, 30, 18, 10, 0, 0, time.UTC)) // == expires_at
	a, err := aais.NewAuthority(memstore.New(), &aais.AuthorityOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Create(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	m, err := a.Decide(t.Context(), dec, aais.Actor{}, nil)
	if err != nil || m.Resolution.Outcome != aais.OutcomeExpired || m.Resolution.EffectiveScope != "" {
		t.Fatalf("decision at expires_at = %+v, %v; want expired", m, err)
	}
}

func TestNewAuthorityRefusesNilStore(t *testing.T) {
	if _, err := aais.NewAuthority(nil, nil); !errors.Is(err, aais.ErrBuild) {
		t.Fatalf("err = %v, want ErrBuild", err)
	}
}

func TestDecideRefusesInvalidDecision(t *testing.T) {
	a, err := aais.NewAuthority(memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dec := readFixture(t, "approve-once.json").Decision
	dec.ActionDigest = "sha256:nothex"
	if _, err := a.Decide(t.Context(), dec, aais.Actor{}, nil); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}

// faultyStore returns records without messages, as a corrupted backend
// might; the Authority must refuse them instead of panicking.
type faultyStore struct{}

func (faultyStore) CreateRequestIfAbsent(context.Context, aais.RequestRecord) (aais.RequestRecord, bool, error) {
	return aais.RequestRecord{}, true, nil
}
func (faultyStore) RequestState(context.Context, string) (aais.RequestState, error) {
	return aais.RequestState{Resolution: &aais.ResolutionRecord{}}, nil
}
func (faultyStore) ResolveIfPending(context.Context, aais.ResolutionRecord) (aais.ResolutionRecord, bool, error) {
	return aais.ResolutionRecord{}, false, nil
}
func (faultyStore) Pending(context.Context) ([]aais.RequestRecord, uint64, error) {
	return []aais.RequestRecord{{}}, 0, nil
}
func (faultyStore) EventsAfter(context.Context, uint64, int) (aais.EventPage, error) {
	return aais.EventPage{}, nil
}
func (faultyStore) Rules(context.Context) (aais.RuleSet, error) {
	return aais.RuleSet{nil, &aais.Rule{}}, nil
}
func (faultyStore) RevokeRule(context.Context, string, time.Time, aais.Actor) (*aais.Rule, bool, error) {
	return nil, true, nil
}

func TestAuthorityFailsClosedOnFaultyStore(t *testing.T) {
	a, err := aais.NewAuthority(faultyStore{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	dec := readFixture(t, "approve-once.json").Decision
	if m, err := a.Decide(ctx, dec, aaistest.Actor, nil); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("Decide = %v, %v; want ErrInvalid", m, err)
	}
	if _, err := a.Snapshot(ctx); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("Snapshot err = %v, want ErrInvalid", err)
	}
	if _, err := a.ExpireOverdue(ctx); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("ExpireOverdue err = %v, want ErrInvalid", err)
	}
	if _, err := a.CancelOwned(ctx, aais.Owner{SessionID: "s"}); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("CancelOwned err = %v, want ErrInvalid", err)
	}
	if _, _, err := a.Create(ctx, readFixture(t, "shell-approval.json").Request); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("Create err = %v, want ErrInvalid", err)
	}
}

// TestReceiptNamesWhoDecided: the store keeps receipts only, so a receipt
// resolved by a decision carries the authenticated actor and the
// justification; one resolved by expiry carries none.
func TestReceiptNamesWhoDecided(t *testing.T) {
	ctx := t.Context()
	clock := aaistest.NewClock(time.Date(2026, 8, 30, 18, 0, 0, 0, time.UTC))
	a := aaistest.NewAuthority(t, memstore.New(), clock)
	for _, tc := range []struct {
		name, justification string
		verdict             aais.Verdict
	}{
		{"approved with words", "checked the invoice", aais.Approve},
		{"denied without", "", aais.Deny},
	} {
		req := aaistest.Request(t, clock.Now(), tc.name[:4])
		if _, _, err := a.Create(ctx, req); err != nil {
			t.Fatal(err)
		}
		d := aaistest.Decision(t, req, tc.verdict, "dec_"+tc.name[:4], clock.Now())
		d.Actor = aais.Actor{ID: "claimed-in-body", Type: aais.ActorHuman}
		if tc.justification != "" {
			d.Extensions = aais.Extensions{aais.JustificationExtension: []byte(`"` + tc.justification + `"`)}
		}
		m, err := a.Decide(ctx, d, aaistest.Actor, nil)
		if err != nil {
			t.Fatal(err)
		}
		actor, words, ok := aais.DecidedBy(m.Resolution)
		if !ok || actor != aaistest.Actor || words != tc.justification {
			t.Errorf("%s: DecidedBy = %+v %q %v, want %+v %q", tc.name, actor, words, ok, aaistest.Actor, tc.justification)
		}
	}
	req := aaistest.Request(t, clock.Now(), "expi")
	if _, _, err := a.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	m, err := a.Expire(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := aais.DecidedBy(m.Resolution); ok {
		t.Errorf("an expiry names a decider: %s", m.Resolution.Extensions)
	}
}
