package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/internal/flock"
	"github.com/custos-runtime/custos/internal/sqlitedb"
	"github.com/custos-runtime/custos/store/sqliteaudit"
	"github.com/custos-runtime/custos/store/sqliteexchange"
	"github.com/custos-runtime/custos/store/sqlitestore"
)

// The layout before StateFile: one SQLite file per store in the data
// directory.
const (
	oldApprovals = "approvals.db"
	oldExchanges = "exchanges.db"
	oldAudit     = "audit.db"
)

// ServeMarkerSuffix names the file custos serve keeps next to a SQLite
// or file store (the store's path and this suffix) to tell custos
// approvals how the gateway on that store is configured.
const ServeMarkerSuffix = ".custos-serve.json"

// AsideDir is where MigrateLayout keeps the files of the old layout, in
// the data directory, once their content is in StateFile.
const AsideDir = "pre-custos.db"

// ErrBothLayouts: a data directory holds StateFile and files of the old
// layout that were not migrated into it.
var ErrBothLayouts = errors.New("store: the data directory holds both layouts")

// ErrOldLayoutPath: a location names a file of the layout before
// StateFile where that file is (or is about to be) migrated into the
// directory's StateFile. Opening it would start an empty store beside
// the migrated one, or split the gateway's state between the layouts.
var ErrOldLayoutPath = errors.New("store: a file of the layout before custos.db")

// checkOldPath refuses a location naming an old layout's file that was
// migrated into its directory's StateFile (it is kept in AsideDir); whole,
// a gateway's state (asWhole) may not name the old approval store either
// while its siblings wait to be migrated with it.
func checkOldPath(path string, asWhole bool) error {
	dir, base := filepath.Split(path)
	if base != oldApprovals && base != oldExchanges && base != oldAudit {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, AsideDir, base)); err == nil {
		return fmt.Errorf("%w: %s was migrated into %s (the old file is kept in %s); name the directory or %s instead",
			ErrOldLayoutPath, path, StateFile, filepath.Join(dir, AsideDir), filepath.Join(dir, StateFile))
	}
	if old, err := oldFiles(dir); err != nil {
		return err
	} else if asWhole && len(old) > 0 {
		return fmt.Errorf("%w: %s is one of the files of the layout before %s; name the directory (%s), whose files are then migrated into %s",
			ErrOldLayoutPath, path, StateFile, filepath.Clean(dir), StateFile)
	}
	return nil
}

// MigrateLayout moves the state a data directory keeps in the layout
// before StateFile (approvals.db, exchanges.db and audit.db, any of them)
// into path, a StateFile that does not exist yet, and reports whether it
// did. Nothing is lost: approvals, events and rules keep their sequences
// and the store its identity; exchanges, idempotency keys, reviews and
// deliveries are copied as they are; the audit chain keeps its records,
// hashes and identity, and is verified end to end in the new file before
// the new file takes its name. The old files are then moved to AsideDir,
// never deleted.
//
// It is safe against a crash at any point: the new file is built under
// another name and renamed into place; a migration interrupted before the
// rename starts again from the old files, one interrupted after it
// finishes moving them aside (the new file records what it was built
// from). A path not named StateFile, or a directory without old files,
// is left alone.
func MigrateLayout(ctx context.Context, path string) (bool, error) {
	if filepath.Base(path) != StateFile {
		return false, nil
	}
	dir := filepath.Dir(path)
	old, err := oldFiles(dir)
	if err != nil || len(old) == 0 {
		return false, err
	}
	lockPath := filepath.Join(dir, StateFile+".migrate.lock")
	lock, err := flock.Hold(lockPath)
	if errors.Is(err, flock.ErrLocked) {
		return false, fmt.Errorf("store: another process is migrating %s; try again when it is done", dir)
	}
	if err != nil {
		return false, err
	}
	// Removed while held: a process that opened it meanwhile finds the
	// migration done once it holds it (the checks below run under it).
	defer lock.Close()
	defer os.Remove(lockPath)
	if _, err := os.Stat(path); err == nil {
		// Built before: finish moving the old files aside, or refuse
		// a directory where both layouts were written.
		from, err := migratedFrom(ctx, path)
		if err != nil {
			return false, err
		}
		if from == "" {
			return false, fmt.Errorf("%w: %s and %s; move the old files (or %s) aside", ErrBothLayouts, StateFile, strings.Join(old, ", "), StateFile)
		}
		return false, moveAside(dir, old)
	}
	if err := build(ctx, dir, path, old); err != nil {
		return false, fmt.Errorf("store: migrating %s to %s: %w (the old files are untouched)", dir, StateFile, err)
	}
	return true, moveAside(dir, old)
}

// oldFiles lists the old layout's files in dir. One that is there but is
// not a regular file (a symbolic link, say) is an error: migrating it
// would write through the link, skipping it would start an empty state.
func oldFiles(dir string) ([]string, error) {
	var out []string
	for _, n := range []string{oldApprovals, oldExchanges, oldAudit} {
		fi, err := os.Lstat(filepath.Join(dir, n))
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, err
		case !fi.Mode().IsRegular():
			return nil, fmt.Errorf("store: %s is not a regular file (a symbolic link?): move the file itself there to migrate it, or move it away",
				filepath.Join(dir, n))
		}
		out = append(out, n)
	}
	return out, nil
}

// build writes the new state file from the old files.
func build(ctx context.Context, dir, path string, old []string) error {
	work := filepath.Join(dir, StateFile+".migrating")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(work)
	// Copies of the old files (VACUUM INTO reads a consistent snapshot,
	// WAL included, and never writes to its source), each brought to this
	// build's schema by the store that owns it.
	for _, n := range old {
		if err := snapshot(ctx, filepath.Join(dir, n), filepath.Join(work, n)); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if err := upgrade(ctx, n, filepath.Join(work, n)); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	tmp := filepath.Join(work, StateFile)
	db, err := sqlitedb.Open(ctx, tmp, nil, sqlitedb.Migrations{})
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := sqlitestore.New(ctx, db); err != nil {
		return err
	}
	if _, err := sqliteexchange.New(ctx, db, nil); err != nil {
		return err
	}
	ab, err := sqliteaudit.New(ctx, db, nil)
	if err != nil {
		return err
	}
	if err := copyTables(ctx, db, work, old); err != nil {
		return err
	}
	if slices.Contains(old, oldAudit) {
		rep, err := audit.New(ab, nil).Verify(ctx)
		if err != nil {
			return fmt.Errorf("the audit chain does not verify in the new file: %w", err)
		}
		if !rep.OK() {
			return fmt.Errorf("the audit chain does not verify in the new file: %w", rep.Err())
		}
	}
	if _, err := db.SQL().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	// The gateway's marker follows the store (custos approvals must keep
	// refusing to decide around a reviewer policy), before the new file
	// takes its name.
	if b, err := os.ReadFile(filepath.Join(dir, oldApprovals+ServeMarkerSuffix)); err == nil {
		if err := os.WriteFile(path+ServeMarkerSuffix, b, 0o600); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncFile(dir)
}

// snapshot writes a consistent copy of the SQLite file src to dst.
func snapshot(ctx context.Context, src, dst string) error {
	u := "file:" + filepath.ToSlash(src) + "?mode=ro&_busy_timeout=5000"
	db, err := sql.Open("sqlite", u)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "VACUUM INTO ?", dst)
	return err
}

// upgrade brings a copy of an old file to this build's schema, as the
// store that wrote it does when it opens it.
func upgrade(ctx context.Context, name, path string) error {
	var c interface{ Close() error }
	var err error
	switch name {
	case oldApprovals:
		c, err = sqlitestore.Open(ctx, path, nil)
	case oldExchanges:
		c, err = sqliteexchange.Open(ctx, path, nil)
	case oldAudit:
		c, err = sqliteaudit.Open(ctx, path, nil)
	}
	if err != nil {
		return err
	}
	return c.Close()
}

// copyTables copies every table of the old files into the new one, in one
// transaction, with what the new file's migrations seeded (the
// identities) replaced by the old rows, and records the migration.
func copyTables(ctx context.Context, db *sqlitedb.DB, work string, old []string) error {
	conn, err := db.SQL().Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Rows are copied as they are; the check below runs once all are in.
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON")
	for i, n := range old {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("ATTACH DATABASE ? AS old%d", i), filepath.Join(work, n)); err != nil {
			return err
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("DETACH DATABASE old%d", i))
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i := range old {
		src := fmt.Sprintf("old%d", i)
		tables, err := names(ctx, tx, src)
		if err != nil {
			return err
		}
		for _, t := range tables {
			if err := copyTable(ctx, tx, src, t); err != nil {
				return fmt.Errorf("%s: table %s: %w", old[i], t, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE layout_migration (
		singleton   INTEGER PRIMARY KEY CHECK (singleton = 1),
		migrated_at TEXT NOT NULL,
		sources     TEXT NOT NULL CHECK (sources <> '')
	) STRICT`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO layout_migration VALUES (1, ?, ?)",
		time.Now().UTC().Format(time.RFC3339Nano), strings.Join(old, ",")); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, "PRAGMA main.foreign_key_check")
	if err != nil {
		return err
	}
	bad := rows.Next()
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if bad {
		return errors.New("the copied rows break a foreign key")
	}
	return tx.Commit()
}

// names lists the tables of schema src that hold state (not SQLite's own,
// not the migration histories).
func names(ctx context.Context, tx *sql.Tx, src string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT name FROM "+src+".sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		if strings.HasPrefix(n, "sqlite_") || n == "schema_migrations" {
			continue
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// copyTable replaces the rows of main.t with those of src.t, column by
// column name, and checks the count.
func copyTable(ctx context.Context, tx *sql.Tx, src, t string) error {
	cols, err := columns(ctx, tx, "main", t)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return errors.New("not in the new schema")
	}
	srcCols, err := columns(ctx, tx, src, t)
	if err != nil {
		return err
	}
	if strings.Join(srcCols, ",") != strings.Join(cols, ",") {
		return fmt.Errorf("columns %v, the new schema has %v", srcCols, cols)
	}
	list := `"` + strings.Join(cols, `", "`) + `"`
	if _, err := tx.ExecContext(ctx, `DELETE FROM main."`+t+`"`); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO main."`+t+`" (`+list+`) SELECT `+list+` FROM `+src+`."`+t+`"`)
	if err != nil {
		return err
	}
	copied, err := res.RowsAffected()
	if err != nil {
		return err
	}
	var want int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+src+`."`+t+`"`).Scan(&want); err != nil {
		return err
	}
	if copied != want {
		return fmt.Errorf("copied %d rows of %d", copied, want)
	}
	return nil
}

func columns(ctx context.Context, tx *sql.Tx, schema, t string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT name FROM pragma_table_info(?, ?) ORDER BY cid", t, schema)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// migratedFrom returns the old files path was built from, "" when it was
// not built by MigrateLayout.
func migratedFrom(ctx context.Context, path string) (string, error) {
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'layout_migration'").Scan(&n); err != nil {
		return "", fmt.Errorf("store: %s: %w", path, err)
	}
	if n == 0 {
		return "", nil
	}
	var from string
	err = db.QueryRowContext(ctx, "SELECT sources FROM layout_migration").Scan(&from)
	return from, err
}

// moveAside moves the old files, with their WAL and shared-memory files,
// into AsideDir.
func moveAside(dir string, old []string) error {
	aside := filepath.Join(dir, AsideDir)
	if err := os.MkdirAll(aside, 0o700); err != nil {
		return err
	}
	for _, n := range old {
		for _, suffix := range []string{"", "-wal", "-shm", ServeMarkerSuffix} {
			from := filepath.Join(dir, n+suffix)
			if _, err := os.Lstat(from); errors.Is(err, os.ErrNotExist) {
				continue
			}
			to := filepath.Join(aside, n+suffix)
			if _, err := os.Lstat(to); err == nil {
				to += "." + time.Now().UTC().Format("20060102T150405Z")
			}
			if err := os.Rename(from, to); err != nil {
				return err
			}
		}
	}
	if err := syncFile(aside); err != nil {
		return err
	}
	return syncFile(dir)
}

// syncFile flushes a file or a directory to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}
