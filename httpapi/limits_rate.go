package httpapi

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	"github.com/custos-runtime/custos/internal/tokenbucket"
)

// addressBuckets is a token bucket per client address, at most max of
// them: a new address past max forgets the least recently seen one. What
// is forgotten is only how many tokens that address had left; it comes
// back with a full bucket, which is what any fresh address gets, so an
// attacker with many source addresses gains nothing from eviction it
// did not already have, and memory stays bounded.
type addressBuckets struct {
	rate, burst float64
	max         int

	mu  sync.Mutex
	m   map[netip.Addr]*list.Element
	lru list.List // of *bucket, the most recently seen first
}

type bucket struct {
	key netip.Addr
	tokenbucket.Bucket
}

func newAddressBuckets(rate float64, burst, max int) *addressBuckets {
	return &addressBuckets{rate: rate, burst: float64(burst), max: max, m: make(map[netip.Addr]*list.Element, min(max, 1024))}
}

// allow takes a token from key's bucket; when there is none it returns
// how long until there is one.
func (a *addressBuckets) allow(key netip.Addr, now time.Time) (bool, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b *bucket
	if e, ok := a.m[key]; ok {
		a.lru.MoveToFront(e)
		b = e.Value.(*bucket)
	} else {
		if len(a.m) >= a.max {
			old := a.lru.Back()
			a.lru.Remove(old)
			delete(a.m, old.Value.(*bucket).key)
		}
		b = &bucket{key: key, Bucket: tokenbucket.Full(a.burst, now)}
		a.m[key] = a.lru.PushFront(b)
	}
	return b.Take(a.rate, a.burst, now)
}

func (a *addressBuckets) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}
