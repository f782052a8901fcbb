package sqlitestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/sqlitestore"
)

func open(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// reopen opens a second Store on s's file.
func reopen(t *testing.T, s aais.Store) aais.Store {
	return open(t, s.(*sqlitestore.Store).Path())
}

func TestConformance(t *testing.T) {
	aaistest.Run(t, aaistest.Backend{
		New: func(t *testing.T) aais.Store {
			return open(t, filepath.Join(t.TempDir(), "store.db"))
		},
		Reopen: reopen,
	})
}

// The store must not deadlock or misbehave with a single pooled connection
// shared by readers and the writer.
func TestConformanceOneConnection(t *testing.T) {
	aaistest.Run(t, aaistest.Backend{
		New: func(t *testing.T) aais.Store {
			s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "store.db"), &sqlitestore.Options{MaxConns: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Reopen: reopen,
	})
}

// Closing and reopening the file keeps pending requests, resolutions, the
// event log and the store identity; sequences continue.
func TestRestartPreservesState(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	clock := aaistest.NewClock(aaistest.Start)

	s := open(t, path)
	a := aaistest.NewAuthority(t, s, clock)
	var reqs []*aais.Request
	for i := range 3 {
		r := aaistest.Request(t, clock.Now(), fmt.Sprint(i))
		if _, created, err := a.Create(ctx, r); err != nil || !created {
			t.Fatalf("Create: %v, %v", created, err)
		}
		reqs = append(reqs, r)
	}
	d := aaistest.Decision(t, reqs[1], aais.Approve, "dec_1", clock.Now())
	receipt, err := a.Decide(ctx, d, aaistest.Actor, nil)
	if err != nil || receipt.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("Decide: %v, %v", receipt, err)
	}
	before := aaistest.CheckLog(t, s, 4)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := open(t, path)
	after := aaistest.CheckLog(t, s2, 4)
	if after.StoreID != before.StoreID {
		t.Fatalf("store id changed on reopen: %s -> %s", before.StoreID, after.StoreID)
	}
	for i := range before.Events {
		if aaistest.Wire(t, before.Events[i]) != aaistest.Wire(t, after.Events[i]) {
			t.Fatalf("event %d changed on reopen", i+1)
		}
	}
	pending, asOf, err := s2.Pending(ctx)
	if err != nil || asOf != 4 || len(pending) != 2 ||
		pending[0].Event.Request.ID != reqs[0].ID || pending[1].Event.Request.ID != reqs[2].ID {
		t.Fatalf("Pending after reopen: %d records as of %d, %v", len(pending), asOf, err)
	}
	st, err := s2.RequestState(ctx, reqs[1].ID)
	if err != nil || st.Pending() || aaistest.Wire(t, st.Resolution.Event) != aaistest.Wire(t, receipt) {
		t.Fatalf("resolution lost on reopen: %+v, %v", st, err)
	}
	a2 := aaistest.NewAuthority(t, s2, clock)
	// The replay is recognised across the restart (decision fingerprint kept).
	again, err := a2.Decide(ctx, d, aaistest.Actor, nil)
	if err != nil || aaistest.Wire(t, again) != aaistest.Wire(t, receipt) {
		t.Fatalf("replay after reopen: %v", err)
	}
	ev, created, err := a2.Create(ctx, aaistest.Request(t, clock.Now(), "new"))
	if err != nil || !created || ev.Sequence != 5 {
		t.Fatalf("Create after reopen: sequence %d, %v, %v; want 5", ev.Sequence, created, err)
	}
	recs, err := a2.ExpireOverdue(ctx)
	if err != nil || len(recs) != 0 {
		t.Fatalf("ExpireOverdue: %d, %v", len(recs), err)
	}
	aaistest.CheckLog(t, s2, 5)
}

// Two Stores on one file behave as one store: one resolution per request
// and one gapless sequence, whichever handle writes.
func TestTwoHandlesSameFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	clock := aaistest.NewClock(aaistest.Start)
	s1, s2 := open(t, path), open(t, path)
	id1, _ := s1.ID(ctx)
	id2, _ := s2.ID(ctx)
	if id1 == "" || id1 != id2 {
		t.Fatalf("store ids %q and %q", id1, id2)
	}
	auths := []*aais.Authority{aaistest.NewAuthority(t, s1, clock), aaistest.NewAuthority(t, s2, clock)}

	const rounds, deciders = 10, 16
	for round := range rounds {
		r := aaistest.Request(t, clock.Now(), fmt.Sprint(round))
		if _, _, err := auths[round%2].Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		receipts := make([]*aais.Message, deciders)
		errs := make([]error, deciders)
		decisions := make([]*aais.Decision, deciders)
		for i := range deciders {
			v := aais.Approve
			if i%2 == 1 {
				v = aais.Deny
			}
			decisions[i] = aaistest.Decision(t, r, v, fmt.Sprintf("dec_%d_%d", round, i), clock.Now())
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range deciders {
			wg.Go(func() {
				<-start
				receipts[i], errs[i] = auths[i%2].Decide(ctx, decisions[i], aaistest.Actor, nil)
			})
		}
		close(start)
		wg.Wait()
		st, err := s1.RequestState(ctx, r.ID)
		if err != nil || st.Pending() {
			t.Fatalf("round %d: state %+v, %v", round, st, err)
		}
		winners := 0
		for i, m := range receipts {
			if errs[i] != nil {
				t.Fatalf("round %d decider %d: %v", round, i, errs[i])
			}
			if m.Resolution.Outcome != aais.OutcomeConflict {
				winners++
				if aaistest.Wire(t, m) != aaistest.Wire(t, st.Resolution.Event) {
					t.Fatalf("round %d: winner %d's receipt is not the stored one", round, i)
				}
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d deciders won, want exactly 1", round, winners)
		}
	}
	p := aaistest.CheckLog(t, s2, 2*rounds)
	resolved := 0
	for _, e := range p.Events {
		if e.Type == aais.TypeResolved {
			resolved++
		}
	}
	if resolved != rounds {
		t.Fatalf("%d resolutions in the log, want %d", resolved, rounds)
	}

	// Concurrent creates through both handles: one gapless sequence.
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errc := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, _, err := auths[w%2].Create(ctx, aaistest.Request(t, clock.Now(), fmt.Sprintf("c%d_%d", w, i))); err != nil {
					errc <- err
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	aaistest.CheckLog(t, s1, 2*rounds+writers*each)
}

// Opening again applies nothing twice and keeps the identity; concurrent
// first opens of a new file agree on one schema and one identity.
func TestMigrationsIdempotent(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "store.db")
	s := open(t, path)
	id, err := s.ID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if again, _ := s.ID(ctx); again != id {
		t.Fatalf("id changed on second open: %s -> %s", id, again)
	}
	if n := countRows(t, path, "schema_migrations"); n != sqlitestore.SchemaVersion() || n < 1 {
		t.Fatalf("schema_migrations has %d rows, want %d", n, sqlitestore.SchemaVersion())
	}

	path2 := filepath.Join(dir, "race.db")
	const n = 6
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := sqlitestore.Open(ctx, path2, nil)
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			ids[i], errs[i] = s.ID(ctx)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent open %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("concurrent opens got ids %s and %s", ids[0], ids[i])
		}
	}
	if got := countRows(t, path2, "schema_migrations"); got != sqlitestore.SchemaVersion() {
		t.Fatalf("schema_migrations has %d rows after concurrent opens", got)
	}
}

func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func countRows(t testing.TB, path, table string) int {
	t.Helper()
	var n int
	if err := rawDB(t, path).QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s := open(t, path)
	_ = s.Close()
	if _, err := rawDB(t, path).Exec("INSERT INTO schema_migrations VALUES (999, 'future', 'now')"); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlitestore.Open(t.Context(), path, nil); err == nil {
		s.Close()
		t.Fatal("Open accepted a schema newer than the build")
	}
}

func TestMissingIdentityRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s := open(t, path)
	_ = s.Close()
	if _, err := rawDB(t, path).Exec("DELETE FROM meta"); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlitestore.Open(t.Context(), path, nil); err == nil {
		s.Close()
		t.Fatal("Open accepted a store without its identity")
	}
}

// A file that is not an SQLite database is an error, never an empty store,
// and is left as it was.
func TestCorruptFile(t *testing.T) {
	for name, garbage := range map[string][]byte{
		"short": []byte("this is not a database"),
		"pages": bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 4096),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			if err := os.WriteFile(path, garbage, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := sqlitestore.Open(t.Context(), path, nil)
			if err == nil {
				s.Close()
				t.Fatal("Open accepted a corrupt file")
			}
			got, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(got, garbage) {
				t.Fatalf("corrupt file changed by the failed Open (%v)", rerr)
			}
			t.Logf("Open: %v", err)
			if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
				t.Logf("files left next to the corrupt database: %d", len(entries))
			}
		})
	}
}

// Writes with a context cancelled before they start write nothing.
func TestCancelledContextWritesNothing(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "store.db"))
	clock := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, clock)
	r := aaistest.Request(t, clock.Now(), "1")
	if _, _, err := a.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	id, _ := s.ID(ctx)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := a.Create(cancelled, aaistest.Request(t, clock.Now(), "2")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Create: err = %v, want context.Canceled", err)
	}
	if _, err := a.Decide(cancelled, aaistest.Decision(t, r, aais.Approve, "", clock.Now()), aaistest.Actor, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Decide: err = %v, want context.Canceled", err)
	}
	// Straight to the store, past the Authority's read.
	rec := aais.ResolutionRecord{Event: resolvedEvent(t, r, clock.Now())}
	if _, _, err := s.ResolveIfPending(cancelled, rec); !errors.Is(err, context.Canceled) {
		t.Fatalf("ResolveIfPending: err = %v, want context.Canceled", err)
	}
	if err := s.Reset(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reset: err = %v, want context.Canceled", err)
	}
	p := aaistest.CheckLog(t, s, 1)
	if p.StoreID != id {
		t.Fatal("cancelled Reset changed the store id")
	}
	if st, err := s.RequestState(ctx, r.ID); err != nil || !st.Pending() {
		t.Fatalf("request resolved despite cancelled contexts: %v", err)
	}
	if _, err := s.RequestState(ctx, "apr_2"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("request created despite a cancelled context: %v", err)
	}
}

func resolvedEvent(t testing.TB, r *aais.Request, now time.Time) *aais.Message {
	t.Helper()
	res, err := aais.NewResolution(aais.ResolutionParams{Request: r, Outcome: aais.OutcomeCancelled, ResolvedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: now, Stream: "test"}, res)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSequenceExhausted(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	s := open(t, path)
	clock := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, clock)
	r := aaistest.Request(t, clock.Now(), "1")
	if _, _, err := a.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	// Pretend the log reached the end.
	if _, err := rawDB(t, path).Exec("INSERT INTO events (sequence, type, request_id, json) VALUES (?, 'x', 'x', x'')", int64(aais.MaxSequence)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Create(ctx, aaistest.Request(t, clock.Now(), "2")); !errors.Is(err, aais.ErrSequenceExhausted) {
		t.Fatalf("Create: err = %v, want ErrSequenceExhausted", err)
	}
	if _, err := a.Decide(ctx, aaistest.Decision(t, r, aais.Approve, "", clock.Now()), aaistest.Actor, nil); !errors.Is(err, aais.ErrSequenceExhausted) {
		t.Fatalf("Decide: err = %v, want ErrSequenceExhausted", err)
	}
	if st, err := s.RequestState(ctx, r.ID); err != nil || !st.Pending() {
		t.Fatalf("request resolved without an event: %v", err)
	}
	if _, err := s.RequestState(ctx, "apr_2"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("request created without an event: %v", err)
	}
}

// After a reset a presenter resuming from its old sequence sees a gap and
// a new store id, and sequences start again at 1.
func TestResetReportsGap(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "store.db"))
	clock := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, clock)
	for i := range 3 {
		if _, _, err := a.Create(ctx, aaistest.Request(t, clock.Now(), fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	old := aaistest.CheckLog(t, s, 3).StoreID
	if err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := s.EventsAfter(ctx, 0, 0)
	if err != nil || p.Gap || p.Latest != 0 || len(p.Events) != 0 || p.StoreID == old || p.StoreID == "" {
		t.Fatalf("after reset, EventsAfter(0) = %+v, %v; want empty, a new store id", p, err)
	}
	if p, _ = s.EventsAfter(ctx, 3, 0); !p.Gap {
		t.Fatal("after reset, EventsAfter(3) reports no gap")
	}
	if pending, asOf, err := s.Pending(ctx); err != nil || len(pending) != 0 || asOf != 0 {
		t.Fatalf("after reset, Pending = %d as of %d, %v", len(pending), asOf, err)
	}
	ev, created, err := a.Create(ctx, aaistest.Request(t, clock.Now(), "0"))
	if err != nil || !created || ev.Sequence != 1 {
		t.Fatalf("Create after reset: sequence %d, %v, %v", ev.Sequence, created, err)
	}
}

func TestPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "dir")
	path := filepath.Join(dir, "store.db")
	open(t, path)
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		// The umask can only take permissions away.
		if fi.Mode()&^want != 0 {
			t.Errorf("%s: mode %v, want at most %v", p, fi.Mode(), want)
		}
	}
}

// A path with characters that mean something in a URI is still one file.
func TestPathWithURICharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a dir?x=1#frag%20", "store.db")
	s := open(t, path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at %s: %v", path, err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("WAL not next to the database: %v", err)
	}
	if s.Path() != path {
		t.Fatalf("Path() = %s", s.Path())
	}
}

func TestReturnsCopies(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "store.db"))
	clock := aaistest.NewClock(aaistest.Start)
	r := aaistest.Request(t, clock.Now(), "1")
	a := aaistest.NewAuthority(t, s, clock)
	ev, _, err := a.Create(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	ev.Request.ID = "changed"
	st, err := s.RequestState(ctx, r.ID)
	if err != nil || st.Request.Event.Request.ID != r.ID {
		t.Fatalf("stored request changed through a returned pointer: %v", err)
	}
}

// BenchmarkCycle measures one approval cycle per op: create a request,
// decide it, record the resolution, through an aais.Authority, with 1 and
// 8 concurrent deciders.
// TestHelperProcess is the child of TestCrossProcess; it does nothing
// unless started by it.
func TestHelperProcess(t *testing.T) {
	path, child := os.Getenv("SQLITESTORE_HELPER_PATH"), os.Getenv("SQLITESTORE_HELPER_CHILD")
	if path == "" {
		t.Skip("helper process for TestCrossProcess")
	}
	ctx := t.Context()
	s := open(t, path)
	clock := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, clock)
	for i := range crossRequests {
		r := aaistest.Request(t, clock.Now(), fmt.Sprint(i))
		if _, err := a.Decide(ctx, aaistest.Decision(t, r, aais.Approve, "dec_"+child+"_"+fmt.Sprint(i), clock.Now()), aaistest.Actor, nil); err != nil {
			t.Fatalf("Decide %d: %v", i, err)
		}
		if _, _, err := a.Create(ctx, aaistest.Request(t, clock.Now(), "p"+child+"_"+fmt.Sprint(i))); err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
	}
}

const crossRequests, crossChildren = 20, 3

// Several processes deciding the same requests on one file: exactly one
// resolution per request and one gapless log.
func TestCrossProcess(t *testing.T) {
	if os.Getenv("SQLITESTORE_HELPER_PATH") != "" {
		t.Skip("in the helper process")
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	s := open(t, path)
	clock := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, clock)
	for i := range crossRequests {
		if _, _, err := a.Create(ctx, aaistest.Request(t, clock.Now(), fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	outs := make([][]byte, crossChildren)
	errs := make([]error, crossChildren)
	for c := range crossChildren {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "SQLITESTORE_HELPER_PATH="+path, "SQLITESTORE_HELPER_CHILD="+fmt.Sprint(c))
			outs[c], errs[c] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	for c := range crossChildren {
		if errs[c] != nil {
			t.Fatalf("child %d: %v\n%s", c, errs[c], outs[c])
		}
	}
	want := crossRequests + crossRequests + crossChildren*crossRequests
	p := aaistest.CheckLog(t, s, want)
	perRequest := map[string]int{}
	for _, e := range p.Events {
		if e.Type == aais.TypeResolved {
			perRequest[e.Resolution.RequestID]++
		}
	}
	for i := range crossRequests {
		id := "apr_" + fmt.Sprint(i)
		if perRequest[id] != 1 {
			t.Fatalf("%s has %d resolutions, want 1", id, perRequest[id])
		}
		if st, err := s.RequestState(ctx, id); err != nil || st.Pending() {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// TestQuorum runs the M-of-N kit; the race decides through three Stores
// on one file, as three processes would.
func TestQuorum(t *testing.T) {
	aaistest.RunQuorum(t, aaistest.Backend{
		New: func(t *testing.T) aais.Store {
			return open(t, filepath.Join(t.TempDir(), "store.db"))
		},
		Reopen: reopen,
	})
}
