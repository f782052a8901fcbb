package pgstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/pgutil"
)

// Defaults applied when an Options field is zero.
const (
	// DefaultSchema is the PostgreSQL schema the store keeps its tables in.
	DefaultSchema = "custos"
	// DefaultMaxConns is the size of the connection pool when neither
	// Options.MaxConns nor the DSN's pool_max_conns sets it.
	DefaultMaxConns = 8
	// DefaultMaxAttempts bounds how often a transaction PostgreSQL aborted
	// as a serialization failure or deadlock (or whose connection was
	// lost before COMMIT) is tried.
	DefaultMaxAttempts = pgutil.DefaultMaxAttempts
	// ApplicationName is the application_name of the pool's connections
	// when the DSN sets none; the Subscribe connections use the pool's
	// name + "-listen" (ApplicationName + "-listen" by default).
	ApplicationName = "custos-pgstore"
)

// ErrSchemaTooNew: the schema was migrated by a newer build than this one.
var ErrSchemaTooNew = errors.New("pgstore: schema is newer than this build")

var errMetaMissing = errors.New("store metadata row missing")

// Options tunes a Store. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Schema is the PostgreSQL schema holding the store's tables,
	// created when missing. Every Store opened on the same database and
	// schema shares one event stream. Zero means DefaultSchema.
	Schema string
	// MaxConns caps the connection pool (Subscribe connections are not
	// counted). Zero means the DSN's pool_max_conns, else
	// DefaultMaxConns.
	MaxConns int32
	// MaxAttempts bounds the tries of one transaction on transient
	// failures. Zero means DefaultMaxAttempts.
	MaxAttempts int
	// MaxBatch is the most concurrent writes run in one transaction
	// (group commit, pgutil.Batcher): the transaction takes the sequence
	// row's lock once, for its last statement and its commit, whatever
	// the number of writes in it. Zero means 32; 1 runs every write
	// alone.
	MaxBatch int
	// BatchConns is the most write transactions (batches) the Store runs
	// at once: with more than one, one prepares while another commits,
	// but the writes are spread over smaller batches. Zero means 1.
	BatchConns int
}

// Store is an aais.Store kept in a PostgreSQL schema. It is safe for
// concurrent use, and any number of Stores, in one process or in several
// (replicas of custos serve), may open the same database and schema: they
// then share one event stream, one identity and one resolution per request.
type Store struct {
	pool        *pgxpool.Pool
	schema      string
	channel     string
	maxAttempts int
	runner      pgutil.Runner
	batcher     *pgutil.Batcher

	// ctx is cancelled by Close; Subscribe goroutines end with it.
	ctx       context.Context
	cancel    context.CancelFunc
	subs      sync.WaitGroup
	mu        sync.Mutex // guards closed and subs.Add against Close
	closed    bool
	closeOnce sync.Once
}

// errClosed is returned by calls made after Close.
var errClosed = errors.New("store closed")

var _ aais.VoteStore = (*Store)(nil)

// Open connects to the PostgreSQL database dsn names (a postgres:// URL or
// a key=value string, as pgx reads it), creates the schema when missing
// and applies the migrations this build knows. A schema newer than this
// build (ErrSchemaTooNew), or one without its identity row, is refused.
// o may be nil.
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
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	// The append statement (finish) is planned once per connection: its
	// generic plan is the custom one, and planning it anew for every
	// write would cost more than running it. The other statements are
	// lookups whose generic plans are their custom plans too.
	if _, ok := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	s := &Store{schema: schema, channel: channelName(schema), maxAttempts: DefaultMaxAttempts}
	if o.MaxAttempts > 0 {
		s.maxAttempts = o.MaxAttempts
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		s.cancel()
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s.runner = pgutil.Runner{Pool: s.pool, MaxAttempts: s.maxAttempts, Closed: func() error {
		if s.ctx.Err() != nil {
			return errClosed
		}
		return nil
	}}
	s.batcher = &pgutil.Batcher{R: &s.runner, Max: o.MaxBatch, Conns: o.BatchConns, Finish: s.finish, Append: s.appendOne}
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("pgstore: open schema %s: %w", schema, err)
	}
	return s, nil
}

// Close stops the subscriptions and closes the pool. Writes already
// acknowledged are committed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.subs.Wait()
		s.pool.Close()
	})
	return nil
}

// Schema returns the PostgreSQL schema the store is kept in.
func (s *Store) Schema() string { return s.schema }

// Pool returns the store's connection pool, for health checks and
// metrics. Writing to the store's tables through it bypasses every
// guarantee of this package.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ID returns the store's identity, the StoreID of every EventPage.
func (s *Store) ID(ctx context.Context) (string, error) {
	var id string
	err := s.read(ctx, func(ctx context.Context) error {
		return pgutil.Reader(ctx, s.pool).QueryRow(ctx, "SELECT store_id FROM meta WHERE singleton").Scan(&id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = errMetaMissing
	}
	if err != nil {
		return "", wrap(err)
	}
	return id, nil
}

// Reset forgets every request, resolution, rule and event and takes a new
// identity, as a backend does when it recovers from lost state. Presenters
// notice through EventPage.Gap and StoreID; subscribers get a
// notification with the new identity and sequence 0. It is meant for tests
// and operators; every Store open on the schema sees the reset. It takes
// ACCESS EXCLUSIVE locks on the store's tables, so it waits for the
// transactions in flight and briefly blocks readers.
func (s *Store) Reset(ctx context.Context) error {
	return wrap(s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "LOCK TABLE meta, requests, resolutions, rules, votes, events IN ACCESS EXCLUSIVE MODE"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "TRUNCATE rules, votes, resolutions, requests, events"); err != nil {
			return err
		}
		id := newID()
		tag, err := tx.Exec(ctx, "UPDATE meta SET store_id = $1, latest_sequence = 0 WHERE singleton", id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return errMetaMissing
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", s.channel, id+":0")
		return err
	}))
}

func newID() string {
	var b [16]byte
	// crypto/rand.Read never returns an error since Go 1.24.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storedRequest is a requests row.
type storedRequest struct {
	event, owner []byte
	fingerprint  string
}

func (st storedRequest) record() (aais.RequestRecord, error) {
	return requestRecord(st.event, st.fingerprint, st.owner)
}

// CreateRequestIfAbsent implements aais.Store. A request that exists is
// answered from one read, without a transaction; otherwise the write
// appends it (finish), and a request another writer created meanwhile is
// refused by the primary key and read again.
func (s *Store) CreateRequestIfAbsent(ctx context.Context, rec aais.RequestRecord) (aais.RequestRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return aais.RequestRecord{}, false, err
	}
	if err := aais.CheckRequestRecord(rec); err != nil {
		return aais.RequestRecord{}, false, err
	}
	id := rec.Event.Request.ID
	var (
		stored  storedRequest
		found   bool
		created bool
		p       *pending
	)
	for try := 0; ; try++ {
		err := s.read(ctx, func(ctx context.Context) (err error) {
			stored, found, err = lookupRequest(ctx, s.pool, id)
			return err
		})
		if err != nil {
			return aais.RequestRecord{}, false, wrap(err)
		}
		if found {
			break
		}
		if p == nil {
			if p, err = createPending(rec); err != nil {
				return aais.RequestRecord{}, false, err
			}
		}
		var (
			queue     func(*pgx.Batch)
			ruleState map[string]bool
		)
		if r := rec.Resolution; r != nil {
			// A rule locked FOR SHARE: a revocation waits for this
			// transaction, or this one sees it.
			queue = func(b *pgx.Batch) {
				ruleState = nil
				b.Queue(lockRulesSQL, []string{r.ByRule}).Query(func(rows pgx.Rows) (err error) {
					ruleState, err = ruleStates(rows)
					return err
				})
			}
		}
		err = s.writeQueued(ctx, queue, func(ctx context.Context, tx pgx.Tx, b *pgutil.Batch) (*pending, error) {
			if !b.Claim("q" + id) {
				return nil, errBusy
			}
			if r := rec.Resolution; r != nil {
				if err := ruleUsable(ruleState, r.ByRule); err != nil {
					return nil, err
				}
			}
			return p, nil
		})
		if isUnique(err, "requests_pkey") && try == 0 {
			continue // created meanwhile by another writer: read it
		}
		if err != nil {
			return aais.RequestRecord{}, false, wrap(err)
		}
		stored = storedRequest{event: p.events[0].json(p.seq(0)), owner: p.requests[0].owner, fingerprint: rec.Fingerprint}
		created = true
		break
	}
	if !created && stored.fingerprint != rec.Fingerprint {
		return aais.RequestRecord{}, false, fmt.Errorf("%w: %s", aais.ErrConflict, id)
	}
	out, err := stored.record()
	return out, created, err
}

// isUnique reports whether err is a unique violation of constraint.
func isUnique(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// createPending is what creating rec appends: the request, and its
// resolution when it comes resolved.
func createPending(rec aais.RequestRecord) (*pending, error) {
	id := rec.Event.Request.ID
	var owner []byte
	if rec.Owner != nil {
		var err error
		if owner, err = json.Marshal(rec.Owner); err != nil {
			return nil, err
		}
	}
	t, err := template(rec.Event, id)
	if err != nil {
		return nil, err
	}
	p := &pending{}
	p.requests = append(p.requests, requestRow{id: id, fingerprint: rec.Fingerprint, owner: owner,
		resolved: rec.Resolution != nil, ev: p.event(t)})
	if r := rec.Resolution; r != nil {
		rt, err := template(r.Event, id)
		if err != nil {
			return nil, err
		}
		p.resolutions = append(p.resolutions, resolutionRow{requestID: id,
			decisionFingerprint: r.DecisionFingerprint, byRule: r.ByRule, ev: p.event(rt)})
	}
	return p, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// lookupRequest reads the requests row with the given id.
func lookupRequest(ctx context.Context, q querier, id string) (storedRequest, bool, error) {
	var st storedRequest
	err := q.QueryRow(ctx, "SELECT event, fingerprint, owner FROM requests WHERE id = $1", id).Scan(&st.event, &st.fingerprint, &st.owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return storedRequest{}, false, nil
	}
	if err != nil {
		return storedRequest{}, false, err
	}
	return st, true, nil
}

// lockRules locks the rules with the given ids FOR SHARE for the rest of
// the transaction (a concurrent RevokeRule waits for it, or it waits for
// the RevokeRule and then sees the revocation) and reports, for each id
// found, whether it is revoked.
func lockRules(ctx context.Context, tx pgx.Tx, ids []string) (map[string]bool, error) {
	rows, err := tx.Query(ctx, lockRulesSQL, ids)
	if err != nil {
		return nil, err
	}
	return ruleStates(rows)
}

const lockRulesSQL = "SELECT id, revoked FROM rules WHERE id = ANY($1) ORDER BY id FOR SHARE"

// ruleStates reads the rows of lockRulesSQL.
func ruleStates(rows pgx.Rows) (map[string]bool, error) {
	out := make(map[string]bool)
	var (
		id      string
		revoked bool
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &revoked}, func() error {
		out[id] = revoked
		return nil
	})
	return out, err
}

// ruleUsable returns the error of an automatic approval by rule id, given
// the states lockRules read.
func ruleUsable(states map[string]bool, id string) error {
	revoked, ok := states[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", aais.ErrUnknownRule, id)
	case revoked:
		return fmt.Errorf("%w: %s", aais.ErrRuleInactive, id)
	}
	return nil
}

// Import records many requests in one transaction, each as
// CreateRequestIfAbsent would (existing identical requests, and repeats
// within recs, are skipped), and returns how many it created. It is all or
// nothing: one conflict or invalid record and nothing is written. It is
// for bulk loads (moving pending requests from another store, filling a
// store for a benchmark): rows are sent with COPY, and subscribers get one
// notification for the whole import.
func (s *Store) Import(ctx context.Context, recs []aais.RequestRecord) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ids := make([]string, 0, len(recs))
	seen := make(map[string]string, len(recs)) // id -> fingerprint
	var byRule []string
	uniq := make([]aais.RequestRecord, 0, len(recs))
	for _, rec := range recs {
		if err := aais.CheckRequestRecord(rec); err != nil {
			return 0, err
		}
		id := rec.Event.Request.ID
		if fp, ok := seen[id]; ok {
			if fp != rec.Fingerprint {
				return 0, fmt.Errorf("%w: %s", aais.ErrConflict, id)
			}
			continue
		}
		seen[id] = rec.Fingerprint
		ids = append(ids, id)
		uniq = append(uniq, rec)
		if rec.Resolution != nil {
			byRule = append(byRule, rec.Resolution.ByRule)
		}
	}
	var n int
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		n = 0
		var ruleState map[string]bool
		if len(byRule) > 0 {
			var err error
			if ruleState, err = lockRules(ctx, tx, byRule); err != nil {
				return err
			}
		}
		a, err := lockMeta(ctx, tx)
		if err != nil {
			return err
		}
		existing := make(map[string]string)
		rows, err := tx.Query(ctx, "SELECT id, fingerprint FROM requests WHERE id = ANY($1)", ids)
		if err != nil {
			return err
		}
		var id, fp string
		if _, err := pgx.ForEachRow(rows, []any{&id, &fp}, func() error {
			existing[id] = fp
			return nil
		}); err != nil {
			return err
		}
		var evRows, reqRows, resRows [][]any
		for _, rec := range uniq {
			id := rec.Event.Request.ID
			if fp, ok := existing[id]; ok {
				if fp != rec.Fingerprint {
					return fmt.Errorf("%w: %s", aais.ErrConflict, id)
				}
				continue
			}
			var owner []byte
			if rec.Owner != nil {
				if owner, err = json.Marshal(rec.Owner); err != nil {
					return err
				}
			}
			b, seq, err := a.seal(rec.Event)
			if err != nil {
				return err
			}
			evRows = append(evRows, []any{seq, string(aais.TypeRequested), id, b})
			reqRows = append(reqRows, []any{id, rec.Fingerprint, b, seq, owner, rec.Resolution != nil})
			if r := rec.Resolution; r != nil {
				if err := ruleUsable(ruleState, r.ByRule); err != nil {
					return err
				}
				rb, rseq, err := a.seal(r.Event)
				if err != nil {
					return err
				}
				evRows = append(evRows, []any{rseq, string(aais.TypeResolved), id, rb})
				resRows = append(resRows, []any{id, r.DecisionFingerprint, r.ByRule, rb, rseq})
			}
			n++
		}
		if n == 0 {
			return errNoChange
		}
		for _, c := range []struct {
			table string
			cols  []string
			rows  [][]any
		}{
			{"events", []string{"sequence", "type", "request_id", "json"}, evRows},
			{"requests", []string{"id", "fingerprint", "event", "sequence", "owner", "resolved"}, reqRows},
			{"resolutions", []string{"request_id", "decision_fingerprint", "by_rule", "event", "sequence"}, resRows},
		} {
			if len(c.rows) == 0 {
				continue
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
				return fmt.Errorf("copy into %s: %w", c.table, err)
			}
		}
		return a.flush(ctx, s.channel)
	})
	if err != nil {
		return 0, wrap(err)
	}
	return n, nil
}

// seal gives m the next sequence and returns its JSON, without queueing
// anything (Import copies the rows itself).
func (a *appender) seal(m *aais.Message) ([]byte, int64, error) {
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
	return b, int64(c.Sequence), nil
}

// RequestState implements aais.Store. One statement reads one snapshot.
func (s *Store) RequestState(ctx context.Context, id string) (aais.RequestState, error) {
	if err := ctx.Err(); err != nil {
		return aais.RequestState{}, err
	}
	var (
		req, res, owner []byte
		fp              string
		dfp             *string
	)
	err := s.read(ctx, func(ctx context.Context) error {
		return pgutil.Reader(ctx, s.pool).QueryRow(ctx, `
			SELECT r.event, r.fingerprint, r.owner, s.event, s.decision_fingerprint
			FROM requests r LEFT JOIN resolutions s ON s.request_id = r.id
			WHERE r.id = $1`, id).Scan(&req, &fp, &owner, &res, &dfp)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return aais.RequestState{}, fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
	}
	if err != nil {
		return aais.RequestState{}, wrap(err)
	}
	r, err := requestRecord(req, fp, owner)
	if err != nil {
		return aais.RequestState{}, err
	}
	st := aais.RequestState{Request: r}
	if res != nil {
		rr, err := resolutionRecord(res, deref(dfp))
		if err != nil {
			return aais.RequestState{}, err
		}
		st.Resolution = &rr
	}
	return st, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// ResolveIfPending implements aais.Store. Its transaction locks the
// request row (SELECT ... FOR UPDATE): concurrent resolvers of one
// request, in any replica, queue on that lock, and each one that gets it
// after the winner committed reads resolved = true and returns the stored
// resolution. The resolutions primary key would refuse a second
// resolution anyway. There is no read before the transaction: its caller,
// aais.Authority, has just read the request's state, and answers a
// resolved request from it.
func (s *Store) ResolveIfPending(ctx context.Context, rec aais.ResolutionRecord) (aais.ResolutionRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	if err := aais.CheckResolutionRecord(rec); err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	id := rec.Event.Resolution.RequestID
	var (
		stored   []byte
		dfp      string
		resolved bool
	)
	p := &pending{}
	t, err := template(rec.Event, id)
	if err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	p.resolutions = append(p.resolutions, resolutionRow{requestID: id, decisionFingerprint: rec.DecisionFingerprint,
		byRule: rec.ByRule, ev: p.event(t)})
	p.resolve = []string{id}
	if r := rec.Rule; r != nil {
		rb, err := r.MarshalJSON()
		if err != nil {
			return aais.ResolutionRecord{}, false, err
		}
		p.rules = append(p.rules, ruleRow{id: r.ID, requestID: id, revoked: r.Revoked(), json: rb})
	}
	// The first reads, queued: they are sent with those of the other
	// writes of the batch.
	var (
		found, isResolved, taken bool
		ruleState                map[string]bool
	)
	queue := func(b *pgx.Batch) {
		found, isResolved, taken, ruleState = false, false, false, nil
		b.Queue("SELECT resolved FROM requests WHERE id = $1 FOR UPDATE", id).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&isResolved)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			found = err == nil
			return err
		})
		if rec.ByRule != "" {
			b.Queue(lockRulesSQL, []string{rec.ByRule}).Query(func(rows pgx.Rows) (err error) {
				ruleState, err = ruleStates(rows)
				return err
			})
		}
		if r := rec.Rule; r != nil {
			// A rule committed with this id or for this request is a
			// conflict; one being committed now is refused by the
			// primary key or the request_id unique index.
			b.Queue("SELECT EXISTS (SELECT 1 FROM rules WHERE id = $1 OR request_id = $2)", r.ID, id).QueryRow(func(row pgx.Row) error {
				return row.Scan(&taken)
			})
		}
	}
	err = s.writeQueued(ctx, queue, func(ctx context.Context, tx pgx.Tx, b *pgutil.Batch) (*pending, error) {
		stored, dfp, resolved = nil, "", false
		if !b.Claim("q" + id) {
			return nil, errBusy
		}
		if !found {
			return nil, pgx.ErrNoRows
		}
		if isResolved {
			var err error
			stored, dfp, _, err = lookupResolution(ctx, tx, id)
			if err == nil && stored == nil {
				err = errors.New("request marked resolved without a resolution")
			}
			if err != nil {
				return nil, err
			}
			return nil, errNoChange
		}
		if rec.ByRule != "" {
			if err := ruleUsable(ruleState, rec.ByRule); err != nil {
				return nil, err
			}
		}
		if r := rec.Rule; r != nil {
			if !b.Claim("r" + r.ID) {
				return nil, errBusy
			}
			if taken {
				return nil, fmt.Errorf("%w: rule %s", aais.ErrConflict, r.ID)
			}
		}
		return p, nil
	})
	if err == nil && stored == nil {
		stored, dfp, resolved = p.events[0].json(p.seq(0)), rec.DecisionFingerprint, true
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
	}
	if err != nil {
		return aais.ResolutionRecord{}, false, wrap(err)
	}
	out, err := resolutionRecord(stored, dfp)
	return out, resolved, err
}

// lookupResolution reads whether request id exists and its resolution.
func lookupResolution(ctx context.Context, q querier, id string) (event []byte, dfp string, known bool, err error) {
	var p *string
	err = q.QueryRow(ctx, `
		SELECT s.event, s.decision_fingerprint
		FROM requests r LEFT JOIN resolutions s ON s.request_id = r.id
		WHERE r.id = $1`, id).Scan(&event, &p)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, err
	}
	return event, deref(p), true, nil
}

// Pending implements aais.Store. The list and asOf come from one statement,
// so they describe one snapshot; the pending rows are read through the
// partial index requests_pending.
func (s *Store) Pending(ctx context.Context) ([]aais.RequestRecord, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	type row struct {
		event, owner []byte
		fp           *string
		seq          *int64
	}
	var (
		rows []row
		asOf int64
	)
	err := s.read(ctx, func(ctx context.Context) error {
		rows, asOf = nil, 0
		rs, err := pgutil.Reader(ctx, s.pool).Query(ctx, `
			SELECT m.latest_sequence, p.sequence, p.event, p.fingerprint, p.owner
			FROM meta m LEFT JOIN LATERAL (
				SELECT sequence, event, fingerprint, owner FROM requests WHERE NOT resolved
			) p ON true
			WHERE m.singleton`)
		if err != nil {
			return err
		}
		var r row
		n := 0
		_, err = pgx.ForEachRow(rs, []any{&asOf, &r.seq, &r.event, &r.fp, &r.owner}, func() error {
			n++
			if r.seq != nil {
				rows = append(rows, r)
			}
			r = row{}
			return nil
		})
		if err == nil && n == 0 {
			err = errMetaMissing
		}
		return err
	})
	if err != nil {
		return nil, 0, wrap(err)
	}
	// Creation order is sequence order; sorting here rather than in SQL
	// keeps the statement a plain scan of the partial index.
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(*a.seq, *b.seq) })
	out := make([]aais.RequestRecord, 0, len(rows))
	for _, r := range rows {
		rec, err := requestRecord(r.event, deref(r.fp), r.owner)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, rec)
	}
	return out, uint64(asOf), nil
}

// EventsAfter implements aais.Store. The page (StoreID, Latest and the
// events) is read by one statement, so it describes one snapshot, and a
// snapshot never holds sequence n+1 without n (see doc.go). The store
// never compacts its log, so a gap is only reported for a sequence beyond
// the latest (the store was reset).
func (s *Store) EventsAfter(ctx context.Context, after uint64, limit int) (aais.EventPage, error) {
	if err := ctx.Err(); err != nil {
		return aais.EventPage{}, err
	}
	type row struct {
		seq  int64
		json []byte
	}
	var (
		page   aais.EventPage
		rows   []row
		latest int64
	)
	var lim *int64 // NULL: no limit
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	from := int64(min(after, aais.MaxSequence))
	err := s.read(ctx, func(ctx context.Context) error {
		page, rows = aais.EventPage{}, nil
		rs, err := pgutil.Reader(ctx, s.pool).Query(ctx, `
			SELECT m.store_id, m.latest_sequence, e.sequence, e.json
			FROM meta m LEFT JOIN LATERAL (
				SELECT sequence, json FROM events WHERE sequence > $1 ORDER BY sequence LIMIT $2::bigint
			) e ON true
			WHERE m.singleton`, from, lim)
		if err != nil {
			return err
		}
		var (
			seq *int64
			b   []byte
			n   int
		)
		_, err = pgx.ForEachRow(rs, []any{&page.StoreID, &latest, &seq, &b}, func() error {
			n++
			if seq != nil {
				rows = append(rows, row{*seq, b})
			}
			seq, b = nil, nil
			return nil
		})
		if err == nil && n == 0 {
			err = errMetaMissing
		}
		return err
	})
	if err != nil {
		return aais.EventPage{}, wrap(err)
	}
	if latest < 0 {
		return aais.EventPage{}, fmt.Errorf("pgstore: event log damaged: latest sequence %d", latest)
	}
	page.Latest = uint64(latest)
	page.Gap = after > page.Latest
	if after >= page.Latest {
		return page, nil
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.seq, b.seq) })
	for i, r := range rows {
		m, err := aais.Parse(r.json)
		if err != nil {
			return aais.EventPage{}, fmt.Errorf("pgstore: stored event: %w", err)
		}
		if want := after + 1 + uint64(i); m.Sequence != want || uint64(r.seq) != want {
			return aais.EventPage{}, fmt.Errorf("pgstore: event log damaged: event %d carries sequence %d (row %d)", want, m.Sequence, r.seq)
		}
		page.Events = append(page.Events, m)
	}
	return page, nil
}

func requestRecord(b []byte, fp string, owner []byte) (aais.RequestRecord, error) {
	rec, err := aais.StoredRequest(b, fp, owner)
	if err != nil {
		return aais.RequestRecord{}, fmt.Errorf("pgstore: %w", err)
	}
	return rec, nil
}

// Rules implements aais.Store.
func (s *Store) Rules(ctx context.Context) (aais.RuleSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var raw [][]byte
	err := s.read(ctx, func(ctx context.Context) error {
		raw = nil
		rs, err := pgutil.Reader(ctx, s.pool).Query(ctx, "SELECT json FROM rules")
		if err != nil {
			return err
		}
		var b []byte
		_, err = pgx.ForEachRow(rs, []any{&b}, func() error {
			raw = append(raw, b)
			b = nil
			return nil
		})
		return err
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

// RevokeRule implements aais.Store. It locks the rule row, so it waits for
// (and is waited for by) the automatic approvals that lock it FOR SHARE:
// an approval by a rule either commits before the revocation or sees it.
// A revocation appends no event.
func (s *Store) RevokeRule(ctx context.Context, id string, at time.Time, by aais.Actor) (*aais.Rule, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	var (
		out     *aais.Rule
		revoked bool
	)
	err := s.writeTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		out, revoked = nil, false
		var b []byte
		err := tx.QueryRow(ctx, "SELECT json FROM rules WHERE id = $1 FOR UPDATE", id).Scan(&b)
		if errors.Is(err, pgx.ErrNoRows) {
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
			return errNoChange
		}
		if _, err := tx.Exec(ctx, "UPDATE rules SET revoked = true, json = $1 WHERE id = $2", nb, id); err != nil {
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

func resolutionRecord(b []byte, dfp string) (aais.ResolutionRecord, error) {
	rec, err := aais.StoredResolution(b, dfp)
	if err != nil {
		return aais.ResolutionRecord{}, fmt.Errorf("pgstore: %w", err)
	}
	return rec, nil
}

// wrap prefixes database errors with the package name and leaves the aais
// sentinels and context errors recognisable (errors.Is still matches).
func wrap(err error) error {
	if err == nil || aais.IsStoreError(err) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && strings.HasPrefix(pe.ConstraintName, "rules_") {
		return fmt.Errorf("%w: %s", aais.ErrConflict, pe.Detail)
	}
	return fmt.Errorf("pgstore: %w", err)
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
	var (
		rows  []row
		known bool
	)
	err := s.read(ctx, func(ctx context.Context) error {
		rows, known = nil, false
		// One statement: the request's existence and its votes from one
		// snapshot.
		rs, err := s.pool.Query(ctx, `SELECT v.vote, v.fingerprint, e.json FROM requests r
			LEFT JOIN votes v ON v.request_id = r.id LEFT JOIN events e ON e.sequence = v.sequence
			WHERE r.id = $1 ORDER BY v.position`, id)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			known = true
			var (
				r  row
				fp *string
			)
			if err := rs.Scan(&r.vote, &fp, &r.event); err != nil {
				return err
			}
			if r.vote != nil {
				r.fp = deref(fp)
				rows = append(rows, r)
			}
		}
		return rs.Err()
	})
	if err != nil {
		return nil, wrap(err)
	}
	if !known {
		return nil, fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
	}
	out := make([]aais.StoredVote, 0, len(rows))
	for _, r := range rows {
		sv, err := aais.DecodeStoredVote(r.vote, r.fp, r.event)
		if err != nil {
			return nil, fmt.Errorf("pgstore: %w", err)
		}
		out = append(out, sv)
	}
	return out, nil
}

// RecordVote implements aais.VoteStore. The request's row is locked (FOR
// UPDATE) before its votes are counted, so votes on one request are
// counted one transaction at a time across every replica; the vote and
// its event are written by the statement that appends the event, and the
// votes primary key and votes_one_per_actor refuse a duplicate anyway.
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
	id, actor := rec.RequestID, rec.Vote.Vote.Actor.ID
	p := &pending{}
	vr := voteRow{requestID: id, actorID: actor, fingerprint: rec.Vote.Fingerprint, position: rec.Seen, vote: vj, ev: -1}
	if rec.Resolution != nil {
		t, err := template(rec.Resolution.Event, id)
		if err != nil {
			return aais.VoteResult{}, err
		}
		p.resolutions = append(p.resolutions, resolutionRow{requestID: id, decisionFingerprint: rec.Resolution.DecisionFingerprint, ev: p.event(t)})
		p.resolve = []string{id}
	} else {
		t, err := template(rec.Vote.Event, id)
		if err != nil {
			return aais.VoteResult{}, err
		}
		vr.ev = p.event(t)
	}
	p.votes = []voteRow{vr}
	var (
		found, isResolved bool
		n, mine           int
		stored            []byte
		dfp               string
		changed           bool
	)
	queue := func(b *pgx.Batch) {
		found, isResolved, n, mine = false, false, 0, 0
		b.Queue("SELECT resolved FROM requests WHERE id = $1 FOR UPDATE", id).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&isResolved)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			found = err == nil
			return err
		})
		// After the lock: READ COMMITTED gives this statement a snapshot
		// that holds the previous lock holder's votes.
		b.Queue("SELECT count(*), count(*) FILTER (WHERE actor_id = $2) FROM votes WHERE request_id = $1", id, actor).QueryRow(func(row pgx.Row) error {
			return row.Scan(&n, &mine)
		})
	}
	err = s.writeQueued(ctx, queue, func(ctx context.Context, tx pgx.Tx, b *pgutil.Batch) (*pending, error) {
		stored, dfp, changed = nil, "", false
		if !b.Claim("q" + id) {
			return nil, errBusy
		}
		switch {
		case !found:
			return nil, pgx.ErrNoRows
		case isResolved:
			var err error
			stored, dfp, _, err = lookupResolution(ctx, tx, id)
			if err == nil && stored == nil {
				err = errors.New("request marked resolved without a resolution")
			}
			if err != nil {
				return nil, err
			}
			return nil, errNoChange
		case n != rec.Seen:
			changed = true
			return nil, errNoChange
		case mine != 0:
			return nil, fmt.Errorf("%w: %s", aais.ErrAlreadyVoted, actor)
		}
		return p, nil
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
	}
	if err != nil {
		return aais.VoteResult{}, wrap(err)
	}
	switch {
	case changed:
		return aais.VoteResult{Changed: true}, nil
	case stored != nil:
		r, err := resolutionRecord(stored, dfp)
		if err != nil {
			return aais.VoteResult{}, err
		}
		return aais.VoteResult{Resolution: &r}, nil
	}
	m, err := aais.Parse(p.events[0].json(p.seq(0)))
	if err != nil {
		return aais.VoteResult{}, fmt.Errorf("pgstore: %w", err)
	}
	return aais.VoteResult{Recorded: true, Event: m}, nil
}
