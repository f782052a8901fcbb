package auth

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// ReplayCache remembers the jti of every accepted DPoP proof for as long
// as the proof could still be accepted.
//
// Seen atomically records jti as used through until (inclusive) and
// reports whether it was already recorded and not yet expired: of any
// number of concurrent calls with one jti, exactly one sees false. A jti
// whose until is already past need not be stored. When the jti cannot be
// recorded (backend down, ctx done, no room) Seen returns an error and the
// proof is refused: forgetting a jti would allow the replay the cache
// exists to stop.
//
// A shared implementation (one table for every gateway instance, keyed by
// jti with an expiry column and an insert that does nothing on conflict)
// makes replay protection hold across instances; MemoryReplayCache holds
// for one process only. Implementations can be checked with package
// arsia/auth/replaytest.
type ReplayCache interface {
	Seen(ctx context.Context, jti string, until time.Time) (bool, error)
}

// DefaultReplayCapacity is the MemoryReplayCache capacity used when none
// is set. A proof is remembered for at most 2×skew (10 minutes with the
// default skew), so it sustains about 430 new proofs a second; size it as
// peak proofs per second × 600.
const DefaultReplayCapacity = 1 << 18

// MemoryReplayOptions configure a MemoryReplayCache. A nil
// *MemoryReplayOptions means the defaults.
type MemoryReplayOptions struct {
	// Capacity is the most unexpired jtis kept; zero means
	// DefaultReplayCapacity.
	Capacity int
	// Now is the clock that expires entries; nil means time.Now. It
	// should agree with the Now given to ValidateDPoP.
	Now func() time.Time
}

// MemoryReplayCache is an in-process ReplayCache bounded in size. Expired
// entries are dropped as time passes; when the cache is full of unexpired
// entries, Seen fails with ErrReplayCacheFull instead of evicting one, so
// a flood of proofs makes the receiver refuse requests (fail closed)
// rather than accept replays. It is safe for concurrent use.
type MemoryReplayCache struct {
	mu       sync.Mutex
	now      func() time.Time
	capacity int
	entries  map[string]time.Time
	expiry   expiryHeap
}

// NewMemoryReplayCache returns an empty cache.
func NewMemoryReplayCache(opts *MemoryReplayOptions) *MemoryReplayCache {
	c := &MemoryReplayCache{now: time.Now, capacity: DefaultReplayCapacity, entries: map[string]time.Time{}}
	if opts != nil {
		if opts.Capacity > 0 {
			c.capacity = opts.Capacity
		}
		if opts.Now != nil {
			c.now = opts.Now
		}
	}
	return c
}

// Seen implements ReplayCache.
func (c *MemoryReplayCache) Seen(ctx context.Context, jti string, until time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if jti == "" {
		return false, fail(ErrReplayCache, "empty jti")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.expire(now)
	if _, ok := c.entries[jti]; ok {
		return true, nil
	}
	if until.Before(now) {
		return false, nil // already expired: nothing left to protect
	}
	if len(c.entries) >= c.capacity {
		return false, fail(ErrReplayCacheFull, "%d unexpired jtis", len(c.entries))
	}
	c.entries[jti] = until
	heap.Push(&c.expiry, expiryEntry{jti: jti, until: until})
	return false, nil
}

// Contains implements ReplayLookup: it reports whether key is recorded
// and unexpired, recording nothing.
func (c *MemoryReplayCache) Contains(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.entries[key]
	return ok && !until.Before(c.now()), nil
}

// Len returns the number of entries held, expired ones included until the
// next Seen drops them.
func (c *MemoryReplayCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// expire drops the entries whose until is before now.
func (c *MemoryReplayCache) expire(now time.Time) {
	for len(c.expiry) > 0 && c.expiry[0].until.Before(now) {
		e := heap.Pop(&c.expiry).(expiryEntry)
		if until, ok := c.entries[e.jti]; ok && until.Equal(e.until) {
			delete(c.entries, e.jti)
		}
	}
}

type expiryEntry struct {
	jti   string
	until time.Time
}

// expiryHeap orders entries by expiry, soonest first, so expiring costs
// O(log n) per entry and a full cache is never scanned.
type expiryHeap []expiryEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = expiryEntry{}
	*h = old[:len(old)-1]
	return e
}
