package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia/auth"
	arsiastate "github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/ca"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/internal/pgutil"
	"github.com/custos-runtime/custos/internal/sqlitedb"
	"github.com/custos-runtime/custos/store/filestore"
	"github.com/custos-runtime/custos/store/memstore"
	"github.com/custos-runtime/custos/store/pgaudit"
	"github.com/custos-runtime/custos/store/pgca"
	"github.com/custos-runtime/custos/store/pgexchange"
	"github.com/custos-runtime/custos/store/pgratelimit"
	"github.com/custos-runtime/custos/store/pgreplay"
	"github.com/custos-runtime/custos/store/pgstate"
	"github.com/custos-runtime/custos/store/pgstore"
	"github.com/custos-runtime/custos/store/sqliteaudit"
	"github.com/custos-runtime/custos/store/sqliteca"
	"github.com/custos-runtime/custos/store/sqliteexchange"
	"github.com/custos-runtime/custos/store/sqlitereplay"
	"github.com/custos-runtime/custos/store/sqlitestate"
	"github.com/custos-runtime/custos/store/sqlitestore"
)

// State is everything one deployment of custos serve keeps: on SQLite one
// database file (approvals, exchanges, audit log, DPoP replay set, ARSIA
// state: one writer, one group commit, units of work across them), on PostgreSQL one
// schema shared by every replica (the rate limits too), every store of a
// replica on one pool, with units of work across them too.
type State struct {
	// Location is where the state is.
	Location Location
	// Approvals is the AAIS approval store.
	Approvals aais.Store
	// Exchanges holds the received requests, their reviews and callback
	// deliveries.
	Exchanges exchange.Backend
	// Audit is the audit log's backend.
	Audit audit.Backend
	// Replay is the DPoP proofs seen: in the state file, or shared by the
	// replicas on PostgreSQL, so a proof is refused after a restart and by
	// every replica. Limiter is the per-sender rate limits shared by the
	// replicas on PostgreSQL; nil means the gateway's in-process one (a
	// single gateway's buckets are exact in memory: remembering them
	// across a restart would cost a durable write per request).
	Replay  auth.ReplayCache
	Limiter RateLimiter
	// Certificates is the issuing CA's registry of what it issued and
	// revoked (used when certificate_authority is enabled).
	Certificates ca.Registry
	// StateStore is ARSIA-State, the agents' memory (served by the
	// gateway when state is enabled): in the state file, or shared by the
	// replicas on PostgreSQL.
	StateStore arsiastate.Store
	// Instance is this process's name in the exchanges' claims.
	Instance string
	// Shared reports whether several processes (replicas) may run on the
	// state at once.
	Shared bool
	// units, when set, makes the writes of a unit of work one transaction.
	units interface {
		Unit(context.Context, func(context.Context) error) error
	}
	// db is the state file's, nil on PostgreSQL.
	db      *sqlitedb.DB
	closers []io.Closer
}

// Unit runs fn so that every write of the state it makes with its
// context commits in one transaction, or none does (when Atomic: every
// store on one SQLite file, or on one PostgreSQL pool; see
// sqlitedb.DB.Unit and pgutil.Units). Otherwise fn runs as it is, each
// write on its own.
func (s *State) Unit(ctx context.Context, fn func(ctx context.Context) error) error {
	if s.units == nil {
		return fn(ctx)
	}
	return s.units.Unit(ctx, fn)
}

// Commits returns how many write transactions the state file committed
// since Open and how many writes they carried (0, 0 on PostgreSQL): their
// ratio is the mean group-commit batch.
func (s *State) Commits() (commits, writes uint64) {
	if s.db == nil {
		return 0, 0
	}
	st := s.db.Stats()
	return st.Commits, st.Writes
}

// Atomic reports whether Unit commits the writes of every store together:
// true on a SQLite state file and on a PostgreSQL schema, false when the
// approvals are kept in memory or in a JSON file, or the audit log apart.
func (s *State) Atomic() bool { return s.units != nil }

// pgUnits are units of work on the schema's pool.
type pgUnits struct{ *pgutil.Units }

func (u pgUnits) Unit(ctx context.Context, fn func(context.Context) error) error {
	return u.Run(ctx, fn)
}

// Close closes everything Open opened, in reverse order.
func (s *State) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i].Close())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// RateLimiter is gateway.RateLimiter: one request's allowance for a
// sender at now.
type RateLimiter interface {
	Allow(ctx context.Context, sender string, now time.Time) (ok bool, retryAfter time.Duration, err error)
}

// StateOptions tunes Open. A nil *StateOptions means the defaults.
type StateOptions struct {
	// Instance names this process in the exchanges' claims; "" means a
	// random name (a single process recovers every interrupted claim).
	Instance string
	// Audit, when its Kind is set, keeps the audit log elsewhere (a
	// SQLite file of its own, or a PostgreSQL database); the zero value
	// keeps it in the state.
	Audit Location
	// DataDir holds the exchanges and the audit log when the approval
	// store is a memory or file store (demos, tests): StateFile in it.
	DataDir string
	// RateLimit configures the shared limiter on PostgreSQL (none when
	// PerSecond is zero).
	RateLimit pgratelimit.Rate
	// Now is the exchanges' clock (time.Now when nil).
	Now func() time.Time
	// Logger receives the stores' background failures (nothing is logged
	// when nil).
	Logger *slog.Logger
	// StateStore configures the rules of the ARSIA-State store (its
	// residency zones, limits); nil means the defaults.
	StateStore *arsiastate.StoreOptions
}

// StateFile is the name of the state's SQLite file in a data directory.
const StateFile = "custos.db"

// Open opens (creating when missing) the whole state at l. A SQLite
// state whose directory holds the three files of the layout before
// StateFile (approvals.db, exchanges.db, audit.db) and no StateFile is
// migrated first (see MigrateLayout).
func Open(ctx context.Context, l Location, o *StateOptions) (_ *State, err error) {
	if o == nil {
		o = &StateOptions{}
	}
	s := &State{Location: l}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	xo := &sqliteexchange.Options{Instance: o.Instance, Now: o.Now}
	switch l.Kind {
	case KindSQLite:
		if err := checkOldPath(l.Path, true); err != nil {
			return nil, err
		}
		if _, err := MigrateLayout(ctx, l.Path); err != nil {
			return nil, err
		}
		if err := s.openSQLite(ctx, l.Path, xo, o.Audit.Kind == "", o.StateStore); err != nil {
			return nil, err
		}
	case KindPostgres:
		if err := s.openPostgres(ctx, l, o); err != nil {
			return nil, err
		}
	case KindMemory, KindFile:
		var ap aais.Store
		if l.Kind == KindMemory {
			ap = memstore.New()
		} else {
			fs, err := filestore.Open(l.Path, nil)
			if err != nil {
				return nil, err
			}
			s.closers = append(s.closers, fs)
			ap = fs
		}
		if o.DataDir == "" {
			return nil, fmt.Errorf("store: a %s approval store needs a data directory for the exchanges", l.Kind)
		}
		path := filepath.Join(o.DataDir, StateFile)
		if _, err := MigrateLayout(ctx, path); err != nil {
			return nil, err
		}
		if err := s.openSQLite(ctx, path, xo, o.Audit.Kind == "", o.StateStore); err != nil {
			return nil, err
		}
		// The approvals are elsewhere: no unit spans them.
		s.Approvals, s.units = ap, nil
	default:
		return nil, fmt.Errorf("%w: kind %q", ErrUnsupported, l.Kind)
	}
	if o.Audit.Kind != "" {
		if o.Audit.Kind == KindSQLite && (l.Kind == KindSQLite || l.Kind == KindMemory || l.Kind == KindFile) {
			if err := checkOldPath(o.Audit.Path, false); err != nil {
				return nil, fmt.Errorf("audit log: %w", err)
			}
		}
		b, err := OpenAudit(ctx, o.Audit)
		if err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		s.Audit = b
		s.closers = append(s.closers, b)
		// The audit log is elsewhere: no unit spans it.
		s.units = nil
	}
	return s, nil
}

// openSQLite opens the state file at path: one sqlitedb.DB, and every
// store on it.
func (s *State) openSQLite(ctx context.Context, path string, xo *sqliteexchange.Options, withAudit bool, so *arsiastate.StoreOptions) error {
	db, err := sqlitedb.Open(ctx, path, nil, sqlitedb.Migrations{})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	s.closers = append(s.closers, db)
	s.units, s.db = db, db
	if s.Approvals, err = sqlitestore.New(ctx, db); err != nil {
		return err
	}
	xs, err := sqliteexchange.New(ctx, db, xo)
	if err != nil {
		return err
	}
	s.Exchanges, s.Instance = xs, xs.Instance()
	if s.Replay, err = sqlitereplay.New(ctx, db, &sqlitereplay.Options{Now: xo.Now}); err != nil {
		return err
	}
	if s.Certificates, err = sqliteca.New(ctx, db); err != nil {
		return err
	}
	if s.StateStore, err = sqlitestate.New(ctx, db, so); err != nil {
		return err
	}
	if withAudit {
		if s.Audit, err = sqliteaudit.New(ctx, db, nil); err != nil {
			return err
		}
	}
	return nil
}

// openPostgres opens the pool of the approval store and every other
// store on it, in one schema.
func (s *State) openPostgres(ctx context.Context, l Location, o *StateOptions) error {
	// One pool for every store, so that their writes join one unit of
	// work; the exchanges' share of it was a pool of its own before.
	var conns int32
	if !strings.Contains(l.DSN, "pool_max_conns") {
		conns = 2 * pgstore.DefaultMaxConns
	}
	pg, err := pgstore.Open(ctx, l.DSN, &pgstore.Options{Schema: l.Schema, MaxConns: conns})
	if err != nil {
		return err
	}
	s.closers = append(s.closers, pg)
	s.Approvals, s.Shared, s.Instance = pg, true, o.Instance
	xs, err := pgexchange.New(ctx, pg.Pool(), &pgexchange.Options{Schema: l.Schema, Instance: o.Instance})
	if err != nil {
		return fmt.Errorf("exchange store: %w", err)
	}
	s.closers = append(s.closers, xs)
	s.Exchanges, s.Instance = xs, xs.Instance()
	replay, err := pgreplay.New(ctx, pg.Pool(), &pgreplay.Options{Schema: l.Schema, Logger: o.Logger})
	if err != nil {
		return fmt.Errorf("replay set: %w", err)
	}
	s.Replay = replay
	s.closers = append(s.closers, replay)
	if s.Certificates, err = pgca.New(ctx, pg.Pool(), pg.Schema()); err != nil {
		return fmt.Errorf("certificate registry: %w", err)
	}
	ss, err := pgstate.New(ctx, pg.Pool(), &pgstate.Options{Schema: l.Schema, Store: o.StateStore})
	if err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	s.StateStore = ss
	if o.RateLimit.PerSecond > 0 {
		lim, err := pgratelimit.New(ctx, pg.Pool(), o.RateLimit, &pgratelimit.Options{Schema: l.Schema, Logger: o.Logger})
		if err != nil {
			return fmt.Errorf("rate limits: %w", err)
		}
		s.Limiter = lim
		s.closers = append(s.closers, lim)
	}
	if o.Audit.Kind == "" {
		b, err := pgaudit.New(ctx, pg.Pool(), &pgaudit.Options{Schema: l.Schema})
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		s.Audit = b
		s.closers = append(s.closers, b)
		s.units = pgUnits{pgutil.NewUnits(&pgutil.Runner{Pool: pg.Pool()}, 0, 2)}
	}
	return nil
}

// OpenAudit opens an audit log kept on its own: a SQLite file (the
// layout before StateFile, or an audit_log setting), a state file
// (StateFile: its audit tables), or a PostgreSQL database.
func OpenAudit(ctx context.Context, l Location) (audit.Backend, error) {
	switch l.Kind {
	case KindPostgres:
		return pgaudit.Open(ctx, l.DSN, &pgaudit.Options{Schema: l.Schema})
	case KindSQLite:
		if err := checkOldPath(l.Path, false); err != nil {
			return nil, err
		}
		if filepath.Base(l.Path) == StateFile {
			db, err := sqlitedb.Open(ctx, l.Path, nil, sqlitedb.Migrations{})
			if err != nil {
				return nil, fmt.Errorf("store: %w", err)
			}
			b, err := sqliteaudit.New(ctx, db, nil)
			if err != nil {
				_ = db.Close()
				return nil, err
			}
			return ownedAudit{b, db}, nil
		}
		return sqliteaudit.Open(ctx, l.Path, nil)
	}
	return nil, fmt.Errorf("%w: an audit log in a %s location", ErrUnsupported, l.Kind)
}

// OpenAuditReadOnly opens an audit log to read it (verify, export)
// without changing the file: a SQLite file of its own at the schema of
// the layout before StateFile (its tables not yet renamed by this build's
// migration, which the previous release would then refuse) is read from a
// snapshot taken with VACUUM INTO, removed at Close. Anything else is
// OpenAudit.
func OpenAuditReadOnly(ctx context.Context, l Location) (audit.Backend, error) {
	if l.Kind != KindSQLite || filepath.Base(l.Path) == StateFile {
		return OpenAudit(ctx, l)
	}
	if err := checkOldPath(l.Path, false); err != nil {
		return nil, err
	}
	old, err := hasTable(ctx, l.Path, "records")
	if err != nil || !old {
		return OpenAudit(ctx, l)
	}
	dir, err := os.MkdirTemp("", "custos-audit-snapshot-")
	if err != nil {
		return nil, err
	}
	copyPath := filepath.Join(dir, "audit.db")
	b, err := func() (*sqliteaudit.Backend, error) {
		if err := snapshot(ctx, l.Path, copyPath); err != nil {
			return nil, err
		}
		return sqliteaudit.Open(ctx, copyPath, nil)
	}()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return snapshotAudit{b, dir}, nil
}

// snapshotAudit removes its snapshot at Close.
type snapshotAudit struct {
	*sqliteaudit.Backend
	dir string
}

func (s snapshotAudit) Close() error { return errors.Join(s.Backend.Close(), os.RemoveAll(s.dir)) }

// hasTable reports whether the SQLite file at path has the table, reading
// it without changing it.
func hasTable(ctx context.Context, path, table string) (bool, error) {
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return false, err
	}
	defer db.Close()
	var n int
	err = db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(&n)
	return n > 0, err
}

// ownedAudit closes the DB it was opened on.
type ownedAudit struct {
	*sqliteaudit.Backend
	db *sqlitedb.DB
}

func (o ownedAudit) Close() error { return errors.Join(o.Backend.Close(), o.db.Close()) }
