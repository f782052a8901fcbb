package mcpproxy

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-runtime/custos/arsia"
)

// Listen is how the proxy serves the hosts over Streamable HTTP.
type Listen struct {
	// Addr is the TCP address (HOST:PORT; port 0: any free port).
	Addr string
	// Path is the MCP endpoint ("/mcp" when empty).
	Path string
	// Token, when set, must be presented by every request as
	// "Authorization: Bearer TOKEN". A secret: never logged.
	Token string
	// AllowRemote must be set to listen on an address that is not
	// loopback; Token is then required too.
	AllowRemote bool
	// TLSCert and TLSKey, when set, serve HTTPS with this certificate.
	TLSCert, TLSKey string
	// SessionTimeout closes a host session idle for this long, ending its
	// approval session (DefaultSessionTimeout when zero).
	SessionTimeout time.Duration
}

// DefaultSessionTimeout is how long an idle HTTP host session lives.
const DefaultSessionTimeout = 30 * time.Minute

// DefaultListen is the address of serve: when it names none.
const DefaultListen = "127.0.0.1:8931"

// DefaultPath is the MCP endpoint of the proxy's HTTP server.
const DefaultPath = "/mcp"

// Check refuses a listener that is malformed, or not loopback without
// AllowRemote and a Token.
func (l *Listen) Check() error {
	host, _, err := net.SplitHostPort(l.Addr)
	if err != nil {
		return fmt.Errorf("mcpproxy: listen address %q: want HOST:PORT (%v)", l.Addr, err)
	}
	if l.Path != "" && (!strings.HasPrefix(l.Path, "/") || strings.ContainsAny(l.Path, "?# ")) {
		return fmt.Errorf("mcpproxy: listen path %q: want an absolute path such as /mcp", l.Path)
	}
	if (l.TLSCert == "") != (l.TLSKey == "") {
		return errors.New("mcpproxy: listen: set both tls_cert and tls_key, or neither")
	}
	if !arsia.IsLoopbackHost(strings.Trim(host, "[]")) {
		if !l.AllowRemote {
			return fmt.Errorf("mcpproxy: listen address %s is not loopback: anyone who reaches it could call the allowed tools; "+
				"listen on 127.0.0.1, or opt in with --listen-remote (serve.allow_remote: true) and a token", l.Addr)
		}
		if l.Token == "" {
			return fmt.Errorf("mcpproxy: listen address %s is not loopback: a token is required (--listen-token-env VARIABLE, or serve.token_env)", l.Addr)
		}
	}
	return nil
}

// Handler is the proxy's Streamable HTTP endpoint: every request needs
// the bearer token when one is set, and each initialize starts a host
// session of its own.
func (p *Proxy) Handler(l *Listen) http.Handler {
	timeout := l.SessionTimeout
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	path := l.Path
	if path == "" {
		path = DefaultPath
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return p.server },
		&mcp.StreamableHTTPOptions{SessionTimeout: timeout, Logger: p.o.Logger})
	cop := http.NewCrossOriginProtection()
	protected := cop.Handler(mcpHandler)
	want := []byte("Bearer " + l.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.Error(w, "not found: the MCP endpoint is "+path, http.StatusNotFound)
			return
		}
		if l.Token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="custos-mcp-proxy"`)
			http.Error(w, "unauthorized: send Authorization: Bearer TOKEN (the proxy's listen token)", http.StatusUnauthorized)
			return
		}
		// A host that leaves ends its calls: the calls a POST carried
		// when the POST ends unanswered (its stream cannot be resumed),
		// every call of a session it deletes. Otherwise a call waiting
		// for a human would wait on, and the SDK's session close would
		// wait for it.
		r.Header.Del(postTagHeader)
		switch r.Method {
		case http.MethodPost:
			tag := randomHex(16)
			r.Header.Set(postTagHeader, tag)
			defer p.cancelCalls(func(c *inflightCall) bool { return c.tag == tag })
		case http.MethodDelete:
			if id := r.Header.Get("Mcp-Session-Id"); id != "" {
				p.cancelCalls(func(c *inflightCall) bool { return c.ss != nil && c.ss.ID() == id })
			}
		}
		protected.ServeHTTP(w, r)
	})
}

// postTagHeader marks each POST the proxy serves, so that the calls it
// carried can be found (the SDK passes the headers to the handlers).
const postTagHeader = "X-Custos-Mcp-Proxy-Post"

// serveHTTP serves p on ln until ctx ends.
func serveHTTP(ctx context.Context, ln net.Listener, c RunConfig, p *Proxy, what string, logger *slog.Logger) error {
	srv := &http.Server{Handler: p.Handler(c.Listen), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() {
		if c.Listen.TLSCert != "" {
			errc <- srv.ServeTLS(ln, c.Listen.TLSCert, c.Listen.TLSKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	scheme := "http"
	if c.Listen.TLSCert != "" {
		scheme = "https"
	}
	path := c.Listen.Path
	if path == "" {
		path = DefaultPath
	}
	logger.Info("custos mcp-proxy ready", "server", what, "endpoint", scheme+"://"+ln.Addr().String()+path,
		"token_required", c.Listen.Token != "")
	if c.Ready != nil {
		c.Ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("mcpproxy: serving HTTP: %w", err)
	case <-ctx.Done():
	}
	// The calls still waiting end first: closing a session waits for them.
	p.cancelCalls(func(*inflightCall) bool { return true })
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// Streams stay open while hosts listen: close what Shutdown did not.
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	for ss := range p.server.Sessions() {
		_ = ss.Close()
	}
	logger.Info("custos mcp-proxy stopped serving HTTP")
	return nil
}
