package gateway

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := &limiter{rate: RateLimit{PerSecond: 2, Burst: 3}}
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := l.allow("a", t0); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	ok, wait := l.allow("a", t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("over the burst: %v, wait %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.allow("b", t0); !ok {
		t.Fatal("another sender's allowance was used up")
	}
	if ok, _ := l.allow("a", t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("a refilled token was refused")
	}
	if ok, _ := l.allow("a", t0.Add(500*time.Millisecond)); ok {
		t.Fatal("more than the refill was granted")
	}
	// Refill never exceeds the burst.
	if ok, _ := l.allow("a", t0.Add(time.Hour)); !ok {
		t.Fatal("refused after an hour")
	}
	for range 2 {
		l.allow("a", t0.Add(time.Hour))
	}
	if ok, _ := l.allow("a", t0.Add(time.Hour)); ok {
		t.Fatal("the bucket held more than the burst")
	}
	var none *limiter
	if ok, _ := none.allow("a", t0); !ok {
		t.Fatal("no limiter refused")
	}
	if ok, _ := (&limiter{}).allow("a", t0); !ok {
		t.Fatal("a zero limit refused")
	}
}
