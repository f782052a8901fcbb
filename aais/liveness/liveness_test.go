package liveness

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// helperEnv, when set to "sleep" in the environment of the test binary,
// makes it sleep instead of running tests: the tests start such a copy of
// themselves as a child process to probe.
const helperEnv = "AAIS_LIVENESS_TEST_HELPER"

// helperSleep bounds how long a helper child lives if nobody kills it.
const helperSleep = 2 * time.Minute

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "sleep" {
		time.Sleep(helperSleep)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// canExec reports whether this platform can start child processes and
// probe them.
func canExec() bool {
	switch runtime.GOOS {
	case "js", "wasip1", "plan9", "ios", "android":
		return false
	}
	return true
}

// startHelper starts a sleeping copy of the test binary and arranges for
// it to be killed when the test ends.
func startHelper(t *testing.T) *exec.Cmd {
	t.Helper()
	if !canExec() {
		t.Skipf("cannot start child processes on %s", runtime.GOOS)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("os.Executable: %v", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=sleep")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

var hostIDPattern = regexp.MustCompile(`^host-[0-9a-f]{32}$`)

func TestHostIDStableAndWellFormed(t *testing.T) {
	a, b := HostID(), HostID()
	if a != b {
		t.Fatalf("HostID changed between calls: %q, %q", a, b)
	}
	if a == "" {
		t.Fatal("HostID is empty")
	}
	if v := os.Getenv(hostIDEnv); v != "" {
		t.Logf("%s is set in the test environment; HostID = %q", hostIDEnv, a)
		return
	}
	if !hostIDPattern.MatchString(a) {
		t.Errorf("HostID = %q, want host-<32 hex digits>", a)
	}
	if c := computeHostID(""); c != a {
		t.Errorf("computeHostID(\"\") = %q, HostID() = %q", c, a)
	}
}

func TestComputeHostIDOverride(t *testing.T) {
	computed := computeHostID("")
	if !hostIDPattern.MatchString(computed) {
		t.Fatalf("computeHostID(\"\") = %q, want host-<32 hex digits>", computed)
	}
	tests := []struct {
		env, want string
	}{
		{"", computed},
		{"   \t\n", computed},
		{"cluster-a", "cluster-a"},
		{"  spaced \n", "spaced"},
		{"host-00000000000000000000000000000000", "host-00000000000000000000000000000000"},
	}
	for _, tt := range tests {
		if got := computeHostID(tt.env); got != tt.want {
			t.Errorf("computeHostID(%q) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

func TestDeriveHostID(t *testing.T) {
	// Golden values computed independently:
	// "host-" + sha256(material).hexdigest()[:32].
	tests := []struct {
		goos, ns, machine, want string
	}{
		{"linux", "pid:[4026531836]", "0123456789abcdef0123456789abcdef", "host-12f839ca5badfbe7f5ea2cdec779278d"},
		{"windows", "", "hostname:box", "host-255acb6470fd69e14cdf6ee255e52a45"},
	}
	for _, tt := range tests {
		if got := deriveHostID(tt.goos, tt.ns, tt.machine); got != tt.want {
			t.Errorf("deriveHostID(%q, %q, %q) = %q, want %q", tt.goos, tt.ns, tt.machine, got, tt.want)
		}
	}
	// Every input matters.
	base := deriveHostID("linux", "pid:[1]", "m")
	for _, other := range []string{
		deriveHostID("darwin", "pid:[1]", "m"),
		deriveHostID("linux", "pid:[2]", "m"),
		deriveHostID("linux", "", "m"),
		deriveHostID("linux", "pid:[1]", "n"),
	} {
		if other == base {
			t.Errorf("deriveHostID collision: %q", base)
		}
	}
}

func TestCurrent(t *testing.T) {
	id := Current()
	if id.PID != os.Getpid() {
		t.Errorf("Current().PID = %d, want %d", id.PID, os.Getpid())
	}
	if id.HostID != HostID() {
		t.Errorf("Current().HostID = %q, want %q", id.HostID, HostID())
	}
	if again := Current(); again != id {
		t.Errorf("Current() changed: %+v, then %+v", id, again)
	}
	if got := Check(id); got != aais.LivenessAlive {
		t.Errorf("Check(Current()) = %v, want alive", got)
	}
	if got := PIDLiveness(id.PID); got != aais.LivenessAlive {
		t.Errorf("PIDLiveness(own pid) = %v, want alive", got)
	}
	if !canExec() {
		return
	}
	if id.StartTime <= 0 {
		t.Fatalf("Current().StartTime = %v, want > 0", id.StartTime)
	}
	now := float64(time.Now().UnixNano()) / 1e9
	if id.StartTime > now+StartTimeTolerance {
		t.Errorf("Current().StartTime = %v is after now (%v)", id.StartTime, now)
	}
	if id.StartTime != roundCentis(id.StartTime) {
		t.Errorf("Current().StartTime = %v not rounded to 0.01 s", id.StartTime)
	}
	st, err := StartTime(os.Getpid())
	if err != nil {
		t.Fatalf("StartTime(own pid): %v", err)
	}
	if math.Abs(st-id.StartTime) > StartTimeTolerance {
		t.Errorf("StartTime(own pid) = %v, Current().StartTime = %v", st, id.StartTime)
	}
}

func TestChildProcess(t *testing.T) {
	self := Current()
	cmd := startHelper(t)
	pid := cmd.Process.Pid

	start, err := StartTime(pid)
	if err != nil {
		t.Fatalf("StartTime(child): %v", err)
	}
	now := float64(time.Now().UnixNano()) / 1e9
	// Sanity, not timing: the child started after this process and not
	// in the future.
	if start < self.StartTime-StartTimeTolerance || start > now+StartTimeTolerance {
		t.Errorf("StartTime(child) = %v, want between own start %v and now %v", start, self.StartTime, now)
	}

	host := HostID()
	alive := []struct {
		name string
		id   aais.ProcessIdentity
		want aais.Liveness
	}{
		{"recorded", aais.ProcessIdentity{PID: pid, StartTime: start, HostID: host}, aais.LivenessAlive},
		{"within tolerance", aais.ProcessIdentity{PID: pid, StartTime: start + StartTimeTolerance/2, HostID: host}, aais.LivenessAlive},
		{"start time unknown", aais.ProcessIdentity{PID: pid, HostID: host}, aais.LivenessAlive},
		{"pid reused (started 100 s later)", aais.ProcessIdentity{PID: pid, StartTime: start - 100, HostID: host}, aais.LivenessDead},
		{"pid reused (started 100 s earlier)", aais.ProcessIdentity{PID: pid, StartTime: start + 100, HostID: host}, aais.LivenessDead},
		{"other host", aais.ProcessIdentity{PID: pid, StartTime: start, HostID: "host-other"}, aais.LivenessUnknown},
		{"no host", aais.ProcessIdentity{PID: pid, StartTime: start}, aais.LivenessUnknown},
	}
	for _, tt := range alive {
		if got := Check(tt.id); got != tt.want {
			t.Errorf("while running, %s: Check(%+v) = %v, want %v", tt.name, tt.id, got, tt.want)
		}
	}
	if got := PIDLiveness(pid); got != aais.LivenessAlive {
		t.Errorf("while running: PIDLiveness(%d) = %v, want alive", pid, got)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	_ = cmd.Wait() // "signal: killed"

	dead := []struct {
		name string
		id   aais.ProcessIdentity
		want aais.Liveness
	}{
		{"recorded", aais.ProcessIdentity{PID: pid, StartTime: start, HostID: host}, aais.LivenessDead},
		{"start time unknown", aais.ProcessIdentity{PID: pid, HostID: host}, aais.LivenessDead},
		{"other host", aais.ProcessIdentity{PID: pid, StartTime: start, HostID: "host-other"}, aais.LivenessUnknown},
	}
	for _, tt := range dead {
		if got := Check(tt.id); got != tt.want {
			t.Errorf("after exit, %s: Check(%+v) = %v, want %v", tt.name, tt.id, got, tt.want)
		}
	}
	if got := PIDLiveness(pid); got != aais.LivenessDead {
		t.Errorf("after exit: PIDLiveness(%d) = %v, want dead", pid, got)
	}
	if _, err := StartTime(pid); err == nil {
		t.Errorf("after exit: StartTime(%d) succeeded, want an error", pid)
	}
}

func TestInvalidPIDs(t *testing.T) {
	pids := []int{0, -1, math.MinInt32, math.MinInt}
	if strconv.IntSize == 64 {
		huge := int64(1) << 40 // beyond any pid_t / DWORD
		pids = append(pids, int(huge))
	}
	host := HostID()
	for _, pid := range pids {
		if got := PIDLiveness(pid); got != aais.LivenessDead {
			t.Errorf("PIDLiveness(%d) = %v, want dead", pid, got)
		}
		if got := Check(aais.ProcessIdentity{PID: pid, HostID: host}); got != aais.LivenessDead {
			t.Errorf("Check(pid %d, this host) = %v, want dead", pid, got)
		}
		if got := Check(aais.ProcessIdentity{PID: pid, HostID: "host-elsewhere"}); got != aais.LivenessUnknown {
			t.Errorf("Check(pid %d, other host) = %v, want unknown", pid, got)
		}
		if _, err := StartTime(pid); err == nil {
			t.Errorf("StartTime(%d) succeeded, want an error", pid)
		}
	}
}

func TestParseStat(t *testing.T) {
	// Fields 4..21 between state and starttime, as the kernel writes them.
	const mid = "8610 8610 6583 0 -1 4194304 102 0 0 0 0 0 0 0 20 0 1 0"
	const tail = " 3133440 415 18446744073709551615 94472241709056 0 0 17 1 0 0 0\n"
	tests := []struct {
		name    string
		in      string
		want    procStat
		dead    bool
		wantErr bool
	}{
		{"plain", "8612 (cat) R " + mid + " 30291" + tail, procStat{8612, 'R', 30291}, false, false},
		{"spaces in comm", "42 (Web Content) S " + mid + " 123456" + tail, procStat{42, 'S', 123456}, false, false},
		{"parens in comm", "7 (a) (b) c)) S " + mid + " 99" + tail, procStat{7, 'S', 99}, false, false},
		{"comm looks like fields", "7 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20) D " + mid + " 5" + tail, procStat{7, 'D', 5}, false, false},
		{"empty comm", "9 () S " + mid + " 1" + tail, procStat{9, 'S', 1}, false, false},
		{"zombie", "100 (defunct) Z " + mid + " 777" + tail, procStat{100, 'Z', 777}, true, false},
		{"dead X", "100 (gone) X " + mid + " 777" + tail, procStat{100, 'X', 777}, true, false},
		{"dead x", "100 (gone) x " + mid + " 777" + tail, procStat{100, 'x', 777}, true, false},
		{"zombie name, running", "100 (Z) R " + mid + " 777" + tail, procStat{100, 'R', 777}, false, false},
		{"no trailing fields", "5 (sh) S " + mid + " 12", procStat{5, 'S', 12}, false, false},
		{"max starttime", "5 (sh) S " + mid + " 18446744073709551615", procStat{5, 'S', math.MaxUint64}, false, false},

		{"empty", "", procStat{}, false, true},
		{"no comm", "5 sh S " + mid + " 12", procStat{}, false, true},
		{"unclosed comm", "5 (sh S " + mid + " 12", procStat{}, false, true},
		{"close before open", "5 )sh( S " + mid + " 12", procStat{}, false, true},
		{"bad pid", "x5 (sh) S " + mid + " 12", procStat{}, false, true},
		{"zero pid", "0 (sh) S " + mid + " 12", procStat{}, false, true},
		{"truncated", "5 (sh) S 1 2 3", procStat{}, false, true},
		{"bad state", "5 (sh) SS " + mid + " 12", procStat{}, false, true},
		{"negative starttime", "5 (sh) S " + mid + " -12", procStat{}, false, true},
		{"non-numeric starttime", "5 (sh) S " + mid + " 1e3", procStat{}, false, true},
		{"starttime overflow", "5 (sh) S " + mid + " 18446744073709551616", procStat{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseStat(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseStat(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("parseStat(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if got.dead() != tt.dead {
				t.Errorf("parseStat(%q).dead() = %v, want %v", tt.in, got.dead(), tt.dead)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("8612 (cat) R 8610 8610 6583 0 -1 4194304 102 0 0 0 0 0 0 0 20 0 1 0 30291 3133440 415\n"))
	f.Add([]byte("7 (a) (b) c)) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19"))
	f.Add([]byte("1 ()"))
	f.Add([]byte(")("))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseStat(data)
		if err != nil {
			return
		}
		if st.pid <= 0 {
			t.Errorf("parseStat(%q) accepted pid %d", data, st.pid)
		}
		_ = st.dead()
	})
}

func TestParseBootTime(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"cpu  1 2 3\ncpu0 1 2 3\nintr 5\nctxt 9\nbtime 1796030346\nprocesses 8614\n", 1796030346, false},
		{"btime 1\n", 1, false},
		{"btime 1796030346", 1796030346, false},
		{"cpu 1 2 3\n", 0, true},
		{"btime\n", 0, true},
		{"btime x\n", 0, true},
		{"btime 0\n", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := parseBootTime([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseBootTime(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseAuxv(t *testing.T) {
	pairs := [][2]uintptr{{6, 4096}, {atClkTck, 250}, {25, 12345}, {0, 0}, {atClkTck, 1}}
	var raw []byte
	for _, p := range pairs {
		for _, v := range p {
			if strconv.IntSize == 64 {
				raw = binary.NativeEndian.AppendUint64(raw, uint64(v))
			} else {
				raw = binary.NativeEndian.AppendUint32(raw, uint32(v))
			}
		}
	}
	got := parseAuxv(append(raw, 1, 2, 3)) // a trailing partial word is ignored
	if len(got) != len(pairs) {
		t.Fatalf("parseAuxv: %d pairs, want %d", len(got), len(pairs))
	}
	for i := range pairs {
		if got[i] != pairs[i] {
			t.Errorf("parseAuxv pair %d = %v, want %v", i, got[i], pairs[i])
		}
	}
	if v, ok := auxvLookup(got, atClkTck); !ok || v != 250 {
		t.Errorf("auxvLookup(AT_CLKTCK) = %d, %v; want 250, true", v, ok)
	}
	if v, ok := auxvLookup(got, 99); ok {
		t.Errorf("auxvLookup(99) = %d, true; want not found", v)
	}
	if got := parseAuxv(nil); len(got) != 0 {
		t.Errorf("parseAuxv(nil) = %v, want none", got)
	}
}

func TestParseLstart(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"Mon Jan  2 15:04:05 2006", time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC), false},
		{"Tue Mar 12 09:00:00 2024\n", time.Date(2024, 3, 12, 9, 0, 0, 0, time.UTC), false},
		{"  Thu Jan  1 00:00:01 1970  ", time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC), false},
		{"", time.Time{}, true},
		{"Mon Jan 2 15:04:05", time.Time{}, true},
		{"Tue Jan  2 15:04:05 2006", time.Time{}, true}, // wrong weekday
		{"Mon Foo  2 15:04:05 2006", time.Time{}, true},
		{"Mon Jan  2 15:04:05 2006 UTC", time.Time{}, true},
		{"lun. janv.  2 15:04:05 2006", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := parseLstart(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("parseLstart(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseLstart(%q): %v", tt.in, err)
			continue
		}
		if want := float64(tt.want.Unix()); got != want {
			t.Errorf("parseLstart(%q) = %v, want %v", tt.in, got, want)
		}
	}
}

func TestParseIOPlatformUUID(t *testing.T) {
	const ioreg = `+-o J314sAP  <class IOPlatformExpertDevice, id 0x100000000, registered, matched, active, busy 0 (1 ms), retain 30>
    {
      "IOPolledInterface" = "AppleARMWatchdogTimerHibernateHandler is not serializable"
      "IOPlatformSerialNumber" = "C02XXXXXXX"
      "IOPlatformUUID" = "564D7A52-0E4B-4E1E-9C4B-2B8B3A0F1C2D"
      "model" = <"MacBookPro18,3">
    }
`
	tests := []struct{ in, want string }{
		{ioreg, "564D7A52-0E4B-4E1E-9C4B-2B8B3A0F1C2D"},
		{`"IOPlatformUUID"="ABC"`, "ABC"},
		{`"IOPlatformUUIDx" = "ABC"`, ""},
		{`"IOPlatformUUID" = ABC`, ""},
		{`"IOPlatformUUID" = "`, ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := parseIOPlatformUUID(tt.in); got != tt.want {
			t.Errorf("parseIOPlatformUUID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
