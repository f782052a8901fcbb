package sqlitedb

import (
	"context"
)

// A unit of work is one write transaction that several stores sharing a
// DB write to: the exchange store, the approval store and the audit log
// of one gateway record one step of a request together, so that no crash
// can keep one of the writes and lose another.
//
// The stores keep their own APIs. Unit hands fn a context that carries
// the transaction; every Write and Read of the same DB made with that
// context (or one derived from it) runs inside the transaction instead of
// starting its own. A joined Write that fails fails the whole unit:
// nothing of it is written, whatever fn does with the error, so a write
// that failed half-way can never be committed with the rest. (Savepoints
// would let fn go on after a failed write, at two statements per write;
// the gateway never goes on, so the unit does not pay for them.) A write
// inside a unit is durable when Unit returns nil, not when the write
// returns.
//
// fn runs on the writer goroutine, in a batch with other writes (group
// commit), and may run more than once when the batch is retried: it must
// do only the unit's reads and writes and what may be repeated, and
// prepare everything else before Unit is called.

type unitKey struct{}

// unit is the transaction a Unit's context carries.
type unit struct {
	db *DB
	tx *Tx
	// failed is the first error of a joined write: the unit fails with it.
	failed error
	// committed runs once the unit has committed (AfterCommit).
	committed []func()
}

// Unit runs fn in one write transaction that every Write and Read of s
// made with fn's context joins (see the comment above), and returns once
// that transaction has committed or failed. A Unit called with a context
// that already carries a unit of s joins it too.
func (s *DB) Unit(ctx context.Context, fn func(ctx context.Context) error) error {
	if u := s.joined(ctx); u != nil {
		return u.join(ctx, func(*Tx) error { return fn(ctx) })
	}
	// A batch that is retried runs fn again with a new unit: the hooks
	// are those of the run that committed.
	var last *unit
	err := s.Write(ctx, func(tx *Tx) error {
		u := &unit{db: s, tx: tx}
		last = u
		err := fn(context.WithValue(ctx, unitKey{}, u))
		if err == nil {
			err = u.failed
		}
		return err
	})
	if err == nil {
		for _, f := range last.committed {
			f()
		}
	}
	return err
}

// AfterCommit runs f once what a write made with ctx is committed: at
// once outside a unit of work (the write has returned, so it committed),
// after the unit's commit inside one (never, if the unit fails). Stores
// use it to tell followers about a change only when it can be read.
func (s *DB) AfterCommit(ctx context.Context, f func()) {
	if u := s.joined(ctx); u != nil {
		u.committed = append(u.committed, f)
		return
	}
	f()
}

// InUnit reports whether ctx carries a unit of work of s.
func (s *DB) InUnit(ctx context.Context) bool { return s.joined(ctx) != nil }

func (s *DB) joined(ctx context.Context) *unit {
	u, _ := ctx.Value(unitKey{}).(*unit)
	if u == nil || u.db != s {
		return nil
	}
	return u
}

// join runs fn inside the unit's transaction; its error fails the unit.
func (u *unit) join(ctx context.Context, fn func(*Tx) error) error {
	if u.failed != nil {
		return u.failed
	}
	err := ctx.Err()
	if err == nil {
		err = fn(u.tx)
	}
	if err != nil {
		u.failed = err
	}
	return err
}
