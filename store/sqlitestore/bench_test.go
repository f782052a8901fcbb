package sqlitestore_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/sqlitestore"
)

var benchPending = flag.String("pending", "1000,100000", "comma-separated pending counts for BenchmarkCycle")

// BenchmarkCycle measures durable create → decide → resolve cycles with
// full durability (WAL, synchronous=FULL) at each -pending count, with 1
// and 8 concurrent workers. See docs/benchmarks.md for the command.
func BenchmarkCycle(b *testing.B) {
	sizes, err := aaistest.ParseSizes(*benchPending)
	if err != nil {
		b.Fatal(err)
	}
	aaistest.BenchStore(b, sizes,
		func(b *testing.B) aais.Store { return open(b, filepath.Join(b.TempDir(), "bench.db")) },
		func(s aais.Store, recs []aais.RequestRecord) error {
			_, err := s.(*sqlitestore.Store).Import(b.Context(), recs)
			return err
		})
}
