package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/config"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure Custos on this machine"}
	var requests, concurrency, bodyBytes, rounds int
	var rate float64
	var cpuprofile, storeLoc string
	gw := &cobra.Command{
		Use:   "gateway",
		Short: "Signed not_required requests through the gateway, next to a bare net/http handler",
		Long: `Sign --requests distinct ARSIA requests (profile GDPR-STANDARD, an echo
handler), then send the same bodies with --concurrency clients, first to a
bare net/http handler that reads the body and answers a fixed JSON, then to a
full gateway in this process (verify, validate, authorize, run, audit, sign,
all durable). Each body is padded to --body-bytes. The two runs alternate
--rounds times (bare, gateway, bare, gateway, ...: both see the same machine
load) and the medians are printed: throughput and p50/p99 latency of both,
and their ratio. With --rate, requests are sent at that fixed rate whatever
the answers, and latency counts from when each request was due (no
coordinated omission). With --store, the gateway keeps its state there (a
postgres:// URL: its schema, custos_schema=… naming one) instead of a
custos.db in a temporary data directory.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if requests < 1 || concurrency < 1 || rounds < 1 || bodyBytes < 0 {
				return usageError{fmt.Errorf("--requests, --concurrency and --rounds must be positive")}
			}
			if rate < 0 {
				return usageError{fmt.Errorf("--rate must not be negative")}
			}
			return benchGateway(cmd.Context(), cmd.OutOrStdout(), benchOptions{requests: requests, concurrency: concurrency,
				rate: rate, cpuprofile: cpuprofile, bodyBytes: bodyBytes, rounds: rounds, store: storeLoc})
		},
	}
	gw.Flags().IntVar(&requests, "requests", 5000, "requests per run")
	gw.Flags().IntVar(&bodyBytes, "body-bytes", 1024, "pad each signed request to about this many bytes")
	gw.Flags().IntVar(&rounds, "rounds", 3, "alternate the bare and the gateway runs this many times; medians are printed")
	gw.Flags().IntVar(&concurrency, "concurrency", 16, "concurrent clients (closed loop: each sends its next request when answered)")
	gw.Flags().Float64Var(&rate, "rate", 0, "send at this many requests per second instead (open loop: latency counts from each request's scheduled time)")
	gw.Flags().StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the gateway run to this file")
	gw.Flags().StringVar(&storeLoc, "store", "", "where the gateway keeps its state (default a temporary data directory's custos.db)")
	cmd.AddCommand(gw, newBenchFloodCommand())
	cmd.AddCommand(newBenchCrashCommand())
	cmd.AddCommand(newBenchSSECommand())
	return cmd
}

type benchResult struct {
	n        int
	elapsed  time.Duration
	p50, p99 time.Duration
	failed   int64
}

func (r benchResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

type benchOptions struct {
	requests, concurrency int
	bodyBytes, rounds     int
	rate                  float64
	cpuprofile, store     string
}

// medianRun returns the run with the median throughput, its latencies with
// it.
func medianRun(rs []benchResult) benchResult {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b benchResult) int { return cmp.Compare(a.rate(), b.rate()) })
	return s[len(s)/2]
}

func benchGateway(ctx context.Context, out io.Writer, o benchOptions) error {
	requests, concurrency := o.requests, o.concurrency
	var bodies [][]byte
	run := func(url string) (benchResult, error) {
		if o.rate > 0 {
			return benchOpenLoop(ctx, url, bodies, o.rate, 200)
		}
		return benchRun(ctx, url, bodies, concurrency, 200)
	}
	dir, err := os.MkdirTemp("", "custos-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	const agent = "agent:bench.client"
	signer, kid, jwksPath, err := localAgent(dir, agent)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "signing %d requests of about %d bytes...\n", requests, o.bodyBytes)
	sign := func(i int, text string) ([]byte, error) {
		e, err := arsia.NewRequest(agent, "agent:bench.gateway", []string{"bench.echo"}, "com.bench/echo",
			map[string]any{"n": i, "text": text}, arsia.BuildOptions{Now: time.Now(), TTL: time.Hour,
				Compliance: map[string]any{"profile": "GDPR-STANDARD"}})
		if err != nil {
			return nil, err
		}
		env, err := e.Map()
		if err != nil {
			return nil, err
		}
		signed, err := sig.Sign(env, signer, kid)
		if err != nil {
			return nil, err
		}
		return json.Marshal(signed)
	}
	probe, err := sign(0, "hello")
	if err != nil {
		return err
	}
	text := "hello" + strings.Repeat("x", max(0, o.bodyBytes-len(probe)))
	bodies = make([][]byte, requests)
	for i := range bodies {
		if bodies[i], err = sign(i, text); err != nil {
			return err
		}
	}

	// Baseline: a bare handler on the same machine.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	bare := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 1<<20))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})}
	go func() { _ = bare.Serve(ln) }()
	defer bare.Close()
	bareURL := "http://" + ln.Addr().String() + "/"

	cfg := config.Default()
	cfg.Listen, cfg.Data, cfg.Agent = "127.0.0.1:0", filepath.Join(dir, "data"), "agent:bench.gateway"
	cfg.Trust.JWKSFiles = []string{jwksPath}
	cfg.Senders = []config.Sender{{Agent: agent, Capabilities: []string{"bench.*"}}}
	cfg.Handlers = map[string]config.Handler{"bench.echo": {Type: "echo"}}
	cfg.RateLimit = config.RateLimit{}
	cfg.Store = o.store
	if err := cfg.Check(); err != nil {
		return err
	}
	addr, _, stop, err := startLocalGateway(ctx, cfg)
	if err != nil {
		return err
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	// Every round sends the same signed bodies: from the second round on
	// the gateway answers them as retries (the replay path), so each
	// round signs fresh ones first.
	var bases, fulls []benchResult
	for r := range o.rounds {
		if r > 0 {
			for i := range bodies {
				if bodies[i], err = sign(r*len(bodies)+i, text); err != nil {
					break
				}
			}
		}
		var b, f benchResult
		if err == nil {
			b, err = run(bareURL)
		}
		if err == nil {
			f, err = run(addr + "/v1/arsia/inbox")
		}
		if err != nil {
			break
		}
		bases, fulls = append(bases, b), append(fulls, f)
	}
	if o.cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if serr := stop(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	base, full := medianRun(bases), medianRun(fulls)
	var failed int64
	ratios := make([]string, len(fulls))
	for i := range fulls {
		failed += fulls[i].failed
		ratios[i] = fmt.Sprintf("%.3f", fulls[i].rate()/bases[i].rate())
	}
	if o.rate > 0 {
		fmt.Fprintf(out, "%d requests at %.0f req/s (open loop), one process on this machine\n", requests, o.rate)
	} else {
		fmt.Fprintf(out, "%d requests, %d concurrent clients, one process on this machine\n", requests, concurrency)
	}
	fmt.Fprintf(out, "  %d rounds, bodies of %d bytes; medians; ratio per round %s\n", len(fulls), len(bodies[0]), strings.Join(ratios, " "))
	fmt.Fprintf(out, "  bare net/http  %8.0f req/s  p50 %-10v p99 %v\n", base.rate(), base.p50, base.p99)
	fmt.Fprintf(out, "  custos serve   %8.0f req/s  p50 %-10v p99 %v  (failed %d)\n", full.rate(), full.p50, full.p99, full.failed)
	fmt.Fprintf(out, "  ratio          %.3fx the bare handler's throughput\n", full.rate()/base.rate())
	if failed > 0 {
		return fmt.Errorf("%d requests were not answered 200", failed)
	}
	return nil
}

// benchRun posts every body once with concurrency clients and measures.
func benchRun(ctx context.Context, url string, bodies [][]byte, concurrency, wantStatus int) (benchResult, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}}
	defer client.CloseIdleConnections()
	lat := make([]time.Duration, len(bodies))
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(bodies[i]))
				req.Header.Set("Content-Type", "application/arsia+json; v=1")
				resp, err := client.Do(req)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if resp.StatusCode != wantStatus {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil && failed.Load() == int64(len(bodies)) {
		return benchResult{}, firstErr
	}
	return summarize(lat, el, failed.Load()), nil
}

// summarize sorts the latencies and reads the percentiles.
func summarize(lat []time.Duration, elapsed time.Duration, failed int64) benchResult {
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(10 * time.Microsecond)
	}
	return benchResult{n: len(lat), elapsed: elapsed, p50: pct(0.50), p99: pct(0.99), failed: failed}
}

// benchOpenLoop posts every body once, the i-th at start + i/rate whatever
// the earlier answers; a latency counts from the request's due time, so a
// server that falls behind shows it.
func benchOpenLoop(ctx context.Context, url string, bodies [][]byte, rate float64, wantStatus int) (benchResult, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	defer client.CloseIdleConnections()
	lat := make([]time.Duration, len(bodies))
	var failed atomic.Int64
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := range bodies {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				return benchResult{}, ctx.Err()
			case <-time.After(d):
			}
		}
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(bodies[i]))
			req.Header.Set("Content-Type", "application/arsia+json; v=1")
			resp, err := client.Do(req)
			if err != nil {
				failed.Add(1)
				lat[i] = time.Since(due)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat[i] = time.Since(due)
			if resp.StatusCode != wantStatus {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	return summarize(lat, time.Since(start), failed.Load()), nil
}
