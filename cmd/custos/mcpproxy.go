package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/mcpproxy"
)

func newMCPProxyCommand() *cobra.Command {
	var config string
	var check bool
	cmd := &cobra.Command{
		Use:   "mcp-proxy --config POLICY -- COMMAND [ARG...]",
		Short: "Wrap a stdio MCP server: allow, deny or ask a human for each tool call",
		Long: `Run COMMAND as a stdio MCP server and serve MCP on standard input and output
in front of it. Tools, prompts and resources are listed unchanged; every
tools/call is decided by the first rule of POLICY that matches the tool
name (and the argument globs): allow forwards it, deny answers an error
carrying the ASC status PERMISSION_DENIED, require_approval records an
AAIS request for exactly this call in the configured authority and
forwards it only once a human approved it. A call no rule matches is
denied.

Standard output is the MCP channel: diagnostics and COMMAND's standard
error go to standard error. When the host disconnects, COMMAND is stopped
and the proxy's pending requests are withdrawn.

With --check, the policy is validated and summarised, and nothing runs.
See docs/mcp-proxy.md for the policy reference and host configuration.`,
		Example: `  custos mcp-proxy --config policy.yaml -- npx -y @modelcontextprotocol/server-filesystem /tmp
  custos mcp-proxy --config policy.yaml --check`,
		Args: func(cmd *cobra.Command, args []string) error {
			if check {
				if len(args) > 0 {
					return usageError{errors.New("--check takes no command")}
				}
				return nil
			}
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return usageError{errors.New("give the wrapped server after --: custos mcp-proxy --config POLICY -- COMMAND [ARG...]")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if config == "" {
				return usageError{errors.New("--config POLICY is required")}
			}
			policy, err := mcpproxy.LoadPolicy(config)
			if err != nil {
				return err
			}
			if check {
				printPolicy(cmd, policy)
				return nil
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return mcpproxy.Run(ctx, mcpproxy.RunConfig{Policy: policy, Command: args,
				Stdin: cmd.InOrStdin(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the policy file (YAML)")
	cmd.Flags().BoolVar(&check, "check", false, "validate and summarise the policy, then exit")
	return cmd
}

// printPolicy summarises a valid policy on standard output.
func printPolicy(cmd *cobra.Command, p *mcpproxy.Policy) {
	w := cmd.OutOrStdout()
	if p.Store != "" {
		fmt.Fprintf(w, "authority  embedded store %s\n", p.Store)
	} else {
		fmt.Fprintf(w, "authority  %s (token set)\n", p.Authority)
	}
	wait := "until the request expires"
	if p.Wait > 0 {
		wait = p.Wait.String()
	}
	fmt.Fprintf(w, "requests   expire after %s; calls wait %s\n", p.TTL, wait)
	for _, r := range p.Rules {
		var extra []string
		for k, g := range r.Args {
			extra = append(extra, fmt.Sprintf("%s=%q", k, g))
		}
		if r.Profile != "" {
			extra = append(extra, "profile "+r.Profile)
		}
		if r.Verdict == mcpproxy.RequireApproval {
			extra = append(extra, "risk "+string(r.Risk))
			if r.Remember != nil {
				var scopes []string
				for _, s := range r.Remember.Scopes {
					scopes = append(scopes, string(s))
				}
				w := strings.Join(scopes, " and ") + " approvals offered"
				if r.Remember.MaxAge > 0 {
					w += " (at most " + r.Remember.MaxAge.String() + ")"
				}
				var cs []string
				for k, v := range r.Remember.Constraints {
					cs = append(cs, k+" "+string(v))
				}
				if len(cs) > 0 {
					sort.Strings(cs)
					w += " within " + strings.Join(cs, ", ")
				}
				extra = append(extra, w)
			} else if r.AllowSession {
				extra = append(extra, "session approvals offered")
			}
		}
		fmt.Fprintf(w, "rule %-3d   %-16s %q %s\n", r.Index, r.Verdict, r.Tool, strings.Join(extra, ", "))
	}
	fmt.Fprintln(w, "otherwise  deny")
}
