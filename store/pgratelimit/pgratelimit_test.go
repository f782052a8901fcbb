package pgratelimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgratelimit"
	"github.com/custos-runtime/custos/store/pgstore"
)

// The gateway takes the limiter for its own.
var _ gateway.RateLimiter = (*pgratelimit.Limiter)(nil)

func open(t testing.TB, schema string, r gateway.RateLimit, o *pgratelimit.Options) *pgratelimit.Limiter {
	t.Helper()
	l, err := pgratelimit.Open(context.Background(), pgtest.SchemaDSN(t, schema), pgratelimit.Rate(r), o)
	if err != nil {
		t.Fatalf("Open(%s): %v", schema, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if l.Schema() != schema {
		t.Fatalf("Schema() = %q, want %q", l.Schema(), schema)
	}
	return l
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

func allow(t *testing.T, l gateway.RateLimiter, sender string, now time.Time) (bool, time.Duration) {
	t.Helper()
	ok, wait, err := l.Allow(t.Context(), sender, now)
	if err != nil {
		t.Fatalf("Allow(%s, %v): %v", sender, now, err)
	}
	return ok, wait
}

// The cases of gateway's TestLimiter, on the shared limiter.
func TestLimiter(t *testing.T) {
	l := open(t, pgtest.Schema(t), gateway.RateLimit{PerSecond: 2, Burst: 3}, nil)
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := allow(t, l, "a", t0); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	ok, wait := allow(t, l, "a", t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("over the burst: %v, wait %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := allow(t, l, "b", t0); !ok {
		t.Fatal("another sender's allowance was used up")
	}
	if ok, _ := allow(t, l, "a", t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("a refilled token was refused")
	}
	if ok, _ := allow(t, l, "a", t0.Add(500*time.Millisecond)); ok {
		t.Fatal("more than the refill was granted")
	}
	// Refill never exceeds the burst.
	if ok, _ := allow(t, l, "a", t0.Add(time.Hour)); !ok {
		t.Fatal("refused after an hour")
	}
	for range 2 {
		allow(t, l, "a", t0.Add(time.Hour))
	}
	if ok, _ := allow(t, l, "a", t0.Add(time.Hour)); ok {
		t.Fatal("the bucket held more than the burst")
	}
}

// A zero limit allows everything, without a database round trip.
func TestZeroLimit(t *testing.T) {
	schema := pgtest.Schema(t)
	t0 := time.Unix(1000, 0)
	for _, r := range []gateway.RateLimit{{}, {PerSecond: 1}, {Burst: 3}, {PerSecond: -1, Burst: 3}} {
		l := open(t, schema, r, nil)
		for range 5 {
			if ok, _ := allow(t, l, "a", t0); !ok {
				t.Fatalf("%+v refused", r)
			}
		}
		_ = l.Close()
		if ok, _, err := l.Allow(t.Context(), "a", t0); !ok || err != nil {
			t.Fatalf("%+v after Close: %v, %v", r, ok, err)
		}
	}
	if n := count(t, rawConn(t), schema, "rate_buckets"); n != 0 {
		t.Fatalf("a zero limit wrote %d rows", n)
	}
}

// The in-memory limiter and the shared one agree, request by request, on a
// sequence of uneven times.
func TestMatchesMemory(t *testing.T) {
	r := gateway.RateLimit{PerSecond: 3, Burst: 4}
	l := open(t, pgtest.Schema(t), r, nil)
	mem := gateway.NewMemoryRateLimiter(r)
	now := time.Unix(5000, 0)
	steps := []time.Duration{0, 0, 0, 0, 0, 100, 250, 0, 333, 1000, 10, 10, 10, 10, 2000, 0, 0, 0, 0, 0, 90}
	for i, ms := range steps {
		now = now.Add(time.Duration(ms) * time.Millisecond)
		gotOK, gotWait := allow(t, l, "s", now)
		wantOK, wantWait := allow(t, mem, "s", now)
		d := gotWait - wantWait
		if gotOK != wantOK || d > time.Microsecond || d < -time.Microsecond {
			t.Fatalf("step %d: shared %v/%v, memory %v/%v", i, gotOK, gotWait, wantOK, wantWait)
		}
	}
}

// Three limiters (three pools: three replicas) on one schema share one
// sender's budget: of 3×burst concurrent calls, exactly burst are allowed,
// and the refill afterwards is shared too.
func TestReplicasShareBudget(t *testing.T) {
	schema := pgtest.Schema(t)
	const burst = 10
	r := gateway.RateLimit{PerSecond: 1, Burst: burst}
	var lims []*pgratelimit.Limiter
	for range 3 {
		lims = append(lims, open(t, schema, r, nil))
	}
	t0 := time.Unix(10000, 0)
	for round := range 5 {
		now := t0.Add(time.Duration(round) * time.Hour) // refilled to the burst
		var allowed, refused atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 3 * burst {
			wg.Go(func() {
				<-start
				ok, wait, err := lims[i%3].Allow(t.Context(), "shared", now)
				if err != nil {
					t.Errorf("Allow: %v", err)
					return
				}
				if ok {
					allowed.Add(1)
				} else {
					refused.Add(1)
					if wait != time.Second {
						t.Errorf("refused with wait %v, want 1s", wait)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if allowed.Load() != burst || refused.Load() != 2*burst {
			t.Fatalf("round %d: %d allowed, %d refused of %d; want exactly %d allowed", round, allowed.Load(), refused.Load(), 3*burst, burst)
		}
		// One second later one token is back, for whichever replica
		// asks first.
		if ok, _ := allow(t, lims[1], "shared", now.Add(time.Second)); !ok {
			t.Fatal("the refilled token was refused")
		}
		if ok, _ := allow(t, lims[2], "shared", now.Add(time.Second)); ok {
			t.Fatal("a replica granted a token another had taken")
		}
	}
}

// A replica whose clock lags neither rewinds the bucket nor gets the
// same interval refilled twice.
func TestClockNeverRewinds(t *testing.T) {
	schema := pgtest.Schema(t)
	r := gateway.RateLimit{PerSecond: 1, Burst: 2}
	ahead, behind := open(t, schema, r, nil), open(t, schema, r, nil)
	t0 := time.Unix(20000, 0)
	allow(t, ahead, "c", t0)
	allow(t, ahead, "c", t0) // empty at t0
	// The lagging replica, 1s behind: no refill for it.
	if ok, wait := allow(t, behind, "c", t0.Add(-time.Second)); ok || wait != time.Second {
		t.Fatalf("lagging replica: %v, %v", ok, wait)
	}
	// At t0+1s there is one token, not two.
	if ok, _ := allow(t, ahead, "c", t0.Add(time.Second)); !ok {
		t.Fatal("refill refused")
	}
	if ok, _ := allow(t, behind, "c", t0.Add(time.Second)); ok {
		t.Fatal("a lagging clock refilled an interval twice")
	}
}

// Idle buckets (refilled to the burst) are pruned, in batches; busy ones
// stay.
func TestPrune(t *testing.T) {
	schema := pgtest.Schema(t)
	r := gateway.RateLimit{PerSecond: 1, Burst: 5}
	l := open(t, schema, r, &pgratelimit.Options{PruneInterval: -1, PruneBatch: 3, PruneMaxBatches: 2})
	t0 := time.Unix(30000, 0)
	senders := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}
	for _, s := range senders {
		allow(t, l, s, t0)
	}
	allow(t, l, "busy", t0.Add(time.Minute))
	c := rawConn(t)
	if n, err := l.Prune(t.Context(), t0.Add(5*time.Second)); err != nil || n != 0 {
		t.Fatalf("Prune before the buckets refilled: %d, %v", n, err)
	}
	later := t0.Add(time.Minute)
	if n, err := l.Prune(t.Context(), later); err != nil || n != 6 {
		t.Fatalf("first run: %d, %v; want 6 (2 batches of 3)", n, err)
	}
	if n, err := l.Prune(t.Context(), later); err != nil || n != 2 {
		t.Fatalf("second run: %d, %v; want 2", n, err)
	}
	if got := count(t, c, schema, "rate_buckets"); got != 1 {
		t.Fatalf("%d rows left, want the busy one", got)
	}
	// A pruned sender starts again with a full bucket.
	for i := range 5 {
		if ok, _ := allow(t, l, "s0", later); !ok {
			t.Fatalf("request %d of a pruned sender refused", i)
		}
	}
	if ok, _ := allow(t, l, "s0", later); ok {
		t.Fatal("more than the burst after pruning")
	}
}

// Allow prunes in the background, at most once per interval.
func TestBackgroundPrune(t *testing.T) {
	schema := pgtest.Schema(t)
	l := open(t, schema, gateway.RateLimit{PerSecond: 10, Burst: 1}, &pgratelimit.Options{PruneInterval: 50 * time.Millisecond})
	t0 := time.Unix(40000, 0)
	for _, s := range []string{"a", "b", "c"} {
		allow(t, l, s, t0)
	}
	c := rawConn(t)
	deadline := time.Now().Add(10 * time.Second)
	for now := t0.Add(time.Hour); ; now = now.Add(time.Second) {
		allow(t, l, "trigger", now)
		if count(t, c, schema, "rate_buckets") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("idle buckets were not pruned in the background")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Errors fail the request closed.
func TestFailsClosed(t *testing.T) {
	schema := pgtest.Schema(t)
	l := open(t, schema, gateway.RateLimit{PerSecond: 1, Burst: 1}, nil)
	t0 := time.Unix(50000, 0)
	cctx, cancel := context.WithCancel(t.Context())
	cancel()
	if ok, _, err := l.Allow(cctx, "a", t0); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, %v", ok, err)
	}
	c := rawConn(t)
	if _, err := c.Exec(t.Context(), "DROP TABLE "+pgx.Identifier{schema, "rate_buckets"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := l.Allow(t.Context(), "a", t0); ok || err == nil {
		t.Fatalf("without the table: %v, %v", ok, err)
	}
	_ = l.Close()
	if ok, _, err := l.Allow(t.Context(), "a", t0); ok || err == nil {
		t.Fatalf("after Close: %v, %v", ok, err)
	}
	if _, err := pgratelimit.Open(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", pgratelimit.Rate{}, nil); err == nil {
		t.Fatal("Open on a closed port succeeded")
	}
}

// Replicas starting together apply the migration once; a newer schema is
// refused; the limiter lives beside the approval store, on its pool too.
func TestMigrationsAndStore(t *testing.T) {
	if pgratelimit.MigrationLockKey != pgstore.MigrationLockKey {
		t.Fatal("the migration lock key differs from pgstore's")
	}
	schema := pgtest.Schema(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	var st *pgstore.Store
	var stErr error
	wg.Go(func() { st, stErr = pgstore.Open(ctx, pgtest.DSN(t), &pgstore.Options{Schema: schema}) })
	for i := range errs {
		wg.Go(func() {
			l, err := pgratelimit.Open(ctx, pgtest.SchemaDSN(t, schema), pgratelimit.Rate{PerSecond: 1, Burst: 1}, nil)
			if err == nil {
				_ = l.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if stErr != nil {
		t.Fatalf("store: %v", stErr)
	}
	defer st.Close()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	c := rawConn(t)
	if got := count(t, c, schema, "rate_limit_migrations"); got != pgratelimit.SchemaVersion() || got < 1 {
		t.Fatalf("%d migrations recorded, want %d", got, pgratelimit.SchemaVersion())
	}
	l, err := pgratelimit.New(ctx, st.Pool(), pgratelimit.Rate{PerSecond: 1, Burst: 1}, &pgratelimit.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := allow(t, l, "x", time.Unix(1, 0)); !ok {
		t.Fatal("refused")
	}
	_ = l.Close()
	if _, err := st.ID(ctx); err != nil {
		t.Fatalf("closing the limiter closed the store's pool: %v", err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "rate_limit_migrations"}.Sanitize()+" (version, name) VALUES ($1, 'future')", pgratelimit.SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := pgratelimit.Open(ctx, pgtest.SchemaDSN(t, schema), pgratelimit.Rate{}, nil); !errors.Is(err, pgratelimit.ErrSchemaTooNew) {
		t.Fatalf("newer schema: %v", err)
	}
}
