// Package tokenbucket is the token bucket the gateway's limiters share:
// the per-sender rate limit after verification and the per-address one of
// the transport before it.
package tokenbucket

import "time"

// Bucket is one bucket's state: the tokens it held at At. The zero
// Bucket is empty; Full starts one at its burst.
type Bucket struct {
	Tokens float64
	At     time.Time
}

// Full is a bucket holding burst tokens at now.
func Full(burst float64, now time.Time) Bucket { return Bucket{Tokens: burst, At: now} }

// Take refills b at rate tokens a second up to burst since its last use,
// and takes one token at now; when there is none it returns how long
// until there is one. rate must be positive.
func (b *Bucket) Take(rate, burst float64, now time.Time) (bool, time.Duration) {
	if el := now.Sub(b.At); el > 0 {
		b.Tokens = min(burst, b.Tokens+el.Seconds()*rate)
	}
	b.At = now
	if b.Tokens >= 1 {
		b.Tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.Tokens) / rate * float64(time.Second))
}
