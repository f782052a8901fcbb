package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Run runs the proxy: it starts the wrapped server, serves the host on
// c.Stdin/c.Stdout until the host disconnects or ctx ends, then stops the
// wrapped server and ends the approval session.
func Run(ctx context.Context, c RunConfig) error {
	if c.Policy == nil || len(c.Command) == 0 {
		return errors.New("mcpproxy: a policy and a command are required")
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(c.Stderr, nil))
	}
	approvals, err := OpenApprovals(ctx, c.Policy)
	if err != nil {
		return err
	}
	defer approvals.Close()

	cmd := exec.Command(c.Command[0], c.Command[1:]...)
	cmd.Stderr = c.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: Harness, Version: "1"},
		&mcp.ClientOptions{Logger: logger, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	child, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second}, nil)
	cancel()
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		return fmt.Errorf("starting the wrapped MCP server %q: %w", c.Command[0], err)
	}
	defer child.Close()

	p, err := New(child, Options{Policy: c.Policy, Approvals: approvals, Logger: logger})
	if err != nil {
		return err
	}
	go func() {
		err := child.Wait()
		p.ChildStopped()
		logger.Warn("the wrapped MCP server stopped; tool calls now fail with DEPENDENCY_UNAVAILABLE", "err", err)
	}()
	logger.Info("custos mcp-proxy ready", "command", c.Command[0], "session", p.SessionID())

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
	ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	p.End(ectx)
	ecancel()
	logger.Info("the host disconnected; stopping the wrapped MCP server")
	return nil
}

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
