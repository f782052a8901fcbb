package memstore_test

import (
	"flag"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/memstore"
)

var benchPending = flag.String("pending", "1000,100000", "comma-separated pending counts for BenchmarkCycle")

// BenchmarkCycle measures create → decide → resolve cycles in memory: the
// CPU cost of the authority and the message checks, with no durability.
func BenchmarkCycle(b *testing.B) {
	sizes, err := aaistest.ParseSizes(*benchPending)
	if err != nil {
		b.Fatal(err)
	}
	aaistest.BenchStore(b, sizes, func(*testing.B) aais.Store { return memstore.New() }, aaistest.CreateEach)
}
