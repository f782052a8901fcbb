//go:build unix && !linux

package liveness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// psTimeout bounds how long StartTime waits for ps.
const psTimeout = 10 * time.Second

// StartTime returns when process pid started, in seconds since the Unix
// epoch rounded to 0.01 s.
//
// On Unix systems other than Linux it runs "ps -o lstart= -p PID" with
// LC_ALL=C and TZ=UTC and parses its "Mon Jan  2 15:04:05 2006" output, so
// the result is in whole seconds. It fails if ps cannot be run, reports no
// such process, or does not support lstart (Solaris / illumos ps does
// not); [Check] then falls back to [PIDLiveness].
func StartTime(pid int) (float64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("liveness: invalid pid %d", pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), psTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, psPath(), "-o", "lstart=", "-p", strconv.Itoa(pid))
	// Later entries win, so these override the inherited ones.
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("liveness: start time of pid %d: ps: %w", pid, err)
	}
	sec, err := parseLstart(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("liveness: start time of pid %d: %w", pid, err)
	}
	return roundCentis(sec), nil
}

// psPath returns the system ps, rather than whatever "ps" is first in
// PATH, when it is at a standard place.
func psPath() string {
	for _, p := range []string{"/bin/ps", "/usr/bin/ps"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return "ps"
}

// PIDLiveness reports whether a process with this PID exists, without
// regard to which process it is (see [Check] for that).
//
// pid <= 0 is dead. Otherwise it probes the PID with kill(pid, 0): success
// or EPERM mean alive, ESRCH dead, any other error unknown. A zombie
// (exited, not yet reaped) still counts as alive here.
func PIDLiveness(pid int) aais.Liveness {
	return killLiveness(pid)
}
