package mcpproxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/custos-runtime/custos/arsia"
)

// Upstream is a remote MCP server the proxy fronts over Streamable HTTP,
// instead of a stdio child.
type Upstream struct {
	// URL is the server's MCP endpoint (https, or http to a loopback
	// host only).
	URL string
	// Header is sent with every request to the server: typically its
	// credentials (Authorization, X-Api-Key). The values are secrets:
	// they are never logged nor printed.
	Header http.Header
}

// HeaderNames are the names of the headers sent upstream, sorted: what may
// be shown of them.
func (u *Upstream) HeaderNames() []string {
	names := make([]string, 0, len(u.Header))
	for k := range u.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// String describes the upstream without its header values.
func (u *Upstream) String() string {
	if len(u.Header) == 0 {
		return u.URL
	}
	return u.URL + " (headers " + strings.Join(u.HeaderNames(), ", ") + ")"
}

// CheckUpstreamURL refuses what is not an MCP endpoint the proxy may send
// credentials to.
func CheckUpstreamURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return fmt.Errorf("%q is not an http(s) URL", s)
	case u.User != nil || u.Fragment != "":
		return fmt.Errorf("%q must not carry credentials or a fragment (put credentials in headers)", s)
	case u.Scheme == "http" && !arsia.IsLoopbackHost(u.Hostname()):
		return fmt.Errorf("%q: plain http is allowed only to localhost; use https", s)
	}
	return nil
}

// reservedHeaders are set by the transport itself.
var reservedHeaders = map[string]bool{
	"Accept": true, "Content-Type": true, "Content-Length": true, "Host": true,
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true,
	"Connection": true, "Transfer-Encoding": true, "Te": true, "Upgrade": true,
}

// addHeader validates one upstream header and adds it to h. where names
// the setting in errors; the value is never quoted in them.
func addHeader(h http.Header, name, value, where string) error {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	}) {
		return fmt.Errorf("%s: %q is not an HTTP header name", where, name)
	}
	canon := textproto.CanonicalMIMEHeaderKey(name)
	if reservedHeaders[canon] {
		return fmt.Errorf("%s: %s is set by the MCP transport itself", where, canon)
	}
	if strings.TrimSpace(value) == "" {
		return fmt.Errorf("%s: the value of %s is empty", where, canon)
	}
	if strings.ContainsFunc(value, func(r rune) bool { return r == '\r' || r == '\n' || r == 0 }) {
		return fmt.Errorf("%s: the value of %s contains a line break or NUL", where, canon)
	}
	if _, dup := h[canon]; dup {
		return fmt.Errorf("%s: %s is set twice", where, canon)
	}
	h[canon] = []string{value}
	return nil
}

// ParseHeaderFlag reads "Name: value" (a --upstream-header argument) into h.
func ParseHeaderFlag(h http.Header, arg string) error {
	name, value, ok := strings.Cut(arg, ":")
	if !ok {
		return fmt.Errorf("--upstream-header %q: want \"Name: value\"", clip(name, 100))
	}
	return addHeader(h, strings.TrimSpace(name), strings.TrimSpace(value), "--upstream-header")
}

// ParseHeaderEnvFlag reads "Name=VARIABLE" (an --upstream-header-env
// argument) into h, taking the value from the environment variable.
func ParseHeaderEnvFlag(h http.Header, arg string) error {
	name, variable, ok := strings.Cut(arg, "=")
	if !ok || variable == "" {
		return fmt.Errorf("--upstream-header-env %q: want Name=VARIABLE", arg)
	}
	value, set := os.LookupEnv(variable)
	if !set {
		return fmt.Errorf("--upstream-header-env %s: the environment variable %s is not set", name, variable)
	}
	return addHeader(h, strings.TrimSpace(name), value, "--upstream-header-env")
}

// headerTransport adds the upstream's headers to every request and keeps
// the status of the last refused one, to explain a failed connection.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header

	mu      sync.Mutex
	refused *RefusedError
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden ||
		resp.StatusCode == http.StatusProxyAuthRequired) {
		t.mu.Lock()
		t.refused = &RefusedError{Status: resp.Status, Challenge: clip(resp.Header.Get("WWW-Authenticate"), 200)}
		t.mu.Unlock()
	}
	return resp, err
}

func (t *headerTransport) lastRefusal() *RefusedError {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}

// RefusedError is an upstream that refused the proxy's credentials.
type RefusedError struct {
	// URL is the upstream endpoint, Headers the names of the headers sent.
	URL     string
	Headers []string
	// Status is the HTTP status line ("401 Unauthorized"); Challenge the
	// server's WWW-Authenticate header, if any.
	Status    string
	Challenge string
}

func (e *RefusedError) Error() string {
	sent := "no credential headers were sent (set upstream.headers or --upstream-header-env)"
	if len(e.Headers) > 0 {
		sent = "sent the headers " + strings.Join(e.Headers, ", ") + " (values not shown): check them"
	}
	msg := fmt.Sprintf("the upstream MCP server %s refused the proxy with HTTP %s; %s", e.URL, e.Status, sent)
	if e.Challenge != "" {
		msg += "; it asks for: " + e.Challenge
	}
	return msg
}

// IsRefused reports whether err is an upstream refusing the credentials.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
