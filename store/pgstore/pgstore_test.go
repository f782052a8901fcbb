package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgstore"
)

func openOpts(t testing.TB, o *pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgtest.DSN(t), o)
	if err != nil {
		t.Fatalf("Open(%s): %v", o.Schema, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func open(t testing.TB, schema string) *pgstore.Store {
	t.Helper()
	return openOpts(t, &pgstore.Options{Schema: schema})
}

// rawConn is a plain connection with the schema on its search path.
func rawConn(t testing.TB, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	c, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func exec(t testing.TB, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := c.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t testing.TB, c *pgx.Conn, table string) int {
	t.Helper()
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// reopen opens a second Store, with its own pool, on s's schema: another
// replica.
func reopen(t *testing.T, s aais.Store) aais.Store {
	return open(t, s.(*pgstore.Store).Schema())
}

func TestConformance(t *testing.T) {
	pgtest.DSN(t)
	aaistest.Run(t, aaistest.Backend{
		New:    func(t *testing.T) aais.Store { return open(t, pgtest.Schema(t)) },
		Reopen: reopen,
	})
}

// A pool of one connection must not deadlock: a write transaction never
// waits for a second pooled connection.
func TestConformanceOneConnection(t *testing.T) {
	pgtest.DSN(t)
	aaistest.Run(t, aaistest.Backend{
		New: func(t *testing.T) aais.Store {
			return openOpts(t, &pgstore.Options{Schema: pgtest.Schema(t), MaxConns: 1})
		},
		Reopen: reopen,
	})
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

// replicas opens n Stores, each with its own pool, on one new schema.
func replicas(t *testing.T, n int) []*pgstore.Store {
	schema := pgtest.Schema(t)
	out := make([]*pgstore.Store, n)
	for i := range out {
		out[i] = open(t, schema)
	}
	return out
}

// Three replicas, one Authority each, 100 deciders on one request spread
// over them: exactly one resolution; every answer is the stored receipt
// (for the winning decision) or an outcome conflict naming it.
func TestReplicasDecideOnce(t *testing.T) {
	ctx := t.Context()
	stores := replicas(t, 3)
	clock := aaistest.NewClock(aaistest.Start)
	auths := make([]*aais.Authority, len(stores))
	for i, s := range stores {
		auths[i] = aaistest.NewAuthority(t, s, clock)
	}
	r := aaistest.Request(t, clock.Now(), "1")
	if _, created, err := auths[0].Create(ctx, r); err != nil || !created {
		t.Fatalf("Create: %v, %v", created, err)
	}
	const n = 100
	shared := aaistest.Decision(t, r, aais.Approve, "dec_shared", clock.Now())
	decisions := make([]*aais.Decision, n)
	for i := range decisions {
		switch i % 3 {
		case 0:
			decisions[i] = shared
		case 1:
			decisions[i] = aaistest.Decision(t, r, aais.Deny, fmt.Sprintf("dec_deny_%d", i), clock.Now())
		default:
			decisions[i] = aaistest.Decision(t, r, aais.Approve, fmt.Sprintf("dec_approve_%d", i), clock.Now())
		}
	}
	receipts := make([]*aais.Message, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			receipts[i], errs[i] = auths[i%len(auths)].Decide(ctx, decisions[i], aaistest.Actor, nil)
		})
	}
	close(start)
	wg.Wait()

	for i, s := range stores {
		st, err := s.RequestState(ctx, r.ID)
		if err != nil || st.Pending() {
			t.Fatalf("replica %d: state %+v, %v", i, st, err)
		}
	}
	st, _ := stores[1].RequestState(ctx, r.ID)
	stored := st.Resolution.Event
	want := aaistest.Wire(t, stored)
	winners := 0
	for i, m := range receipts {
		if errs[i] != nil {
			t.Fatalf("decider %d: %v", i, errs[i])
		}
		if decisions[i].ID == stored.Resolution.DecisionID {
			winners++
			if got := aaistest.Wire(t, m); got != want {
				t.Fatalf("decider %d made the winning decision but got\n%s\nwant\n%s", i, got, want)
			}
			continue
		}
		if m.Resolution.Outcome != aais.OutcomeConflict || m.Sequence != stored.Sequence {
			t.Fatalf("decider %d: outcome %s sequence %d, want conflict at %d", i, m.Resolution.Outcome, m.Sequence, stored.Sequence)
		}
	}
	if winners == 0 {
		t.Fatal("no decider got the stored receipt")
	}
	p := aaistest.CheckLog(t, stores[2], 2)
	if p.Events[1].Type != aais.TypeResolved || aaistest.Wire(t, p.Events[1]) != want {
		t.Fatal("the log's resolution is not the stored receipt")
	}
}

// Concurrent creates through three replicas: one gapless sequence 1..N,
// every request at its own sequence.
func TestReplicasCreateContiguous(t *testing.T) {
	ctx := t.Context()
	stores := replicas(t, 3)
	clock := aaistest.NewClock(aaistest.Start)
	const writers, each = 12, 15
	var wg sync.WaitGroup
	errc := make(chan error, writers*each)
	for w := range writers {
		a := aaistest.NewAuthority(t, stores[w%3], clock)
		wg.Go(func() {
			for i := range each {
				r := aaistest.Request(t, clock.Now(), fmt.Sprintf("c%d_%d", w, i))
				if _, created, err := a.Create(ctx, r); err != nil || !created {
					errc <- fmt.Errorf("create %s: %v, %v", r.ID, created, err)
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	const total = writers * each
	p := aaistest.CheckLog(t, stores[0], total)
	seen := map[string]bool{}
	for _, e := range p.Events {
		if e.Type != aais.TypeRequested || seen[e.Request.ID] {
			t.Fatalf("event %d: %s for %v (duplicate or wrong type)", e.Sequence, e.Type, e.Request)
		}
		seen[e.Request.ID] = true
		st, err := stores[e.Sequence%3].RequestState(ctx, e.Request.ID)
		if err != nil || st.Request.Event.Sequence != e.Sequence {
			t.Fatalf("%s: stored at %d, logged at %d (%v)", e.Request.ID, st.Request.Event.Sequence, e.Sequence, err)
		}
	}
	pending, asOf, err := stores[1].Pending(ctx)
	if err != nil || asOf != total || len(pending) != total {
		t.Fatalf("Pending: %d as of %d, %v", len(pending), asOf, err)
	}
	for i, rec := range pending {
		if rec.Event.Sequence != uint64(i+1) {
			t.Fatalf("Pending out of creation order: %d at %d", rec.Event.Sequence, i)
		}
	}
}

// Four Opens racing on a new schema apply each migration once and agree on
// one identity; opening again changes nothing.
func TestMigrationsConcurrent(t *testing.T) {
	ctx := t.Context()
	schema := pgtest.Schema(t)
	const n = 4
	ids := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			s, err := pgstore.Open(ctx, pgtest.DSN(t), &pgstore.Options{Schema: schema})
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			ids[i], errs[i] = s.ID(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		if ids[i] == "" || ids[i] != ids[0] {
			t.Fatalf("opens got ids %q and %q", ids[0], ids[i])
		}
	}
	c := rawConn(t, schema)
	if got := count(t, c, "schema_migrations"); got != pgstore.SchemaVersion() || got < 1 {
		t.Fatalf("schema_migrations has %d rows, want %d", got, pgstore.SchemaVersion())
	}
	if got := count(t, c, "meta"); got != 1 {
		t.Fatalf("meta has %d rows", got)
	}
	s := open(t, schema)
	if id, _ := s.ID(ctx); id != ids[0] {
		t.Fatalf("id changed on reopen: %s -> %s", ids[0], id)
	}
	if got := count(t, c, "schema_migrations"); got != pgstore.SchemaVersion() {
		t.Fatalf("schema_migrations has %d rows after reopen", got)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	schema := pgtest.Schema(t)
	open(t, schema).Close()
	exec(t, rawConn(t, schema), "INSERT INTO schema_migrations (version, name) VALUES (999, 'future')")
	s, err := pgstore.Open(t.Context(), pgtest.DSN(t), &pgstore.Options{Schema: schema})
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a schema newer than the build")
	}
	if !errors.Is(err, pgstore.ErrSchemaTooNew) {
		t.Fatalf("Open: %v, want ErrSchemaTooNew", err)
	}
}

func TestMissingIdentityRefused(t *testing.T) {
	schema := pgtest.Schema(t)
	open(t, schema).Close()
	exec(t, rawConn(t, schema), "DELETE FROM meta")
	if s, err := pgstore.Open(t.Context(), pgtest.DSN(t), &pgstore.Options{Schema: schema}); err == nil {
		s.Close()
		t.Fatal("Open accepted a store without its identity")
	}
}

// Stores on different schemas of one database are independent streams.
func TestSchemasIndependent(t *testing.T) {
	ctx := t.Context()
	s1, s2 := open(t, pgtest.Schema(t)), open(t, pgtest.Schema(t))
	id1, _ := s1.ID(ctx)
	id2, _ := s2.ID(ctx)
	if id1 == "" || id1 == id2 || s1.Channel() == s2.Channel() {
		t.Fatalf("ids %q %q, channels %q %q", id1, id2, s1.Channel(), s2.Channel())
	}
	clock := aaistest.NewClock(aaistest.Start)
	if _, _, err := aaistest.NewAuthority(t, s1, clock).Create(ctx, aaistest.Request(t, clock.Now(), "1")); err != nil {
		t.Fatal(err)
	}
	aaistest.CheckLog(t, s1, 1)
	aaistest.CheckLog(t, s2, 0)
}

// waitBlocked waits until a backend other than blocker waits for a lock
// blocker holds, and returns its pid.
func waitBlocked(t *testing.T, admin *pgx.Conn, blocker uint32, not uint32) uint32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var pid uint32
		err := admin.QueryRow(t.Context(),
			"SELECT pid FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)) AND pid <> $2::int LIMIT 1",
			int64(blocker), int64(not)).Scan(&pid)
		if err == nil {
			return pid
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no backend ever waited for the lock")
	return 0
}

func terminate(t *testing.T, admin *pgx.Conn, pid uint32) {
	t.Helper()
	var ok bool
	if err := admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1::int, 10000)", int64(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v, %v", pid, ok, err)
	}
}

// A writer killed in the middle of a resolution (request row locked,
// sequence taken, event and resolution inserted, not committed) leaves
// nothing behind. A store writer queued behind it survives being killed
// itself (it retries on a new connection) and resolves cleanly, at the
// sequence the killed writer had taken, once the killed writer is gone.
func TestKilledWriter(t *testing.T) {
	ctx := t.Context()
	schema := pgtest.Schema(t)
	s := open(t, schema)
	clock := aaistest.NewClock(aaistest.Start)
	r := aaistest.Request(t, clock.Now(), "1")
	if _, _, err := aaistest.NewAuthority(t, s, clock).Create(ctx, r); err != nil {
		t.Fatal(err)
	}

	// The half-written resolution, as ResolveIfPending would write it.
	raw := rawConn(t, schema)
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var resolved bool
	if err := tx.QueryRow(ctx, "SELECT resolved FROM requests WHERE id = $1 FOR UPDATE", r.ID).Scan(&resolved); err != nil || resolved {
		t.Fatalf("lock request: %v, %v", resolved, err)
	}
	var latest int64
	if err := tx.QueryRow(ctx, "SELECT latest_sequence FROM meta FOR UPDATE").Scan(&latest); err != nil || latest != 1 {
		t.Fatalf("lock meta: %d, %v", latest, err)
	}
	half := resolvedEvent(t, r, clock.Now())
	half.Sequence = 2
	hb, err := aais.Marshal(half)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO events (sequence, type, request_id, json) VALUES (2, 'approval.resolved', $1, $2)",
		"INSERT INTO resolutions (request_id, decision_fingerprint, event, sequence) VALUES ($1, '', $2, 2)",
	} {
		if _, err := tx.Exec(ctx, q, r.ID, hb); err != nil {
			t.Fatal(err)
		}
	}
	rawPID := raw.PgConn().PID()

	// The store's writer queues behind it.
	rec := aais.ResolutionRecord{Event: resolvedEvent(t, r, clock.Now().Add(time.Second))}
	type result struct {
		stored   aais.ResolutionRecord
		resolved bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		stored, resolved, err := s.ResolveIfPending(ctx, rec)
		done <- result{stored, resolved, err}
	}()
	admin := rawConn(t, schema)
	first := waitBlocked(t, admin, rawPID, 0)
	// Kill the queued store writer: it retries on a new connection.
	terminate(t, admin, first)
	second := waitBlocked(t, admin, rawPID, first)
	if second == first {
		t.Fatal("the store writer did not come back on a new connection")
	}
	select {
	case res := <-done:
		t.Fatalf("ResolveIfPending returned while the request was locked: %+v", res)
	default:
	}
	// Kill the half-written writer: its transaction is rolled back.
	terminate(t, admin, rawPID)

	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ResolveIfPending did not finish after the killed writer's locks were released")
	}
	if res.err != nil || !res.resolved {
		t.Fatalf("ResolveIfPending: resolved %v, %v", res.resolved, res.err)
	}
	if res.stored.Event.Sequence != 2 || res.stored.Event.Resolution.ID != rec.Event.Resolution.ID {
		t.Fatalf("stored resolution %s at %d, want %s at 2", res.stored.Event.Resolution.ID, res.stored.Event.Sequence, rec.Event.Resolution.ID)
	}
	p := aaistest.CheckLog(t, s, 2)
	if p.Events[1].Resolution.ID != rec.Event.Resolution.ID {
		t.Fatal("the log holds the killed writer's resolution")
	}
	if n := count(t, admin, "resolutions"); n != 1 {
		t.Fatalf("%d resolutions", n)
	}
	st, err := s.RequestState(ctx, r.ID)
	if err != nil || st.Pending() || aaistest.Wire(t, st.Resolution.Event) != aaistest.Wire(t, res.stored.Event) {
		t.Fatalf("state after the killed writer: %+v, %v", st, err)
	}
	// Asking again is answered with the stored resolution.
	again, ok, err := s.ResolveIfPending(ctx, aais.ResolutionRecord{Event: resolvedEvent(t, r, clock.Now().Add(2*time.Second))})
	if err != nil || ok || aaistest.Wire(t, again.Event) != aaistest.Wire(t, res.stored.Event) {
		t.Fatalf("second ResolveIfPending: %v, %v", ok, err)
	}
}

// next receives a notification or fails after a generous deadline (the
// assertion is delivery, not latency).
func next(t *testing.T, sub <-chan pgstore.Notification) pgstore.Notification {
	t.Helper()
	select {
	case n, ok := <-sub:
		if !ok {
			t.Fatal("subscription closed")
		}
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no notification")
	}
	return pgstore.Notification{}
}

// waitFor receives until a notification reaches seq (and, when resync is
// set, until a resync has been seen), and returns the last one.
func waitFor(t *testing.T, sub <-chan pgstore.Notification, seq uint64, resync bool) pgstore.Notification {
	t.Helper()
	sawResync := false
	for {
		n := next(t, sub)
		sawResync = sawResync || n.Resync
		if n.Sequence >= seq && (sawResync || !resync) {
			return n
		}
	}
}

// A subscriber on replica B hears of a request created on replica A, and
// reads it from B.
func TestSubscribeAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	st := replicas(t, 2)
	a, b := st[0], st[1]
	sub, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := a.ID(ctx)
	if n := next(t, sub); !n.Resync || n.Sequence != 0 || n.StoreID != id {
		t.Fatalf("first notification %+v, want a resync at 0 of %s", n, id)
	}
	clock := aaistest.NewClock(aaistest.Start)
	r := aaistest.Request(t, clock.Now(), "1")
	if _, _, err := aaistest.NewAuthority(t, a, clock).Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	n := waitFor(t, sub, 1, false)
	if n.StoreID != id || n.Resync {
		t.Fatalf("notification %+v", n)
	}
	p, err := b.EventsAfter(ctx, 0, 0)
	if err != nil || len(p.Events) != 1 || p.Events[0].Request.ID != r.ID {
		t.Fatalf("B's log after the notification: %+v, %v", p, err)
	}
	if _, err := b.RequestState(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	// A reset is announced with the new identity.
	if err := a.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		n = next(t, sub)
		if n.StoreID != id {
			break
		}
	}
	if newID, _ := b.ID(ctx); n.StoreID != newID || n.Sequence != 0 {
		t.Fatalf("reset notification %+v, store id %s", n, newID)
	}
	// Closing the Store ends the subscription.
	b.Close()
	for range sub {
	}
}

// A subscriber whose connection is killed reconnects, announces a resync,
// and the receiver catches up from the log: notifications are hints, the
// log is the truth. A receiver that unsubscribed and subscribes again does
// the same.
func TestSubscribeCatchUp(t *testing.T) {
	ctx := t.Context()
	schema := pgtest.Schema(t)
	a := open(t, schema)
	// B's connections carry a name of their own, so that the listener
	// found below is B's, not one of another test running at once.
	app := "custos-test-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	dsn := cfg.ConnString() + " application_name=" + app
	if strings.Contains(cfg.ConnString(), "://") {
		u, err := url.Parse(cfg.ConnString())
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("application_name", app)
		u.RawQuery = q.Encode()
		dsn = u.String()
	}
	b, err := pgstore.Open(ctx, dsn, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	clock := aaistest.NewClock(aaistest.Start)
	auth := aaistest.NewAuthority(t, a, clock)
	sub, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	applied := next(t, sub).Sequence // 0

	admin := rawConn(t, b.Schema())
	var pid uint32
	// The only listener of B; its last statement read meta.
	err = admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database() AND query LIKE '%FROM meta%'`,
		app+"-listen").Scan(&pid)
	if err != nil {
		t.Fatalf("finding the listener: %v", err)
	}
	terminate(t, admin, pid)
	// Written while B's listener is down or reconnecting.
	const n = 5
	for i := range n {
		if _, _, err := auth.Create(ctx, aaistest.Request(t, clock.Now(), fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	got := waitFor(t, sub, n, true)
	if got.Sequence != n {
		t.Fatalf("caught up to %d, want %d", got.Sequence, n)
	}
	p, err := b.EventsAfter(ctx, applied, 0)
	if err != nil || p.Gap || len(p.Events) != n || p.Events[0].Sequence != applied+1 {
		t.Fatalf("catch-up page: %+v, %v", p, err)
	}
	applied = p.Latest

	// Unsubscribe, miss writes, subscribe again.
	sctx, cancel := context.WithCancel(ctx)
	sub2, err := b.Subscribe(sctx)
	if err != nil {
		t.Fatal(err)
	}
	next(t, sub2)
	cancel()
	for range sub2 {
	}
	for i := range n {
		if _, _, err := auth.Create(ctx, aaistest.Request(t, clock.Now(), fmt.Sprint("late", i))); err != nil {
			t.Fatal(err)
		}
	}
	sub3, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first := next(t, sub3); !first.Resync || first.Sequence != applied+n {
		t.Fatalf("resubscribed: %+v, want a resync at %d", first, applied+n)
	}
	p, err = b.EventsAfter(ctx, applied, 0)
	if err != nil || len(p.Events) != n {
		t.Fatalf("catch-up after resubscribing: %d events, %v", len(p.Events), err)
	}
}

// After a reset a presenter resuming from its old sequence sees a gap and
// a new store id, and sequences start again at 1.
func TestResetReportsGap(t *testing.T) {
	ctx := t.Context()
	st := replicas(t, 2)
	s, other := st[0], st[1]
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
	p, err := other.EventsAfter(ctx, 0, 0)
	if err != nil || p.Gap || p.Latest != 0 || len(p.Events) != 0 || p.StoreID == old || p.StoreID == "" {
		t.Fatalf("after reset, EventsAfter(0) = %+v, %v; want empty, a new store id", p, err)
	}
	if p, _ = other.EventsAfter(ctx, 3, 0); !p.Gap {
		t.Fatal("after reset, EventsAfter(3) reports no gap")
	}
	if pending, asOf, err := other.Pending(ctx); err != nil || len(pending) != 0 || asOf != 0 {
		t.Fatalf("after reset, Pending = %d as of %d, %v", len(pending), asOf, err)
	}
	ev, created, err := aaistest.NewAuthority(t, other, clock).Create(ctx, aaistest.Request(t, clock.Now(), "0"))
	if err != nil || !created || ev.Sequence != 1 {
		t.Fatalf("Create after reset: sequence %d, %v, %v", ev.Sequence, created, err)
	}
}

// Writes with a context cancelled before they start write nothing.
func TestCancelledContextWritesNothing(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgtest.Schema(t))
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
	rec := aais.ResolutionRecord{Event: resolvedEvent(t, r, clock.Now())}
	if _, _, err := s.ResolveIfPending(cancelled, rec); !errors.Is(err, context.Canceled) {
		t.Fatalf("ResolveIfPending: err = %v, want context.Canceled", err)
	}
	if _, err := s.Import(cancelled, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Import: err = %v, want context.Canceled", err)
	}
	if err := s.Reset(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reset: err = %v, want context.Canceled", err)
	}
	if p := aaistest.CheckLog(t, s, 1); p.StoreID != id {
		t.Fatal("cancelled Reset changed the store id")
	}
	if st, err := s.RequestState(ctx, r.ID); err != nil || !st.Pending() {
		t.Fatalf("request resolved despite cancelled contexts: %v", err)
	}
	if _, err := s.RequestState(ctx, "apr_2"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("request created despite a cancelled context: %v", err)
	}
}

func TestSequenceExhausted(t *testing.T) {
	ctx := t.Context()
	schema := pgtest.Schema(t)
	s := open(t, schema)
	clock := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, clock)
	r := aaistest.Request(t, clock.Now(), "1")
	if _, _, err := a.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	// Pretend the log reached the end.
	exec(t, rawConn(t, schema), "UPDATE meta SET latest_sequence = $1", int64(aais.MaxSequence))
	if _, _, err := a.Create(ctx, aaistest.Request(t, clock.Now(), "2")); !errors.Is(err, aais.ErrSequenceExhausted) {
		t.Fatalf("Create: err = %v, want ErrSequenceExhausted", err)
	}
	if _, _, err := s.ResolveIfPending(ctx, aais.ResolutionRecord{Event: resolvedEvent(t, r, clock.Now())}); !errors.Is(err, aais.ErrSequenceExhausted) {
		t.Fatalf("ResolveIfPending: err = %v, want ErrSequenceExhausted", err)
	}
	if st, err := s.RequestState(ctx, r.ID); err != nil || !st.Pending() {
		t.Fatalf("request resolved without an event: %v", err)
	}
	if _, err := s.RequestState(ctx, "apr_2"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("request created without an event: %v", err)
	}
}

func requestRecord(t testing.TB, r *aais.Request, now time.Time, fp string) aais.RequestRecord {
	t.Helper()
	m, err := aais.NewMessage(aais.Header{OccurredAt: now, Stream: "test"}, r)
	if err != nil {
		t.Fatal(err)
	}
	return aais.RequestRecord{Event: m, Fingerprint: fp}
}

// Import creates what is new, skips what exists, and writes nothing at all
// when one record conflicts.
func TestImport(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgtest.Schema(t))
	clock := aaistest.NewClock(aaistest.Start)
	var recs []aais.RequestRecord
	for i := range 5 {
		recs = append(recs, requestRecord(t, aaistest.Request(t, clock.Now(), fmt.Sprint(i)), clock.Now(), fmt.Sprint("fp", i)))
	}
	recs[2].Owner = &aais.ProcessIdentity{PID: 42, HostID: "host"}
	if n, err := s.Import(ctx, recs[:3]); err != nil || n != 3 {
		t.Fatalf("Import: %d, %v", n, err)
	}
	// Repeats (already stored, or twice in one call) are skipped.
	if n, err := s.Import(ctx, append(recs, recs[4])); err != nil || n != 2 {
		t.Fatalf("Import again: %d, %v", n, err)
	}
	aaistest.CheckLog(t, s, 5)
	if st, err := s.RequestState(ctx, "apr_2"); err != nil || st.Request.Owner == nil || st.Request.Owner.PID != 42 {
		t.Fatalf("imported owner: %+v, %v", st.Request.Owner, err)
	}
	// A conflict anywhere: nothing written.
	bad := requestRecord(t, aaistest.Request(t, clock.Now(), "1"), clock.Now(), "other")
	fresh := requestRecord(t, aaistest.Request(t, clock.Now(), "9"), clock.Now(), "fp9")
	if _, err := s.Import(ctx, []aais.RequestRecord{fresh, bad}); !errors.Is(err, aais.ErrConflict) {
		t.Fatalf("Import with a conflict: %v", err)
	}
	if _, err := s.RequestState(ctx, "apr_9"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("Import with a conflict wrote a record: %v", err)
	}
	aaistest.CheckLog(t, s, 5)
	// An automatic approval by an unknown rule: nothing written.
	auto := requestRecord(t, aaistest.Request(t, clock.Now(), "10"), clock.Now(), "fp10")
	res := resolvedEvent(t, auto.Event.Request, clock.Now())
	res.Resolution.Outcome = aais.OutcomeApproved
	auto.Resolution = &aais.ResolutionRecord{Event: res, ByRule: "rul_missing"}
	if _, err := s.Import(ctx, []aais.RequestRecord{fresh, auto}); err == nil {
		t.Fatal("Import accepted an approval by an unknown rule")
	}
	aaistest.CheckLog(t, s, 5)
	pending, asOf, err := s.Pending(ctx)
	if err != nil || len(pending) != 5 || asOf != 5 {
		t.Fatalf("Pending: %d as of %d, %v", len(pending), asOf, err)
	}
}

func TestReturnsCopies(t *testing.T) {
	ctx := t.Context()
	s := open(t, pgtest.Schema(t))
	clock := aaistest.NewClock(aaistest.Start)
	r := aaistest.Request(t, clock.Now(), "1")
	ev, _, err := aaistest.NewAuthority(t, s, clock).Create(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	ev.Request.ID = "changed"
	st, err := s.RequestState(ctx, r.ID)
	if err != nil || st.Request.Event.Request.ID != r.ID {
		t.Fatalf("stored request changed through a returned pointer: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dsn := pgtest.DSN(t)
	if _, err := pgstore.Open(t.Context(), dsn, &pgstore.Options{Schema: string(make([]byte, 64))}); err == nil {
		t.Fatal("Open accepted a 64-byte schema name")
	}
	if _, err := pgstore.Open(t.Context(), "postgres://%zz", nil); err == nil {
		t.Fatal("Open accepted a malformed DSN")
	}
}

// A presenter following the stream on replica B sees a request created on
// replica A although its poll is an hour: Follow reads the log when the
// store announces a change (LISTEN/NOTIFY). The delay is logged, not
// asserted (figures go in docs/benchmarks.md).
func TestFollowAcrossReplicasIsPrompt(t *testing.T) {
	st := replicas(t, 2)
	a, b := st[0], st[1]
	clock := aaistest.NewClock(aaistest.Start)
	authA := aaistest.NewAuthority(t, a, clock)
	authB := aaistest.NewAuthority(t, b, clock)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	seen := make(chan string, 16)
	go func() {
		_ = authB.Follow(ctx, 0, false, time.Hour, aais.Follower{Message: func(m *aais.Message) error {
			if m.Type == aais.TypeRequested {
				seen <- m.Request.ID
			}
			return nil
		}})
	}()
	time.Sleep(200 * time.Millisecond) // the snapshot and the LISTEN are in place
	var took []time.Duration
	for i := range 5 {
		r := aaistest.Request(t, clock.Now(), strconv.Itoa(i))
		start := time.Now()
		if _, _, err := authA.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-seen:
			if id != r.ID {
				t.Fatalf("saw %s, want %s", id, r.ID)
			}
			took = append(took, time.Since(start))
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d never reached the follower on the other replica (its poll is an hour)", i)
		}
	}
	t.Logf("cross-replica delivery: %v", took)
}

// TestQuorum runs the M-of-N kit; the race decides through three Stores
// with pools of their own on one schema: three replicas.
func TestQuorum(t *testing.T) {
	pgtest.DSN(t)
	aaistest.RunQuorum(t, aaistest.Backend{
		New:    func(t *testing.T) aais.Store { return open(t, pgtest.Schema(t)) },
		Reopen: reopen,
	})
}
