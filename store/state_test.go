package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	arsiastate "github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/exchange/exchangetest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store"
)

func openState(t *testing.T, path string, o *store.StateOptions) *store.State {
	t.Helper()
	s, err := store.Open(t.Context(), store.Location{Kind: store.KindSQLite, Path: path}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Each store of the one state file passes its kit there, next to the
// others.
func TestStateFileKits(t *testing.T) {
	t.Run("approvals", func(t *testing.T) {
		aaistest.Run(t, aaistest.Backend{
			New: func(t *testing.T) aais.Store {
				return openState(t, filepath.Join(t.TempDir(), store.StateFile), nil).Approvals
			},
			Reopen: func(t *testing.T, s aais.Store) aais.Store {
				return openState(t, s.(interface{ Path() string }).Path(), nil).Approvals
			},
		})
	})
	t.Run("exchanges", func(t *testing.T) {
		opts := func(c exchangetest.Config) *store.StateOptions {
			return &store.StateOptions{Instance: c.Instance, Now: c.Now}
		}
		exchangetest.Run(t, exchangetest.Backend{
			New: func(t *testing.T, c exchangetest.Config) exchange.Backend {
				return openState(t, filepath.Join(t.TempDir(), store.StateFile), opts(c)).Exchanges
			},
			Reopen: func(t *testing.T, b exchange.Backend, c exchangetest.Config) exchange.Backend {
				return openState(t, b.(interface{ Path() string }).Path(), opts(c)).Exchanges
			},
		})
	})
	t.Run("audit", func(t *testing.T) {
		audittest.Run(t, func(t *testing.T) audit.Backend {
			return openState(t, filepath.Join(t.TempDir(), store.StateFile), nil).Audit
		})
	})
}

// stateBackends are the places a State can be: a SQLite state file, and
// a PostgreSQL schema (skipped without CUSTOS_TEST_POSTGRES_DSN). open
// returns a new State at the same place on every call.
func stateBackends(t *testing.T) map[string]func(t *testing.T) (open func() *store.State) {
	return map[string]func(t *testing.T) func() *store.State{
		"sqlite": func(t *testing.T) func() *store.State {
			path := filepath.Join(t.TempDir(), store.StateFile)
			return func() *store.State { return openState(t, path, nil) }
		},
		"postgres": func(t *testing.T) func() *store.State {
			loc := store.Location{Kind: store.KindPostgres, DSN: pgtest.DSN(t), Schema: pgtest.Schema(t)}
			return func() *store.State {
				s, err := store.Open(t.Context(), loc, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		},
	}
}

// unitStep is one pipeline step of request n as a unit: its exchange,
// its approval request and its audit record, then fail.
func unitStep(t *testing.T, s *store.State, auth *aais.Authority, log *audit.Log, n string, fail error) error {
	return s.Unit(t.Context(), func(ctx context.Context) error {
		x, created, err := s.Exchanges.Create(ctx, exchange.Exchange{Sender: "agent:acme.a", MessageID: "m_" + n, Capability: "c"})
		if err != nil || !created {
			return errors.Join(err, errors.New("not created"))
		}
		if _, err := auth.Submit(ctx, aaistest.Request(t, time.Now(), "r_"+n)); err != nil {
			return err
		}
		if _, err := log.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: "m_" + n, Details: map[string]any{"exchange_id": x.ID}}); err != nil {
			return err
		}
		return fail
	})
}

// A unit of work across the three stores commits all of its writes or
// none: the exchange, the approval request and the audit record of one
// step are never separated.
func TestStateUnit(t *testing.T) {
	for name, backend := range stateBackends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			open := backend(t)
			s := open()
			if !s.Atomic() {
				t.Fatal("not atomic")
			}
			auth, err := aais.NewAuthority(s.Approvals, nil)
			if err != nil {
				t.Fatal(err)
			}
			log := audit.New(s.Audit, nil)
			boom := errors.New("crash before commit")
			if err := unitStep(t, s, auth, log, "1", boom); !errors.Is(err, boom) {
				t.Fatalf("step = %v", err)
			}
			if err := unitStep(t, s, auth, log, "2", nil); err != nil {
				t.Fatal(err)
			}
			// Read back through a second, fresh handle.
			r := open()
			if _, err := r.Exchanges.BySender(ctx, "agent:acme.a", "m_1"); !errors.Is(err, exchange.ErrNotFound) {
				t.Errorf("exchange of the failed unit: %v", err)
			}
			if _, err := r.Approvals.RequestState(ctx, "apr_r_1"); !errors.Is(err, aais.ErrUnknownRequest) {
				t.Errorf("approval of the failed unit: %v", err)
			}
			if _, err := r.Exchanges.BySender(ctx, "agent:acme.a", "m_2"); err != nil {
				t.Errorf("exchange of the committed unit: %v", err)
			}
			if _, err := r.Approvals.RequestState(ctx, "apr_r_2"); err != nil {
				t.Errorf("approval of the committed unit: %v", err)
			}
			rep, err := audit.New(r.Audit, nil).Verify(ctx)
			if err != nil || !rep.OK() || rep.Records != 1 {
				t.Errorf("audit after one committed unit: %+v, %v", rep, err)
			}
			// The approval stream has exactly the committed request's event.
			page, err := r.Approvals.EventsAfter(ctx, 0, 0)
			if err != nil || len(page.Events) != 1 || page.Events[0].Sequence != 1 {
				t.Errorf("events: %+v, %v", page, err)
			}
		})
	}
}

// Concurrent units share transactions (group commit); one that fails
// after writing takes nothing of the others with it and leaves nothing of
// its own, and a write that fails inside a unit (an id taken) fails it.
func TestStateConcurrentUnits(t *testing.T) {
	for name, backend := range stateBackends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			open := backend(t)
			s := open()
			auth, err := aais.NewAuthority(s.Approvals, nil)
			if err != nil {
				t.Fatal(err)
			}
			log := audit.New(s.Audit, nil)
			boom := errors.New("refused after writing")
			const n = 48
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					var fail error
					if i%3 == 1 {
						fail = boom
					}
					errs[i] = unitStep(t, s, auth, log, strconv.Itoa(i), fail)
				})
			}
			wg.Wait()
			// A second step for a message already recorded: its exchange
			// is not created, and it writes nothing else.
			if err := unitStep(t, s, auth, log, "0", nil); err == nil {
				t.Error("a repeated step succeeded")
			}
			r := open()
			committed := 0
			for i, err := range errs {
				_, xerr := r.Exchanges.BySender(ctx, "agent:acme.a", "m_"+strconv.Itoa(i))
				_, aerr := r.Approvals.RequestState(ctx, "apr_r_"+strconv.Itoa(i))
				switch {
				case i%3 == 1:
					if !errors.Is(err, boom) || !errors.Is(xerr, exchange.ErrNotFound) || !errors.Is(aerr, aais.ErrUnknownRequest) {
						t.Errorf("failed unit %d: %v; exchange %v, approval %v", i, err, xerr, aerr)
					}
				default:
					committed++
					if err != nil || xerr != nil || aerr != nil {
						t.Errorf("unit %d: %v; exchange %v, approval %v", i, err, xerr, aerr)
					}
				}
			}
			rep, err := audit.New(r.Audit, nil).Verify(ctx)
			if err != nil || !rep.OK() || rep.Records != committed {
				t.Errorf("audit: %+v, %v; want %d records", rep, err, committed)
			}
			page, err := r.Approvals.EventsAfter(ctx, 0, 0)
			if err != nil || len(page.Events) != committed {
				t.Fatalf("events: %d, %v; want %d", len(page.Events), err, committed)
			}
			for i, e := range page.Events {
				if e.Sequence != uint64(i+1) {
					t.Fatalf("event %d has sequence %d: a hole", i, e.Sequence)
				}
			}
		})
	}
}

// A unit spans the stores only when all of them are on the state file.
func TestStateAtomic(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		loc  store.Location
		o    *store.StateOptions
		want bool
	}{
		{"state file", store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, "a", store.StateFile)}, nil, true},
		{"approvals in memory", store.Location{Kind: store.KindMemory}, &store.StateOptions{DataDir: filepath.Join(dir, "b")}, false},
		{"audit log elsewhere", store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, "c", store.StateFile)},
			&store.StateOptions{Audit: store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, "c", "audit.db")}}, false},
	}
	for _, c := range cases {
		s, err := store.Open(t.Context(), c.loc, c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.Atomic() != c.want {
			t.Errorf("%s: Atomic %v, want %v", c.name, s.Atomic(), c.want)
		}
		_ = s.Close()
	}
}

// The DPoP replay set is in the state file: a proof seen before a
// restart is a replay after it.
func TestStateReplaySurvivesRestart(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), store.StateFile)
	s, err := store.Open(ctx, store.Location{Kind: store.KindSQLite, Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(5 * time.Minute)
	if seen, err := s.Replay.Seen(ctx, "proof-1", until); err != nil || seen {
		t.Fatalf("first: %v, %v", seen, err)
	}
	_ = s.Close()
	s = openState(t, path, nil)
	if seen, err := s.Replay.Seen(ctx, "proof-1", until); err != nil || !seen {
		t.Fatalf("after a restart: %v, %v; want a replay", seen, err)
	}
}

// An approval written inside a unit of work wakes the store's followers
// when the unit commits, not before (they would read too early and wait
// for the next poll).
func TestStateUnitWakesFollowersAtCommit(t *testing.T) {
	ctx := t.Context()
	s := openState(t, filepath.Join(t.TempDir(), store.StateFile), nil)
	n, ok := s.Approvals.(aais.ChangeNotifier)
	if !ok {
		t.Fatal("the state's approval store announces no changes")
	}
	changes, err := n.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := aais.NewAuthority(s.Approvals, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Unit(ctx, func(ctx context.Context) error {
		if _, err := auth.Submit(ctx, aaistest.Request(t, time.Now(), "w1")); err != nil {
			return err
		}
		select {
		case <-changes:
			t.Error("woken before the unit committed")
		case <-time.After(50 * time.Millisecond):
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("not woken after the unit committed")
	}
	if page, err := s.Approvals.EventsAfter(ctx, 0, 0); err != nil || len(page.Events) != 1 {
		t.Fatalf("after the wake: %+v, %v", page, err)
	}
}

// The state's ARSIA-State store keeps entries across a reopen, on both
// backends, with the rules of StateOptions.StateStore.
func TestStateStore(t *testing.T) {
	for name, backend := range stateBackends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			open := backend(t)
			s := open()
			if s.StateStore == nil {
				t.Fatal("no state store")
			}
			now := time.Date(2026, 4, 13, 12, 0, 0, 0, time.UTC)
			key := "agent:acme.a/agent/k"
			args := arsiastate.SetArgs{Key: key, Value: "v", Scope: arsiastate.ScopeAgent, PIIClassification: arsiastate.PIINone}
			if _, err := s.StateStore.Set(ctx, "agent:acme.a", args, nil, now); err != nil {
				t.Fatal(err)
			}
			e, err := open().StateStore.Get(ctx, "agent:acme.a", arsiastate.GetArgs{Key: key}, now)
			if err != nil || e == nil || e.Version != 1 {
				t.Fatalf("after reopening: %+v, %v", e, err)
			}
		})
	}
	path := filepath.Join(t.TempDir(), store.StateFile)
	s, err := store.Open(t.Context(), store.Location{Kind: store.KindSQLite, Path: path},
		&store.StateOptions{StateStore: &arsiastate.StoreOptions{Zones: []string{"US"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	args := arsiastate.SetArgs{Key: "agent:acme.a/agent/k", Value: "v", Scope: arsiastate.ScopeAgent, PIIClassification: arsiastate.PIINone, DataResidency: "PT"}
	if _, err := s.StateStore.Set(t.Context(), "agent:acme.a", args, nil, time.Now()); !errors.Is(err, arsiastate.ErrResidency) {
		t.Fatalf("PT data in a US-only store: %v", err)
	}
}
