package aaistest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// Helpers for a store's own tests, beyond the kit.

// Request returns request "apr_<n>", created at now and expiring an hour
// later, running "node --check script-<n>.js" and offering approve once
// and deny once.
func Request(tb testing.TB, now time.Time, n string) *aais.Request {
	tb.Helper()
	r, err := aais.NewRequest(aais.RequestParams{
		ID:        "apr_" + n,
		CreatedAt: now,
		ExpiresAt: now.Add(time.Hour),
		Origin:    aais.Origin{Harness: "aaistest", SessionID: "s-1", RunID: "run-1"},
		Action:    json.RawMessage(action(n)),
		Risk:      aais.Risk{Level: aais.RiskMedium, Reasons: []string{"Executes a local process"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
	})
	if err != nil {
		tb.Fatalf("NewRequest: %v", err)
	}
	return r
}

// Decision returns a once-scoped decision v on r by Actor; id "" generates
// one.
func Decision(tb testing.TB, r *aais.Request, v aais.Verdict, id string, now time.Time) *aais.Decision {
	tb.Helper()
	d, err := aais.NewDecision(r, aais.DecisionParams{ID: id, Decision: v, Scope: aais.ScopeOnce, Actor: Actor, DecidedAt: now})
	if err != nil {
		tb.Fatalf("NewDecision: %v", err)
	}
	return d
}

// NewAuthority returns an Authority on s reading c, on stream "test".
func NewAuthority(tb testing.TB, s aais.Store, c *Clock) *aais.Authority {
	tb.Helper()
	a, err := aais.NewAuthority(s, &aais.AuthorityOptions{Now: c.Now, Stream: "test"})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// Wire returns m's JSON, for comparing messages.
func Wire(tb testing.TB, m *aais.Message) string {
	tb.Helper()
	b, err := aais.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// CheckLog checks that s's log holds exactly events 1..n with no gap, and
// returns it.
func CheckLog(t *testing.T, s aais.Store, n int) aais.EventPage {
	t.Helper()
	p, err := s.EventsAfter(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Gap || p.Latest != uint64(n) || len(p.Events) != n {
		t.Fatalf("log: gap %v latest %d, %d events; want %d", p.Gap, p.Latest, len(p.Events), n)
	}
	for i, e := range p.Events {
		if e.Sequence != uint64(i+1) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
	}
	return p
}
