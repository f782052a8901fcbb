package pgexchange

import (
	"cmp"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/internal/pgutil"
	"github.com/custos-runtime/custos/store/internal/rowutil"
)

// Defaults applied when an Options field is zero.
const (
	// DefaultSchema is the PostgreSQL schema the tables live in: the
	// approval store's (store/pgstore), which the exchange store may
	// share, since no table names clash.
	DefaultSchema = "custos"
	// DefaultMaxConns is the size of the connection pool when neither
	// Options.MaxConns nor the DSN's pool_max_conns sets it.
	DefaultMaxConns = 8
	// DefaultDeliveryLease is how long DueDeliveries reserves the
	// deliveries it hands out (see Store.DueDeliveries).
	DefaultDeliveryLease = 5 * time.Minute
	// ApplicationName is the application_name of the pool's connections
	// when the DSN sets none.
	ApplicationName = "custos-exchange"
	// MigrationsTable records the migrations of this store, in its
	// schema (not pgstore's schema_migrations: each store counts its own
	// versions).
	MigrationsTable = "exchange_migrations"
)

// ErrSchemaTooNew: the schema was migrated by a newer build than this one.
var ErrSchemaTooNew = errors.New("pgexchange: schema is newer than this build")

// Options tunes a Store. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Schema is the PostgreSQL schema holding the tables, created when
	// missing. Zero means DefaultSchema.
	Schema string
	// MaxConns caps the connection pool. Zero means the DSN's
	// pool_max_conns, else DefaultMaxConns.
	MaxConns int32
	// MaxAttempts bounds the tries of one transaction on transient
	// failures. Zero means pgutil.DefaultMaxAttempts.
	MaxAttempts int
	// Instance names this Store in ClaimedBy (see exchange.Options): a
	// stable name per replica (host and service) lets a restarted
	// replica recognise its predecessor's claims. Zero means a random
	// name, new with every Open.
	Instance string
	// Now is the clock for CreatedAt, UpdatedAt and the review and
	// delivery times the store sets. Nil means time.Now.
	Now func() time.Time
	// DeliveryLease is how long a delivery DueDeliveries handed out is
	// reserved for the replica that took it. Zero means
	// DefaultDeliveryLease.
	DeliveryLease time.Duration
}

// Store is an exchange.Backend kept in a PostgreSQL schema. It is safe
// for concurrent use, and any number of Stores, in one process or in
// several (replicas of custos serve), may open the same database and
// schema.
type Store struct {
	pool     *pgxpool.Pool
	runner   pgutil.Runner
	schema   string
	instance string
	now      func() time.Time
	lease    time.Duration
	closed   atomic.Bool
	// ownsPool: Open made the pool, and Close closes it.
	ownsPool bool
}

var _ exchange.Backend = (*Store)(nil)

//go:embed migrations/*.sql
var migrationFS embed.FS

var schemaMigrations = pgutil.Migrations{FS: migrationFS, Dir: "migrations"}

// SchemaVersion is the schema version this build creates and reads.
func SchemaVersion() int { return schemaMigrations.Version() }

// Open connects to the PostgreSQL database dsn names (a postgres:// URL or
// a key=value string, as pgx reads it; without store.Parse's
// custos_schema parameter, which goes in Options.Schema), creates the
// schema when missing and applies the migrations this build knows, under
// the advisory lock pgutil.MigrationLockKey, so replicas starting at once
// apply each migration once. A schema newer than this build is refused
// (ErrSchemaTooNew). o may be nil.
func Open(ctx context.Context, dsn string, o *Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o == nil {
		o = &Options{}
	}
	schema := o.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	cfg, err := pgutil.PoolConfig(dsn, schema, ApplicationName, o.MaxConns, DefaultMaxConns)
	if err != nil {
		return nil, fmt.Errorf("pgexchange: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgexchange: %w", err)
	}
	s, err := New(ctx, pool, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

// New returns a Store on pool, which Close does not close: the approval
// store's pool (pgstore.Store.Pool), so that the writes of both join one
// unit of work (pgutil.Units). The pool's connections must have
// o.Schema alone on their search_path (pgutil.PoolConfig). It applies the
// migrations as Open does. o may be nil.
func New(ctx context.Context, pool *pgxpool.Pool, o *Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o == nil {
		o = &Options{}
	}
	s := &Store{pool: pool, schema: o.Schema, instance: o.Instance, now: o.Now, lease: o.DeliveryLease}
	if s.schema == "" {
		s.schema = DefaultSchema
	}
	if err := pgutil.CheckSchema(s.schema); err != nil {
		return nil, fmt.Errorf("pgexchange: %w", err)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.lease <= 0 {
		s.lease = DefaultDeliveryLease
	}
	if s.instance == "" {
		s.instance = exchange.NewInstance()
	} else if err := exchange.CheckText("instance", s.instance, exchange.MaxID, true); err != nil {
		return nil, err
	}
	s.runner = pgutil.Runner{Pool: s.pool, MaxAttempts: o.MaxAttempts, Closed: func() error {
		if s.closed.Load() {
			return exchange.ErrClosed
		}
		return nil
	}}
	ms, err := schemaMigrations.Load()
	if err == nil {
		err = s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
			return pgutil.Migrate(ctx, tx, pgutil.Schema{Name: s.schema, Table: MigrationsTable,
				Migrations: ms, TooNew: ErrSchemaTooNew})
		})
	}
	if err != nil {
		return nil, fmt.Errorf("pgexchange: open schema %s: %w", s.schema, err)
	}
	return s, nil
}

// Close closes the pool when Open made it. Writes already acknowledged
// are committed; calls made after Close fail with exchange.ErrClosed.
func (s *Store) Close() error {
	if !s.closed.Swap(true) && s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// Instance returns the name this Store records in ClaimedBy.
func (s *Store) Instance() string { return s.instance }

// Schema returns the PostgreSQL schema the store is kept in.
func (s *Store) Schema() string { return s.schema }

// Pool returns the store's connection pool, for health checks and
// metrics. Writing to the store's tables through it bypasses every
// guarantee of this package.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

const columns = `id, sender, message_id, correlation_id, capability, approval_id, action_digest,
	state, reply, reply_status, claimed_by, created_at, updated_at, deadline, decision, trace_id, request`

const (
	qByID     = "SELECT " + columns + " FROM exchanges WHERE id = $1"
	qByIDLock = qByID + " FOR UPDATE"
	qByKey    = "SELECT " + columns + " FROM exchanges WHERE sender = $1 AND message_id = $2"
	qInsert   = `INSERT INTO exchanges (id, sender, message_id, correlation_id, capability, approval_id,
		action_digest, state, reply, reply_status, claimed_by, created_at, updated_at, deadline, trace_id, request)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, 0, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (id) DO NOTHING`
	qUpdate = `UPDATE exchanges SET state = $1, reply = $2, reply_status = $3, approval_id = $4,
		action_digest = $5, deadline = $6, claimed_by = $7, updated_at = $8, decision = $9
		WHERE id = $10 AND state = $11`
	qIdemGet = `SELECT fingerprint, exchange_id, expires_at FROM idempotency
		WHERE scope_from = $1 AND scope_to = $2 AND payload_type = $3 AND idem_key = $4`
	qIdemPut = `INSERT INTO idempotency (scope_from, scope_to, payload_type, idem_key, fingerprint, exchange_id, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (scope_from, scope_to, payload_type, idem_key) DO UPDATE SET
		fingerprint = excluded.fingerprint, exchange_id = excluded.exchange_id, expires_at = excluded.expires_at`
)

func wrap(err error) error {
	switch {
	case err == nil, errors.Is(err, exchange.ErrNotFound), errors.Is(err, exchange.ErrInvalid),
		errors.Is(err, exchange.ErrIllegalTransition), errors.Is(err, exchange.ErrConflict),
		errors.Is(err, exchange.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("pgexchange: %w", err)
}

// nullBytes is b for SQL, NULL when empty.
func nullBytes(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

func scan(r pgx.Row) (exchange.Exchange, error) {
	var (
		x                          exchange.Exchange
		state                      string
		reply, decision, request   []byte
		status                     int32
		created, updated, deadline int64
	)
	err := r.Scan(&x.ID, &x.Sender, &x.MessageID, &x.CorrelationID, &x.Capability, &x.ApprovalID,
		&x.ActionDigest, &state, &reply, &status, &x.ClaimedBy, &created, &updated, &deadline, &decision, &x.TraceID, &request)
	if err != nil {
		return exchange.Exchange{}, err
	}
	x.State = exchange.State(state)
	if !x.State.Valid() {
		return exchange.Exchange{}, fmt.Errorf("exchange %s: unknown state %q in the database", x.ID, state)
	}
	if reply != nil {
		x.Reply = json.RawMessage(reply)
	}
	if decision != nil {
		x.Decision = json.RawMessage(decision)
	}
	if request != nil {
		x.Request = json.RawMessage(request)
	}
	x.ReplyStatus = int(status)
	x.CreatedAt, x.UpdatedAt, x.Deadline = rowutil.FromNanos(created), rowutil.FromNanos(updated), rowutil.FromNanos(deadline)
	return x, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// getOne reads one exchange by id with q (qByID or qByIDLock).
func getOne(ctx context.Context, db querier, q, id string) (exchange.Exchange, error) {
	x, err := scan(db.QueryRow(ctx, q, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return exchange.Exchange{}, fmt.Errorf("%w: %s", exchange.ErrNotFound, id)
	}
	return x, err
}

// lock takes a transaction-scoped advisory lock named by parts, in this
// store's schema: the writers of one (sender, message id), or of one
// idempotency key, queue on it, in every replica. Locks are taken in the
// order message key, then idempotency key, so they cannot deadlock.
func (s *Store) lock(ctx context.Context, tx pgx.Tx, parts ...string) error {
	// The parts are UTF-8 without control characters (checkText), so
	// the unit separator cannot be part of one.
	sum := sha256.Sum256([]byte(s.schema + "\x1f" + strings.Join(parts, "\x1f")))
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(binary.BigEndian.Uint64(sum[:8])))
	return err
}

// Create implements exchange.Backend, as exchange.Store.Create does: it
// records x in state received (or executing, claimed by this Store), or
// returns the exchange recorded under the same Sender and MessageID (or
// the same unexpired idempotency key) with created=false. Concurrent
// Creates of one request, in any replica, serialise on an advisory lock
// of (sender, message id) (and of the idempotency key): one creates, the
// others get it.
func (s *Store) Create(ctx context.Context, x exchange.Exchange) (stored exchange.Exchange, created bool, err error) {
	if err := ctx.Err(); err != nil {
		return exchange.Exchange{}, false, err
	}
	if err := exchange.CheckNew(x); err != nil {
		return exchange.Exchange{}, false, err
	}
	id := x.ID
	if id == "" {
		id = exchange.NewID()
	}
	err = s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		stored, created = exchange.Exchange{}, false
		if err := s.lock(ctx, tx, "message", x.Sender, x.MessageID); err != nil {
			return err
		}
		k := x.Idempotency
		if k != nil {
			if err := s.lock(ctx, tx, "idempotency", k.From, k.To, k.PayloadType, k.Key); err != nil {
				return err
			}
		}
		old, err := scan(tx.QueryRow(ctx, qByKey, x.Sender, x.MessageID))
		switch {
		case err == nil:
			if err := exchange.SameRequest(old, x); err != nil {
				return err
			}
			stored = old
			return pgutil.ErrNoChange
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if k != nil {
			prior, found, err := idempotentPrior(ctx, tx, k, s.now())
			if err != nil {
				return err
			}
			if found {
				stored = prior
				return pgutil.ErrNoChange
			}
		}
		now := s.now().UTC()
		state, claimedBy := exchange.Received, ""
		if x.State == exchange.Executing {
			state, claimedBy = exchange.Executing, s.instance
		}
		tag, err := tx.Exec(ctx, qInsert, id, x.Sender, x.MessageID, x.CorrelationID,
			x.Capability, x.ApprovalID, x.ActionDigest, string(state), claimedBy,
			now.UnixNano(), now.UnixNano(), rowutil.ToNanos(x.Deadline), x.TraceID, nullBytes(x.Request))
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%w: id %s is in use", exchange.ErrConflict, id)
		}
		if k != nil {
			if _, err := tx.Exec(ctx, qIdemPut, k.From, k.To, k.PayloadType, k.Key, k.Fingerprint,
				id, k.ExpiresAt.UnixNano()); err != nil {
				return err
			}
		}
		stored, err = getOne(ctx, tx, qByID, id)
		created = err == nil
		return err
	})
	if err != nil {
		return exchange.Exchange{}, false, wrap(err)
	}
	return stored, created, nil
}

// idempotentPrior returns the exchange an unexpired key names (found), or
// ErrKeyReused when that exchange was another request.
func idempotentPrior(ctx context.Context, tx pgx.Tx, k *exchange.Idempotency, now time.Time) (exchange.Exchange, bool, error) {
	var (
		fp, id  string
		expires int64
	)
	err := tx.QueryRow(ctx, qIdemGet, k.From, k.To, k.PayloadType, k.Key).Scan(&fp, &id, &expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return exchange.Exchange{}, false, nil
	case err != nil:
		return exchange.Exchange{}, false, err
	case now.UnixNano() > expires:
		return exchange.Exchange{}, false, nil // expired: Create replaces it
	case fp != k.Fingerprint:
		return exchange.Exchange{}, false, fmt.Errorf("%w (key %q)", exchange.ErrKeyReused, k.Key)
	}
	x, err := getOne(ctx, tx, qByID, id)
	return x, err == nil, err
}

// Get returns the exchange with the given id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (exchange.Exchange, error) {
	if err := exchange.CheckText("id", id, exchange.MaxID, true); err != nil {
		return exchange.Exchange{}, err
	}
	var x exchange.Exchange
	err := s.runner.Read(ctx, func(ctx context.Context) (err error) {
		x, err = getOne(ctx, s.pool, qByID, id)
		return err
	})
	return x, wrap(err)
}

// BySender returns the exchange of the request sender sent as messageID,
// or ErrNotFound.
func (s *Store) BySender(ctx context.Context, sender, messageID string) (exchange.Exchange, error) {
	if err := exchange.CheckText("sender", sender, exchange.MaxText, true); err != nil {
		return exchange.Exchange{}, err
	}
	if err := exchange.CheckText("message id", messageID, exchange.MaxText, true); err != nil {
		return exchange.Exchange{}, err
	}
	var x exchange.Exchange
	err := s.runner.Read(ctx, func(ctx context.Context) (err error) {
		x, err = scan(pgutil.Reader(ctx, s.pool).QueryRow(ctx, qByKey, sender, messageID))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s/%s", exchange.ErrNotFound, sender, messageID)
		}
		return err
	})
	return x, wrap(err)
}

// Claim moves exchange id to executing if it is in one of the from states,
// recording this Store's Instance in ClaimedBy, and returns it with
// claimed=true; otherwise it returns it as it is with claimed=false. The
// transaction locks the row (SELECT ... FOR UPDATE) before it decides, so
// concurrent claimers in every replica queue on it, and each one after the
// winner reads executing: exactly one wins.
func (s *Store) Claim(ctx context.Context, id string, from ...exchange.State) (exchange.Exchange, bool, error) {
	if len(from) == 0 {
		return exchange.Exchange{}, false, fmt.Errorf("%w: Claim needs at least one state to claim from", exchange.ErrInvalid)
	}
	for _, f := range from {
		if err := exchange.CheckState(f); err != nil {
			return exchange.Exchange{}, false, err
		}
		if !exchange.Legal(f, exchange.Executing) {
			return exchange.Exchange{}, false, fmt.Errorf("%w: %s -> %s", exchange.ErrIllegalTransition, f, exchange.Executing)
		}
	}
	return s.change(ctx, id, from, exchange.Executing, exchange.Change{})
}

// Transition is Apply with only a reply.
func (s *Store) Transition(ctx context.Context, id string, from, to exchange.State, reply json.RawMessage, status int) (exchange.Exchange, bool, error) {
	return s.Apply(ctx, id, from, to, exchange.Change{Reply: reply, ReplyStatus: status})
}

// Apply moves exchange id from state from to state to, recording c, if it
// is in state from (ok=true); otherwise nothing changes and it is returned
// as it is (ok=false). A transition the state machine lacks is
// ErrIllegalTransition. The update (UPDATE ... WHERE id = $1 AND state =
// $2, on the row locked FOR UPDATE) and everything c queues (review,
// deliveries, key release) commit in one transaction.
func (s *Store) Apply(ctx context.Context, id string, from, to exchange.State, c exchange.Change) (exchange.Exchange, bool, error) {
	if err := exchange.CheckState(from); err != nil {
		return exchange.Exchange{}, false, err
	}
	if err := exchange.CheckState(to); err != nil {
		return exchange.Exchange{}, false, err
	}
	if !exchange.Legal(from, to) {
		return exchange.Exchange{}, false, fmt.Errorf("%w: %s -> %s", exchange.ErrIllegalTransition, from, to)
	}
	return s.change(ctx, id, []exchange.State{from}, to, c)
}

// change is Claim and Apply: from is legal towards to.
func (s *Store) change(ctx context.Context, id string, from []exchange.State, to exchange.State, c exchange.Change) (exchange.Exchange, bool, error) {
	if err := ctx.Err(); err != nil {
		return exchange.Exchange{}, false, err
	}
	if err := exchange.CheckTransition(id, to, c); err != nil {
		return exchange.Exchange{}, false, err
	}
	var (
		out exchange.Exchange
		ok  bool
	)
	err := s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		out, ok = exchange.Exchange{}, false
		cur, err := getOne(ctx, tx, qByIDLock, id)
		if err != nil {
			return err
		}
		out = cur
		if !inStates(cur.State, from) {
			return pgutil.ErrNoChange
		}
		next, err := exchange.Next(cur, to, c)
		if err != nil {
			return err
		}
		if to == exchange.Executing {
			next.ClaimedBy = s.instance
		}
		next.UpdatedAt = s.now().UTC()
		tag, err := tx.Exec(ctx, qUpdate, string(next.State), nullBytes(next.Reply), int32(next.ReplyStatus),
			next.ApprovalID, next.ActionDigest, rowutil.ToNanos(next.Deadline), next.ClaimedBy,
			next.UpdatedAt.UnixNano(), nullBytes(next.Decision), id, string(cur.State))
		if err != nil {
			return err
		}
		if n := tag.RowsAffected(); n != 1 {
			// We hold the row lock and just read the row: this
			// cannot happen. Fail closed.
			return fmt.Errorf("exchange %s: update changed %d rows, want 1", id, n)
		}
		if err := s.queue(ctx, tx, next, c); err != nil {
			return err
		}
		out, err = getOne(ctx, tx, qByID, id)
		ok = err == nil
		return err
	})
	if err != nil {
		return exchange.Exchange{}, false, wrap(err)
	}
	return out, ok, nil
}

func inStates(s exchange.State, states []exchange.State) bool {
	for _, t := range states {
		if s == t {
			return true
		}
	}
	return false
}

// queue writes what a transition queues, in its transaction.
func (s *Store) queue(ctx context.Context, tx pgx.Tx, x exchange.Exchange, c exchange.Change) error {
	now := s.now().UTC().UnixNano()
	if r := c.Review; r != nil {
		if _, err := tx.Exec(ctx, `INSERT INTO reviews (exchange_id, mode, profile, sender, capability, outcome,
			created_at, due_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			x.ID, r.Mode, r.Profile, x.Sender, x.Capability, string(x.State), now, r.DueAt.UnixNano()); err != nil {
			return err
		}
	}
	if c.ReleaseKey {
		if _, err := tx.Exec(ctx, "DELETE FROM idempotency WHERE exchange_id = $1", x.ID); err != nil {
			return err
		}
	}
	for _, d := range c.Deliveries {
		if _, err := tx.Exec(ctx, `INSERT INTO deliveries (exchange_id, url, envelope, next_attempt)
			VALUES ($1, $2, $3, $4)`, x.ID, d.URL, []byte(d.Envelope), now); err != nil {
			return err
		}
	}
	return nil
}

// Waiting returns the exchanges in any of the given states, oldest
// (first received, by seq) first.
func (s *Store) Waiting(ctx context.Context, states ...exchange.State) ([]exchange.Exchange, error) {
	if len(states) == 0 {
		return nil, fmt.Errorf("%w: Waiting needs at least one state", exchange.ErrInvalid)
	}
	names := make([]string, len(states))
	for i, st := range states {
		if err := exchange.CheckState(st); err != nil {
			return nil, err
		}
		names[i] = string(st)
	}
	return s.queryExchanges(ctx, "SELECT "+columns+" FROM exchanges WHERE state = ANY($1) ORDER BY seq", names)
}

// queryExchanges reads every exchange q selects (its columns), in one
// statement.
func (s *Store) queryExchanges(ctx context.Context, q string, args ...any) ([]exchange.Exchange, error) {
	var out []exchange.Exchange
	err := s.runner.Read(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := pgutil.Reader(ctx, s.pool).Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = rowutil.CollectRows(rows, func() (exchange.Exchange, error) { return scan(rows) })
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	return out, nil
}

// Interrupted returns the exchanges in executing, oldest first; those
// other live replicas are running are listed too: check ClaimedBy.
func (s *Store) Interrupted(ctx context.Context) ([]exchange.Exchange, error) {
	return s.Waiting(ctx, exchange.Executing)
}

// Heartbeat records that this Store's instance is alive at now (never
// moving its last heartbeat back).
func (s *Store) Heartbeat(ctx context.Context, now time.Time) error {
	return wrap(s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO instances (name, seen_at) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET seen_at = GREATEST(instances.seen_at, excluded.seen_at)`, s.instance, now.UnixNano())
		return err
	}))
}

// Abandoned returns the exchanges in executing claimed by another
// replica whose last heartbeat is before before, oldest first.
func (s *Store) Abandoned(ctx context.Context, before time.Time) ([]exchange.Exchange, error) {
	return s.queryExchanges(ctx, "SELECT "+columns+` FROM exchanges WHERE state = $1 AND claimed_by <> $2
		AND claimed_by IN (SELECT name FROM instances WHERE seen_at < $3) ORDER BY seq`,
		string(exchange.Executing), s.instance, before.UnixNano())
}

// PurgeIdempotency deletes the idempotency keys expired at now and returns
// how many.
func (s *Store) PurgeIdempotency(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM idempotency WHERE expires_at < $1", now.UnixNano())
		n = tag.RowsAffected()
		return err
	})
	return int(n), wrap(err)
}

const reviewColumns = `exchange_id, mode, profile, sender, capability, outcome, created_at, due_at,
	reviewed_at, reviewer, verdict, justification, timed_out`

const qReview = "SELECT " + reviewColumns + " FROM reviews WHERE exchange_id = $1"

func scanReview(r pgx.Row) (exchange.Review, error) {
	var (
		v                      exchange.Review
		outcome, verdict       string
		created, due, reviewed int64
		out                    int32
	)
	if err := r.Scan(&v.ExchangeID, &v.Mode, &v.Profile, &v.Sender, &v.Capability, &outcome, &created, &due,
		&reviewed, &v.Reviewer, &verdict, &v.Justification, &out); err != nil {
		return exchange.Review{}, err
	}
	v.Outcome, v.Verdict, v.TimedOut = exchange.State(outcome), exchange.Verdict(verdict), out == 1
	v.CreatedAt, v.DueAt, v.ReviewedAt = rowutil.FromNanos(created), rowutil.FromNanos(due), rowutil.FromNanos(reviewed)
	return v, nil
}

// getReview reads the review of an exchange with q.
func getReview(ctx context.Context, db querier, q, exchangeID string) (exchange.Review, error) {
	r, err := scanReview(db.QueryRow(ctx, q, exchangeID))
	if errors.Is(err, pgx.ErrNoRows) {
		return exchange.Review{}, fmt.Errorf("%w: no review for %s", exchange.ErrNotFound, exchangeID)
	}
	return r, err
}

// Reviews lists reviews, those due first.
func (s *Store) Reviews(ctx context.Context, f exchange.ReviewFilter) ([]exchange.Review, error) {
	q := "SELECT " + reviewColumns + " FROM reviews"
	var (
		where []string
		args  []any
	)
	if f.Open || !f.Overdue.IsZero() {
		where = append(where, "reviewed_at = 0")
	}
	if !f.Overdue.IsZero() {
		args = append(args, f.Overdue.UnixNano())
		where = append(where, fmt.Sprintf("due_at <= $%d", len(args)))
	}
	if f.NotTimedOut {
		where = append(where, "timed_out = 0")
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	args = append(args, f.Limit)
	q += fmt.Sprintf(` ORDER BY reviewed_at <> 0, due_at, exchange_id COLLATE "C" LIMIT $%d`, len(args))
	var out []exchange.Review
	err := s.runner.Read(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := pgutil.Reader(ctx, s.pool).Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = rowutil.CollectRows(rows, func() (exchange.Review, error) { return scanReview(rows) })
		return err
	})
	return out, wrap(err)
}

// GetReview returns the review of an exchange, or ErrNotFound.
func (s *Store) GetReview(ctx context.Context, exchangeID string) (exchange.Review, error) {
	if err := exchange.CheckText("exchange id", exchangeID, exchange.MaxID, true); err != nil {
		return exchange.Review{}, err
	}
	var r exchange.Review
	err := s.runner.Read(ctx, func(ctx context.Context) (err error) {
		r, err = getReview(ctx, s.pool, qReview, exchangeID)
		return err
	})
	return r, wrap(err)
}

// CompleteReview records a reviewer's verdict on an open review and
// returns it with done=true; a review already completed is returned as it
// is with done=false, unless the same reviewer gave the same verdict and
// justification (a retry). The review row is locked first, so of
// concurrent reviewers in every replica one completes it.
func (s *Store) CompleteReview(ctx context.Context, exchangeID, reviewer string, v exchange.Verdict, justification string) (exchange.Review, bool, error) {
	if v != exchange.Accepted && v != exchange.Flagged {
		return exchange.Review{}, false, fmt.Errorf("%w: verdict %q (want accepted or flagged)", exchange.ErrInvalid, v)
	}
	if err := exchange.CheckText("exchange id", exchangeID, exchange.MaxID, true); err != nil {
		return exchange.Review{}, false, err
	}
	if err := exchange.CheckText("reviewer", reviewer, exchange.MaxText, true); err != nil {
		return exchange.Review{}, false, err
	}
	if len(justification) > 4000 || !utf8.ValidString(justification) || strings.ContainsRune(justification, 0) {
		return exchange.Review{}, false, fmt.Errorf("%w: justification must be UTF-8 without NUL of at most 4000 bytes", exchange.ErrInvalid)
	}
	var (
		out  exchange.Review
		done bool
	)
	err := s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
		out, done = exchange.Review{}, false
		if out, err = getReview(ctx, tx, qReview+" FOR UPDATE", exchangeID); err != nil {
			return err
		}
		if !out.Open() {
			done = out.Reviewer == reviewer && out.Verdict == v && out.Justification == justification
			return pgutil.ErrNoChange
		}
		if _, err := tx.Exec(ctx, `UPDATE reviews SET reviewed_at = $1, reviewer = $2, verdict = $3, justification = $4
			WHERE exchange_id = $5 AND reviewed_at = 0`, s.now().UTC().UnixNano(), reviewer, string(v), justification, exchangeID); err != nil {
			return err
		}
		done = true
		out, err = getReview(ctx, tx, qReview, exchangeID)
		return err
	})
	if err != nil {
		return exchange.Review{}, false, wrap(err)
	}
	return out, done, nil
}

// MarkTimedOut records that an oversight_timeout was raised for an open
// review; ok is false when it was already marked or is closed. The
// UPDATE's row lock makes one caller, in every replica, the winner: the
// others re-check the row after it committed and change nothing.
func (s *Store) MarkTimedOut(ctx context.Context, exchangeID string) (bool, error) {
	if err := exchange.CheckText("exchange id", exchangeID, exchange.MaxID, true); err != nil {
		return false, err
	}
	var ok bool
	err := s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE reviews SET timed_out = 1 WHERE exchange_id = $1 AND timed_out = 0 AND reviewed_at = 0", exchangeID)
		ok = tag.RowsAffected() == 1
		return err
	})
	return ok, wrap(err)
}

// ReviewCounts returns how many reviews are open and how many of those are
// overdue at now.
func (s *Store) ReviewCounts(ctx context.Context, now time.Time) (open, overdue int, err error) {
	err = s.runner.Read(ctx, func(ctx context.Context) error {
		return pgutil.Reader(ctx, s.pool).QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE due_at <= $1) FROM reviews WHERE reviewed_at = 0`,
			now.UnixNano()).Scan(&open, &overdue)
	})
	return open, overdue, wrap(err)
}

// DueDeliveries returns up to limit undelivered envelopes due at now, in
// order; an exchange's later envelopes wait for its earlier ones (until
// delivered or given up).
//
// With several replicas, each due delivery is handed to one of them: the
// rows are selected FOR UPDATE SKIP LOCKED (a replica taking deliveries
// concurrently skips them instead of waiting) and, in the same
// transaction, leased by moving next_attempt to now + Options.DeliveryLease.
// Until the lease ends no other replica is handed the delivery; Delivered
// or DeliveryFailed (which sets the next attempt) ends it. A replica that
// dies while it holds a lease leaves the delivery due again when the lease
// ends, and another replica posts it: delivery is at least once (a
// receiver may get an envelope twice, and must be idempotent), never
// concurrently by two replicas as long as the post finishes within the
// lease. The returned NextAttempt is the one before the lease.
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]exchange.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []exchange.Delivery
	err := s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `WITH due AS (
			SELECT d.seq, d.next_attempt FROM deliveries d
			WHERE d.delivered_at = 0 AND d.given_up = 0 AND d.next_attempt <= $1
			AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.exchange_id = d.exchange_id AND e.seq < d.seq
				AND e.delivered_at = 0 AND e.given_up = 0)
			ORDER BY d.seq LIMIT $2
			FOR UPDATE SKIP LOCKED
		)
		UPDATE deliveries x SET next_attempt = $3 FROM due WHERE x.seq = due.seq
		RETURNING x.seq, x.exchange_id, x.url, x.envelope, x.attempts, due.next_attempt, x.last_error`,
			now.UnixNano(), limit, now.Add(s.lease).UnixNano())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				d        exchange.Delivery
				env      []byte
				attempts int32
				next     int64
			)
			if err := rows.Scan(&d.Seq, &d.ExchangeID, &d.URL, &env, &attempts, &next, &d.LastError); err != nil {
				return err
			}
			d.Envelope, d.Attempts, d.NextAttempt = env, int(attempts), rowutil.FromNanos(next)
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, wrap(err)
	}
	// UPDATE ... RETURNING does not keep the CTE's order.
	slices.SortFunc(out, func(a, b exchange.Delivery) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Delivered records a delivery as done.
func (s *Store) Delivered(ctx context.Context, seq int64) error {
	return wrap(s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE deliveries SET delivered_at = $1, attempts = attempts + 1 WHERE seq = $2",
			s.now().UTC().UnixNano(), seq)
		return err
	}))
}

// DeliveryFailed records a failed attempt: the next one is due at next,
// or, when giveUp, none is. failure is kept as UTF-8 text of at most 1024
// bytes.
func (s *Store) DeliveryFailed(ctx context.Context, seq int64, failure string, next time.Time, giveUp bool) error {
	failure = cleanText(failure, exchange.MaxText)
	given := int32(0)
	if giveUp {
		given = 1
	}
	return wrap(s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE deliveries SET attempts = attempts + 1, last_error = $1, next_attempt = $2,
			given_up = $3 WHERE seq = $4`, failure, next.UnixNano(), given, seq)
		return err
	}))
}
