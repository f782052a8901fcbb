// Package sqlitereplay is the DPoP jti replay set (auth.ReplayCache, the
// authz.ReplaySet of package gateway/authz) kept in the deployment's
// SQLite state file, so that a proof accepted before a restart is still
// refused after it, for as long as the proof could be accepted at all.
//
//	st, err := store.Open(ctx, loc, nil) // st.Replay is a *Set on custos.db
//
// Seen is one statement in one write transaction (sharing the state's
// group commit):
//
//	INSERT INTO dpop_replay (jti, expires_at) VALUES (?, ?)
//	ON CONFLICT (jti) DO UPDATE SET expires_at = excluded.expires_at
//	    WHERE dpop_replay.expires_at < ?now
//	RETURNING 1
//
// A row comes back when the jti was absent (inserted) or present but
// expired (taken over): the jti is new. No row means it is recorded and
// unexpired: a replay. SQLite's single writer makes exactly one of
// concurrent calls with one jti see it as new, across processes too.
//
// Any error is returned wrapping auth.ErrReplayCache, and the proof is
// refused: the set fails closed. Nothing is retried after a commit that
// may have happened (a retried insert would report a legitimate proof as
// a replay, a refusal as well).
//
// Every PruneEvery calls, the same transaction also deletes up to
// PruneBatch expired rows, so the table holds about the proofs of the
// last replay window. "Expired" is decided with the Set's clock, the one
// the receiver checks iat with.
//
// Its SQL is parallel to store/pgreplay's; the kit arsia/auth/replaytest
// holds both to one behaviour.
package sqlitereplay

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/internal/sqlitedb"
)

// Defaults of Options.
const (
	DefaultPruneEvery = 256
	DefaultPruneBatch = 512
	// MaxJTI bounds a jti (a proof's jti is a short random value).
	MaxJTI = 256
)

// Options tunes a Set. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Now is the clock "expired" is decided with (time.Now when nil).
	Now func() time.Time
	// PruneEvery and PruneBatch: every PruneEvery calls of Seen, up to
	// PruneBatch expired rows are deleted in the same transaction.
	PruneEvery, PruneBatch int
}

// Set is the replay set. It is safe for concurrent use.
type Set struct {
	db                     *sqlitedb.DB
	now                    func() time.Time
	pruneEvery, pruneBatch int
	calls                  atomic.Uint64
}

var _ auth.ReplayCache = (*Set)(nil)

//go:embed migrations/*.sql
var migrationFS embed.FS

var schema = sqlitedb.Migrations{FS: migrationFS, Dir: "migrations", Table: "dpop_replay_migrations"}

const (
	qSeen = `INSERT INTO dpop_replay (jti, expires_at) VALUES (?, ?)
		ON CONFLICT (jti) DO UPDATE SET expires_at = excluded.expires_at
		WHERE dpop_replay.expires_at < ?
		RETURNING 1`
	qPrune = `DELETE FROM dpop_replay WHERE jti IN
		(SELECT jti FROM dpop_replay WHERE expires_at < ? ORDER BY expires_at LIMIT ?)`
)

// New returns the replay set kept in db, a database file other stores
// share (package store opens it): it applies the set's migrations,
// recorded in dpop_replay_migrations. o may be nil.
func New(ctx context.Context, db *sqlitedb.DB, o *Options) (*Set, error) {
	s := &Set{db: db, now: time.Now, pruneEvery: DefaultPruneEvery, pruneBatch: DefaultPruneBatch}
	if o != nil {
		if o.Now != nil {
			s.now = o.Now
		}
		if o.PruneEvery > 0 {
			s.pruneEvery = o.PruneEvery
		}
		if o.PruneBatch > 0 {
			s.pruneBatch = o.PruneBatch
		}
	}
	if err := db.Migrate(ctx, schema); err != nil {
		return nil, fmt.Errorf("sqlitereplay: %w", err)
	}
	if err := db.Prepare(ctx, qSeen); err != nil {
		return nil, fmt.Errorf("sqlitereplay: %w", err)
	}
	return s, nil
}

// Seen records jti until until and reports whether it was already
// recorded and unexpired (a replay).
func (s *Set) Seen(ctx context.Context, jti string, until time.Time) (bool, error) {
	if jti == "" || len(jti) > MaxJTI || !utf8.ValidString(jti) {
		return false, fmt.Errorf("%w: a jti must be 1 to %d bytes of UTF-8", auth.ErrReplayCache, MaxJTI)
	}
	now := s.now().UnixNano()
	prune := s.calls.Add(1)%uint64(s.pruneEvery) == 0
	var fresh bool
	err := s.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, qSeen, jti, until.UnixNano(), now).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			fresh = false
		case err != nil:
			return err
		default:
			fresh = true
		}
		if !prune {
			return nil
		}
		_, err = tx.ExecContext(ctx, qPrune, now, s.pruneBatch)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("%w: %w", auth.ErrReplayCache, err)
	}
	return !fresh, nil
}

// Contains reports whether key is recorded and unexpired, recording
// nothing (auth.ReplayLookup: revocations are read this way).
func (s *Set) Contains(ctx context.Context, key string) (bool, error) {
	var n int
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT count(*) FROM dpop_replay WHERE jti = ? AND expires_at >= ?", key, s.now().UnixNano()).Scan(&n)
	})
	if err != nil {
		return false, fmt.Errorf("%w: %w", auth.ErrReplayCache, err)
	}
	return n > 0, nil
}

// Len returns how many jtis the set holds, expired ones included (for
// tests and metrics).
func (s *Set) Len(ctx context.Context) (int, error) {
	var n int
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT count(*) FROM dpop_replay").Scan(&n)
	})
	return n, err
}
