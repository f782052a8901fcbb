// Package audittest is the conformance kit every audit.Backend must pass:
// contiguous chains under concurrent appends, nothing written for a done
// context or a failing build, redaction that keeps the chain verifiable,
// export round trips.
package audittest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
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
	t.Run("CheckpointEvents", func(t *testing.T) { testCheckpointEvents(t, open(t)) })
	t.Run("CheckpointedPurge", func(t *testing.T) { testCheckpointedPurge(t, open(t)) })
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

// Key signs and verifies checkpoints with a fixed Ed25519 key, kid "kit".
type Key struct{ priv ed25519.PrivateKey }

// NewKey returns the kit's key.
func NewKey() Key {
	return Key{ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))}
}

// SignCheckpoint implements audit.CheckpointSigner.
func (k Key) SignCheckpoint(st []byte) (string, string, error) {
	return "kit", base64.RawURLEncoding.EncodeToString(ed25519.Sign(k.priv, st)), nil
}

// VerifyCheckpoint implements audit.CheckpointVerifier.
func (k Key) VerifyCheckpoint(kid string, st []byte, s string) error {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || kid != "kit" || !ed25519.Verify(k.priv.Public().(ed25519.PublicKey), st, raw) {
		return errors.New("bad signature")
	}
	return nil
}

// A gateway's life in checkpoints: a start on an empty chain, records,
// an interval checkpoint, a clean stop, a start that finds it, records and
// a crash (no stop), a start that finds no clean stop. Each verifies with
// the key and the tail says what it can.
func testCheckpointEvents(t *testing.T, b audit.Backend) {
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	key := NewKey()
	var seen []audit.Record
	l := audit.New(b, &audit.Options{Now: func() time.Time { return now }, CheckpointEvery: 10 * time.Minute,
		OnCheckpoint: func(r audit.Record) { seen = append(seen, r) }})
	defer l.Close()
	event := func(ev string) audit.Record {
		t.Helper()
		rec, ok, err := l.CheckpointEvent(ctx, key, ev)
		if err != nil || !ok {
			t.Fatalf("%s checkpoint: %v, %v", ev, ok, err)
		}
		return rec
	}
	tail := func(at time.Time, want audit.TailStatus) audit.Report {
		t.Helper()
		rep, err := l.VerifyWith(ctx, audit.VerifyOptions{Checkpoints: key, Now: at})
		if err != nil || !rep.OK() {
			t.Fatalf("verify: %+v, %v", rep.Problem, err)
		}
		if rep.Tail == nil || rep.Tail.Status != want {
			t.Fatalf("tail %+v, want %s", rep.Tail, want)
		}
		return rep
	}
	start := event(audit.EventStart)
	if c, err := audit.CheckpointOf(&start); err != nil || c.Found != audit.FoundEmpty || c.Seq != 0 || c.Every != 10*time.Minute {
		t.Fatalf("first start: %+v, %v", c, err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, Sample(audit.KindReceived, i)); err != nil {
			t.Fatal(err)
		}
	}
	tail(now.Add(5*time.Minute), audit.TailPending)
	// Ten minutes and the grace later, without a checkpoint: suspected.
	rep := tail(now.Add(10*time.Minute+audit.CheckpointGrace+time.Second), audit.TailOverdue)
	if !rep.Tail.Suspect() || rep.Tail.After != 3 || rep.Tail.LastCheckpoint != 1 {
		t.Fatalf("overdue tail %+v", rep.Tail)
	}
	event(audit.EventInterval)
	tail(now.Add(time.Hour), audit.TailCheckpointed)
	stop := event(audit.EventStop)
	if c, _ := audit.CheckpointOf(&stop); c.Every != 0 || c.Event != audit.EventStop {
		t.Fatalf("stop: %+v", c)
	}
	tail(now.Add(time.Hour), audit.TailCleanStop)
	start = event(audit.EventStart)
	if c, _ := audit.CheckpointOf(&start); c.Found != audit.FoundCleanStop || c.Seq != stop.Seq {
		t.Fatalf("start after a clean stop: %+v", c)
	}
	if _, err := l.Append(ctx, Sample(audit.KindReceived, 4)); err != nil {
		t.Fatal(err)
	}
	// The process dies here; the next one starts.
	start = event(audit.EventStart)
	if c, _ := audit.CheckpointOf(&start); c.Found != audit.FoundNoCleanStop {
		t.Fatalf("start after a crash: %+v", c)
	}
	rep = tail(now.Add(time.Hour), audit.TailCheckpointed)
	if rep.Tail.UncleanStarts != 1 || rep.Checkpoints != 5 {
		t.Fatalf("after a crash: %+v, %d checkpoints", rep.Tail, rep.Checkpoints)
	}
	if len(seen) != 5 || seen[4].Seq != start.Seq || seen[4].Hash != start.Hash {
		t.Fatalf("OnCheckpoint saw %d checkpoints", len(seen))
	}
	// The copy of the last checkpoint kept outside the log proves a
	// truncation of the chain.
	h, err := audit.HeadOf(seen[4], "the head file", key)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = l.VerifyWith(ctx, audit.VerifyOptions{Checkpoints: key, Heads: []audit.Head{h}})
	if err != nil || !rep.OK() {
		t.Fatalf("verify with the head: %+v, %v", rep.Problem, err)
	}
}

// A purge with a signer is checkpointed at once: the purge record is
// followed by a purge checkpoint, and the chain verifies with the key.
func testCheckpointedPurge(t *testing.T, b audit.Backend) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	now := t0
	key := NewKey()
	l := audit.New(b, &audit.Options{Now: func() time.Time { return now }, Signer: key})
	defer l.Close()
	for i := 1; i <= 4; i++ {
		rec := Sample(audit.KindReceived, i)
		rec.RetainUntil = t0.AddDate(0, 0, i)
		if _, err := l.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	now = t0.AddDate(0, 0, 3)
	if n, err := l.Purge(ctx, now); err != nil || n != 2 {
		t.Fatalf("Purge: %d, %v", n, err)
	}
	var got []audit.Record
	var buf bytes.Buffer
	if _, err := l.Export(ctx, &buf, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := audit.ReadJSONL(&buf, func(r audit.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || got[4].Kind != audit.KindPurge || got[5].Kind != audit.KindCheckpoint {
		t.Fatalf("after a purge: %d records, kinds %v", len(got), kinds(got))
	}
	c, err := audit.CheckpointOf(&got[5])
	if err != nil || c.Event != audit.EventPurge || c.Seq != 5 || c.Hash != got[4].Hash {
		t.Fatalf("purge checkpoint %+v, %v", c, err)
	}
	rep, err := l.VerifyWith(ctx, audit.VerifyOptions{Checkpoints: key})
	if err != nil || !rep.OK() || rep.Redacted != 2 || rep.SignedThrough != 5 || rep.Tail.After != 0 {
		t.Fatalf("verify after a purge: %+v, %v", rep, err)
	}
	// Nothing to purge: no record, no checkpoint.
	if n, err := l.Purge(ctx, now); err != nil || n != 0 {
		t.Fatalf("second Purge: %d, %v", n, err)
	}
	mustVerify(t, l, 6)
}

func kinds(recs []audit.Record) []audit.Kind {
	out := make([]audit.Kind, len(recs))
	for i, r := range recs {
		out[i] = r.Kind
	}
	return out
}
