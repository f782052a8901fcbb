package handler

import (
	"bytes"
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
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

const (
	// maxStderrBytes caps how much of a program's stderr is kept for the
	// error message (of which maxDiagnostic characters are quoted).
	maxStderrBytes = 64 << 10
	// waitDelay bounds how long Execute waits for the output pipes to close
	// after the process exited or was killed: a descendant that escaped the
	// process group could otherwise hold them open forever.
	waitDelay = 2 * time.Second
)

// ExecConfig configures the exec handler. It is meant for demos and local
// tools: the program runs with the gateway's privileges.
type ExecConfig struct {
	// Command is the program and its arguments (argv; no shell is
	// involved). A program name without a path separator is looked up in
	// PATH once, by NewExec; the absolute path found is the action's
	// resource, and the whole command line is in its effects, so changing
	// either makes pending approvals stale.
	Command []string
	// Dir is the working directory; "" means the gateway's working
	// directory at the time NewExec runs. It is made absolute and is the
	// action's working_directory.
	Dir string
	// Env is the program's complete environment, as "NAME=value" entries.
	// Nothing is inherited from the gateway: a nil or empty Env runs the
	// program with an empty environment (plus what the operating system
	// insists on, such as SYSTEMROOT on Windows). Env is not part of the
	// action: values may be secrets.
	Env []string
	// Timeout bounds one run; when it expires the process group is killed.
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxOutputBytes caps stdout; a program writing more is killed.
	// 0 means DefaultMaxResponseBytes; at most MaxResponseBytesLimit.
	MaxOutputBytes int64
}

// Exec is the built-in handler that runs a configured program with the
// call's arguments (the JSON object, exactly as received) on stdin and takes
// the JSON object it writes to stdout as the result. A non-zero exit, a
// timeout, output that is not one JSON object or too much output are ASC
// errors (see the package documentation).
//
// On Unix the program runs in its own process group, and a timeout or
// cancellation kills the whole group; elsewhere only the process is killed.
type Exec struct {
	path    string
	args    []string
	dir     string
	env     []string
	timeout time.Duration
	max     int64
	effect  string
}

// NewExec validates cfg and returns the handler. Errors wrap ErrConfig.
func NewExec(cfg ExecConfig) (*Exec, error) {
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return nil, fmt.Errorf("%w: no command", ErrConfig)
	}
	for i, a := range cfg.Command {
		if strings.IndexByte(a, 0) >= 0 || !utf8.ValidString(a) {
			return nil, fmt.Errorf("%w: command argument %d is not valid text", ErrConfig, i)
		}
	}
	path, err := exec.LookPath(cfg.Command[0])
	if err != nil {
		return nil, fmt.Errorf("%w: command: %w", ErrConfig, err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("%w: command: %w", ErrConfig, err)
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("%w: working directory: %w", ErrConfig, err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("%w: working directory: %w", ErrConfig, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: working directory %q is not a directory", ErrConfig, dir)
	}
	if len(path) > maxResourceLen || len(dir) > maxResourceLen || !utf8.ValidString(path) || !utf8.ValidString(dir) {
		return nil, fmt.Errorf("%w: command path or working directory too long or not UTF-8", ErrConfig)
	}
	env := make([]string, 0, len(cfg.Env))
	seen := make(map[string]bool, len(cfg.Env))
	for i, kv := range cfg.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.IndexByte(kv, 0) >= 0 {
			// The entry is not quoted: it may hold a secret.
			return nil, fmt.Errorf("%w: environment entry %d is not NAME=value", ErrConfig, i)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: environment variable %s is set twice", ErrConfig, name)
		}
		seen[name] = true
		env = append(env, kv)
	}
	e := &Exec{
		path:    path,
		args:    append([]string(nil), cfg.Command[1:]...),
		dir:     dir,
		env:     env,
		timeout: cfg.Timeout,
		max:     cfg.MaxOutputBytes,
	}
	if e.timeout, e.max, err = handlerLimits(cfg.Timeout, cfg.MaxOutputBytes, "MaxOutputBytes"); err != nil {
		return nil, err
	}
	// The command line must fit in one effect uncut: a cut would let two
	// commands that differ after the cut share a digest.
	e.effect = "Runs " + commandLine(path, e.args)
	if utf8.RuneCountInString(e.effect) > maxEffectLen {
		return nil, fmt.Errorf("%w: the command line is longer than %d characters", ErrConfig, maxEffectLen-len("Runs "))
	}
	return e, nil
}

// commandLine renders argv for a reviewer: each word as is when it is
// plainly printable, quoted (Go syntax) otherwise.
func commandLine(path string, args []string) string {
	words := make([]string, 0, 1+len(args))
	for _, w := range append([]string{path}, args...) {
		if w == "" || strings.ContainsFunc(w, func(r rune) bool {
			return r <= ' ' || r == '"' || r == '\'' || r == '\\' || r == 0x7f || !strconv.IsPrint(r)
		}) {
			w = strconv.Quote(w)
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// Describe says that the call runs the configured command.
func (e *Exec) Describe(Call) (Descriptor, error) {
	return Descriptor{
		Kind:             "process.exec",
		Resource:         e.path,
		WorkingDirectory: e.dir,
		Effects:          []string{e.effect},
		Risk:             aais.RiskHigh,
		RiskReasons:      []string{"Runs a local program with the gateway's privileges"},
	}, nil
}

// Execute runs the command with c.Args on stdin and returns the JSON object
// it writes to stdout, compacted, in the call's payload type.
func (e *Exec) Execute(ctx context.Context, c Call) (Result, error) {
	if _, err := argsLimits.Decode(c.Args); err != nil {
		return Result{}, callError("arguments: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()

	// The program may explain its result in a file of its own
	// (ExplanationFileEnv), read once it exited 0.
	expFile, err := os.CreateTemp("", "custos-explanation-*.json")
	if err != nil {
		return Result{}, fail(asc.DependencyUnavailable, nothingHappened, "exec: %v", err)
	}
	expPath := expFile.Name()
	_ = expFile.Close()
	defer os.Remove(expPath)

	cmd := exec.CommandContext(tctx, e.path, e.args...)
	cmd.Dir = e.dir
	cmd.Env = append([]string{}, e.env...) // non-nil: nothing is inherited
	cmd.Env = append(cmd.Env, ExplanationFileEnv+"="+expPath)
	if c.ExplanationRequired {
		cmd.Env = append(cmd.Env, ExplanationRequiredEnv+"=true")
	}
	cmd.Stdin = bytes.NewReader(c.Args)
	stdout := &capBuffer{max: int(e.max), onOverflow: cancel}
	stderr := &capBuffer{max: maxStderrBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = waitDelay
	killGroupOnCancel(cmd)

	if err = cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return Result{}, fail(cancelCode(ctx), refused, "exec: not started: %v", ctx.Err())
		}
		return Result{}, fail(asc.DependencyUnavailable, nothingHappened, "exec: starting %s: %v", e.path, err)
	}
	err = cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success() && checkObject(stdout.buf, int(e.max)) == nil {
		// The program exited 0 with its whole answer, and something it
		// left behind kept the pipe open (or the gateway stalled past the
		// wait delay while reading it): the answer stands.
		err = nil
	}
	switch {
	case stdout.overflow:
		return Result{}, fail(asc.ResourceExhausted, mayHaveRun, "exec: %s wrote more than %d bytes to stdout and was killed", e.path, e.max)
	case tctx.Err() != nil:
		// The program ran and was killed: what it did before is unknown
		// (ASC §5: RESULT_STATE_UNKNOWN, not TIMEOUT).
		return Result{}, unanswered(ctx, "exec: %s was killed before it finished (timeout %s)", e.path, e.timeout)
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			msg := "exec: " + e.path + " " + exitText(exit)
			if d := sanitize(stderr.buf); d != "" {
				msg += ": " + d
			}
			return Result{}, fail(asc.ToolExecutionFailed, mayHaveRun, "%s", msg)
		}
		// The program ended well but its output could not be collected
		// (ErrWaitDelay: a descendant kept stdout open).
		return Result{}, fail(asc.ToolExecutionFailed, mayHaveRun, "exec: %s: %v", e.path, err)
	}
	if err := checkObject(stdout.buf, int(e.max)); err != nil {
		return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "exec: %s did not write one strict JSON object to stdout: %v", e.path, err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, stdout.buf); err != nil {
		return Result{}, fail(asc.IntegrityCheckFailed, mayHaveRun, "exec: %v", err)
	}
	res := Result{PayloadType: c.PayloadType, Data: json.RawMessage(buf.Bytes())}
	res.Explanation, res.ExplanationIssue = readExplanationFile(expPath)
	return res, nil
}

// ExplanationFileEnv names, in an exec program's environment, a file
// (empty, mode 0600) in which the program may write the ARSIA explanation
// of its result as one JSON object; ExplanationRequiredEnv is "true" when
// the request's profile requires one.
const (
	ExplanationFileEnv     = "CUSTOS_EXPLANATION_FILE"
	ExplanationRequiredEnv = "CUSTOS_EXPLANATION_REQUIRED"
)

// maxExplanationFile bounds what is read of an explanation file.
const maxExplanationFile = 64 << 10

// readExplanationFile reads what a program wrote to its explanation file:
// nothing when it wrote nothing; an issue when it wrote too much.
func readExplanationFile(path string) (json.RawMessage, string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, ""
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxExplanationFile+1))
	switch {
	case err != nil:
		return nil, err.Error()
	case len(data) > maxExplanationFile:
		return nil, fmt.Sprintf("the explanation file is larger than %d bytes", maxExplanationFile)
	case len(bytes.TrimSpace(data)) == 0:
		return nil, ""
	}
	return json.RawMessage(bytes.TrimSpace(data)), ""
}

func exitText(exit *exec.ExitError) string {
	if code := exit.ExitCode(); code >= 0 {
		return "exited with status " + strconv.Itoa(code)
	}
	return "was terminated (" + exit.String() + ")"
}
