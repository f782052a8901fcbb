package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A wrong command line exits 2 (exitUsage) on every command, before it
// reads a file, opens a store or listens: one line per command, and the
// test fails when a command has none.
func TestUsageExitCodes(t *testing.T) {
	t.Chdir(t.TempDir()) // nothing a command might create lands in the clone
	t.Setenv("CUSTOS_DATA", "")
	t.Setenv("CUSTOS_STORE", "")
	t.Setenv("CUSTOS_AUDIT_LOG", "")
	t.Setenv("CUSTOS_CONFIG", "")
	table := []struct {
		path string // the command, as its CommandPath
		args string // a wrong command line for it
	}{
		{"custos", "bogus"},
		{"custos approvals", "approvals bogus"},
		{"custos approvals approve", "approvals approve apr_1 --scope forever"},
		{"custos approvals cancel", "approvals cancel apr_1 --digest sha256:xyz"},
		{"custos approvals deny", "approvals deny"},
		{"custos approvals explain", "approvals explain"},
		{"custos approvals list", "approvals list extra"},
		{"custos approvals revoke", "approvals revoke"},
		{"custos approvals rules", "approvals rules --all=maybe"},
		{"custos approvals show", "approvals show a b"},
		{"custos approvals snapshot", "approvals snapshot extra"},
		{"custos approvals stdio", "approvals stdio --interval 0s"},
		{"custos approvals submit", "approvals submit --timeout -1s"},
		{"custos approvals sweep", "approvals --data x --store y sweep"},
		{"custos approvals watch", "approvals watch --interval -1s"},
		{"custos audit", "audit bogus"},
		{"custos audit export", "audit export --from 5 --to 3"},
		{"custos audit purge", "audit purge --log"},
		{"custos audit verify", "audit verify --partial"},
		{"custos bench", "bench bogus"},
		{"custos bench crash", "bench crash --kills -1"},
		{"custos bench flood", "bench flood --connections 0"},
		{"custos bench gateway", "bench gateway --requests 0"},
		{"custos bench sse", "bench sse --runs 0"},
		{"custos ca", "ca bogus"},
		{"custos ca issue", "ca issue --agent acme"},
		{"custos ca list", "ca list extra"},
		{"custos ca revoke", "ca revoke"},
		{"custos ca root", "ca root extra"},
		{"custos canon", "canon --pointer request"},
		{"custos completion", "completion bogus"},
		{"custos completion bash", "completion bash extra"},
		{"custos completion fish", "completion fish extra"},
		{"custos completion powershell", "completion powershell extra"},
		{"custos completion zsh", "completion zsh extra"},
		{"custos conformance", "conformance bogus"},
		{"custos conformance aais", "conformance aais"},
		{"custos conformance arsia", "conformance arsia --suites s --shared s --level L9"},
		{"custos conformance asc", "conformance asc a b"},
		{"custos demo", "demo --listen nowhere"},
		{"custos digest", "digest --max-depth 0"},
		{"custos envelope", "envelope bogus"},
		{"custos envelope new", "envelope new --from advisor --to agent:acme.gw --capability demo.echo --type com.acme/echo"},
		{"custos help", "help bogus"},
		{"custos keygen", "keygen --agent agent:acme.x --alg HS256"},
		{"custos mcp-proxy", "mcp-proxy --config policy.yaml --upstream https://mcp.example/mcp -- server"},
		{"custos profile", "profile bogus"},
		{"custos profile list", "profile list extra"},
		{"custos profile show", "profile show NO-SUCH-PROFILE"},
		{"custos review", "review --server ftp://x --token t"},
		{"custos send", "send --to http://127.0.0.1:1 --capability demo.echo --type com.acme/echo"},
		{"custos serve", "serve --listen 127.0.0.1:notaport"},
		{"custos serve password", "serve password extra"},
		{"custos serve token", "serve token extra"},
		{"custos sign", "sign"},
		{"custos status", "status bogus"},
		{"custos status explain", "status explain 99999"},
		{"custos status validate", "status validate a b"},
		{"custos token", "token bogus"},
		{"custos token dpop", "token dpop --key k.json --url /v1/arsia/inbox --token t"},
		{"custos token assertion", "token assertion --key k.json --aud /oauth/token"},
		{"custos token issue", "token issue --key k.json --iss i --sub agent:a.b --aud agent:a.c --scope demo.echo --ttl -1s"},
		{"custos validate", "validate --now yesterday"},
		{"custos verify", "verify --jwks keys.json --alg none"},
		{"custos version", "version extra"},
	}
	var covered []string
	for _, tc := range table {
		covered = append(covered, tc.path)
		t.Run(tc.args, func(t *testing.T) {
			code, out, errOut := custos(t, "", strings.Fields(tc.args)...)
			if code != exitUsage || out != "" || !strings.HasPrefix(errOut, "custos: ") {
				t.Errorf("custos %s: exit %d, want %d; stdout %q, stderr %q", tc.args, code, exitUsage, out, errOut)
			}
		})
	}
	// An unknown flag is a usage error everywhere.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !slices.Contains(covered, c.CommandPath()) {
			t.Errorf("%s has no wrong command line in the table", c.CommandPath())
		}
		args := append(strings.Fields(c.CommandPath())[1:], "--no-such-flag")
		if code, out, _ := custos(t, "", args...); code != exitUsage || out != "" {
			t.Errorf("custos %s: exit %d, stdout %q", strings.Join(args, " "), code, out)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	root := newRootCommand()
	finishRoot(root)
	walk(root)
	if entries, _ := filepath.Glob("*"); len(entries) != 0 {
		t.Errorf("a wrong command line created %v", entries)
	}
}
