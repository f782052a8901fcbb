package pgaudit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgaudit"
)

func open(t testing.TB, schema string, o *pgaudit.Options, kv ...string) *pgaudit.Backend {
	t.Helper()
	b, err := pgaudit.Open(context.Background(), pgtest.SchemaDSN(t, schema, kv...), o)
	if err != nil {
		t.Fatalf("Open(%s): %v", schema, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if b.Schema() != schema {
		t.Fatalf("Schema() = %q, want %q", b.Schema(), schema)
	}
	return b
}

func rawConn(t testing.TB) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func exec(t testing.TB, c *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestConformance(t *testing.T) {
	pgtest.DSN(t)
	audittest.Run(t, func(t *testing.T) audit.Backend { return open(t, pgtest.Schema(t), nil) })
}

func TestConformanceNoGroupCommit(t *testing.T) {
	pgtest.DSN(t)
	audittest.Run(t, func(t *testing.T) audit.Backend {
		return open(t, pgtest.Schema(t), &pgaudit.Options{MaxBatch: 1})
	})
}

func TestConformanceSharedPool(t *testing.T) {
	dsn := pgtest.DSN(t)
	// A pool whose search_path is not the log's schema: every statement
	// names it.
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	audittest.Run(t, func(t *testing.T) audit.Backend {
		b, err := pgaudit.New(context.Background(), pool, &pgaudit.Options{Schema: pgtest.Schema(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("the shared pool was closed: %v", err)
	}
}

// TestThreeReplicas: three Backends (three pools) on one schema, 300
// records appended concurrently through three audit.Logs, make one chain
// of 300 without gaps that every Log verifies.
func TestThreeReplicas(t *testing.T) {
	for _, mb := range []int{0, 1} {
		t.Run(fmt.Sprintf("MaxBatch=%d", mb), func(t *testing.T) {
			ctx := context.Background()
			schema := pgtest.Schema(t)
			var logs []*audit.Log
			for range 3 {
				logs = append(logs, audit.New(open(t, schema, &pgaudit.Options{MaxBatch: mb}), nil))
			}
			const workers, each = 4, 25 // per replica: 3 × 4 × 25 = 300
			var wg sync.WaitGroup
			var mu sync.Mutex
			got := map[uint64]string{}
			errs := make(chan error, 300)
			for li, l := range logs {
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range each {
							rec, err := l.Append(ctx, audittest.Sample(audit.KindDecision, li*10000+w*100+i))
							if err != nil {
								errs <- err
								continue
							}
							mu.Lock()
							if _, dup := got[rec.Seq]; dup {
								errs <- fmt.Errorf("seq %d acknowledged twice", rec.Seq)
							}
							got[rec.Seq] = rec.Hash
							mu.Unlock()
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for seq := uint64(1); seq <= 300; seq++ {
				if got[seq] == "" {
					t.Fatalf("seq %d not acknowledged", seq)
				}
			}
			for _, l := range logs {
				rep, err := l.Verify(ctx)
				if err != nil || !rep.OK() || rep.Records != 300 || rep.FirstSeq != 1 || rep.LastSeq != 300 || rep.Head != got[300] {
					t.Fatalf("Verify: %+v, %v", rep, err)
				}
			}
			head, err := logs[0].Backend().(*pgaudit.Backend).Head(ctx)
			if err != nil || head.Seq != 300 || head.Hash != got[300] {
				t.Fatalf("Head: %+v, %v", head, err)
			}
		})
	}
}

// appName returns a unique application_name, to find a Backend's
// connections in pg_stat_activity.
func appName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "pgaudit-test-" + hex.EncodeToString(b[:])
}

// blockHead locks the head row in a transaction on c, so that every
// append waits; release rolls it back.
func blockHead(t *testing.T, c *pgx.Conn, schema string) (release func()) {
	t.Helper()
	exec(t, c, "BEGIN", "SELECT 1 FROM "+pgx.Identifier{schema, "audit_head"}.Sanitize()+" FOR UPDATE")
	return func() { exec(t, c, "ROLLBACK") }
}

// waitingPIDs waits for and returns the pids of app's connections waiting
// on a lock. c must not be in a transaction (pg_stat_activity is read once
// per transaction).
func waitingPIDs(t *testing.T, c *pgx.Conn, app string, n int) []int32 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := c.Query(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections of %s waiting, want %d", len(pids), app, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWriterKilled: a writer whose backend is terminated while its
// transaction waits for the head (pg_terminate_backend) retries on a new
// connection; a writer whose context is cancelled there writes nothing;
// the chain stays valid.
func TestWriterKilled(t *testing.T) {
	for _, mb := range []int{0, 1} {
		t.Run(fmt.Sprintf("MaxBatch=%d", mb), func(t *testing.T) {
			ctx := context.Background()
			schema := pgtest.Schema(t)
			app := appName()
			l := audit.New(open(t, schema, &pgaudit.Options{MaxBatch: mb}, "application_name", app), nil)
			for i := 1; i <= 3; i++ {
				if _, err := l.Append(ctx, audittest.Sample(audit.KindReceived, i)); err != nil {
					t.Fatal(err)
				}
			}
			c := rawConn(t)
			release := blockHead(t, rawConn(t), schema)
			type res struct {
				rec audit.Record
				err error
			}
			killed := make(chan res, 1)
			go func() {
				rec, err := l.Append(ctx, audittest.Sample(audit.KindReceived, 4))
				killed <- res{rec, err}
			}()
			pids := waitingPIDs(t, c, app, 1)
			var ok bool
			if err := c.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pids[0]).Scan(&ok); err != nil || !ok {
				t.Fatalf("pg_terminate_backend: %v %v", ok, err)
			}
			// The retry waits for the head again; now cancel a second
			// writer waiting alongside it.
			cctx, cancel := context.WithCancel(ctx)
			cancelled := make(chan error, 1)
			go func() {
				_, err := l.Append(cctx, audittest.Sample(audit.KindReceived, 99))
				cancelled <- err
			}()
			if mb == 1 {
				waitingPIDs(t, c, app, 2)
			} else {
				time.Sleep(100 * time.Millisecond) // queued behind the retry
			}
			cancel()
			if err := <-cancelled; !errors.Is(err, context.Canceled) || !errors.Is(err, audit.ErrAppend) {
				t.Fatalf("cancelled Append: %v", err)
			}
			release()
			r := <-killed
			if r.err != nil || r.rec.Seq != 4 {
				t.Fatalf("Append after its backend was terminated: seq %d, %v", r.rec.Seq, r.err)
			}
			rec, err := l.Append(ctx, audittest.Sample(audit.KindReceived, 5))
			if err != nil || rec.Seq != 5 {
				t.Fatalf("Append: %d %v", rec.Seq, err)
			}
			rep, err := l.Verify(ctx)
			if err != nil || !rep.OK() || rep.Records != 5 || rep.Head != rec.Hash {
				t.Fatalf("Verify: %+v %v", rep, err)
			}
		})
	}
}

// TestWritersKilledUnderLoad: three replicas append while one replica's
// connections are terminated again and again. Every acknowledged record
// is in the chain, at the seq and with the hash acknowledged, and the
// chain verifies. (A failed append may or may not be there: an error from
// COMMIT itself leaves its outcome unknown.)
func TestWritersKilledUnderLoad(t *testing.T) {
	ctx := context.Background()
	schema := pgtest.Schema(t)
	victim := appName()
	logs := []*audit.Log{
		audit.New(open(t, schema, &pgaudit.Options{MaxAttempts: 100}, "application_name", victim), nil),
		audit.New(open(t, schema, &pgaudit.Options{MaxBatch: 1, MaxAttempts: 100}, "application_name", victim), nil),
		audit.New(open(t, schema, nil), nil),
	}
	var mu sync.Mutex
	acked := map[uint64]string{}
	failed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for li, l := range logs {
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 40; i++ {
					rec, err := l.Append(ctx, audittest.Sample(audit.KindExecution, li*10000+w*100+i))
					mu.Lock()
					if err != nil {
						failed++
					} else {
						acked[rec.Seq] = rec.Hash
					}
					mu.Unlock()
				}
			}()
		}
	}
	c := rawConn(t)
	kills := 0
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			if kills >= 40 {
				continue // enough: let the victims finish
			}
			var n int
			if err := c.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name = $1 AND state <> 'idle' LIMIT 1) k`, victim).Scan(&n); err == nil {
				kills += n
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-killerDone
	t.Logf("%d acknowledged, %d failed, %d backends terminated", len(acked), failed, kills)
	var n int
	rep, err := logs[2].Verify(ctx)
	if err != nil || !rep.OK() {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
	if err := logs[2].Backend().Range(ctx, 1, func(seq uint64, data []byte) error {
		n++
		rec, err := audit.ParseRecord(data)
		if err != nil {
			return err
		}
		if h, ok := acked[seq]; ok && h != rec.Hash {
			return fmt.Errorf("seq %d: stored hash %s, acknowledged %s", seq, rec.Hash, h)
		}
		delete(acked, seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(acked) != 0 {
		t.Fatalf("%d acknowledged records missing", len(acked))
	}
	if n != rep.Records || rep.LastSeq != uint64(n) {
		t.Fatalf("chain of %d, report %+v", n, rep)
	}
}

// fixture writes seven records: 1..6, of which 3 and 6 expire at t0+1d and
// are redacted by a purge at t0+2d, which appends record 7.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fixture(t *testing.T) (schema string, recs []audit.Record) {
	t.Helper()
	ctx := context.Background()
	schema = pgtest.Schema(t)
	b, err := pgaudit.Open(ctx, pgtest.SchemaDSN(t, schema), nil)
	if err != nil {
		t.Fatal(err)
	}
	l := audit.New(b, &audit.Options{Now: func() time.Time { return t0 }})
	for i := 1; i <= 6; i++ {
		rec := audittest.Sample(audit.KindReceived, i)
		if i%3 == 0 {
			rec.RetainUntil = t0.AddDate(0, 0, 1)
		}
		r, err := l.Append(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if n, err := l.Purge(ctx, t0.AddDate(0, 0, 2)); err != nil || n != 2 {
		t.Fatalf("Purge: %d, %v", n, err)
	}
	rep, err := l.Verify(ctx)
	if err != nil || !rep.OK() || rep.Records != 7 || rep.Redacted != 2 {
		t.Fatalf("fixture: %+v, %v", rep, err)
	}
	recs = append(recs, audit.Record{Seq: rep.LastSeq, Hash: rep.Head})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return schema, recs
}

// stored returns the stored JSON of seq in table (schema-qualified).
func stored(t *testing.T, c *pgx.Conn, table string, seq int) []byte {
	t.Helper()
	var data []byte
	if err := c.QueryRow(context.Background(), "SELECT record FROM "+table+" WHERE seq = $1", seq).Scan(&data); err != nil {
		t.Fatal(err)
	}
	return data
}

func forged(t *testing.T, seq uint64, prev string) []byte {
	t.Helper()
	rec := audittest.Sample(audit.KindApproval, 99)
	rec.Seq, rec.Prev, rec.Time = seq, prev, t0
	rec.Outcome = audit.OutcomeApproved
	h, err := rec.ComputeHash()
	if err != nil {
		t.Fatal(err)
	}
	rec.Hash = h
	data, err := rec.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestTampering: the table's owner can disable the triggers (ALTER TABLE
// … DISABLE TRIGGER) and rewrite or delete rows; Verify reports it.
func TestTampering(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, c *pgx.Conn, q string, recs []audit.Record)
		kind   audit.ProblemKind
		seq    uint64
		detail string
	}{
		{"alter a field", func(t *testing.T, c *pgx.Conn, q string, _ []audit.Record) {
			data := strings.Replace(string(stored(t, c, q, 4)), `"outcome":"allowed"`, `"outcome":"denied"`, 1)
			if _, err := c.Exec(context.Background(), "UPDATE "+q+" SET record = $1 WHERE seq = 4", []byte(data)); err != nil {
				t.Fatal(err)
			}
		}, audit.ProblemAltered, 4, "does not match its hash"},
		{"garbage", func(t *testing.T, c *pgx.Conn, q string, _ []audit.Record) {
			exec(t, c, "UPDATE "+q+` SET record = '{"seq":'::bytea WHERE seq = 5`)
		}, audit.ProblemAltered, 5, "does not parse"},
		{"delete a middle record", func(t *testing.T, c *pgx.Conn, q string, _ []audit.Record) {
			exec(t, c, "DELETE FROM "+q+" WHERE seq = 4")
		}, audit.ProblemRemoved, 4, "record 4 is missing"},
		{"swap two records' seq", func(t *testing.T, c *pgx.Conn, q string, _ []audit.Record) {
			exec(t, c, "UPDATE "+q+" SET seq = 1000 WHERE seq = 4", "UPDATE "+q+" SET seq = 4 WHERE seq = 5", "UPDATE "+q+" SET seq = 5 WHERE seq = 1000")
		}, audit.ProblemReordered, 4, "stored after record 5"},
		{"replace a record, rehashed", func(t *testing.T, c *pgx.Conn, q string, recs []audit.Record) {
			if _, err := c.Exec(context.Background(), "UPDATE "+q+" SET record = $1 WHERE seq = 4", forged(t, 4, recs[2].Hash)); err != nil {
				t.Fatal(err)
			}
		}, audit.ProblemAltered, 4, "altered and rehashed, or replaced"},
		{"content put back into a redacted record", func(t *testing.T, c *pgx.Conn, q string, recs []audit.Record) {
			orig, _ := recs[2].MarshalJSON() // the record before its redaction
			if _, err := c.Exec(context.Background(), "UPDATE "+q+" SET record = $1 WHERE seq = 3",
				[]byte(strings.Replace(string(orig), `"prev"`, `"redacted":true,"prev"`, 1))); err != nil {
				t.Fatal(err)
			}
		}, audit.ProblemAltered, 3, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			schema, recs := fixture(t)
			c := rawConn(t)
			q := pgx.Identifier{schema, "audit_records"}.Sanitize()
			exec(t, c, "ALTER TABLE "+q+" DISABLE TRIGGER USER")
			tc.tamper(t, c, q, recs)
			exec(t, c, "ALTER TABLE "+q+" ENABLE TRIGGER USER")
			rep, err := audit.New(open(t, schema, nil), nil).Verify(context.Background())
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			p := rep.Problem
			if p == nil {
				t.Fatalf("Verify found nothing: %+v", rep)
			}
			if p.Kind != tc.kind || p.Seq != tc.seq || !strings.Contains(p.Detail, tc.detail) {
				t.Fatalf("Verify: %v (kind %s seq %d), want %s at %d, detail containing %q", p, p.Kind, p.Seq, tc.kind, tc.seq, tc.detail)
			}
			t.Logf("%v", p)
		})
	}
}

// TestTruncationAndHead: cutting the tail off is invisible to Verify
// alone, caught with an anchor, and the head row (when left alone) is such
// an anchor; appending on a cut chain fails closed.
func TestTruncationAndHead(t *testing.T) {
	ctx := context.Background()
	schema, recs := fixture(t)
	c := rawConn(t)
	q := pgx.Identifier{schema, "audit_records"}.Sanitize()
	exec(t, c, "ALTER TABLE "+q+" DISABLE TRIGGER USER", "DELETE FROM "+q+" WHERE seq >= 6", "ALTER TABLE "+q+" ENABLE TRIGGER USER")
	b := open(t, schema, nil)
	l := audit.New(b, nil)
	rep, err := l.Verify(ctx)
	if err != nil || !rep.OK() || rep.Records != 5 {
		t.Fatalf("Verify without anchor: %+v %v (a documented miss)", rep, err)
	}
	head, err := b.Head(ctx)
	if err != nil || head.Seq != 7 || head.Hash != recs[6].Hash {
		t.Fatalf("Head: %+v %v", head, err)
	}
	rep, err = l.VerifyWith(ctx, audit.VerifyOptions{Anchors: []audit.Anchor{head}})
	if err != nil || rep.Problem == nil || rep.Problem.Kind != audit.ProblemRemoved || rep.Problem.Seq != 7 {
		t.Fatalf("Verify with the head as anchor: %+v %v", rep.Problem, err)
	}
	if _, err := l.Append(ctx, audittest.Sample(audit.KindReceived, 8)); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Append on a cut chain: %v", err)
	}
}

// TestDamagedHeadFailsClosed: when the last record cannot be read, the
// chain cannot be extended, even by the Backend that wrote it.
func TestDamagedHeadFailsClosed(t *testing.T) {
	for _, mb := range []int{0, 1} {
		t.Run(fmt.Sprintf("MaxBatch=%d", mb), func(t *testing.T) { testDamagedHead(t, mb) })
	}
}

func testDamagedHead(t *testing.T, maxBatch int) {
	ctx := context.Background()
	schema := pgtest.Schema(t)
	l := audit.New(open(t, schema, &pgaudit.Options{MaxBatch: maxBatch}), nil)
	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, audittest.Sample(audit.KindReceived, i)); err != nil {
			t.Fatal(err)
		}
	}
	c := rawConn(t)
	q := pgx.Identifier{schema, "audit_records"}.Sanitize()
	exec(t, c, "ALTER TABLE "+q+" DISABLE TRIGGER USER", "UPDATE "+q+" SET record = 'oops'::bytea WHERE seq = 3", "ALTER TABLE "+q+" ENABLE TRIGGER USER")
	if _, err := l.Append(ctx, audittest.Sample(audit.KindReceived, 4)); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Append on a damaged head: %v", err)
	}
}

// TestTriggersGuardAccidents: without disabling the triggers, records
// cannot be deleted, truncated or changed other than by a redaction, and
// the head cannot move back.
func TestTriggersGuardAccidents(t *testing.T) {
	schema, _ := fixture(t)
	c := rawConn(t)
	q := pgx.Identifier{schema, "audit_records"}.Sanitize()
	h := pgx.Identifier{schema, "audit_head"}.Sanitize()
	for _, s := range []string{
		"DELETE FROM " + q + " WHERE seq = 2",
		"TRUNCATE " + q,
		"UPDATE " + q + " SET record = 'x'::bytea WHERE seq = 2",
		"UPDATE " + q + " SET redacted = false WHERE seq = 3",
		"UPDATE " + q + " SET redacted = true, hash = 'x' WHERE seq = 2",
		"UPDATE " + h + " SET last_seq = 2",
		"DELETE FROM " + h,
		"TRUNCATE " + h,
	} {
		if _, err := c.Exec(context.Background(), s); err == nil || !strings.Contains(err.Error(), "audit") {
			t.Errorf("%s: %v, want a trigger error", s, err)
		}
	}
}

// TestPurgeBatches: a purge larger than one backend batch writes one purge
// record per batch.
func TestPurgeBatches(t *testing.T) {
	ctx := context.Background()
	l := audit.New(open(t, pgtest.Schema(t), &pgaudit.Options{RedactBatch: 2}), &audit.Options{Now: func() time.Time { return t0 }})
	for i := 1; i <= 5; i++ {
		rec := audittest.Sample(audit.KindReceived, i)
		rec.RetainUntil = t0.Add(time.Hour)
		if _, err := l.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	n, err := l.Purge(ctx, t0.Add(2*time.Hour))
	if err != nil || n != 5 {
		t.Fatalf("Purge: %d, %v", n, err)
	}
	rep, err := l.Verify(ctx)
	if err != nil || !rep.OK() || rep.Records != 8 || rep.Redacted != 5 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// TestRangePages: Range crosses page boundaries in order and stops on
// fn's error.
func TestRangePages(t *testing.T) {
	ctx := context.Background()
	b := open(t, pgtest.Schema(t), nil)
	l := audit.New(b, nil)
	const n = 1100
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 10 {
				if _, err := l.Append(ctx, audittest.Sample(audit.KindExecution, w*1000+i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	next := uint64(600)
	if err := b.Range(ctx, 600, func(seq uint64, _ []byte) error {
		if seq != next {
			return fmt.Errorf("seq %d, want %d", seq, next)
		}
		next++
		return nil
	}); err != nil || next != n+1 {
		t.Fatalf("Range: %v, ended at %d", err, next)
	}
	stop := errors.New("stop")
	if err := b.Range(ctx, 1, func(seq uint64, _ []byte) error {
		if seq == 513 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("Range: %v", err)
	}
	rep, err := l.Verify(ctx)
	if err != nil || !rep.OK() || rep.Records != n {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
}

// TestReopen: the identity and chain survive a reopen; migrations are not
// applied twice.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	schema := pgtest.Schema(t)
	b := open(t, schema, nil)
	id, err := b.ID(ctx)
	if err != nil || len(id) != 32 {
		t.Fatalf("ID: %q %v", id, err)
	}
	if _, err := audit.New(b, nil).Append(ctx, audittest.Sample(audit.KindReceived, 1)); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if _, err := audit.New(b, nil).Append(ctx, audittest.Sample(audit.KindReceived, 2)); err == nil {
		t.Fatal("Append after Close succeeded")
	}
	b2 := open(t, schema, nil)
	if id2, err := b2.ID(ctx); err != nil || id2 != id {
		t.Fatalf("ID after reopen: %q %v, want %q", id2, err, id)
	}
	if rec, err := audit.New(b2, nil).Append(ctx, audittest.Sample(audit.KindReceived, 2)); err != nil || rec.Seq != 2 {
		t.Fatalf("Append after reopen: %d %v", rec.Seq, err)
	}
	b3, err := pgaudit.Open(ctx, pgtest.SchemaDSN(t, schema), &pgaudit.Options{MustExist: true})
	if err != nil {
		t.Fatalf("MustExist on an existing log: %v", err)
	}
	_ = b3.Close()
	other := pgtest.Schema(t)
	if _, err := pgaudit.Open(ctx, pgtest.SchemaDSN(t, other), &pgaudit.Options{MustExist: true}); !errors.Is(err, pgaudit.ErrNoLog) {
		t.Fatalf("MustExist on an empty schema: %v, want ErrNoLog", err)
	}
	var n int
	if err := rawConn(t).QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", other).Scan(&n); err != nil || n != 0 {
		t.Fatalf("MustExist created schema %s: %d %v", other, n, err)
	}
	if pgaudit.SchemaVersion() != 1 {
		t.Fatalf("SchemaVersion %d", pgaudit.SchemaVersion())
	}
}

// TestNonOwnerRole: a serving role granted SELECT, INSERT, UPDATE on the
// tables and USAGE on the schema (no CREATE: the tables exist) appends,
// verifies and purges, and can neither disable the triggers nor delete
// records.
func TestNonOwnerRole(t *testing.T) {
	ctx := context.Background()
	schema, _ := fixture(t)
	c := rawConn(t)
	role := "custos_audit_test_" + appName()[len("pgaudit-test-"):]
	rq := pgx.Identifier{role}.Sanitize()
	sq := pgx.Identifier{schema}.Sanitize()
	exec(t, c, "CREATE ROLE "+rq+" LOGIN")
	t.Cleanup(func() {
		_, _ = c.Exec(context.Background(), "DROP OWNED BY "+rq)
		_, _ = c.Exec(context.Background(), "DROP ROLE "+rq)
	})
	exec(t, c, "GRANT USAGE ON SCHEMA "+sq+" TO "+rq)
	for _, tb := range []string{"audit_meta", "audit_head", "audit_records", "audit_migrations"} {
		exec(t, c, "GRANT SELECT, INSERT, UPDATE ON "+pgx.Identifier{schema, tb}.Sanitize()+" TO "+rq)
	}
	u, err := url.Parse(pgtest.SchemaDSN(t, schema))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	b, err := pgaudit.Open(ctx, u.String(), nil)
	if err != nil {
		t.Fatalf("Open as %s: %v", role, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	l := audit.New(b, nil)
	rec := audittest.Sample(audit.KindReceived, 8)
	rec.RetainUntil = t0
	if r, err := l.Append(ctx, rec); err != nil || r.Seq != 8 {
		t.Fatalf("Append as %s: %d %v", role, r.Seq, err)
	}
	if n, err := l.Purge(ctx, t0.AddDate(0, 0, 1)); err != nil || n != 1 {
		t.Fatalf("Purge as %s: %d %v", role, n, err)
	}
	if rep, err := l.Verify(ctx); err != nil || !rep.OK() || rep.Records != 9 {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
	conn, err := b.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, s := range []string{
		"ALTER TABLE " + pgx.Identifier{schema, "audit_records"}.Sanitize() + " DISABLE TRIGGER USER",
		"DELETE FROM " + pgx.Identifier{schema, "audit_records"}.Sanitize() + " WHERE seq = 1",
	} {
		if _, err := conn.Exec(ctx, s); err == nil {
			t.Errorf("%s as %s succeeded", s, role)
		}
	}
}
