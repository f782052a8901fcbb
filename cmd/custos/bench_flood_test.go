package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestFloodChild is the child process of TestBenchFloodSmoke: it runs the
// custos command line it is given, as the real binary would.
func TestFloodChild(t *testing.T) {
	spec := os.Getenv("CUSTOS_FLOOD_CHILD")
	if spec == "" {
		t.Skip("only a child of TestBenchFloodSmoke")
	}
	var args []string
	if err := json.Unmarshal([]byte(spec), &args); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	code := run(ctx, args, strings.NewReader(""), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// bench flood runs both servers as children, floods them and reads
// their peak RSS (a smoke test: figures belong in docs/benchmarks.md).
func TestBenchFloodSmoke(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("bench flood reads /proc")
	}
	prev := floodCommand
	t.Cleanup(func() { floodCommand = prev })
	floodCommand = func(args ...string) (*exec.Cmd, error) {
		spec, _ := json.Marshal(args)
		cmd := exec.Command(os.Args[0], "-test.run=^TestFloodChild$")
		cmd.Env = append(os.Environ(), "CUSTOS_FLOOD_CHILD="+string(spec))
		return cmd, nil
	}
	code, out, errOut := custos(t, "", "bench", "flood", "--connections", "30", "--body", "65536", "--send-time", "50ms", "--max-rss", "4096")
	if code != 0 {
		t.Fatalf("bench flood exit %d: %s\n%s", code, out, errOut)
	}
	rows := regexp.MustCompile(`(?m)^  (bare net/http|custos serve) +([0-9.]+) MiB .* ((?:\d+×\w+ ?)+)$`).FindAllStringSubmatch(out, -1)
	if len(rows) != 2 || !strings.Contains(out, "the bare server's peak RSS") {
		t.Fatalf("output:\n%s", out)
	}
	for _, r := range rows {
		if mib, _ := strconv.ParseFloat(r[2], 64); mib <= 0 {
			t.Fatalf("%s: no peak RSS:\n%s", r[1], out)
		}
		n := 0
		for _, part := range strings.Fields(r[3]) {
			c, _ := strconv.Atoi(strings.Split(part, "×")[0])
			n += c
		}
		if n != 30 {
			t.Fatalf("%s answered %d of 30 requests:\n%s", r[1], n, out)
		}
	}
	if !strings.Contains(rows[0][3], "30×401") {
		t.Fatalf("the bare server did not read and refuse every body:\n%s", out)
	}
}
