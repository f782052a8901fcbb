// Package replaytest checks implementations of auth.ReplayCache, so that
// every backend (in memory, PostgreSQL, ...) is held to the same contract
// by the same tests.
package replaytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/internal/manualclock"
)

// Clock is a settable time source shared by a test and the cache under
// test.
type Clock = manualclock.Clock

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return manualclock.New(t) }

// NewCache makes an empty cache whose notion of the current time is
// clock.Now. It is called once per subtest; a backend shared between
// subtests must isolate them (a fresh table or key prefix).
type NewCache func(t *testing.T, clock func() time.Time) auth.ReplayCache

// Run checks the ReplayCache contract:
//
//   - a first Seen reports false and a second one true, until expiry;
//   - different jtis are independent;
//   - an entry is remembered through its until, inclusive, and forgotten
//     after;
//   - a done context is an error;
//   - of concurrent calls with one jti, exactly one reports false;
//   - Contains (auth.ReplayLookup) reports unexpired keys and records none.
func Run(t *testing.T, newCache NewCache) {
	start := time.Date(2026, 4, 12, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()

	t.Run("MarkThenReport", func(t *testing.T) {
		clock := NewClock(start)
		c := newCache(t, clock.Now)
		until := start.Add(time.Minute)
		expectSeen(t, c, ctx, "a", until, false)
		expectSeen(t, c, ctx, "a", until, true)
		expectSeen(t, c, ctx, "b", until, false)
		expectSeen(t, c, ctx, "a", until.Add(time.Hour), true)
	})

	t.Run("Expiry", func(t *testing.T) {
		clock := NewClock(start)
		c := newCache(t, clock.Now)
		until := start.Add(10 * time.Second)
		expectSeen(t, c, ctx, "x", until, false)
		clock.Advance(10 * time.Second) // now == until: still remembered
		expectSeen(t, c, ctx, "x", until, true)
		clock.Advance(time.Second)
		expectSeen(t, c, ctx, "x", start.Add(time.Minute), false)
		expectSeen(t, c, ctx, "x", start.Add(time.Minute), true)
	})

	t.Run("DoneContext", func(t *testing.T) {
		c := newCache(t, NewClock(start).Now)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.Seen(cctx, "y", start.Add(time.Minute)); err == nil {
			t.Fatal("Seen with a cancelled context did not fail")
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		c := newCache(t, NewClock(start).Now)
		const n = 32
		var wg sync.WaitGroup
		var mu sync.Mutex
		fresh := 0
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seen, err := c.Seen(ctx, "same", start.Add(time.Minute))
				if err != nil {
					t.Errorf("goroutine %d: %v", i, err)
					return
				}
				if !seen {
					mu.Lock()
					fresh++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if fresh != 1 {
			t.Fatalf("%d of %d concurrent calls saw the jti as new, want 1", fresh, n)
		}
	})

	t.Run("Contains", func(t *testing.T) {
		clock := NewClock(start)
		c := newCache(t, clock.Now)
		l, ok := c.(auth.ReplayLookup)
		if !ok {
			t.Fatalf("%T does not implement auth.ReplayLookup (Contains)", c)
		}
		contains := func(key string, want bool) {
			t.Helper()
			got, err := l.Contains(ctx, key)
			if err != nil || got != want {
				t.Fatalf("Contains(%q) = %v, %v; want %v", key, got, err, want)
			}
		}
		contains("revoked-token:a", false)
		contains("revoked-token:a", false) // Contains records nothing
		expectSeen(t, c, ctx, "revoked-token:a", start.Add(10*time.Second), false)
		contains("revoked-token:a", true)
		contains("revoked-token:b", false)
		clock.Advance(10 * time.Second)
		contains("revoked-token:a", true)
		clock.Advance(time.Second)
		contains("revoked-token:a", false)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.Contains(cctx, "revoked-token:a"); err == nil {
			t.Fatal("Contains with a cancelled context did not fail")
		}
	})

	t.Run("ManyJTIs", func(t *testing.T) {
		c := newCache(t, NewClock(start).Now)
		for i := range 100 {
			expectSeen(t, c, ctx, fmt.Sprintf("jti-%d", i), start.Add(time.Minute), false)
		}
		for i := range 100 {
			expectSeen(t, c, ctx, fmt.Sprintf("jti-%d", i), start.Add(time.Minute), true)
		}
	})
}

func expectSeen(t *testing.T, c auth.ReplayCache, ctx context.Context, jti string, until time.Time, want bool) {
	t.Helper()
	got, err := c.Seen(ctx, jti, until)
	if err != nil {
		t.Fatalf("Seen(%q): %v", jti, err)
	}
	if got != want {
		t.Fatalf("Seen(%q) = %v, want %v", jti, got, want)
	}
}
