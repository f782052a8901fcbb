package pgstore_test

import (
	"flag"
	"fmt"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgstore"
)

var (
	benchPending = flag.String("pending", "1000,100000", "comma-separated pending counts for BenchmarkCycle")
	benchBatch   = flag.Int("batch", 0, "Options.MaxBatch of the stores BenchmarkReplicas opens (0: the default; 1: no group commit)")
	benchConns   = flag.Int("batchconns", 0, "Options.BatchConns of the stores BenchmarkReplicas opens (0: the default)")
)

// BenchmarkCycle measures durable create → decide → resolve cycles (two
// committed transactions each) at each -pending count, with 1 and 8
// concurrent workers, on a fresh schema per count filled with Import. It
// needs CUSTOS_TEST_POSTGRES_DSN.
func BenchmarkCycle(b *testing.B) {
	pgtest.DSN(b)
	sizes, err := aaistest.ParseSizes(*benchPending)
	if err != nil {
		b.Fatal(err)
	}
	aaistest.BenchStore(b, sizes,
		func(b *testing.B) aais.Store { return open(b, pgtest.Schema(b)) },
		func(s aais.Store, recs []aais.RequestRecord) error {
			_, err := s.(*pgstore.Store).Import(b.Context(), recs)
			return err
		})
}

// BenchmarkReplicas measures cycles with 8 and 24 workers spread over 1 and
// 3 replicas (store handles with their own pools) on one schema with 1,000
// pending requests: whether replicas add throughput. It needs
// CUSTOS_TEST_POSTGRES_DSN.
func BenchmarkReplicas(b *testing.B) {
	pgtest.DSN(b)
	schema := pgtest.Schema(b)
	stores := make([]aais.Store, 3)
	for i := range stores {
		stores[i] = openOpts(b, &pgstore.Options{Schema: schema, MaxBatch: *benchBatch, BatchConns: *benchConns})
	}
	if err := aaistest.PendingRecords(b, 1000, 1000, func(recs []aais.RequestRecord) error {
		_, err := stores[0].(*pgstore.Store).Import(b.Context(), recs)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		for _, w := range []int{8, 24} {
			b.Run(fmt.Sprintf("replicas=%d/workers=%d", n, w), func(b *testing.B) { aaistest.BenchReplicaCycles(b, stores[:n], w) })
		}
	}
}
