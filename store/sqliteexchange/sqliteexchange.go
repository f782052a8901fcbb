package sqliteexchange

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/store/internal/rowutil"

	"github.com/custos-runtime/custos/internal/sqlitedb"
)

// Options tunes a Store. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// BusyTimeout bounds the wait for a lock another connection or
	// process holds. Zero means sqlitedb.DefaultBusyTimeout.
	BusyTimeout time.Duration
	// MaxConns caps the connection pool. Zero means
	// sqlitedb.DefaultMaxConns.
	MaxConns int
	// Instance names this Store in ClaimedBy, so that after a crash the
	// gateway can tell its own interrupted exchanges from those another
	// live process is running. A stable name (host and service) lets a
	// restarted process recognise its predecessor's claims. Zero means a
	// random name, new with every Open.
	Instance string
	// Now is the clock for CreatedAt and UpdatedAt. Nil means time.Now.
	Now func() time.Time
}

// Store is the exchange store kept in one SQLite file. It is safe for
// concurrent use; several Stores, in one process or several, may open the
// same file.
type Store struct {
	db *sqlitedb.DB
	// shared: the DB is another's (New), Close leaves it open and marks
	// the Store closed.
	shared   bool
	closed   atomic.Bool
	instance string
	now      func() time.Time
}

//go:embed migrations/*.sql
var migrationFS embed.FS

var schema = sqlitedb.Migrations{FS: migrationFS, Dir: "migrations"}

// SchemaVersion is the schema version this build creates and reads.
func SchemaVersion() int { return schema.SchemaVersion() }

// Open opens the store kept in the database file at path, creating it
// (mode 0600, parent directory 0700) when missing, and applies the schema
// migrations. A file that is not an SQLite database, or whose schema is
// newer than this build, is refused. o may be nil.
func Open(ctx context.Context, path string, o *Options) (*Store, error) {
	s, err := newStore(o)
	if err != nil {
		return nil, err
	}
	var so sqlitedb.Options
	if o != nil {
		so.BusyTimeout, so.MaxConns = o.BusyTimeout, o.MaxConns
	}
	db, err := sqlitedb.Open(ctx, path, &so, schema)
	if err != nil {
		return nil, fmt.Errorf("exchange: %w", err)
	}
	if err := db.Prepare(ctx, hotQueries...); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("exchange: %w", err)
	}
	s.db = db
	return s, nil
}

func newStore(o *Options) (*Store, error) {
	s := &Store{now: time.Now}
	if o != nil {
		s.instance = o.Instance
		if o.Now != nil {
			s.now = o.Now
		}
	}
	if s.instance == "" {
		s.instance = exchange.NewInstance()
	} else if err := exchange.CheckText("instance", s.instance, exchange.MaxID, true); err != nil {
		return nil, err
	}
	return s, nil
}

// New returns the store kept in db, a database file other stores share
// (package store opens it): it applies the store's migrations, recorded
// in exchange_migrations, and prepares its statements. o's BusyTimeout
// and MaxConns are db's and ignored here. Close leaves db open.
func New(ctx context.Context, db *sqlitedb.DB, o *Options) (*Store, error) {
	s, err := newStore(o)
	if err != nil {
		return nil, err
	}
	shared := schema
	shared.Table = "exchange_migrations"
	if err := db.Migrate(ctx, shared); err != nil {
		return nil, fmt.Errorf("exchange: %w", err)
	}
	if err := db.Prepare(ctx, hotQueries...); err != nil {
		return nil, fmt.Errorf("exchange: %w", err)
	}
	s.db, s.shared = db, true
	return s, nil
}

// Close closes the database (not one given to New). Writes already
// acknowledged are on disk.
func (s *Store) Close() error {
	s.closed.Store(true)
	if s.shared {
		return nil
	}
	return s.db.Close()
}

// write and read are the DB's, refused once the Store is closed.
func (s *Store) write(ctx context.Context, fn func(*sqlitedb.Tx) error) error {
	if s.closed.Load() {
		return exchange.ErrClosed
	}
	return s.db.Write(ctx, fn)
}

func (s *Store) read(ctx context.Context, fn func(*sqlitedb.Tx) error) error {
	if s.closed.Load() {
		return exchange.ErrClosed
	}
	return s.db.Read(ctx, fn)
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.db.Path() }

// Instance returns the name this Store records in ClaimedBy.
func (s *Store) Instance() string { return s.instance }

const columns = `id, sender, message_id, correlation_id, capability, approval_id, action_digest,
	state, reply, reply_status, claimed_by, created_at, updated_at, deadline, decision, trace_id, request`

const (
	qByID   = "SELECT " + columns + " FROM exchanges WHERE id = ?"
	qByKey  = "SELECT " + columns + " FROM exchanges WHERE sender = ? AND message_id = ?"
	qInsert = `INSERT INTO exchanges (id, sender, message_id, correlation_id, capability, approval_id,
		action_digest, state, reply, reply_status, claimed_by, created_at, updated_at, deadline, trace_id, request)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`
	qUpdate = `UPDATE exchanges SET state = ?, reply = ?, reply_status = ?, approval_id = ?,
		action_digest = ?, deadline = ?, claimed_by = ?, updated_at = ?, decision = ?
		WHERE id = ? AND state = ?`
	qIdemGet = `SELECT fingerprint, exchange_id, expires_at FROM idempotency
		WHERE scope_from = ? AND scope_to = ? AND payload_type = ? AND idem_key = ?`
	qIdemPut = `INSERT INTO idempotency (scope_from, scope_to, payload_type, idem_key, fingerprint, exchange_id, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope_from, scope_to, payload_type, idem_key) DO UPDATE SET
		fingerprint = excluded.fingerprint, exchange_id = excluded.exchange_id, expires_at = excluded.expires_at`
)

var hotQueries = []string{qByID, qByKey, qInsert, qUpdate, qIdemGet, qIdemPut}

func wrap(err error) error {
	switch {
	case err == nil, errors.Is(err, exchange.ErrNotFound), errors.Is(err, exchange.ErrInvalid),
		errors.Is(err, exchange.ErrIllegalTransition), errors.Is(err, exchange.ErrConflict),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, sqlitedb.ErrClosed):
		return fmt.Errorf("%w: %w", exchange.ErrClosed, err)
	}
	return fmt.Errorf("exchange: %w", err)
}

type scanner interface{ Scan(...any) error }

func scan(r scanner) (exchange.Exchange, error) {
	var (
		x                          exchange.Exchange
		state                      string
		reply, decision, request   []byte
		created, updated, deadline int64
	)
	err := r.Scan(&x.ID, &x.Sender, &x.MessageID, &x.CorrelationID, &x.Capability, &x.ApprovalID,
		&x.ActionDigest, &state, &reply, &x.ReplyStatus, &x.ClaimedBy, &created, &updated, &deadline, &decision, &x.TraceID, &request)
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
	x.CreatedAt, x.UpdatedAt, x.Deadline = rowutil.FromNanos(created), rowutil.FromNanos(updated), rowutil.FromNanos(deadline)
	return x, nil
}

// getTx reads one exchange by id in tx.
func getTx(ctx context.Context, tx *sqlitedb.Tx, id string) (exchange.Exchange, error) {
	x, err := scan(tx.QueryRowContext(ctx, qByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return exchange.Exchange{}, fmt.Errorf("%w: %s", exchange.ErrNotFound, id)
	}
	return x, err
}

// Create records x as a new exchange in state received (or executing,
// claimed by this Store, when x.State is executing: the caller runs it
// at once, without a Claim), with ID (a new
// random one when x.ID is empty), Sender, MessageID, CorrelationID,
// Capability, ApprovalID, ActionDigest and Deadline from x; CreatedAt and
// UpdatedAt are the store's clock. x.State must be "", received or executing, and
// x.Reply, x.ReplyStatus and x.ClaimedBy empty.
//
// If an exchange with the same Sender and MessageID is recorded, Create
// records nothing and returns it with created=false (a retried request),
// whatever its state; x.ID is then ignored. If the recorded one differs in
// Capability or CorrelationID, or in an ApprovalID or ActionDigest both
// give, Create fails with exchange.ErrConflict.
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
	err = s.write(ctx, func(tx *sqlitedb.Tx) error {
		stored, created = exchange.Exchange{}, false
		old, err := scan(tx.QueryRowContext(ctx, qByKey, x.Sender, x.MessageID))
		switch {
		case err == nil:
			if err := exchange.SameRequest(old, x); err != nil {
				return err
			}
			stored = old
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if x.Idempotency != nil {
			prior, found, err := idempotentPrior(ctx, tx, x.Idempotency, s.now())
			if err != nil || found {
				stored = prior
				return err
			}
		}
		now := s.now().UTC()
		state, claimedBy := exchange.Received, ""
		if x.State == exchange.Executing {
			state, claimedBy = exchange.Executing, s.instance
		}
		// The (sender, message id) key was just looked up under the write
		// lock; only the id can clash.
		res, err := tx.ExecContext(ctx, qInsert, id, x.Sender, x.MessageID, x.CorrelationID,
			x.Capability, x.ApprovalID, x.ActionDigest, string(state), claimedBy,
			now.UnixNano(), now.UnixNano(), rowutil.ToNanos(x.Deadline), x.TraceID, nullBytes(x.Request))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("%w: id %s is in use", exchange.ErrConflict, id)
		}
		if k := x.Idempotency; k != nil {
			if _, err := tx.ExecContext(ctx, qIdemPut, k.From, k.To, k.PayloadType, k.Key, k.Fingerprint,
				id, k.ExpiresAt.UnixNano()); err != nil {
				return err
			}
		}
		// What was written, as scan would read it back.
		stored = exchange.Exchange{ID: id, Sender: x.Sender, MessageID: x.MessageID, CorrelationID: x.CorrelationID,
			Capability: x.Capability, ApprovalID: x.ApprovalID, ActionDigest: x.ActionDigest, State: state,
			ClaimedBy: claimedBy, CreatedAt: rowutil.FromNanos(now.UnixNano()), UpdatedAt: rowutil.FromNanos(now.UnixNano()),
			Deadline: rowutil.FromNanos(rowutil.ToNanos(x.Deadline)), TraceID: x.TraceID, Request: json.RawMessage(bytes.Clone(x.Request))}
		created = true
		return nil
	})
	if err != nil {
		return exchange.Exchange{}, false, wrap(err)
	}
	return stored, created, nil
}

// Get returns the exchange with the given id, or exchange.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (exchange.Exchange, error) {
	if err := exchange.CheckText("id", id, exchange.MaxID, true); err != nil {
		return exchange.Exchange{}, err
	}
	var x exchange.Exchange
	err := s.read(ctx, func(tx *sqlitedb.Tx) (err error) {
		x, err = getTx(ctx, tx, id)
		return err
	})
	return x, wrap(err)
}

// BySender returns the exchange of the request sender sent as messageID,
// or exchange.ErrNotFound.
func (s *Store) BySender(ctx context.Context, sender, messageID string) (exchange.Exchange, error) {
	if err := exchange.CheckText("sender", sender, exchange.MaxText, true); err != nil {
		return exchange.Exchange{}, err
	}
	if err := exchange.CheckText("message id", messageID, exchange.MaxText, true); err != nil {
		return exchange.Exchange{}, err
	}
	var x exchange.Exchange
	err := s.read(ctx, func(tx *sqlitedb.Tx) (err error) {
		x, err = scan(tx.QueryRowContext(ctx, qByKey, sender, messageID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s/%s", exchange.ErrNotFound, sender, messageID)
		}
		return err
	})
	return x, wrap(err)
}

// Claim moves exchange id to executing if it is in one of the from states
// (each of which must have a transition to executing: received,
// approved), recording this Store's Instance in ClaimedBy, and returns it
// with claimed=true. If it is in another state, nothing changes and Claim
// returns it as it is with claimed=false. Of several concurrent claimers,
// in goroutines, Store handles or processes, exactly one wins; the winner
// alone may run the action.
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

// Transition moves exchange id from state from to state to, replacing its
// reply when reply is not empty, if it is in state from; it returns it
// with ok=true. If it is in another state, nothing changes and it is
// returned as it is with ok=false. A transition the state machine lacks
// is exchange.ErrIllegalTransition. It is Apply with only a reply.
func (s *Store) Transition(ctx context.Context, id string, from, to exchange.State, reply json.RawMessage, status int) (exchange.Exchange, bool, error) {
	return s.Apply(ctx, id, from, to, exchange.Change{Reply: reply, ReplyStatus: status})
}

// Apply is Transition recording c as well: the approval id and deadline
// when entering pending_approval, the action digest. See exchange.Change.
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
	err := s.write(ctx, func(tx *sqlitedb.Tx) error {
		out, ok = exchange.Exchange{}, false
		cur, err := getTx(ctx, tx, id)
		if err != nil {
			return err
		}
		out = cur
		if !slices.Contains(from, cur.State) {
			return nil
		}
		next, err := exchange.Next(cur, to, c)
		if err != nil {
			return err
		}
		if to == exchange.Executing {
			next.ClaimedBy = s.instance
		}
		next.UpdatedAt = s.now().UTC()
		res, err := tx.ExecContext(ctx, qUpdate, string(next.State), nullBytes(next.Reply), next.ReplyStatus,
			next.ApprovalID, next.ActionDigest, rowutil.ToNanos(next.Deadline), next.ClaimedBy,
			next.UpdatedAt.UnixNano(), nullBytes(next.Decision), id, string(cur.State))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// We hold the write lock and just read the row: this
			// cannot happen. Fail closed.
			return errors.Join(fmt.Errorf("exchange %s: update changed %d rows, want 1", id, n), err)
		}
		if err := s.queue(ctx, tx, next, c); err != nil {
			return err
		}
		// What was written, as scan would read it back.
		next.UpdatedAt = rowutil.FromNanos(next.UpdatedAt.UnixNano())
		next.Idempotency = nil
		next.Reply, next.Decision = json.RawMessage(bytes.Clone(next.Reply)), json.RawMessage(bytes.Clone(next.Decision))
		out, ok = next, true
		return nil
	})
	if err != nil {
		return exchange.Exchange{}, false, wrap(err)
	}
	return out, ok, nil
}

// Waiting returns the exchanges in any of the given states, oldest
// (first received) first: after a restart, the resumer's work list
// (pending_approval: watch the approval; approved: Claim and run).
func (s *Store) Waiting(ctx context.Context, states ...exchange.State) ([]exchange.Exchange, error) {
	if len(states) == 0 {
		return nil, fmt.Errorf("%w: Waiting needs at least one state", exchange.ErrInvalid)
	}
	args := make([]any, len(states))
	for i, st := range states {
		if err := exchange.CheckState(st); err != nil {
			return nil, err
		}
		args[i] = string(st)
	}
	q := "SELECT " + columns + " FROM exchanges WHERE state IN (?" +
		strings.Repeat(", ?", len(states)-1) + ") ORDER BY seq"
	out, err := queryAll(ctx, s, q, args, scan)
	if err != nil {
		return nil, wrap(err)
	}
	return out, nil
}

// queryAll reads every row q returns with scanOne, in one read
// transaction.
func queryAll[T any](ctx context.Context, s *Store, q string, args []any, scanOne func(scanner) (T, error)) ([]T, error) {
	var out []T
	err := s.read(ctx, func(tx *sqlitedb.Tx) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = rowutil.CollectRows(rows, func() (T, error) { return scanOne(rows) })
		return err
	})
	return out, err
}

// Interrupted returns the exchanges in executing, oldest first. After a
// crash their outcome is unknown: the gateway must answer them failed
// (ASC RESULT_STATE_UNKNOWN, Transition executing -> failed), never run
// them again. An exchange another live process is running is listed too:
// check ClaimedBy.
func (s *Store) Interrupted(ctx context.Context) ([]exchange.Exchange, error) {
	return s.Waiting(ctx, exchange.Executing)
}

// Heartbeat records that this Store's instance is alive at now (never
// moving its last heartbeat back).
func (s *Store) Heartbeat(ctx context.Context, now time.Time) error {
	return wrap(s.write(ctx, func(tx *sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO instances (name, seen_at) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET seen_at = max(seen_at, excluded.seen_at)`, s.instance, now.UnixNano())
		return err
	}))
}

// Abandoned returns the exchanges in executing claimed by another
// instance whose last heartbeat is before before, oldest first.
func (s *Store) Abandoned(ctx context.Context, before time.Time) ([]exchange.Exchange, error) {
	q := "SELECT " + columns + ` FROM exchanges WHERE state = ? AND claimed_by <> ?
		AND claimed_by IN (SELECT name FROM instances WHERE seen_at < ?) ORDER BY seq`
	out, err := queryAll(ctx, s, q, []any{string(exchange.Executing), s.instance, before.UnixNano()}, scan)
	if err != nil {
		return nil, wrap(err)
	}
	return out, nil
}

// nullBytes is b for SQL, NULL when empty.
func nullBytes(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}
