//go:build unix

package liveness

import (
	"errors"
	"math"

	"golang.org/x/sys/unix"

	"github.com/custos-runtime/custos/aais"
)

// killLiveness probes pid with kill(pid, 0), which checks whether a signal
// could be sent without sending one: success or EPERM (the process exists
// but belongs to someone else) mean a process holds the PID, ESRCH that
// none does. pid <= 0 would address a process group or every process, so
// it is reported dead, as is a pid too large for pid_t, which no process
// can have.
func killLiveness(pid int) aais.Liveness {
	if pid <= 0 || int64(pid) > math.MaxInt32 {
		return aais.LivenessDead
	}
	err := unix.Kill(pid, 0)
	switch {
	case err == nil, errors.Is(err, unix.EPERM):
		return aais.LivenessAlive
	case errors.Is(err, unix.ESRCH):
		return aais.LivenessDead
	}
	return aais.LivenessUnknown
}
