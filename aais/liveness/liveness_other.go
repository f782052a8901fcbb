//go:build !unix && !windows

package liveness

import (
	"errors"
	"fmt"
	"os"

	"github.com/custos-runtime/custos/aais"
)

// StartTime returns when process pid started, in seconds since the Unix
// epoch rounded to 0.01 s.
//
// On this system process start times cannot be read: it always fails with
// an error wrapping [errors.ErrUnsupported].
func StartTime(pid int) (float64, error) {
	return 0, fmt.Errorf("liveness: start time of pid %d: %w", pid, errors.ErrUnsupported)
}

// PIDLiveness reports whether a process with this PID is running, without
// regard to which process it is (see [Check] for that).
//
// On this system other processes cannot be probed: this process's own PID
// is alive, any other pid <= 0 is dead, and every other PID is unknown.
func PIDLiveness(pid int) aais.Liveness {
	switch {
	case pid == os.Getpid():
		return aais.LivenessAlive
	case pid <= 0:
		return aais.LivenessDead
	}
	return aais.LivenessUnknown
}
