package tokenbucket

import (
	"testing"
	"time"
)

func TestTake(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	b := Full(2, t0)
	for i := range 2 {
		if ok, _ := b.Take(1, 2, t0); !ok {
			t.Fatalf("token %d refused", i)
		}
	}
	ok, wait := b.Take(1, 2, t0)
	if ok || wait != time.Second {
		t.Fatalf("empty: %v %v, want refused for 1s", ok, wait)
	}
	if ok, _ := b.Take(1, 2, t0.Add(500*time.Millisecond)); ok {
		t.Fatal("half a token taken")
	}
	if ok, _ := b.Take(1, 2, t0.Add(time.Second)); !ok {
		t.Fatal("refilled token refused")
	}
	// A long pause refills to the burst, no further; a clock going back
	// refills nothing.
	if ok, _ := b.Take(1, 2, t0.Add(time.Hour)); !ok || b.Tokens != 1 {
		t.Fatalf("after an hour: %v tokens", b.Tokens)
	}
	if ok, _ := b.Take(1, 2, t0); !ok || b.Tokens != 0 {
		t.Fatalf("clock back: %v tokens", b.Tokens)
	}
}
