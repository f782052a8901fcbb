package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/asc"
)

func newStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Explain and validate Agent Status Codes (ASC 0.1)",
	}
	cmd.AddCommand(newStatusExplainCommand(), newStatusValidateCommand())
	return cmd
}

func newStatusExplainCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "explain CODE|NAME",
		Short: "Explain what an ASC code means and how to handle it",
		Long: `Explain an ASC code given as a number (5001), in ASC notation (ASC-5001) or by
its registered name (RATE_LIMITED, case-insensitive). A code that is not
registered is explained by its first-digit class, which is how consumers must
treat it.`,
		Example: "  custos status explain 6005\n  custos status explain rate_limited",
		Args:    argsExactly(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			var names []string
			for _, e := range asc.Registry() {
				names = append(names, e.Name)
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := asc.ParseCode(args[0])
			if err != nil {
				return usageError{err}
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), asc.Explain(code))
			return err
		},
	}
}

func newStatusValidateCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate [FILE|-]",
		Short: "Check an ASC status envelope against the producer rules",
		Long: `Check an ASC status envelope (application/agent-status+json) read from FILE
or standard input: strict JSON, the minimum fields, code/name agreement for
registered codes, enums, timestamps, trace ids, cause-tree limits, retry
contract and the other producer rules. Every problem is listed with its JSON
Pointer and rule. Warnings (SHOULD-level rules) do not fail the check.`,
		Args: argsUpTo(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, name, err := readInput(cmd, args, asc.MaxDocumentSize)
			if err != nil {
				return err
			}
			var findings []finding
			for _, is := range asc.CheckJSON(data) {
				findings = append(findings, finding{Pointer: is.Path, Code: is.Rule, Severity: string(is.Level),
					Message: is.Message, text: is.String()})
			}
			return reportFindings(cmd.OutOrStdout(), name, "ASC envelope", findings, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
