package pgutil

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A unit of work is one transaction that several stores sharing a pool
// write to: the exchange store, the approval store and the audit log of
// one gateway record one step of a request together, so that no crash
// and no failure can keep one of the writes and lose another.
//
// The stores keep their own APIs. Units.Run hands fn a context that
// carries the transaction; every Runner.Write and Batcher write on the
// same pool made with that context (or one derived from it) runs inside
// the transaction instead of starting its own, and does not commit. A
// joined write that fails fails the whole unit: nothing of it is
// written, whatever fn does with the error. (PostgreSQL aborts a
// transaction at its first failed statement anyway; savepoints would let
// fn go on, at a round trip per write, and the gateway never goes on.)
// A write inside a unit is durable when Run returns nil, not when the
// write returns. Reads (Runner.Read) are not joined: they see what is
// committed.
//
// Concurrent units are run together, one after another in one
// transaction, by a Batcher (group commit): one commit and one WAL flush
// for the batch. A unit that fails inside a batch has written to the
// batch's transaction, so the batch is rolled back and each of its units
// is run again alone: fn may run more than once, and must do only the
// unit's reads and writes and what may be repeated.

type unitKey struct{}

// Unit is the transaction a unit of work's context carries.
type Unit struct {
	pool *pgxpool.Pool
	tx   pgx.Tx
	// failed is the first error of a joined write: the unit fails with it.
	failed error
	// committed runs once the unit has committed (AfterCommit).
	committed []func()
}

// Joined returns the unit of work ctx carries on pool, or nil.
func Joined(ctx context.Context, pool *pgxpool.Pool) *Unit {
	u, _ := ctx.Value(unitKey{}).(*Unit)
	if u == nil || u.pool != pool {
		return nil
	}
	return u
}

// AfterCommit runs f once what a write made with ctx on pool is
// committed: at once outside a unit of work (the write has returned, so
// it committed), after the unit's commit inside one (never, if it fails).
func AfterCommit(ctx context.Context, pool *pgxpool.Pool, f func()) {
	if u := Joined(ctx, pool); u != nil {
		u.committed = append(u.committed, f)
		return
	}
	f()
}

// Join runs fn inside the unit's transaction. Its error (ErrNoChange
// aside, which is success: fn wrote nothing) fails the unit.
func (u *Unit) Join(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if u.failed != nil {
		return u.failed
	}
	err := ctx.Err()
	if err == nil {
		err = fn(ctx, u.tx)
	}
	if errors.Is(err, ErrNoChange) {
		return nil
	}
	if err != nil {
		u.failed = err
	}
	return err
}

// unitFailed marks the failure of a unit of work run by a Batcher: the
// unit wrote to the batch's transaction, which must therefore not commit.
type unitFailed struct{ err error }

func (e unitFailed) Error() string { return e.err.Error() }
func (e unitFailed) Unwrap() error { return e.err }

// Units runs units of work on one pool, batching concurrent ones.
type Units struct {
	b *Batcher
	// begin runs first in every unit transaction (NewUnits).
	begin func(ctx context.Context, tx pgx.Tx) error
}

// NewUnits returns units of work on r's pool, up to max per transaction
// (32 when zero) and conns transactions at once (1 when zero). begin,
// when not nil, runs first in every transaction: it takes the locks that
// every unit needs, so that units take them in one order (the audit
// chain's head before any row of the stores, say) and never deadlock
// each other.
func NewUnits(r *Runner, max, conns int, begin func(ctx context.Context, tx pgx.Tx) error) *Units {
	us := &Units{begin: begin}
	if conns <= 0 {
		conns = 1
	}
	us.b = &Batcher{R: r, Max: max, Conns: conns, Txs: conns, Finish: us.commit}
	return us
}

// commit is the Batcher's Finish: every write of the units is done.
func (us *Units) commit(ctx context.Context, tx pgx.Tx, _ []any) error {
	return SendCommit(ctx, tx, &pgx.Batch{}, func(pgx.BatchResults) error { return nil })
}

// Run runs fn as one unit of work (see the comment above) and returns
// once its transaction has committed or failed. A Run whose context
// already carries a unit on the same pool joins it.
func (us *Units) Run(ctx context.Context, fn func(ctx context.Context) error) error {
	pool := us.b.R.Pool
	if u := Joined(ctx, pool); u != nil {
		return fn(ctx)
	}
	var last *Unit
	err := us.b.Write(ctx, func(ctx context.Context, tx pgx.Tx, b *Batch) (any, error) {
		if us.begin != nil && b.Claim(beginKey) {
			if err := us.begin(ctx, tx); err != nil {
				return nil, unitFailed{err}
			}
		}
		u := &Unit{pool: pool, tx: tx}
		last = u
		err := fn(context.WithValue(ctx, unitKey{}, u))
		if err == nil {
			err = u.failed
		}
		if err != nil {
			return nil, unitFailed{err}
		}
		return u, nil
	})
	var uf unitFailed
	if errors.As(err, &uf) {
		err = uf.err
	}
	if err == nil && last != nil {
		for _, f := range last.committed {
			f()
		}
	}
	return err
}

// beginKey is the Batch claim of a transaction whose begin ran.
const beginKey = "\x00pgutil.begin"

// Querier is what a read needs: a pool, or a unit's transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Reader returns the transaction of the unit of work ctx carries on pool,
// or pool: a read inside a unit sees the unit's writes, and takes no
// second connection (which, with every connection of the pool held by
// units, would never come).
func Reader(ctx context.Context, pool *pgxpool.Pool) Querier {
	if u := Joined(ctx, pool); u != nil {
		return u.tx
	}
	return pool
}
