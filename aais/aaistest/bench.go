package aaistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// BenchCycles measures durable approval cycles on s: each cycle creates a
// request through an Authority, approves it once and gets the receipt,
// that is two store writes. workers goroutines run whole cycles
// concurrently (1 is a lone agent and reviewer; 8 is a busy gateway). It
// reports cycles/s, and the mean latency of one cycle in ns/op is b.N
// cycles over the elapsed time times workers.
//
// The number of pending requests does not change while it runs: every
// cycle resolves the request it created. Fill s first to measure how the
// cost grows with the pending count.
func BenchCycles(b *testing.B, s aais.Store, workers int) {
	b.Helper()
	BenchReplicaCycles(b, []aais.Store{s}, workers)
}

// BenchReplicaCycles is BenchCycles with the workers spread over several
// handles on one shared store (replicas: several processes on one
// PostgreSQL schema), each with its own Authority, worker i on handle
// i mod len(stores).
func BenchReplicaCycles(b *testing.B, stores []aais.Store, workers int) {
	b.Helper()
	auths := make([]*aais.Authority, len(stores))
	for i, s := range stores {
		a, err := aais.NewAuthority(s, &aais.AuthorityOptions{Stream: "bench.approvals"})
		if err != nil {
			b.Fatal(err)
		}
		auths[i] = a
	}
	// Ids must be new in every run of the benchmark function, which the
	// testing package calls several times on the same store.
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	prefix := "apr_b" + hex.EncodeToString(rb[:]) + "_"
	tmpl := benchRequest(b, time.Now())
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		a := auths[w%len(auths)]
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				r := *tmpl
				r.ID = prefix + fmt.Sprint(i)
				r.CreatedAt, _ = aais.NewTimestamp(time.Now())
				r.ExpiresAt, _ = aais.NewTimestamp(time.Now().Add(time.Hour))
				if _, _, err := a.Create(ctx, &r); err != nil {
					b.Error(err)
					return
				}
				d, err := aais.NewDecision(&r, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeOnce,
					Actor: Actor, DecidedAt: time.Now()})
				if err != nil {
					b.Error(err)
					return
				}
				m, err := a.Decide(ctx, d, Actor, nil)
				if err != nil || m.Resolution.Outcome != aais.OutcomeApproved {
					b.Errorf("Decide: %v, %v", m, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if el := b.Elapsed(); el > 0 {
		b.ReportMetric(float64(b.N)/el.Seconds(), "cycles/s")
	}
}

// benchRequest is the request every benchmark cycle copies: the kit's
// shell check with approve once, approve session and deny.
func benchRequest(tb testing.TB, now time.Time) *aais.Request {
	tb.Helper()
	r, err := aais.NewRequest(aais.RequestParams{
		ID:        "apr_template",
		CreatedAt: now,
		ExpiresAt: now.Add(time.Hour),
		Origin:    aais.Origin{Harness: "bench", SessionID: "s-bench", RunID: "run-bench"},
		Action:    json.RawMessage(action("bench")),
		Risk:      aais.Risk{Level: aais.RiskMedium, Reasons: []string{"Executes a local process"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Approve, Scope: aais.ScopeSession, Label: "Allow matching checks for this session",
				ScopeConstraints: aais.Constraints{"action_name": []byte(`"shell.exec"`), "command_prefix": []byte(`"node --check "`)}},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// PendingRecords calls add with batches of at most batch request records,
// n in all, ready for Store.CreateRequestIfAbsent or a store's bulk
// import: pending requests "apr_fill_<i>" that never expire, to fill a
// store before BenchCycles. It stops at the first error add returns.
func PendingRecords(tb testing.TB, n, batch int, add func([]aais.RequestRecord) error) error {
	tb.Helper()
	tmpl := benchRequest(tb, Start)
	tmpl.ExpiresAt = aais.Timestamp{}
	ev, err := aais.NewMessage(aais.Header{OccurredAt: Start, Stream: "bench.approvals"}, tmpl)
	if err != nil {
		tb.Fatal(err)
	}
	recs := make([]aais.RequestRecord, 0, batch)
	for i := range n {
		r := *tmpl
		r.ID = fmt.Sprintf("apr_fill_%d", i)
		m := *ev
		m.ID = fmt.Sprintf("evt_fill_%d", i)
		m.Request = &r
		recs = append(recs, aais.RequestRecord{Event: &m, Fingerprint: "fill-" + r.ID})
		if len(recs) == batch || i == n-1 {
			if err := add(recs); err != nil {
				return err
			}
			recs = recs[:0]
		}
	}
	return nil
}

// BenchWorkers are the concurrent cycle runners BenchStore measures.
var BenchWorkers = []int{1, 8}

// BenchStore runs BenchCycles on stores holding each of the pending counts
// in sizes, with each of BenchWorkers. open returns a new, empty store;
// fill adds a batch of pending records to it (a bulk import when the store
// has one, else CreateRequestIfAbsent in a loop). Each sub-benchmark is
// named pending=N/workers=W.
func BenchStore(b *testing.B, sizes []int, open func(b *testing.B) aais.Store, fill func(s aais.Store, recs []aais.RequestRecord) error) {
	b.Helper()
	for _, n := range sizes {
		s := open(b)
		if err := PendingRecords(b, n, 10000, func(recs []aais.RequestRecord) error { return fill(s, recs) }); err != nil {
			b.Fatalf("filling %d pending requests: %v", n, err)
		}
		if got, _, err := s.Pending(context.Background()); err != nil || len(got) != n {
			b.Fatalf("store holds %d pending requests (%v), want %d", len(got), err, n)
		}
		for _, w := range BenchWorkers {
			b.Run(fmt.Sprintf("pending=%d/workers=%d", n, w), func(b *testing.B) { BenchCycles(b, s, w) })
		}
	}
}

// CreateEach is a BenchStore fill for stores without a bulk import.
func CreateEach(s aais.Store, recs []aais.RequestRecord) error {
	for _, r := range recs {
		if _, _, err := s.CreateRequestIfAbsent(context.Background(), r); err != nil {
			return err
		}
	}
	return nil
}

// ParseSizes reads a comma-separated list of pending counts ("1000,100000")
// for a benchmark flag.
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("pending count %q: want a non-negative integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
