// Package store opens the state a location names, so that the commands
// and the gateway agree on what "--store" means: Open returns everything a
// deployment keeps (State), OpenApprovals the approval store alone.
//
// Every storage adapter lives in a sub-package named after its technology
// and, where one technology serves several domains, the domain:
//
//	sqlitestore, sqliteexchange, sqliteaudit        SQLite (one file: StateFile)
//	pgstore, pgexchange, pgaudit, pgreplay, pgratelimit  PostgreSQL (one schema)
//	memstore, filestore                             approvals in memory, in a JSON file
//
// The domain packages (aais, audit, gateway/exchange) keep the types, the
// rules, the interfaces and the in-memory implementations, and import no
// adapter. The SQL of the two dialects is kept parallel, package by
// package, rather than behind a shared query layer: each adapter reads as
// plain SQL for its database, and the kits (aaistest, audittest,
// exchangetest) hold them to one behaviour.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/pgutil"
	"github.com/custos-runtime/custos/store/filestore"
	"github.com/custos-runtime/custos/store/memstore"
	"github.com/custos-runtime/custos/store/pgstore"
	"github.com/custos-runtime/custos/store/sqlitestore"
)

// DefaultFile is the SQLite file name used when a location is a directory.
const DefaultFile = StateFile

// ErrUnsupported: the location names a backend this build does not have.
var ErrUnsupported = errors.New("store: unsupported location")

// Kind names a backend.
type Kind string

// The backends Open knows.
const (
	KindSQLite Kind = "sqlite"
	KindFile   Kind = "file"
	KindMemory Kind = "memory"
	// KindPostgres is a PostgreSQL database shared by several replicas.
	KindPostgres Kind = "postgres"
)

// Location is a parsed store location.
type Location struct {
	Kind Kind
	// Path is the file (sqlite, file); "" for memory.
	Path string
	// DSN is the connection string (postgres), without custos_schema.
	DSN string
	// Schema is the PostgreSQL schema ("": pgstore's default).
	Schema string
}

// String returns the location in the form Parse reads.
func (l Location) String() string {
	switch l.Kind {
	case KindMemory:
		return "memory:"
	case KindFile:
		return "file:" + l.Path
	case KindPostgres:
		return redactDSN(l.DSN)
	}
	return "sqlite:" + l.Path
}

// Parse reads a store location:
//
//	""                      the SQLite file custos.db in DefaultDataDir()
//	sqlite:PATH             a SQLite database file
//	file:PATH               a filestore JSON state file
//	memory:                 an in-memory store (gone when the process ends)
//	postgres://...          a PostgreSQL database (also postgresql://); the
//	                        tables live in the schema "custos", or the one
//	                        named by the custos_schema=NAME parameter
//	PATH ending in .json    a filestore file
//	an existing directory   DIR/custos.db (SQLite)
//	any other PATH          a SQLite database file
func Parse(s string) (Location, error) {
	switch {
	case s == "":
		dir, err := DefaultDataDir()
		if err != nil {
			return Location{}, err
		}
		return Location{Kind: KindSQLite, Path: filepath.Join(dir, DefaultFile)}, nil
	case s == "memory:":
		return Location{Kind: KindMemory}, nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		dsn, schema, err := pgutil.SplitDSN(s)
		if err != nil {
			return Location{}, fmt.Errorf("store: %s: %w", redactDSN(s), err)
		}
		return Location{Kind: KindPostgres, DSN: dsn, Schema: schema}, nil
	case strings.HasPrefix(s, "sqlite:"):
		return pathLocation(KindSQLite, strings.TrimPrefix(s, "sqlite:"))
	case strings.HasPrefix(s, "file:"):
		return pathLocation(KindFile, strings.TrimPrefix(s, "file:"))
	case strings.Contains(s, "://"):
		return Location{}, fmt.Errorf("%w: %q", ErrUnsupported, s)
	case strings.HasSuffix(strings.ToLower(s), ".json"):
		return pathLocation(KindFile, s)
	}
	if fi, err := os.Stat(s); err == nil && fi.IsDir() {
		return pathLocation(KindSQLite, filepath.Join(s, DefaultFile))
	}
	return pathLocation(KindSQLite, s)
}

func pathLocation(k Kind, p string) (Location, error) {
	if p == "" {
		return Location{}, fmt.Errorf("store: %s location without a path", k)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return Location{}, fmt.Errorf("store: %w", err)
	}
	return Location{Kind: k, Path: abs}, nil
}

// DefaultDataDir is where Custos keeps its data when not told otherwise:
// $CUSTOS_DATA_DIR when set, else the per-user data directory
// ($XDG_DATA_HOME/custos or ~/.local/share/custos on Unix,
// ~/Library/Application Support/custos on macOS, %LocalAppData%\custos on
// Windows).
func DefaultDataDir() (string, error) {
	if d := os.Getenv("CUSTOS_DATA_DIR"); d != "" {
		return d, nil
	}
	switch runtime.GOOS {
	case "windows":
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "custos"), nil
		}
	case "darwin", "ios":
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("store: no data directory: %w", err)
		}
		return filepath.Join(home, "Library", "Application Support", "custos"), nil
	default:
		if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
			return filepath.Join(d, "custos"), nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("store: no data directory (set CUSTOS_DATA_DIR): %w", err)
	}
	return filepath.Join(home, ".local", "share", "custos"), nil
}

// Store is an open store and what closes it.
type Store interface {
	aais.Store
	io.Closer
}

// OpenApprovals opens the approval store at l alone, creating it when
// missing (a SQLite file in the layout before StateFile is migrated
// first, as by Open).
func OpenApprovals(ctx context.Context, l Location) (Store, error) {
	switch l.Kind {
	case KindMemory:
		return nopCloser{memstore.New()}, nil
	case KindFile:
		return filestore.Open(l.Path, nil)
	case KindSQLite:
		if err := checkOldPath(l.Path, false); err != nil {
			return nil, err
		}
		if _, err := MigrateLayout(ctx, l.Path); err != nil {
			return nil, err
		}
		return sqlitestore.Open(ctx, l.Path, nil)
	case KindPostgres:
		return pgstore.Open(ctx, l.DSN, &pgstore.Options{Schema: l.Schema})
	}
	return nil, fmt.Errorf("%w: kind %q", ErrUnsupported, l.Kind)
}

type nopCloser struct{ *memstore.Store }

// redactDSN hides the password of a connection URL, for messages.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

func (nopCloser) Close() error { return nil }
