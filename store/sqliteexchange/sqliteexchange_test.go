package sqliteexchange_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/exchange/exchangetest"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

func open(t *testing.T, path string, o *sqliteexchange.Options) *sqliteexchange.Store {
	t.Helper()
	s, err := sqliteexchange.Open(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func options(c exchangetest.Config) *sqliteexchange.Options {
	return &sqliteexchange.Options{Instance: c.Instance, Now: c.Now}
}

// The behaviour every exchange.Backend must have, on the SQLite Store.
func TestConformance(t *testing.T) {
	exchangetest.Run(t, exchangetest.Backend{
		New: func(t *testing.T, c exchangetest.Config) exchange.Backend {
			return open(t, filepath.Join(t.TempDir(), "exchanges.db"), options(c))
		},
		Reopen: func(t *testing.T, b exchange.Backend, c exchangetest.Config) exchange.Backend {
			return open(t, b.(*sqliteexchange.Store).Path(), options(c))
		},
	})
}

// The same with a pool of one connection: no write waits for a second.
func TestConformanceOneConnection(t *testing.T) {
	exchangetest.Run(t, exchangetest.Backend{
		New: func(t *testing.T, c exchangetest.Config) exchange.Backend {
			o := options(c)
			o.MaxConns = 1
			return open(t, filepath.Join(t.TempDir(), "exchanges.db"), o)
		},
		Reopen: func(t *testing.T, b exchange.Backend, c exchangetest.Config) exchange.Backend {
			o := options(c)
			o.MaxConns = 1
			return open(t, b.(*sqliteexchange.Store).Path(), o)
		},
	})
}

const (
	envPath     = "EXCHANGE_HELPER_PATH"
	envID       = "EXCHANGE_HELPER_ID"
	envChild    = "EXCHANGE_HELPER_CHILD"
	envStart    = "EXCHANGE_HELPER_START"
	claimedMark = "EXCHANGE_CLAIMED="
)

// TestHelperProcess is the child of TestCrossProcess; it does nothing
// unless started by it.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(envPath)
	if path == "" {
		t.Skip("helper process for TestCrossProcess")
	}
	child := os.Getenv(envChild)
	s := open(t, path, &sqliteexchange.Options{Instance: "child_" + child})
	start, err := strconv.ParseInt(os.Getenv(envStart), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	_, ok, err := s.Claim(t.Context(), os.Getenv(envID), exchange.Received, exchange.Approved)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s=%v\n", claimedMark, child, ok)
}

// Several processes claiming one exchange in one file: exactly one wins.
func TestCrossProcess(t *testing.T) {
	if os.Getenv(envPath) != "" {
		t.Skip("in the helper process")
	}
	const children = 3
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "exchanges.db")
	s := open(t, path, nil)
	x := exchangetest.InState(t, s, "1", exchange.Approved)
	start := time.Now().Add(1500 * time.Millisecond).UnixNano()
	var wg sync.WaitGroup
	outs := make([][]byte, children)
	errs := make([]error, children)
	for c := range children {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), envPath+"="+path, envID+"="+x.ID,
				envChild+"="+fmt.Sprint(c), envStart+"="+fmt.Sprint(start))
			outs[c], errs[c] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	winners := 0
	winner := ""
	for c := range children {
		if errs[c] != nil {
			t.Fatalf("child %d: %v\n%s", c, errs[c], outs[c])
		}
		switch {
		case bytes.Contains(outs[c], []byte(fmt.Sprintf("%s%d=true", claimedMark, c))):
			winners++
			winner = fmt.Sprintf("child_%d", c)
		case bytes.Contains(outs[c], []byte(fmt.Sprintf("%s%d=false", claimedMark, c))):
		default:
			t.Fatalf("child %d reported nothing:\n%s", c, outs[c])
		}
	}
	if winners != 1 {
		t.Fatalf("%d winners, want 1", winners)
	}
	got, err := s.Get(ctx, x.ID)
	if err != nil || got.State != exchange.Executing || got.ClaimedBy != winner {
		t.Fatalf("%+v %v (winner %s)", got, err, winner)
	}
}

func TestOpenRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a database "), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := sqliteexchange.Open(t.Context(), path, nil); err == nil {
		_ = s.Close()
		t.Fatal("opened garbage")
	}
	if _, err := sqliteexchange.Open(t.Context(), filepath.Join(t.TempDir(), "y.db"), &sqliteexchange.Options{Instance: "bad\x00"}); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatalf("bad instance: %v", err)
	}
	if sqliteexchange.SchemaVersion() != 5 {
		t.Fatalf("SchemaVersion = %d", sqliteexchange.SchemaVersion())
	}
}

// A reopened file is the same store; its path is absolute.
func TestPath(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "sub", "exchanges.db"), nil)
	if !filepath.IsAbs(s.Path()) || filepath.Base(s.Path()) != "exchanges.db" {
		t.Fatalf("Path = %q", s.Path())
	}
	if fi, err := os.Stat(s.Path()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode: %v %v", fi, err)
	}
}
