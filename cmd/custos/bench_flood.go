package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
)

// floodCommand starts a child process of this program (the servers
// bench flood measures run in their own process, so that their peak RSS
// is theirs alone); tests replace it.
var floodCommand = func(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, args...), nil
}

func newBenchFloodCommand() *cobra.Command {
	var conns, body int
	var maxRSS int
	var bare bool
	var spread time.Duration
	cmd := &cobra.Command{
		Use:   "flood",
		Short: "Concurrent unsigned maximum-size bodies: peak RSS of custos serve next to a bare net/http server",
		Long: `Send --connections requests at once, each on its own loopback connection, each
a --body bytes ARSIA request signed by a key the gateway does not trust (what
anyone can send), written in 16 pieces over --send-time (as a slow client
would, so that every body is in flight at the same time), first to a bare net/http server that reads every body into
memory (io.ReadAll, as a handler without limits does), then to custos serve
with the default limits. Each server runs as a child process; its peak RSS
(VmHWM in /proc/PID/status) is read after the flood. Prints both, their ratio
and how each request was answered. With --max-rss, fails when the gateway's
peak RSS exceeds that many MiB.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bare {
				return serveBare(cmd.Context(), cmd.OutOrStdout())
			}
			if conns < 1 || body < 64 || spread < 0 {
				return usageError{errors.New("--connections must be positive, --body at least 64 bytes, --send-time not negative")}
			}
			return benchFlood(cmd.Context(), cmd.OutOrStdout(), floodOptions{conns: conns, size: body, maxRSS: maxRSS, spread: spread})
		},
	}
	cmd.Flags().IntVar(&conns, "connections", 1000, "concurrent requests, one connection each")
	cmd.Flags().IntVar(&body, "body", 1<<20, "bytes per request body (the gateway's max_body is 1 MiB)")
	cmd.Flags().DurationVar(&spread, "send-time", 2*time.Second, "each body is written in 16 pieces spread over this long, so that all are in flight at once")
	cmd.Flags().IntVar(&maxRSS, "max-rss", 0, "fail when the gateway's peak RSS exceeds this many MiB (0: report only)")
	cmd.Flags().BoolVar(&bare, "serve-bare", false, "run the bare server (internal: the child process of the flood)")
	_ = cmd.Flags().MarkHidden("serve-bare")
	return cmd
}

// serveBare is the baseline: a net/http server with no limits whose
// handler reads each body into memory, then refuses it.
func serveBare(ctx context.Context, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"status":401,"read":%d}`, len(b))
	})}
	fmt.Fprintf(out, "bare server: listening on http://%s\n", ln.Addr())
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type floodResult struct {
	name         string
	before, peak int64 // VmHWM, kB
	answers      map[string]int
	elapsed      time.Duration
}

type floodOptions struct {
	conns, size, maxRSS int
	spread              time.Duration
}

func benchFlood(ctx context.Context, out io.Writer, o floodOptions) error {
	conns, size, maxRSS := o.conns, o.size, o.maxRSS
	dir, err := os.MkdirTemp("", "custos-flood-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	body, err := floodBody(size)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "custos.yaml")
	cfg := "listen: 127.0.0.1:0\ndata: " + filepath.Join(dir, "data") + "\nagent: agent:bench.gateway\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d concurrent requests of %d bytes (signed by an untrusted key), one loopback connection each, each sent over %v\n", conns, size, o.spread)
	var results []floodResult
	for _, target := range []struct {
		name string
		args []string
	}{
		{"bare net/http", []string{"bench", "flood", "--serve-bare"}},
		{"custos serve", []string{"serve", "--config", cfgPath}},
	} {
		r, err := floodOne(ctx, dir, target.name, target.args, body, conns, o.spread)
		if err != nil {
			return fmt.Errorf("%s: %w", target.name, err)
		}
		results = append(results, r)
	}
	mib := func(kb int64) string { return fmt.Sprintf("%7.1f MiB", float64(kb)/1024) }
	fmt.Fprintf(out, "  %-14s %-12s %-12s %-9s %s\n", "", "peak RSS", "idle RSS", "elapsed", "answers")
	for _, r := range results {
		fmt.Fprintf(out, "  %-14s %s  %s  %-9v %s\n", r.name, mib(r.peak), mib(r.before), r.elapsed.Round(10*time.Millisecond), answerSummary(r.answers))
	}
	fmt.Fprintf(out, "  ratio          %.3fx the bare server's peak RSS\n", float64(results[1].peak)/float64(results[0].peak))
	if maxRSS > 0 && results[1].peak > int64(maxRSS)*1024 {
		return fmt.Errorf("custos serve peaked at %.1f MiB, above --max-rss %d MiB", float64(results[1].peak)/1024, maxRSS)
	}
	return nil
}

// floodBody is an ARSIA request of exactly size bytes, padded in its
// arguments, signed by a key no gateway trusts.
func floodBody(size int) ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := sig.NewEd25519Signer(priv.Seed())
	if err != nil {
		return nil, err
	}
	build := func(pad int) ([]byte, error) {
		e, err := arsia.NewRequest("agent:flood.anyone", "agent:bench.gateway", []string{"bench.echo"}, "com.bench/echo",
			map[string]any{"pad": strings.Repeat("x", pad)}, arsia.BuildOptions{Now: time.Now(), TTL: time.Hour})
		if err != nil {
			return nil, err
		}
		env, err := e.Map()
		if err != nil {
			return nil, err
		}
		signed, err := sig.Sign(env, signer, "agent:flood.anyone#k")
		if err != nil {
			return nil, err
		}
		return json.Marshal(signed)
	}
	b, err := build(0)
	if err != nil {
		return nil, err
	}
	if len(b) > size {
		return nil, fmt.Errorf("--body %d: the smallest request is %d bytes", size, len(b))
	}
	// The signature's length does not depend on the padding.
	if b, err = build(size - len(b)); err != nil {
		return nil, err
	}
	if len(b) != size {
		return nil, fmt.Errorf("built a %d-byte body, want %d", len(b), size)
	}
	return b, nil
}

var floodListening = regexp.MustCompile(`listening on http://(\S+)`)

// floodOne starts a server child, floods it and reads its peak RSS.
func floodOne(ctx context.Context, dir, name string, args []string, body []byte, conns int, spread time.Duration) (floodResult, error) {
	res := floodResult{name: name, answers: map[string]int{}}
	cmd, err := floodCommand(args...)
	if err != nil {
		return res, err
	}
	logf, err := os.CreateTemp(dir, "server-*.log")
	if err != nil {
		return res, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	exited := make(chan struct{})
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if m := floodListening.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addrCh <- m[1]
				sent = true
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	defer stop()
	var addr string
	select {
	case addr = <-addrCh:
	case <-exited:
		return res, fmt.Errorf("the server exited before listening (log in %s)", logf.Name())
	case <-time.After(30 * time.Second):
		return res, errors.New("the server did not start within 30 s")
	}
	// One request first: the server is up and its code paths are warm.
	if _, err := floodSend(ctx, addr, body); err != nil {
		return res, fmt.Errorf("warm-up request: %w", err)
	}
	if res.before, err = vmHWM(cmd.Process.Pid); err != nil {
		return res, err
	}

	// Every connection is open before any body is sent.
	dialed := make([]net.Conn, conns)
	for i := range dialed {
		if dialed[i], err = net.DialTimeout("tcp", addr, 10*time.Second); err != nil {
			for _, c := range dialed[:i] {
				c.Close()
			}
			return res, fmt.Errorf("dial %d: %w", i, err)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range dialed {
		wg.Go(func() {
			answer := floodOn(c, addr, body, spread)
			mu.Lock()
			res.answers[answer]++
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	// Let the server finish what it answered early (a read cut off by its
	// answer), then read the high-water mark.
	time.Sleep(200 * time.Millisecond)
	if res.peak, err = vmHWM(cmd.Process.Pid); err != nil {
		return res, err
	}
	return res, nil
}

// floodSend sends one request on a new connection (the warm-up).
func floodSend(ctx context.Context, addr string, body []byte) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	return floodOn(c, addr, body, 0), nil
}

// floodOn writes one request on c, its body in 16 pieces over spread,
// while reading its answer, and closes c. The answer is the status code,
// or what went wrong.
func floodOn(c net.Conn, addr string, body []byte, spread time.Duration) string {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	head := "POST /v1/arsia/inbox HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/arsia+json; v=1\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n"
	go func() {
		// A server that answers before reading the body may close the
		// connection under this write: the answer is what counts.
		if _, err := io.WriteString(c, head); err != nil {
			return
		}
		const pieces = 16
		for i := range pieces {
			if i > 0 {
				time.Sleep(spread / pieces)
			}
			if _, err := c.Write(body[i*len(body)/pieces : (i+1)*len(body)/pieces]); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return "timeout"
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return "closed"
		default:
			return "reset"
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

func answerSummary(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d×%s", m[k], k)
	}
	return strings.Join(parts, " ")
}

// vmHWM reads a process's peak resident set size in kB.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w (bench flood needs Linux's /proc)", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, errors.New("peak RSS: no VmHWM in /proc/PID/status")
}
