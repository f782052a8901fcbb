package pgutil

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// unitStores are a Runner and a Batcher (with Append) on one pool, as two
// stores sharing it.
func unitStores(pool *pgxpool.Pool) (*Runner, *Batcher) {
	b := keysBatcher(pool, 32, 1)
	b.Append = func(ctx context.Context, tx pgx.Tx, p any) error {
		_, err := tx.Exec(ctx, "INSERT INTO t SELECT unnest($1::text[]), txid_current()", p.([]string))
		return err
	}
	return &Runner{Pool: pool}, b
}

// One unit's writes through both stores commit together, see each other
// and run their after-commit hooks only once committed; a unit that fails
// leaves nothing, whatever it wrote first.
func TestUnitsCommitTogether(t *testing.T) {
	pool := batchPool(t)
	r, b := unitStores(pool)
	us := NewUnits(&Runner{Pool: pool}, 0, 1)
	ctx := t.Context()
	step := func(k string, fail error) (hooked bool, err error) {
		err = us.Run(ctx, func(ctx context.Context) error {
			if err := r.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1, txid_current())", k+"/runner")
				return err
			}); err != nil {
				return err
			}
			if err := b.Write(ctx, insert(k+"/batcher")); err != nil {
				return err
			}
			// A read inside the unit sees its writes.
			var n int
			if err := r.Read(ctx, func(ctx context.Context) error {
				return Reader(ctx, pool).QueryRow(ctx, "SELECT count(*) FROM t WHERE k LIKE $1", k+"/%").Scan(&n)
			}); err != nil {
				return err
			}
			if n != 2 {
				return fmt.Errorf("the unit reads %d of its 2 writes", n)
			}
			AfterCommit(ctx, pool, func() { hooked = true })
			return fail
		})
		return hooked, err
	}
	boom := errors.New("boom")
	if hooked, err := step("a", boom); !errors.Is(err, boom) || hooked {
		t.Fatalf("failed unit: %v, hook ran %v", err, hooked)
	}
	if n := count(t, pool, "a/%"); n != 0 {
		t.Fatalf("a failed unit left %d rows", n)
	}
	if hooked, err := step("b", nil); err != nil || !hooked {
		t.Fatalf("unit: %v, hook ran %v", err, hooked)
	}
	var txs int
	if err := pool.QueryRow(ctx, "SELECT count(DISTINCT x) FROM t WHERE k LIKE 'b/%'").Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, "b/%"); n != 2 || txs != 1 {
		t.Fatalf("committed unit: %d rows in %d transactions, want 2 in 1", n, txs)
	}
	// A write that fails inside a unit fails it, even if fn ignores the
	// error.
	err := us.Run(ctx, func(ctx context.Context) error {
		_ = b.Write(ctx, insert("c/1"))
		_ = b.Write(ctx, insert("c/1")) // the primary key refuses it
		return nil
	})
	if err == nil || count(t, pool, "c/%") != 0 {
		t.Fatalf("a unit with a failed write: %v, %d rows", err, count(t, pool, "c/%"))
	}
}

// Units that hold one lock for their whole transaction, read
// inside it and often fail, on a pool smaller than their number: each
// commits or fails alone, none waits forever for a connection (a failed
// batch runs its units alone, and they must neither exhaust the pool nor
// need a second connection for their reads).
func TestUnitsDoNotExhaustThePool(t *testing.T) {
	pool := batchPool(t)
	if _, err := pool.Exec(t.Context(), "CREATE TABLE head (n bigint); INSERT INTO head VALUES (0)"); err != nil {
		t.Fatal(err)
	}
	r, b := unitStores(pool)
	us := NewUnits(&Runner{Pool: pool}, 0, 2)
	lockHead := func(ctx context.Context) error {
		return r.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT n FROM head FOR UPDATE")
			return err
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60e9)
	defer cancel()
	boom := errors.New("boom")
	const n = 64 // pool: 8 connections
	var ok, failed atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k := fmt.Sprintf("u%02d", i)
			err := us.Run(ctx, func(ctx context.Context) error {
				if err := lockHead(ctx); err != nil {
					return err
				}
				if err := b.Write(ctx, insert(k)); err != nil {
					return err
				}
				if err := r.Read(ctx, func(ctx context.Context) error {
					var n int
					return Reader(ctx, pool).QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n)
				}); err != nil {
					return err
				}
				if i%4 == 0 {
					return boom
				}
				return nil
			})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, boom):
				failed.Add(1)
			default:
				t.Errorf("unit %s: %v", k, err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 48 || failed.Load() != 16 || count(t, pool, "u%") != 48 {
		t.Fatalf("%d committed, %d failed, %d rows; want 48, 16, 48", ok.Load(), failed.Load(), count(t, pool, "u%"))
	}
}

// What units defer runs with the COMMIT of their transaction, after their
// BeforeCommit functions, in one transaction with their writes; a
// BeforeCommit that fails fails only its own unit (the others of its
// batch commit).
func TestUnitsBeforeCommitAndDefer(t *testing.T) {
	pool := batchPool(t)
	_, b := unitStores(pool)
	us := NewUnits(&Runner{Pool: pool}, 0, 1)
	boom := errors.New("boom")
	const n = 24
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k := fmt.Sprintf("d%02d", i)
			errs[i] = us.Run(t.Context(), func(ctx context.Context) error {
				if err := b.Write(ctx, insert(k)); err != nil {
					return err
				}
				u := Joined(ctx, pool)
				var seen int
				u.BeforeCommit(func(ctx context.Context, tx pgx.Tx) error {
					if i%5 == 0 {
						return boom
					}
					// Every write of the transaction is in it by now.
					return tx.QueryRow(ctx, "SELECT count(*) FROM t WHERE k = $1", k).Scan(&seen)
				})
				u.Defer(func(q *pgx.Batch) {
					if seen == 1 {
						q.Queue("INSERT INTO t VALUES ($1, txid_current())", k+"/deferred")
					}
				})
				return nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		k := fmt.Sprintf("d%02d", i)
		want := 2
		if i%5 == 0 {
			want = 0
			if !errors.Is(err, boom) {
				t.Errorf("unit %s: %v, want boom", k, err)
			}
		} else if err != nil {
			t.Errorf("unit %s: %v", k, err)
		}
		if got := count(t, pool, k+"%"); got != want {
			t.Errorf("unit %s: %d rows, want %d", k, got, want)
		}
	}
}
