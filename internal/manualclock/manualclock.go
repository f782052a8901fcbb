// Package manualclock is the clock the test kits (aaistest,
// exchangetest, replaytest) hand to the code under test: it moves only when
// told to, so a test about expiry or timeouts never sleeps.
package manualclock

import (
	"sync"
	"time"
)

// Clock is a manual clock. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock reading t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
