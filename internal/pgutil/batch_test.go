package pgutil

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
)

// batchPool is a pool on a fresh schema with a table t (k text primary
// key).
func batchPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	schema := pgtest.Schema(t)
	cfg, err := PoolConfig(pgtest.DSN(t), schema, "custos-test", 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()+"; CREATE TABLE t (k text PRIMARY KEY, x bigint)"); err != nil {
		t.Fatal(err)
	}
	return pool
}

func count(t *testing.T, pool *pgxpool.Pool, k string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM t WHERE k LIKE $1", k).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// keysBatcher is a Batcher whose writes prepare keys and whose Finish
// inserts them, with the transaction's id, in one statement.
func keysBatcher(pool *pgxpool.Pool, max, conns int) *Batcher {
	return &Batcher{R: &Runner{Pool: pool}, Max: max, Conns: conns,
		Finish: func(ctx context.Context, tx pgx.Tx, prepared []any) error {
			var keys []string
			for _, p := range prepared {
				keys = append(keys, p.([]string)...)
			}
			var b pgx.Batch
			b.Queue("INSERT INTO t SELECT unnest($1::text[]), txid_current()", keys)
			return SendCommit(ctx, tx, &b, func(br pgx.BatchResults) error {
				_, err := br.Exec()
				return err
			})
		}}
}

func insert(keys ...string) Prepare {
	return func(context.Context, pgx.Tx, *Batch) (any, error) { return keys, nil }
}

// runBatch runs fns as one batch of b (with ctxs, t.Context() where nil)
// and then, as Write does, alone the writes the batch gave back.
func runBatch(t *testing.T, b *Batcher, ctxs []context.Context, fns []Prepare) []error {
	t.Helper()
	jobs := make([]*batchJob, len(fns))
	for i, fn := range fns {
		ctx := t.Context()
		if i < len(ctxs) && ctxs[i] != nil {
			ctx = ctxs[i]
		}
		jobs[i] = &batchJob{ctx: ctx, fn: fn, done: make(chan error, 1)}
	}
	b.run(jobs)
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		if errs[i] = <-j.done; errors.Is(errs[i], errAlone) {
			errs[i] = b.alone(j)
		}
	}
	return errs
}

// One batch: each write gets the answer it would get alone — a failing
// one its own error with nothing written (whether it failed in Go or with
// a statement that aborted the transaction), ErrNoChange success with
// nothing written, the others committed — and the successful ones share
// one transaction when nothing aborted it.
func TestBatcher(t *testing.T) {
	pool := batchPool(t)
	b := keysBatcher(pool, 16, 1)
	errBoom := errors.New("boom")
	var fns []Prepare
	for i := range 12 {
		fns = append(fns, func(ctx context.Context, tx pgx.Tx, st *Batch) (any, error) {
			switch i % 3 {
			case 1:
				return nil, errBoom
			case 2:
				return nil, ErrNoChange
			}
			return []string{fmt.Sprintf("ok-%d", i)}, nil
		})
	}
	for i, err := range runBatch(t, b, nil, fns) {
		if want := map[int]error{1: errBoom}[i%3]; !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("write %d: %v, want %v", i, err, want)
		}
	}
	if n := count(t, pool, "ok-%"); n != 4 {
		t.Errorf("%d successful writes committed, want 4", n)
	}
	var txs int
	if err := pool.QueryRow(t.Context(), "SELECT count(DISTINCT x) FROM t WHERE k LIKE 'ok-%'").Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if txs != 1 {
		t.Errorf("4 writes of one batch committed in %d transactions", txs)
	}

	// A statement error aborts the batch's transaction: every write is run
	// alone, and only the failing one fails.
	fns = []Prepare{insert("a1"), func(ctx context.Context, tx pgx.Tx, _ *Batch) (any, error) {
		var n int
		return nil, tx.QueryRow(ctx, "SELECT 1 / (0 * $1::int)", 1).Scan(&n)
	}, insert("a2")}
	errs := runBatch(t, b, nil, fns)
	var pe *pgconn.PgError
	if errs[0] != nil || errs[2] != nil || !errors.As(errs[1], &pe) || pe.Code != "22012" {
		t.Errorf("batch with a failing statement: %v", errs)
	}
	if count(t, pool, "a_") != 2 {
		t.Errorf("the other writes of an aborted batch: %d rows, want 2", count(t, pool, "a_"))
	}

	// A duplicate key makes the batch's Finish fail: every write is run
	// again alone, and exactly one succeeds.
	fns = nil
	for range 4 {
		fns = append(fns, insert("same"))
	}
	ok := 0
	for _, err := range runBatch(t, b, nil, fns) {
		if err == nil {
			ok++
		} else if !errors.As(err, &pe) || pe.Code != "23505" {
			t.Errorf("duplicate insert: %v", err)
		}
	}
	if ok != 1 || count(t, pool, "same") != 1 {
		t.Errorf("4 inserts of one key: %d succeeded, want 1", ok)
	}

	// Writes claiming one key in one batch: the later ones give up and
	// are run alone, after the batch.
	fns = nil
	for i := range 3 {
		fns = append(fns, func(ctx context.Context, tx pgx.Tx, st *Batch) (any, error) {
			if !st.Claim("k") {
				return nil, errors.New("claimed")
			}
			return []string{fmt.Sprintf("claim-%d", i)}, nil
		})
	}
	if errs := runBatch(t, b, nil, fns); errors.Join(errs...) != nil {
		t.Errorf("claiming writes: %v", errs)
	}
	if n := count(t, pool, "claim-%"); n != 3 {
		t.Errorf("%d claiming writes committed, want 3", n)
	}

	// A write whose context is cancelled while its batch is open writes
	// nothing; the rest of the batch commits.
	ctx, cancel := context.WithCancel(t.Context())
	errs = runBatch(t, b, []context.Context{nil, ctx}, []Prepare{insert("first"),
		func(context.Context, pgx.Tx, *Batch) (any, error) {
			cancel()
			return []string{"cancelled"}, nil
		}, insert("other")})
	if !errors.Is(errs[1], context.Canceled) || count(t, pool, "cancelled") != 0 {
		t.Errorf("a write cancelled before the commit: %v, %d rows", errs[1], count(t, pool, "cancelled"))
	}
	if errs[0] != nil || errs[2] != nil || count(t, pool, "first") != 1 || count(t, pool, "other") != 1 {
		t.Errorf("the other writes of that batch: %v", errs)
	}
}

// Many concurrent writes through Write, on two connections: every one
// committed exactly once.
func TestBatcherConcurrent(t *testing.T) {
	pool := batchPool(t)
	b := keysBatcher(pool, 8, 2)
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() { errs[i] = b.Write(t.Context(), insert(fmt.Sprintf("c-%d", i))) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, "c-%"); n != len(errs) {
		t.Fatalf("%d rows, want %d", n, len(errs))
	}
}

// Queued reads: every write's statements go out before the Prepare
// functions run, each Prepare sees its own results, and a failing queued
// statement fails only its own write (the others are run again alone).
func TestBatcherQueued(t *testing.T) {
	pool := batchPool(t)
	b := keysBatcher(pool, 16, 1)
	const n = 6
	jobs := make([]*batchJob, n)
	got := make([]int, n)
	for i := range jobs {
		queue := func(qb *pgx.Batch) {
			got[i] = -1
			div := 1
			if i == 4 {
				div = 0 // division by zero: this write's statement fails
			}
			qb.Queue("SELECT $1::int / $2::int", i*10, div).QueryRow(func(row pgx.Row) error { return row.Scan(&got[i]) })
		}
		jobs[i] = &batchJob{ctx: t.Context(), queue: queue, done: make(chan error, 1),
			fn: func(context.Context, pgx.Tx, *Batch) (any, error) {
				if got[i] != i*10 {
					return nil, fmt.Errorf("write %d prepared with %d", i, got[i])
				}
				return []string{fmt.Sprintf("q-%d", i)}, nil
			}}
	}
	b.run(jobs)
	for i, j := range jobs {
		err := <-j.done
		if errors.Is(err, errAlone) {
			err = b.alone(j)
		}
		var pe *pgconn.PgError
		if i == 4 {
			if !errors.As(err, &pe) || pe.Code != "22012" {
				t.Errorf("write 4: %v, want division_by_zero", err)
			}
		} else if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if c := count(t, pool, "q-%"); c != n-1 {
		t.Errorf("%d queued writes committed, want %d", c, n-1)
	}
}
