// Package audittest is the conformance kit every audit.Backend must pass:
// contiguous chains under concurrent appends, nothing written for a done
// context or a failing build, redaction that keeps the chain verifiable,
// export round trips.
package audittest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/audit"
)

// Run runs the kit. open returns a new, empty backend; the kit closes it.
func Run(t *testing.T, open func(t *testing.T) audit.Backend) {
	t.Run("AppendChain", func(t *testing.T) { testAppendChain(t, open(t)) })
	t.Run("CancelledContext", func(t *testing.T) { testCancelled(t, open(t)) })
	t.Run("BuildFailure", func(t *testing.T) { testBuildFailure(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("Purge", func(t *testing.T) { testPurge(t, open(t)) })
	t.Run("Export", func(t *testing.T) { testExport(t, open(t)) })
}

// Sample returns a plausible record of kind k, for tests.
func Sample(k audit.Kind, i int) audit.Record {
	return audit.Record{
		Kind:          k,
		MessageID:     fmt.Sprintf("msg-%04d", i),
		CorrelationID: "corr-1",
		Sender:        "did:web:a.example",
		Recipient:     "did:web:b.example",
		Capability:    "payments.transfer",
		PayloadHash:   "sha256:" + fmt.Sprintf("%064x", i),
		Profile:       "EU-AI-ACT-HIGH-RISK",
		Oversight:     "required_before_execution",
		Actor:         audit.Actor{ID: "alex", Type: audit.ActorHuman, AuthenticatedBy: "local-session"},
		Outcome:       audit.OutcomeAllowed,
		ASCCode:       2000,
		Status:        "ok",
		TraceID:       "4bf92f3577b34da6a3ce929d0e0e4736",
		Details:       map[string]any{"i": i, "note": "sample"},
	}
}

func newLog(b audit.Backend, now time.Time) *audit.Log {
	return audit.New(b, &audit.Options{Now: func() time.Time { return now }})
}

func mustVerify(t *testing.T, l *audit.Log, records int) audit.Report {
	t.Helper()
	rep, err := l.Verify(context.Background())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !rep.OK() {
		t.Fatalf("Verify: %v", rep.Err())
	}
	if rep.Records != records {
		t.Fatalf("Verify read %d records, want %d", rep.Records, records)
	}
	return rep
}

func testAppendChain(t *testing.T, b audit.Backend) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)
	l := newLog(b, now)
	defer l.Close()
	var prev audit.Record
	for i := 1; i <= 5; i++ {
		rec, err := l.Append(ctx, Sample(audit.KindReceived, i))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if rec.Seq != uint64(i) || !rec.Time.Equal(now) {
			t.Fatalf("record %d: seq %d time %v", i, rec.Seq, rec.Time)
		}
		want := audit.Genesis
		if i > 1 {
			want = prev.Hash
		}
		if rec.Prev != want {
			t.Fatalf("record %d: prev %s, want %s", i, rec.Prev, want)
		}
		if h, err := rec.ComputeHash(); err != nil || h != rec.Hash {
			t.Fatalf("record %d: hash %s, recomputed %s (%v)", i, rec.Hash, h, err)
		}
		prev = rec
	}
	rep := mustVerify(t, l, 5)
	if rep.FirstSeq != 1 || rep.LastSeq != 5 || rep.Head != prev.Hash {
		t.Fatalf("report %+v", rep)
	}
	if _, err := l.Append(ctx, audit.Record{Kind: audit.KindReceived, Seq: 9}); !errors.Is(err, audit.ErrAppend) {
		t.Fatalf("Append with seq set: %v, want ErrAppend", err)
	}
	if _, err := l.Append(ctx, audit.Record{}); !errors.Is(err, audit.ErrAppend) {
		t.Fatalf("Append without kind: %v, want ErrAppend", err)
	}
	mustVerify(t, l, 5)
}

func testCancelled(t *testing.T, b audit.Backend) {
	l := newLog(b, time.Now())
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, Sample(audit.KindReceived, 1)); !errors.Is(err, context.Canceled) || !errors.Is(err, audit.ErrAppend) {
		t.Fatalf("Append with a cancelled context: %v", err)
	}
	// The backend itself must refuse too (Log checks first).
	called := false
	_, err := b.Append(ctx, func(last *audit.Record) (audit.Record, error) {
		called = true
		return audit.Record{}, errors.New("should not be stored")
	})
	if err == nil {
		t.Fatal("backend Append with a cancelled context succeeded")
	}
	_ = called
	mustVerify(t, l, 0)
}

func testBuildFailure(t *testing.T, b audit.Backend) {
	ctx := context.Background()
	l := newLog(b, time.Now())
	defer l.Close()
	if _, err := l.Append(ctx, Sample(audit.KindReceived, 1)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := b.Append(ctx, func(last *audit.Record) (audit.Record, error) { return audit.Record{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("Append with a failing build: %v", err)
	}
	// A record whose details cannot be canonicalised is refused.
	bad := Sample(audit.KindReceived, 2)
	bad.Details = map[string]any{"n": uint64(1) << 60}
	if _, err := l.Append(ctx, bad); !errors.Is(err, audit.ErrAppend) {
		t.Fatalf("Append with an unsafe integer: %v", err)
	}
	if rec, err := l.Append(ctx, Sample(audit.KindReceived, 3)); err != nil || rec.Seq != 2 {
		t.Fatalf("Append after failures: seq %d, %v", rec.Seq, err)
	}
	mustVerify(t, l, 2)
}

func testConcurrent(t *testing.T, b audit.Backend) {
	ctx := context.Background()
	l := audit.New(b, nil)
	defer l.Close()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := l.Append(ctx, Sample(audit.KindExecution, w*1000+i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rep := mustVerify(t, l, workers*each)
	if rep.LastSeq != workers*each {
		t.Fatalf("last seq %d", rep.LastSeq)
	}
}

func testPurge(t *testing.T, b audit.Backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLog(b, t0)
	defer l.Close()
	// Records 1..6: retain_until t0+1d for odd ones, t0+10d for 2 and 4,
	// forever for 6.
	for i := 1; i <= 6; i++ {
		rec := Sample(audit.KindReceived, i)
		switch {
		case i == 6:
		case i%2 == 1:
			rec.RetainUntil = t0.AddDate(0, 0, 1)
		default:
			rec.RetainUntil = t0.AddDate(0, 0, 10)
		}
		if _, err := l.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	// At exactly retain_until nothing is due.
	if n, err := l.Purge(ctx, t0.AddDate(0, 0, 1)); err != nil || n != 0 {
		t.Fatalf("Purge at retain_until: %d, %v", n, err)
	}
	mustVerify(t, l, 6)
	n, err := l.Purge(ctx, t0.AddDate(0, 0, 2))
	if err != nil || n != 3 {
		t.Fatalf("Purge: %d, %v; want 3", n, err)
	}
	rep := mustVerify(t, l, 7)
	if rep.Redacted != 3 {
		t.Fatalf("redacted %d, want 3", rep.Redacted)
	}
	var buf bytes.Buffer
	if _, err := l.Export(ctx, &buf, 1, 0); err != nil {
		t.Fatal(err)
	}
	var got []audit.Record
	if err := audit.ReadJSONL(&buf, func(r audit.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, r := range got[:6] {
		wantRedacted := r.Seq%2 == 1
		if r.Redacted != wantRedacted {
			t.Fatalf("record %d redacted=%v", r.Seq, r.Redacted)
		}
		if r.Redacted && (r.MessageID != "" || r.PayloadHash != "" || r.Details != nil || r.Actor != (audit.Actor{})) {
			t.Fatalf("redacted record %d keeps content: %+v", r.Seq, r)
		}
		if !r.Redacted && r.MessageID == "" {
			t.Fatalf("record %d lost content", r.Seq)
		}
	}
	p := got[6]
	if p.Kind != audit.KindPurge || p.Seq != 7 || fmt.Sprint(p.Details["redacted"]) != "3" ||
		fmt.Sprint(p.Details["first_seq"]) != "1" || fmt.Sprint(p.Details["last_seq"]) != "5" {
		t.Fatalf("purge record %+v", p)
	}
	// Purging again redacts nothing new; a later purge takes the rest.
	if n, err := l.Purge(ctx, t0.AddDate(0, 0, 2)); err != nil || n != 0 {
		t.Fatalf("second Purge: %d, %v", n, err)
	}
	if n, err := l.Purge(ctx, t0.AddDate(1, 0, 0)); err != nil || n != 2 {
		t.Fatalf("third Purge: %d, %v", n, err)
	}
	rep = mustVerify(t, l, 8)
	if rep.Redacted != 5 {
		t.Fatalf("redacted %d, want 5", rep.Redacted)
	}
	// Appending still works after purges.
	if rec, err := l.Append(ctx, Sample(audit.KindReceived, 9)); err != nil || rec.Seq != 9 {
		t.Fatalf("Append after purge: %d %v", rec.Seq, err)
	}
	mustVerify(t, l, 9)
}

func testExport(t *testing.T, b audit.Backend) {
	ctx := context.Background()
	l := newLog(b, time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	defer l.Close()
	var want []audit.Record
	for i := 1; i <= 10; i++ {
		rec, err := l.Append(ctx, Sample(audit.Kind("custom_kind"), i))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
	}
	var buf bytes.Buffer
	n, err := l.Export(ctx, &buf, 1, 0)
	if err != nil || n != 10 {
		t.Fatalf("Export: %d, %v", n, err)
	}
	full := buf.String()
	rep, err := audit.VerifyJSONL(bytes.NewReader(buf.Bytes()), audit.VerifyOptions{})
	if err != nil || !rep.OK() || rep.Records != 10 {
		t.Fatalf("VerifyJSONL: %+v, %v", rep, err)
	}
	i := 0
	if err := audit.ReadJSONL(&buf, func(r audit.Record) error {
		w, _ := want[i].MarshalJSON()
		g, _ := r.MarshalJSON()
		if !bytes.Equal(w, g) {
			return fmt.Errorf("record %d: exported %s, appended %s", i+1, g, w)
		}
		i++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if i != 10 {
		t.Fatalf("read %d records", i)
	}
	buf.Reset()
	if n, err := l.Export(ctx, &buf, 4, 6); err != nil || n != 3 {
		t.Fatalf("Export 4..6: %d, %v", n, err)
	}
	lines := bytes.Split(bytes.TrimSuffix([]byte(full), []byte("\n")), []byte("\n"))
	if want := string(bytes.Join(lines[3:6], []byte("\n"))) + "\n"; buf.String() != want {
		t.Fatalf("Export 4..6:\n%s\nwant\n%s", buf.String(), want)
	}
}
