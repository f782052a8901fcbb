package aais_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/memstore"
)

// A narrow search over a long history answers within the scan limit: a
// short page with a cursor, and the next call goes on from where the scan
// stopped, so the one old match is found, once.
func TestHistoryScanLimit(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	c := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, c)
	n := aais.HistoryScanLimit + 3
	for i := range n {
		r := aaistest.Request(t, c.Now(), "s"+strconv.Itoa(i))
		if _, _, err := a.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		v := aais.Approve
		if i == 0 {
			v = aais.Deny // the one match, the oldest
		}
		if _, err := a.Decide(ctx, aaistest.Decision(t, r, v, "", c.Now()), aaistest.Actor, nil); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Millisecond)
	}
	q := aais.HistoryQuery{Outcome: aais.OutcomeDenied, Limit: 10}
	p, err := aais.SearchHistory(ctx, s, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 0 || p.Next == 0 {
		t.Fatalf("first call: %d entries, next %d; want none and a cursor", len(p.Entries), p.Next)
	}
	q.Before = p.Next
	p, err = aais.SearchHistory(ctx, s, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 1 || p.Entries[0].Request.Event.Request.ID != "apr_s0" || p.Next != 0 {
		t.Fatalf("second call: %d entries, next %d", len(p.Entries), p.Next)
	}
}
