// Package client is the Go client of a Custos gateway, for the agents that
// send through it and the people and programs that review what it holds.
//
// Two halves, each usable alone:
//
//   - Sender calls another agent through a gateway (ARSIA): it builds and
//     signs a request envelope with the agent's key, POSTs it to the
//     receiver's inbox, follows a 202 pending_approval through the status
//     URL until a human decided and the call ran, verifies every reply's
//     signature against the keys the receiver publishes in its discovery
//     document (/.well-known/arsia), and returns the verified result or an
//     *Error carrying the ASC status.
//
//   - Approvals is the reviewers' API (the AAIS HTTP + SSE binding of
//     custos serve): list, show, decide, edit, history and rules for a
//     reviewer's API token; Submit, State, Wait and Withdraw for a
//     requester in another process; Watch follows the event stream,
//     reconnecting with backoff and resuming with Last-Event-ID.
//
// Nothing here trusts the network more than it must: plain http is only
// for loopback hosts unless the caller allows it, bodies are capped, and a
// reply that does not verify, that another agent signed, or that answers
// another request is refused (ErrUnverified), never returned.
//
// docs/client.md walks through both halves.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/asc"
)

// MaxBody caps any answer read from a server.
const MaxBody = 8 << 20

// Error is an answer other than the one asked for: an ARSIA error
// envelope (whose signature verified), an RFC 9457 problem document with
// its ASC status, or another HTTP answer.
type Error struct {
	// HTTPStatus is the answer's HTTP status code.
	HTTPStatus int
	// Code is the ASC status of the answer (0 when it carries none); Name
	// is its registered name.
	Code asc.Code
	Name string
	// Detail says what happened, in the server's words (untrusted text:
	// print it with care).
	Detail string
	// ARSIACode is the error code of an ARSIA error envelope
	// ("forbidden", "invalid_request", ...), "" for other answers.
	ARSIACode string
	// Envelope is the verified ARSIA error envelope, when the answer was one.
	Envelope map[string]any
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.HTTPStatus)
	if e.Code != 0 {
		fmt.Fprintf(&b, ", %s", e.Code)
		if e.Name != "" {
			fmt.Fprintf(&b, " %s", e.Name)
		}
	}
	if e.ARSIACode != "" {
		fmt.Fprintf(&b, " (%s)", e.ARSIACode)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	return b.String()
}

// Class is the ASC class of the error's code (ClassUnknown without one).
func (e *Error) Class() asc.Class { return asc.ClassOf(e.Code) }

// Status returns the *Error in err's chain, or nil.
func Status(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// problemError reads an answer that is not the one asked for.
func problemError(status int, body []byte) *Error {
	e := &Error{HTTPStatus: status}
	if p, err := asc.ParseProblem(body); err == nil && (p.AgentStatus != nil || p.Detail != "") {
		e.Detail = p.Detail
		if e.Detail == "" {
			e.Detail = p.Title
		}
		if p.AgentStatus != nil {
			e.Code, e.Name = p.AgentStatus.Code, p.AgentStatus.Name
			if e.Name == "" {
				e.Name = e.Code.Name()
			}
		}
		return e
	}
	e.Detail = oneLine(string(body), 200)
	if e.Detail == "" {
		e.Detail = http.StatusText(status)
	}
	return e
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), " ")
	s = strings.TrimFunc(s, unicode.IsSpace)
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// checkServerURL accepts an http or https URL with a host and without user
// information; plain http only for a loopback host unless insecure.
func checkServerURL(raw string, insecure bool) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: %q is not an http:// or https:// URL", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("client: %q carries user information; give credentials as a token", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: %q has a query or fragment; give the server's base URL", raw)
	}
	if u.Scheme == "http" && !insecure && !arsia.IsLoopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("client: %s is plain http and not a loopback host: use https (or allow insecure http)", u.Host)
	}
	return u, nil
}

// roundTrip sends req with c and reads the whole answer (at most MaxBody).
func roundTrip(c *http.Client, req *http.Request) (resp *http.Response, mediaType string, body []byte, err error) {
	resp, err = c.Do(req)
	if err != nil {
		return nil, "", nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, "", nil, err
	}
	if len(body) > MaxBody {
		return nil, "", nil, fmt.Errorf("client: the answer of %s is larger than %d bytes", req.URL.Redacted(), MaxBody)
	}
	mediaType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return resp, mediaType, body, nil
}

func newRequest(ctx context.Context, method, u string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return http.NewRequestWithContext(ctx, method, u, rd)
}
