package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/conformance"
)

func newConformanceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Run the upstream conformance corpora against this build",
	}
	cmd.AddCommand(newConformanceASCCommand(), newConformanceArsiaCommand(), newConformanceAAISCommand())
	return cmd
}

func newConformanceArsiaCommand() *cobra.Command {
	var (
		opts       conformance.ArsiaOptions
		categories []string
		jsonFile   string
		verbose    bool
		live       bool
	)
	cmd := &cobra.Command{
		Use:   "arsia --suites DIR --shared DIR",
		Short: "Run the upstream ARSIA 1.0 conformance suites",
		Long: `Run the upstream ARSIA 1.0 conformance suites (the YAML files in --suites)
with the upstream test vectors, keypairs and profiles (in --shared), the way
the reference runner does: every case dispatches on its category and
operation, skip_until cases are reported as skipped. The last line printed is
"arsia conformance: N passed, M failed, K skipped" (errors count as failures);
the exit status is non-zero when any case failed or raised an error.

With --live, the cases upstream gates behind a live platform service
(skip_until) run too, against a custos serve this command starts in a
temporary directory with those services on: ARSIA-State (state-storage),
the certificate authority (certificate-authority: L2 from the gateway's
CA; L3, which it refuses to issue, from a stand-in qualified provider the
gateway trusts) and the authorization server (authorization-server). Cases of services not served yet stay
skipped, with the reason.`,
		Example: `  custos conformance arsia --suites ../shared/conformance/arsia/suites \
      --shared ../shared/conformance/arsia/shared --category canonicalization,signing`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.SuitesDir == "" || opts.SharedDir == "" {
				return usageError{fmt.Errorf("--suites and --shared are required")}
			}
			switch opts.Level {
			case "core", "compliance", "full", "all":
			default:
				return usageError{fmt.Errorf("--level %q: want core, compliance, full or all", opts.Level)}
			}
			for _, c := range categories {
				if c == "claimed" {
					opts.Categories = append(opts.Categories, conformance.ArsiaClaimed()...)
				} else {
					opts.Categories = append(opts.Categories, c)
				}
			}
			if live {
				dir, err := os.MkdirTemp("", "custos-conformance-live-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				target, err := startLiveTarget(cmd.Context(), dir)
				if err != nil {
					return fmt.Errorf("--live: %w", err)
				}
				defer target.Close()
				opts.Live = target.Run
			}
			report, err := conformance.Arsia(opts)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, r := range report.Results {
				if verbose || r.Status == "fail" || r.Status == "error" {
					fmt.Fprintf(w, "%-5s %-18s %s", r.Status, r.Category, r.TestID)
					if r.Message != "" {
						fmt.Fprintf(w, ": %s", r.Message)
					}
					fmt.Fprintln(w)
				}
			}
			if jsonFile != "" {
				data, err := json.MarshalIndent(report, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonFile, append(data, '\n'), 0o644); err != nil {
					return err
				}
			}
			fmt.Fprintln(w, report.String())
			if n := report.Summary.Fail + report.Summary.Error; n > 0 {
				return fmt.Errorf("%d of %d cases failed", n, report.Summary.Total)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.SuitesDir, "suites", "", "folder of the upstream *.yaml suites")
	f.StringVar(&opts.SharedDir, "shared", "", "upstream shared/ folder (test-vectors/, profiles/, schemas/)")
	f.StringSliceVar(&categories, "category", nil, "run only these case categories (comma-separated; \"claimed\" = those this build claims to pass)")
	f.StringVar(&opts.Level, "level", "all", "run only cases of this level: core, compliance, full or all")
	f.StringVar(&jsonFile, "json", "", "also write the report as JSON to this file")
	f.BoolVarP(&verbose, "verbose", "v", false, "list every case with its verdict")
	f.BoolVar(&live, "live", false, "also run the live-service cases against a gateway started for the run")
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
			return printCorpusReport(cmd, report, verbose, report.Failed, len(report.Files), "files")
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list every file with its verdict")
	return cmd
}

func newConformanceAAISCommand() *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "aais DIR",
		Short: "Run the AAIS 1.0 conformance corpus against the approval authority",
		Long: `Run the AAIS 1.0 conformance corpus in DIR (the folder holding
conformance/cases.json, examples/ and schema/, for example
../shared/conformance/aais): both fixtures must validate, the published action
digest must reproduce, every lifecycle case in cases.json must end with the
expected outcome on a fresh store, and the additional checks of the corpus
README must hold. Prints "aais conformance: N passed, M failed, K skipped" and
exits non-zero when anything failed.`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			report, err := conformance.AAIS(args[0])
			if err != nil {
				return err
			}
			return printCorpusReport(cmd, report, verbose, report.Failed, len(report.Results), "checks")
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list every check with its verdict")
	return cmd
}

// corpusReport is a conformance report with a summary line and a listing.
type corpusReport interface {
	String() string // the summary line
	Text() string   // every item with its verdict, then the summary line
}

// printCorpusReport prints the summary, or the full listing when verbose or
// when something failed, and fails the command when anything did.
func printCorpusReport(cmd *cobra.Command, r corpusReport, verbose bool, failed, total int, unit string) error {
	w := cmd.OutOrStdout()
	if verbose || failed > 0 {
		fmt.Fprint(w, r.Text())
	} else {
		fmt.Fprintln(w, r.String())
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d %s failed", failed, total, unit)
	}
	return nil
}
