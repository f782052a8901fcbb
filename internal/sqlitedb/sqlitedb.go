// Package sqlitedb is the SQLite plumbing the durable stores share: one
// database file in WAL mode with full durability, opened by any number of
// handles and processes; group commit through one writer goroutine per
// handle; read transactions on one snapshot; retries while another
// connection holds a lock; prepared hot statements; and versioned
// migrations applied once even when several processes open a new file.
// It knows nothing about what the stores keep.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"

	"github.com/custos-runtime/custos/internal/migrations"
)

// Defaults applied when an Options field is zero.
const (
	// DefaultBusyTimeout is how long a statement waits for a lock another
	// connection (or process) holds before giving up with SQLITE_BUSY.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultMaxConns is the size of the connection pool. Writes are
	// serialised anyway; the other connections serve concurrent readers.
	DefaultMaxConns = 4
	// DefaultMaxBatch caps how many writes share one transaction (and one
	// fsync).
	DefaultMaxBatch = 128
)

// ErrClosed is returned by writes issued after Close.
var ErrClosed = errors.New("sqlitedb: closed")

// Options tunes a DB. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// BusyTimeout bounds the wait for a lock held by another connection
	// or process, per statement and for the retries of BEGIN IMMEDIATE.
	BusyTimeout time.Duration
	// MaxConns caps the connection pool.
	MaxConns int
	// MaxBatch caps how many writes share one transaction.
	MaxBatch int
}

// DB is one open SQLite database file.
type DB struct {
	db          *sql.DB
	path        string
	busyTimeout time.Duration
	maxBatch    int
	// ops queues this handle's writes for the writer goroutine, which
	// runs them in batches (group commit, see Write), so goroutines of
	// one process queue here (and honour ctx) instead of polling SQLite's
	// busy handler. Other processes and handles on the same file are kept
	// out by BEGIN IMMEDIATE.
	ops       chan *writeOp
	quit      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
	closeMu   sync.RWMutex
	closed    bool
	// stmts caches prepared statements by their text (see Prepare).
	stmts sync.Map
	// stats counts committed transactions and the writes they carried.
	stats struct{ commits, writes atomic.Uint64 }
}

// Stats are a DB's counters since Open.
type Stats struct {
	// Commits is how many write transactions committed (each one fsync).
	Commits uint64
	// Writes is how many writes they carried (Write calls, units of work
	// counting once): Writes/Commits is the mean group-commit batch.
	Writes uint64
}

// Stats returns the DB's counters.
func (s *DB) Stats() Stats {
	return Stats{Commits: s.stats.commits.Load(), Writes: s.stats.writes.Load()}
}

// Open opens the database file at path, creating it (mode 0600) and its
// parent directory (mode 0700) when missing, checks that WAL mode and full
// durability are in force, and applies the migrations ms (see Migrate) with
// the hooks in m. A file that is not an SQLite database, or whose schema is
// newer than ms, is refused. o may be nil.
func Open(ctx context.Context, path string, o *Options, m Migrations) (*DB, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errors.New("empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s := &DB{path: abs, busyTimeout: DefaultBusyTimeout, maxBatch: DefaultMaxBatch,
		quit: make(chan struct{}), stopped: make(chan struct{})}
	maxConns := DefaultMaxConns
	if o != nil {
		if o.BusyTimeout > 0 {
			s.busyTimeout = o.BusyTimeout
		}
		if o.MaxConns > 0 {
			maxConns = o.MaxConns
		}
		if o.MaxBatch > 0 {
			s.maxBatch = o.MaxBatch
		}
	}
	s.ops = make(chan *writeOp, s.maxBatch)
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, err
	}
	// Create the file ourselves so that it gets mode 0600 whatever the
	// umask lets SQLite use; SQLite gives the -wal and -shm files the mode
	// of the database file. An existing file is left as it is.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn(abs, s.busyTimeout))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s.db = db
	go s.writer()
	if err := s.init(ctx, m); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	return s, nil
}

// dsn is the driver's connection string: the file as an SQLite URI, and
// the pragmas every connection runs when it is opened.
func dsn(abs string, busy time.Duration) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // Windows: file:///C:/dir/store.db
	}
	u := url.URL{Path: p}
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "1")
	q.Set("_txlock", "immediate")
	// macOS's fsync does not flush the drive's cache; F_FULLFSYNC does.
	// Elsewhere the pragmas are no-ops.
	q.Add("_pragma", "fullfsync(1)")
	q.Add("_pragma", "checkpoint_fullfsync(1)")
	q.Add("_pragma", "trusted_schema(0)")
	// "file:" + escaped path keeps '?', '#' and '%' in file names from
	// being read as URI syntax. Query parameters SQLite does not know (the
	// driver's underscore keys) are ignored by SQLite.
	return "file://" + u.EscapedPath() + "?" + q.Encode()
}

// init checks the connection settings and applies the migrations.
func (s *DB) init(ctx context.Context, m Migrations) error {
	var mode string
	var sync int
	err := s.Retry(ctx, func() error {
		if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			return err
		}
		return s.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync)
	})
	if err != nil {
		return err
	}
	if mode != "wal" {
		return fmt.Errorf("journal_mode is %q, want wal (is the file on a file system without shared memory?)", mode)
	}
	if sync < 2 {
		return fmt.Errorf("synchronous is %d, want FULL (2)", sync)
	}
	return s.Migrate(ctx, m)
}

// Close stops the writer and closes the database. Writes already
// acknowledged are on disk; queued ones fail with ErrClosed.
func (s *DB) Close() error {
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		s.closed = true
		s.closeMu.Unlock()
		close(s.quit)
		<-s.stopped
	})
	return s.db.Close()
}

// Path returns the absolute path of the database file.
func (s *DB) Path() string { return s.path }

// SQL returns the underlying pool, for tests and for reads that need no
// transaction.
func (s *DB) SQL() *sql.DB { return s.db }

// Prepare prepares statements once for the whole pool: a Tx running one
// of these texts reuses the prepared statement on its connection instead
// of parsing the text again. Call it after Open (the tables exist).
func (s *DB) Prepare(ctx context.Context, queries ...string) error {
	for _, q := range queries {
		st, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		if old, loaded := s.stmts.Swap(q, st); loaded {
			_ = old.(*sql.Stmt).Close()
		}
	}
	return nil
}

// Stmt returns the statement Prepare prepared for q, nil when none.
func (s *DB) Stmt(q string) *sql.Stmt {
	v, ok := s.stmts.Load(q)
	if !ok {
		return nil
	}
	return v.(*sql.Stmt)
}

// writeOp is one write waiting for the writer goroutine.
type writeOp struct {
	ctx  context.Context
	fn   func(*Tx) error
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
// goroutines, handles and processes.
//
// Group commit: this DB's writes go through one writer goroutine, which
// runs every write queued while the previous transaction was committing in
// one transaction (see runBatch): they commit together, sharing one fsync,
// and a write whose fn fails is answered alone while the others commit.
// Each write still sees the ones before it in the batch, so sequences stay
// contiguous. A lone writer pays exactly what it did before: nothing waits
// to fill a batch.
//
// ctx is honoured until the writer takes the write: a context done before
// that writes nothing, and one done while fn runs rolls fn back. Once fn
// has run and the batch commits, the write is reported as done even if ctx
// ends meanwhile, because it is on disk; one that ends before the commit
// fails that write alone. A BUSY failure rolls the whole batch back and
// retries it until the busy timeout has passed.
func (s *DB) Write(ctx context.Context, fn func(*Tx) error) error {
	if u := s.joined(ctx); u != nil {
		return u.join(ctx, fn)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	op := &writeOp{ctx: ctx, fn: fn, done: make(chan error, 1)}
	// Queued under the read lock, so that Close, which takes the write
	// lock before stopping the writer, never strands a queued write.
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	select {
	case s.ops <- op:
		s.closeMu.RUnlock()
	case <-ctx.Done():
		s.closeMu.RUnlock()
		return ctx.Err()
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

// writer is the goroutine that runs all of this DB's writes; Close
// stops it.
func (s *DB) writer() {
	defer close(s.stopped)
	batch := make([]*writeOp, 0, s.maxBatch)
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
		for len(batch) < s.maxBatch {
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
func (s *DB) failQueued() {
	for {
		select {
		case op := <-s.ops:
			if op.state.CompareAndSwap(opQueued, opTaken) {
				op.done <- ErrClosed
			}
		default:
			return
		}
	}
}

// runBatch runs the writes of one batch in one transaction and answers
// each of them.
//
// The batch runs optimistically, without savepoints: writes rarely fail
// (a conflict, an unknown request), so paying two extra statements per
// write to isolate failures would cost every batch. When a write fails,
// the transaction is rolled back, that write is answered with its error
// (it saw the same state it would have seen run alone after the writes
// before it), and the batch runs again without it. Each fn starts from
// scratch when run again, so running one twice is harmless.
func (s *DB) runBatch(batch []*writeOp) {
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
	for len(live) > 0 {
		failed, err := s.runOnce(live)
		if failed < 0 {
			if err == nil {
				s.stats.commits.Add(1)
				s.stats.writes.Add(uint64(len(live)))
			}
			for _, op := range live {
				switch {
				case err == nil:
					op.done <- nil
				case op.ctx.Err() != nil:
					op.done <- op.ctx.Err()
				default:
					op.done <- err
				}
			}
			return
		}
		live[failed].done <- err
		live = append(live[:failed:failed], live[failed+1:]...)
	}
}

// runOnce runs ops in one transaction. It returns the index of the first
// op that failed on its own (its fn returned an error other than BUSY, or
// its context ended) with that error, having rolled everything back; or
// -1 and the outcome of the whole transaction.
func (s *DB) runOnce(ops []*writeOp) (failed int, err error) {
	// The batch gives up (waiting for the lock, or before committing)
	// only when every caller in it has.
	bctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var remaining atomic.Int32
	remaining.Store(int32(len(ops)))
	for _, op := range ops {
		stop := context.AfterFunc(op.ctx, func() {
			if remaining.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	failed = -1
	err = s.Retry(bctx, func() error {
		failed = -1
		tx, err := s.db.BeginTx(bctx, nil)
		if err != nil {
			return err
		}
		q := &Tx{tx: tx, s: s, Memo: map[string]any{}}
		for i, op := range ops {
			err := op.fn(q)
			if err == nil {
				err = op.ctx.Err()
			}
			if err == nil {
				continue
			}
			_ = tx.Rollback()
			if IsBusy(err) {
				return err // the whole batch is retried
			}
			failed = i
			return err
		}
		return tx.Commit()
	})
	return failed, err
}

// Tx is the transaction a write or read runs in. Its statements use
// the prepared statements of DB.Prepare when there is one for the text.
type Tx struct {
	tx *sql.Tx
	s  *DB
	// Memo is scratch space for the writes of one write transaction
	// (nil in read transactions): what one write learnt (the latest
	// sequence, say) the next can reuse. A retried or re-run batch starts
	// with an empty Memo.
	Memo map[string]any
}

func (q *Tx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	v, ok := q.s.stmts.Load(query)
	if !ok {
		return nil, nil
	}
	return q.tx.StmtContext(ctx, v.(*sql.Stmt)), nil
}

// ExecContext runs a statement in the transaction.
func (q *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st, _ := q.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query in the transaction.
func (q *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st, _ := q.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, query, args...)
}

// Row is a *sql.Row or the error that kept the query from running.
type Row struct {
	r   *sql.Row
	err error
}

// Scan is sql.Row.Scan.
func (r Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.r.Scan(dest...)
}

// QueryRowContext runs a query returning at most one row.
func (q *Tx) QueryRowContext(ctx context.Context, query string, args ...any) Row {
	if st, _ := q.stmt(ctx, query); st != nil {
		return Row{r: st.QueryRowContext(ctx, args...)}
	}
	return Row{r: q.tx.QueryRowContext(ctx, query, args...)}
}

// read runs fn in one read transaction: every statement in it sees the
// same snapshot of the database (WAL readers never block the writer).
func (s *DB) Read(ctx context.Context, fn func(*Tx) error) error {
	if u := s.joined(ctx); u != nil {
		// Inside a unit of work: its transaction, which sees the unit's
		// own writes.
		return fn(u.tx)
	}
	return s.Retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		err = fn(&Tx{tx: tx, s: s})
		_ = tx.Rollback()
		return err
	})
}

// retry runs fn again while it fails with SQLITE_BUSY or SQLITE_LOCKED,
// until the busy timeout has passed or ctx is done. busy_timeout already
// makes SQLite wait inside most statements; this covers the cases where
// SQLite returns BUSY without calling the busy handler (WAL recovery by
// another connection, for one).
func (s *DB) Retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(s.busyTimeout)
	delay := time.Millisecond
	for {
		err := fn()
		if err == nil || !IsBusy(err) || time.Now().After(deadline) {
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

// IsBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED, extended
// codes included: another connection holds a lock we need.
func IsBusy(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return true
	}
	return false
}

// Migrations says what to apply at Open and what to do around it.
type Migrations struct {
	// FS and Dir hold the NNNN_description.sql files (package
	// internal/migrations).
	FS  fs.FS
	Dir string
	// Applied, if set, runs in the migration transaction after each
	// migration is applied (to seed rows a migration's tables need).
	Applied func(ctx context.Context, tx *Tx, m migrations.Migration) error
	// Check, if set, runs last in the migration transaction, whether or
	// not anything was applied, to refuse a damaged file.
	Check func(ctx context.Context, tx *Tx) error
	// Table records the migrations applied; "" means schema_migrations.
	// Several sets of migrations share one file when each has its own
	// table (see Migrate).
	Table string
}

func (m Migrations) table() string {
	if m.Table == "" {
		return "schema_migrations"
	}
	return m.Table
}

// SchemaVersion is the number of migrations in m.
func (m Migrations) SchemaVersion() int {
	ms, err := migrations.Load(m.FS, m.Dir)
	if err != nil {
		return 0
	}
	return len(ms)
}

// Migrate applies the migrations of m the file lacks, all in one BEGIN
// IMMEDIATE transaction, so two processes opening the same new file apply
// them once: the second waits for the lock and then finds them applied.
// Open applies the set it is given; a file that holds the tables of
// several stores applies each store's set, each recorded in its own
// Migrations.Table.
func (s *DB) Migrate(ctx context.Context, m Migrations) error {
	if m.FS == nil {
		return nil
	}
	ms, err := migrations.Load(m.FS, m.Dir)
	if err != nil {
		return err
	}
	return s.Write(ctx, func(tx *Tx) error {
		table := m.table()
		if !validTable(table) {
			return fmt.Errorf("migrations table %q: want lower-case letters and underscores", table)
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TEXT NOT NULL
		)`); err != nil {
			return err
		}
		var current, n int
		if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0), count(*) FROM "+table).Scan(&current, &n); err != nil {
			return err
		}
		if current > len(ms) {
			return fmt.Errorf("schema version %d is newer than this build supports (%d)", current, len(ms))
		}
		if n != current {
			return fmt.Errorf("%s damaged: %d rows up to version %d", table, n, current)
		}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		for _, mg := range ms[current:] {
			if _, err := tx.ExecContext(ctx, mg.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", mg.Name, err)
			}
			if _, err := tx.ExecContext(ctx,
				"INSERT INTO "+table+" (version, name, applied_at) VALUES (?, ?, ?)",
				mg.Version, mg.Name, now); err != nil {
				return err
			}
			if m.Applied != nil {
				if err := m.Applied(ctx, tx, mg); err != nil {
					return err
				}
			}
		}
		if m.Check != nil {
			return m.Check(ctx, tx)
		}
		return nil
	})
}

func validTable(t string) bool {
	for _, r := range t {
		if (r < 'a' || r > 'z') && r != '_' {
			return false
		}
	}
	return t != ""
}
