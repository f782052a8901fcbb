package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Retry says how a channel retries a delivery: Attempts tries in all
// (5 when zero), waiting Backoff (500 ms when zero) after the first
// failure and twice as long after each next one, at most MaxBackoff (30 s
// when zero). A channel whose delivery failed every attempt is "down":
// until one of its deliveries succeeds, each gets one attempt, so that a
// dead endpoint does not hold the other notifications up.
type Retry struct {
	Attempts   int
	Backoff    time.Duration
	MaxBackoff time.Duration

	mu   sync.Mutex
	down bool
}

// errPermanent marks a failure retrying cannot mend (the receiver refused
// the request as malformed or unauthorized).
type errPermanent struct{ err error }

func (e errPermanent) Error() string { return e.err.Error() }
func (e errPermanent) Unwrap() error { return e.err }

// permanent wraps err so that do does not retry it.
func permanent(err error) error { return errPermanent{err} }

// do runs try until it succeeds, fails permanently, or the attempts are
// spent.
func (r *Retry) do(ctx context.Context, try func(ctx context.Context) error) error {
	attempts, wait, most := r.Attempts, r.Backoff, r.MaxBackoff
	if attempts <= 0 {
		attempts = 5
	}
	if wait <= 0 {
		wait = 500 * time.Millisecond
	}
	if most <= 0 {
		most = 30 * time.Second
	}
	r.mu.Lock()
	if r.down {
		attempts = 1
	}
	r.mu.Unlock()
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			wait = min(2*wait, most)
		}
		if err = try(ctx); err == nil {
			r.mu.Lock()
			r.down = false
			r.mu.Unlock()
			return nil
		}
		var p errPermanent
		if errors.As(err, &p) || ctx.Err() != nil {
			return err
		}
	}
	r.mu.Lock()
	r.down = true
	r.mu.Unlock()
	return fmt.Errorf("%d attempts: %w", attempts, err)
}
