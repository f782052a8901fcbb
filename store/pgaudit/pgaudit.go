package pgaudit

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/internal/migrations"
	"github.com/custos-runtime/custos/internal/pgutil"
)

// Defaults applied when an Options field is zero.
const (
	// DefaultSchema is the PostgreSQL schema of the log's tables when
	// neither Options.Schema nor the DSN's custos_schema parameter names
	// one: the approval store's.
	DefaultSchema = "custos"
	// DefaultMaxConns is the size of a pool Open creates when neither
	// Options.MaxConns nor the DSN's pool_max_conns sets it.
	DefaultMaxConns = 4
	// DefaultMaxBatch caps how many appends share one transaction.
	DefaultMaxBatch = 64
	// DefaultRedactBatch caps how many records one Redact call redacts.
	DefaultRedactBatch = 5000
	// ApplicationName is the application_name of the connections of a
	// pool Open creates, when the DSN sets none.
	ApplicationName = "custos-pgaudit"
	// pageSize is how many records Range reads per statement.
	pageSize = 512
)

// ErrSchemaTooNew: the log's tables were migrated by a newer build.
var ErrSchemaTooNew = errors.New("pgaudit: schema is newer than this build")

// ErrNoLog: Options.MustExist is set and the schema holds no audit log.
var ErrNoLog = errors.New("pgaudit: no audit log in this schema")

// errClosed is returned by calls made after Close.
var errClosed = errors.New("pgaudit: backend closed")

// Options tunes a Backend. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Schema holds the log's tables, created when missing. Zero means
	// the custos_schema parameter of the DSN given to Open, else
	// DefaultSchema. Every Backend on one database and schema extends
	// one chain.
	Schema string
	// MaxConns caps a pool Open creates. Zero means the DSN's
	// pool_max_conns, else DefaultMaxConns. Unused by New.
	MaxConns int32
	// MaxAttempts bounds the tries of one transaction on transient
	// failures (serialization failure, deadlock, connection lost before
	// COMMIT). Zero means pgutil.DefaultMaxAttempts.
	MaxAttempts int
	// MaxBatch caps how many appends of this Backend are committed in
	// one transaction (group commit). Zero means DefaultMaxBatch; 1
	// runs every append in its own transaction.
	MaxBatch int
	// RedactBatch caps how many records one Redact call (one
	// transaction, one purge record) redacts. Zero means
	// DefaultRedactBatch.
	RedactBatch int
	// MustExist refuses, with ErrNoLog, a schema where no log was ever
	// created, instead of creating it (for tools that inspect a log,
	// like custos audit verify). Migrations are still applied.
	MustExist bool
}

// Backend is an audit.Backend kept in a PostgreSQL schema. It is safe for
// concurrent use, and any number of Backends, in one process or in
// several, may use one database and schema: they extend one chain.
type Backend struct {
	pool        *pgxpool.Pool
	ownsPool    bool
	schema      string
	runner      pgutil.Runner
	maxBatch    int
	redactBatch int
	mustExist   bool

	// Statements, with the schema-qualified table names.
	sqlLockHead, sqlLastRecord, sqlInsert, sqlSetHead, sqlRange string
	sqlExpiring, sqlRedact                                      string

	// The group-commit queue: appends wait here for the writer
	// goroutine, which commits up to maxBatch of them per transaction.
	mu      sync.Mutex
	closed  bool
	queue   []*pending
	wake    chan struct{} // cap 1
	quit    chan struct{}
	stopped chan struct{}
	once    sync.Once
	direct  sync.WaitGroup // appends committing in their own goroutine (MaxBatch 1)

	// head caches the last record this Backend committed with its stored
	// JSON: a transaction that finds exactly that JSON as the last row
	// links to the record without parsing the row again (anything else,
	// another replica's append, a redaction, damage, is parsed).
	headMu sync.Mutex
	head   *headRecord
}

type headRecord struct {
	rec  audit.Record
	json []byte
}

// pending is one append waiting for the writer.
type pending struct {
	ctx   context.Context
	build func(last *audit.Record) (audit.Sealed, error)
	done  chan result // cap 1
}

type result struct {
	rec audit.Record
	err error
}

var _ audit.SealedBackend = (*Backend)(nil)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationsTable records the migrations of this package; the log keeps
// its own version count in a schema it may share with other stores.
const migrationsTable = "audit_migrations"

var schemaMigrations = pgutil.Migrations{FS: migrationFS, Dir: "migrations"}

// SchemaVersion is the schema version this build creates and reads.
func SchemaVersion() int { return schemaMigrations.Version() }

// Open connects to the database dsn names (a postgres:// URL, whose
// custos_schema parameter names the schema as for store.Parse, or a
// key=value string, as pgx reads it), creates the schema and tables when
// missing, applies the migrations this build knows and returns a Backend
// that owns the pool and closes it in Close. o may be nil.
func Open(ctx context.Context, dsn string, o *Options) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var oo Options
	if o != nil {
		oo = *o
	}
	pool, schema, err := pgutil.OpenPool(ctx, dsn, oo.Schema, DefaultSchema, ApplicationName, oo.MaxConns, DefaultMaxConns)
	if err != nil {
		return nil, fmt.Errorf("pgaudit: %w", err)
	}
	oo.Schema = schema
	b, err := New(ctx, pool, &oo)
	if err != nil {
		pool.Close()
		return nil, err
	}
	b.ownsPool = true
	return b, nil
}

// New returns a Backend using pool, which Close does not close (the
// approval store's pool, say: pgstore.Store.Pool). Every statement names
// the schema, so the pool's search_path does not matter. It creates the
// schema and tables when missing and applies the migrations. o may be nil.
func New(ctx context.Context, pool *pgxpool.Pool, o *Options) (*Backend, error) {
	if pool == nil {
		return nil, errors.New("pgaudit: nil pool")
	}
	var oo Options
	if o != nil {
		oo = *o
	}
	b := &Backend{
		mustExist: oo.MustExist,
		pool:      pool, schema: oo.Schema, maxBatch: oo.MaxBatch, redactBatch: oo.RedactBatch,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{}),
	}
	if b.schema == "" {
		b.schema = DefaultSchema
	}
	if err := pgutil.CheckSchema(b.schema); err != nil {
		return nil, fmt.Errorf("pgaudit: %w", err)
	}
	if b.maxBatch <= 0 {
		b.maxBatch = DefaultMaxBatch
	}
	if b.redactBatch <= 0 {
		b.redactBatch = DefaultRedactBatch
	}
	b.runner = pgutil.Runner{Pool: pool, MaxAttempts: oo.MaxAttempts, Closed: b.closedErr}
	head := pgx.Identifier{b.schema, "audit_head"}.Sanitize()
	records := pgx.Identifier{b.schema, "audit_records"}.Sanitize()
	b.sqlLockHead = "SELECT last_seq, last_hash FROM " + head + " WHERE singleton FOR UPDATE"
	// Sent in the same round trip as sqlLockHead, after it: under READ
	// COMMITTED its snapshot is taken once the lock is held, so it sees
	// the record the previous holder committed.
	b.sqlLastRecord = "SELECT seq, record FROM " + records + " WHERE seq = (SELECT last_seq FROM " + head + " WHERE singleton)"
	b.sqlInsert = "INSERT INTO " + records + ` (seq, time, kind, message_id, retain_until, prev, hash, record)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	b.sqlSetHead = "UPDATE " + head + " SET last_seq = $1, last_hash = $2 WHERE singleton"
	b.sqlRange = "SELECT seq, record FROM " + records + " WHERE seq >= $1 ORDER BY seq LIMIT $2"
	b.sqlExpiring = "SELECT seq, record FROM " + records + `
		WHERE NOT redacted AND retain_until <> '' AND retain_until < $1
		ORDER BY seq LIMIT $2`
	b.sqlRedact = "UPDATE " + records + " SET redacted = true, message_id = '', record = $1 WHERE seq = $2"
	if err := b.migrate(ctx); err != nil {
		return nil, fmt.Errorf("pgaudit: schema %s: %w", b.schema, err)
	}
	go b.writer()
	return b, nil
}

func (b *Backend) migrate(ctx context.Context) error {
	ms, err := schemaMigrations.Load()
	if err != nil {
		return err
	}
	meta := pgx.Identifier{b.schema, "audit_meta"}.Sanitize()
	sc := pgutil.Schema{
		Name: b.schema, Table: migrationsTable, Migrations: ms, TooNew: ErrSchemaTooNew,
		Applied: func(ctx context.Context, tx pgx.Tx, m migrations.Migration) error {
			if m.Version != 1 {
				return nil
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+meta+" (singleton, log_id) VALUES (true, $1)", newID())
			return err
		},
	}
	return b.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if b.mustExist {
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL",
				pgx.Identifier{b.schema, migrationsTable}.Sanitize()).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return ErrNoLog
			}
		}
		if err := pgutil.Migrate(ctx, tx, sc); err != nil {
			return err
		}
		var id string
		if err := tx.QueryRow(ctx, "SELECT log_id FROM "+meta+" WHERE singleton").Scan(&id); err != nil {
			return fmt.Errorf("log metadata: %w", err)
		}
		return nil
	})
}

func (b *Backend) closedErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	return nil
}

// Close fails the appends still queued, waits for the transaction in
// flight (appends already acknowledged are committed) and closes the pool
// when Open created it.
func (b *Backend) Close() error {
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		q := b.queue
		b.queue = nil
		b.mu.Unlock()
		for _, p := range q {
			p.done <- result{err: errClosed}
		}
		close(b.quit)
		<-b.stopped
		b.direct.Wait()
		if b.ownsPool {
			b.pool.Close()
		}
	})
	return nil
}

// Schema returns the PostgreSQL schema the log is kept in.
func (b *Backend) Schema() string { return b.schema }

// Pool returns the Backend's connection pool. Writing to the log's tables
// through it bypasses every guarantee of this package.
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// ID returns the log's identity, a random id created with the schema.
func (b *Backend) ID(ctx context.Context) (string, error) {
	var id string
	err := b.runner.Read(ctx, func(ctx context.Context) error {
		return pgutil.Reader(ctx, b.pool).QueryRow(ctx, "SELECT log_id FROM "+pgx.Identifier{b.schema, "audit_meta"}.Sanitize()+" WHERE singleton").Scan(&id)
	})
	if err != nil {
		return "", fmt.Errorf("pgaudit: %w", err)
	}
	return id, nil
}

// Head returns the seq and hash the head row holds: those of the last
// record committed (zero for an empty chain). It is kept apart from the
// records, so it may serve as an audit.Anchor for Verify: a tail cut off
// the records table by someone who left the head alone is then reported.
// It is no substitute for an anchor kept outside the database.
func (b *Backend) Head(ctx context.Context) (audit.Anchor, error) {
	var a audit.Anchor
	err := b.runner.Read(ctx, func(ctx context.Context) error {
		var seq int64
		err := pgutil.Reader(ctx, b.pool).QueryRow(ctx, "SELECT last_seq, last_hash FROM "+pgx.Identifier{b.schema, "audit_head"}.Sanitize()+" WHERE singleton").Scan(&seq, &a.Hash)
		a.Seq = uint64(seq)
		return err
	})
	if err != nil {
		return audit.Anchor{}, fmt.Errorf("pgaudit: %w", err)
	}
	return a, nil
}

// Append implements audit.Backend.
func (b *Backend) Append(ctx context.Context, build func(last *audit.Record) (audit.Record, error)) (audit.Record, error) {
	return b.AppendSealed(ctx, audit.Sealing(build))
}

// AppendSealed implements audit.SealedBackend: it stores the JSON build
// returns as it is. With group commit (Options.MaxBatch > 1) the append
// is queued for the Backend's writer, which commits the appends queued
// meanwhile in one transaction; it waits for the outcome even when ctx
// is done (an append whose ctx is done before the commit is taken out of
// its batch and not written).
func (b *Backend) AppendSealed(ctx context.Context, build func(last *audit.Record) (audit.Sealed, error)) (audit.Record, error) {
	if err := ctx.Err(); err != nil {
		return audit.Record{}, err
	}
	p := &pending{ctx: ctx, build: build, done: make(chan result, 1)}
	if u := pgutil.Joined(ctx, b.pool); u != nil {
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return audit.Record{}, errClosed
		}
		return b.appendJoined(ctx, u, p)
	}
	if b.maxBatch == 1 {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return audit.Record{}, errClosed
		}
		b.direct.Add(1)
		b.mu.Unlock()
		defer b.direct.Done()
		b.commit([]*pending{p})
	} else {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return audit.Record{}, errClosed
		}
		b.queue = append(b.queue, p)
		b.mu.Unlock()
		select {
		case b.wake <- struct{}{}:
		default:
		}
		select {
		case r := <-p.done:
			return r.rec, r.err
		case <-ctx.Done():
			// Still queued: leave the queue, nothing was written.
			// Taken by the writer: its transaction drops it before the
			// commit, or has committed it; wait for the answer.
			b.mu.Lock()
			i := slices.Index(b.queue, p)
			if i >= 0 {
				b.queue = slices.Delete(b.queue, i, i+1)
			}
			b.mu.Unlock()
			if i >= 0 {
				return audit.Record{}, ctx.Err()
			}
		}
	}
	r := <-p.done
	return r.rec, r.err
}

// writer commits the queued appends, up to maxBatch per transaction,
// until Close.
func (b *Backend) writer() {
	defer close(b.stopped)
	for {
		select {
		case <-b.quit:
			return
		case <-b.wake:
		}
		for {
			b.mu.Lock()
			n := min(len(b.queue), b.maxBatch)
			batch := b.queue[:n:n]
			b.queue = b.queue[n:]
			if len(b.queue) == 0 {
				b.queue = nil
			}
			b.mu.Unlock()
			if n == 0 {
				break
			}
			b.commit(batch)
		}
	}
}

// errMemberDone aborts a batch transaction one of whose appends' context
// ended before the commit; the batch is run again without it.
var errMemberDone = errors.New("an append's context ended")

// commit writes batch in one transaction and answers every append in it.
// A failing build is answered alone (builds are pure, so the others are
// unaffected); a database failure is every append's.
func (b *Backend) commit(batch []*pending) {
	for len(batch) > 0 {
		live := batch[:0]
		for _, p := range batch {
			if err := p.ctx.Err(); err != nil {
				p.done <- result{err: err}
			} else {
				live = append(live, p)
			}
		}
		batch = live
		if len(batch) == 0 {
			return
		}
		// The transaction's context ends when every append's has.
		tctx, cancel := context.WithCancel(context.Background())
		var (
			mu    sync.Mutex
			ended int
		)
		stops := make([]func() bool, len(batch))
		for i, p := range batch {
			stops[i] = context.AfterFunc(p.ctx, func() {
				mu.Lock()
				ended++
				if ended == len(batch) {
					cancel()
				}
				mu.Unlock()
			})
		}
		out := make([]result, len(batch))
		var head *headRecord
		err := b.runner.Write(tctx, func(ctx context.Context, tx pgx.Tx) error {
			var err error
			if head, err = b.appendIn(ctx, tx, batch, out); err != nil {
				return err
			}
			for i, p := range batch {
				if out[i].err == nil && p.ctx.Err() != nil {
					return errMemberDone
				}
			}
			return nil
		})
		for _, stop := range stops {
			stop()
		}
		allEnded := tctx.Err() != nil
		cancel()
		if errors.Is(err, errMemberDone) ||
			err != nil && allEnded && !errors.Is(err, pgutil.ErrCommitUnknown) {
			// Not committed, and an append's context ended: the
			// ended ones are answered at the top, the others run again.
			continue
		}
		if err == nil && head != nil {
			b.headMu.Lock()
			b.head = head
			b.headMu.Unlock()
		}
		for i, p := range batch {
			r := out[i]
			switch {
			case err != nil:
				r = result{err: fmt.Errorf("pgaudit: %w", err)}
			case r.err != nil:
				r.rec = audit.Record{}
			}
			p.done <- r
		}
		return
	}
}

// appendIn appends the records batch builds in tx, after locking the
// head: out[i] is the answer of batch[i] (a failing build is answered
// alone), and head the new last record. It returns pgutil.ErrNoChange
// when every build failed.
func (b *Backend) appendIn(ctx context.Context, tx pgx.Tx, batch []*pending, out []result) (*headRecord, error) {
	clear(out)
	last, err := b.lockHead(ctx, tx)
	if err != nil {
		return nil, err
	}
	var (
		br   pgx.Batch
		head *headRecord
	)
	for i, p := range batch {
		s, err := p.build(last)
		if err != nil {
			out[i].err = err
			continue
		}
		if err := b.queueInsert(&br, last, s.Record, s.JSON); err != nil {
			out[i].err = err
			continue
		}
		out[i].rec = s.Record
		rec := s.Record
		last = &rec
		head = &headRecord{rec: s.Record, json: s.JSON}
	}
	if head == nil {
		return nil, pgutil.ErrNoChange
	}
	br.Queue(b.sqlSetHead, int64(head.rec.Seq), head.rec.Hash)
	if err := tx.SendBatch(ctx, &br).Close(); err != nil {
		return nil, err
	}
	return head, nil
}

// unitAppends are the appends of the units of work batched in one
// transaction: they take their places in the chain when it commits.
type unitAppends struct {
	pending []*pending
}

// unitKey keys a Backend's unitAppends in a unit's transaction.
type unitKey struct{ b *Backend }

// appendJoined is AppendSealed inside a unit of work (pgutil.Units): the
// record takes its place in the chain when the unit's transaction
// commits. Just before, the transaction locks the head and reads the last
// record (one round trip), the records of its units are sealed after it,
// and they are inserted, with the head's update, in the round trip of the
// COMMIT: the head is locked for that much only, and a unit that fails
// never took it. The Record returned is therefore the zero Record (see
// audit.Backend); a build that fails then fails the transaction, whose
// units run again alone, so that it fails only its own.
func (b *Backend) appendJoined(ctx context.Context, u *pgutil.Unit, p *pending) (audit.Record, error) {
	err := u.Join(ctx, func(context.Context, pgx.Tx) error {
		if ua, ok := u.Local(unitKey{b}).(*unitAppends); ok {
			ua.pending = append(ua.pending, p)
			return nil
		}
		ua := &unitAppends{pending: []*pending{p}}
		u.SetLocal(unitKey{b}, ua)
		var (
			br   pgx.Batch
			head *headRecord
		)
		u.BeforeCommit(func(ctx context.Context, tx pgx.Tx) error {
			last, err := b.lockHead(ctx, tx)
			if err != nil {
				return err
			}
			for _, p := range ua.pending {
				s, err := p.build(last)
				if err != nil {
					return err
				}
				if err := b.queueInsert(&br, last, s.Record, s.JSON); err != nil {
					return err
				}
				rec := s.Record
				last, head = &rec, &headRecord{rec: s.Record, json: s.JSON}
			}
			return nil
		})
		u.Defer(func(q *pgx.Batch) {
			q.QueuedQueries = append(q.QueuedQueries, br.QueuedQueries...)
			q.Queue(b.sqlSetHead, int64(head.rec.Seq), head.rec.Hash)
		})
		pgutil.AfterCommit(ctx, b.pool, func() {
			b.headMu.Lock()
			b.head = head
			b.headMu.Unlock()
		})
		return nil
	})
	if err != nil {
		return audit.Record{}, fmt.Errorf("pgaudit: %w", err)
	}
	return audit.Record{}, nil
}

// lockHead locks the head row and returns the last record (nil for an
// empty chain), in one round trip.
func (b *Backend) lockHead(ctx context.Context, tx pgx.Tx) (*audit.Record, error) {
	var br pgx.Batch
	var headSeq int64
	var headHash string
	br.Queue(b.sqlLockHead).QueryRow(func(row pgx.Row) error {
		return row.Scan(&headSeq, &headHash)
	})
	var seq int64
	var data []byte
	found := false
	br.Queue(b.sqlLastRecord).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&seq, &data); err != nil {
				return err
			}
			found = true
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, &br).Close(); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, errors.New("the audit_head row is missing")
		}
		return nil, err
	}
	switch {
	case headSeq == 0:
		return nil, nil
	case !found:
		return nil, fmt.Errorf("the last record (seq %d) is missing (run verify)", headSeq)
	}
	b.headMu.Lock()
	h := b.head
	b.headMu.Unlock()
	if h != nil && bytes.Equal(h.json, data) {
		rec := h.rec
		return &rec, nil
	}
	rec, err := audit.ParseRecord(data)
	if err != nil {
		return nil, fmt.Errorf("the last record (seq %d) is damaged (run verify): %w", headSeq, err)
	}
	if rec.Seq != uint64(headSeq) || rec.Hash != headHash {
		return nil, fmt.Errorf("the last record (seq %d) does not match the head (run verify)", headSeq)
	}
	return &rec, nil
}

// queueInsert checks rec against last and queues its INSERT.
func (b *Backend) queueInsert(br *pgx.Batch, last *audit.Record, rec audit.Record, data []byte) error {
	if last != nil && rec.Seq <= last.Seq {
		return fmt.Errorf("seq %d is not after the last seq %d", rec.Seq, last.Seq)
	}
	if rec.Seq < 1 || rec.Seq > math.MaxInt64 {
		return fmt.Errorf("seq %d out of range", rec.Seq)
	}
	if len(data) == 0 {
		return errors.New("empty record")
	}
	var retain string
	if !rec.RetainUntil.IsZero() {
		retain = audit.FormatTime(rec.RetainUntil)
	}
	br.Queue(b.sqlInsert, int64(rec.Seq), rec.Time, string(rec.Kind), rec.MessageID, retain,
		rec.Prev, rec.Hash, data)
	return nil
}

// Range implements audit.Backend. It reads pages of pageSize records, each
// with its own statement (and snapshot), so a long export holds neither
// the whole log in memory nor one snapshot open.
func (b *Backend) Range(ctx context.Context, from uint64, fn func(seq uint64, data []byte) error) error {
	if from > math.MaxInt64 {
		return nil
	}
	next := int64(from)
	type row struct {
		seq  int64
		data []byte
	}
	page := make([]row, 0, pageSize)
	for {
		err := b.runner.Read(ctx, func(ctx context.Context) error {
			page = page[:0]
			rows, err := pgutil.Reader(ctx, b.pool).Query(ctx, b.sqlRange, next, pageSize)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.seq, &r.data); err != nil {
					return err
				}
				page = append(page, r)
			}
			return rows.Err()
		})
		if err != nil {
			return fmt.Errorf("pgaudit: %w", err)
		}
		for _, r := range page {
			if r.seq < 1 {
				return fmt.Errorf("pgaudit: stored seq %d is not positive", r.seq)
			}
			if err := fn(uint64(r.seq), r.data); err != nil {
				return err
			}
		}
		if len(page) < pageSize || page[len(page)-1].seq == math.MaxInt64 {
			return nil
		}
		next = page[len(page)-1].seq + 1
	}
}

// Redact implements audit.Backend; it redacts at most Options.RedactBatch
// records per call, in a transaction holding the head lock (so it
// serialises with every replica's appends). A stored record that does not
// parse is left as it is (Verify reports it).
func (b *Backend) Redact(ctx context.Context, now time.Time,
	build func(last *audit.Record, redacted []uint64) (audit.Record, error)) (int, error) {
	var n int
	var head *headRecord
	err := b.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		n, head = 0, nil
		if _, err := b.lockHead(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, b.sqlExpiring, audit.FormatTime(now), b.redactBatch)
		if err != nil {
			return err
		}
		type row struct {
			seq  int64
			data []byte
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
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var br pgx.Batch
		var seqs []uint64
		for _, r := range todo {
			rec, err := audit.ParseRecord(r.data)
			if err != nil || rec.Redacted || rec.RetainUntil.IsZero() || !rec.RetainUntil.Before(now) {
				continue
			}
			data, err := rec.Redact().MarshalJSON()
			if err != nil {
				return err
			}
			br.Queue(b.sqlRedact, data, r.seq)
			seqs = append(seqs, uint64(r.seq))
		}
		if len(seqs) == 0 {
			return pgutil.ErrNoChange
		}
		if err := tx.SendBatch(ctx, &br).Close(); err != nil {
			return err
		}
		// The last record after the redactions (it may be one of them).
		last, err := b.lockHead(ctx, tx)
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
		br = pgx.Batch{}
		if err := b.queueInsert(&br, last, rec, data); err != nil {
			return err
		}
		br.Queue(b.sqlSetHead, int64(rec.Seq), rec.Hash)
		if err := tx.SendBatch(ctx, &br).Close(); err != nil {
			return err
		}
		n, head = len(seqs), &headRecord{rec: rec, json: data}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pgaudit: %w", err)
	}
	if head != nil {
		b.headMu.Lock()
		b.head = head
		b.headMu.Unlock()
	}
	return n, nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
