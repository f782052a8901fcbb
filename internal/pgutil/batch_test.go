package pgutil

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
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
	if _, err := pool.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()+"; CREATE TABLE t (k text PRIMARY KEY)"); err != nil {
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

// Concurrent writes through a Batcher: each gets the answer it would get
// alone — a failing one its own error with nothing written, ErrNoChange
// success with nothing written, the others committed — and a write whose
// context ends before the commit writes nothing.
func TestBatcher(t *testing.T) {
	pool := batchPool(t)
	b := &Batcher{R: &Runner{Pool: pool}, Max: 16}
	errBoom := errors.New("boom")
	var wg sync.WaitGroup
	results := make([]error, 60)
	for i := range results {
		wg.Go(func() {
			results[i] = b.Write(t.Context(), func(ctx context.Context, tx pgx.Tx) error {
				switch i % 3 {
				case 1: // writes, then fails: nothing of it may stay
					if _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", fmt.Sprintf("fail-%d", i)); err != nil {
						return err
					}
					return errBoom
				case 2:
					return ErrNoChange
				}
				_, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", fmt.Sprintf("ok-%d", i))
				return err
			})
		})
	}
	wg.Wait()
	for i, err := range results {
		want := map[int]error{0: nil, 1: errBoom, 2: nil}[i%3]
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("write %d: %v, want %v", i, err, want)
		}
	}
	if n := count(t, pool, "ok-%"); n != 20 {
		t.Errorf("%d successful writes committed, want 20", n)
	}
	if n := count(t, pool, "fail-%"); n != 0 {
		t.Errorf("%d rows of failed writes committed", n)
	}
	// A duplicate key inside a batch fails that write alone.
	var dup sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		dup.Go(func() {
			errs[i] = b.Write(t.Context(), func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO t VALUES ('same')")
				return err
			})
		})
	}
	dup.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok != 1 || count(t, pool, "same") != 1 {
		t.Errorf("8 inserts of one key: %d succeeded (%v), want 1", ok, errs)
	}
	// A context cancelled while its write waits for the commit.
	ctx, cancel := context.WithCancel(t.Context())
	release := make(chan struct{})
	var late sync.WaitGroup
	late.Go(func() {
		_ = b.Write(t.Context(), func(ctx context.Context, tx pgx.Tx) error {
			<-release // holds the batch open
			_, err := tx.Exec(ctx, "INSERT INTO t VALUES ('first')")
			return err
		})
	})
	var lateErr error
	late.Go(func() {
		lateErr = b.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
			cancel()
			_, err := tx.Exec(ctx, "INSERT INTO t VALUES ('cancelled')")
			return err
		})
	})
	close(release)
	late.Wait()
	if !errors.Is(lateErr, context.Canceled) || count(t, pool, "cancelled") != 0 {
		t.Errorf("a write cancelled before the commit: %v, %d rows", lateErr, count(t, pool, "cancelled"))
	}
	if count(t, pool, "first") != 1 {
		t.Error("the other write of that batch was lost")
	}
}
