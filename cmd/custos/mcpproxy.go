package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/mcpproxy"
)

func newMCPProxyCommand() *cobra.Command {
	var config, upstream, listen, listenTokenEnv string
	var headers, headerEnvs []string
	var check, listenRemote bool
	cmd := &cobra.Command{
		Use:   "mcp-proxy --config POLICY [--upstream URL] [--listen ADDR] [-- COMMAND [ARG...]]",
		Short: "Gate an MCP server: allow, deny or ask a human for each tool call",
		Long: `Run COMMAND as a stdio MCP server (or, with --upstream URL, open a session
on a remote MCP server over Streamable HTTP) and serve MCP in front of it,
on standard input and output (or, with --listen ADDR, over Streamable HTTP
at http://ADDR/mcp). Tools, prompts and resources are listed unchanged,
list changes and resource subscriptions are relayed; every
tools/call is decided by the first rule of POLICY that matches the tool
name (and the argument globs): allow forwards it, deny answers an error
carrying the ASC status PERMISSION_DENIED, require_approval records an
AAIS request for exactly this call in the configured authority and
forwards it only once a human approved it. A call no rule matches is
denied.

Over stdio, standard output is the MCP channel: diagnostics and COMMAND's
standard error go to standard error. When the host disconnects, COMMAND is
stopped and the proxy's pending requests are withdrawn. Over HTTP, each
host session has its own approval session, ended with it.

The remote server's credentials are headers: --upstream-header-env
'Authorization=VARIABLE' takes the value from an environment variable
(--upstream-header 'Name: value' from the command line, where others may
see it); values are never logged. --listen refuses an address that is not
loopback unless --listen-remote and a token (--listen-token-env) are given.

With --check, the policy is validated and summarised, and nothing runs.
See docs/mcp-proxy.md for the policy reference and host configuration.`,
		Example: `  custos mcp-proxy --config policy.yaml -- npx -y @modelcontextprotocol/server-filesystem /tmp
  custos mcp-proxy --config policy.yaml --upstream https://mcp.example.com/mcp --upstream-header-env 'Authorization=MCP_AUTH'
  custos mcp-proxy --config policy.yaml --listen 127.0.0.1:8931 -- ./my-mcp-server
  custos mcp-proxy --config policy.yaml --check`,
		Args: func(cmd *cobra.Command, args []string) error {
			if check {
				if len(args) > 0 {
					return usageError{errors.New("--check takes no command")}
				}
				return nil
			}
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return usageError{errors.New("give the wrapped server after --: custos mcp-proxy --config POLICY -- COMMAND [ARG...]")}
			}
			if len(args) > 0 && upstream != "" {
				return usageError{errors.New("--upstream and a command after --: give one gated server, not both")}
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
			if err := applyMCPProxyFlags(policy, upstream, headers, headerEnvs, listen, listenTokenEnv, listenRemote, len(args) > 0); err != nil {
				return usageError{err}
			}
			if check {
				printPolicy(cmd, policy)
				return nil
			}
			if len(args) == 0 && policy.Upstream == nil {
				return usageError{errors.New("give the gated server: a command after -- (custos mcp-proxy --config POLICY -- COMMAND [ARG...]), --upstream URL, or upstream.url in the policy")}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rc := mcpproxy.RunConfig{Policy: policy, Command: args, Listen: policy.Listen,
				Stdin: cmd.InOrStdin(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
			if len(args) == 0 {
				rc.Upstream = policy.Upstream
			}
			return mcpproxy.Run(ctx, rc)
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the policy file (YAML)")
	cmd.Flags().BoolVar(&check, "check", false, "validate and summarise the policy, then exit")
	cmd.Flags().StringVar(&upstream, "upstream", "", "the remote MCP server's Streamable HTTP endpoint (instead of a command; overrides upstream.url)")
	cmd.Flags().StringArrayVar(&headers, "upstream-header", nil, "a header sent to the remote server, 'Name: value' (repeatable; visible to other users of this machine: prefer --upstream-header-env)")
	cmd.Flags().StringArrayVar(&headerEnvs, "upstream-header-env", nil, "a header sent to the remote server, 'Name=VARIABLE', its value read from the environment (repeatable)")
	cmd.Flags().StringVar(&listen, "listen", "", "serve the hosts over Streamable HTTP on HOST:PORT instead of stdio (loopback unless --listen-remote; overrides serve.listen)")
	cmd.Flags().StringVar(&listenTokenEnv, "listen-token-env", "", "the environment variable holding the bearer token hosts must send (overrides serve.token_env)")
	cmd.Flags().BoolVar(&listenRemote, "listen-remote", false, "allow --listen on an address that is not loopback (a token is then required)")
	return cmd
}

// applyMCPProxyFlags lays the command line over the policy's upstream:
// and serve: sections.
func applyMCPProxyFlags(p *mcpproxy.Policy, upstream string, headers, headerEnvs []string, listen, tokenEnv string, remote, command bool) error {
	if command && p.Upstream != nil && upstream == "" && len(headers)+len(headerEnvs) == 0 {
		// A command on the command line replaces the policy's upstream.
		p.Upstream = nil
	}
	if upstream != "" || len(headers)+len(headerEnvs) > 0 {
		if command {
			return errors.New("--upstream-header and --upstream-header-env are for --upstream, not a command")
		}
		if p.Upstream == nil {
			p.Upstream = &mcpproxy.Upstream{Header: http.Header{}}
		}
		if upstream != "" {
			p.Upstream.URL = upstream
		}
		if p.Upstream.URL == "" {
			return errors.New("--upstream-header needs --upstream URL (or upstream.url in the policy)")
		}
		if err := mcpproxy.CheckUpstreamURL(p.Upstream.URL); err != nil {
			return fmt.Errorf("--upstream: %w", err)
		}
		for _, h := range headers {
			if err := mcpproxy.ParseHeaderFlag(p.Upstream.Header, h); err != nil {
				return err
			}
		}
		for _, h := range headerEnvs {
			if err := mcpproxy.ParseHeaderEnvFlag(p.Upstream.Header, h); err != nil {
				return err
			}
		}
	}
	if listen != "" || tokenEnv != "" || remote {
		if p.Listen == nil {
			p.Listen = &mcpproxy.Listen{Addr: mcpproxy.DefaultListen}
		}
		if listen != "" {
			p.Listen.Addr = listen
		}
		if tokenEnv != "" {
			p.Listen.Token = os.Getenv(tokenEnv)
			if p.Listen.Token == "" {
				return fmt.Errorf("--listen-token-env: the environment variable %s is not set", tokenEnv)
			}
		}
		if remote {
			p.Listen.AllowRemote = true
		}
		if err := p.Listen.Check(); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "mcpproxy: "))
		}
	}
	return nil
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
	if p.Upstream != nil {
		fmt.Fprintf(w, "upstream   %s\n", p.Upstream)
	}
	if l := p.Listen; l != nil {
		path := l.Path
		if path == "" {
			path = mcpproxy.DefaultPath
		}
		scheme := "http"
		if l.TLSCert != "" {
			scheme = "https"
		}
		auth := "no token"
		if l.Token != "" {
			auth = "bearer token required"
		}
		fmt.Fprintf(w, "serve      %s://%s%s (%s)\n", scheme, l.Addr, path, auth)
	}
}
