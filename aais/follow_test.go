package aais_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/memstore"
)

func TestFollow(t *testing.T) {
	s := memstore.New()
	c := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, c)
	r1 := aaistest.Request(t, c.Now(), "1")
	if _, _, err := a.Create(t.Context(), r1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan *aais.Message, 16)
	gaps := make(chan aais.EventPage, 4)
	idle := make(chan bool, 64)
	done := make(chan error, 1)
	go func() {
		done <- a.Follow(ctx, 0, false, time.Millisecond, aais.Follower{
			Message: func(m *aais.Message) error { got <- m; return nil },
			Gap:     func(p aais.EventPage) error { gaps <- p; return nil },
			Idle: func(wrote bool) error {
				select {
				case idle <- wrote:
				default:
				}
				return nil
			},
		})
	}()
	if m := <-got; m.Type != aais.TypeSnapshot || len(m.Snapshot.Pending) != 1 || m.Snapshot.AsOfSequence != 1 {
		t.Fatalf("first: %s", m.Type)
	}
	if !<-idle {
		t.Fatal("Idle not told that the snapshot was written")
	}
	if _, err := a.Decide(t.Context(), aaistest.Decision(t, r1, aais.Deny, "", c.Now()), aaistest.Actor, nil); err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.Type != aais.TypeResolved || m.Sequence != 2 {
		t.Fatalf("second: %s %d", m.Type, m.Sequence)
	}
	s.Reset()
	r2 := aaistest.Request(t, c.Now(), "2")
	if _, _, err := a.Create(t.Context(), r2); err != nil {
		t.Fatal(err)
	}
	if p := <-gaps; p.Latest > 1 {
		t.Fatalf("gap page: latest %d", p.Latest)
	}
	if m := <-got; m.Type != aais.TypeSnapshot {
		t.Fatalf("after the gap: %s", m.Type)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow returned %v", err)
	}

	// Resuming starts after the given sequence, without a snapshot; a
	// failing callback ends the stream with its error.
	boom := errors.New("boom")
	err := a.Follow(t.Context(), 0, true, time.Millisecond, aais.Follower{
		Message: func(m *aais.Message) error {
			if m.Type == aais.TypeSnapshot {
				t.Error("a snapshot while resuming")
			}
			return boom
		},
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Follow = %v, want the callback's error", err)
	}
}

func TestExpireOne(t *testing.T) {
	s := memstore.New()
	c := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, c)
	r := aaistest.Request(t, c.Now(), "1") // expires an hour after Start
	other := aaistest.Request(t, c.Now(), "2")
	for _, q := range []*aais.Request{r, other} {
		if _, _, err := a.Create(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := a.Expire(t.Context(), r.ID); m != nil || err != nil {
		t.Fatalf("before the deadline: %v, %v", m, err)
	}
	c.Advance(time.Hour)
	m, err := a.Expire(t.Context(), r.ID)
	if err != nil || m == nil || m.Resolution.Outcome != aais.OutcomeExpired {
		t.Fatalf("at the deadline: %v, %v", m, err)
	}
	if again, err := a.Expire(t.Context(), r.ID); err != nil || aaistest.Wire(t, again) != aaistest.Wire(t, m) {
		t.Fatalf("again: %v", err)
	}
	if st, _ := s.RequestState(t.Context(), other.ID); !st.Pending() {
		t.Fatal("Expire resolved another request")
	}
	if _, err := a.Expire(t.Context(), "apr_none"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("unknown: %v", err)
	}
}
