package sqliteaudit

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/internal/migrations"
	"github.com/custos-runtime/custos/internal/sqlitedb"
)

// Defaults applied when an Options field is zero.
const (
	// DefaultBusyTimeout bounds the wait for the write lock held by
	// another connection or process.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultMaxConns is the size of the connection pool.
	DefaultMaxConns = 4
	// DefaultMaxBatch caps how many appends share one transaction.
	DefaultMaxBatch = 128
	// DefaultRedactBatch caps how many records one Redact call redacts.
	DefaultRedactBatch = 5000
	// pageSize is how many records Range reads per read transaction.
	pageSize = 512
)

// Options tunes a Backend. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// BusyTimeout bounds the wait for a lock another connection or process
	// holds. Zero means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// MaxConns caps the connection pool. Zero means DefaultMaxConns.
	MaxConns int
	// MaxBatch caps how many appends are committed together (group
	// commit). Zero means DefaultMaxBatch; 1 commits every append alone.
	MaxBatch int
	// RedactBatch caps how many records one Redact call (one transaction,
	// one purge record) redacts. Zero means DefaultRedactBatch.
	RedactBatch int
}

// Backend is an audit.Backend kept in one SQLite file. It is safe for
// concurrent use, and several Backends, in one process or several, may
// open the same file: they then extend one chain. Concurrent appends share
// one transaction and one fsync (group commit, package internal/sqlitedb).
type Backend struct {
	db          *sqlitedb.DB
	redactBatch int
	// shared: the DB is another's (New), Close leaves it open.
	shared bool

	// head is the last record this Backend inserted, with its stored
	// JSON: a parse cache. A transaction that finds exactly that JSON as
	// the last row links to the record without parsing the row again
	// (the record is what ParseRecord gives for that JSON, whether or not
	// the transaction that inserted it committed); anything else (another
	// process appended, a purge rewrote the row) is read and parsed.
	headMu sync.Mutex
	head   *headRecord
}

// headRecord is the cached head. rec shares its maps with the record the
// append returned; audit.Log reads only Seq and Hash of the last record.
type headRecord struct {
	rec  audit.Record
	json string
}

var _ audit.SealedBackend = (*Backend)(nil)

//go:embed migrations/*.sql shared/*.sql
var migrationFS embed.FS

// schema is how Open migrates a file of the log's own: the log's identity
// is created with the first migration; the second gives the tables the
// names they have in a shared file (sharedSchema, for New), so one set of
// statements serves both. The two sets are kept parallel: a change to the
// tables is a new migration in each.
var schema = sqlitedb.Migrations{
	FS:      migrationFS,
	Dir:     "migrations",
	Applied: seedMeta("meta"),
	Check:   checkMeta,
}

var sharedSchema = sqlitedb.Migrations{
	FS:      migrationFS,
	Dir:     "shared",
	Table:   "audit_migrations",
	Applied: seedMeta("audit_meta"),
	Check:   checkMeta,
}

// seedMeta creates the log's identity in the first migration's table.
func seedMeta(table string) func(ctx context.Context, tx *sqlitedb.Tx, m migrations.Migration) error {
	return func(ctx context.Context, tx *sqlitedb.Tx, m migrations.Migration) error {
		if m.Version != 1 {
			return nil
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (singleton, log_id, created_at) VALUES (1, ?, ?)",
			newID(), time.Now().UTC().Format(time.RFC3339Nano))
		return err
	}
}

func checkMeta(ctx context.Context, tx *sqlitedb.Tx) error {
	var id string
	if err := tx.QueryRowContext(ctx, "SELECT log_id FROM audit_meta WHERE singleton = 1").Scan(&id); err != nil {
		return fmt.Errorf("log metadata: %w", err)
	}
	return nil
}

// SchemaVersion is the schema version this build creates and reads.
func SchemaVersion() int { return schema.SchemaVersion() }

// Open opens the audit log kept in the SQLite file at path, creating the
// file (mode 0600) and its directory (mode 0700) when missing, and applies
// the schema migrations. A file that is not an SQLite database, on which
// WAL cannot be enabled, or whose schema is newer than this build, is
// refused. o may be nil.
func Open(ctx context.Context, path string, o *Options) (*Backend, error) {
	b := &Backend{redactBatch: DefaultRedactBatch}
	so := sqlitedb.Options{BusyTimeout: DefaultBusyTimeout, MaxConns: DefaultMaxConns, MaxBatch: DefaultMaxBatch}
	if o != nil {
		if o.BusyTimeout > 0 {
			so.BusyTimeout = o.BusyTimeout
		}
		if o.MaxConns > 0 {
			so.MaxConns = o.MaxConns
		}
		if o.MaxBatch > 0 {
			so.MaxBatch = o.MaxBatch
		}
		if o.RedactBatch > 0 {
			b.redactBatch = o.RedactBatch
		}
	}
	db, err := sqlitedb.Open(ctx, path, &so, schema)
	if err != nil {
		return nil, fmt.Errorf("sqliteaudit: %w", err)
	}
	b.db = db
	if err := db.Prepare(ctx, sqlLast, sqlInsert); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqliteaudit: %w", err)
	}
	return b, nil
}

// New returns the log kept in db, a database file other stores share
// (package store opens it): it applies the log's migrations, recorded in
// audit_migrations, and prepares its statements. Only o.RedactBatch is
// used: the rest is db's. Close leaves db open.
func New(ctx context.Context, db *sqlitedb.DB, o *Options) (*Backend, error) {
	b := &Backend{redactBatch: DefaultRedactBatch, db: db, shared: true}
	if o != nil && o.RedactBatch > 0 {
		b.redactBatch = o.RedactBatch
	}
	if err := db.Migrate(ctx, sharedSchema); err != nil {
		return nil, fmt.Errorf("sqliteaudit: %w", err)
	}
	if err := db.Prepare(ctx, sqlLast, sqlInsert); err != nil {
		return nil, fmt.Errorf("sqliteaudit: %w", err)
	}
	return b, nil
}

// Close stops the writer and closes the database (not one given to
// New). Appends already acknowledged are on disk; queued ones fail.
func (b *Backend) Close() error {
	if b.shared {
		return nil
	}
	return b.db.Close()
}

// Path returns the absolute path of the database file.
func (b *Backend) Path() string { return b.db.Path() }

// ID returns the log's identity, a random id created with the schema.
func (b *Backend) ID(ctx context.Context) (string, error) {
	var id string
	err := b.db.Retry(ctx, func() error {
		return b.db.SQL().QueryRowContext(ctx, "SELECT log_id FROM audit_meta WHERE singleton = 1").Scan(&id)
	})
	if err != nil {
		return "", fmt.Errorf("sqliteaudit: %w", err)
	}
	return id, nil
}

// The statements of the append path, prepared once at Open.
const (
	sqlLast   = "SELECT json FROM audit_records ORDER BY seq DESC LIMIT 1"
	sqlInsert = `INSERT INTO audit_records (seq, time, kind, message_id, retain_until, redacted, prev, hash, json)
		VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)`
)

// memoLast is the key, in sqlitedb.Tx.Memo, of the last record appended
// in the current transaction: the appends of one group commit link to it
// instead of reading and parsing the previous row again. A re-run
// transaction starts with an empty Memo and reads it from the table.
const memoLast = "sqliteaudit.last"

// Append implements audit.Backend.
func (b *Backend) Append(ctx context.Context, build func(last *audit.Record) (audit.Record, error)) (audit.Record, error) {
	return b.AppendSealed(ctx, audit.Sealing(build))
}

// AppendSealed implements audit.SealedBackend: it stores the JSON build
// returns as it is, so the only work under the write lock is build
// (linking and hashing) and one prepared INSERT.
func (b *Backend) AppendSealed(ctx context.Context, build func(last *audit.Record) (audit.Sealed, error)) (audit.Record, error) {
	var out audit.Record
	err := b.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		last, _ := tx.Memo[memoLast].(*audit.Record)
		if last == nil {
			var err error
			if last, err = b.lastRecord(ctx, tx); err != nil {
				return err
			}
		}
		s, err := build(last)
		if err != nil {
			return err
		}
		if err := b.insert(ctx, tx, last, s.Record, s.JSON); err != nil {
			return err
		}
		out = s.Record
		return nil
	})
	if err != nil {
		return audit.Record{}, fmt.Errorf("sqliteaudit: %w", err)
	}
	return out, nil
}

// lastRecord is the package's lastRecord, reusing the record this Backend
// last committed when the row holds exactly its JSON.
func (b *Backend) lastRecord(ctx context.Context, tx *sqlitedb.Tx) (*audit.Record, error) {
	var data string
	err := tx.QueryRowContext(ctx, sqlLast).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b.headMu.Lock()
	h := b.head
	b.headMu.Unlock()
	if h != nil && h.json == data {
		rec := h.rec
		return &rec, nil
	}
	return parseLast(data)
}

// lastRecord reads the record with the highest seq, nil when none.
func lastRecord(ctx context.Context, tx *sqlitedb.Tx) (*audit.Record, error) {
	var data string
	err := tx.QueryRowContext(ctx, sqlLast).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseLast(data)
}

func parseLast(data string) (*audit.Record, error) {
	rec, err := audit.ParseRecord([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("the last record is damaged (run verify): %w", err)
	}
	return &rec, nil
}

// insert stores rec, whose stored form is data, after last, and makes it
// the transaction's last record and the Backend's cached head.
func (b *Backend) insert(ctx context.Context, tx *sqlitedb.Tx, last *audit.Record, rec audit.Record, data []byte) error {
	if last != nil && rec.Seq <= last.Seq {
		return fmt.Errorf("seq %d is not after the last seq %d", rec.Seq, last.Seq)
	}
	var retain string
	if !rec.RetainUntil.IsZero() {
		retain = audit.FormatTime(rec.RetainUntil)
	}
	js := string(data)
	_, err := tx.ExecContext(ctx, sqlInsert,
		int64(rec.Seq), audit.FormatTime(rec.Time), string(rec.Kind), rec.MessageID, retain,
		rec.Prev, rec.Hash, js)
	if err != nil {
		return err
	}
	if tx.Memo != nil {
		tx.Memo[memoLast] = &rec
	}
	b.headMu.Lock()
	b.head = &headRecord{rec: rec, json: js}
	b.headMu.Unlock()
	return nil
}

// Range implements audit.Backend. It reads pages of records, each in its
// own read transaction, so a long export does not hold one snapshot open.
func (b *Backend) Range(ctx context.Context, from uint64, fn func(seq uint64, data []byte) error) error {
	if from > 1<<63-1 {
		return nil
	}
	next := int64(from)
	first := true
	for {
		type row struct {
			seq  int64
			data []byte
		}
		var page []row
		err := b.db.Read(ctx, func(tx *sqlitedb.Tx) error {
			page = page[:0]
			op := ">"
			if first {
				op = ">="
			}
			rows, err := tx.QueryContext(ctx,
				"SELECT seq, json FROM audit_records WHERE seq "+op+" ? ORDER BY seq LIMIT ?", next, pageSize)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var r row
				var s string
				if err := rows.Scan(&r.seq, &s); err != nil {
					return err
				}
				r.data = []byte(s)
				page = append(page, r)
			}
			return rows.Err()
		})
		if err != nil {
			return fmt.Errorf("sqliteaudit: %w", err)
		}
		for _, r := range page {
			if r.seq < 1 {
				return fmt.Errorf("sqliteaudit: stored seq %d is not positive", r.seq)
			}
			if err := fn(uint64(r.seq), r.data); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		next, first = page[len(page)-1].seq, false
	}
}

// Redact implements audit.Backend; it redacts at most Options.RedactBatch records
// per call. A stored record that does not parse is left as it is (Verify
// reports it).
func (b *Backend) Redact(ctx context.Context, now time.Time,
	build func(last *audit.Record, redacted []uint64) (audit.Record, error)) (int, error) {
	var n int
	err := b.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		n = 0
		rows, err := tx.QueryContext(ctx, `SELECT seq, json FROM audit_records
			WHERE redacted = 0 AND retain_until <> '' AND retain_until < ?
			ORDER BY seq LIMIT ?`, audit.FormatTime(now), b.redactBatch)
		if err != nil {
			return err
		}
		type row struct {
			seq  int64
			data string
		}
		var todo []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.seq, &r.data); err != nil {
				rows.Close()
				return err
			}
			todo = append(todo, r)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		var seqs []uint64
		for _, r := range todo {
			rec, err := audit.ParseRecord([]byte(r.data))
			if err != nil || rec.Redacted || rec.RetainUntil.IsZero() || !rec.RetainUntil.Before(now) {
				continue
			}
			data, err := rec.Redact().MarshalJSON()
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "UPDATE audit_records SET redacted = 1, message_id = '', json = ? WHERE seq = ?",
				string(data), r.seq); err != nil {
				return err
			}
			seqs = append(seqs, uint64(r.seq))
		}
		if len(seqs) == 0 {
			return nil
		}
		last, err := lastRecord(ctx, tx)
		if err != nil {
			return err
		}
		rec, err := build(last, seqs)
		if err != nil {
			return err
		}
		data, err := rec.MarshalJSON()
		if err != nil {
			return err
		}
		if err := b.insert(ctx, tx, last, rec, data); err != nil {
			return err
		}
		n = len(seqs)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqliteaudit: %w", err)
	}
	return n, nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
