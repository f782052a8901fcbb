package pgaudit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgaudit"
)

// BenchmarkAppend measures durable appends from 1, 8 and 32 goroutines
// through one Backend, with group commit (the default) and without
// (MaxBatch 1), and through three Backends (replicas) on one schema.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []struct {
		name     string
		maxBatch int
		replicas int
	}{{"group", 0, 1}, {"single", 1, 1}, {"group-3replicas", 0, 3}, {"single-3replicas", 1, 3}} {
		for _, g := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", mode.name, g), func(b *testing.B) {
				schema := pgtest.Schema(b)
				var logs []*audit.Log
				for range mode.replicas {
					logs = append(logs, audit.New(open(b, schema, &pgaudit.Options{MaxBatch: mode.maxBatch, MaxConns: 40}), nil))
				}
				ctx := context.Background()
				rec := audittest.Sample(audit.KindExecution, 1)
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range g {
					n := b.N / g
					if w < b.N%g {
						n++
					}
					l := logs[w%len(logs)]
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range n {
							if _, err := l.Append(ctx, rec); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				rep, err := logs[0].Verify(ctx)
				if err != nil || !rep.OK() || rep.Records != b.N {
					b.Fatalf("Verify: %+v, %v", rep, err)
				}
			})
		}
	}
}
