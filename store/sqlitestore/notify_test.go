package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais/aaistest"
)

// A write through any Store of the process open on the file wakes every
// Changes channel of that file, and none of another file; the channel is
// closed when its context ends.
func TestChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s1, s2 := open(t, path), open(t, path)
	other := open(t, filepath.Join(t.TempDir(), "other.db"))
	ctx, cancel := context.WithCancel(t.Context())
	c1, err := s1.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cOther, err := other.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s2, c)
	if _, _, err := a.Create(t.Context(), aaistest.Request(t, c.Now(), "1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c1:
	case <-time.After(10 * time.Second):
		t.Fatal("a write through another Store on the file did not wake Changes")
	}
	select {
	case <-cOther:
		t.Fatal("a write to another file woke Changes")
	default:
	}
	cancel()
	for _, ch := range []<-chan struct{}{c1, cOther} {
		select {
		case _, open := <-ch:
			if open {
				// One pending wake-up may remain; the close follows.
				if _, open = <-ch; open {
					t.Fatal("two values after one write")
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Changes not closed when its context ended")
		}
	}
	if _, err := s1.Changes(ctx); err == nil {
		t.Fatal("Changes with an ended context succeeded")
	}
}
