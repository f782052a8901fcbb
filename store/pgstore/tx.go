package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/migrations"
	"github.com/custos-runtime/custos/internal/pgutil"
)

// errNoChange, returned by a write function, rolls its transaction back
// and reports success: the function found nothing to write (a request that
// exists, a resolution already recorded) and set its results.
var errNoChange = pgutil.ErrNoChange

// write runs fn in a READ COMMITTED transaction and commits it, retrying
// on transient failures (pgutil.Runner.Write): a context done before the
// commit writes nothing, and a commit whose outcome is unknown is not
// retried (pgutil.ErrCommitUnknown).
// Concurrent writes share a transaction and its commit (pgutil.Batcher)
// unless Options.MaxBatch is 1.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if s.batcher != nil {
		return s.batcher.Write(ctx, fn)
	}
	return s.runner.Write(ctx, fn)
}

// read runs fn (a single statement, or statements that need no common
// snapshot) and retries it on the same transient failures as write.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.runner.Read(ctx, fn)
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
// checks and applies migrations (pgutil.MigrationLockKey): one constant
// for every custos schema and store in the database, so concurrent first
// opens by several replicas apply each migration once.
const MigrationLockKey int64 = pgutil.MigrationLockKey

// migrate creates the schema when missing and applies the migrations it
// lacks, in one transaction holding the advisory lock MigrationLockKey
// (pgutil.Migrate). A replica that starts meanwhile waits for the lock and
// then finds them applied. The store's identity is created with the first
// migration; a schema whose tables exist without it is refused rather
// than silently given a new identity, and so is a schema newer than this
// build.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	q := pgx.Identifier{s.schema}.Sanitize() + "."
	return s.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		err := pgutil.Migrate(ctx, tx, pgutil.Schema{Name: s.schema, Table: "schema_migrations", Migrations: ms,
			TooNew: ErrSchemaTooNew, Applied: func(ctx context.Context, tx pgx.Tx, m migrations.Migration) error {
				if m.Version != 1 {
					return nil
				}
				_, err := tx.Exec(ctx, "INSERT INTO "+q+"meta (store_id) VALUES ($1)", newID())
				return err
			}})
		if err != nil {
			return err
		}
		var id string
		err = tx.QueryRow(ctx, "SELECT store_id FROM "+q+"meta WHERE singleton").Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return errMetaMissing
		}
		return err
	})
}
