package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/arsia"
)

// version is set at link time by release builds (-ldflags "-X main.version=v1.2.3").
var version = ""

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of custos and of the specifications it implements",
		Args:  argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			v, goVersion, revision := buildVersion()
			fmt.Fprintf(w, "custos %s\n", v)
			if revision != "" {
				fmt.Fprintf(w, "revision %s\n", revision)
			}
			fmt.Fprintf(w, "go %s\n", goVersion)
			fmt.Fprintf(w, "implements: ARSIA %s (envelopes, signatures, compliance profiles, the custos serve gateway); "+
				"AAIS 1.0 (approvals); ASC 0.1.0 (experimental draft); RFC 8785 canonical JSON\n", arsia.ProtocolVersion)
			return nil
		},
	}
}

func buildVersion() (v, goVersion, revision string) {
	v = version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if v == "" {
			v = "(devel)"
		}
		return v, "unknown", ""
	}
	if v == "" {
		v = info.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
		if s.Key == "vcs.modified" && s.Value == "true" && revision != "" {
			revision += " (modified)"
		}
	}
	return v, info.GoVersion, revision
}
