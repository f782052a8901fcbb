package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/aais"
)

func newBenchSSECommand() *cobra.Command {
	var o sseOptions
	var bare bool
	cmd := &cobra.Command{
		Use:   "sse",
		Short: "Reviewers' SSE event streams: custos serve next to a bare SSE server, at --subscribers streams",
		Long: `Open --subscribers SSE streams at once, each on its own loopback connection, first
to a bare SSE server (net/http; a publish is written to every stream from
memory, nothing else) and to custos serve (GET /approvals/events with the
reviewers' login token, the default SQLite store), then create --approvals
approvals one after the other (POST /approvals/requests on custos serve, a
publish of the same envelope on the bare server) and time when each stream
receives each one. Each server runs as a child process, fresh for each run;
the runs alternate between the two servers (--runs of each). Prints, for
both and as ratios, the p50 and p99 delivery latency (from sending the
approval to a stream receiving it), the streams that missed an approval
(none received within --wait), the server's RSS with every stream open and
its peak RSS (VmRSS, VmHWM), and the time to open every stream (until each
has received its first event), each the median over the runs. It raises
its open-file limit (and its children's) as far as it can.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bare {
				return serveBareSSE(cmd.Context(), cmd.OutOrStdout())
			}
			if o.subscribers < 1 || o.approvals < 1 || o.runs < 1 || o.wait <= 0 || o.interval < 0 {
				return usageError{errors.New("--subscribers, --approvals, --runs and --wait must be positive, --interval not negative")}
			}
			return benchSSE(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().IntVar(&o.subscribers, "subscribers", 1000, "SSE streams open at once, one connection each")
	cmd.Flags().IntVar(&o.approvals, "approvals", 5, "approvals created per run, one after the other")
	cmd.Flags().IntVar(&o.runs, "runs", 3, "runs of each server, alternating")
	cmd.Flags().DurationVar(&o.wait, "wait", 10*time.Second, "how long every stream has to receive an approval before it counts as missed")
	cmd.Flags().DurationVar(&o.interval, "interval", 300*time.Millisecond, "pause between two approvals, once every stream has the first")
	cmd.Flags().BoolVar(&bare, "serve-bare", false, "run the bare SSE server (internal: a child process of the benchmark)")
	_ = cmd.Flags().MarkHidden("serve-bare")
	return cmd
}

type sseOptions struct {
	subscribers, approvals, runs int
	wait, interval               time.Duration
}

// sseRun is what one run of one server measured.
type sseRun struct {
	latencies []time.Duration // every (stream, approval) received
	missed    int             // streams that missed at least one approval
	refused   int             // streams that could not be opened
	connect   time.Duration   // until every stream had its first event
	rss, peak int64           // kB: with every stream open; the high-water mark
}

func benchSSE(ctx context.Context, out io.Writer, o sseOptions) error {
	limit := raiseFileLimit(uint64(o.subscribers) + 4096)
	dir, err := os.MkdirTemp("", "custos-bench-sse-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(out, "%d SSE streams, one loopback connection each; %d approvals per run, %d runs of each server, alternating (open files: %d; load %s)\n",
		o.subscribers, o.approvals, o.runs, limit, strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	names := []string{"bare SSE", "custos serve"}
	results := [2][]sseRun{}
	for run := range o.runs {
		order := []int{0, 1}
		if run%2 == 1 {
			order = []int{1, 0}
		}
		for _, which := range order {
			r, err := sseOne(ctx, dir, run, which == 1, o)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", names[which], run+1, err)
			}
			p50, p99 := percentile(r.latencies, 50), percentile(r.latencies, 99)
			fmt.Fprintf(out, "  run %d %-13s p50 %-9v p99 %-9v missed %d/%d refused %d  RSS %.1f MiB (peak %.1f MiB)  connect %v\n",
				run+1, names[which], p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), r.missed, o.subscribers, r.refused,
				float64(r.rss)/1024, float64(r.peak)/1024, r.connect.Round(10*time.Millisecond))
			results[which] = append(results[which], r)
		}
	}
	type row struct {
		p50, p99, connect time.Duration
		missed, refused   int
		rss, peak         int64
	}
	var med [2]row
	for i, rs := range results {
		var p50s, p99s, conns []time.Duration
		var missed, refused []int
		var rss, peak []int64
		for _, r := range rs {
			p50s = append(p50s, percentile(r.latencies, 50))
			p99s = append(p99s, percentile(r.latencies, 99))
			conns = append(conns, r.connect)
			missed, refused = append(missed, r.missed), append(refused, r.refused)
			rss, peak = append(rss, r.rss), append(peak, r.peak)
		}
		med[i] = row{median(p50s), median(p99s), median(conns), median(missed), median(refused), median(rss), median(peak)}
	}
	fmt.Fprintf(out, "  median of %d runs  %-10s %-10s %-14s %-12s %-12s %s\n", o.runs, "p50", "p99", "missed", "RSS", "peak RSS", "connect")
	for i, m := range med {
		fmt.Fprintf(out, "  %-17s %-10v %-10v %-14s %-12s %-12s %v\n", names[i], m.p50.Round(100*time.Microsecond), m.p99.Round(100*time.Microsecond),
			fmt.Sprintf("%d/%d", m.missed, o.subscribers), fmt.Sprintf("%.1f MiB", float64(m.rss)/1024), fmt.Sprintf("%.1f MiB", float64(m.peak)/1024),
			m.connect.Round(10*time.Millisecond))
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	c, b := med[1], med[0]
	fmt.Fprintf(out, "  ratio (custos/bare) p50 %s  p99 %s  RSS %s  peak RSS %s  connect %s  missed %d vs %d\n",
		ratio(float64(c.p50), float64(b.p50)), ratio(float64(c.p99), float64(b.p99)), ratio(float64(c.rss), float64(b.rss)),
		ratio(float64(c.peak), float64(b.peak)), ratio(float64(c.connect), float64(b.connect)), c.missed, b.missed)
	return nil
}

// raiseFileLimit raises the open-file limit towards want (the children
// inherit it) and returns the soft limit in force.
func raiseFileLimit(want uint64) uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0
	}
	if l.Max < want {
		// Only a privileged process may raise the hard limit.
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}) == nil {
			return want
		}
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

func median[T int | int64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

var sseToken = regexp.MustCompile(`login token (\S+)`)

// sseOne runs one server child, opens every stream, creates the
// approvals and measures.
func sseOne(ctx context.Context, dir string, run int, custos bool, o sseOptions) (sseRun, error) {
	var res sseRun
	args := []string{"bench", "sse", "--serve-bare"}
	if custos {
		data := filepath.Join(dir, fmt.Sprintf("data-%d", run))
		cfgPath := filepath.Join(dir, fmt.Sprintf("custos-%d.yaml", run))
		// The transport's cap on open connections (1024 by default)
		// would keep most streams waiting in the backlog.
		cfg := fmt.Sprintf("listen: 127.0.0.1:0\ndata: %s\nagent: agent:bench.sse\nlimits:\n  connections: %d\n", data, o.subscribers+1024)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			return res, err
		}
		args = []string{"serve", "--config", cfgPath}
	}
	child, err := startChild(ctx, dir, args, custos)
	if err != nil {
		return res, err
	}
	defer child.stop()
	target := sseTarget{addr: child.addr, token: child.token, custos: custos}

	// One stream and one approval first: the server is up and warm.
	warm, err := target.open(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("warm-up stream: %w", err)
	}
	if _, err := target.create(ctx, fmt.Sprintf("apr_bench_%d_warm", run)); err != nil {
		warm.close()
		return res, fmt.Errorf("warm-up approval: %w", err)
	}
	warm.close()

	seen := new(sseSeen)
	streams := make([]*sseStream, o.subscribers)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256) // dials in flight
	var refused atomic.Int64
	for i := range streams {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s, err := target.open(ctx, seen)
			if err != nil {
				refused.Add(1)
				return
			}
			streams[i] = s
		})
	}
	wg.Wait()
	res.connect = time.Since(start)
	res.refused = int(refused.Load())
	defer func() {
		for _, s := range streams {
			if s != nil {
				s.close()
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // let the server settle
	if res.rss, err = procStatus(child.pid, "VmRSS:"); err != nil {
		return res, err
	}

	for k := range o.approvals {
		t0 := time.Now()
		seq, err := target.create(ctx, fmt.Sprintf("apr_bench_%d_%d", run, k))
		if err != nil {
			return res, fmt.Errorf("approval %d: %w", k, err)
		}
		got := seen.counter(seq)
		deadline := t0.Add(o.wait)
		for got.Load() < int64(o.subscribers-res.refused) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		for _, s := range streams {
			if s == nil {
				continue
			}
			if at, ok := s.at(seq); ok {
				res.latencies = append(res.latencies, at.Sub(t0))
			} else {
				s.missed = true
			}
		}
		time.Sleep(o.interval)
	}
	for _, s := range streams {
		if s == nil || s.missed {
			res.missed++
		}
	}
	if res.peak, err = procStatus(child.pid, "VmHWM:"); err != nil {
		return res, err
	}
	return res, nil
}

type sseChild struct {
	pid         int
	addr, token string
	stop        func()
}

// startChild starts a server child and reads its address (and, for
// custos serve, the reviewers' login token) from its output.
func startChild(ctx context.Context, dir string, args []string, custos bool) (*sseChild, error) {
	cmd, err := floodCommand(args...)
	if err != nil {
		return nil, err
	}
	logf, err := os.CreateTemp(dir, "server-*.log")
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	exited := make(chan struct{})
	c := &sseChild{pid: cmd.Process.Pid}
	c.stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			if m := floodListening.FindStringSubmatch(sc.Text()); m != nil && c.addr == "" {
				c.addr = m[1]
			}
			if m := sseToken.FindStringSubmatch(sc.Text()); m != nil {
				c.token = m[1]
			}
			if !once && c.addr != "" && (!custos || c.token != "") {
				once = true
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-ready:
		return c, nil
	case <-exited:
		logf.Close()
		return nil, fmt.Errorf("the server exited before listening (log in %s)", logf.Name())
	case <-time.After(30 * time.Second):
		c.stop()
		return nil, errors.New("the server did not start within 30 s")
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
}

// sseSeen counts, for each sequence, the streams that received it
// (sequences past the array, which a benchmark never reaches, are not
// counted).
type sseSeen struct {
	bySeq [4096]atomic.Int64
}

func (s *sseSeen) counter(seq uint64) *atomic.Int64 {
	if seq >= uint64(len(s.bySeq)) {
		return new(atomic.Int64)
	}
	return &s.bySeq[seq]
}

type sseTarget struct {
	addr, token string
	custos      bool
}

// sseStream is one open stream and when it received each event.
type sseStream struct {
	conn   net.Conn
	mu     sync.Mutex
	times  map[uint64]time.Time
	missed bool
}

func (s *sseStream) at(seq uint64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.times[seq]
	return t, ok
}

func (s *sseStream) close() { _ = s.conn.Close() }

// open opens one stream and returns once its first event arrived; seen,
// when not nil, counts the events it receives after that.
func (t sseTarget) open(ctx context.Context, seen *sseSeen) (*sseStream, error) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	path := "/events"
	if t.custos {
		path = "/approvals/events"
	}
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", path, t.addr, t.token); err != nil {
		conn.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("%s", resp.Status)
	}
	s := &sseStream{conn: conn, times: map[uint64]time.Time{}}
	br := bufio.NewReaderSize(resp.Body, 4096)
	// The first event (the snapshot; the bare server's hello).
	if _, _, err := readSSE(br); err != nil {
		conn.Close()
		return nil, fmt.Errorf("first event: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	if seen == nil {
		return s, nil
	}
	go func() {
		defer resp.Body.Close()
		for {
			id, typ, err := readSSE(br)
			if err != nil {
				return
			}
			if typ != string(aais.TypeRequested) {
				continue
			}
			seq, err := strconv.ParseUint(id, 10, 64)
			if err != nil {
				continue
			}
			now := time.Now()
			s.mu.Lock()
			s.times[seq] = now
			s.mu.Unlock()
			seen.counter(seq).Add(1)
		}
	}()
	return s, nil
}

// readSSE reads one event's id and type, skipping its data (which may be
// longer than the buffer) and comments.
func readSSE(br *bufio.Reader) (id, typ string, err error) {
	for {
		line, err := br.ReadSlice('\n')
		full := err == nil
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return "", "", err
		}
		switch {
		case full && len(line) == 1:
			if typ != "" {
				return id, typ, nil
			}
		case bytes.HasPrefix(line, []byte("id: ")):
			id = strings.TrimSpace(string(line[4:]))
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = strings.TrimSpace(string(line[7:]))
		}
		for !full { // the rest of a long line
			_, err = br.ReadSlice('\n')
			full = err == nil
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return "", "", err
			}
		}
	}
}

// create creates one approval (custos serve) or publishes the same
// envelope (the bare server) and returns its sequence.
func (t sseTarget) create(ctx context.Context, id string) (uint64, error) {
	body, err := benchApproval(id)
	if err != nil {
		return 0, err
	}
	path := "/publish"
	if t.custos {
		path = "/approvals/requests"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+t.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("%s: %s", resp.Status, b)
	}
	var v struct {
		Sequence uint64 `json:"sequence"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Sequence == 0 {
		return 0, fmt.Errorf("no sequence in the answer: %s", b)
	}
	return v.Sequence, nil
}

// benchApproval is an approval.requested envelope as a harness submits it.
func benchApproval(id string) ([]byte, error) {
	now := time.Now()
	action, err := json.Marshal(map[string]any{"kind": "process.exec", "name": "shell.exec",
		"summary": "Run the test suite of the payments service", "resource": "repo:payments",
		"arguments": map[string]any{"command": "go test ./...", "cwd": "/srv/payments"}})
	if err != nil {
		return nil, err
	}
	r, err := aais.NewRequest(aais.RequestParams{
		ID: id, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		Origin: aais.Origin{Harness: "bench", SessionID: "s-1", RunID: "run-" + id},
		Action: json.RawMessage(action),
		Risk:   aais.Risk{Level: aais.RiskMedium, Reasons: []string{"Executes a local process"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
		},
	})
	if err != nil {
		return nil, err
	}
	m, err := aais.NewMessage(aais.Header{OccurredAt: now, Stream: "bench"}, r)
	if err != nil {
		return nil, err
	}
	return aais.Marshal(m)
}

// procStatus reads one kB field of /proc/PID/status.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("RSS: %w (bench sse needs Linux's /proc)", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("RSS: no %s in /proc/PID/status", field)
}

// serveBareSSE is the baseline: a net/http server that writes each
// published body to every open stream, from memory, and nothing else (no
// authentication, no store).
func serveBareSSE(ctx context.Context, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		subs = map[chan []byte]struct{}{}
		seq  uint64
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		fl, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "no streaming", http.StatusInternalServerError)
			return
		}
		ch := make(chan []byte, 64)
		mu.Lock()
		subs[ch] = struct{}{}
		mu.Unlock()
		defer func() {
			mu.Lock()
			delete(subs, ch)
			mu.Unlock()
		}()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: hello\ndata: {}\n\n")
		fl.Flush()
		beat := time.NewTicker(15 * time.Second)
		defer beat.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case b := <-ch:
				if _, err := w.Write(b); err != nil {
					return
				}
			case <-beat.C:
				if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
					return
				}
			}
			fl.Flush()
		}
	})
	mux.HandleFunc("POST /publish", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seq++
		n := seq
		frame := fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", n, aais.TypeRequested, bytes.TrimSpace(body))
		for ch := range subs {
			select {
			case ch <- frame:
			default: // a full stream loses it (the bare server keeps no log)
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"sequence":%d}`, n)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second}
	fmt.Fprintf(out, "bare SSE server: listening on http://%s\n", ln.Addr())
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
