package liveness

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// The parsers in this file are pure functions of their input and build on
// every platform, so they are tested (and fuzzed) everywhere, whichever
// platform uses them.

// procStat is what this package needs from a Linux /proc/<pid>/stat line.
type procStat struct {
	// pid is field 1.
	pid int
	// state is field 3, the one-letter process state (R, S, D, Z, ...).
	state byte
	// startTicks is field 22, starttime: when the process started, in
	// clock ticks since boot.
	startTicks uint64
}

// dead reports whether the state is one of a process that has exited:
// Z (zombie: exited, not yet reaped by its parent) or X / x (dead).
func (s procStat) dead() bool {
	return s.state == 'Z' || s.state == 'X' || s.state == 'x'
}

// parseStat parses the contents of /proc/<pid>/stat:
//
//	pid (comm) state ppid pgrp ... starttime ...
//
// comm, the executable name, may itself contain spaces and parentheses
// (a process can name itself "a) (b"), so the fields after comm are taken
// from after the last ')' in the line; the kernel does not escape it.
func parseStat(data []byte) (procStat, error) {
	s := string(data)
	open := strings.IndexByte(s, '(')
	end := strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, errors.New("liveness: malformed /proc stat: no (comm)")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil || pid <= 0 {
		return procStat{}, fmt.Errorf("liveness: malformed /proc stat: bad pid %q", strings.TrimSpace(s[:open]))
	}
	// Fields 3, 4, ... follow comm; field n is rest[n-3].
	rest := strings.Fields(s[end+1:])
	const stateField, startField = 3, 22
	if len(rest) <= startField-stateField {
		return procStat{}, fmt.Errorf("liveness: malformed /proc stat: %d fields after comm, want at least %d", len(rest), startField-stateField+1)
	}
	state := rest[0]
	if len(state) != 1 {
		return procStat{}, fmt.Errorf("liveness: malformed /proc stat: bad state %q", state)
	}
	ticks, err := strconv.ParseUint(rest[startField-stateField], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("liveness: malformed /proc stat: bad starttime: %w", err)
	}
	return procStat{pid: pid, state: state[0], startTicks: ticks}, nil
}

// parseBootTime returns the "btime" value of Linux /proc/stat: the boot
// time in seconds since the Unix epoch.
func parseBootTime(data []byte) (int64, error) {
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "btime" {
			bt, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || bt <= 0 {
				return 0, fmt.Errorf("liveness: bad btime %q in /proc/stat", f[1])
			}
			return bt, nil
		}
	}
	return 0, errors.New("liveness: no btime in /proc/stat")
}

// atClkTck is AT_CLKTCK, the ELF auxiliary vector entry holding the clock
// tick rate (what sysconf(_SC_CLK_TCK) returns).
const atClkTck = 17

// auxvLookup returns the value of key in an auxiliary vector given as
// pairs.
func auxvLookup(pairs [][2]uintptr, key uintptr) (uintptr, bool) {
	for _, p := range pairs {
		if p[0] == key {
			return p[1], true
		}
		if p[0] == 0 { // AT_NULL ends the vector
			break
		}
	}
	return 0, false
}

// parseAuxv decodes the raw contents of /proc/self/auxv: pairs of native
// words in native byte order.
func parseAuxv(data []byte) [][2]uintptr {
	const w = int(unsafe.Sizeof(uintptr(0)))
	word := func(b []byte) uintptr {
		if w == 8 {
			return uintptr(binary.NativeEndian.Uint64(b))
		}
		return uintptr(binary.NativeEndian.Uint32(b))
	}
	var pairs [][2]uintptr
	for len(data) >= 2*w {
		pairs = append(pairs, [2]uintptr{word(data[:w]), word(data[w : 2*w])})
		data = data[2*w:]
	}
	return pairs
}

// lstartLayout is the format of "ps -o lstart" in the C locale (that of
// asctime / strftime %c), with the day-of-month padding collapsed: ps
// prints "Mon Jan  2 15:04:05 2006".
const lstartLayout = "Mon Jan 2 15:04:05 2006"

// parseLstart parses the output of "ps -o lstart= -p PID" run with
// LC_ALL=C and TZ=UTC into seconds since the Unix epoch.
func parseLstart(out string) (float64, error) {
	f := strings.Fields(out)
	if len(f) != 5 {
		return 0, fmt.Errorf("liveness: unexpected ps lstart output %q", out)
	}
	t, err := time.ParseInLocation(lstartLayout, strings.Join(f, " "), time.UTC)
	if err != nil {
		return 0, fmt.Errorf("liveness: unexpected ps lstart output %q: %w", out, err)
	}
	// time.Parse does not check the day of the week; a mismatch means the
	// output is not what it seems.
	if t.Weekday().String()[:3] != f[0] {
		return 0, fmt.Errorf("liveness: unexpected ps lstart output %q: wrong weekday", out)
	}
	return float64(t.Unix()), nil
}

// parseIOPlatformUUID extracts the IOPlatformUUID from the output of
// "ioreg -rd1 -c IOPlatformExpertDevice", which holds a line like
//
//	"IOPlatformUUID" = "564D7A52-0E4B-4E1E-9C4B-2B8B3A0F1C2D"
//
// It returns "" if there is none.
func parseIOPlatformUUID(out string) string {
	for line := range strings.Lines(out) {
		key, val, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(key) != `"IOPlatformUUID"` {
			continue
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			return strings.TrimSpace(val[1 : len(val)-1])
		}
	}
	return ""
}
