package crashtest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill the child when the driver dies, so
// that a driver killed by a test timeout leaves no gateway behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
