package crashtest

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
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
