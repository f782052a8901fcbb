package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/internal/pgutil"
	"github.com/custos-runtime/custos/store/pgstore"
)

// The serve marker is what custos serve records about the store it runs
// on, for custos approvals to read (cmd/custos decides what it says): next
// to a file-backed store, in the file named by ServeMarkerPath; in a
// PostgreSQL store, in the table ServeMarkerTable of the store's schema.

// ServeMarkerTable is the marker's table in a PostgreSQL store.
const ServeMarkerTable = "custos_serve_marker"

// ServeMarkerPath is where the marker of a file-backed store lives (""
// for the other kinds): one name for the store however it is reached (a
// symbolic link to the file or to its directory).
func ServeMarkerPath(loc Location) string {
	if loc.Kind != KindSQLite && loc.Kind != KindFile {
		return ""
	}
	p := loc.Path
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		p = filepath.Join(dir, filepath.Base(p))
	}
	return p + ServeMarkerSuffix
}

// WriteServeMarker records (replaces) the marker b of the store at loc. A
// file-backed store that does not exist gets none.
func WriteServeMarker(ctx context.Context, loc Location, b []byte) error {
	switch loc.Kind {
	case KindPostgres:
		return writePostgresMarker(ctx, loc, b)
	case KindSQLite, KindFile:
		if _, err := os.Stat(loc.Path); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		p := ServeMarkerPath(loc)
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			_ = os.Remove(tmp)
			return err
		}
	}
	return nil
}

func writePostgresMarker(ctx context.Context, loc Location, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pool, _, err := pgutil.OpenPool(ctx, loc.DSN, loc.Schema, pgstore.DefaultSchema, "custos serve", 1, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Replicas starting together would race to create the table:
		// the lock migrations take serialises them.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", pgutil.MigrationLockKey); err != nil {
			return err
		}
		// Created only when missing, so that a role without CREATE can
		// run a gateway on a schema an administrator prepared.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", ServeMarkerTable).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, "CREATE TABLE "+ServeMarkerTable+
				" (id integer PRIMARY KEY CHECK (id = 1), marker text NOT NULL)"); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+ServeMarkerTable+" (id, marker) VALUES (1, $1) "+
			"ON CONFLICT (id) DO UPDATE SET marker = EXCLUDED.marker", string(b))
		return err
	})
}

// ReadServeMarker reads the marker of the store at loc; ok is false when
// there is none.
func ReadServeMarker(ctx context.Context, loc Location) (b []byte, ok bool, err error) {
	switch loc.Kind {
	case KindPostgres:
		return readPostgresMarker(ctx, loc)
	case KindSQLite, KindFile:
		b, err = os.ReadFile(ServeMarkerPath(loc))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return b, err == nil, err
	}
	return nil, false, nil
}

func readPostgresMarker(ctx context.Context, loc Location) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pool, _, err := pgutil.OpenPool(ctx, loc.DSN, loc.Schema, pgstore.DefaultSchema, "custos approvals", 1, 1)
	if err != nil {
		return nil, false, err
	}
	defer pool.Close()
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", ServeMarkerTable).Scan(&exists); err != nil || !exists {
		return nil, false, err
	}
	var s string
	err = pool.QueryRow(ctx, "SELECT marker FROM "+ServeMarkerTable+" WHERE id = 1").Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return []byte(s), err == nil, err
}
