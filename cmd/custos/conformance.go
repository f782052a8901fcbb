package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/conformance"
)

func newConformanceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Run the upstream conformance corpora against this build",
	}
	cmd.AddCommand(newConformanceASCCommand())
	return cmd
}

func newConformanceASCCommand() *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "asc DIR",
		Short: "Classify and check every ASC example under DIR",
		Long: `Classify every *.json file under DIR (for example
../shared/conformance/asc/extracted) as a complete ASC envelope or as a named
fragment, and check it as what it is. Complete envelopes must validate;
fragments are checked where a check applies and skipped with a reason
otherwise. Prints "asc conformance: N passed, M failed, K skipped" and exits
non-zero when anything failed.`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			report, err := conformance.ASC(args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if verbose || report.Failed > 0 {
				fmt.Fprint(w, report.Text())
			} else {
				fmt.Fprintln(w, report.String())
			}
			if report.Failed > 0 {
				return fmt.Errorf("%d of %d files failed", report.Failed, len(report.Files))
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list every file with its verdict")
	return cmd
}
