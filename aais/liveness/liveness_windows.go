//go:build windows

package liveness

import (
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"

	"github.com/custos-runtime/custos/aais"
)

// stillActive is STILL_ACTIVE, the exit code GetExitCodeProcess reports
// for a process that has not exited.
const stillActive = 259

// openProcess opens pid for PROCESS_QUERY_LIMITED_INFORMATION.
func openProcess(pid int) (windows.Handle, error) {
	if pid <= 0 || int64(pid) > math.MaxUint32 {
		return 0, windows.ERROR_INVALID_PARAMETER
	}
	return windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
}

// StartTime returns when process pid started, in seconds since the Unix
// epoch rounded to 0.01 s.
//
// On Windows it is the creation time GetProcessTimes reports for the
// process, opened with PROCESS_QUERY_LIMITED_INFORMATION. It fails if the
// process cannot be opened (no such process, or access denied). A process
// that has exited but whose handle is still held elsewhere can still be
// opened and keeps its creation time.
func StartTime(pid int) (float64, error) {
	h, err := openProcess(pid)
	if err != nil {
		return 0, fmt.Errorf("liveness: start time of pid %d: OpenProcess: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	var creation, exit, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &creation, &exit, &kernel, &user); err != nil {
		return 0, fmt.Errorf("liveness: start time of pid %d: GetProcessTimes: %w", pid, err)
	}
	return roundCentis(float64(creation.Nanoseconds()) / float64(time.Second)), nil
}

// PIDLiveness reports whether a process with this PID is running, without
// regard to which process it is (see [Check] for that).
//
// pid <= 0 is dead. Otherwise it opens the process with
// PROCESS_QUERY_LIMITED_INFORMATION: ERROR_INVALID_PARAMETER means no
// process has the PID (dead); ERROR_ACCESS_DENIED means one does but may
// not be queried (alive, like EPERM from kill on Unix); other errors are
// unknown. An opened process is alive while GetExitCodeProcess reports
// STILL_ACTIVE, and dead (exited, its object kept by open handles)
// otherwise. A process that exited with code 259 itself reads as alive;
// Windows offers no way to tell it apart.
func PIDLiveness(pid int) aais.Liveness {
	if pid <= 0 {
		return aais.LivenessDead
	}
	h, err := openProcess(pid)
	switch {
	case errors.Is(err, windows.ERROR_INVALID_PARAMETER):
		return aais.LivenessDead
	case errors.Is(err, windows.ERROR_ACCESS_DENIED):
		return aais.LivenessAlive
	case err != nil:
		return aais.LivenessUnknown
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return aais.LivenessUnknown
	}
	if code == stillActive {
		return aais.LivenessAlive
	}
	return aais.LivenessDead
}

// machineID returns the MachineGuid value of
// HKLM\SOFTWARE\Microsoft\Cryptography, read from the 64-bit registry view
// (where it lives, also for 32-bit processes), or "" if it cannot be read.
func machineID() string {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SOFTWARE\Microsoft\Cryptography`, registry.QUERY_VALUE|registry.WOW64_64KEY)
	if err != nil {
		return ""
	}
	defer k.Close()
	guid, _, err := k.GetStringValue("MachineGuid")
	if err != nil {
		return ""
	}
	return guid
}

// pidNamespace returns "": Windows PIDs are not namespaced in a way that
// can be read here.
func pidNamespace() string { return "" }
