//go:build linux

package liveness

import (
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/custos-runtime/custos/aais"
)

// TestZombieIsDead checks that a child that has exited but not been reaped
// (a zombie, which kill(pid, 0) still finds) is reported dead.
func TestZombieIsDead(t *testing.T) {
	cmd := startHelper(t)
	pid := cmd.Process.Pid
	start, err := StartTime(pid)
	if err != nil {
		t.Fatalf("StartTime(child): %v", err)
	}
	id := aais.ProcessIdentity{PID: pid, StartTime: start, HostID: HostID()}
	if got := Check(id); got != aais.LivenessAlive {
		t.Fatalf("Check(running child) = %v, want alive", got)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	// Wait for the child to exit but leave it unreaped (WNOWAIT).
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		t.Fatalf("waitid: %v", err)
	}
	if err := unix.Kill(pid, 0); err != nil {
		t.Fatalf("kill(zombie, 0) = %v; want it still found", err)
	}
	if got := PIDLiveness(pid); got != aais.LivenessDead {
		t.Errorf("PIDLiveness(zombie) = %v, want dead", got)
	}
	if got := Check(id); got != aais.LivenessDead {
		t.Errorf("Check(zombie) = %v, want dead", got)
	}
	_ = cmd.Wait()
	if got := Check(id); got != aais.LivenessDead {
		t.Errorf("Check(reaped) = %v, want dead", got)
	}
}

// TestClockTicks compares the clock tick rate with getconf's, when
// available.
func TestClockTicks(t *testing.T) {
	hz := clockTicks()
	if hz == 0 {
		t.Fatal("clockTicks() = 0")
	}
	if pairs, err := unix.Auxv(); err != nil {
		t.Logf("unix.Auxv: %v", err)
	} else if v, ok := auxvLookup(pairs, atClkTck); ok && uint64(v) != hz {
		t.Errorf("clockTicks() = %d, runtime auxv AT_CLKTCK = %d", hz, v)
	}
	if data, err := os.ReadFile("/proc/self/auxv"); err == nil {
		if v, ok := auxvLookup(parseAuxv(data), atClkTck); ok && uint64(v) != hz {
			t.Errorf("clockTicks() = %d, /proc/self/auxv AT_CLKTCK = %d", hz, v)
		}
	}
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		t.Logf("getconf CLK_TCK: %v; clockTicks() = %d", err, hz)
		return
	}
	want, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("getconf CLK_TCK output %q: %v", out, err)
	}
	t.Logf("clockTicks() = %d, getconf CLK_TCK = %d", hz, want)
	if hz != want {
		t.Errorf("clockTicks() = %d, getconf CLK_TCK = %d", hz, want)
	}
}

// TestStartTimeMatchesPS cross-checks the /proc computation against ps,
// which is also how other Unix systems read start times.
func TestStartTimeMatchesPS(t *testing.T) {
	ps, err := exec.LookPath("ps")
	if err != nil {
		t.Skip("no ps")
	}
	pid := os.Getpid()
	cmd := exec.Command(ps, "-o", "lstart=", "-p", strconv.Itoa(pid))
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("ps -o lstart: %v", err)
	}
	fromPS, err := parseLstart(strings.TrimSpace(string(out)))
	if err != nil {
		t.Skipf("ps output not in the expected form (busybox ps?): %v", err)
	}
	fromProc, err := StartTime(pid)
	if err != nil {
		t.Fatalf("StartTime: %v", err)
	}
	// ps truncates to whole seconds.
	if math.Abs(fromProc-fromPS) > StartTimeTolerance {
		t.Errorf("StartTime(own pid) = %v, ps lstart = %v", fromProc, fromPS)
	}
}
