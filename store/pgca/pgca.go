// Package pgca is the issuing CA's certificate registry (ca.Registry) kept
// in PostgreSQL, shared by every replica on the schema: a certificate one
// replica revoked is refused by all of them on the next lookup.
//
// Its SQL is parallel to store/sqliteca's; the kit gateway/ca/catest holds
// both to one behaviour.
package pgca

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/gateway/ca"
	"github.com/custos-runtime/custos/internal/pgutil"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrSchemaTooNew: the registry's table was migrated by a newer build.
var ErrSchemaTooNew = errors.New("pgca: schema is newer than this build")

var schemaMigrations = pgutil.Migrations{FS: migrationFS, Dir: "migrations"}

const columns = `serial, agent_id, not_before, not_after, chain_pem, issued_by, revoked_at, revoked_by, revocation_reason`

// Registry is the certificate registry. It is safe for concurrent use.
type Registry struct {
	pool  *pgxpool.Pool
	table string
}

var _ ca.Registry = (*Registry)(nil)

// New returns the registry in schema (created when missing) on pool, which
// it does not close.
func New(ctx context.Context, pool *pgxpool.Pool, schema string) (*Registry, error) {
	if pool == nil {
		return nil, errors.New("pgca: nil pool")
	}
	if err := pgutil.CheckSchema(schema); err != nil {
		return nil, err
	}
	ms, err := schemaMigrations.Load()
	if err != nil {
		return nil, err
	}
	if err := pgutil.MigratePool(ctx, pool, pgutil.Schema{Name: schema, Table: "ca_migrations", Migrations: ms, TooNew: ErrSchemaTooNew}); err != nil {
		return nil, fmt.Errorf("pgca: schema %s: %w", schema, err)
	}
	return &Registry{pool: pool, table: pgx.Identifier{schema, "ca_certificates"}.Sanitize()}, nil
}

func wrap(err error) error {
	if err == nil || errors.Is(err, ca.ErrNotFound) {
		return err
	}
	return fmt.Errorf("%w: %w", ca.ErrRegistry, err)
}

// Record implements ca.Registry.
func (r *Registry) Record(ctx context.Context, c ca.Certificate) error {
	_, err := r.pool.Exec(ctx, `INSERT INTO `+r.table+` (serial, agent_id, not_before, not_after, chain_pem, issued_by)
		VALUES ($1, $2, $3, $4, $5, $6)`, c.Serial, c.AgentID, c.NotBefore, c.NotAfter, c.ChainPEM, c.IssuedBy)
	return wrap(err)
}

func scan(row pgx.Row) (ca.Certificate, error) {
	var c ca.Certificate
	var rev *time.Time
	if err := row.Scan(&c.Serial, &c.AgentID, &c.NotBefore, &c.NotAfter, &c.ChainPEM, &c.IssuedBy, &rev, &c.RevokedBy, &c.RevocationReason); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return c, ca.ErrNotFound
		}
		return c, err
	}
	c.NotBefore, c.NotAfter = c.NotBefore.UTC(), c.NotAfter.UTC()
	if rev != nil {
		c.RevokedAt = rev.UTC()
	}
	return c, nil
}

// Get implements ca.Registry.
func (r *Registry) Get(ctx context.Context, serial string) (ca.Certificate, error) {
	c, err := scan(r.pool.QueryRow(ctx, `SELECT `+columns+` FROM `+r.table+` WHERE serial = $1`, serial))
	return c, wrap(err)
}

// Revoke implements ca.Registry. The UPDATE takes the row lock, so of
// racing revocations (on any replica) the first recorded is the one every
// caller gets back.
func (r *Registry) Revoke(ctx context.Context, serial string, at time.Time, by, reason string) (ca.Certificate, error) {
	var c ca.Certificate
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE `+r.table+` SET revoked_at = $2, revoked_by = $3, revocation_reason = $4
			WHERE serial = $1 AND revoked_at IS NULL`, serial, at, by, reason); err != nil {
			return err
		}
		var err error
		c, err = scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM `+r.table+` WHERE serial = $1`, serial))
		return err
	})
	return c, wrap(err)
}

// List implements ca.Registry.
func (r *Registry) List(ctx context.Context, agentID, before string, limit int) ([]ca.Certificate, error) {
	var cursor int64 = 1<<63 - 1
	if before != "" {
		if err := r.pool.QueryRow(ctx, `SELECT seq FROM `+r.table+` WHERE serial = $1`, before).Scan(&cursor); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, ca.ErrNotFound
			}
			return nil, wrap(err)
		}
	}
	rows, err := r.pool.Query(ctx, `SELECT `+columns+` FROM `+r.table+`
		WHERE seq < $1 AND ($2 = '' OR agent_id = $2) ORDER BY seq DESC LIMIT $3`, cursor, agentID, limit)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []ca.Certificate
	for rows.Next() {
		c, err := scan(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, c)
	}
	return out, wrap(rows.Err())
}
