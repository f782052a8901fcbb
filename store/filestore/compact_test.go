package filestore_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/store/filestore"
)

func TestRetentionReportsGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	s := open(t, path, &filestore.Options{Now: fixedNow, Retention: filestore.Retention{MaxEvents: 2, MaxResolved: 1}})
	a := authority(t, s)
	var receipts []*aais.Message
	for _, id := range []string{"apr_1", "apr_2", "apr_3"} {
		ev := create(t, a, id)
		m, err := a.Decide(t.Context(), newDecision(t, ev.Request, aais.Deny, ""), actor, nil)
		if err != nil || m.Resolution.Outcome != aais.OutcomeDenied {
			t.Fatalf("Decide(%s) = %v", id, err)
		}
		receipts = append(receipts, m)
	}
	keep := create(t, a, "apr_pending") // sequence 7
	create(t, a, "apr_more")            // sequence 8
	create(t, a, "apr_last")            // sequence 9: apr_pending's event is compacted

	p, err := s.EventsAfter(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Gap || len(p.Events) != 2 || p.CompactedThrough != 7 || p.Latest != 9 {
		t.Fatalf("EventsAfter(0): gap %v, %d events, compacted through %d, latest %d", p.Gap, len(p.Events), p.CompactedThrough, p.Latest)
	}
	if q, err := s.EventsAfter(t.Context(), 7, 0); err != nil || q.Gap || len(q.Events) != 2 {
		t.Fatalf("EventsAfter(7): gap %v, %d events, %v", q.Gap, len(q.Events), err)
	}
	for _, id := range []string{"apr_1", "apr_2"} {
		if _, err := s.RequestState(t.Context(), id); !errors.Is(err, aais.ErrUnknownRequest) {
			t.Fatalf("RequestState(%s) = %v, want ErrUnknownRequest (compacted)", id, err)
		}
	}
	st, err := s.RequestState(t.Context(), "apr_3")
	if err != nil || st.Pending() || wire(t, st.Resolution.Event) != wire(t, receipts[2]) {
		t.Fatalf("newest resolution not kept: %v", err)
	}
	st, err = s.RequestState(t.Context(), "apr_pending")
	if err != nil || !st.Pending() || wire(t, st.Request.Event) != wire(t, keep) {
		t.Fatalf("pending request lost with its event: %v", err)
	}
	pending, asOf, err := s.Pending(t.Context())
	if err != nil || len(pending) != 3 || asOf != 9 {
		t.Fatalf("Pending = %d as of %d, %v", len(pending), asOf, err)
	}
	// A compacted request is unknown to decisions.
	if _, err := a.Decide(t.Context(), newDecision(t, newRequest(t, "apr_1"), aais.Deny, ""), actor, nil); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("Decide on a compacted request: %v", err)
	}
	rep, err := s.Compact(t.Context())
	if err != nil || rep.Changed || rep.CompactedThrough != 7 {
		t.Fatalf("Compact = %+v, %v; want nothing more to do", rep, err)
	}
}

func TestCompactByAge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.json")
	now := fixedNow()
	clock := func() time.Time { return now }
	s := open(t, path, &filestore.Options{Now: clock})
	a := authority(t, s)
	ev := create(t, a, "apr_1")
	if _, err := a.Decide(t.Context(), newDecision(t, ev.Request, aais.Deny, ""), actor, nil); err != nil {
		t.Fatal(err)
	}
	create(t, a, "apr_2")
	now = now.Add(31 * 24 * time.Hour)
	rep, err := s.Compact(t.Context())
	if err != nil || !rep.Changed || rep.RemovedResolved != 1 || rep.RemovedEvents != 3 || rep.CompactedThrough != 3 {
		t.Fatalf("Compact = %+v, %v", rep, err)
	}
	if st, err := s.RequestState(t.Context(), "apr_2"); err != nil || !st.Pending() {
		t.Fatalf("pending request compacted: %v", err)
	}
	// Disabled limits keep everything.
	path2 := filepath.Join(t.TempDir(), "approvals.json")
	s2 := open(t, path2, &filestore.Options{Now: clock, Retention: filestore.Retention{
		MaxResolved: filestore.NoLimit, MaxResolvedAge: filestore.NoLimit, MaxEvents: filestore.NoLimit, MaxEventAge: filestore.NoLimit}})
	a2 := authority(t, s2)
	ev = create(t, a2, "apr_1")
	if _, err := a2.Decide(t.Context(), newDecision(t, ev.Request, aais.Deny, ""), actor, nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(365 * 24 * time.Hour)
	if rep, err := s2.Compact(t.Context()); err != nil || rep.Changed {
		t.Fatalf("Compact with no limits = %+v, %v", rep, err)
	}
}
