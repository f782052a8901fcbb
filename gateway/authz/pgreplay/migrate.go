package pgreplay

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/internal/migrations"
)

// This file is a small migration runner of the package's own, in the
// manner of store/pgstore's (whose helpers are unexported). It is meant to
// be folded into a shared helper later.

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationsTable records the migrations of this package. It is not
// pgstore's schema_migrations: the replay set may share a schema with the
// approval store, and each keeps its own version count.
const migrationsTable = "dpop_replay_migrations"

// MigrationLockKey is the pg_advisory_xact_lock key held while the schema
// is created and migrated. It is the same key as store/pgstore's
// MigrationLockKey on purpose: the store, the replay set and the rate
// limiter may create one schema at the same time, and one lock serialises
// their CREATE SCHEMA and migrations.
const MigrationLockKey int64 = 0x637573746f73_0001

// ErrSchemaTooNew: the replay table was migrated by a newer build.
var ErrSchemaTooNew = errors.New("pgreplay: schema is newer than this build")

func loadMigrations() ([]migrations.Migration, error) {
	return migrations.Load(migrationFS, "migrations")
}

// SchemaVersion is the version of the replay table this build creates
// and uses.
func SchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate creates schema when missing and applies the migrations it lacks,
// in one transaction holding the advisory lock MigrationLockKey; replicas
// starting together wait for one another and apply each migration once.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", MigrationLockKey); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			// CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege
			// even when the schema exists, hence the check.
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
				return err
			}
		}
		q := pgx.Identifier{schema}.Sanitize() + "."
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+migrationsTable+` (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var current, n int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0), count(*) FROM "+q+migrationsTable).Scan(&current, &n); err != nil {
			return err
		}
		if current > len(ms) {
			return fmt.Errorf("%w: version %d, this build knows %d", ErrSchemaTooNew, current, len(ms))
		}
		if n != current {
			return fmt.Errorf("%s damaged: %d rows up to version %d", migrationsTable, n, current)
		}
		for _, m := range ms[current:] {
			if _, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true)", pgx.Identifier{schema}.Sanitize()); err != nil {
				return err
			}
			// Several statements: the simple protocol.
			if err := tx.Conn().PgConn().Exec(ctx, m.SQL).Close(); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+q+migrationsTable+" (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
				return err
			}
		}
		return nil
	})
}

// SplitDSN removes the custos_schema parameter from a postgres:// URL, as
// store.Parse does, and returns the DSN without it and the schema it named
// ("" when absent). Other DSNs are returned unchanged.
func SplitDSN(dsn string) (string, string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn, "", nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", errors.New("pgreplay: malformed DSN")
	}
	q := u.Query()
	if !q.Has("custos_schema") {
		return dsn, "", nil
	}
	schema := q.Get("custos_schema")
	q.Del("custos_schema")
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

func checkSchema(schema string) error {
	if schema == "" || len(schema) > 63 || strings.ContainsRune(schema, 0) {
		return fmt.Errorf("pgreplay: schema name %q: 1 to 63 bytes, no NUL", schema)
	}
	return nil
}
