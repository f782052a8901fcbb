//go:build linux

package liveness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/custos-runtime/custos/aais"
)

// StartTime returns when process pid started, in seconds since the Unix
// epoch rounded to 0.01 s.
//
// On Linux it is the boot time ("btime" in /proc/stat, whole seconds) plus
// the process's starttime (field 22 of /proc/<pid>/stat, in clock ticks
// since boot) divided by the clock tick rate. The rate is AT_CLKTCK from
// this process's ELF auxiliary vector (the value sysconf(_SC_CLK_TCK)
// returns, which Go cannot call without cgo), read from the Go runtime's
// copy or /proc/self/auxv; if neither is available it is taken to be 100,
// which is what the kernel reports (USER_HZ) on every architecture Go
// supports. The boot time moves when the wall clock is stepped, so start
// times read before and after a clock step differ by the step; see
// [StartTimeTolerance].
//
// It fails if /proc/<pid>/stat cannot be read, for instance because no
// such process exists or /proc is mounted with hidepid.
func StartTime(pid int) (float64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("liveness: invalid pid %d", pid)
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("liveness: start time of pid %d: %w", pid, err)
	}
	st, err := parseStat(data)
	if err != nil {
		return 0, fmt.Errorf("liveness: start time of pid %d: %w", pid, err)
	}
	statData, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("liveness: boot time: %w", err)
	}
	btime, err := parseBootTime(statData)
	if err != nil {
		return 0, err
	}
	return roundCentis(float64(btime) + float64(st.startTicks)/float64(clockTicks())), nil
}

// defaultClockTicks is USER_HZ, the unit of /proc/<pid>/stat starttime on
// all Linux architectures Go supports; used when AT_CLKTCK is unavailable.
const defaultClockTicks = 100

// clockTicks returns the clock tick rate, as StartTime documents.
var clockTicks = sync.OnceValue(func() uint64 {
	if pairs, err := unix.Auxv(); err == nil {
		if v, ok := auxvLookup(pairs, atClkTck); ok && v > 0 {
			return uint64(v)
		}
	}
	if data, err := os.ReadFile("/proc/self/auxv"); err == nil {
		if v, ok := auxvLookup(parseAuxv(data), atClkTck); ok && v > 0 {
			return uint64(v)
		}
	}
	return defaultClockTicks
})

// PIDLiveness reports whether a process with this PID exists in this PID
// namespace, without regard to which process it is (see [Check] for that).
//
// pid <= 0 is dead. Otherwise it probes the PID with kill(pid, 0): success
// or EPERM mean alive, ESRCH dead, any other error unknown. A process
// that kill finds but that /proc/<pid>/stat shows to be a zombie (state Z)
// or dead (X, x) has exited and is reported dead.
func PIDLiveness(pid int) aais.Liveness {
	l := killLiveness(pid)
	if l != aais.LivenessAlive {
		return l
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		// The process may have been reaped since kill found it (then
		// kill now says so), or /proc hides it (hidepid) or is not
		// mounted (then kill's answer stands).
		return killLiveness(pid)
	}
	if st, err := parseStat(data); err == nil && st.dead() {
		return aais.LivenessDead
	}
	return aais.LivenessAlive
}

// machineID returns the systemd / D-Bus machine id, or "" if there is none.
func machineID() string {
	for _, path := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// systemd writes "uninitialized" while first boot is in progress.
		if id := strings.TrimSpace(string(data)); id != "" && id != "uninitialized" {
			return id
		}
	}
	return ""
}

// pidNamespace returns the target of /proc/self/ns/pid, such as
// "pid:[4026531836]", or "" if it cannot be read.
func pidNamespace() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}
