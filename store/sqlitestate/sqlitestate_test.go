package sqlitestate_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/arsia/state/statetest"
	"github.com/custos-runtime/custos/internal/sqlitedb"
	"github.com/custos-runtime/custos/store/sqlitestate"
)

func openDB(t *testing.T, path string) *sqlitedb.DB {
	t.Helper()
	db, err := sqlitedb.Open(t.Context(), path, nil, sqlitedb.Migrations{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newStore(t *testing.T, db *sqlitedb.DB, o *state.StoreOptions) *sqlitestate.Store {
	t.Helper()
	s, err := sqlitestate.New(t.Context(), db, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKit(t *testing.T) {
	statetest.Run(t, func(t *testing.T, o *state.StoreOptions) state.Store {
		return newStore(t, openDB(t, filepath.Join(t.TempDir(), "custos.db")), o)
	})
}

// Entries, history, purges and grants survive a restart.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "custos.db")
	db := openDB(t, path)
	s := newStore(t, db, nil)
	key := statetest.Alice + "/shared/doc"
	if _, err := s.Set(ctx, statetest.Alice, statetest.SetArgs(key, map[string]any{"n": 1}), nil, statetest.T0); err != nil {
		t.Fatal(err)
	}
	g, err := s.Grant(ctx, statetest.Alice, state.GrantArgs{KeyPattern: statetest.Alice + "/shared/*", GranteeAgentID: statetest.Bob, AccessLevel: state.AccessRead}, statetest.T0)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	s2 := newStore(t, openDB(t, path), nil)
	e, err := s2.Get(ctx, statetest.Bob, state.GetArgs{Key: key}, statetest.T0)
	if err != nil || e == nil || e.Version != 1 || e.Map()["value"].(map[string]any)["n"] == nil {
		t.Fatalf("after the restart: %+v, %v", e, err)
	}
	a := statetest.SetArgs(key, 2)
	a.ExpectedVersion = 1
	if e, err := s2.Set(ctx, statetest.Alice, a, nil, statetest.T0.Add(1)); err != nil || e.Version != 2 {
		t.Fatalf("conditional SET after the restart: %+v, %v", e, err)
	}
	if r, err := s2.Revoke(ctx, statetest.Alice, state.RevokeArgs{GrantID: g.ID}, statetest.T0); err != nil || r.AlreadyRevoked {
		t.Fatalf("revoke after the restart: %+v, %v", r, err)
	}
}

// Two handles on one file (two processes) race conditional SETs on one
// version: exactly one wins each round.
func TestTwoHandlesRace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "custos.db")
	a, b := newStore(t, openDB(t, path), nil), newStore(t, openDB(t, path), nil)
	key := statetest.Alice + "/agent/race"
	if _, err := a.Set(ctx, statetest.Alice, statetest.SetArgs(key, 0), nil, statetest.T0); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 10; round++ {
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		for _, s := range []*sqlitestate.Store{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args := statetest.SetArgs(key, round)
				args.ExpectedVersion = round
				_, err := s.Set(ctx, statetest.Alice, args, nil, statetest.T0)
				switch {
				case err == nil:
					wins.Add(1)
				case statetest.Code(err) == arsia.CodeConflict:
					conflicts.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || conflicts.Load() != 3 {
			t.Fatalf("round %d: %d wins, %d conflicts", round, wins.Load(), conflicts.Load())
		}
	}
}
