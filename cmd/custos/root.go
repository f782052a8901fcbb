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
	finishRoot(root)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "custos: %v\n", err)
	var ue usageError
	var es interface{ ExitCode() int }
	if errors.As(err, &es) {
		return es.ExitCode()
	}
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

custos serve is the gateway: agents send it signed ARSIA requests, it
verifies, authorizes and audits them, holds those a compliance profile puts
before a human, and runs them through its handlers. Reviewers decide in its
web inbox, with custos review or custos approvals; custos audit verifies the
trail. custos demo shows the whole lifecycle in a minute. custos send is
an agent's side: it signs a request, sends it through a gateway, waits for
a pending approval and prints the verified reply.

The protocol tools work on their own: ARSIA 1.0 envelopes (keygen, sign,
verify, validate, envelope, profile), canonical JSON and digests (RFC 8785:
canon, digest), Agent Status Codes (ASC 0.1: status), access tokens (token),
conformance runs, and approvals in front of an MCP server (mcp-proxy).

The commands that keep or read state (serve, approvals, audit) find it in
the data directory: --data DIR, else $CUSTOS_DATA, else ./custos-data.
Exit codes: 0 success, 1 the input was rejected or a check failed, 2 the
command line is wrong; custos send also exits 3-7, the ASC class of a
refusal (see custos send --help).`,
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
		newSendCommand(),
		newCACommand(),
	)
	// cobra adds its own help command when it executes; this one makes an
	// unknown topic a usage error too.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return usageError{fmt.Errorf("no help topic %q (see: custos --help)", strings.Join(args, " "))}
			}
			return c.Help()
		},
	})
	return root
}

// finishRoot adds the help command and cobra's completion command (which
// writes where root writes at this point: call it after SetOut), and makes
// every group strict.
func finishRoot(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		strictGroups(c)
	}
}

// strictGroups makes every command group under c (a command with
// subcommands and nothing to run itself) refuse an unknown subcommand with
// a usage error, where cobra would print the help and exit 0; the group
// alone still prints its help.
func strictGroups(c *cobra.Command) {
	for _, s := range c.Commands() {
		strictGroups(s)
	}
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Errorf("unknown command %q for %q (see: %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())}
		}
		return nil
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
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
