package aais_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/memstore"
)

func TestResolveAtDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome aais.Outcome
		d       aais.Deadline
		want    aais.Outcome
		message string
		invalid bool
	}{
		{name: "expire", outcome: aais.OutcomeExpired, d: aais.Deadline{Policy: "p"}, want: aais.OutcomeExpired},
		{name: "deny", outcome: aais.OutcomeDenied, d: aais.Deadline{Policy: "p", Reason: "nobody decided in 2h"},
			want: aais.OutcomeDenied, message: "Denied at the deadline: nobody decided in 2h"},
		{name: "deny without reason", outcome: aais.OutcomeDenied, d: aais.Deadline{Policy: "p"}, invalid: true},
		{name: "approve", outcome: aais.OutcomeApproved, d: aais.Deadline{Policy: "p", Reason: "x"}, invalid: true},
		{name: "cancel", outcome: aais.OutcomeCancelled, d: aais.Deadline{Policy: "p"}, invalid: true},
		{name: "no policy", outcome: aais.OutcomeExpired, invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := readFixture(t, "shell-approval.json").Request
			clock := aaistest.NewClock(time.Date(2026, 8, 30, 18, 1, 0, 0, time.UTC))
			a, err := aais.NewAuthority(memstore.New(), &aais.AuthorityOptions{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if _, _, err := a.Create(ctx, req); err != nil {
				t.Fatal(err)
			}
			m, resolved, err := a.ResolveAtDeadline(ctx, req.ID, tc.outcome, tc.d)
			if tc.invalid {
				if !errors.Is(err, aais.ErrInvalid) || m != nil || resolved {
					t.Fatalf("= %v, %v, %v; want ErrInvalid", m, resolved, err)
				}
				if st, _ := a.State(ctx, req.ID); !st.Pending() {
					t.Fatal("a refused deadline resolved the request")
				}
				return
			}
			if err != nil || !resolved || m.Resolution.Outcome != tc.want {
				t.Fatalf("= %+v, %v, %v", m, resolved, err)
			}
			if tc.message != "" && m.Resolution.Message != tc.message {
				t.Fatalf("message = %q, want %q", m.Resolution.Message, tc.message)
			}
			var got aais.Deadline
			if err := json.Unmarshal(m.Resolution.Extensions[aais.DeadlineExtension], &got); err != nil || got != tc.d {
				t.Fatalf("extension = %+v, %v", got, err)
			}
			// A second call, and a reviewer's decision after it, change
			// nothing.
			again, resolved, err := a.ResolveAtDeadline(ctx, req.ID, aais.OutcomeExpired, aais.Deadline{Policy: "q"})
			if err != nil || resolved || again.Resolution.ID != m.Resolution.ID {
				t.Fatalf("again = %+v, %v, %v", again, resolved, err)
			}
			dec := readFixture(t, "approve-once.json").Decision
			late, err := a.Decide(ctx, dec, aais.Actor{}, nil)
			if err != nil || late.Resolution.Outcome != aais.OutcomeConflict {
				t.Fatalf("late decision = %+v, %v; want conflict", late, err)
			}
		})
	}
	a, _ := aais.NewAuthority(memstore.New(), nil)
	if _, _, err := a.ResolveAtDeadline(t.Context(), "apr_nope", aais.OutcomeExpired, aais.Deadline{Policy: "p"}); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("unknown request: %v", err)
	}
}
