package gateway

import (
	"math"
	"sync"
	"time"
)

// RateLimit bounds how often one sender may call: a token bucket of Burst
// requests refilled at PerSecond. The zero value means no limit.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// limiter keeps one bucket per sender. Buckets exist only for senders whose
// signature verified, so their number is bounded by the trust store.
type limiter struct {
	rate  RateLimit
	mu    sync.Mutex
	state map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// allow takes a token for sender at now, or says how long until one is
// available.
func (l *limiter) allow(sender string, now time.Time) (bool, time.Duration) {
	if l == nil || l.rate.PerSecond <= 0 || l.rate.Burst <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == nil {
		l.state = map[string]*bucket{}
	}
	b, ok := l.state[sender]
	if !ok {
		b = &bucket{tokens: float64(l.rate.Burst), at: now}
		l.state[sender] = b
	}
	if el := now.Sub(b.at).Seconds(); el > 0 {
		b.tokens = math.Min(float64(l.rate.Burst), b.tokens+el*l.rate.PerSecond)
	}
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.rate.PerSecond * float64(time.Second))
	return false, wait
}
