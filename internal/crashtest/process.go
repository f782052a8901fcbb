package crashtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// replica is one `custos serve` child process and what the driver knows
// about it: the URL it listens on while it is up.
type replica struct {
	name       string // its instance name on a shared store; for messages otherwise
	binary     string
	configPath string
	logPath    string // its stdout and stderr, appended across restarts

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been waited for
	url    atomic.Pointer[string]
	starts int
}

var listeningRE = regexp.MustCompile(`listening on (http://\S+)`)

// base is the replica's URL, "" while it is down or starting.
func (r *replica) base() string {
	if p := r.url.Load(); p != nil {
		return *p
	}
	return ""
}

// start runs the child and returns once it answers /readyz with 200, or
// fails after timeout (the child is killed then).
func (r *replica) start(ctx context.Context, timeout time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return fmt.Errorf("%s: already running", r.name)
	}
	logf, err := os.OpenFile(r.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	r.starts++
	fmt.Fprintf(logf, "=== start %d at %s\n", r.starts, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(r.binary, "serve", "--config", r.configPath)
	cmd.Env = childEnv()
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: starting %s: %w", r.name, r.binary, err)
	}
	r.cmd = cmd
	done := make(chan struct{})
	r.done = done
	urls := make(chan string, 1)
	go func() {
		// Copy stdout to the log, catching the listening line on the way.
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := listeningRE.FindStringSubmatch(line); m != nil && !sent {
				urls <- m[1]
				sent = true
			}
		}
		_, _ = io.Copy(logf, stdout)
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var url string
	select {
	case url = <-urls:
	case <-done:
		r.cmd = nil
		return fmt.Errorf("%s exited while starting (%v); see %s", r.name, cmd.ProcessState, r.logPath)
	case <-deadline.C:
		r.killLocked()
		return fmt.Errorf("%s printed no listening line within %s; see %s", r.name, timeout, r.logPath)
	case <-ctx.Done():
		r.killLocked()
		return ctx.Err()
	}
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	for {
		resp, err := client.Get(url + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				r.url.Store(&url)
				return nil
			}
		}
		select {
		case <-done:
			r.cmd = nil
			return fmt.Errorf("%s exited before it was ready (%v); see %s", r.name, cmd.ProcessState, r.logPath)
		case <-deadline.C:
			r.killLocked()
			return fmt.Errorf("%s not ready within %s; see %s", r.name, timeout, r.logPath)
		case <-ctx.Done():
			r.killLocked()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone. It is a no-op
// when the replica is not running.
func (r *replica) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killLocked()
}

func (r *replica) killLocked() {
	r.url.Store(nil)
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
	r.cmd = nil
}

// stop asks the process to end (SIGTERM, as an operator would) and kills
// it if it has not within grace. It reports whether it ended on its own.
func (r *replica) stop(grace time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.url.Store(nil)
	if r.cmd == nil {
		return nil
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
		st := r.cmd.ProcessState
		r.cmd = nil
		if st != nil && !st.Success() {
			return fmt.Errorf("%s ended with %v after SIGTERM; see %s", r.name, st, r.logPath)
		}
		return nil
	case <-time.After(grace):
		r.killLocked()
		return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed; see %s", r.name, grace, r.logPath)
	}
}

// childEnv is the driver's environment without CUSTOS_* variables: the
// children's configuration comes from their files only.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUSTOS_") {
			env = append(env, kv)
		}
	}
	return env
}

// runBinary runs the custos binary to completion (bounded by timeout) and
// returns its combined output.
func runBinary(ctx context.Context, binary string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w (after %s)", ctx.Err(), timeout)
	}
	return string(out), err
}
