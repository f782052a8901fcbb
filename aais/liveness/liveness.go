// Package liveness tells whether the process that owns an aais request is
// still running.
//
// A request records the [aais.ProcessIdentity] of the process that created
// it and waits to run its action. Other processes sharing the same store
// call [Check] on that identity to learn whether the owner is still there.
// A PID alone is not enough, because operating systems reuse PIDs: a dead
// owner's PID may by now belong to an unrelated process. The identity
// therefore also carries the process's start time, and [Check] reports a
// PID whose current process started at another time as dead. It also
// carries a [HostID] naming the host and PID namespace, since a PID means
// nothing outside the namespace it was issued in; [Check] never reports an
// identity from another host as dead, only as unknown.
//
// How each piece is read depends on the operating system:
//
//   - Linux (and Android): start times come from /proc (boot time from
//     /proc/stat plus the starttime field of /proc/<pid>/stat), liveness
//     from kill(pid, 0), with zombies counted as dead.
//   - Other Unix systems (macOS, the BSDs, ...): start times come from
//     "ps -o lstart=", liveness from kill(pid, 0).
//   - Windows: OpenProcess with GetProcessTimes and GetExitCodeProcess.
//   - Anything else (plan9, js, wasip1): start times are unavailable and
//     liveness is unknown, except that pid <= 0 is dead and this process
//     is alive.
package liveness

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/custos-runtime/custos/aais"
)

// StartTimeTolerance is how far, in seconds, a process's observed start
// time may differ from the recorded one and still count as the same
// process. The times are rounded to 0.01 s, some systems only report whole
// seconds (ps on macOS and the BSDs), and on Linux the boot time the start
// time is computed from moves when the wall clock is stepped; 2 s absorbs
// all of that while a reused PID almost always belongs to a process started
// much later.
const StartTimeTolerance = 2.0

// hostIDEnv is the environment variable that overrides the computed HostID.
const hostIDEnv = "AAIS_HOST_ID"

// hostIDVersion prefixes the hashed host id material, so the derivation can
// change without colliding with ids made the old way.
const hostIDVersion = "aais-host-v1"

// HostID returns a stable identifier of this host and PID namespace: two
// processes get the same HostID exactly when their PIDs are comparable.
//
// If the environment variable AAIS_HOST_ID is set and not blank, its value
// (with surrounding white space trimmed) is the HostID. Use it when the
// computed id is not distinct enough (for example containers on several
// hosts built from an image with a fixed /etc/machine-id), or when
// processes that do share a PID namespace compute different ids.
// Without it, the HostID is "host-" followed by the first 32 hexadecimal digits of
// the SHA-256 digest of
//
//	"aais-host-v1" NUL GOOS [NUL pid-namespace] NUL machine
//
// where GOOS is runtime.GOOS; pid-namespace is the target of the symbolic
// link /proc/self/ns/pid (for example "pid:[4026531836]"), included on
// Linux when it can be read, so that containers on one host get different
// ids; and machine is the machine id: on Linux the contents of
// /etc/machine-id or /var/lib/dbus/machine-id, on macOS the
// IOPlatformUUID reported by ioreg, on Windows the MachineGuid value of
// HKLM\SOFTWARE\Microsoft\Cryptography. When no machine id is available
// (and on other systems) machine is "hostname:" followed by the host name.
//
// The value is computed on first use and then fixed for the life of the
// process.
func HostID() string { return hostID() }

var hostID = sync.OnceValue(func() string {
	return computeHostID(os.Getenv(hostIDEnv))
})

// computeHostID is HostID given the value of the AAIS_HOST_ID environment
// variable; tests call it directly instead of mutating the environment.
func computeHostID(override string) string {
	if o := strings.TrimSpace(override); o != "" {
		return o
	}
	machine := machineID()
	if machine == "" {
		name, _ := os.Hostname()
		machine = "hostname:" + name
	}
	return deriveHostID(runtime.GOOS, pidNamespace(), machine)
}

// deriveHostID hashes the host id material as HostID documents; pidNS is
// empty when there is no PID namespace to include.
func deriveHostID(goos, pidNS, machine string) string {
	h := sha256.New()
	h.Write([]byte(hostIDVersion))
	h.Write([]byte{0})
	h.Write([]byte(goos))
	if pidNS != "" {
		h.Write([]byte{0})
		h.Write([]byte(pidNS))
	}
	h.Write([]byte{0})
	h.Write([]byte(machine))
	return "host-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// current caches this process's identity once its start time was read.
var current atomic.Pointer[aais.ProcessIdentity]

// Current returns the identity of this process: its PID, its start time
// as [StartTime] reports it (0 when it cannot be read) and [HostID].
//
// The result is cached per PID. A start time of 0 is not cached, so a
// later call tries again to read it.
func Current() aais.ProcessIdentity {
	pid := os.Getpid()
	if c := current.Load(); c != nil && c.PID == pid {
		return *c
	}
	id := aais.ProcessIdentity{PID: pid, HostID: HostID()}
	if st, err := StartTime(pid); err == nil {
		id.StartTime = st
		current.Store(&id)
	}
	return id
}

// Check reports whether the process id names is still running, as far as
// can be told from this process:
//
//   - If id.HostID is not this [HostID], the PID belongs to another host or
//     PID namespace: the result is [aais.LivenessUnknown], never dead.
//   - If [PIDLiveness] does not report the PID alive, or id.StartTime is 0
//     (not recorded), the result is what PIDLiveness reports.
//   - If the start time of the process now holding the PID cannot be read,
//     the result is alive (or dead, if the process exited meanwhile).
//   - If that start time differs from id.StartTime by more than
//     [StartTimeTolerance] seconds, the PID has been reused by another
//     process and the result is [aais.LivenessDead]; otherwise it is
//     [aais.LivenessAlive].
func Check(id aais.ProcessIdentity) aais.Liveness {
	if id.HostID != HostID() {
		return aais.LivenessUnknown
	}
	l := PIDLiveness(id.PID)
	if l != aais.LivenessAlive || id.StartTime == 0 {
		return l
	}
	observed, err := StartTime(id.PID)
	if err != nil {
		// The process may have exited between the two reads; if not,
		// give it the benefit of the doubt.
		if PIDLiveness(id.PID) == aais.LivenessDead {
			return aais.LivenessDead
		}
		return aais.LivenessAlive
	}
	if math.Abs(observed-id.StartTime) > StartTimeTolerance {
		return aais.LivenessDead
	}
	return aais.LivenessAlive
}

// roundCentis rounds seconds to 0.01 s, the precision of
// aais.ProcessIdentity.StartTime.
func roundCentis(sec float64) float64 {
	return math.Round(sec*100) / 100
}
