package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Run runs the proxy: it connects to the gated server (starts the wrapped
// stdio server, or opens a session on the remote one), serves the hosts —
// on c.Stdin/c.Stdout until the host disconnects, or over Streamable HTTP
// on c.Listen until ctx ends — then closes the gated server's session and
// ends the approval sessions.
func Run(ctx context.Context, c RunConfig) error {
	if c.Policy == nil || (len(c.Command) == 0) == (c.Upstream == nil) {
		return errors.New("mcpproxy: a policy and either a command or an upstream URL are required")
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(c.Stderr, nil))
	}
	if c.Upstream != nil {
		if err := CheckUpstreamURL(c.Upstream.URL); err != nil {
			return fmt.Errorf("mcpproxy: upstream: %w", err)
		}
	}
	var ln net.Listener
	if c.Listen != nil {
		if err := c.Listen.Check(); err != nil {
			return err
		}
		// Bind before anything else starts, so that a taken port fails
		// fast and nothing is left to stop.
		l, err := net.Listen("tcp", c.Listen.Addr)
		if err != nil {
			return fmt.Errorf("mcpproxy: listening on %s: %w", c.Listen.Addr, err)
		}
		ln = l
		defer ln.Close()
	}
	approvals, err := OpenApprovals(ctx, c.Policy)
	if err != nil {
		return err
	}
	defer approvals.Close()

	o := Options{Policy: c.Policy, Approvals: approvals, Logger: logger, PerSession: c.Listen != nil}
	var p *Proxy
	var what string
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	if c.Upstream != nil {
		what = c.Upstream.String()
		ht := &headerTransport{base: http.DefaultTransport, header: c.Upstream.Header}
		t := &mcp.StreamableClientTransport{Endpoint: c.Upstream.URL, HTTPClient: &http.Client{Transport: ht}}
		p, err = Connect(cctx, t, o)
		cancel()
		if err != nil {
			if r := ht.lastRefusal(); r != nil {
				r.URL, r.Headers = c.Upstream.URL, c.Upstream.HeaderNames()
				return r
			}
			return fmt.Errorf("connecting to the upstream MCP server %s: %w", c.Upstream.URL, err)
		}
	} else {
		what = c.Command[0]
		cmd := exec.Command(c.Command[0], c.Command[1:]...)
		cmd.Stderr = c.Stderr
		p, err = Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second}, o)
		cancel()
		if err != nil {
			if cmd.Process != nil {
				_ = cmd.Process.Kill()
			}
			return fmt.Errorf("starting the wrapped MCP server %q: %w", c.Command[0], err)
		}
	}
	defer p.child.Close()

	defer func() {
		ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		p.End(ectx)
		ecancel()
	}()
	if ln != nil {
		return serveHTTP(ctx, ln, c, p, what, logger)
	}
	logger.Info("custos mcp-proxy ready", "server", what, "session", p.SessionID())
	ss, err := p.Server().Connect(ctx, &mcp.IOTransport{Reader: nopCloser{c.Stdin}, Writer: nopWriteCloser{c.Stdout}}, nil)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = ss.Close()
		case <-done:
		}
	}()
	_ = ss.Wait()
	close(done)
	logger.Info("the host disconnected; closing the gated MCP server's session")
	return nil
}

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
