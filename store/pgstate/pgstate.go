// Package pgstate keeps ARSIA-State (package arsia/state) in PostgreSQL,
// so that every replica of custos serve on one schema serves one state:
// entries with their full version history, logical deletes, purges and
// grants.
//
// The rules are state.TxStore's (the kit arsia/state/statetest holds it,
// store/sqlitestate and state.MemoryStore to one behaviour); this package
// is its state.Backend, three tables in the schema (state_keys,
// state_versions, state_grants) created by migrations recorded in
// state_migrations under the advisory lock every custos store takes.
//
// # Concurrency
//
// Every write transaction first takes a transaction-level advisory lock
// proper to the schema's state (pg_advisory_xact_lock), so state writes
// are serialized across pools and replicas: a SET with expected_version
// reads the current version and appends the next one with no other state
// write in between, and of concurrent conditional SETs on one version
// exactly one succeeds, the others get conflict. Reads run in REPEATABLE
// READ read-only transactions (one snapshot) and take no lock. Inside a
// unit of work on the pool (pgutil.Units) both run in the unit's
// transaction.
package pgstate

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/internal/pgutil"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrSchemaTooNew: the state tables were migrated by a newer build.
var ErrSchemaTooNew = errors.New("pgstate: schema is newer than this build")

var schemaMigrations = pgutil.Migrations{FS: migrationFS, Dir: "migrations"}

// SchemaVersion is the version of the state tables this build creates.
func SchemaVersion() int { return schemaMigrations.Version() }

// DefaultSchema is the approval store's default schema.
const DefaultSchema = "custos"

// Options tunes New. A nil *Options means the defaults.
type Options struct {
	// Schema holds the tables, created when missing; "" means
	// DefaultSchema.
	Schema string
	// Store configures the rules (zones, limits, grant ids).
	Store *state.StoreOptions
}

// Store is a state.Store in PostgreSQL. It is safe for concurrent use,
// and any number of Stores, in one process or several, may share one
// schema: they then share one state.
type Store struct {
	*state.TxStore
	schema string
}

// New returns the state store on pool, which it does not close, in
// o.Schema (created, with the tables, when missing).
func New(ctx context.Context, pool *pgxpool.Pool, o *Options) (*Store, error) {
	if o == nil {
		o = &Options{}
	}
	if pool == nil {
		return nil, errors.New("pgstate: nil pool")
	}
	schema := o.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if err := pgutil.CheckSchema(schema); err != nil {
		return nil, err
	}
	ms, err := schemaMigrations.Load()
	if err != nil {
		return nil, err
	}
	if err := pgutil.MigratePool(ctx, pool, pgutil.Schema{Name: schema, Table: "state_migrations", Migrations: ms, TooNew: ErrSchemaTooNew}); err != nil {
		return nil, fmt.Errorf("pgstate: schema %s: %w", schema, err)
	}
	b := &backend{pool: pool, run: &pgutil.Runner{Pool: pool}, q: queries(pgx.Identifier{schema}.Sanitize()), lock: "custos-state:" + schema}
	return &Store{TxStore: state.NewTxStore(b, o.Store), schema: schema}, nil
}

// Schema returns the schema the tables live in.
func (s *Store) Schema() string { return s.schema }

type backend struct {
	pool *pgxpool.Pool
	run  *pgutil.Runner
	q    *sqls
	lock string
}

func (b *backend) Read(ctx context.Context, fn func(state.Tx) error) error {
	return b.run.Read(ctx, func(ctx context.Context) error {
		if u := pgutil.Joined(ctx, b.pool); u != nil {
			return fn(&txn{ctx: ctx, tx: u.Tx(), q: b.q})
		}
		tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		return fn(&txn{ctx: ctx, tx: tx, q: b.q})
	})
}

func (b *backend) Write(ctx context.Context, fn func(state.Tx) error) error {
	return b.run.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", b.lock); err != nil {
			return err
		}
		return fn(&txn{ctx: ctx, tx: tx, q: b.q})
	})
}

// sqls are the statements, with the schema filled in.
type sqls struct {
	head, heads, asOf, oldest, keys, bump, insert, purgeValues, purgeKey string
	grants, grant, countGrants, addGrant, revoke                         string
}

const versionCols = `v.key, v.seq, v.at, v.owner, v.scope, v.created_at, v.updated_at, v.expires_at,
	v.retention_days, v.data_residency, v.pii, v.pii_categories, v.version, v.deleted, v.value`

const grantCols = `id, grantor, pattern, grantee, access_level, valid_until, created_at, revoked_at`

func queries(s string) *sqls {
	r := strings.NewReplacer("S.", s+".")
	q := func(x string) string { return r.Replace(x) }
	return &sqls{
		head: q(`SELECT ` + versionCols + `, k.purged_at FROM S.state_keys k
			JOIN S.state_versions v ON v.key = k.key AND v.seq = k.head WHERE k.key = $1`),
		heads: q(`SELECT ` + versionCols + `, k.purged_at FROM S.state_keys k
			JOIN S.state_versions v ON v.key = k.key AND v.seq = k.head WHERE k.key >= $1 AND k.key < $2`),
		asOf: q(`SELECT ` + versionCols + ` FROM S.state_versions v
			WHERE v.key >= $1 AND v.key < $2 AND v.seq = (SELECT max(w.seq) FROM S.state_versions w WHERE w.key = v.key AND w.at <= $3)`),
		oldest: q(`SELECT min(at) FROM S.state_versions`),
		keys:   q(`SELECT count(*) FROM S.state_keys`),
		bump: q(`INSERT INTO S.state_keys AS k (key, head) VALUES ($1, 1)
			ON CONFLICT (key) DO UPDATE SET head = k.head + 1, purged_at = NULL RETURNING head`),
		insert: q(`INSERT INTO S.state_versions (key, seq, at, owner, scope, created_at, updated_at,
			expires_at, retention_days, data_residency, pii, pii_categories, version, deleted, value)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`),
		purgeValues: q(`UPDATE S.state_versions SET value = NULL WHERE key = $1`),
		purgeKey:    q(`UPDATE S.state_keys SET purged_at = $1 WHERE key = $2`),
		grants:      q(`SELECT ` + grantCols + ` FROM S.state_grants WHERE ($1 = '' OR grantor = $1) AND ($2 = '' OR grantee = $2) ORDER BY seq`),
		grant:       q(`SELECT ` + grantCols + ` FROM S.state_grants WHERE id = $1`),
		countGrants: q(`SELECT count(*) FROM S.state_grants`),
		addGrant: q(`INSERT INTO S.state_grants (id, grantor, pattern, grantee, access_level, valid_until, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`),
		revoke: q(`UPDATE S.state_grants SET revoked_at = $1 WHERE id = $2`),
	}
}

type txn struct {
	ctx context.Context
	tx  pgx.Tx
	q   *sqls
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// prefixRange is [prefix, prefix+"\x7f"): keys are ASCII below 0x7f.
func prefixRange(prefix string) (lo, hi string) { return prefix, prefix + "\x7f" }

func scanVersion(r pgx.Row, extra ...any) (*state.Version, error) {
	var v state.Version
	var seq, at, created, updated, expires int64
	var retention int
	var scope, pii, cats string
	var value []byte
	e := &v.Entry
	dest := append([]any{&e.Key, &seq, &at, &e.OwnerAgentID, &scope, &created, &updated, &expires,
		&retention, &e.DataResidency, &pii, &cats, &e.Version, &e.Deleted, &value}, extra...)
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	e.Scope, e.PIIClassification = state.Scope(scope), state.PII(pii)
	e.CreatedAt, e.UpdatedAt, e.ExpiresAt = fromNanos(created), fromNanos(updated), fromNanos(expires)
	e.RetentionDays = retention
	if cats != "" {
		e.PIISpecialCategories = strings.Split(cats, ",")
	}
	v.Value, v.At = value, fromNanos(at)
	return &v, nil
}

func head(v *state.Version, purged *int64) *state.Head {
	h := &state.Head{Version: *v}
	if purged != nil {
		h.Purged, h.PurgedAt = true, time.Unix(0, *purged).UTC()
	}
	return h
}

func (t *txn) Head(key string) (*state.Head, error) {
	var purged *int64
	v, err := scanVersion(t.tx.QueryRow(t.ctx, t.q.head, key), &purged)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return head(v, purged), nil
}

func (t *txn) Heads(prefix string, fn func(*state.Head) error) error {
	lo, hi := prefixRange(prefix)
	rows, err := t.tx.Query(t.ctx, t.q.heads, lo, hi)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var purged *int64
		v, err := scanVersion(rows, &purged)
		if err != nil {
			return err
		}
		if err := fn(head(v, purged)); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (t *txn) AsOf(at time.Time, prefix string, fn func(*state.Version) error) error {
	lo, hi := prefixRange(prefix)
	rows, err := t.tx.Query(t.ctx, t.q.asOf, lo, hi, at.UnixNano())
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (t *txn) Oldest() (time.Time, error) {
	var n *int64
	if err := t.tx.QueryRow(t.ctx, t.q.oldest).Scan(&n); err != nil {
		return time.Time{}, err
	}
	if n == nil {
		return time.Time{}, nil
	}
	return time.Unix(0, *n).UTC(), nil
}

func (t *txn) Keys() (int, error) {
	var n int
	err := t.tx.QueryRow(t.ctx, t.q.keys).Scan(&n)
	return n, err
}

func (t *txn) Append(v *state.Version) error {
	e := &v.Entry
	var seq int64
	if err := t.tx.QueryRow(t.ctx, t.q.bump, e.Key).Scan(&seq); err != nil {
		return err
	}
	_, err := t.tx.Exec(t.ctx, t.q.insert,
		e.Key, seq, v.At.UnixNano(), e.OwnerAgentID, string(e.Scope), nanos(e.CreatedAt), nanos(e.UpdatedAt),
		nanos(e.ExpiresAt), e.RetentionDays, e.DataResidency, string(e.PIIClassification),
		strings.Join(e.PIISpecialCategories, ","), e.Version, e.Deleted, v.Value)
	return err
}

func (t *txn) Purge(key string, at time.Time) error {
	if _, err := t.tx.Exec(t.ctx, t.q.purgeValues, key); err != nil {
		return err
	}
	_, err := t.tx.Exec(t.ctx, t.q.purgeKey, at.UnixNano(), key)
	return err
}

func scanGrant(r pgx.Row) (*state.Grant, error) {
	var g state.Grant
	var pattern, level string
	var until, created int64
	var revoked *int64
	if err := r.Scan(&g.ID, &g.GrantorAgentID, &pattern, &g.GranteeAgentID, &level, &until, &created, &revoked); err != nil {
		return nil, err
	}
	p, err := state.ParseKeyPattern(pattern, g.GrantorAgentID)
	if err != nil {
		return nil, fmt.Errorf("pgstate: grant %s: stored pattern: %w", g.ID, err)
	}
	g.KeyPattern, g.AccessLevel = p, state.AccessLevel(level)
	g.ValidUntil, g.CreatedAt = fromNanos(until), fromNanos(created)
	if revoked != nil {
		g.RevokedAt = time.Unix(0, *revoked).UTC()
	}
	return &g, nil
}

func (t *txn) Grants(grantor, grantee string) ([]*state.Grant, error) {
	rows, err := t.tx.Query(t.ctx, t.q.grants, grantor, grantee)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*state.Grant
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

func (t *txn) Grant(id string) (*state.Grant, error) {
	g, err := scanGrant(t.tx.QueryRow(t.ctx, t.q.grant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return g, err
}

func (t *txn) CountGrants() (int, error) {
	var n int
	err := t.tx.QueryRow(t.ctx, t.q.countGrants).Scan(&n)
	return n, err
}

func (t *txn) AddGrant(g *state.Grant) error {
	_, err := t.tx.Exec(t.ctx, t.q.addGrant, g.ID, g.GrantorAgentID, g.KeyPattern.String(), g.GranteeAgentID,
		string(g.AccessLevel), nanos(g.ValidUntil), nanos(g.CreatedAt))
	return err
}

func (t *txn) RevokeGrant(id string, at time.Time) error {
	_, err := t.tx.Exec(t.ctx, t.q.revoke, at.UnixNano(), id)
	return err
}
