package sqliteaudit_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
	"github.com/custos-runtime/custos/store/sqliteaudit"
)

// TestTwoHandlesOneFile: goroutines appending through two Backends (two
// connection pools, two writer goroutines) on one file build one
// contiguous chain.
func TestTwoHandlesOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	logs := []*audit.Log{audit.New(open(t, path, nil), nil), audit.New(open(t, path, &sqliteaudit.Options{MaxBatch: 1}), nil)}
	const workers, each = 4, 30
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for li, l := range logs {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if _, err := l.Append(ctx, audittest.Sample(audit.KindDecision, li*10000+w*100+i)); err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, l := range logs {
		rep, err := l.Verify(ctx)
		if err != nil || !rep.OK() || rep.Records != 2*workers*each || rep.LastSeq != 2*workers*each {
			t.Fatalf("Verify: %+v, %v", rep, err)
		}
	}
}

// TestChildProcesses: several processes append to one file.
func TestChildProcesses(t *testing.T) {
	if path := os.Getenv("SQLITEAUDIT_CHILD_PATH"); path != "" {
		n, _ := strconv.Atoi(os.Getenv("SQLITEAUDIT_CHILD_N"))
		b, err := sqliteaudit.Open(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		l := audit.New(b, nil)
		for i := range n {
			if _, err := l.Append(context.Background(), audittest.Sample(audit.KindExecution, os.Getpid()*1000+i)); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "audit.db")
	const procs, each = 3, 40
	var cmds []*exec.Cmd
	for range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SQLITEAUDIT_CHILD_PATH="+path, fmt.Sprintf("SQLITEAUDIT_CHILD_N=%d", each))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	rep, err := audit.New(open(t, path, nil), nil).Verify(context.Background())
	if err != nil || !rep.OK() || rep.Records != procs*each {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}
