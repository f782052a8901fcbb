package memstore_test

import (
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/memstore"
)

func TestConformance(t *testing.T) {
	aaistest.Run(t, aaistest.Backend{New: func(t *testing.T) aais.Store { return memstore.New() }})
}

// After a reset a presenter resuming from its old sequence sees a gap and a
// new store id, and must re-snapshot.
func TestResetReportsGap(t *testing.T) {
	s := memstore.New()
	a, err := aais.NewAuthority(s, &aais.AuthorityOptions{Now: aaistest.NewClock(aaistest.Start).Now})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := a.Snapshot(t.Context())
	if err != nil || snap.Snapshot.AsOfSequence != 0 {
		t.Fatalf("empty snapshot = %v, %v", snap, err)
	}
	page, err := s.EventsAfter(t.Context(), 0, 0)
	if err != nil || page.Gap || page.StoreID != s.ID() {
		t.Fatalf("EventsAfter(0) = %+v, %v", page, err)
	}
	old := s.ID()
	s.Reset()
	page, err = s.EventsAfter(t.Context(), 0, 0)
	if err != nil || page.Gap || page.StoreID == old {
		t.Fatalf("after reset, EventsAfter(0) = %+v, %v; want a new store id", page, err)
	}
	if page, _ = s.EventsAfter(t.Context(), 3, 0); !page.Gap {
		t.Fatal("after reset, EventsAfter(3) reports no gap")
	}
}

func TestQuorum(t *testing.T) {
	aaistest.RunQuorum(t, aaistest.Backend{New: func(t *testing.T) aais.Store { return memstore.New() }})
}
