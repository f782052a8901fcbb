package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/custos-runtime/custos/internal/tokenbucket"
)

// RateLimit bounds how often one sender may call: a token bucket of Burst
// requests refilled at PerSecond. The zero value means no limit.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// RateLimiter decides whether a verified sender may make one more request
// now. The in-memory default keeps a token bucket per sender in this
// process; several gateway replicas share counters through a shared
// implementation (a PostgreSQL one, say) set as Options.Limiter.
type RateLimiter interface {
	// Allow takes one request's allowance for sender at now, or returns
	// false and how long until one is available. An error fails the
	// request closed (service_unavailable).
	Allow(ctx context.Context, sender string, now time.Time) (ok bool, retryAfter time.Duration, err error)
}

// NewMemoryRateLimiter returns the in-process token-bucket limiter (no
// limit when r is the zero RateLimit).
func NewMemoryRateLimiter(r RateLimit) RateLimiter { return &limiter{rate: r} }

// Allow implements RateLimiter.
func (l *limiter) Allow(_ context.Context, sender string, now time.Time) (bool, time.Duration, error) {
	ok, wait := l.allow(sender, now)
	return ok, wait, nil
}

// limiter keeps one bucket per sender. Buckets exist only for senders whose
// signature verified, so their number is bounded by the trust store.
type limiter struct {
	rate  RateLimit
	mu    sync.Mutex
	state map[string]*tokenbucket.Bucket
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
		l.state = map[string]*tokenbucket.Bucket{}
	}
	b, ok := l.state[sender]
	if !ok {
		full := tokenbucket.Full(float64(l.rate.Burst), now)
		b = &full
		l.state[sender] = b
	}
	return b.Take(l.rate.PerSecond, float64(l.rate.Burst), now)
}
