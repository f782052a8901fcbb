package sqlitereplay_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/auth/replaytest"
	"github.com/custos-runtime/custos/internal/sqlitedb"
	"github.com/custos-runtime/custos/store/sqlitereplay"
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

func newSet(t *testing.T, db *sqlitedb.DB, o *sqlitereplay.Options) *sqlitereplay.Set {
	t.Helper()
	s, err := sqlitereplay.New(t.Context(), db, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKit(t *testing.T) {
	replaytest.Run(t, func(t *testing.T, clock func() time.Time) auth.ReplayCache {
		return newSet(t, openDB(t, filepath.Join(t.TempDir(), "custos.db")), &sqlitereplay.Options{Now: clock})
	})
}

// A proof accepted before a restart is refused after it.
func TestReplayAfterRestart(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "custos.db")
	clock := replaytest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	db := openDB(t, path)
	s := newSet(t, db, &sqlitereplay.Options{Now: clock.Now})
	until := clock.Now().Add(5 * time.Minute)
	if seen, err := s.Seen(ctx, "jti-1", until); err != nil || seen {
		t.Fatalf("first: %v, %v", seen, err)
	}
	_ = db.Close()
	s2 := newSet(t, openDB(t, path), &sqlitereplay.Options{Now: clock.Now})
	if seen, err := s2.Seen(ctx, "jti-1", until); err != nil || !seen {
		t.Fatalf("after the restart: seen %v, %v; want a replay", seen, err)
	}
}

// Of concurrent calls with one jti, on two handles of one file (two
// processes), exactly one sees it as new.
func TestConcurrentOneWinner(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "custos.db")
	sets := []*sqlitereplay.Set{newSet(t, openDB(t, path), nil), newSet(t, openDB(t, path), nil)}
	for round := range 20 {
		jti := "jti-" + string(rune('a'+round))
		var wg sync.WaitGroup
		var mu sync.Mutex
		fresh := 0
		for i := range 8 {
			wg.Go(func() {
				seen, err := sets[i%2].Seen(ctx, jti, time.Now().Add(time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				if !seen {
					mu.Lock()
					fresh++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if fresh != 1 {
			t.Fatalf("%s: %d callers saw it as new, want 1", jti, fresh)
		}
	}
}

// Expired rows are pruned as new ones come; bad jtis and a closed file
// fail closed.
func TestPruneAndFailClosed(t *testing.T) {
	ctx := t.Context()
	clock := replaytest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	db := openDB(t, filepath.Join(t.TempDir(), "custos.db"))
	s := newSet(t, db, &sqlitereplay.Options{Now: clock.Now, PruneEvery: 10, PruneBatch: 100})
	for i := range 50 {
		if _, err := s.Seen(ctx, "old-"+string(rune('A'+i)), clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	for i := range 10 {
		if _, err := s.Seen(ctx, "new-"+string(rune('A'+i)), clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Len(ctx); err != nil || n != 10 {
		t.Fatalf("after pruning: %d rows, %v; want the 10 unexpired", n, err)
	}
	for _, bad := range []string{"", string(make([]byte, sqlitereplay.MaxJTI+1)), "\xff"} {
		if _, err := s.Seen(ctx, bad, clock.Now()); !errors.Is(err, auth.ErrReplayCache) {
			t.Errorf("jti %q: %v", bad, err)
		}
	}
	_ = db.Close()
	if _, err := s.Seen(context.Background(), "after-close", clock.Now()); !errors.Is(err, auth.ErrReplayCache) {
		t.Errorf("closed: %v", err)
	}
}
