// Package pgratelimit is a gateway.RateLimiter kept in PostgreSQL: the
// per-sender token buckets of gateway.NewMemoryRateLimiter, shared by
// every replica of custos serve on one database, so that a sender's
// allowance is one budget whichever replica the load balancer picks.
//
//	lim, err := pgratelimit.Open(ctx, dsn, pgratelimit.Rate{PerSecond: 5, Burst: 20}, nil)
//	if err != nil { ... }
//	defer lim.Close()
//	gateway.New(gateway.Options{..., Limiter: lim})
//
// # Table
//
// One table, rate_buckets (sender PRIMARY KEY, tokens, at, allowed), in
// Options.Schema ("custos" by default, the approval store's schema;
// created when missing). Its migrations are embedded, recorded in
// rate_limit_migrations and applied under the advisory lock
// MigrationLockKey, the one store/pgstore takes.
//
// # Allow
//
// Allow is one statement, an upsert on the sender's row:
//
//	refill  = least(burst, tokens + greatest(0, now - at) × rate)
//	tokens := refill - 1 when refill ≥ 1, else refill
//	allowed := refill ≥ 1
//	at      := greatest(at, now)
//
// with a new sender's row starting full (burst - 1 after its first
// request). The row lock PostgreSQL takes for ON CONFLICT DO UPDATE
// serialises the calls for one sender across every replica, and each
// computes from the row as the previous one committed it, so a burst of
// concurrent calls is granted exactly the tokens the bucket holds. A
// refused call waits (1 - tokens) / rate, as in memory.
//
// # Clock
//
// The bucket is computed with the now the gateway passes to Allow (the
// request's clock), never the database's: tests are deterministic, and the
// limiter behaves as the in-memory one. Replicas' clocks must therefore
// agree, to within a small fraction of 1/rate. "at" never moves back: a
// call whose now is behind the bucket's (a replica whose clock lags) gets
// no refill and does not rewind the bucket, so disagreeing clocks cannot
// mint tokens by refilling one interval twice; a lagging replica only
// refills late. (The in-memory limiter, with a single clock, sets at to
// now unconditionally; with a monotonic clock the two are the same.)
// Every replica must be configured with the same RateLimit.
//
// # Failures and size
//
// Any database error (and a done context) is returned, and the gateway
// refuses the request as service_unavailable: the limiter fails closed.
//
// There is one row per sender that made a request; senders are verified
// identities, bounded by the trust store. A row idle for burst / rate
// (its bucket has refilled) means the same as no row, and is deleted in
// bounded batches (Options.PruneBatch rows per DELETE, through a ctid
// subquery with SKIP LOCKED) by a background run started by Allow at most
// every Options.PruneInterval.
package pgratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/custos-runtime/custos/internal/pgutil"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults applied when an Options field is zero.
const (
	// DefaultSchema is the approval store's default schema.
	DefaultSchema = "custos"
	// DefaultMaxConns is the size of a pool Open creates when neither
	// Options.MaxConns nor the DSN's pool_max_conns sets it.
	DefaultMaxConns = 4
	// DefaultPruneInterval is the least time between two pruning runs
	// of one Limiter.
	DefaultPruneInterval = time.Minute
	// DefaultPruneBatch is the most rows one DELETE removes.
	DefaultPruneBatch = 1000
	// DefaultPruneMaxBatches bounds the batches of one run.
	DefaultPruneMaxBatches = 100
	// ApplicationName is the application_name of the connections of a
	// pool Open creates, when the DSN sets none.
	ApplicationName = "custos-pgratelimit"
)

// Options tunes a Limiter. A nil *Options, and every zero field, means
// the default.
type Options struct {
	// Schema holds the table, created when missing. Zero means the
	// custos_schema parameter of the DSN given to Open, else
	// DefaultSchema.
	Schema string
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

// Rate is a bucket's refill rate and size: gateway.RateLimit's fields
// (kept here so that the adapter does not import the gateway).
type Rate struct {
	PerSecond float64
	Burst     int
}

// Limiter is a gateway.RateLimiter kept in PostgreSQL. It is safe for
// concurrent use, and any number of Limiters, in one process or several,
// may use one schema: they then share every sender's bucket.
type Limiter struct {
	pool     *pgxpool.Pool
	ownsPool bool
	schema   string
	rate     Rate
	log      *slog.Logger

	allowSQL string
	// pruner deletes idle buckets, and says when the Limiter is closed.
	pruner *pgutil.Pruner
}

// errClosed is returned by Allow after Close.
var errClosed = errors.New("pgratelimit: limiter closed")

// Open connects to the database dsn names (a postgres:// URL, whose
// custos_schema parameter names the schema as for store.Parse, or a
// key=value string), creates the schema and table when missing and
// returns a Limiter enforcing rate, which owns the pool and closes it in
// Close. A zero rate (PerSecond or Burst not positive) allows everything,
// as gateway.NewMemoryRateLimiter does. o may be nil.
func Open(ctx context.Context, dsn string, rate Rate, o *Options) (*Limiter, error) {
	if o == nil {
		o = &Options{}
	}
	oo := *o
	pool, schema, err := pgutil.OpenPool(ctx, dsn, oo.Schema, DefaultSchema, ApplicationName, o.MaxConns, DefaultMaxConns)
	if err != nil {
		return nil, fmt.Errorf("pgratelimit: %w", err)
	}
	oo.Schema = schema
	l, err := New(ctx, pool, rate, &oo)
	if err != nil {
		pool.Close()
		return nil, err
	}
	l.ownsPool = true
	return l, nil
}

// New returns a Limiter using pool, which it does not close (the approval
// store's pool, say: pgstore.Store.Pool). Every statement names the
// schema, so the pool's search_path does not matter. It creates the schema
// and table when missing. o may be nil.
func New(ctx context.Context, pool *pgxpool.Pool, rate Rate, o *Options) (*Limiter, error) {
	if o == nil {
		o = &Options{}
	}
	if pool == nil {
		return nil, errors.New("pgratelimit: nil pool")
	}
	if math.IsNaN(rate.PerSecond) || math.IsInf(rate.PerSecond, 0) {
		return nil, fmt.Errorf("pgratelimit: rate %v per second", rate.PerSecond)
	}
	l := &Limiter{pool: pool, schema: o.Schema, rate: rate, log: o.Logger}
	pr := &pgutil.Pruner{Pool: pool, Every: o.PruneInterval, Batch: o.PruneBatch, MaxBatches: o.PruneMaxBatches}
	if l.schema == "" {
		l.schema = DefaultSchema
	}
	if err := pgutil.CheckSchema(l.schema); err != nil {
		return nil, err
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
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
	t := pgx.Identifier{l.schema, "rate_buckets"}.Sanitize()
	// $1 sender, $2 now, $3 rate per second, $4 burst. Every SET
	// expression reads the row as it was before this statement.
	refill := `least($4::float8, b.tokens + greatest(0, extract(epoch FROM $2::timestamptz - b.at))::float8 * $3::float8)`
	l.allowSQL = `INSERT INTO ` + t + ` AS b (sender, tokens, at, allowed) VALUES ($1, $4::float8 - 1, $2, true)
		ON CONFLICT (sender) DO UPDATE SET
			tokens = ` + refill + ` - CASE WHEN ` + refill + ` >= 1 THEN 1 ELSE 0 END,
			allowed = ` + refill + ` >= 1,
			at = greatest(b.at, $2::timestamptz)
		RETURNING allowed, tokens`
	pr.SQL = `DELETE FROM ` + t + `
		WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM ` + t + ` WHERE at < $1
			LIMIT $2 FOR UPDATE SKIP LOCKED))
		AND at < $1`
	if err := migrate(ctx, pool, l.schema); err != nil {
		return nil, fmt.Errorf("pgratelimit: schema %s: %w", l.schema, err)
	}
	pr.Log, pr.What = l.log.With("schema", l.schema), "rate-limit buckets"
	l.pruner = pr
	return l, nil
}

// Schema returns the schema the table lives in.
func (l *Limiter) Schema() string { return l.schema }

// limited reports whether the rate limits anything.
func (l *Limiter) limited() bool { return l.rate.PerSecond > 0 && l.rate.Burst > 0 }

// Close waits for a background pruning run to stop and closes the pool if
// Open created it. Allow fails after Close (unless the rate is zero).
func (l *Limiter) Close() error {
	if l.pruner.Close() && l.ownsPool {
		l.pool.Close()
	}
	return nil
}

// Allow implements gateway.RateLimiter: it takes a token from sender's
// shared bucket at now, in one statement, or says how long until one is
// available. An error (database unreachable, ctx done) means the request
// must be refused.
func (l *Limiter) Allow(ctx context.Context, sender string, now time.Time) (bool, time.Duration, error) {
	if !l.limited() {
		return true, 0, nil
	}
	if err := ctx.Err(); err != nil {
		return false, 0, fmt.Errorf("pgratelimit: %w", err)
	}
	if l.pruner.Closed() {
		return false, 0, errClosed
	}
	var ok bool
	var tokens float64
	if err := l.pool.QueryRow(ctx, l.allowSQL, sender, now, l.rate.PerSecond, float64(l.rate.Burst)).Scan(&ok, &tokens); err != nil {
		return false, 0, fmt.Errorf("pgratelimit: %w", err)
	}
	l.maybePrune(now)
	if ok {
		return true, 0, nil
	}
	return false, time.Duration((1 - tokens) / l.rate.PerSecond * float64(time.Second)), nil
}

// idleCutoff is the time before which a bucket last used has refilled to
// the burst: its row can go.
func (l *Limiter) idleCutoff(now time.Time) time.Time {
	full := time.Duration(float64(l.rate.Burst) / l.rate.PerSecond * float64(time.Second))
	return now.Add(-full - time.Second)
}

// Prune deletes the buckets idle since before now - burst/rate (they have
// refilled, so they mean the same as no row), in batches of at most
// Options.PruneBatch rows, until a batch is not full or
// Options.PruneMaxBatches batches ran, and returns how many it deleted.
func (l *Limiter) Prune(ctx context.Context, now time.Time) (int64, error) {
	if !l.limited() {
		return 0, nil
	}
	n, err := l.pruner.Prune(ctx, l.idleCutoff(now))
	if err != nil {
		return n, fmt.Errorf("pgratelimit: prune: %w", err)
	}
	return n, nil
}

// maybePrune starts a background pruning run when none is running and
// the interval has passed since the last one started.
func (l *Limiter) maybePrune(now time.Time) {
	l.pruner.Maybe(func() any { return l.idleCutoff(now) })
}
