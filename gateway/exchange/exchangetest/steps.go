package exchangetest

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/gateway/exchange"
)

// Steps: a step is claimed once until done or its lease lapses, a done
// step never again, keys are checked, and a purge forgets old steps.
func testSteps(t *testing.T, b Backend) {
	s := b.New(t, Config{Instance: "a"})
	ctx := t.Context()
	now, lease := Start, 2*time.Minute
	claim := func(key string, at time.Time, want bool) {
		t.Helper()
		got, err := s.ClaimStep(ctx, key, at, lease)
		if err != nil || got != want {
			t.Fatalf("ClaimStep(%s, +%s) = %v, %v; want %v", key, at.Sub(now), got, err, want)
		}
	}
	claim("apr_1/remind", now, true)
	claim("apr_1/remind", now, false)
	claim("apr_1/remind", now.Add(lease-time.Nanosecond), false)
	claim("apr_1/escalate", now, true) // another step of the same request
	// The claim lapsed (its process stopped before StepDone): claimed again.
	claim("apr_1/remind", now.Add(lease), true)
	if err := s.StepDone(ctx, "apr_1/remind", now.Add(lease)); err != nil {
		t.Fatal(err)
	}
	claim("apr_1/remind", now.Add(100*lease), false)
	for _, key := range []string{"", strings.Repeat("k", exchange.MaxStepKey+1), "bad\x00key"} {
		if _, err := s.ClaimStep(ctx, key, now, lease); !errors.Is(err, exchange.ErrInvalid) {
			t.Fatalf("ClaimStep(%q) = %v, want ErrInvalid", key, err)
		}
		if err := s.StepDone(ctx, key, now); !errors.Is(err, exchange.ErrInvalid) {
			t.Fatalf("StepDone(%q) = %v, want ErrInvalid", key, err)
		}
	}
	n, err := s.PurgeSteps(ctx, now.Add(time.Second))
	if err != nil || n != 1 { // apr_1/escalate; apr_1/remind was claimed again later
		t.Fatalf("PurgeSteps = %d, %v; want 1", n, err)
	}
	claim("apr_1/escalate", now.Add(time.Second), true)
}

// StepsRace: many claims of the same steps, over two handles (two
// processes or replicas): each step has exactly one winner.
func testStepsRace(t *testing.T, b Backend) {
	a := b.New(t, Config{Instance: "a"})
	handles := []exchange.Backend{a, b.Reopen(t, a, Config{Instance: "b"})}
	const steps = 10
	wins := make([]atomic.Int32, steps)
	var wg sync.WaitGroup
	for g := range 8 {
		s := handles[g%2]
		wg.Go(func() {
			for k := range steps {
				i := (k + g) % steps
				ok, err := s.ClaimStep(t.Context(), "apr_"+name(i)+"/remind", Start, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					wins[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for i := range steps {
		if wins[i].Load() != 1 {
			t.Fatalf("step %d: %d winners, want 1", i, wins[i].Load())
		}
	}
}
