package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxBatch caps how many writes share one transaction (and one fsync).
const maxBatch = 128

// errClosed is returned by writes issued after Close.
var errClosed = errors.New("store closed")

// writeOp is one write waiting for the writer goroutine.
type writeOp struct {
	ctx  context.Context
	fn   func(*sql.Tx) error
	done chan error // buffered: the writer never blocks on it
	// state moves from opQueued to opTaken (the writer will run it) or to
	// opAbandoned (its caller gave up first; it never runs).
	state atomic.Int32
}

const (
	opQueued int32 = iota
	opTaken
	opAbandoned
)

// write runs fn in a write transaction and returns once that transaction
// has committed (or failed). The transaction starts with BEGIN IMMEDIATE
// (the DSN's _txlock), so it holds SQLite's single write lock from its
// first statement: whatever fn reads (the latest sequence, whether a
// request is still pending) stays true until the commit, across
// goroutines, Stores and processes.
//
// Group commit: this Store's writes go through one writer goroutine, which
// runs every write queued while the previous transaction was committing in
// one transaction, each inside its own SAVEPOINT. A write whose fn fails is
// rolled back to its savepoint alone; the others commit together, sharing
// one fsync. Each write still sees the ones before it in the batch, so
// sequences stay contiguous. A lone writer pays exactly what it did
// before: nothing waits to fill a batch.
//
// ctx is honoured until the writer takes the write: a context done before
// that writes nothing, and one done while fn runs rolls fn back. Once fn
// has run and the batch commits, the write is reported as done even if ctx
// ends meanwhile, because it is on disk. A BUSY failure rolls the whole
// batch back and retries it until the busy timeout has passed.
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op := &writeOp{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return errClosed
	}
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		if op.state.CompareAndSwap(opQueued, opAbandoned) {
			return ctx.Err()
		}
		// The writer has it: its result is the truth.
		return <-op.done
	}
}

// writer is the goroutine that runs all of this Store's writes; Close
// stops it.
func (s *Store) writer() {
	defer close(s.stopped)
	batch := make([]*writeOp, 0, maxBatch)
	for {
		var first *writeOp
		select {
		case first = <-s.ops:
		case <-s.quit:
			s.failQueued()
			return
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxBatch {
			select {
			case op := <-s.ops:
				batch = append(batch, op)
			default:
				break fill
			}
		}
		s.runBatch(batch)
	}
}

// failQueued answers the writes still queued at Close.
func (s *Store) failQueued() {
	for {
		select {
		case op := <-s.ops:
			if op.state.CompareAndSwap(opQueued, opTaken) {
				op.done <- errClosed
			}
		default:
			return
		}
	}
}

// runBatch runs the writes of one batch in one transaction and answers
// each of them.
func (s *Store) runBatch(batch []*writeOp) {
	live := batch[:0:0]
	for _, op := range batch {
		if !op.state.CompareAndSwap(opQueued, opTaken) {
			continue // abandoned by its caller
		}
		if err := op.ctx.Err(); err != nil {
			op.done <- err
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	// The batch gives up (waiting for the lock, or before committing)
	// only when every caller in it has.
	bctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var remaining atomic.Int32
	remaining.Store(int32(len(live)))
	for _, op := range live {
		stop := context.AfterFunc(op.ctx, func() {
			if remaining.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	results := make([]error, len(live))
	err := s.retry(bctx, func() error {
		tx, err := s.db.BeginTx(bctx, nil)
		if err != nil {
			return err
		}
		for i, op := range live {
			results[i] = runOp(tx, op)
			if isBusy(results[i]) {
				_ = tx.Rollback()
				return results[i]
			}
			if results[i] != nil && !errors.Is(results[i], errSavepoint) {
				continue
			}
			if results[i] != nil {
				// The savepoint machinery itself failed: the
				// transaction's state is unknown.
				_ = tx.Rollback()
				return results[i]
			}
		}
		return tx.Commit()
	})
	for i, op := range live {
		switch {
		case err == nil:
			op.done <- results[i]
		case op.ctx.Err() != nil:
			op.done <- op.ctx.Err()
		default:
			op.done <- err
		}
	}
}

var errSavepoint = errors.New("savepoint failed")

// runOp runs one write inside its own savepoint of tx, rolling back to it
// when the write fails or its context ends.
func runOp(tx *sql.Tx, op *writeOp) error {
	bg := context.Background()
	if _, err := tx.ExecContext(bg, "SAVEPOINT w"); err != nil {
		return errors.Join(errSavepoint, err)
	}
	err := op.fn(tx)
	if err == nil {
		err = op.ctx.Err()
	}
	if err != nil {
		if _, rerr := tx.ExecContext(bg, "ROLLBACK TO w"); rerr != nil {
			return errors.Join(errSavepoint, rerr)
		}
	}
	if _, rerr := tx.ExecContext(bg, "RELEASE w"); rerr != nil {
		return errors.Join(errSavepoint, rerr)
	}
	return err
}

// read runs fn in one read transaction: every statement in it sees the
// same snapshot of the database (WAL readers never block the writer).
func (s *Store) read(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		err = fn(tx)
		_ = tx.Rollback()
		return err
	})
}

// retry runs fn again while it fails with SQLITE_BUSY or SQLITE_LOCKED,
// until the busy timeout has passed or ctx is done. busy_timeout already
// makes SQLite wait inside most statements; this covers the cases where
// SQLite returns BUSY without calling the busy handler (WAL recovery by
// another connection, for one).
func (s *Store) retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(s.busyTimeout)
	delay := time.Millisecond
	for {
		err := fn()
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. A file is
// named NNNN_description.sql; versions start at 1 and have no gaps.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_description.sql", base)
		}
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d", m.name, m.version, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the schema version this build creates and reads.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate applies the migrations the file lacks, all in one BEGIN
// IMMEDIATE transaction, so two processes opening the same new file apply
// them once: the second waits for the lock and then finds them applied.
// The store's identity is created with the first migration; a file whose
// schema exists without it is refused rather than silently given a new
// identity.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TEXT NOT NULL
		)`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
			return err
		}
		if current > len(ms) {
			return fmt.Errorf("schema version %d is newer than this build supports (%d)", current, len(ms))
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil {
			return err
		}
		if n != current {
			return fmt.Errorf("schema_migrations damaged: %d rows up to version %d", n, current)
		}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		for _, m := range ms[current:] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.ExecContext(ctx,
				"INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
				m.version, m.name, now); err != nil {
				return err
			}
			if m.version == 1 {
				if _, err := tx.ExecContext(ctx,
					"INSERT INTO meta (singleton, store_id, created_at) VALUES (1, ?, ?)", newID(), now); err != nil {
					return err
				}
			}
		}
		var id string
		err := tx.QueryRowContext(ctx, "SELECT store_id FROM meta WHERE singleton = 1").Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return errMetaMissing
		}
		return err
	})
}
