package aais_test

import (
	"errors"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

func TestView(t *testing.T) {
	req := readFixture(t, "shell-approval.json") // sequence 41, stream session_s1
	snap, err := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Sequence: 40, Stream: req.Stream},
		&aais.Snapshot{AsOfSequence: 40})
	if err != nil {
		t.Fatal(err)
	}
	var v aais.View
	if err := v.Restore(req); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("Restore(request) err = %v", err)
	}
	if err := v.Restore(snap); err != nil || v.Sequence() != 40 {
		t.Fatalf("Restore = %v, sequence %d", err, v.Sequence())
	}
	if ok, err := v.Apply(req); !ok || err != nil {
		t.Fatalf("Apply(41) = %v, %v", ok, err)
	}
	if ok, err := v.Apply(req); ok || err != nil {
		t.Fatalf("Apply(41) again = %v, %v; want ignored", ok, err)
	}
	if _, ok := v.Get(req.Request.ID); !ok || len(v.Pending(time.Time{})) != 1 {
		t.Fatal("request not pending after its event")
	}
	// Expired at the request's expires_at.
	if got := v.Pending(req.Request.ExpiresAt.Time()); len(got) != 0 {
		t.Fatal("an expired request is listed")
	}

	res, err := aais.NewResolution(aais.ResolutionParams{Request: req.Request, Outcome: aais.OutcomeExpired, ResolvedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	gap, err := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Sequence: 43, Stream: req.Stream}, res)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := v.Apply(gap); ok || !errors.Is(err, aais.ErrGap) {
		t.Fatalf("Apply(43 after 41) = %v, %v; want ErrGap", ok, err)
	}
	act, err := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Sequence: 99, Stream: req.Stream},
		&aais.Activity{RequestID: req.Request.ID, Message: "running"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := v.Apply(act); ok || err != nil || v.Sequence() != 41 {
		t.Fatalf("Apply(activity) = %v, %v, sequence %d; want ignored", ok, err, v.Sequence())
	}
	other := *gap
	other.Sequence, other.Stream = 42, "another"
	if _, err := v.Apply(&other); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("event of another stream: err = %v", err)
	}
	next := *gap
	next.Sequence = 42
	if ok, err := v.Apply(&next); !ok || err != nil || len(v.Pending(time.Time{})) != 0 || v.Sequence() != 42 {
		t.Fatalf("Apply(resolution) = %v, %v", ok, err)
	}
	if _, err := v.Apply(nil); !errors.Is(err, aais.ErrInvalid) {
		t.Fatal("Apply(nil) accepted")
	}
	if _, err := v.Apply(snap); !errors.Is(err, aais.ErrInvalid) {
		t.Fatal("Apply(snapshot) accepted")
	}
}
