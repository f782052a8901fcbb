package pgstore_test

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
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
			b.Run(fmt.Sprintf("replicas=%d/workers=%d", n, w), func(b *testing.B) {
				busy := machineBusy()
				aaistest.BenchReplicaCycles(b, stores[:n], w)
				// How much of the machine the run used (PostgreSQL's
				// backends included): cycles/s can grow with replicas
				// only as far as cores are left, so the ceiling of the
				// 3-replica/1-replica ratio is the machine's cores over
				// one replica's busy-cores.
				if cores := busy(); cores >= 0 {
					b.ReportMetric(cores, "busy-cores")
				}
			})
		}
	}
}

// machineBusy starts measuring the machine's CPU use (every process, from
// /proc/stat) and returns a function that reports the mean number of busy
// cores since, or -1 where /proc/stat cannot be read.
func machineBusy() func() float64 {
	busy0, total0, ok0 := cpuTicks()
	return func() float64 {
		busy1, total1, ok1 := cpuTicks()
		if !ok0 || !ok1 || total1 <= total0 {
			return -1
		}
		cores := 0
		if data, err := os.ReadFile("/proc/stat"); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if strings.HasPrefix(line, "cpu") && !strings.HasPrefix(line, "cpu ") {
					cores++
				}
			}
		}
		return float64(cores) * float64(busy1-busy0) / float64(total1-total0)
	}
}

// cpuTicks reads the machine's busy and total CPU ticks: user, nice,
// system, idle, iowait, irq, softirq, steal (guest time is inside user);
// idle, iowait and steal are not busy.
func cpuTicks() (busy, total uint64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i != 3 && i != 4 && i != 7 {
			busy += v
		}
	}
	return busy, total, true
}
