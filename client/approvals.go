package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
)

// ApprovalsOptions configures an Approvals client. The zero value is
// usable.
type ApprovalsOptions struct {
	// HTTPClient sends the calls; nil means a client of its own. Its
	// Timeout, if any, also bounds the event stream: leave it zero and use
	// CallTimeout.
	HTTPClient *http.Client
	// CallTimeout bounds every call but Watch and Wait (30 s when zero).
	CallTimeout time.Duration
	// AllowInsecureHTTP permits plain http to a host that is not loopback:
	// the token then travels unencrypted.
	AllowInsecureHTTP bool
}

// Approvals is a client of a custos serve's approvals API, authenticated
// with a reviewer's API token (or, for Submit, State, Wait and Withdraw,
// any token the server accepts for requests). The server records the
// token's reviewer as the actor of every decision: an actor sent by a
// client is never trusted. Safe for concurrent use.
type Approvals struct {
	base    string
	token   string
	http    *http.Client
	timeout time.Duration

	mu     sync.Mutex
	stream string // this client's AAIS stream, for the decisions it sends
	seq    uint64
	me     *Me // who the token belongs to, once asked
}

// NewApprovals returns a client of the approvals API at server (the base
// URL of custos serve, e.g. http://127.0.0.1:8080) with token.
func NewApprovals(server, token string, o *ApprovalsOptions) (*Approvals, error) {
	if o == nil {
		o = &ApprovalsOptions{}
	}
	u, err := checkServerURL(server, o.AllowInsecureHTTP)
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, errors.New("client: the approvals API needs a token")
	}
	c := o.HTTPClient
	if c == nil {
		c = &http.Client{}
	}
	timeout := o.CallTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Approvals{base: u.String(), token: token, http: c, timeout: timeout, stream: "client-" + hex.EncodeToString(b[:])}, nil
}

// Server is the base URL the client talks to.
func (a *Approvals) Server() string { return a.base }

func (a *Approvals) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	req, err := newRequest(ctx, method, a.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// call sends one API request and reads the whole answer.
func (a *Approvals) call(ctx context.Context, method, path string, body []byte, timeout time.Duration) (status int, mediaType string, data []byte, err error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := a.request(ctx, method, path, body)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	resp, mt, data, err := roundTrip(a.http, req)
	if err != nil {
		return 0, "", nil, err
	}
	return resp.StatusCode, mt, data, nil
}

// getJSON GETs path and decodes a 200 answer into v.
func (a *Approvals) getJSON(ctx context.Context, path string, v any) error {
	status, _, data, err := a.call(ctx, http.MethodGet, path, nil, a.timeout)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return problemError(status, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("client: GET %s: %w", path, err)
	}
	return nil
}

// message decodes an AAIS message of one of the wanted types.
func message(data []byte, what string, types ...aais.Type) (*aais.Message, error) {
	m, err := aais.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", what, err)
	}
	for _, t := range types {
		if m.Type == t {
			return m, nil
		}
	}
	return nil, fmt.Errorf("client: %s is a %s message", what, m.Type)
}

// Me is who the token belongs to (GET /approvals/me).
type Me struct {
	Actor aais.Actor `json:"actor"`
	Roles []string   `json:"roles"`
}

// Me asks who the token belongs to and which roles it has.
func (a *Approvals) Me(ctx context.Context) (*Me, error) {
	var me Me
	if err := a.getJSON(ctx, "/approvals/me", &me); err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.me = &me
	a.mu.Unlock()
	return &me, nil
}

// Snapshot returns the approval.snapshot message: every pending request
// and the sequence of the last event it includes (to Watch from).
func (a *Approvals) Snapshot(ctx context.Context) (*aais.Message, error) {
	status, _, data, err := a.call(ctx, http.MethodGet, "/approvals/snapshot", nil, a.timeout)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, problemError(status, data)
	}
	return message(data, "the snapshot", aais.TypeSnapshot)
}

// List returns the pending requests that have not expired at now.
func (a *Approvals) List(ctx context.Context) ([]aais.Request, error) {
	snap, err := a.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var v aais.View
	if err := v.Restore(snap); err != nil {
		return nil, err
	}
	return v.Pending(time.Now()), nil
}

// Show returns the approval request id with its resolution, if any: the
// request event as recorded (approval.requested) while it is pending, the
// receipt (approval.resolved) once resolved.
func (a *Approvals) Show(ctx context.Context, id string) (*aais.Message, error) {
	return a.State(ctx, id)
}

// Permission says what the token's reviewer may do with request id.
type Permission struct {
	// Decide is false when the reviewer may not decide the request at
	// all; Approve when they may decide it but not approve it (separation
	// of duties). Edit says they may propose other arguments.
	Decide  bool `json:"decide"`
	Approve bool `json:"approve"`
	Edit    bool `json:"edit"`
	// Reason explains a refusal.
	Reason string `json:"reason,omitempty"`
	// JustificationRequired says an approval needs a justification.
	JustificationRequired bool `json:"justification_required"`
	// Profile is the request's compliance profile ("" when none).
	Profile string   `json:"profile,omitempty"`
	Roles   []string `json:"roles"`
}

// Permission asks what the token's reviewer may do with request id.
func (a *Approvals) Permission(ctx context.Context, id string) (*Permission, error) {
	var p Permission
	if err := a.getJSON(ctx, "/approvals/"+url.PathEscape(id)+"/permission", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Decision is what a reviewer decides on a pending request.
type Decision struct {
	Verdict aais.Verdict
	// Scope defaults to once.
	Scope aais.Scope
	// Justification is recorded with the decision; some compliance
	// profiles require one to approve.
	Justification string
}

// ErrConflict is the error of a Decide that another decision beat: the
// request was already resolved (the conflict receipt is returned too).
var ErrConflict = errors.New("client: another decision resolved the request first")

// ErrVoteRecorded is the error of a Decide on a request that needs several
// approvals (a quorum) when the decision was counted but did not resolve
// it: the request stays pending. The recorded approval.activity, carrying
// the tally (aais.TallyOf), is returned too.
var ErrVoteRecorded = errors.New("client: the vote is recorded; the request needs more approvals")

// Decide sends a decision on req (a pending request as listed) and returns
// the receipt (approval.resolved). When another decision resolved req
// first, the conflict receipt (outcome conflict, its message saying how
// the request was resolved) is returned with ErrConflict. A refusal (the reviewer may not decide, a justification is
// missing, the request is gone) is an *Error with its ASC status.
func (a *Approvals) Decide(ctx context.Context, req *aais.Request, d Decision) (*aais.Message, error) {
	body, err := a.decisionEnvelope(ctx, req, d)
	if err != nil {
		return nil, err
	}
	status, mt, data, err := a.call(ctx, http.MethodPost, "/approvals/"+url.PathEscape(req.ID)+"/decisions", body, a.timeout)
	if err != nil {
		return nil, err
	}
	if mt == "application/json" && status == http.StatusAccepted {
		if m, err := aais.Parse(data); err == nil && aais.Partial(m) {
			return m, ErrVoteRecorded
		}
	}
	if mt == "application/json" && (status == http.StatusOK || status == http.StatusConflict) {
		if m, err := message(data, "the receipt", aais.TypeResolved); err == nil {
			if status == http.StatusConflict {
				return m, ErrConflict
			}
			return m, nil
		}
	}
	return nil, problemError(status, data)
}

// decisionEnvelope builds the approval.decided envelope. Its actor is
// informational (the server records the token's reviewer): it is the
// token's own, asked once.
func (a *Approvals) decisionEnvelope(ctx context.Context, req *aais.Request, d Decision) ([]byte, error) {
	if d.Scope == "" {
		d.Scope = aais.ScopeOnce
	}
	a.mu.Lock()
	me := a.me
	a.mu.Unlock()
	if me == nil {
		var err error
		if me, err = a.Me(ctx); err != nil {
			return nil, err
		}
	}
	actor := aais.Actor{ID: me.Actor.ID, Type: me.Actor.Type, DisplayName: me.Actor.DisplayName}
	if actor.Type == "" {
		actor.Type = aais.ActorHuman
	}
	var ext aais.Extensions
	if d.Justification != "" {
		raw, err := json.Marshal(d.Justification)
		if err != nil {
			return nil, err
		}
		ext = aais.Extensions{aais.JustificationExtension: raw}
	}
	now := time.Now()
	dec, err := aais.NewDecision(req, aais.DecisionParams{Decision: d.Verdict, Scope: d.Scope, Actor: actor, DecidedAt: now, Extensions: ext})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.seq++
	seq := a.seq
	a.mu.Unlock()
	m, err := aais.NewMessage(aais.Header{OccurredAt: now, Sequence: seq, Stream: a.stream}, dec)
	if err != nil {
		return nil, err
	}
	return aais.Marshal(m)
}

// Edit proposes corrected arguments (one JSON object) for pending request
// id: the server supersedes it with a new request carrying them, which
// needs its own decision. It returns the new request's event.
func (a *Approvals) Edit(ctx context.Context, id string, arguments json.RawMessage, justification string) (*aais.Message, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(arguments, &obj); err != nil || obj == nil {
		return nil, errors.New("client: the edited arguments must be one JSON object")
	}
	body, err := json.Marshal(map[string]any{"arguments": arguments, "justification": justification})
	if err != nil {
		return nil, err
	}
	status, _, data, err := a.call(ctx, http.MethodPost, "/approvals/"+url.PathEscape(id)+"/edits", body, a.timeout)
	if err != nil {
		return nil, err
	}
	if status != http.StatusCreated {
		return nil, problemError(status, data)
	}
	var ans struct {
		Created json.RawMessage `json:"created"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return nil, fmt.Errorf("client: the edit's answer: %w", err)
	}
	return message(ans.Created, "the edited request", aais.TypeRequested)
}

// HistoryEntry is one resolution of GET /approvals/history: the wire
// shape of httpapi.HistoryEntry, kept here so that the client does not
// import the server.
type HistoryEntry struct {
	RequestID      string       `json:"request_id"`
	ActionKind     string       `json:"action_kind,omitempty"`
	ActionName     string       `json:"action_name,omitempty"`
	Summary        string       `json:"summary,omitempty"`
	Profile        string       `json:"profile,omitempty"`
	Outcome        aais.Outcome `json:"outcome"`
	EffectiveScope aais.Scope   `json:"effective_scope,omitempty"`
	Message        string       `json:"message"`
	ResolvedAt     string       `json:"resolved_at"`
	Sequence       uint64       `json:"sequence"`
	// Actor is who decided; absent for expiries.
	Actor         *aais.Actor `json:"actor,omitempty"`
	Justification string      `json:"justification,omitempty"`
	RuleID        string      `json:"rule_id,omitempty"`
	// Because says why the rule approved it.
	Because      []string `json:"because,omitempty"`
	SupersededBy string   `json:"superseded_by,omitempty"`
	// Question is the prompt of a request that asked a question,
	// Response the reviewer's reply (aais.QuestionExtension).
	Question string `json:"question,omitempty"`
	Response string `json:"response,omitempty"`
	// Agent is the requesting agent, Risk the request's risk level.
	Agent string         `json:"agent,omitempty"`
	Risk  aais.RiskLevel `json:"risk,omitempty"`
}

// History returns the latest resolutions, newest first (limit 1-200; 0
// means the server's default, 50).
func (a *Approvals) History(ctx context.Context, limit int) ([]HistoryEntry, error) {
	if limit < 0 || limit > 200 {
		return nil, fmt.Errorf("client: history limit %d: want 1-200", limit)
	}
	path := "/approvals/history"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var h struct {
		Resolved []HistoryEntry `json:"resolved"`
	}
	if err := a.getJSON(ctx, path, &h); err != nil {
		return nil, err
	}
	return h.Resolved, nil
}

// RuleState is a remembered approval and whether it still applies.
type RuleState struct {
	Rule   *aais.Rule `json:"rule"`
	Active bool       `json:"active"`
}

// Rules returns the remembered approvals (session and persistent rules).
func (a *Approvals) Rules(ctx context.Context) ([]RuleState, error) {
	var ans struct {
		Rules []RuleState `json:"rules"`
	}
	if err := a.getJSON(ctx, "/approvals/rules", &ans); err != nil {
		return nil, err
	}
	out := ans.Rules[:0]
	for _, r := range ans.Rules {
		if r.Rule != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Revoke revokes rule id. revoked is false when it was already revoked
// (the rule says by whom and when).
func (a *Approvals) Revoke(ctx context.Context, id string) (rule *aais.Rule, revoked bool, err error) {
	status, _, data, err := a.call(ctx, http.MethodPost, "/approvals/rules/"+url.PathEscape(id)+"/revoke", nil, a.timeout)
	if err != nil {
		return nil, false, err
	}
	if status != http.StatusOK {
		return nil, false, problemError(status, data)
	}
	var ans struct {
		Rule    *aais.Rule `json:"rule"`
		Revoked bool       `json:"revoked"`
	}
	if err := json.Unmarshal(data, &ans); err != nil || ans.Rule == nil {
		return nil, false, fmt.Errorf("client: unexpected answer to a revocation: %s", oneLine(string(data), 200))
	}
	return ans.Rule, ans.Revoked, nil
}

// ---- requests from another process ----

// Submit asks for a human decision on req (POST /approvals/requests). It
// returns the request event as recorded while it is pending, or the
// receipt (approval.resolved) when a remembered rule approved it at once.
// Submitting the same request again is idempotent.
func (a *Approvals) Submit(ctx context.Context, req *aais.Request) (*aais.Message, error) {
	m, err := aais.NewMessage(aais.Header{OccurredAt: time.Now(), Stream: a.stream}, req)
	if err != nil {
		return nil, err
	}
	body, err := aais.Marshal(m)
	if err != nil {
		return nil, err
	}
	status, _, data, err := a.call(ctx, http.MethodPost, "/approvals/requests", body, a.timeout)
	if err != nil {
		return nil, err
	}
	switch status {
	case http.StatusAccepted:
		return message(data, "the submitted request", aais.TypeRequested)
	case http.StatusOK:
		return message(data, "the receipt", aais.TypeResolved)
	}
	return nil, problemError(status, data)
}

// State returns request id's event while it is pending, its receipt once
// resolved (GET /approvals/requests/{id}).
func (a *Approvals) State(ctx context.Context, id string) (*aais.Message, error) {
	return a.state(ctx, id, 0)
}

func (a *Approvals) state(ctx context.Context, id string, wait time.Duration) (*aais.Message, error) {
	path := "/approvals/requests/" + url.PathEscape(id)
	timeout := a.timeout
	if wait > 0 {
		path += "?wait=" + wait.String()
		timeout += wait
	}
	status, _, data, err := a.call(ctx, http.MethodGet, path, nil, timeout)
	if err != nil {
		return nil, err
	}
	switch status {
	case http.StatusAccepted:
		return message(data, "the request", aais.TypeRequested)
	case http.StatusOK:
		return message(data, "the receipt", aais.TypeResolved)
	}
	return nil, problemError(status, data)
}

// longPoll is how long one Wait call asks the server to hold the answer;
// the server caps it (60 s by default).
var longPoll = 25 * time.Second

// Wait returns the receipt of request id once it is resolved, long-polling
// the server until then or until ctx ends.
func (a *Approvals) Wait(ctx context.Context, id string) (*aais.Message, error) {
	backoff := 250 * time.Millisecond
	for {
		m, err := a.state(ctx, id, longPoll)
		switch {
		case err == nil && m.Type == aais.TypeResolved:
			return m, nil
		case err == nil:
			backoff = 250 * time.Millisecond
			continue // still pending: ask again
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case Status(err) != nil && Status(err).Class() != asc.ClassTransientFailure:
			return nil, err // refused: asking again would not help
		}
		// A transport failure or a transient one: retry with backoff.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// Withdraw cancels pending request id (and the other pending requests of
// its run, origin.run_id) and returns its receipt.
func (a *Approvals) Withdraw(ctx context.Context, id string) (*aais.Message, error) {
	status, _, data, err := a.call(ctx, http.MethodPost, "/approvals/requests/"+url.PathEscape(id)+"/withdraw", nil, a.timeout)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, problemError(status, data)
	}
	return message(data, "the receipt", aais.TypeResolved)
}
