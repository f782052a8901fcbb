package crashtest

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
)

// The default size is what CI runs; the flags (or the environment, for
// `go test ./...` where flags reach every package) run it large:
//
//	go test ./internal/crashtest -run Crash -crash.cycles 10000 -crash.kills 20 -timeout 2h
var (
	flagCycles      = flag.Int("crash.cycles", envInt("CUSTOS_CRASH_CYCLES", 1000), "approval cycles per run (env CUSTOS_CRASH_CYCLES)")
	flagKills       = flag.Int("crash.kills", envInt("CUSTOS_CRASH_KILLS", 10), "SIGKILLs per run (env CUSTOS_CRASH_KILLS)")
	flagConcurrency = flag.Int("crash.concurrency", envInt("CUSTOS_CRASH_CONCURRENCY", 16), "cycles in flight (env CUSTOS_CRASH_CONCURRENCY)")
	flagSeed        = flag.Uint64("crash.seed", uint64(envInt("CUSTOS_CRASH_SEED", 0)), "replay this seed (env CUSTOS_CRASH_SEED); 0 draws one")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildOut  []byte
)

// custosBinary builds cmd/custos once per test process, without the race
// detector whatever this test runs with: the gateway under test is the
// binary an operator would run. CUSTOS_CRASH_BINARY names a binary to test
// instead (another build, another commit).
func custosBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("CUSTOS_CRASH_BINARY"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "custos-crashtest-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "custos")
		cmd := exec.Command("go", "build", "-o", binary, "github.com/custos-runtime/custos/cmd/custos")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/custos: %v\n%s", buildErr, buildOut)
	}
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

func runCrash(t *testing.T, o Options) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the handler under test is a /bin/sh script, and the gateway is stopped with SIGTERM")
	}
	o.Binary = custosBinary(t)
	o.Dir = t.TempDir()
	o.Cycles, o.Kills, o.Concurrency, o.Seed = *flagCycles, *flagKills, *flagConcurrency, *flagSeed
	o.Progress = testWriter{t}
	if dl, ok := t.Deadline(); ok {
		o.Timeout = time.Until(dl) - 30*time.Second
	}
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close) // the children die even when the test fails
	res, err := d.Run(t.Context())
	if err != nil {
		t.Fatalf("the run could not be carried out (seed %d; files in %s): %v", d.o.Seed, o.Dir, err)
	}
	t.Log(res.Summary())
	t.Log("custos audit verify: " + res.AuditOutput)
	for _, p := range res.Problems {
		t.Log(p)
	}
	if res.Kills < o.Kills {
		t.Errorf("only %d of %d kills happened", res.Kills, o.Kills)
	}
	if res.Failed() {
		t.Errorf("%s\nreplay: go test ./internal/crashtest -run %s -crash.seed %d -crash.cycles %d -crash.kills %d",
			res.Summary(), t.Name(), res.Seed, o.Cycles, o.Kills)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-min(1, len(p))]))
	return len(p), nil
}

// One gateway on SQLite, killed and restarted on its data directory.
func TestCrashSQLite(t *testing.T) {
	runCrash(t, Options{})
}

// Two replicas on one PostgreSQL schema, one of them killed at a time;
// the client alternates between them.
func TestCrashPostgresReplicas(t *testing.T) {
	schema := pgtest.Schema(t)
	runCrash(t, Options{Store: pgtest.SchemaDSN(t, schema), Replicas: 2})
}

// The checks themselves: each kind of violation a crash can cause is
// counted as that kind, and an outcome the gateway may legitimately give
// is not a violation.
func TestCheckClassifies(t *testing.T) {
	tok := func(n int) string { return "tok-" + strconv.Itoa(n) + "-0123456789abcdef" }
	cycles := []*cycle{
		{n: 0, token: tok(0), acked: true, found: true, exchangeID: "x0", outcome: "approved", final: 200},                 // ran once
		{n: 1, token: tok(1), acked: true, found: true, exchangeID: "x1", outcome: "approved", final: 200},                 // ran twice
		{n: 2, token: tok(2), acked: true, found: true, exchangeID: "x2", outcome: "denied", final: 403},                   // ran though denied
		{n: 3, token: tok(3), acked: true, found: true, exchangeID: "x3", outcome: "approved"},                             // never answered
		{n: 4, token: tok(4), acked: true, exchangeID: "x4"},                                                               // no approval, no answer
		{n: 5, token: tok(5), acked: true, found: true, exchangeID: "x5", outcome: "approved", final: 500, finalASC: 6005}, // unknown, ran
		{n: 6, token: tok(6), acked: true, found: true, exchangeID: "x6", outcome: "approved", final: 500, finalASC: 6005}, // unknown, did not run
		{n: 7, token: tok(7), acked: true, found: true, exchangeID: "x7", outcome: "approved", final: 500, finalASC: 5004}, // wrong answer
		{n: 8, token: tok(8), retried: true, refused: []string{retryRefusedPrefix + " 409: {}"}},                           // retry refused
		{n: 9, token: tok(9), acked: true, found: true, exchangeID: "x9", outcome: "approved", final: 200},                 // answered 200, did not run
		{n: 10, token: tok(10), acked: true, found: true, exchangeID: "x10", outcome: "denied", final: 200},                // denied, answered 200
		{n: 11, token: tok(11), acked: true, found: true, exchangeID: "x11", outcome: "denied", final: 403},                // denied properly
	}
	counts := map[string]int{tok(0): 1, tok(1): 2, tok(2): 1, tok(5): 1}
	d := &Driver{}
	res := &Result{AuditOK: true}
	d.check(res, cycles, counts, []string{"garbage"})
	want := Result{AuditOK: true, Acknowledged: 11, Retried: 1, Approved: 7, Denied: 3, Effects: 5,
		Executed: 1, Doubles: 1, Unapproved: 1, Lost: 3, Stuck: 1, Unknown6005: 2, Misanswered: 2, RetryRefused: 1, ApprovalMissing: 1, BadLines: 1}
	if len(res.Problems) == 0 {
		t.Error("violations found without a word on them")
	}
	res.Problems = nil
	if !reflect.DeepEqual(*res, want) {
		t.Errorf("check counted\n%+v\nwant\n%+v", *res, want)
	}
	if !res.Failed() {
		t.Error("a run with violations does not fail")
	}
	clean := &Result{AuditOK: true}
	d.check(clean, cycles[:1], map[string]int{tok(0): 1}, nil)
	if clean.Failed() || clean.Executed != 1 {
		t.Errorf("one clean cycle: %s", clean.Summary())
	}
}
