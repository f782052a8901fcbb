// Package sqliteca is the issuing CA's certificate registry (ca.Registry)
// kept in the deployment's SQLite state file: what the CA issued, and
// what was revoked, survives restarts, and a revocation is in force for
// the next envelope the gateway verifies.
//
// Its SQL is parallel to store/pgca's; the kit gateway/ca/catest holds
// both to one behaviour.
package sqliteca

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/gateway/ca"
	"github.com/custos-runtime/custos/internal/sqlitedb"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

var schema = sqlitedb.Migrations{FS: migrationFS, Dir: "migrations", Table: "ca_migrations"}

const columns = `serial, agent_id, not_before, not_after, chain_pem, issued_by, revoked_at, revoked_by, revocation_reason`

// Registry is the certificate registry. It is safe for concurrent use.
type Registry struct{ db *sqlitedb.DB }

var _ ca.Registry = (*Registry)(nil)

// New returns the registry kept in db (a database file other stores
// share), applying its migrations (recorded in ca_migrations).
func New(ctx context.Context, db *sqlitedb.DB) (*Registry, error) {
	if err := db.Migrate(ctx, schema); err != nil {
		return nil, fmt.Errorf("sqliteca: %w", err)
	}
	return &Registry{db: db}, nil
}

func wrap(err error) error {
	if err == nil || errors.Is(err, ca.ErrNotFound) {
		return err
	}
	return fmt.Errorf("%w: %w", ca.ErrRegistry, err)
}

// Record implements ca.Registry.
func (r *Registry) Record(ctx context.Context, c ca.Certificate) error {
	return wrap(r.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO ca_certificates (serial, agent_id, not_before, not_after, chain_pem, issued_by)
			VALUES (?, ?, ?, ?, ?, ?)`, c.Serial, c.AgentID, c.NotBefore.UnixNano(), c.NotAfter.UnixNano(), c.ChainPEM, c.IssuedBy)
		return err
	}))
}

type scanner interface{ Scan(dest ...any) error }

func scan(s scanner) (ca.Certificate, error) {
	var c ca.Certificate
	var nb, na int64
	var rev sql.NullInt64
	if err := s.Scan(&c.Serial, &c.AgentID, &nb, &na, &c.ChainPEM, &c.IssuedBy, &rev, &c.RevokedBy, &c.RevocationReason); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return c, ca.ErrNotFound
		}
		return c, err
	}
	c.NotBefore, c.NotAfter = time.Unix(0, nb).UTC(), time.Unix(0, na).UTC()
	if rev.Valid {
		c.RevokedAt = time.Unix(0, rev.Int64).UTC()
	}
	return c, nil
}

// Get implements ca.Registry.
func (r *Registry) Get(ctx context.Context, serial string) (c ca.Certificate, err error) {
	err = r.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		c, err = scan(tx.QueryRowContext(ctx, `SELECT `+columns+` FROM ca_certificates WHERE serial = ?`, serial))
		return err
	})
	return c, wrap(err)
}

// Revoke implements ca.Registry: one statement sets the revocation only
// when none is recorded, so racing revocations agree on the first.
func (r *Registry) Revoke(ctx context.Context, serial string, at time.Time, by, reason string) (c ca.Certificate, err error) {
	err = r.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE ca_certificates SET revoked_at = ?, revoked_by = ?, revocation_reason = ?
			WHERE serial = ? AND revoked_at IS NULL`, at.UnixNano(), by, reason, serial); err != nil {
			return err
		}
		c, err = scan(tx.QueryRowContext(ctx, `SELECT `+columns+` FROM ca_certificates WHERE serial = ?`, serial))
		return err
	})
	return c, wrap(err)
}

// List implements ca.Registry.
func (r *Registry) List(ctx context.Context, agentID, before string, limit int) (out []ca.Certificate, err error) {
	err = r.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		var cursor int64 = 1<<63 - 1
		if before != "" {
			if err := tx.QueryRowContext(ctx, `SELECT seq FROM ca_certificates WHERE serial = ?`, before).Scan(&cursor); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return ca.ErrNotFound
				}
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+columns+` FROM ca_certificates
			WHERE seq < ? AND (? = '' OR agent_id = ?) ORDER BY seq DESC LIMIT ?`, cursor, agentID, agentID, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c, err := scan(rows)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, wrap(err)
}
