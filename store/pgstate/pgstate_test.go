package pgstate_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/arsia/state/statetest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgstate"
)

func pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func open(t *testing.T, p *pgxpool.Pool, schema string, o *state.StoreOptions) *pgstate.Store {
	t.Helper()
	s, err := pgstate.New(context.Background(), p, &pgstate.Options{Schema: schema, Store: o})
	if err != nil {
		t.Fatal(err)
	}
	if s.Schema() != schema {
		t.Fatalf("Schema() = %q", s.Schema())
	}
	return s
}

func TestKit(t *testing.T) {
	p := pool(t)
	statetest.Run(t, func(t *testing.T, o *state.StoreOptions) state.Store {
		return open(t, p, pgtest.Schema(t), o)
	})
}

// Two pools (two replicas) on one schema race conditional SETs on one
// version: exactly one wins each round, and the other sees the winner's
// write.
func TestTwoPoolsRace(t *testing.T) {
	ctx := context.Background()
	schema := pgtest.Schema(t)
	a, b := open(t, pool(t), schema, nil), open(t, pool(t), schema, nil)
	key := statetest.Alice + "/agent/race"
	if _, err := a.Set(ctx, statetest.Alice, statetest.SetArgs(key, 0), nil, statetest.T0); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 10; round++ {
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		for _, s := range []*pgstate.Store{a, b, a, b} {
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
	e, err := b.Get(ctx, statetest.Alice, state.GetArgs{Key: key}, statetest.T0)
	if err != nil || e == nil || e.Version != 11 {
		t.Fatalf("after the race: %+v, %v", e, err)
	}
}

// A second store on the schema (a restart, another replica) finds the
// state and does not migrate again.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	schema := pgtest.Schema(t)
	p := pool(t)
	a := open(t, p, schema, nil)
	key := statetest.Alice + "/shared/doc"
	if _, err := a.Set(ctx, statetest.Alice, statetest.SetArgs(key, "x"), nil, statetest.T0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Purge(ctx, statetest.Alice, state.PurgeArgs{Key: key}, statetest.T0); err != nil {
		t.Fatal(err)
	}
	b := open(t, p, schema, nil)
	r, err := b.Purge(ctx, statetest.Alice, state.PurgeArgs{Key: key}, statetest.T0.Add(1))
	if err != nil || !r.AlreadyPurged {
		t.Fatalf("purge through the second store: %+v, %v", r, err)
	}
}
