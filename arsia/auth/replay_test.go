package auth_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/auth/replaytest"
)

func TestMemoryReplayCacheContract(t *testing.T) {
	replaytest.Run(t, func(t *testing.T, now func() time.Time) auth.ReplayCache {
		return auth.NewMemoryReplayCache(&auth.MemoryReplayOptions{Now: now})
	})
}

func TestMemoryReplayCacheCapacity(t *testing.T) {
	ctx := context.Background()
	clock := replaytest.NewClock(time.Unix(1775995200, 0))
	c := auth.NewMemoryReplayCache(&auth.MemoryReplayOptions{Capacity: 3, Now: clock.Now})
	for i := range 3 {
		if seen, err := c.Seen(ctx, fmt.Sprint("j", i), clock.Now().Add(time.Duration(i+1)*time.Minute)); seen || err != nil {
			t.Fatalf("j%d: %v %v", i, seen, err)
		}
	}
	// Full of unexpired entries: refuse, do not forget one.
	if _, err := c.Seen(ctx, "j3", clock.Now().Add(time.Minute)); !errors.Is(err, auth.ErrReplayCacheFull) {
		t.Fatalf("full cache: %v", err)
	}
	// A known jti is still reported when full.
	if seen, err := c.Seen(ctx, "j0", clock.Now().Add(time.Minute)); !seen || err != nil {
		t.Fatalf("j0 when full: %v %v", seen, err)
	}
	// Once the first entry expires there is room again, and only that
	// entry is forgotten.
	clock.Advance(time.Minute + time.Second)
	if seen, err := c.Seen(ctx, "j3", clock.Now().Add(time.Minute)); seen || err != nil {
		t.Fatalf("after expiry: %v %v", seen, err)
	}
	if c.Len() != 3 {
		t.Errorf("Len %d, want 3", c.Len())
	}
	for jti, want := range map[string]bool{"j1": true, "j2": true, "j3": true} {
		if seen, err := c.Seen(ctx, jti, clock.Now().Add(time.Minute)); seen != want || err != nil {
			t.Errorf("%s: %v %v", jti, seen, err)
		}
	}
	// An until already past is not stored and does not need room.
	if seen, err := c.Seen(ctx, "old", clock.Now().Add(-time.Second)); seen || err != nil {
		t.Errorf("past until: %v %v", seen, err)
	}
	if _, err := c.Seen(ctx, "", clock.Now()); !errors.Is(err, auth.ErrReplayCache) {
		t.Errorf("empty jti: %v", err)
	}
}

func TestMemoryReplayCacheDefaults(t *testing.T) {
	c := auth.NewMemoryReplayCache(nil)
	seen, err := c.Seen(context.Background(), "x", time.Now().Add(time.Minute))
	if seen || err != nil || c.Len() != 1 {
		t.Fatalf("%v %v %d", seen, err, c.Len())
	}
}

// TestMemoryReplayCacheManyExpiries exercises the expiry heap with
// interleaved deadlines.
func TestMemoryReplayCacheManyExpiries(t *testing.T) {
	ctx := context.Background()
	clock := replaytest.NewClock(time.Unix(0, 0))
	c := auth.NewMemoryReplayCache(&auth.MemoryReplayOptions{Capacity: 1000, Now: clock.Now})
	for i := range 1000 {
		until := clock.Now().Add(time.Duration((i*7919)%1000+1) * time.Second)
		if _, err := c.Seen(ctx, fmt.Sprint(i), until); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(500 * time.Second)
	if _, err := c.Seen(ctx, "trigger", clock.Now()); err != nil {
		t.Fatal(err)
	}
	// Entries with until ≥ 500 s remain: 501 of them (500..1000), plus trigger.
	if got := c.Len(); got != 502 {
		t.Errorf("Len after expiry %d, want 502", got)
	}
}
