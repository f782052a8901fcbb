// Package pgreplay is a DPoP jti replay set (auth.ReplayCache, the
// authz.ReplaySet of package gateway/authz) kept in PostgreSQL, so that
// several replicas of custos serve behind one load balancer refuse a proof
// replayed to any of them.
//
//	set, err := pgreplay.Open(ctx, "postgres://custos@db.internal/custos", &pgreplay.Options{Schema: "custos"})
//	if err != nil { ... }
//	defer set.Close()
//	authz.New(authz.Config{..., Replay: set})
//
// # Table
//
// The set is one table, dpop_replay (jti text PRIMARY KEY, expires_at
// timestamptz), in Options.Schema ("custos" by default, the approval
// store's schema; created when missing). Its migrations are embedded,
// recorded in dpop_replay_migrations and applied under the advisory lock
// MigrationLockKey, the one store/pgstore takes, so the store, the
// replay set and the rate limiter can create one schema together.
//
// jtis share one namespace per schema. That is enough: a jti is a random
// value unique per proof (RFC 9449 §4.2), and a proof is bound to one
// receiver by htm and htu anyway. Deployments that must not share
// replay state use different schemas.
//
// # Seen
//
// Seen is one statement, atomic by PostgreSQL's unique index:
//
//	INSERT INTO dpop_replay (jti, expires_at) VALUES ($jti, $until)
//	ON CONFLICT (jti) DO UPDATE SET expires_at = EXCLUDED.expires_at
//	    WHERE dpop_replay.expires_at < $now
//	RETURNING true
//
// A row comes back when the jti was absent (inserted) or present but
// expired (taken over): the jti is new. No row means it is recorded and
// unexpired: a replay. Of concurrent calls with one jti, in any number of
// replicas, one inserts and the others wait for its row lock and then find
// it unexpired, so exactly one sees it as new.
//
// Any error (connection refused or lost, statement timeout, disk full, a
// done context) is returned wrapping auth.ErrReplayCache, and the proof is
// refused: the set fails closed. Nothing is retried, since a retried
// insert whose first attempt committed would report a legitimate proof as
// a replay, which is a refusal as well.
//
// # Clock
//
// "Expired" is decided with Options.Now (time.Now by default), the clock
// the receiver checks iat with, not with the database's clock: a jti is
// kept through iat+skew as that replica sees it, and the same replica
// refuses the proof on iat once that is past. Replicas' clocks should agree
// to well within the DPoP skew; a replica whose clock runs ahead by d
// takes over a row d early, but then also refuses the proof's iat d early,
// so a replay is still refused.
//
// # Pruning and size
//
// Expired rows are deleted in batches of Options.PruneBatch through a ctid
// subquery on the expires_at index (DELETE ... WHERE ctid = ANY (ARRAY(
// SELECT ctid ... WHERE expires_at < $now LIMIT $n FOR UPDATE SKIP
// LOCKED))), batch after batch while batches come back full, up to
// Options.PruneMaxBatches per run. Each batch is its own short
// transaction. A run starts in the background after a Seen when
// Options.PruneInterval has passed since the last one in this process;
// Prune runs one on demand. Replicas prune concurrently without waiting on
// each other (SKIP LOCKED).
//
// The table holds the unexpired jtis (peak proofs per second × the proof
// lifetime, 2 × skew) plus what expired since the last run. It has no
// capacity of its own, unlike auth.MemoryReplayCache: the database's
// storage is the bound, and when it cannot take a row (disk full), Seen
// fails and proofs are refused, as the auth.ReplayCache contract asks.
package pgreplay

import (
	"context"
	"errors"
	"fmt"
	"github.com/custos-runtime/custos/internal/pgutil"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/arsia/auth"
)

// Defaults applied when an Options field is zero.
const (
	// DefaultSchema is the approval store's default schema.
	DefaultSchema = "custos"
	// DefaultMaxConns is the size of a pool Open creates when neither
	// Options.MaxConns nor the DSN's pool_max_conns sets it.
	DefaultMaxConns = 4
	// DefaultPruneInterval is the least time between two pruning runs
	// of one Set.
	DefaultPruneInterval = 10 * time.Second
	// DefaultPruneBatch is the most rows one DELETE removes.
	DefaultPruneBatch = 1000
	// DefaultPruneMaxBatches bounds the batches of one run (so one run
	// removes at most 100 000 rows by default).
	DefaultPruneMaxBatches = 100
	// ApplicationName is the application_name of the connections of a
	// pool Open creates, when the DSN sets none.
	ApplicationName = "custos-pgreplay"
	// MaxJTI is the longest jti Seen records, in bytes (a DPoP proof's
	// jti is at most 256 bytes).
	MaxJTI = 1024
)

// Options tunes a Set. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Schema holds the table, created when missing. Zero means the
	// custos_schema parameter of the DSN given to Open, else
	// DefaultSchema.
	Schema string
	// Now is the clock that expires jtis; nil means time.Now. It should
	// be the clock the receiver checks DPoP iat with.
	Now func() time.Time
	// MaxConns caps a pool Open creates. Zero means the DSN's
	// pool_max_conns, else DefaultMaxConns. Unused by New.
	MaxConns int32
	// PruneInterval is the least time between two background pruning
	// runs; zero means DefaultPruneInterval, a negative value none (call
	// Prune yourself).
	PruneInterval time.Duration
	// PruneBatch is the most rows one DELETE removes; zero means
	// DefaultPruneBatch.
	PruneBatch int
	// PruneMaxBatches bounds the batches of one pruning run; zero means
	// DefaultPruneMaxBatches.
	PruneMaxBatches int
	// Logger receives background pruning failures (nothing is logged
	// when nil).
	Logger *slog.Logger
}

// Set is an auth.ReplayCache kept in PostgreSQL. It is safe for
// concurrent use, and any number of Sets, in one process or several, may
// use one schema: they then share one replay set.
type Set struct {
	pool     *pgxpool.Pool
	ownsPool bool
	schema   string
	now      func() time.Time
	log      *slog.Logger

	seenSQL, containsSQL string
	// pruner deletes expired jtis, and says when the Set is closed.
	pruner *pgutil.Pruner
}

var _ auth.ReplayCache = (*Set)(nil)

// Open connects to the database dsn names (a postgres:// URL, whose
// custos_schema parameter names the schema as for store.Parse, or a
// key=value string), creates the schema and table when missing and
// returns the Set, which owns the pool and closes it in Close. o may be
// nil.
func Open(ctx context.Context, dsn string, o *Options) (*Set, error) {
	if o == nil {
		o = &Options{}
	}
	oo := *o
	pool, schema, err := pgutil.OpenPool(ctx, dsn, oo.Schema, DefaultSchema, ApplicationName, o.MaxConns, DefaultMaxConns)
	if err != nil {
		return nil, fmt.Errorf("pgreplay: %w", err)
	}
	oo.Schema = schema
	s, err := New(ctx, pool, &oo)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

// New returns a Set using pool, which it does not close (the approval
// store's pool, say: pgstore.Store.Pool). Every statement names the
// schema, so the pool's search_path does not matter. It creates the schema
// and table when missing. o may be nil.
func New(ctx context.Context, pool *pgxpool.Pool, o *Options) (*Set, error) {
	if o == nil {
		o = &Options{}
	}
	if pool == nil {
		return nil, errors.New("pgreplay: nil pool")
	}
	s := &Set{pool: pool, schema: o.Schema, now: o.Now, log: o.Logger}
	pr := &pgutil.Pruner{Pool: pool, Every: o.PruneInterval, Batch: o.PruneBatch, MaxBatches: o.PruneMaxBatches}
	if s.schema == "" {
		s.schema = DefaultSchema
	}
	if err := pgutil.CheckSchema(s.schema); err != nil {
		return nil, err
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if pr.Every == 0 {
		pr.Every = DefaultPruneInterval
	}
	if pr.Batch <= 0 {
		pr.Batch = DefaultPruneBatch
	}
	if pr.MaxBatches <= 0 {
		pr.MaxBatches = DefaultPruneMaxBatches
	}
	t := pgx.Identifier{s.schema, "dpop_replay"}.Sanitize()
	s.seenSQL = `INSERT INTO ` + t + ` AS r (jti, expires_at) VALUES ($1, $2)
		ON CONFLICT (jti) DO UPDATE SET expires_at = EXCLUDED.expires_at
		WHERE r.expires_at < $3
		RETURNING true`
	s.containsSQL = `SELECT EXISTS (SELECT 1 FROM ` + t + ` WHERE jti = $1 AND expires_at >= $2)`
	pr.SQL = `DELETE FROM ` + t + `
		WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM ` + t + ` WHERE expires_at < $1
			LIMIT $2 FOR UPDATE SKIP LOCKED))
		AND expires_at < $1`
	if err := migrate(ctx, pool, s.schema); err != nil {
		return nil, fmt.Errorf("pgreplay: schema %s: %w", s.schema, err)
	}
	pr.Log, pr.What = s.log.With("schema", s.schema), "the DPoP replay set"
	s.pruner = pr
	return s, nil
}

// Schema returns the schema the table lives in.
func (s *Set) Schema() string { return s.schema }

// Close waits for a background pruning run to stop and closes the pool if
// Open created it. Seen fails after Close.
func (s *Set) Close() error {
	if s.pruner.Close() && s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// errClosed is returned by Seen after Close.
var errClosed = errors.New("replay set closed")

// Seen implements auth.ReplayCache: it records jti as used through until
// and reports whether it was already recorded and unexpired, in one
// statement. Every failure wraps auth.ErrReplayCache.
func (s *Set) Seen(ctx context.Context, jti string, until time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%w: %w", auth.ErrReplayCache, err)
	}
	if jti == "" || len(jti) > MaxJTI || strings.ContainsRune(jti, 0) || !utf8.ValidString(jti) {
		return false, fmt.Errorf("%w: jti must be 1 to %d bytes of UTF-8 without NUL", auth.ErrReplayCache, MaxJTI)
	}
	if s.pruner.Closed() {
		return false, fmt.Errorf("%w: %w", auth.ErrReplayCache, errClosed)
	}
	now := s.now()
	var fresh bool
	err := s.pool.QueryRow(ctx, s.seenSQL, jti, until, now).Scan(&fresh)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		s.maybePrune()
		return true, nil
	case err != nil:
		return false, fmt.Errorf("%w: pgreplay: %w", auth.ErrReplayCache, err)
	}
	s.maybePrune()
	return false, nil
}

// Contains reports whether key is recorded and unexpired, recording
// nothing (auth.ReplayLookup: revocations are read this way).
func (s *Set) Contains(ctx context.Context, key string) (bool, error) {
	if s.pruner.Closed() {
		return false, fmt.Errorf("%w: %w", auth.ErrReplayCache, errClosed)
	}
	var ok bool
	if err := s.pool.QueryRow(ctx, s.containsSQL, key, s.now()).Scan(&ok); err != nil {
		return false, fmt.Errorf("%w: pgreplay: %w", auth.ErrReplayCache, err)
	}
	return ok, nil
}

// Prune deletes the jtis expired at Options.Now, in batches of at most
// Options.PruneBatch rows, until a batch is not full or
// Options.PruneMaxBatches batches ran, and returns how many it deleted.
func (s *Set) Prune(ctx context.Context) (int64, error) {
	n, err := s.pruner.Prune(ctx, s.now())
	if err != nil {
		return n, fmt.Errorf("pgreplay: prune: %w", err)
	}
	return n, nil
}

// maybePrune starts a background pruning run when none is running and
// the interval has passed since the last one started.
func (s *Set) maybePrune() { s.pruner.Maybe(func() any { return s.now() }) }
