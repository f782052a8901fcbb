package pgreplay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/auth/replaytest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgreplay"
	"github.com/custos-runtime/custos/store/pgstore"
)

func open(t testing.TB, schema string, o *pgreplay.Options) *pgreplay.Set {
	t.Helper()
	s, err := pgreplay.Open(context.Background(), pgtest.SchemaDSN(t, schema), o)
	if err != nil {
		t.Fatalf("Open(%s): %v", schema, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if s.Schema() != schema {
		t.Fatalf("Schema() = %q, want %q", s.Schema(), schema)
	}
	return s
}

func rawConn(t testing.TB) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func count(t testing.TB, c *pgx.Conn, schema, table string) int {
	t.Helper()
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{schema, table}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReplayCacheContract(t *testing.T) {
	replaytest.Run(t, func(t *testing.T, clock func() time.Time) auth.ReplayCache {
		return open(t, pgtest.Schema(t), &pgreplay.Options{Now: clock})
	})
}

var start = time.Date(2026, 4, 12, 12, 0, 0, 0, time.UTC)

// Three Sets (three pools: three replicas) on one schema are one replay
// set: a jti recorded by one is a replay at the others, and of concurrent
// calls with one jti across them exactly one is new.
func TestReplicasShareOneSet(t *testing.T) {
	schema := pgtest.Schema(t)
	clock := replaytest.NewClock(start)
	var sets []*pgreplay.Set
	for range 3 {
		sets = append(sets, open(t, schema, &pgreplay.Options{Now: clock.Now}))
	}
	ctx := t.Context()
	until := start.Add(time.Minute)
	if seen, err := sets[0].Seen(ctx, "j1", until); err != nil || seen {
		t.Fatalf("first Seen = %v, %v", seen, err)
	}
	for i, s := range sets {
		if seen, err := s.Seen(ctx, "j1", until); err != nil || !seen {
			t.Fatalf("replica %d: Seen = %v, %v; want a replay", i, seen, err)
		}
	}
	for round := range 20 {
		jti := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		fresh := 0
		for i := range 30 {
			wg.Go(func() {
				seen, err := sets[i%3].Seen(ctx, jti, until)
				if err != nil {
					t.Errorf("Seen: %v", err)
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
			t.Fatalf("round %d: %d of 30 calls across 3 replicas saw %s as new", round, fresh, jti)
		}
	}
}

// Prune deletes exactly the expired rows, in batches, and an expired jti
// taken over by Seen is kept again.
func TestPrune(t *testing.T) {
	schema := pgtest.Schema(t)
	clock := replaytest.NewClock(start)
	s := open(t, schema, &pgreplay.Options{Now: clock.Now, PruneInterval: -1, PruneBatch: 7, PruneMaxBatches: 2})
	ctx := t.Context()
	for i := range 40 {
		until := start.Add(10 * time.Second)
		if i%4 == 0 {
			until = start.Add(time.Hour)
		}
		if seen, err := s.Seen(ctx, fmt.Sprintf("p%d", i), until); err != nil || seen {
			t.Fatalf("Seen(p%d) = %v, %v", i, seen, err)
		}
	}
	c := rawConn(t)
	if n, err := s.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("Prune before expiry = %d, %v", n, err)
	}
	clock.Advance(10 * time.Second) // until is inclusive
	if n, err := s.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("Prune at expiry = %d, %v", n, err)
	}
	clock.Advance(time.Second)
	// 30 expired rows; a run is at most 2 batches of 7.
	if n, err := s.Prune(ctx); err != nil || n != 14 {
		t.Fatalf("first run deleted %d (%v), want 14", n, err)
	}
	if n, err := s.Prune(ctx); err != nil || n != 14 {
		t.Fatalf("second run deleted %d (%v), want 14", n, err)
	}
	if n, err := s.Prune(ctx); err != nil || n != 2 {
		t.Fatalf("third run deleted %d (%v), want 2", n, err)
	}
	if got := count(t, c, schema, "dpop_replay"); got != 10 {
		t.Fatalf("%d rows left, want the 10 unexpired", got)
	}
	for i := range 40 {
		seen, err := s.Seen(ctx, fmt.Sprintf("p%d", i), start.Add(time.Hour))
		if err != nil || seen != (i%4 == 0) {
			t.Fatalf("after pruning, Seen(p%d) = %v, %v", i, seen, err)
		}
	}
}

// Seen starts pruning in the background, at most once per interval.
func TestBackgroundPrune(t *testing.T) {
	schema := pgtest.Schema(t)
	clock := replaytest.NewClock(start)
	s := open(t, schema, &pgreplay.Options{Now: clock.Now, PruneInterval: 50 * time.Millisecond})
	ctx := t.Context()
	for i := range 10 {
		if _, err := s.Seen(ctx, fmt.Sprintf("b%d", i), start.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	c := rawConn(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.Seen(ctx, "trigger", start.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if count(t, c, schema, "dpop_replay") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("expired rows were not pruned in the background")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every failure to record is an error wrapping auth.ErrReplayCache: the
// proof is refused.
func TestFailsClosed(t *testing.T) {
	schema := pgtest.Schema(t)
	s := open(t, schema, nil)
	ctx := t.Context()
	for _, jti := range []string{"", string(make([]byte, pgreplay.MaxJTI+1)), "a\x00b", "\xff"} {
		if _, err := s.Seen(ctx, jti, time.Now().Add(time.Minute)); !errors.Is(err, auth.ErrReplayCache) {
			t.Errorf("Seen(%q) = %v, want ErrReplayCache", jti, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Seen(cctx, "x", time.Now().Add(time.Minute)); !errors.Is(err, auth.ErrReplayCache) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	// The table gone: the database refuses the statement.
	c := rawConn(t)
	if _, err := c.Exec(ctx, "DROP TABLE "+pgx.Identifier{schema, "dpop_replay"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seen(ctx, "x", time.Now().Add(time.Minute)); !errors.Is(err, auth.ErrReplayCache) {
		t.Errorf("without the table: %v", err)
	}
	_ = s.Close()
	if _, err := s.Seen(ctx, "y", time.Now().Add(time.Minute)); !errors.Is(err, auth.ErrReplayCache) {
		t.Errorf("after Close: %v", err)
	}
	// A database that does not answer.
	if _, err := pgreplay.Open(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", nil); err == nil {
		t.Error("Open on a closed port succeeded")
	}
}

// Replicas starting together on a new schema apply the migration once; a
// newer schema is refused.
func TestMigrations(t *testing.T) {
	schema := pgtest.Schema(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := pgreplay.Open(t.Context(), pgtest.SchemaDSN(t, schema), nil)
			if err == nil {
				_ = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	c := rawConn(t)
	if got := count(t, c, schema, "dpop_replay_migrations"); got != pgreplay.SchemaVersion() || got < 1 {
		t.Fatalf("%d migrations recorded, want %d", got, pgreplay.SchemaVersion())
	}
	if _, err := c.Exec(t.Context(), "INSERT INTO "+pgx.Identifier{schema, "dpop_replay_migrations"}.Sanitize()+" (version, name) VALUES ($1, 'future')", pgreplay.SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := pgreplay.Open(t.Context(), pgtest.SchemaDSN(t, schema), nil); !errors.Is(err, pgreplay.ErrSchemaTooNew) {
		t.Fatalf("newer schema: %v", err)
	}
}

// The replay set lives beside the approval store in one schema, created
// by whichever starts first, and New works on the store's pool.
func TestBesideStore(t *testing.T) {
	if pgreplay.MigrationLockKey != pgstore.MigrationLockKey {
		t.Fatal("the migration lock key differs from pgstore's")
	}
	schema := pgtest.Schema(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	var st *pgstore.Store
	var stErr, setErr error
	wg.Go(func() { st, stErr = pgstore.Open(ctx, pgtest.DSN(t), &pgstore.Options{Schema: schema}) })
	wg.Go(func() {
		s, err := pgreplay.Open(ctx, pgtest.SchemaDSN(t, schema), nil)
		if err == nil {
			_ = s.Close()
		}
		setErr = err
	})
	wg.Wait()
	if stErr != nil || setErr != nil {
		t.Fatalf("store: %v; replay set: %v", stErr, setErr)
	}
	defer st.Close()
	s, err := pgreplay.New(ctx, st.Pool(), &pgreplay.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if seen, err := s.Seen(ctx, "z", time.Now().Add(time.Minute)); err != nil || seen {
		t.Fatalf("Seen = %v, %v", seen, err)
	}
	if _, err := st.ID(ctx); err != nil {
		t.Fatalf("the store after the replay set: %v", err)
	}
	_ = s.Close()
	if _, err := st.ID(ctx); err != nil {
		t.Fatalf("closing the set closed the store's pool: %v", err)
	}
	// The replay set first, the store after, on a new schema.
	schema2 := pgtest.Schema(t)
	open(t, schema2, nil)
	st2, err := pgstore.Open(ctx, pgtest.DSN(t), &pgstore.Options{Schema: schema2})
	if err != nil {
		t.Fatalf("the store in a schema the replay set created: %v", err)
	}
	_ = st2.Close()
}
