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
// write returns. Reads made with the context (Runner.Read, statements
// sent through Reader) run on the unit's transaction too: they see its
// writes and need no second connection. A store may also keep state for
// the transaction (Local), take a lock just before its COMMIT
// (BeforeCommit) and send statements with it (Defer).
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
	// batch is the state of the transaction, shared by the units batched
	// in it (Local, Defer).
	batch *Batch
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

// Tx returns the unit's transaction.
func (u *Unit) Tx() pgx.Tx { return u.tx }

// Local returns what a store keeps under key for the unit's transaction,
// which the units batched in it share (nil when nothing): the audit
// chain's head once locked, say.
func (u *Unit) Local(key any) any { return u.batch.locals[key] }

// SetLocal keeps v under key for the unit's transaction (see Local).
func (u *Unit) SetLocal(key, v any) {
	if u.batch.locals == nil {
		u.batch.locals = make(map[any]any)
	}
	u.batch.locals[key] = v
}

// BeforeCommit has f run in the unit's transaction once every unit
// batched in it has run, before what they deferred and COMMIT are sent:
// a store takes there the lock every unit needs, so that it is held for
// the end of the transaction only. A failure of f fails every unit of
// the transaction, which then run again alone.
func (u *Unit) BeforeCommit(f func(ctx context.Context, tx pgx.Tx) error) {
	u.batch.before = append(u.batch.before, f)
}

// Defer has q queue statements that are sent with the transaction's
// COMMIT, in the same round trip, after the statements queued before. A
// failure of one of them fails every unit of the transaction, which then
// run again alone; a store defers only what it has checked.
func (u *Unit) Defer(q func(*pgx.Batch)) { u.batch.final = append(u.batch.final, q) }

// unitFailed marks the failure of a unit of work run by a Batcher: the
// unit wrote to the batch's transaction, which must therefore not commit.
type unitFailed struct{ err error }

func (e unitFailed) Error() string { return e.err.Error() }
func (e unitFailed) Unwrap() error { return e.err }

// Units runs units of work on one pool, batching concurrent ones.
type Units struct {
	b *Batcher
}

// NewUnits returns units of work on r's pool, up to max per transaction
// (32 when zero) and conns transactions at once (1 when zero): the most
// connections units hold, so that units waiting for a lock never hold
// the whole pool.
func NewUnits(r *Runner, max, conns int) *Units {
	us := &Units{}
	if conns <= 0 {
		conns = 1
	}
	us.b = &Batcher{R: r, Max: max, Conns: conns, Txs: conns, Finish: us.commit}
	return us
}

// commit is the Batcher's Finish: it sends what the units deferred
// (Unit.Defer) and COMMIT.
func (us *Units) commit(ctx context.Context, tx pgx.Tx, prepared []any) error {
	var br pgx.Batch
	if len(prepared) > 0 {
		st := prepared[0].(*Unit).batch
		for _, f := range st.before {
			if err := f(ctx, tx); err != nil {
				return err
			}
		}
		for _, q := range st.final {
			q(&br)
		}
	}
	n := br.Len()
	return SendCommit(ctx, tx, &br, func(r pgx.BatchResults) error {
		for range n {
			if _, err := r.Exec(); err != nil {
				return err
			}
		}
		return nil
	})
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
		u := &Unit{pool: pool, tx: tx, batch: b}
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
