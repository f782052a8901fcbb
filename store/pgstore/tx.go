package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/migrations"
)

// errNoChange, returned by a write function, rolls its transaction back
// and reports success: the function found nothing to write (a request that
// exists, a resolution already recorded) and set its results.
var errNoChange = errors.New("no change")

// errCommitUnknown marks a commit whose outcome is unknown: the connection
// failed after COMMIT was sent. The write may or may not have happened; it
// is never retried blindly.
var errCommitUnknown = errors.New("commit outcome unknown")

// write runs fn in a READ COMMITTED transaction and commits it, retrying
// the whole transaction (a new one each time) when PostgreSQL aborts it
// with serialization_failure (40001) or deadlock_detected (40P01), or when
// the connection is lost before COMMIT was sent (the server has then
// rolled it back). ctx is checked before every attempt and after fn, so a
// context done before the commit writes nothing. COMMIT itself is not
// cancelled by ctx: once it is sent its outcome is awaited.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	delay := time.Millisecond
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.ctx.Err() != nil {
			return errClosed
		}
		err, retry := s.writeOnce(ctx, fn)
		if err == nil || !retry || attempt >= s.maxAttempts {
			return err
		}
		if err := sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// writeOnce is one attempt of write; retry tells whether the failure left
// nothing written and may be retried.
func (s *Store) writeOnce(ctx context.Context, fn func(context.Context, pgx.Tx) error) (err error, retry bool) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite})
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
		if errors.Is(err, errNoChange) {
			return nil, false
		}
		if ctx.Err() != nil {
			return ctx.Err(), false
		}
		return err, transient(err) || tx.Conn().IsClosed()
	}
	if err := tx.Commit(bg); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			// The server answered: the transaction is rolled back.
			return err, transient(err)
		}
		return errors.Join(errCommitUnknown, err), false
	}
	return nil, false
}

// read runs fn (a single statement, or statements that need no common
// snapshot) and retries it on the same transient failures as write.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context) error) error {
	delay := time.Millisecond
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.ctx.Err() != nil {
			return errClosed
		}
		err := fn(ctx)
		if err == nil || ctx.Err() != nil || attempt >= s.maxAttempts ||
			!(transient(err) || connLost(err)) {
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if err := sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// transient reports whether err is a failure PostgreSQL asks the client to
// retry: serialization_failure, deadlock_detected, or the server shutting
// the session down (admin_shutdown, crash_shutdown, cannot_connect_now),
// after which the transaction is rolled back.
func transient(err error) bool {
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

// connLost reports whether a read failed because its connection did.
func connLost(err error) bool {
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// sleep waits about d (with jitter) or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
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

// appender hands out the sequences of one write transaction and queues its
// statements, so that everything after the meta row lock is sent in one
// round trip (flush).
type appender struct {
	tx      pgx.Tx
	storeID string
	// latest is the last sequence assigned (initially the stored one).
	latest  uint64
	initial uint64
	b       pgx.Batch
}

// lockMeta locks the meta row for the rest of tx and returns an appender
// continuing from the stored latest sequence. Under READ COMMITTED a
// SELECT ... FOR UPDATE that had to wait returns the row as the previous
// holder committed it, and every later statement of tx sees that holder's
// writes: whatever tx reads after lockMeta is what the previous writer
// left, and no other writer can append before tx ends.
func lockMeta(ctx context.Context, tx pgx.Tx) (*appender, error) {
	a := &appender{tx: tx}
	var n int64
	err := tx.QueryRow(ctx, "SELECT latest_sequence, store_id FROM meta WHERE singleton FOR UPDATE").Scan(&n, &a.storeID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errMetaMissing
	}
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("event log damaged: latest sequence %d", n)
	}
	a.latest, a.initial = uint64(n), uint64(n)
	return a, nil
}

// event gives m the next sequence, queues its insert into the log and
// returns its JSON and sequence.
func (a *appender) event(m *aais.Message, requestID string) ([]byte, int64, error) {
	if a.latest >= aais.MaxSequence {
		return nil, 0, aais.ErrSequenceExhausted
	}
	c := *m
	c.Sequence = a.latest + 1
	b, err := aais.Marshal(&c)
	if err != nil {
		return nil, 0, err
	}
	a.latest = c.Sequence
	seq := int64(c.Sequence)
	a.b.Queue("INSERT INTO events (sequence, type, request_id, json) VALUES ($1, $2, $3, $4)",
		seq, string(c.Type), requestID, b)
	return b, seq, nil
}

// queue adds a statement to the batch.
func (a *appender) queue(sql string, args ...any) { a.b.Queue(sql, args...) }

// flush queues the meta update and the notification (delivered by
// PostgreSQL at commit, and only if the transaction commits) and sends the
// batch. It does nothing when nothing was queued.
func (a *appender) flush(ctx context.Context, channel string) error {
	if a.b.Len() == 0 && a.latest == a.initial {
		return nil
	}
	if a.latest != a.initial {
		a.b.Queue("UPDATE meta SET latest_sequence = $1 WHERE singleton", int64(a.latest))
		a.b.Queue("SELECT pg_notify($1, $2)", channel, a.storeID+":"+strconv.FormatUint(a.latest, 10))
	}
	n := a.b.Len()
	br := a.tx.SendBatch(ctx, &a.b)
	var first error
	for range n {
		if _, err := br.Exec(); err != nil && first == nil {
			first = err
		}
	}
	if err := br.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// loadMigrations returns the embedded migrations in version order.
func loadMigrations() ([]migrations.Migration, error) {
	return migrations.Load(migrationFS, "migrations")
}

// SchemaVersion is the schema version this build creates and reads.
func SchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// MigrationLockKey is the pg_advisory_xact_lock key Open holds while it
// checks and applies migrations: one constant for every custos schema in
// the database ("custos" in ASCII, shifted), so concurrent first opens by
// several replicas apply each migration once.
const MigrationLockKey int64 = 0x637573746f73_0001

// migrate creates the schema when missing and applies the migrations it
// lacks, in one transaction holding the advisory lock MigrationLockKey.
// A replica that starts meanwhile waits for the lock and then finds them
// applied. The store's identity is created with the first migration; a
// schema whose tables exist without it is refused rather than silently
// given a new identity, and so is a schema newer than this build.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", MigrationLockKey); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s.schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			// Checked first: CREATE SCHEMA IF NOT EXISTS needs the
			// CREATE privilege on the database even when the schema
			// exists.
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{s.schema}.Sanitize()); err != nil {
				return err
			}
		}
		// Every name is qualified here, whatever search_path the
		// server settled on.
		q := pgx.Identifier{s.schema}.Sanitize() + "."
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`schema_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var current, n int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0), count(*) FROM "+q+"schema_migrations").Scan(&current, &n); err != nil {
			return err
		}
		if current > len(ms) {
			return fmt.Errorf("%w: schema version %d, this build knows %d", ErrSchemaTooNew, current, len(ms))
		}
		if n != current {
			return fmt.Errorf("schema_migrations damaged: %d rows up to version %d", n, current)
		}
		for _, m := range ms[current:] {
			// Several statements: the simple protocol, with the
			// schema first on the search path for this transaction.
			if _, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true)", pgx.Identifier{s.schema}.Sanitize()); err != nil {
				return err
			}
			if err := tx.Conn().PgConn().Exec(ctx, m.SQL).Close(); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+q+"schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
				return err
			}
			if m.Version == 1 {
				if _, err := tx.Exec(ctx, "INSERT INTO "+q+"meta (store_id) VALUES ($1)", newID()); err != nil {
					return err
				}
			}
		}
		var id string
		err := tx.QueryRow(ctx, "SELECT store_id FROM "+q+"meta WHERE singleton").Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return errMetaMissing
		}
		return err
	})
}
