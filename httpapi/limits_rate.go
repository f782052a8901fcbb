package httpapi

import (
	"container/list"
	"net/netip"
	"sync"
	"time"
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
	key    netip.Addr
	tokens float64
	last   time.Time
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
		if el := now.Sub(b.last); el > 0 {
			b.tokens = min(a.burst, b.tokens+el.Seconds()*a.rate)
		}
		b.last = now
	} else {
		if len(a.m) >= a.max {
			old := a.lru.Back()
			a.lru.Remove(old)
			delete(a.m, old.Value.(*bucket).key)
		}
		b = &bucket{key: key, tokens: a.burst, last: now}
		a.m[key] = a.lru.PushFront(b)
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / a.rate * float64(time.Second))
}

func (a *addressBuckets) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}
