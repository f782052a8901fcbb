package pgratelimit

import (
	"context"
	"embed"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/internal/pgutil"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationsTable records the migrations of this package. It is not
// pgstore's schema_migrations: the rate limiter may share a schema with the
// approval store, and each keeps its own version count.
const migrationsTable = "rate_limit_migrations"

// MigrationLockKey is the pg_advisory_xact_lock key held while the schema
// is created and migrated. It is the same key as store/pgstore's
// MigrationLockKey on purpose: the store, the replay set and the rate
// limiter may create one schema at the same time, and one lock serialises
// their CREATE SCHEMA and migrations.
const MigrationLockKey = pgutil.MigrationLockKey

// ErrSchemaTooNew: the rate_buckets table was migrated by a newer build.
var ErrSchemaTooNew = errors.New("pgratelimit: schema is newer than this build")

var schemaMigrations = pgutil.Migrations{FS: migrationFS, Dir: "migrations"}

// SchemaVersion is the version of the rate_buckets table this build creates
// and uses.
func SchemaVersion() int { return schemaMigrations.Version() }

// migrate creates schema when missing and applies the migrations it lacks
// (pgutil.Migrate, under the advisory lock every custos store takes).
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ms, err := schemaMigrations.Load()
	if err != nil {
		return err
	}
	return pgutil.MigratePool(ctx, pool, pgutil.Schema{Name: schema, Table: migrationsTable, Migrations: ms, TooNew: ErrSchemaTooNew})
}
