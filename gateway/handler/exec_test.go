package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway/handler"
)

// helperModeEnv switches the test binary into a helper program (TestMain):
// the exec tests run the test binary itself as the configured command.
const helperModeEnv = "CUSTOS_HANDLER_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperModeEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func helper(mode string) int {
	switch mode {
	case "json":
		in, _ := io.ReadAll(os.Stdin)
		wd, _ := os.Getwd()
		_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"stdin": string(in), "dir": wd})
	case "env":
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"env": os.Environ()})
	case "fail":
		_, _ = io.ReadAll(os.Stdin)
		fmt.Fprint(os.Stderr, "boom:\x1b[31m bad\u202einput\n\n  second line\x00")
		return 3
	case "text":
		fmt.Println("not json")
	case "explain", "explain-huge":
		// Explains its result in the file it is given, when asked to.
		_, _ = io.ReadAll(os.Stdin)
		exp := `{"reasoning":"Built the report from the quarter's ledger.","confidence":0.95,"inputs_used":["ledger:Q3"]}`
		if mode == "explain-huge" {
			exp = strings.Repeat(" ", 70<<10) + exp
		}
		if os.Getenv(handler.ExplanationRequiredEnv) == "true" {
			if err := os.WriteFile(os.Getenv(handler.ExplanationFileEnv), []byte(exp), 0o600); err != nil {
				return 1
			}
		}
		fmt.Println(`{"ok":true,"file":` + strconv.Quote(os.Getenv(handler.ExplanationFileEnv)) + `}`)
	case "flood":
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for {
			if _, err := os.Stdout.Write(line); err != nil {
				return 1
			}
		}
	case "sleep":
		// A child in the same process group that holds stdout open: only a
		// group kill ends both.
		self, _ := os.Executable()
		child := exec.Command(self)
		child.Env = []string{helperModeEnv + "=sleep-child"}
		child.Stdout = os.Stdout
		_ = child.Start()
		time.Sleep(time.Hour)
	case "sleep-child":
		time.Sleep(time.Hour)
	case "answer-then-linger", "linger":
		// Answers (or not), then exits 0 leaving a child that holds
		// stdout open past the handler's wait delay.
		_, _ = io.ReadAll(os.Stdin)
		if mode == "answer-then-linger" {
			fmt.Println(`{"ok":true}`)
		}
		self, _ := os.Executable()
		child := exec.Command(self)
		child.Env = []string{helperModeEnv + "=linger-child"}
		child.Stdout = os.Stdout
		_ = child.Start()
	case "linger-child":
		time.Sleep(4 * time.Second)
	case "effect-then-hang":
		// Acts (writes a file in its working directory), then never
		// answers: the caller cannot tell this from a program that hung
		// before acting.
		_, _ = io.ReadAll(os.Stdin)
		if err := os.WriteFile("effect", []byte("done"), 0o600); err != nil {
			return 1
		}
		time.Sleep(time.Hour)
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		return 2
	}
	return 0
}

func newExec(t *testing.T, mode string, mod func(*handler.ExecConfig)) *handler.Exec {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Skip("no executable path:", err)
	}
	cfg := handler.ExecConfig{
		Command: []string{self, "-test.run=^$"},
		Dir:     t.TempDir(),
		// The race detector sleeps a second before a clean exit unless
		// told otherwise.
		Env: []string{helperModeEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"},
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := handler.NewExec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var execCall = handler.Call{
	Capability:  "demo.report.build",
	PayloadType: "com.example.demo/report",
	Args:        json.RawMessage(`{"title": "Q3", "n": 1.50}`),
}

func TestExecSuccess(t *testing.T) {
	e := newExec(t, "json", nil)
	digest := approve(t, e, execCall)
	res, err := handler.Dispatch(context.Background(), e, execCall, digest)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Stdin string `json:"stdin"`
		Dir   string `json:"dir"`
	}
	if err := json.Unmarshal(res.Data, &out); err != nil {
		t.Fatal(err)
	}
	// The program received the arguments exactly as received.
	if string(out.Stdin) != `{"title": "Q3", "n": 1.50}` {
		t.Errorf("stdin %s", out.Stdin)
	}
	d, _ := e.Describe(execCall)
	if out.Dir != d.WorkingDirectory {
		t.Errorf("ran in %s, described %s", out.Dir, d.WorkingDirectory)
	}
	if res.PayloadType != execCall.PayloadType {
		t.Errorf("payload type %s", res.PayloadType)
	}
}

func TestExecDescribe(t *testing.T) {
	dir := t.TempDir()
	e := newExec(t, "json", func(c *handler.ExecConfig) {
		c.Dir = dir
		c.Command = append(c.Command, "two words", `q"uote`)
	})
	d, err := e.Describe(execCall)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	abs, _ := filepath.Abs(self)
	if d.Kind != "process.exec" || d.Resource != abs || d.WorkingDirectory != dir || d.Risk != aais.RiskHigh {
		t.Errorf("%+v", d)
	}
	want := "Runs " + abs + ` -test.run=^$ "two words" "q\"uote"`
	if len(d.Effects) != 1 || d.Effects[0] != want {
		t.Errorf("effects %q, want %q", d.Effects, want)
	}
	if !filepath.IsAbs(d.Resource) {
		t.Error("resource not absolute")
	}
}

// Changing the command, its arguments or the directory makes an approval
// stale and nothing runs; the environment is not part of the action.
func TestExecStale(t *testing.T) {
	approved := newExec(t, "json", nil)
	digest := approve(t, approved, execCall)
	dir, _ := approved.Describe(execCall)
	changes := map[string]func(*handler.ExecConfig){
		"argument": func(c *handler.ExecConfig) { c.Command = append(c.Command, "-extra") },
		"dir":      func(c *handler.ExecConfig) { c.Dir = t.TempDir() },
	}
	for name, mod := range changes {
		e := newExec(t, "json", func(c *handler.ExecConfig) { c.Dir = dir.WorkingDirectory; mod(c) })
		if _, err := handler.Dispatch(context.Background(), e, execCall, digest); !errors.Is(err, handler.ErrStale) {
			t.Errorf("%s: %v", name, err)
		}
	}
	same := newExec(t, "json", func(c *handler.ExecConfig) {
		c.Dir = dir.WorkingDirectory
		c.Env = append(c.Env, "OTHER=1")
	})
	if _, err := handler.Dispatch(context.Background(), same, execCall, digest); err != nil {
		t.Errorf("env change: %v", err)
	}
}

// A program that exited 0 with its whole answer keeps it, even when
// something it left behind holds stdout open past the wait delay (or the
// gateway stalled while reading it); without an answer that is still a
// failure that may have acted.
func TestExecAnswerThenLinger(t *testing.T) {
	res, err := newExec(t, "answer-then-linger", nil).Execute(context.Background(), execCall)
	if err != nil || string(res.Data) != `{"ok":true}` {
		t.Fatalf("result %s, err %v", res.Data, err)
	}
	_, err = newExec(t, "linger", nil).Execute(context.Background(), execCall)
	wantStatus(t, err, asc.ToolExecutionFailed, asc.SideEffectPossible)
}

func TestExecNonZeroExit(t *testing.T) {
	_, err := newExec(t, "fail", nil).Execute(context.Background(), execCall)
	env := wantStatus(t, err, asc.ToolExecutionFailed, asc.SideEffectPossible)
	dev := env.Message.Developer
	if !strings.Contains(dev, "exited with status 3") || !strings.Contains(dev, "boom:") || !strings.Contains(dev, "second line") {
		t.Errorf("message %q", dev)
	}
	for _, bad := range []string{"\x1b", "\n", "\x00", "\u202e"} {
		if strings.Contains(dev, bad) {
			t.Errorf("message keeps %q: %q", bad, dev)
		}
	}
}

// A program killed on timeout after it started may have acted: the status
// is 6005 RESULT_STATE_UNKNOWN, never a retryable TIMEOUT (ASC §5).
func TestExecTimeout(t *testing.T) {
	dir := t.TempDir()
	e := newExec(t, "effect-then-hang", func(c *handler.ExecConfig) { c.Timeout = 300 * time.Millisecond; c.Dir = dir })
	_, err := e.Execute(context.Background(), execCall)
	env := wantStatus(t, err, asc.ResultStateUnknown, asc.SideEffectUnknown)
	if env.Retry.Safe || env.Retry.Retryable {
		t.Errorf("retry %+v: a killed program is marked retryable or safe", env.Retry)
	}
	if d := asc.DecideRetry(env, asc.RetryContext{Now: time.Now(), Idempotent: true}); d.Outcome != asc.ReconcileFirst {
		t.Errorf("DecideRetry: %v", d.Outcome)
	}
	// It did act: a blind retry would have acted twice.
	if _, err := os.Stat(filepath.Join(dir, "effect")); err != nil {
		t.Errorf("the helper left no effect: %v", err)
	}
	e = newExec(t, "sleep", func(c *handler.ExecConfig) { c.Timeout = 50 * time.Millisecond })
	_, err = e.Execute(context.Background(), execCall)
	wantStatus(t, err, asc.ResultStateUnknown, asc.SideEffectUnknown)

	// The caller's context ends after the program started: unknown too.
	dir = t.TempDir()
	e = newExec(t, "effect-then-hang", func(c *handler.ExecConfig) { c.Timeout = time.Hour; c.Dir = dir })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(filepath.Join(dir, "effect")); err == nil {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, err = e.Execute(ctx, execCall)
	wantStatus(t, err, asc.ResultStateUnknown, asc.SideEffectUnknown)

	// The context ended before the program could start: nothing ran.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = e.Execute(ctx, execCall)
	wantStatus(t, err, asc.Cancelled, asc.SideEffectNone)
}

func TestExecNotJSON(t *testing.T) {
	_, err := newExec(t, "text", nil).Execute(context.Background(), execCall)
	wantStatus(t, err, asc.IntegrityCheckFailed, asc.SideEffectPossible)
}

func TestExecOversize(t *testing.T) {
	e := newExec(t, "json", func(c *handler.ExecConfig) { c.MaxOutputBytes = 8 })
	_, err := e.Execute(context.Background(), execCall)
	wantStatus(t, err, asc.ResourceExhausted, asc.SideEffectPossible)

	// A program that never stops writing is killed, not waited for.
	e = newExec(t, "flood", func(c *handler.ExecConfig) { c.MaxOutputBytes = 4096; c.Timeout = time.Hour })
	_, err = e.Execute(context.Background(), execCall)
	wantStatus(t, err, asc.ResourceExhausted, asc.SideEffectPossible)
}

func TestExecEnvNotInherited(t *testing.T) {
	t.Setenv("CUSTOS_TEST_SECRET", "hunter2")
	e := newExec(t, "env", func(c *handler.ExecConfig) { c.Env = append(c.Env, "GREETING=hello world") })
	res, err := e.Execute(context.Background(), execCall)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Env []string }
	if err := json.Unmarshal(res.Data, &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, kv := range out.Env {
		got[kv] = true
		if strings.HasPrefix(kv, "CUSTOS_TEST_SECRET=") || strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "HOME=") {
			t.Errorf("inherited %s", kv)
		}
	}
	if !got["GREETING=hello world"] || !got[helperModeEnv+"=env"] {
		t.Errorf("configured variables missing: %v", out.Env)
	}
}

func TestExecStartFailure(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := handler.NewExec(handler.ExecConfig{Command: []string{prog}, Dir: dir})
	if err != nil {
		t.Skip("cannot configure a script here:", err)
	}
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	_, err = e.Execute(context.Background(), execCall)
	env := wantStatus(t, err, asc.DependencyUnavailable, asc.SideEffectNone)
	if !env.Retry.Safe {
		t.Error("nothing ran, yet not safe")
	}
}

func TestNewExecConfig(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(file, nil, 0o644)
	bad := map[string]handler.ExecConfig{
		"no command":      {},
		"empty name":      {Command: []string{""}},
		"missing program": {Command: []string{filepath.Join(t.TempDir(), "nope")}},
		"not found":       {Command: []string{"custos-no-such-program-xyz"}},
		"missing dir":     {Command: []string{self}, Dir: filepath.Join(t.TempDir(), "nope")},
		"dir is a file":   {Command: []string{self}, Dir: file},
		"NUL in argument": {Command: []string{self, "a\x00b"}},
		"env without =":   {Command: []string{self}, Env: []string{"SECRET"}},
		"env empty name":  {Command: []string{self}, Env: []string{"=x"}},
		"env twice":       {Command: []string{self}, Env: []string{"A=1", "A=2"}},
		"negative time":   {Command: []string{self}, Timeout: -1},
		"huge output":     {Command: []string{self}, MaxOutputBytes: handler.MaxResponseBytesLimit + 1},
		"long command":    {Command: []string{self, strings.Repeat("a", 1000)}},
	}
	for name, cfg := range bad {
		_, err := handler.NewExec(cfg)
		if !errors.Is(err, handler.ErrConfig) {
			t.Errorf("%s: err = %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: error quotes the environment: %v", name, err)
		}
	}
}

// A program may explain its result in the file CUSTOS_EXPLANATION_FILE
// names, told by CUSTOS_EXPLANATION_REQUIRED that it must; the file is
// removed afterwards, and one too large is refused.
func TestExecExplanation(t *testing.T) {
	for _, c := range []struct {
		mode     string
		required bool
		kept     bool
		issue    string
	}{
		{"explain", true, true, ""},
		{"explain", false, false, ""},
		{"explain-huge", true, false, "larger than"},
	} {
		call := execCall
		call.ExplanationRequired = c.required
		res, err := handler.Run(t.Context(), newExec(t, c.mode, nil), call)
		if err != nil {
			t.Fatal(err)
		}
		if kept := len(res.Explanation) != 0; kept != c.kept || !strings.Contains(res.ExplanationIssue, c.issue) || (c.issue == "") != (res.ExplanationIssue == "") {
			t.Errorf("%s, required %v: explanation %s, issue %q", c.mode, c.required, res.Explanation, res.ExplanationIssue)
		}
		var out struct{ File string }
		if err := json.Unmarshal(res.Data, &out); err != nil || out.File == "" {
			t.Fatalf("result %s: %v", res.Data, err)
		}
		if _, err := os.Stat(out.File); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the explanation file %s is left behind: %v", out.File, err)
		}
	}
}
