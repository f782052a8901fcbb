//go:build aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris

package handler

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel starts the program in a process group of its own and
// makes cancellation kill the whole group, so that children the program
// started do not outlive a timeout.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The group id is the leader's pid (Setpgid with Pgid 0).
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if err == syscall.ESRCH {
			// The group is gone already; fall back to the process so
			// that exec sees the usual result.
			return cmd.Process.Kill()
		}
		return err
	}
}
