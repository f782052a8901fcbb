package pgexchange_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/exchange/exchangetest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgexchange"
	"github.com/custos-runtime/custos/store/pgstore"
)

func open(t testing.TB, o *pgexchange.Options) *pgexchange.Store {
	t.Helper()
	s, err := pgexchange.Open(context.Background(), pgtest.DSN(t), o)
	if err != nil {
		t.Fatalf("Open(%s): %v", o.Schema, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func backend(maxConns int32) exchangetest.Backend {
	opts := func(schema string, c exchangetest.Config) *pgexchange.Options {
		return &pgexchange.Options{Schema: schema, Instance: c.Instance, Now: c.Now, MaxConns: maxConns}
	}
	return exchangetest.Backend{
		New: func(t *testing.T, c exchangetest.Config) exchange.Backend {
			return open(t, opts(pgtest.Schema(t), c))
		},
		Reopen: func(t *testing.T, b exchange.Backend, c exchangetest.Config) exchange.Backend {
			return open(t, opts(b.(*pgexchange.Store).Schema(), c))
		},
	}
}

func TestConformance(t *testing.T) {
	pgtest.DSN(t)
	exchangetest.Run(t, backend(0))
}

// A pool of one connection must not deadlock: a transaction never waits
// for a second pooled connection.
func TestConformanceOneConnection(t *testing.T) {
	pgtest.DSN(t)
	exchangetest.Run(t, backend(1))
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

// replicas opens n Stores, each with its own pool, on one new schema.
func replicas(t *testing.T, n int) []*pgexchange.Store {
	schema := pgtest.Schema(t)
	out := make([]*pgexchange.Store, n)
	for i := range out {
		out[i] = open(t, &pgexchange.Options{Schema: schema, Instance: fmt.Sprint("replica_", i)})
	}
	return out
}

// Three replicas racing: 100 concurrent Claims of one exchange have one
// winner, and concurrent Creates of one (sender, message id) create one.
func TestReplicasRace(t *testing.T) {
	rs := replicas(t, 3)
	ctx := t.Context()
	for round := range 3 {
		x := exchangetest.InState(t, rs[0], fmt.Sprint("claim", round), exchange.Approved)
		var (
			wg     sync.WaitGroup
			wins   atomic.Int32
			winner atomic.Value
		)
		start := make(chan struct{})
		for i := range 100 {
			s := rs[i%3]
			wg.Go(func() {
				<-start
				got, ok, err := s.Claim(ctx, x.ID, exchange.Received, exchange.Approved)
				if err != nil {
					t.Error(err)
					return
				}
				if got.State != exchange.Executing {
					t.Errorf("state %s", got.State)
				}
				if ok {
					wins.Add(1)
					winner.Store(s.Instance())
				}
			})
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners, want 1", round, wins.Load())
		}
		got, err := rs[2].Get(ctx, x.ID)
		if err != nil || got.State != exchange.Executing || got.ClaimedBy != winner.Load() {
			t.Fatalf("%+v %v (winner %v)", got, err, winner.Load())
		}
	}
	for round := range 3 {
		var (
			wg      sync.WaitGroup
			created atomic.Int32
			mu      sync.Mutex
			ids     = map[string]bool{}
		)
		start := make(chan struct{})
		req := exchangetest.Request(fmt.Sprint("create", round))
		req.Idempotency = &exchange.Idempotency{From: "a", To: "b", PayloadType: "t", Key: fmt.Sprint("k", round),
			Fingerprint: "f", ExpiresAt: time.Now().Add(time.Hour)}
		for i := range 60 {
			s := rs[i%3]
			wg.Go(func() {
				<-start
				r := req
				if i%2 == 1 {
					// Another message id, the same idempotency key.
					r.MessageID += "_retry"
				}
				got, c, err := s.Create(ctx, r)
				if err != nil {
					t.Error(err)
					return
				}
				if c {
					created.Add(1)
				}
				mu.Lock()
				ids[got.ID] = true
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		// Either the original or the retry message id was first; the
		// other is answered from the key, or (once its own message id
		// is recorded) from that: one exchange in all.
		if created.Load() != 1 || len(ids) != 1 {
			t.Fatalf("round %d: %d created, ids %v; want 1", round, created.Load(), ids)
		}
	}
}

// Replicas taking deliveries concurrently: each due delivery is handed to
// one of them, until its lease ends.
func TestReplicasDeliveries(t *testing.T) {
	schema := pgtest.Schema(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var rs []*pgexchange.Store
	for i := range 3 {
		rs = append(rs, open(t, &pgexchange.Options{Schema: schema, Instance: fmt.Sprint("r", i), Now: clock,
			DeliveryLease: time.Minute}))
	}
	ctx := t.Context()
	const n = 60
	for i := range n {
		x := exchangetest.InState(t, rs[0], fmt.Sprint(i), exchange.PendingApproval)
		if _, _, err := rs[0].Apply(ctx, x.ID, exchange.PendingApproval, exchange.Failed, exchange.Change{
			Reply: exchangetest.FinalReply, ReplyStatus: 403,
			Deliveries: []exchange.Delivery{{URL: "https://agent.example/cb", Envelope: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		taken = map[int64]int{}
	)
	for i := range 12 {
		s := rs[i%3]
		wg.Go(func() {
			for range 5 {
				due, err := s.DueDeliveries(ctx, now, 7)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, d := range due {
					taken[d.Seq]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(taken) != n {
		t.Fatalf("%d deliveries handed out, want %d", len(taken), n)
	}
	for seq, k := range taken {
		if k != 1 {
			t.Fatalf("delivery %d handed out %d times", seq, k)
		}
	}
	// Leased: due again only when the lease ends (a replica died).
	if due, err := rs[1].DueDeliveries(ctx, now.Add(59*time.Second), 100); err != nil || len(due) != 0 {
		t.Fatalf("leased deliveries due: %d %v", len(due), err)
	}
	due, err := rs[2].DueDeliveries(ctx, now.Add(time.Minute), 100)
	if err != nil || len(due) != n || !due[0].NextAttempt.Equal(now.Add(time.Minute)) {
		t.Fatalf("after the lease: %d %v", len(due), err)
	}
	for i := 1; i < len(due); i++ {
		if due[i].Seq <= due[i-1].Seq {
			t.Fatalf("out of order: %d after %d", due[i].Seq, due[i-1].Seq)
		}
	}
}

// Concurrent timeout raisers in several replicas: one wins.
func TestReplicasMarkTimedOut(t *testing.T) {
	rs := replicas(t, 3)
	ctx := t.Context()
	x := exchangetest.InState(t, rs[0], "t", exchange.Executing)
	if _, _, err := rs[0].Apply(ctx, x.ID, exchange.Executing, exchange.Done, exchange.Change{Reply: exchangetest.FinalReply,
		ReplyStatus: 200, Review: &exchange.Review{Mode: "required_within_24h", DueAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		wins atomic.Int32
	)
	for i := range 30 {
		s := rs[i%3]
		wg.Go(func() {
			ok, err := s.MarkTimedOut(ctx, x.ID)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d winners", wins.Load())
	}
}

// The schema refuses what the Go code refuses, for writers that bypass it.
func TestSchemaEnforcesMachine(t *testing.T) {
	schema := pgtest.Schema(t)
	s := open(t, &pgexchange.Options{Schema: schema})
	c := rawConn(t, schema)
	ctx := t.Context()
	refused := func(q string, args ...any) {
		t.Helper()
		if _, err := c.Exec(ctx, q, args...); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	x := exchangetest.InState(t, s, "1", exchange.Done)
	for _, q := range []string{
		"UPDATE exchanges SET state = 'executing' WHERE id = $1",
		"UPDATE exchanges SET state = 'received' WHERE id = $1",
		"UPDATE exchanges SET reply = '\\x7b7d' WHERE id = $1",
		"DELETE FROM exchanges WHERE id = $1",
	} {
		refused(q, x.ID)
	}
	refused("TRUNCATE exchanges CASCADE")
	y := exchangetest.InState(t, s, "2", exchange.Approved)
	for _, q := range []string{
		"UPDATE exchanges SET state = 'executing', action_digest = 'other' WHERE id = $1",
		"UPDATE exchanges SET state = 'failed', sender = 'other', reply = '\\x7b7d', reply_status = 500 WHERE id = $1",
		"UPDATE exchanges SET state = 'failed', reply = NULL, reply_status = 0 WHERE id = $1",
		"UPDATE exchanges SET state = 'bogus' WHERE id = $1",
		"UPDATE exchanges SET state = 'failed', reply = '\\x7b7d', reply_status = 42 WHERE id = $1",
	} {
		refused(q, y.ID)
	}
	// A decision is recorded once.
	if _, err := c.Exec(ctx, "UPDATE exchanges SET state = 'executing', decision = '\\x7b7d' WHERE id = $1", y.ID); err != nil {
		t.Fatal(err)
	}
	refused("UPDATE exchanges SET state = 'failed', reply = '\\x7b7d', reply_status = 500, decision = '\\x5b5d' WHERE id = $1", y.ID)
	for _, id := range []string{x.ID, y.ID} {
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// A finished review is never rewritten.
	z := exchangetest.InState(t, s, "3", exchange.Executing)
	if _, _, err := s.Apply(ctx, z.ID, exchange.Executing, exchange.Done, exchange.Change{Reply: exchangetest.FinalReply,
		ReplyStatus: 200, Review: &exchange.Review{Mode: "m", DueAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CompleteReview(ctx, z.ID, "alice", exchange.Flagged, "why"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"UPDATE reviews SET verdict = 'accepted' WHERE exchange_id = $1",
		"UPDATE reviews SET reviewer = 'bob' WHERE exchange_id = $1",
		"UPDATE reviews SET justification = '' WHERE exchange_id = $1",
		"UPDATE reviews SET reviewed_at = 1 WHERE exchange_id = $1",
	} {
		refused(q, z.ID)
	}
}

// Replicas starting at once on a new schema apply the migrations once.
func TestMigrationsConcurrent(t *testing.T) {
	schema := pgtest.Schema(t)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			s, err := pgexchange.Open(t.Context(), pgtest.DSN(t), &pgexchange.Options{Schema: schema})
			if err != nil {
				t.Error(err)
				return
			}
			_ = s.Close()
		})
	}
	wg.Wait()
	var n int
	if err := rawConn(t, schema).QueryRow(t.Context(), "SELECT count(*) FROM "+pgexchange.MigrationsTable).Scan(&n); err != nil || n != pgexchange.SchemaVersion() {
		t.Fatalf("%d migrations recorded, %v; want %d", n, err, pgexchange.SchemaVersion())
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	schema := pgtest.Schema(t)
	open(t, &pgexchange.Options{Schema: schema}).Close()
	if _, err := rawConn(t, schema).Exec(t.Context(), "INSERT INTO "+pgexchange.MigrationsTable+" (version, name) VALUES (999, 'future')"); err != nil {
		t.Fatal(err)
	}
	s, err := pgexchange.Open(t.Context(), pgtest.DSN(t), &pgexchange.Options{Schema: schema})
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a schema newer than the build")
	}
	if !errors.Is(err, pgexchange.ErrSchemaTooNew) {
		t.Fatalf("Open: %v, want ErrSchemaTooNew", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dsn := pgtest.DSN(t)
	if _, err := pgexchange.Open(t.Context(), dsn, &pgexchange.Options{Schema: string(make([]byte, 64))}); err == nil {
		t.Fatal("Open accepted a 64-byte schema name")
	}
	if _, err := pgexchange.Open(t.Context(), "postgres://%zz", nil); err == nil {
		t.Fatal("Open accepted a malformed DSN")
	}
	if _, err := pgexchange.Open(t.Context(), dsn, &pgexchange.Options{Schema: pgtest.Schema(t), Instance: "bad\x00"}); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatalf("bad instance: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := pgexchange.Open(ctx, dsn, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Open: %v", err)
	}
}

// The approval store and the exchange store share one schema: each keeps
// its own tables and migration count.
func TestSharesSchemaWithApprovalStore(t *testing.T) {
	schema := pgtest.Schema(t)
	ps, err := pgstore.Open(t.Context(), pgtest.DSN(t), &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	s := open(t, &pgexchange.Options{Schema: schema})
	exchangetest.InState(t, s, "1", exchange.Done)
	if _, err := ps.ID(t.Context()); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, &pgexchange.Options{Schema: schema})
	if w, err := s2.Waiting(t.Context(), exchange.Done); err != nil || len(w) != 1 {
		t.Fatalf("Waiting = %+v %v", w, err)
	}
	ps2, err := pgstore.Open(t.Context(), pgtest.DSN(t), &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ps2.Close()
}
