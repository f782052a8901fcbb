//go:build !linux

package crashtest

import "os/exec"

// setDeathSignal does nothing here: only Linux can tie the child's life to
// the driver's; Close still kills every child the driver started.
func setDeathSignal(*exec.Cmd) {}
