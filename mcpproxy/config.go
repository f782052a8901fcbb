package mcpproxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"regexp"
)

// Harness is origin.harness of every approval request the proxy makes.
const Harness = "custos-mcp-proxy"

// ActionKind is action.kind of every approval request the proxy makes.
const ActionKind = "tool.call"

// DetailsKey is the ASC details member describing a refused call.
const DetailsKey = "dev.custos.mcp_proxy"

// aaisID is the AAIS schema's id pattern (tool names, agent ids, profiles).
var aaisID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// RunConfig is what Run needs.
type RunConfig struct {
	Policy *Policy
	// Command is the wrapped stdio MCP server and its arguments; Upstream
	// instead a remote MCP server (exactly one of them is set).
	Command  []string
	Upstream *Upstream
	// Listen, when set, serves the hosts over Streamable HTTP instead of
	// Stdin/Stdout.
	Listen *Listen
	// Ready, when set, is called with the HTTP address once Listen serves.
	Ready func(addr net.Addr)
	// Stdin and Stdout are the MCP channel to the host; Stderr receives
	// the wrapped server's standard error and the diagnostics.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Logger receives diagnostics (text on Stderr when nil).
	Logger *slog.Logger
}

// OpenApprovals opens the authority the policy names: the embedded store
// (store:) or a running custos serve (authority: and token:).
func OpenApprovals(ctx context.Context, p *Policy) (Approvals, error) {
	if p.Store != "" {
		return OpenEmbeddedWith(ctx, p.Store, p.RememberPolicy())
	}
	if p.Authority != "" {
		return NewRemote(p.Authority, p.Token, nil), nil
	}
	return nil, errors.New("mcpproxy: the policy names no authority")
}
