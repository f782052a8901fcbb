package main

import (
	"context"
	"io"
	"os"
	"testing"
)

// BenchmarkGatewayBench runs `custos bench gateway --requests 3000
// --concurrency 16` once per iteration, so that the whole gateway path can
// be profiled with -cpuprofile:
//
//	go test ./cmd/custos -run '^$' -bench GatewayBench -benchtime 1x -cpuprofile cpu.out
//
// Set CUSTOS_BENCH_VERBOSE=1 to see the figures it prints.
func BenchmarkGatewayBench(b *testing.B) {
	var out io.Writer = io.Discard
	if os.Getenv("CUSTOS_BENCH_VERBOSE") != "" {
		out = os.Stdout
	}
	for b.Loop() {
		if err := benchGateway(context.Background(), out, benchOptions{requests: 3000, concurrency: 16}); err != nil {
			b.Fatal(err)
		}
	}
}
