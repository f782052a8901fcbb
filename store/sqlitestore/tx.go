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
	"time"
)

// write runs fn in one write transaction and commits it. The transaction
// starts with BEGIN IMMEDIATE (the DSN's _txlock), so it holds SQLite's
// single write lock from its first statement: whatever fn reads (the
// latest sequence, whether a request is still pending) stays true until
// the commit, across goroutines, Stores and processes.
//
// ctx is honoured until the commit: a context done before it, while
// waiting for the lock or while fn runs, rolls everything back. A BUSY
// failure anywhere rolls back too, so the whole transaction is retried
// until the busy timeout has passed.
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.wmu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.wmu }()
	return s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		// Last chance to honour a cancellation: nothing is written yet.
		if err := ctx.Err(); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
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
