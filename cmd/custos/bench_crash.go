package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/internal/crashtest"
)

func newBenchCrashCommand() *cobra.Command {
	var o crashtest.Options
	var dir string
	cmd := &cobra.Command{
		Use:   "crash",
		Short: "Drive approval cycles through custos serve while killing it with SIGKILL, then check nothing was lost or run twice",
		Long: `Start this binary's "custos serve" as a child process (profile
EU-AI-ACT-HIGH-RISK: every request waits for a human; an exec handler
appends each call's token to a side-effect log), drive --cycles signed
requests through it with --concurrency clients (approve or deny over the
reviewers' API, replay and contradict decisions, poll the status URL),
SIGKILL it --kills times at seeded random moments and restart it on the
same data directory, retrying unanswered requests with the same bytes.
Then check: no token twice in the log; none of a request not approved;
every approved request ran once or was answered ASC 6005; every exchange
known has a final answer; "custos audit verify" passes. Prints one summary
line with the seed (--seed replays the plan) and exits 1 on any violation.

With --store postgres://…, --replicas gateways share a fresh schema
(custos_schema=custos_crash_<random>, dropped at the end; a URL naming
custos_schema is used as it is and kept), one of them killed at a time.
See docs/reliability.md.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Cycles < 1 || o.Kills < 0 || o.Concurrency < 1 || o.Replicas < 0 || o.Timeout <= 0 {
				return usageError{errors.New("--cycles, --concurrency and --timeout must be positive, --kills and --replicas not negative")}
			}
			if o.Store == "" && o.Replicas > 1 {
				return usageError{errors.New("--replicas needs --store postgres://…")}
			}
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			o.Binary = bin
			out := cmd.OutOrStdout()
			o.Progress = out
			if o.Store != "" {
				store, drop, err := crashtest.FreshSchema(o.Store)
				if err != nil {
					return usageError{err}
				}
				o.Store = store
				defer func() {
					if err := drop(context.Background()); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), "custos bench crash:", err)
					}
				}()
			}
			keep := dir != ""
			if dir == "" {
				if dir, err = os.MkdirTemp("", "custos-crash-"); err != nil {
					return err
				}
			} else if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			o.Dir = dir
			d, err := crashtest.New(o)
			if err != nil {
				return usageError{err}
			}
			defer d.Close()
			res, err := d.Run(cmd.Context())
			if err != nil {
				return fmt.Errorf("the run could not be carried out (files in %s): %w", dir, err)
			}
			for _, p := range res.Problems {
				fmt.Fprintln(out, "  "+p)
			}
			fmt.Fprintln(out, "custos audit verify: "+res.AuditOutput)
			fmt.Fprintln(out, res.Summary())
			if res.Failed() || res.Kills < o.Kills {
				return fmt.Errorf("violations found (%d of %d kills done); the files are in %s; replay with --seed %d", res.Kills, o.Kills, dir, res.Seed)
			}
			if !keep {
				_ = os.RemoveAll(dir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Cycles, "cycles", 10000, "approval cycles")
	f.IntVar(&o.Kills, "kills", 20, "SIGKILLs spread over the run")
	f.IntVar(&o.Concurrency, "concurrency", 16, "cycles in flight")
	f.Uint64Var(&o.Seed, "seed", 0, "the seed of every random choice (0 draws one; the summary prints it)")
	f.StringVar(&o.Store, "store", "", "a postgres:// URL: run --replicas gateways on a fresh schema there instead of one on SQLite")
	f.IntVar(&o.Replicas, "replicas", 0, "gateways on the shared store (default 2 with --store)")
	f.StringVar(&dir, "dir", "", "keep the run's files (configuration, data, logs, side-effect log) in this directory (default a temporary one, removed after a passing run)")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Hour, "give up after this long")
	return cmd
}
