package pgstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgstore"
)

// Writers on three replicas create and decide while followers read the
// log the way a presenter does (everything after the last sequence seen)
// in two ways: through EventsAfter, and with a bare SELECT on the events
// table. Transactions that take n and n+1 may prepare in any order, but
// no follower ever sees n+1 while n is invisible: every page continues
// exactly where the previous one ended, and the followers end with the
// whole log.
func TestFollowersNeverSkip(t *testing.T) {
	ctx := t.Context()
	stores := replicas(t, 3)
	clock := aaistest.NewClock(aaistest.Start)
	const writers, each = 12, 10
	var writing atomic.Bool
	writing.Store(true)

	var fw sync.WaitGroup
	ferr := make(chan error, 2)
	fw.Go(func() { // EventsAfter, on a replica of its own
		var last uint64
		for {
			done := !writing.Load()
			p, err := stores[2].EventsAfter(ctx, last, 0)
			if err != nil {
				ferr <- fmt.Errorf("EventsAfter(%d): %w", last, err)
				return
			}
			for i, e := range p.Events {
				if e.Sequence != last+1+uint64(i) {
					ferr <- fmt.Errorf("after %d: event %d at position %d", last, e.Sequence, i)
					return
				}
			}
			last += uint64(len(p.Events))
			if p.Latest != last || p.Gap {
				ferr <- fmt.Errorf("page latest %d (gap %v), events up to %d", p.Latest, p.Gap, last)
				return
			}
			if done {
				if last != 2*writers*each {
					ferr <- fmt.Errorf("EventsAfter follower ended at %d, want %d", last, 2*writers*each)
				}
				return
			}
		}
	})
	raw := rawConn(t, stores[0].Schema())
	fw.Go(func() { // SELECT sequence FROM events WHERE sequence > last
		var last int64
		for {
			done := !writing.Load()
			rows, err := raw.Query(ctx, "SELECT sequence FROM events WHERE sequence > $1 ORDER BY sequence", last)
			if err != nil {
				ferr <- err
				return
			}
			var seq int64
			if _, err := pgx.ForEachRow(rows, []any{&seq}, func() error {
				if seq != last+1 {
					return fmt.Errorf("after %d the log shows %d", last, seq)
				}
				last = seq
				return nil
			}); err != nil {
				ferr <- err
				return
			}
			if done {
				if last != 2*writers*each {
					ferr <- fmt.Errorf("SELECT follower ended at %d, want %d", last, 2*writers*each)
				}
				return
			}
		}
	})

	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		a := aaistest.NewAuthority(t, stores[w%3], clock)
		wg.Go(func() {
			for i := range each {
				r := aaistest.Request(t, clock.Now(), fmt.Sprintf("f%d_%d", w, i))
				if _, created, err := a.Create(ctx, r); err != nil || !created {
					errc <- fmt.Errorf("create %s: %v, %v", r.ID, created, err)
					return
				}
				d := aaistest.Decision(t, r, aais.Approve, fmt.Sprintf("dec_f%d_%d", w, i), clock.Now())
				if _, err := a.Decide(ctx, d, aaistest.Actor, nil); err != nil {
					errc <- fmt.Errorf("decide %s: %v", r.ID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	writing.Store(false)
	fw.Wait()
	close(errc)
	close(ferr)
	for err := range errc {
		t.Error(err)
	}
	for err := range ferr {
		t.Error(err)
	}
	aaistest.CheckLog(t, stores[1], 2*writers*each)
}

// The same new request created at once through three replicas (and
// twice in each): one creation, at one sequence; every other caller gets
// the stored request back, created false.
func TestReplicasCreateSameRequest(t *testing.T) {
	ctx := t.Context()
	stores := replicas(t, 3)
	clock := aaistest.NewClock(aaistest.Start)
	for round := range 5 {
		r := aaistest.Request(t, clock.Now(), fmt.Sprintf("same%d", round))
		rec := requestRecord(t, r, clock.Now(), "fp")
		var (
			wg      sync.WaitGroup
			created atomic.Int32
		)
		start := make(chan struct{})
		errs := make([]error, 6)
		seqs := make([]uint64, 6)
		for i := range errs {
			wg.Go(func() {
				<-start
				out, ok, err := stores[i%3].CreateRequestIfAbsent(ctx, rec)
				if ok {
					created.Add(1)
				}
				errs[i] = err
				if err == nil {
					seqs[i] = out.Event.Sequence
				}
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, caller %d: %v", round, i, err)
			}
			if seqs[i] != uint64(round+1) {
				t.Fatalf("round %d, caller %d: request at sequence %d, want %d", round, i, seqs[i], round+1)
			}
		}
		if created.Load() != 1 {
			t.Fatalf("round %d: %d callers created the request", round, created.Load())
		}
	}
	aaistest.CheckLog(t, stores[0], 5)
}

// Every write alone (MaxBatch 1): the conformance kit.
func TestConformanceNoBatch(t *testing.T) {
	pgtest.DSN(t)
	aaistest.Run(t, aaistest.Backend{
		New: func(t *testing.T) aais.Store {
			return openOpts(t, &pgstore.Options{Schema: pgtest.Schema(t), MaxBatch: 1})
		},
		Reopen: reopen,
	})
}

// A writer killed while its last statement waits for the sequence row
// (COMMIT already sent behind it, in the same pipeline) is known not to
// have committed: the server answered the statement with an error. It is
// retried on a new connection, and appends once the row is free.
func TestKilledWhileAppending(t *testing.T) {
	ctx := t.Context()
	schema := pgtest.Schema(t)
	s := open(t, schema)
	clock := aaistest.NewClock(aaistest.Start)
	holder := rawConn(t, schema)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var latest int64
	if err := tx.QueryRow(ctx, "SELECT latest_sequence FROM meta FOR UPDATE").Scan(&latest); err != nil || latest != 0 {
		t.Fatalf("lock meta: %d, %v", latest, err)
	}
	r := aaistest.Request(t, clock.Now(), "k1")
	type result struct {
		created bool
		seq     uint64
		err     error
	}
	done := make(chan result, 1)
	go func() {
		out, created, err := s.CreateRequestIfAbsent(ctx, requestRecord(t, r, clock.Now(), "fp"))
		done <- result{created, out.Event.Sequence, err}
	}()
	admin := rawConn(t, schema)
	holderPID := holder.PgConn().PID()
	first := waitBlocked(t, admin, holderPID, 0)
	terminate(t, admin, first)
	second := waitBlocked(t, admin, holderPID, first)
	select {
	case res := <-done:
		t.Fatalf("CreateRequestIfAbsent returned while the sequence row was locked: %+v", res)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || !res.created || res.seq != 1 || second == first {
		t.Fatalf("after the kill: created %v at %d, %v (backends %d, %d)", res.created, res.seq, res.err, first, second)
	}
	aaistest.CheckLog(t, s, 1)
}
