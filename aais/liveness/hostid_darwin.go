//go:build darwin

package liveness

import (
	"context"
	"os/exec"
	"time"
)

// machineID returns the IOPlatformUUID of this Mac as reported by
// "ioreg -rd1 -c IOPlatformExpertDevice", or "" if it cannot be read.
func machineID() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/sbin/ioreg", "-rd1", "-c", "IOPlatformExpertDevice").Output()
	if err != nil {
		return ""
	}
	return parseIOPlatformUUID(string(out))
}

// pidNamespace returns "": macOS has no PID namespaces.
func pidNamespace() string { return "" }
