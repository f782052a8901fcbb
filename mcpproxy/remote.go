package mcpproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// Remote is an Approvals on a running custos serve, through the request
// endpoints of httpapi.NewSubmit:
//
//	POST /approvals/requests                  submit (approval.requested in)
//	GET  /approvals/requests/{id}?wait=25s    long-poll for the receipt
//	POST /approvals/requests/{id}/withdraw    cancel a request nobody waits for
//
// Every call carries "Authorization: Bearer TOKEN".
type Remote struct {
	base, token string
	client      *http.Client
	// LongPoll is how long one GET waits on the server (25 s when zero).
	LongPoll time.Duration
	seq      atomic.Uint64
	stream   string
}

// NewRemote returns the Approvals of the custos serve at base. A nil client
// uses one without a total timeout (long polls are bounded by the server).
func NewRemote(base, token string, client *http.Client) *Remote {
	if client == nil {
		client = &http.Client{}
	}
	return &Remote{base: base, token: token, client: client, stream: Harness + "-" + randomHex(8)}
}

// maxAnswer caps an answer of the authority.
const maxAnswer = 4 << 20

func (r *Remote) do(ctx context.Context, method, path string, body []byte) (*aais.Message, int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusCreated {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data[:min(len(data), 500)]))
	}
	m, err := aais.Parse(data)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: the answer is not an AAIS message: %w", method, path, err)
	}
	return m, resp.StatusCode, nil
}

// answer reads a request-or-receipt answer about request id.
func answer(m *aais.Message, id string) (*aais.Message, error) {
	switch {
	case m.Type == aais.TypeResolved && m.Resolution.RequestID == id:
		return m, nil
	case m.Type == aais.TypeRequested && m.Request.ID == id:
		return nil, nil
	}
	return nil, fmt.Errorf("the authority answered %s about another request", m.Type)
}

// Submit implements Approvals.
func (r *Remote) Submit(ctx context.Context, req *aais.Request) (*aais.Message, error) {
	env, err := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Sequence: r.seq.Add(1), Stream: r.stream}, req)
	if err != nil {
		return nil, err
	}
	body, err := aais.Marshal(env)
	if err != nil {
		return nil, err
	}
	m, _, err := r.do(ctx, http.MethodPost, "/approvals/requests", body)
	if err != nil {
		return nil, err
	}
	if m.Type == aais.TypeRequested && m.Request.ActionDigest != req.ActionDigest {
		return nil, errors.New("the authority recorded another action under this request id")
	}
	return answer(m, req.ID)
}

// Wait implements Approvals by long-polling the request's state.
func (r *Remote) Wait(ctx context.Context, id string) (*aais.Message, error) {
	lp := r.LongPoll
	if lp <= 0 {
		lp = 25 * time.Second
	}
	path := "/approvals/requests/" + url.PathEscape(id) + "?wait=" + lp.String()
	failures := 0
	for {
		m, status, err := r.do(ctx, http.MethodGet, path, nil)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			// A restarting server or a dropped connection: retry a few
			// times; a refusal (4xx) is final.
			failures++
			if (status >= 400 && status < 500) || failures > 5 {
				return nil, err
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(failures) * time.Second):
			}
			continue
		}
		failures = 0
		receipt, err := answer(m, id)
		if err != nil || receipt != nil {
			return receipt, err
		}
	}
}

// Withdraw implements Approvals.
func (r *Remote) Withdraw(ctx context.Context, req *aais.Request) error {
	_, _, err := r.do(ctx, http.MethodPost, "/approvals/requests/"+url.PathEscape(req.ID)+"/withdraw", []byte("{}"))
	return err
}

// EndSession implements Approvals. The remote API has no call for it: the
// session's pending requests expire, and its session rules can match only
// requests of this process's random session id, which ends with it.
func (r *Remote) EndSession(context.Context, string) error { return nil }

// Close implements Approvals.
func (r *Remote) Close() error {
	r.client.CloseIdleConnections()
	return nil
}
