package sqliteaudit_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
)

// BenchmarkAppend measures durable appends (synchronous=FULL: one fsync
// per transaction) from 1, 8 and 32 goroutines; with several, group
// commit shares the fsyncs.
func BenchmarkAppend(b *testing.B) {
	for _, g := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			l := audit.New(open(b, filepath.Join(b.TempDir(), "audit.db"), nil), nil)
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
			rep, err := l.Verify(ctx)
			if err != nil || !rep.OK() || rep.Records != b.N {
				b.Fatalf("Verify: %+v, %v", rep, err)
			}
		})
	}
}
