package filestore_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
)

var benchPending = flag.String("pending", "100,1000", "comma-separated pending counts for BenchmarkCycle")

// BenchmarkCycle measures durable create → decide → resolve cycles at each
// -pending count, with 1 and 8 concurrent workers. Every write rewrites
// and syncs the whole file, so the cost grows with the pending count.
func BenchmarkCycle(b *testing.B) {
	sizes, err := aaistest.ParseSizes(*benchPending)
	if err != nil {
		b.Fatal(err)
	}
	aaistest.BenchStore(b, sizes,
		func(b *testing.B) aais.Store { return open(b, filepath.Join(b.TempDir(), "bench.json"), nil) },
		aaistest.CreateEach)
}
