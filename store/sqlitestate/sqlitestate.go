// Package sqlitestate keeps ARSIA-State (package arsia/state) in the
// deployment's SQLite state file, next to the approvals, exchanges and
// audit log: entries with their full version history, logical deletes,
// purges and grants survive restarts.
//
//	st, err := store.Open(ctx, loc, nil) // st.StateStore is a *Store on custos.db
//
// The rules are state.TxStore's (the ones state.MemoryStore has; the kit
// arsia/state/statetest holds both to one behaviour); this package is its
// state.Backend: three tables, state_keys (one row per key: its newest
// version and purge mark), state_versions (every version, its value in
// canonical JSON, NULL once purged) and state_grants, created by the
// migrations recorded in state_migrations.
//
// Writes go through the state file's single writer (sqlitedb.DB.Write),
// so a SET with expected_version reads the current version and appends
// the next one with no other write in between, across processes too:
// of concurrent conditional SETs on one version exactly one succeeds.
// Reads are WAL snapshots and never block the writer.
package sqlitestate

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/internal/sqlitedb"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

var schema = sqlitedb.Migrations{FS: migrationFS, Dir: "migrations", Table: "state_migrations"}

// SchemaVersion is the number of migrations of this build.
func SchemaVersion() int { return schema.SchemaVersion() }

// Store is a state.Store in a SQLite file. It is safe for concurrent use.
type Store struct {
	*state.TxStore
	db *sqlitedb.DB
}

// New returns the state store kept in db, a database file other stores
// share (package store opens it): it applies the store's migrations. o
// may be nil (state.StoreOptions' defaults).
func New(ctx context.Context, db *sqlitedb.DB, o *state.StoreOptions) (*Store, error) {
	if err := db.Migrate(ctx, schema); err != nil {
		return nil, fmt.Errorf("sqlitestate: %w", err)
	}
	return &Store{TxStore: state.NewTxStore(backend{db}, o), db: db}, nil
}

// backend is the state.Backend on db.
type backend struct{ db *sqlitedb.DB }

func (b backend) Read(ctx context.Context, fn func(state.Tx) error) error {
	return b.db.Read(ctx, func(tx *sqlitedb.Tx) error { return fn(&txn{ctx: ctx, tx: tx}) })
}

func (b backend) Write(ctx context.Context, fn func(state.Tx) error) error {
	return b.db.Write(ctx, func(tx *sqlitedb.Tx) error { return fn(&txn{ctx: ctx, tx: tx}) })
}

type txn struct {
	ctx context.Context
	tx  *sqlitedb.Tx
}

const versionCols = `v.key, v.seq, v.at, v.owner, v.scope, v.created_at, v.updated_at, v.expires_at,
	v.retention_days, v.data_residency, v.pii, v.pii_categories, v.version, v.deleted, v.value`

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

// prefixRange returns the bounds [lo, hi) of the keys starting with
// prefix: keys are ASCII below 0x7f, so every key starting with prefix
// lies below prefix+"\x7f" and every string in between starts with it.
func prefixRange(prefix string) (lo, hi string) { return prefix, prefix + "\x7f" }

type scanner interface{ Scan(dest ...any) error }

func scanVersion(r scanner, extra ...any) (*state.Version, error) {
	var v state.Version
	var seq, at, created, updated, expires int64
	var retention int
	var scope, pii, cats string
	var deleted int
	var value []byte
	e := &v.Entry
	dest := append([]any{&e.Key, &seq, &at, &e.OwnerAgentID, &scope, &created, &updated, &expires,
		&retention, &e.DataResidency, &pii, &cats, &e.Version, &deleted, &value}, extra...)
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	e.Scope, e.PIIClassification = state.Scope(scope), state.PII(pii)
	e.CreatedAt, e.UpdatedAt, e.ExpiresAt = fromNanos(created), fromNanos(updated), fromNanos(expires)
	e.RetentionDays, e.Deleted = retention, deleted != 0
	if cats != "" {
		e.PIISpecialCategories = strings.Split(cats, ",")
	}
	v.Value, v.At = value, fromNanos(at)
	return &v, nil
}

func (t *txn) Head(key string) (*state.Head, error) {
	row := t.tx.QueryRowContext(t.ctx, `SELECT `+versionCols+`, k.purged_at FROM state_keys k
		JOIN state_versions v ON v.key = k.key AND v.seq = k.head WHERE k.key = ?`, key)
	var purged sql.NullInt64
	v, err := scanVersion(row, &purged)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &state.Head{Version: *v, Purged: purged.Valid, PurgedAt: fromNanos(purged.Int64)}, nil
}

func (t *txn) Heads(prefix string, fn func(*state.Head) error) error {
	lo, hi := prefixRange(prefix)
	rows, err := t.tx.QueryContext(t.ctx, `SELECT `+versionCols+`, k.purged_at FROM state_keys k
		JOIN state_versions v ON v.key = k.key AND v.seq = k.head WHERE k.key >= ? AND k.key < ?`, lo, hi)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var purged sql.NullInt64
		v, err := scanVersion(rows, &purged)
		if err != nil {
			return err
		}
		if err := fn(&state.Head{Version: *v, Purged: purged.Valid, PurgedAt: fromNanos(purged.Int64)}); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (t *txn) AsOf(at time.Time, prefix string, fn func(*state.Version) error) error {
	lo, hi := prefixRange(prefix)
	rows, err := t.tx.QueryContext(t.ctx, `SELECT `+versionCols+` FROM state_versions v
		WHERE v.key >= ? AND v.key < ? AND v.seq = (SELECT max(w.seq) FROM state_versions w WHERE w.key = v.key AND w.at <= ?)`,
		lo, hi, at.UnixNano())
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
	var n sql.NullInt64
	if err := t.tx.QueryRowContext(t.ctx, `SELECT min(at) FROM state_versions`).Scan(&n); err != nil {
		return time.Time{}, err
	}
	if !n.Valid {
		return time.Time{}, nil
	}
	return time.Unix(0, n.Int64).UTC(), nil
}

func (t *txn) Keys() (int, error) {
	var n int
	err := t.tx.QueryRowContext(t.ctx, `SELECT count(*) FROM state_keys`).Scan(&n)
	return n, err
}

func (t *txn) Append(v *state.Version) error {
	e := &v.Entry
	var seq int64
	err := t.tx.QueryRowContext(t.ctx, `INSERT INTO state_keys (key, head) VALUES (?, 1)
		ON CONFLICT (key) DO UPDATE SET head = state_keys.head + 1, purged_at = NULL RETURNING head`, e.Key).Scan(&seq)
	if err != nil {
		return err
	}
	deleted := 0
	if e.Deleted {
		deleted = 1
	}
	_, err = t.tx.ExecContext(t.ctx, `INSERT INTO state_versions (key, seq, at, owner, scope, created_at, updated_at,
		expires_at, retention_days, data_residency, pii, pii_categories, version, deleted, value)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.Key, seq, v.At.UnixNano(), e.OwnerAgentID, string(e.Scope), nanos(e.CreatedAt), nanos(e.UpdatedAt),
		nanos(e.ExpiresAt), e.RetentionDays, e.DataResidency, string(e.PIIClassification),
		strings.Join(e.PIISpecialCategories, ","), e.Version, deleted, v.Value)
	return err
}

func (t *txn) Purge(key string, at time.Time) error {
	if _, err := t.tx.ExecContext(t.ctx, `UPDATE state_versions SET value = NULL WHERE key = ?`, key); err != nil {
		return err
	}
	_, err := t.tx.ExecContext(t.ctx, `UPDATE state_keys SET purged_at = ? WHERE key = ?`, at.UnixNano(), key)
	return err
}

const grantCols = `id, grantor, pattern, grantee, access_level, valid_until, created_at, revoked_at`

func scanGrant(r scanner) (*state.Grant, error) {
	var g state.Grant
	var pattern, level string
	var until, created int64
	var revoked sql.NullInt64
	if err := r.Scan(&g.ID, &g.GrantorAgentID, &pattern, &g.GranteeAgentID, &level, &until, &created, &revoked); err != nil {
		return nil, err
	}
	p, err := state.ParseKeyPattern(pattern, g.GrantorAgentID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestate: grant %s: stored pattern: %w", g.ID, err)
	}
	g.KeyPattern, g.AccessLevel = p, state.AccessLevel(level)
	g.ValidUntil, g.CreatedAt = fromNanos(until), fromNanos(created)
	if revoked.Valid {
		g.RevokedAt = time.Unix(0, revoked.Int64).UTC()
	}
	return &g, nil
}

func (t *txn) Grants(grantor, grantee string) ([]*state.Grant, error) {
	q := `SELECT ` + grantCols + ` FROM state_grants WHERE 1 = 1`
	var args []any
	if grantor != "" {
		q += ` AND grantor = ?`
		args = append(args, grantor)
	}
	if grantee != "" {
		q += ` AND grantee = ?`
		args = append(args, grantee)
	}
	rows, err := t.tx.QueryContext(t.ctx, q+` ORDER BY seq`, args...)
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
	g, err := scanGrant(t.tx.QueryRowContext(t.ctx, `SELECT `+grantCols+` FROM state_grants WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return g, err
}

func (t *txn) CountGrants() (int, error) {
	var n int
	err := t.tx.QueryRowContext(t.ctx, `SELECT count(*) FROM state_grants`).Scan(&n)
	return n, err
}

func (t *txn) AddGrant(g *state.Grant) error {
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO state_grants (id, seq, grantor, pattern, grantee, access_level, valid_until, created_at)
		VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM state_grants), ?, ?, ?, ?, ?, ?)`,
		g.ID, g.GrantorAgentID, g.KeyPattern.String(), g.GranteeAgentID, string(g.AccessLevel), nanos(g.ValidUntil), nanos(g.CreatedAt))
	return err
}

func (t *txn) RevokeGrant(id string, at time.Time) error {
	_, err := t.tx.ExecContext(t.ctx, `UPDATE state_grants SET revoked_at = ? WHERE id = ?`, at.UnixNano(), id)
	return err
}
