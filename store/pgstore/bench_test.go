package pgstore_test

import (
	"flag"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgstore"
)

var benchPending = flag.String("pending", "1000,100000", "comma-separated pending counts for BenchmarkCycle")

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
