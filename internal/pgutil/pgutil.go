// Package pgutil holds what the PostgreSQL stores of Custos share
// (store/pgstore, store/pgexchange, store/pgaudit, ...): the pool
// configuration (one schema on the search path), transactions retried on
// transient failures, group commit (Batcher), units of work across the
// stores on one pool (Units), and versioned migrations applied under an
// advisory lock.
package pgutil

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/internal/migrations"
)

// DefaultMaxAttempts bounds how often a transaction PostgreSQL aborted as
// a serialization failure or deadlock (or whose connection was lost before
// COMMIT) is tried.
const DefaultMaxAttempts = 10

// MigrationLockKey is the pg_advisory_xact_lock key Migrate holds while it
// checks and applies migrations: one constant for every custos schema and
// every store in the database ("custos" in ASCII, shifted), so concurrent
// first opens by several replicas, and several stores creating one schema,
// serialise and apply each migration once.
const MigrationLockKey int64 = 0x637573746f73_0001

// CheckSchema refuses a schema name PostgreSQL cannot take.
func CheckSchema(schema string) error {
	if schema == "" || len(schema) > 63 || strings.ContainsRune(schema, 0) {
		return fmt.Errorf("schema name %q: 1 to 63 bytes, no NUL", schema)
	}
	return nil
}

// PoolConfig parses dsn (a postgres:// URL or a key=value string, as pgx
// reads it) into a pool configuration whose connections have schema alone
// on their search_path (pg_catalog is always searched first) and
// applicationName as application_name unless the DSN sets one. The pool
// size is maxConns when positive, else the DSN's pool_max_conns, else
// defaultMaxConns.
func PoolConfig(dsn, schema, applicationName string, maxConns, defaultMaxConns int32) (*pgxpool.Config, error) {
	if err := CheckSchema(schema); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	switch {
	case maxConns > 0:
		cfg.MaxConns = maxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		cfg.MaxConns = defaultMaxConns
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["search_path"] = pgx.Identifier{schema}.Sanitize()
	if rp["application_name"] == "" {
		rp["application_name"] = applicationName
	}
	return cfg, nil
}

// ErrNoChange, returned by a write function, rolls its transaction back
// and reports success: the function found nothing to write and set its
// results.
var ErrNoChange = errors.New("no change")

// ErrCommitUnknown marks a commit whose outcome is unknown: the connection
// failed after COMMIT was sent. The write may or may not have happened; it
// is never retried blindly.
var ErrCommitUnknown = errors.New("commit outcome unknown")

// Runner runs transactions on a pool, retrying them on transient
// failures.
type Runner struct {
	Pool *pgxpool.Pool
	// MaxAttempts bounds the tries of one transaction; zero means
	// DefaultMaxAttempts.
	MaxAttempts int
	// Closed, when not nil, is called before every attempt; a non-nil
	// answer (the store is closed) is returned instead of trying.
	Closed func() error
}

func (r *Runner) maxAttempts() int {
	if r.MaxAttempts > 0 {
		return r.MaxAttempts
	}
	return DefaultMaxAttempts
}

func (r *Runner) closed() error {
	if r.Closed == nil {
		return nil
	}
	return r.Closed()
}

// Write runs fn in a READ COMMITTED transaction and commits it, retrying
// the whole transaction (a new one each time) when PostgreSQL aborts it
// with serialization_failure (40001) or deadlock_detected (40P01), or when
// the connection is lost before COMMIT was sent (the server has then
// rolled it back). ctx is checked before every attempt and after fn, so a
// context done before the commit writes nothing. COMMIT itself is not
// cancelled by ctx: once it is sent its outcome is awaited. fn returning
// ErrNoChange rolls back and reports success. Made with the context of a
// unit of work on r's pool (Units), fn runs once in the unit's
// transaction instead, and commits with it.
func (r *Runner) Write(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if u := Joined(ctx, r.Pool); u != nil {
		if err := r.closed(); err != nil {
			return err
		}
		return u.Join(ctx, fn)
	}
	return r.retry(ctx, func() (error, bool) { return r.writeOnce(ctx, fn) })
}

// retry runs once until it succeeds, fails for good (retry false) or has
// been tried MaxAttempts times, with jittered exponential backoff; ctx and
// Closed are checked before every attempt.
func (r *Runner) retry(ctx context.Context, once func() (err error, retry bool)) error {
	delay := time.Millisecond
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.closed(); err != nil {
			return err
		}
		err, retry := once()
		if err == nil || !retry || attempt >= r.maxAttempts() {
			return err
		}
		if err := Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// writeOnce is one attempt of Write; retry tells whether the failure left
// nothing written and may be retried.
func (r *Runner) writeOnce(ctx context.Context, fn func(context.Context, pgx.Tx) error) (err error, retry bool) {
	tx, err := r.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite})
	if err != nil {
		// Nothing was written; a dead pooled connection is worth
		// another try, a done context is not.
		return err, ctx.Err() == nil
	}
	bg := context.WithoutCancel(ctx)
	err = fn(ctx, tx)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		_ = tx.Rollback(bg)
		if errors.Is(err, ErrNoChange) {
			return nil, false
		}
		if ctx.Err() != nil {
			return ctx.Err(), false
		}
		return err, Transient(err) || tx.Conn().IsClosed()
	}
	if err := tx.Commit(bg); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			// The server answered: the transaction is rolled back.
			return err, Transient(err)
		}
		return errors.Join(ErrCommitUnknown, err), false
	}
	return nil, false
}

// Read runs fn (a single statement, or statements that need no common
// snapshot) and retries it on the same transient failures as Write.
//
// Made with the context of a unit of work on r's pool, fn runs once (its
// statements on the unit's transaction, through Reader), and its failure
// fails the unit: PostgreSQL has aborted the transaction.
func (r *Runner) Read(ctx context.Context, fn func(ctx context.Context) error) error {
	if u := Joined(ctx, r.Pool); u != nil {
		if err := r.closed(); err != nil {
			return err
		}
		return u.Join(ctx, func(ctx context.Context, _ pgx.Tx) error { return fn(ctx) })
	}
	delay := time.Millisecond
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.closed(); err != nil {
			return err
		}
		err := fn(ctx)
		if err == nil || ctx.Err() != nil || attempt >= r.maxAttempts() ||
			!(Transient(err) || ConnLost(err)) {
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if err := Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// Transient reports whether err is a failure PostgreSQL asks the client to
// retry: serialization_failure, deadlock_detected, or the server shutting
// the session down (admin_shutdown, crash_shutdown, cannot_connect_now),
// after which the transaction is rolled back.
func Transient(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", "57P01", "57P02", "57P03":
		return true
	}
	return strings.HasPrefix(pe.Code, "08") // connection_exception
}

// ConnLost reports whether a read failed because its connection did.
func ConnLost(err error) bool {
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// Sleep waits about d (with jitter) or until ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Schema describes the versioned migrations of one store in one
// PostgreSQL schema.
type Schema struct {
	// Name is the PostgreSQL schema, created when missing.
	Name string
	// Table records the migrations applied (version, name, applied_at).
	// Each store has its own, so stores may share a schema.
	Table string
	// Migrations are the store's migrations in version order
	// (migrations.Load).
	Migrations []migrations.Migration
	// TooNew is the error a schema newer than Migrations is refused
	// with (wrapped).
	TooNew error
	// Applied, when not nil, runs after each migration applied, in the
	// same transaction (pgstore creates its identity there).
	Applied func(ctx context.Context, tx pgx.Tx, m migrations.Migration) error
}

// Migrate creates the schema when missing and applies the migrations it
// lacks, in tx (run it inside Runner.Write, so that nothing is applied
// unless everything is), after taking pg_advisory_xact_lock
// (MigrationLockKey): replicas starting at once serialise on the lock, the
// first applies the migrations, the others then find them applied. Each
// migration runs with the schema first on the search path, through the
// simple protocol (several statements). A schema newer than the build is
// refused with sc.TooNew.
func Migrate(ctx context.Context, tx pgx.Tx, sc Schema) error {
	if err := CheckSchema(sc.Name); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", MigrationLockKey); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", sc.Name).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		// Checked first: CREATE SCHEMA IF NOT EXISTS needs the CREATE
		// privilege on the database even when the schema exists.
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{sc.Name}.Sanitize()); err != nil {
			return err
		}
	}
	// Every name is qualified here, whatever search_path the server
	// settled on.
	table := pgx.Identifier{sc.Name, sc.Table}.Sanitize()
	// Created only when missing: CREATE TABLE IF NOT EXISTS would need the
	// CREATE privilege on the schema even then, and a role that may only
	// read and write the tables must still be able to open the store.
	var present bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&present); err != nil {
		return err
	}
	if !present {
		if _, err := tx.Exec(ctx, `CREATE TABLE `+table+` (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
	}
	var current, n int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0), count(*) FROM "+table).Scan(&current, &n); err != nil {
		return err
	}
	tooNew := sc.TooNew
	if tooNew == nil {
		tooNew = errors.New("schema is newer than this build")
	}
	if current > len(sc.Migrations) {
		return fmt.Errorf("%w: schema version %d, this build knows %d", tooNew, current, len(sc.Migrations))
	}
	if n != current {
		return fmt.Errorf("%s damaged: %d rows up to version %d", sc.Table, n, current)
	}
	for _, m := range sc.Migrations[current:] {
		if _, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true)", pgx.Identifier{sc.Name}.Sanitize()); err != nil {
			return err
		}
		if err := tx.Conn().PgConn().Exec(ctx, m.SQL).Close(); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return err
		}
		if sc.Applied != nil {
			if err := sc.Applied(ctx, tx, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// MigratePool is Migrate in a transaction of its own on pool.
func MigratePool(ctx context.Context, pool *pgxpool.Pool, sc Schema) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Migrate(ctx, tx, sc) })
}

// SplitDSN removes the custos_schema parameter from a postgres:// URL and
// returns the DSN without it and the schema it named ("" when absent).
// Other DSNs (key=value strings) are returned unchanged.
func SplitDSN(dsn string) (string, string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn, "", nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", errors.New("malformed PostgreSQL URL")
	}
	q := u.Query()
	if !q.Has("custos_schema") {
		return dsn, "", nil
	}
	schema := q.Get("custos_schema")
	q.Del("custos_schema")
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// OpenPool opens a pool on the database dsn names for a store kept in a
// schema: schema when not empty, else the DSN's custos_schema parameter,
// else defaultSchema; it returns the pool and the schema chosen. The pool
// is configured as PoolConfig says.
func OpenPool(ctx context.Context, dsn, schema, defaultSchema, applicationName string, maxConns, defaultMaxConns int32) (*pgxpool.Pool, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	dsn, dsnSchema, err := SplitDSN(dsn)
	if err != nil {
		return nil, "", err
	}
	if schema == "" {
		schema = dsnSchema
	}
	if schema == "" {
		schema = defaultSchema
	}
	cfg, err := PoolConfig(dsn, schema, applicationName, maxConns, defaultMaxConns)
	if err != nil {
		return nil, "", err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	return pool, schema, nil
}

// Migrations are the embedded NNNN_name.sql files of one store.
type Migrations struct {
	FS  fs.FS
	Dir string
}

// Load reads them (package internal/migrations).
func (m Migrations) Load() ([]migrations.Migration, error) { return migrations.Load(m.FS, m.Dir) }

// Version is how many there are: the schema version a build creates and
// reads (0 when they cannot be read, which tests catch).
func (m Migrations) Version() int {
	ms, err := m.Load()
	if err != nil {
		return 0
	}
	return len(ms)
}
