package sqlitestore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/migrations"
	"github.com/custos-runtime/custos/internal/sqlitedb"
)

// Defaults applied when an Options field is zero.
const (
	// DefaultBusyTimeout is how long a statement waits for a lock another
	// connection (or process) holds before giving up with SQLITE_BUSY.
	DefaultBusyTimeout = sqlitedb.DefaultBusyTimeout
	// DefaultMaxConns is the size of the connection pool. Writes are
	// serialised anyway; the other connections serve concurrent readers.
	DefaultMaxConns = sqlitedb.DefaultMaxConns
)

// Options tunes a Store. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// BusyTimeout bounds the wait for a lock held by another connection
	// or process, per statement and for the retries of BEGIN IMMEDIATE.
	// Zero means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// MaxConns caps the connection pool. Zero means DefaultMaxConns.
	MaxConns int
}

// Store is an aais.Store kept in one SQLite database file. It is safe for
// concurrent use, and several Stores, in one process or in several, may
// open the same file: they then share one event stream. Concurrent writes
// of one Store share one transaction and one fsync (group commit, package
// internal/sqlitedb).
type Store struct {
	db *sqlitedb.DB
	// shared: the DB is another's (New), Close leaves it open.
	shared bool
}

var _ aais.VoteStore = (*Store)(nil)

//go:embed migrations/*.sql
var migrationFS embed.FS

// schema is how Open migrates a file: the store's identity is created with
// the first migration, and a file whose schema exists without it is
// refused rather than silently given a new identity.
var schema = sqlitedb.Migrations{
	FS:  migrationFS,
	Dir: "migrations",
	Applied: func(ctx context.Context, tx *sqlitedb.Tx, m migrations.Migration) error {
		if m.Version != 1 {
			return nil
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO meta (singleton, store_id, created_at) VALUES (1, ?, ?)",
			newID(), time.Now().UTC().Format(time.RFC3339Nano))
		return err
	},
	Check: func(ctx context.Context, tx *sqlitedb.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, "SELECT store_id FROM meta WHERE singleton = 1").Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return errMetaMissing
		}
		return err
	},
}

// SchemaVersion is the schema version this build creates and reads.
func SchemaVersion() int { return schema.SchemaVersion() }

// Open opens the store kept in the database file at path, creating the
// file (mode 0600) and its parent directory (mode 0700) when missing, and
// applies the schema migrations this build knows. A file that is not an
// SQLite database, or whose schema is newer than this build, is refused.
// o may be nil.
func Open(ctx context.Context, path string, o *Options) (*Store, error) {
	var so sqlitedb.Options
	if o != nil {
		so.BusyTimeout, so.MaxConns = o.BusyTimeout, o.MaxConns
	}
	db, err := sqlitedb.Open(ctx, path, &so, schema)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	if err := db.Prepare(ctx, hotQueries...); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	return &Store{db: db}, nil
}

// New returns the store kept in db, a database file other stores share
// (package store opens it): it applies the store's migrations, recorded
// in schema_migrations as in a file of its own, and prepares its
// statements. Close leaves db open.
func New(ctx context.Context, db *sqlitedb.DB) (*Store, error) {
	if err := db.Migrate(ctx, schema); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	if err := db.Prepare(ctx, hotQueries...); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	return &Store{db: db, shared: true}, nil
}

// Close closes the database (not one given to New). Writes already
// acknowledged are on disk.
func (s *Store) Close() error {
	if s.shared {
		return nil
	}
	return s.db.Close()
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.db.Path() }

// ID returns the store's identity, the StoreID of every EventPage.
func (s *Store) ID(ctx context.Context) (string, error) {
	var id string
	err := s.db.Retry(ctx, func() error {
		return s.db.SQL().QueryRowContext(ctx, "SELECT store_id FROM meta WHERE singleton = 1").Scan(&id)
	})
	if err != nil {
		return "", fmt.Errorf("sqlitestore: %w", err)
	}
	return id, nil
}

// Reset forgets every request, resolution and event and takes a new
// identity, as a backend does when it recovers from lost state. Presenters
// notice through EventPage.Gap and StoreID. It is meant for tests and
// operators; every Store open on the file sees the reset.
func (s *Store) Reset(ctx context.Context) error {
	return s.write(ctx, func(tx *sqlitedb.Tx) error {
		for _, q := range []string{
			"DELETE FROM rules",
			"DELETE FROM votes",
			"DELETE FROM resolutions",
			"DELETE FROM requests",
			"DELETE FROM events",
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, "UPDATE meta SET store_id = ? WHERE singleton = 1", newID())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(errMetaMissing, err)
		}
		return nil
	})
}

var errMetaMissing = errors.New("store metadata row missing")

// The statements every approval cycle runs. Open prepares them once;
// transactions reuse them, so SQLite does not parse them again for every
// write.
const (
	qRequest = `SELECT e.json, r.fingerprint, r.owner
		FROM requests r JOIN events e ON e.sequence = r.sequence WHERE r.id = ?`
	qInsertRequest    = "INSERT INTO requests (id, fingerprint, sequence, owner) VALUES (?, ?, ?, ?)"
	qRuleRevoked      = "SELECT revoked FROM rules WHERE id = ?"
	qInsertResolution = "INSERT INTO resolutions (request_id, decision_fingerprint, sequence, by_rule) VALUES (?, ?, ?, ?)"
	qRequestState     = `SELECT e.json, r.fingerprint, r.owner, f.json, s.decision_fingerprint
		FROM requests r JOIN events e ON e.sequence = r.sequence
		LEFT JOIN resolutions s ON s.request_id = r.id LEFT JOIN events f ON f.sequence = s.sequence
		WHERE r.id = ?`
	qResolution = `SELECT f.json, s.decision_fingerprint
		FROM requests r LEFT JOIN resolutions s ON s.request_id = r.id LEFT JOIN events f ON f.sequence = s.sequence
		WHERE r.id = ?`
	qInsertEvent = "INSERT INTO events (sequence, type, request_id, json) VALUES (?, ?, ?, ?)"
	qLatest      = "SELECT coalesce(max(sequence), 0) FROM events"
	qRules       = "SELECT json FROM rules"
)

var hotQueries = []string{qRequest, qInsertRequest, qRuleRevoked, qInsertResolution, qRequestState,
	qResolution, qInsertEvent, qLatest, qRules}

func newID() string {
	var b [16]byte
	// crypto/rand.Read never returns an error since Go 1.24.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CreateRequestIfAbsent implements aais.Store.
func (s *Store) CreateRequestIfAbsent(ctx context.Context, rec aais.RequestRecord) (aais.RequestRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return aais.RequestRecord{}, false, err
	}
	if err := aais.CheckRequestRecord(rec); err != nil {
		return aais.RequestRecord{}, false, err
	}
	p, err := prepareRequest(rec)
	if err != nil {
		return aais.RequestRecord{}, false, err
	}
	var (
		stored  storedRequest
		created bool
	)
	err = s.write(ctx, func(tx *sqlitedb.Tx) (err error) {
		stored, created, err = createTx(ctx, tx, p)
		return err
	})
	if err != nil {
		return aais.RequestRecord{}, false, wrap(err)
	}
	out, err := requestRecord(stored.msg, stored.event, stored.fingerprint, stored.owner)
	return out, created, err
}

// Import records many requests in one write, each as
// CreateRequestIfAbsent would (existing identical requests are skipped),
// and returns how many it created. It is all or nothing: one conflict or
// invalid record and nothing is written. It is for bulk loads (moving
// pending requests from another store, filling a store for a benchmark).
func (s *Store) Import(ctx context.Context, recs []aais.RequestRecord) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ps := make([]preparedRequest, len(recs))
	for i, rec := range recs {
		if err := aais.CheckRequestRecord(rec); err != nil {
			return 0, err
		}
		p, err := prepareRequest(rec)
		if err != nil {
			return 0, err
		}
		ps[i] = p
	}
	var n int
	err := s.write(ctx, func(tx *sqlitedb.Tx) error {
		n = 0
		for _, p := range ps {
			_, created, err := createTx(ctx, tx, p)
			if err != nil {
				return err
			}
			if created {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, wrap(err)
	}
	return n, nil
}

// preparedRequest is a request record with its events marshalled.
type preparedRequest struct {
	aais.RequestRecord
	event, resolution event
}

func prepareRequest(rec aais.RequestRecord) (preparedRequest, error) {
	p := preparedRequest{RequestRecord: rec}
	var err error
	if p.event, err = newEvent(rec.Event); err != nil {
		return p, err
	}
	if rec.Resolution != nil {
		p.resolution, err = newEvent(rec.Resolution.Event)
	}
	return p, err
}

// storedRequest is a requests row; msg is its event when this
// transaction wrote it (nil: parse event).
type storedRequest struct {
	event, owner []byte
	fingerprint  string
	msg          *aais.Message
}

// createTx is CreateRequestIfAbsent inside a write transaction.
func createTx(ctx context.Context, tx *sqlitedb.Tx, rec preparedRequest) (storedRequest, bool, error) {
	id := rec.Event.Request.ID
	var st storedRequest
	err := tx.QueryRowContext(ctx, qRequest, id).Scan(&st.event, &st.fingerprint, &st.owner)
	switch {
	case err == nil:
		if st.fingerprint != rec.Fingerprint {
			return storedRequest{}, false, fmt.Errorf("%w: %s", aais.ErrConflict, id)
		}
		return st, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return storedRequest{}, false, err
	}
	var owner []byte
	if rec.Owner != nil {
		if owner, err = json.Marshal(rec.Owner); err != nil {
			return storedRequest{}, false, err
		}
	}
	msg, seq, err := appendEvent(ctx, tx, rec.event, id)
	if err != nil {
		return storedRequest{}, false, err
	}
	if _, err := tx.ExecContext(ctx, qInsertRequest, id, rec.Fingerprint, seq, owner); err != nil {
		return storedRequest{}, false, err
	}
	if rec.Resolution != nil {
		if _, err := insertResolution(ctx, tx, id, *rec.Resolution, rec.resolution); err != nil {
			return storedRequest{}, false, err
		}
	}
	return storedRequest{owner: owner, fingerprint: rec.Fingerprint, msg: msg}, true, nil
}

// insertResolution records rec as the resolution of request id, with its
// event and the rule it creates, after checking the rule it names. The
// caller holds the write lock and has checked that id is pending.
func insertResolution(ctx context.Context, tx *sqlitedb.Tx, id string, rec aais.ResolutionRecord, ev event) (*aais.Message, error) {
	if rec.ByRule != "" {
		var revoked int
		err := tx.QueryRowContext(ctx, qRuleRevoked, rec.ByRule).Scan(&revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: %s", aais.ErrUnknownRule, rec.ByRule)
		}
		if err != nil {
			return nil, err
		}
		if revoked != 0 {
			return nil, fmt.Errorf("%w: %s", aais.ErrRuleInactive, rec.ByRule)
		}
	}
	msg, seq, err := appendEvent(ctx, tx, ev, id)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, qInsertResolution, id, rec.DecisionFingerprint, seq, rec.ByRule); err != nil {
		return nil, err
	}
	if r := rec.Rule; r != nil {
		rb, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		var taken int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM rules WHERE id = ? OR request_id = ?", r.ID, id).Scan(&taken); err != nil {
			return nil, err
		}
		if taken != 0 {
			return nil, fmt.Errorf("%w: rule %s", aais.ErrConflict, r.ID)
		}
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO rules (id, request_id, revoked, json) VALUES (?, ?, ?, ?)",
			r.ID, id, boolInt(r.Revoked()), rb); err != nil {
			return nil, err
		}
	}
	return msg, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RequestState implements aais.Store.
func (s *Store) RequestState(ctx context.Context, id string) (aais.RequestState, error) {
	if err := ctx.Err(); err != nil {
		return aais.RequestState{}, err
	}
	var (
		req, res, owner []byte
		fp              string
		dfp             sql.NullString
	)
	// One statement reads one consistent snapshot.
	err := s.db.Retry(ctx, func() error {
		return s.db.Stmt(qRequestState).QueryRowContext(ctx, id).Scan(&req, &fp, &owner, &res, &dfp)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return aais.RequestState{}, fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
	}
	if err != nil {
		return aais.RequestState{}, wrap(err)
	}
	r, err := requestRecord(nil, req, fp, owner)
	if err != nil {
		return aais.RequestState{}, err
	}
	st := aais.RequestState{Request: r}
	if res != nil {
		rr, err := resolutionRecord(nil, res, dfp.String)
		if err != nil {
			return aais.RequestState{}, err
		}
		st.Resolution = &rr
	}
	return st, nil
}

// ResolveIfPending implements aais.Store. The "still pending" check and
// the insert run in one BEGIN IMMEDIATE transaction, and the resolutions
// primary key refuses a second resolution even if they did not.
func (s *Store) ResolveIfPending(ctx context.Context, rec aais.ResolutionRecord) (aais.ResolutionRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	if err := aais.CheckResolutionRecord(rec); err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	id := rec.Event.Resolution.RequestID
	ev, err := newEvent(rec.Event)
	if err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	var (
		stored   []byte
		msg      *aais.Message
		dfp      string
		resolved bool
	)
	err = s.write(ctx, func(tx *sqlitedb.Tx) error {
		resolved, msg = false, nil
		var (
			res  []byte
			rdfp sql.NullString
		)
		err := tx.QueryRowContext(ctx, qResolution, id).Scan(&res, &rdfp)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
		}
		if err != nil {
			return err
		}
		if res != nil {
			stored, dfp = res, rdfp.String
			return nil
		}
		m, err := insertResolution(ctx, tx, id, rec, ev)
		if err != nil {
			return err
		}
		msg, dfp, resolved = m, rec.DecisionFingerprint, true
		return nil
	})
	if err != nil {
		return aais.ResolutionRecord{}, false, wrap(err)
	}
	out, err := resolutionRecord(msg, stored, dfp)
	return out, resolved, err
}

// Pending implements aais.Store. The list and asOf come from one read
// transaction, so they describe the same state.
func (s *Store) Pending(ctx context.Context) ([]aais.RequestRecord, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	type row struct {
		event, owner []byte
		fp           string
	}
	var (
		rows []row
		asOf uint64
	)
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		rows, asOf = nil, 0
		var err error
		if asOf, err = latest(ctx, tx); err != nil {
			return err
		}
		rs, err := tx.QueryContext(ctx,
			`SELECT e.json, r.fingerprint, r.owner FROM requests r JOIN events e ON e.sequence = r.sequence
			WHERE r.resolved = 0 ORDER BY r.sequence`)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r row
			if err := rs.Scan(&r.event, &r.fp, &r.owner); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return rs.Err()
	})
	if err != nil {
		return nil, 0, wrap(err)
	}
	out := make([]aais.RequestRecord, 0, len(rows))
	for _, r := range rows {
		rec, err := requestRecord(nil, r.event, r.fp, r.owner)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, rec)
	}
	return out, asOf, nil
}

// EventsAfter implements aais.Store. The store never compacts its log, so a
// gap is only reported for a sequence beyond the latest (the store was
// reset).
func (s *Store) EventsAfter(ctx context.Context, after uint64, limit int) (aais.EventPage, error) {
	if err := ctx.Err(); err != nil {
		return aais.EventPage{}, err
	}
	var (
		page aais.EventPage
		raw  [][]byte
	)
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		page, raw = aais.EventPage{}, nil
		if err := tx.QueryRowContext(ctx, "SELECT store_id FROM meta WHERE singleton = 1").Scan(&page.StoreID); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return errMetaMissing
			}
			return err
		}
		var err error
		if page.Latest, err = latest(ctx, tx); err != nil {
			return err
		}
		page.Gap = after > page.Latest
		if after >= page.Latest {
			return nil
		}
		// after < Latest <= MaxSequence, so it fits an int64.
		n := int64(-1) // SQLite: a negative LIMIT is no limit
		if limit > 0 {
			n = int64(limit)
		}
		rs, err := tx.QueryContext(ctx, "SELECT json FROM events WHERE sequence > ? ORDER BY sequence LIMIT ?", int64(after), n)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var b []byte
			if err := rs.Scan(&b); err != nil {
				return err
			}
			raw = append(raw, b)
		}
		return rs.Err()
	})
	if err != nil {
		return aais.EventPage{}, wrap(err)
	}
	for i, b := range raw {
		m, err := aais.Parse(b)
		if err != nil {
			return aais.EventPage{}, fmt.Errorf("sqlitestore: stored event: %w", err)
		}
		if want := after + 1 + uint64(i); m.Sequence != want {
			return aais.EventPage{}, fmt.Errorf("sqlitestore: event log damaged: event %d carries sequence %d", want, m.Sequence)
		}
		page.Events = append(page.Events, m)
	}
	return page, nil
}

// event is a message marshalled and validated with sequence 0 before the
// write lock is taken; appendEvent only sets its number.
type event struct {
	json []byte
	msg  *aais.Message // read back from json: the copy the caller gets
}

// newEvent marshals m with sequence 0. It runs in the caller's goroutine,
// so the single writer spends no time encoding or validating JSON.
func newEvent(m *aais.Message) (event, error) {
	c := *m
	c.Sequence = 0
	b, msg, err := aais.MarshalCopy(&c)
	return event{json: b, msg: msg}, err
}

// appendEvent gives e the next sequence, max+1 in the transaction that
// holds the write lock, and records it in the log. It returns the
// JSON and the caller's copy of it.
func appendEvent(ctx context.Context, tx *sqlitedb.Tx, e event, requestID string) (*aais.Message, int64, error) {
	last, err := latest(ctx, tx)
	if err != nil {
		return nil, 0, err
	}
	if last >= aais.MaxSequence {
		return nil, 0, aais.ErrSequenceExhausted
	}
	seq := last + 1
	b, err := aais.SetSequence(e.json, seq)
	if err != nil {
		return nil, 0, err
	}
	if _, err := tx.ExecContext(ctx, qInsertEvent, int64(seq), string(e.msg.Type), requestID, b); err != nil {
		return nil, 0, err
	}
	if tx.Memo != nil {
		tx.Memo[memoLatest] = seq
	}
	out := *e.msg // shallow: the payload is the caller's alone
	out.Sequence = seq
	return &out, int64(seq), nil
}

// latest is the sequence of the last event recorded, 0 when none.
// Within one write transaction the writer is alone (BEGIN IMMEDIATE), so
// after the first lookup the latest sequence is remembered in the
// transaction's memo and advanced by appendEvent.
func latest(ctx context.Context, tx *sqlitedb.Tx) (uint64, error) {
	if v, ok := tx.Memo[memoLatest].(uint64); ok {
		return v, nil
	}
	var n int64
	if err := tx.QueryRowContext(ctx, qLatest).Scan(&n); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("event log damaged: sequence %d", n)
	}
	return uint64(n), nil
}

const memoLatest = "sqlitestore.latest"

// requestRecord builds a record from m, or when m is nil from the stored
// JSON b.
func requestRecord(m *aais.Message, b []byte, fp string, owner []byte) (aais.RequestRecord, error) {
	if m == nil {
		rec, err := aais.StoredRequest(b, fp, owner)
		if err != nil {
			return aais.RequestRecord{}, fmt.Errorf("sqlitestore: %w", err)
		}
		return rec, nil
	}
	rec := aais.RequestRecord{Event: m, Fingerprint: fp}
	if owner != nil {
		rec.Owner = new(aais.ProcessIdentity)
		if err := json.Unmarshal(owner, rec.Owner); err != nil {
			return aais.RequestRecord{}, fmt.Errorf("sqlitestore: stored owner: %w", err)
		}
	}
	return rec, nil
}

// Rules implements aais.Store.
func (s *Store) Rules(ctx context.Context) (aais.RuleSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var raw [][]byte
	// One statement reads one snapshot: no transaction needed, and this
	// runs for every request the authority records.
	err := s.db.Retry(ctx, func() error {
		raw = nil
		rs, err := s.db.Stmt(qRules).QueryContext(ctx)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var b []byte
			if err := rs.Scan(&b); err != nil {
				return err
			}
			raw = append(raw, b)
		}
		return rs.Err()
	})
	if err != nil {
		return nil, wrap(err)
	}
	out := make(aais.RuleSet, 0, len(raw))
	for _, b := range raw {
		r, err := aais.StoredRule(b)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out.Sorted(), nil
}

// RevokeRule implements aais.Store.
func (s *Store) RevokeRule(ctx context.Context, id string, at time.Time, by aais.Actor) (*aais.Rule, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	var (
		out     *aais.Rule
		revoked bool
	)
	err := s.write(ctx, func(tx *sqlitedb.Tx) error {
		out, revoked = nil, false
		var b []byte
		err := tx.QueryRowContext(ctx, "SELECT json FROM rules WHERE id = ?", id).Scan(&b)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", aais.ErrUnknownRule, id)
		}
		if err != nil {
			return err
		}
		c, nb, err := aais.RevokeStoredRule(b, at, by)
		if err != nil {
			return err
		}
		if nb == nil {
			out = c
			return nil
		}
		if _, err := tx.ExecContext(ctx, "UPDATE rules SET revoked = 1, json = ? WHERE id = ?", nb, id); err != nil {
			return err
		}
		out, revoked = c, true
		return nil
	})
	if err != nil {
		return nil, false, wrap(err)
	}
	return out, revoked, nil
}

// resolutionRecord builds a record from m, or when m is nil from the
// stored JSON b.
func resolutionRecord(m *aais.Message, b []byte, dfp string) (aais.ResolutionRecord, error) {
	if m == nil {
		rec, err := aais.StoredResolution(b, dfp)
		if err != nil {
			return aais.ResolutionRecord{}, fmt.Errorf("sqlitestore: %w", err)
		}
		return rec, nil
	}
	return aais.ResolutionRecord{Event: m, DecisionFingerprint: dfp}, nil
}

// wrap prefixes database errors with the package name and leaves the aais
// sentinels and context errors recognisable (errors.Is still matches).
func wrap(err error) error {
	if err == nil || aais.IsStoreError(err) {
		return err
	}
	return fmt.Errorf("sqlitestore: %w", err)
}

// Votes implements aais.VoteStore.
func (s *Store) Votes(ctx context.Context, id string) ([]aais.StoredVote, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type row struct {
		vote, event []byte
		fp          string
	}
	var rows []row
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		rows = nil
		var one int
		err := tx.QueryRowContext(ctx, "SELECT 1 FROM requests WHERE id = ?", id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
		}
		if err != nil {
			return err
		}
		rs, err := tx.QueryContext(ctx, `SELECT v.vote, v.fingerprint, e.json FROM votes v
			LEFT JOIN events e ON e.sequence = v.sequence WHERE v.request_id = ? ORDER BY v.position`, id)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r row
			if err := rs.Scan(&r.vote, &r.fp, &r.event); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return rs.Err()
	})
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]aais.StoredVote, 0, len(rows))
	for _, r := range rows {
		sv, err := aais.DecodeStoredVote(r.vote, r.fp, r.event)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: %w", err)
		}
		out = append(out, sv)
	}
	return out, nil
}

// RecordVote implements aais.VoteStore. The pending check, the vote count
// and the writes run in one write transaction (BEGIN IMMEDIATE: one writer
// at a time, in every process on the file); the votes primary key and
// unique actor refuse a second vote at a position or by a reviewer even if
// they did not.
func (s *Store) RecordVote(ctx context.Context, rec aais.VoteRecord) (aais.VoteResult, error) {
	if err := ctx.Err(); err != nil {
		return aais.VoteResult{}, err
	}
	if err := aais.CheckVoteRecord(rec); err != nil {
		return aais.VoteResult{}, err
	}
	vj, err := aais.MarshalVote(rec.Vote.Vote)
	if err != nil {
		return aais.VoteResult{}, err
	}
	var ev event
	if rec.Resolution != nil {
		ev, err = newEvent(rec.Resolution.Event)
	} else {
		ev, err = newEvent(rec.Vote.Event)
	}
	if err != nil {
		return aais.VoteResult{}, err
	}
	var out aais.VoteResult
	err = s.write(ctx, func(tx *sqlitedb.Tx) error {
		out = aais.VoteResult{}
		var (
			res  []byte
			rdfp sql.NullString
		)
		err := tx.QueryRowContext(ctx, qResolution, rec.RequestID).Scan(&res, &rdfp)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", aais.ErrUnknownRequest, rec.RequestID)
		}
		if err != nil {
			return err
		}
		if res != nil {
			r, err := resolutionRecord(nil, res, rdfp.String)
			if err != nil {
				return err
			}
			out.Resolution = &r
			return nil
		}
		var n, mine int
		if err := tx.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE actor_id = ?) FROM votes WHERE request_id = ?",
			rec.Vote.Vote.Actor.ID, rec.RequestID).Scan(&n, &mine); err != nil {
			return err
		}
		if n != rec.Seen {
			out.Changed = true
			return nil
		}
		if mine != 0 {
			return fmt.Errorf("%w: %s", aais.ErrAlreadyVoted, rec.Vote.Vote.Actor.ID)
		}
		var seq sql.NullInt64
		if rec.Resolution != nil {
			if out.Event, err = insertResolution(ctx, tx, rec.RequestID, *rec.Resolution, ev); err != nil {
				return err
			}
		} else {
			var sq int64
			if out.Event, sq, err = appendEvent(ctx, tx, ev, rec.RequestID); err != nil {
				return err
			}
			seq = sql.NullInt64{Int64: sq, Valid: true}
		}
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO votes (request_id, position, actor_id, fingerprint, vote, sequence) VALUES (?, ?, ?, ?, ?, ?)",
			rec.RequestID, n, rec.Vote.Vote.Actor.ID, rec.Vote.Fingerprint, vj, seq); err != nil {
			return err
		}
		out.Recorded = true
		return nil
	})
	if err != nil {
		return aais.VoteResult{}, wrap(err)
	}
	return out, nil
}
