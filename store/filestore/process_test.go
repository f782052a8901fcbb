package filestore_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/store/filestore"
)

const (
	envMode = "FILESTORE_TEST_CHILD"
	envPath = "FILESTORE_TEST_PATH"
	envArg  = "FILESTORE_TEST_ARG"
	envOut  = "FILESTORE_TEST_OUT"
)

// TestChildProcess is not a test: the cross-process tests run the test
// binary again with it selected and envMode set.
func TestChildProcess(t *testing.T) {
	mode := os.Getenv(envMode)
	if mode == "" {
		t.Skip("helper for the cross-process tests")
	}
	s, err := filestore.Open(os.Getenv(envPath), &filestore.Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := authority(t, s)
	arg := os.Getenv(envArg)
	switch mode {
	case "create":
		for i := range 5 {
			create(t, a, fmt.Sprintf("apr_%s_%d", arg, i))
		}
	case "decide":
		var verdict aais.Verdict
		fmt.Sscanf(arg, "%s", &verdict)
		st, err := s.RequestState(t.Context(), "apr_race")
		if err != nil {
			t.Fatal(err)
		}
		m, err := a.Decide(t.Context(), newDecision(t, st.Request.Event.Request, verdict, "dec_"+string(verdict)), actor, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv(envOut), []byte(wire(t, m)), 0o600); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

func runChildren(t *testing.T, path string, mode string, args []string, outs []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(args))
	outputs := make([][]byte, len(args))
	for i, arg := range args {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestChildProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), envMode+"="+mode, envPath+"="+path, envArg+"="+arg)
			if outs != nil {
				cmd.Env = append(cmd.Env, envOut+"="+outs[i])
			}
			outputs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("child %d (%s %s): %v\n%s", i, mode, args[i], err, outputs[i])
		}
	}
}

func TestProcessesSequencesContiguous(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "approvals.json")
	s := open(t, path, &filestore.Options{Now: fixedNow})
	runChildren(t, path, "create", []string{"a", "b", "c"}, nil)
	p, err := s.EventsAfter(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Gap || p.Latest != 15 || len(p.Events) != 15 {
		t.Fatalf("gap %v latest %d events %d; want 15 contiguous", p.Gap, p.Latest, len(p.Events))
	}
	for i, e := range p.Events {
		if e.Sequence != uint64(i+1) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
	}
	pending, _, err := s.Pending(t.Context())
	if err != nil || len(pending) != 15 {
		t.Fatalf("Pending = %d, %v; want 15", len(pending), err)
	}
}

func TestProcessesRaceOneResolution(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "approvals.json")
	s := open(t, path, &filestore.Options{Now: fixedNow})
	create(t, authority(t, s), "apr_race")
	verdicts := []string{"approve", "deny", "cancel", "approve", "deny", "cancel"}
	outs := make([]string, len(verdicts))
	for i := range outs {
		outs[i] = filepath.Join(dir, fmt.Sprintf("receipt-%d.json", i))
	}
	runChildren(t, path, "decide", verdicts, outs)

	st, err := s.RequestState(t.Context(), "apr_race")
	if err != nil || st.Pending() {
		t.Fatalf("RequestState = %+v, %v; want resolved", st, err)
	}
	stored := wire(t, st.Resolution.Event)
	winners := 0
	for i, out := range outs {
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		m, err := aais.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if "dec_"+verdicts[i] == st.Resolution.Event.Resolution.DecisionID {
			winners++
			if string(b) != stored {
				t.Fatalf("child %d made the winning decision but got\n%s\nwant\n%s", i, b, stored)
			}
			continue
		}
		if m.Resolution.Outcome != aais.OutcomeConflict {
			t.Fatalf("child %d (%s): outcome %s, want conflict", i, verdicts[i], m.Resolution.Outcome)
		}
	}
	if winners != 2 {
		t.Fatalf("%d children got the stored receipt, want the 2 that made the winning decision", winners)
	}
	p, err := s.EventsAfter(t.Context(), 0, 0)
	if err != nil || len(p.Events) != 2 || p.Events[1].Type != aais.TypeResolved {
		t.Fatalf("events = %d, %v; want the request and exactly one resolution", len(p.Events), err)
	}
}
