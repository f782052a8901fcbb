//go:build !linux && !darwin && !windows

package liveness

// machineID returns "": no machine id is read on this system, so HostID
// uses the host name.
func machineID() string { return "" }

// pidNamespace returns "": PID namespaces are not detected on this system.
func pidNamespace() string { return "" }
