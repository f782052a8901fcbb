package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and the answer is "no" (invalid input, failed check)
	exitUsage   = 2 // the command line itself is wrong
)

// usageError marks mistakes in the command line, reported with exit code 2.
type usageError struct{ error }

// run executes one command line; tests call it in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "custos: %v\n", err)
	var ue usageError
	// cobra reports an unknown subcommand as a plain error.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command ") {
		return exitUsage
	}
	return exitFailure
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "custos",
		Short: "Governance runtime for AI agents (ARSIA, AAIS, ASC)",
		Long: `Custos verifies, authorizes and audits what AI agents ask each other to do,
and pauses for a human when a compliance profile says so.

This build provides the protocol tools: ARSIA 1.0 envelopes (keys, signing,
verification, validation, compliance profiles), canonical JSON and digests
(RFC 8785), Agent Status Codes (ASC 0.1), and AAIS 1.0 approvals on a local
store (custos approvals).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newVersionCommand(),
		newCanonCommand(),
		newDigestCommand(),
		newStatusCommand(),
		newConformanceCommand(),
		newKeygenCommand(),
		newSignCommand(),
		newVerifyCommand(),
		newValidateCommand(),
		newProfileCommand(),
		newEnvelopeCommand(),
		newApprovalsCommand(),
		newAuditCommand(),
		newServeCommand(),
		newDemoCommand(),
		newBenchCommand(),
		newTokenCommand(),
		newMCPProxyCommand(),
		newReviewCommand(),
	)
	return root
}

// argsUpTo is cobra.MaximumNArgs reporting a usage error.
func argsUpTo(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.MaximumNArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// argsExactly is cobra.ExactArgs reporting a usage error.
func argsExactly(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
