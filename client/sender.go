package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
)

// ArsiaMediaType is the media type of ARSIA messages on the wire.
const ArsiaMediaType = "application/arsia+json; v=1"

// ErrUnverified is wrapped by the error of a Send whose reply cannot be
// trusted: its signature does not verify against the receiver's published
// keys, another agent signed it, or it answers another request. The reply
// is never returned.
var ErrUnverified = errors.New("client: the reply could not be verified")

// Key is an agent's signing key: the sender of every request is the
// agent its key id names (kid "<agent>#<label>").
type Key struct {
	Signer sig.Signer
	KID    string
	// Agent is the agent id, the kid before "#".
	Agent string
}

// NewKey returns the key kid made with signer.
func NewKey(signer sig.Signer, kid string) (*Key, error) {
	agent, label, ok := strings.Cut(kid, "#")
	if !ok || label == "" || !arsia.ValidAgentID(agent) {
		return nil, fmt.Errorf("client: key id %q: want <agent id>#<label>, such as agent:acme.billing#key-1", kid)
	}
	if signer == nil {
		return nil, errors.New("client: a key needs a signer")
	}
	return &Key{Signer: signer, KID: kid, Agent: agent}, nil
}

// LoadKey reads a private JWK file (as custos keygen writes it).
func LoadKey(path string) (*Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var jwk jose.JSONWebKey
	if err := json.Unmarshal(data, &jwk); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if jwk.IsPublic() {
		return nil, fmt.Errorf("%s: holds a public key; signing needs the private key", path)
	}
	signer, err := sig.NewSignerFromJWK(&jwk)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	k, err := NewKey(signer, jwk.KeyID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// SenderOptions configures a Sender. The zero value is usable.
type SenderOptions struct {
	// HTTPClient sends the calls (nil: a client with a 30 s timeout per
	// call). Its transport is wrapped so that plain http reaches only
	// loopback hosts unless AllowInsecureHTTP.
	HTTPClient *http.Client
	// AllowInsecureHTTP permits plain http to hosts that are not loopback:
	// keys and replies read that way prove nothing.
	AllowInsecureHTTP bool
	// Token, when set, is sent as "Authorization: Bearer TOKEN" (a gateway
	// whose tokens.mode asks for access tokens).
	Token string
	// Algorithms are the signature algorithms accepted on replies
	// (EdDSA and ES256 when empty).
	Algorithms []string
	// Keys, when set, verifies replies instead of the keys the receiver's
	// discovery document names: a pinned JWKS.
	Keys sig.KeySource
	// PollMin and PollMax bound the wait between two polls of the status
	// URL when the server sends no Retry-After (250 ms and 5 s when zero);
	// a Retry-After is honoured up to PollMax.
	PollMin, PollMax time.Duration
	// Attempts is how often a request that met a transport failure, a 429
	// or a 503 is sent (3 when zero). A retry sends the same signed
	// envelope: the receiver answers a repeated message id with the reply
	// of the first, so nothing runs twice.
	Attempts int
	// Now is the clock of the envelopes (time.Now when nil).
	Now func() time.Time
}

// Sender calls other agents through their ARSIA inboxes. Safe for
// concurrent use; it caches each receiver's discovery document and keys.
type Sender struct {
	key  *Key
	o    SenderOptions
	http *http.Client

	mu        sync.Mutex
	receivers map[string]*receiver
}

// NewSender returns a sender signing with key.
func NewSender(key *Key, o *SenderOptions) (*Sender, error) {
	if key == nil || key.Signer == nil {
		return nil, errors.New("client: a sender needs a key")
	}
	var opts SenderOptions
	if o != nil {
		opts = *o
	}
	if len(opts.Algorithms) == 0 {
		opts.Algorithms = []string{sig.EdDSA, sig.ES256}
	}
	if opts.PollMin <= 0 {
		opts.PollMin = 250 * time.Millisecond
	}
	if opts.PollMax < opts.PollMin {
		opts.PollMax = max(5*time.Second, opts.PollMin)
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	base := opts.HTTPClient
	if base == nil {
		base = &http.Client{Timeout: 30 * time.Second}
	}
	c := *base
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = schemeGuard{next: next, insecure: opts.AllowInsecureHTTP}
	// Redirects are not followed: a signed request goes where it was
	// addressed, or nowhere.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Sender{key: key, o: opts, http: &c, receivers: map[string]*receiver{}}, nil
}

// schemeGuard refuses plain http to a host that is not loopback.
type schemeGuard struct {
	next     http.RoundTripper
	insecure bool
}

func (g schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !(req.URL.Scheme == "http" && (g.insecure || arsia.IsLoopbackHost(req.URL.Hostname()))) {
		return nil, fmt.Errorf("client: %s://%s refused: use https", req.URL.Scheme, req.URL.Host)
	}
	return g.next.RoundTrip(req)
}

// Call is one request to another agent.
type Call struct {
	// To is the receiver's base URL (where /.well-known/arsia is served),
	// e.g. a custos serve.
	To string
	// Agent, when set, is the agent id the receiver must be (its discovery
	// document must say so). Empty: the one its discovery document names.
	Agent string
	// Capabilities are what the call asks for (at least one: the first is
	// the call's capability, e.g. billing.invoice.create).
	Capabilities []string
	// Type is the payload type, e.g. com.acme/invoice.create.
	Type string
	// Args are the payload's args: nil, a json.RawMessage or any value
	// encoding/json accepts.
	Args any
	// Profile, when set, is the compliance profile (compliance.profile),
	// e.g. EU-AI-ACT-HIGH-RISK; Compliance sets other compliance members.
	Profile    string
	Compliance map[string]any
	// TTL sets expires_at (300 s when zero).
	TTL time.Duration
	// IdempotencyKey, when set, is sent as the Idempotency-Key header.
	IdempotencyKey string
	// TraceID, when set, is the envelope's context.trace_id.
	TraceID string
	// NoWait returns a pending_approval reply as it is (Result.Pending)
	// instead of following it to the final reply.
	NoWait bool
	// OnPending, when set, is called with the verified pending_approval
	// reply before Send waits for the final one (to say which approval
	// it waits for).
	OnPending func(*Result)
}

// Result is a verified reply.
type Result struct {
	// HTTPStatus is the final answer's status code.
	HTTPStatus int
	// Intent is the reply's intent: response, or pending_approval when the
	// call was sent with NoWait and waits for a human.
	Intent arsia.Intent
	// Envelope is the verified reply envelope.
	Envelope map[string]any
	// Result is payload.result of a response.
	Result json.RawMessage
	// Pending is the pending_approval reply, when the call waited (or, with
	// NoWait, waits) for a human: its args name the approval (action_id).
	Pending map[string]any
	// ExchangeID identifies the exchange at a Custos gateway (the
	// Custos-Exchange header), StatusURL where it is polled.
	ExchangeID, StatusURL string
	// RequestID is the id of the request sent.
	RequestID string
}

// ApprovalID is the id of the approval request the call waits (or
// waited) for, from the pending_approval reply; "" when there was none.
func (r *Result) ApprovalID() string {
	p, _ := r.Pending["payload"].(map[string]any)
	args, _ := p["args"].(map[string]any)
	id, _ := args["action_id"].(string)
	return id
}

// Code is the ASC status of the result: SUCCESS for a response,
// HUMAN_APPROVAL_REQUIRED for a pending approval.
func (r *Result) Code() asc.Code {
	if r.Intent == arsia.IntentPendingApproval {
		return asc.HumanApprovalRequired
	}
	return asc.Success
}

// receiver is one receiver's discovery and keys.
type receiver struct {
	agent     string
	inbox     *url.URL
	keys      sig.KeySource
	discovery *sig.Discovery
}

// Receiver reads the receiver's discovery document (cached) and returns
// its agent id and inbox URL.
func (s *Sender) Receiver(ctx context.Context, to, agent string) (agentID, inbox string, err error) {
	r, err := s.receiver(ctx, to, agent)
	if err != nil {
		return "", "", err
	}
	return r.agent, r.inbox.String(), nil
}

func (s *Sender) receiver(ctx context.Context, to, agent string) (*receiver, error) {
	base, err := checkServerURL(to, s.o.AllowInsecureHTTP)
	if err != nil {
		return nil, err
	}
	key := base.String() + " " + agent
	s.mu.Lock()
	r := s.receivers[key]
	s.mu.Unlock()
	if r != nil {
		return r, nil
	}
	if agent == "" {
		if agent, err = s.discoveredAgent(ctx, base); err != nil {
			return nil, err
		}
	}
	if !arsia.ValidAgentID(agent) {
		return nil, fmt.Errorf("client: %q is not an ARSIA agent id", agent)
	}
	jo := &sig.HTTPJWKSOptions{Client: s.http, AllowHTTPInsecure: base.Scheme == "http"}
	d, err := sig.NewDiscovery(base.String(), agent, jo)
	if err != nil {
		return nil, err
	}
	meta, err := d.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: the discovery document of %s: %w", base, err)
	}
	inbox, err := base.Parse(meta.Inbox)
	if err != nil || meta.Inbox == "" {
		return nil, fmt.Errorf("client: the discovery document of %s names no usable inbox (%q)", base, meta.Inbox)
	}
	if _, err := checkServerURL(inbox.String(), s.o.AllowInsecureHTTP); err != nil {
		return nil, fmt.Errorf("client: the inbox of %s: %w", base, err)
	}
	r = &receiver{agent: agent, inbox: inbox, keys: d, discovery: d}
	if s.o.Keys != nil {
		r.keys = s.o.Keys
	}
	s.mu.Lock()
	s.receivers[key] = r
	s.mu.Unlock()
	return r, nil
}

// discoveredAgent reads the agent id from the discovery document at base:
// the URL is what the caller trusts, and the keys are then those its
// discovery names for that agent.
func (s *Sender) discoveredAgent(ctx context.Context, base *url.URL) (string, error) {
	req, err := newRequest(ctx, http.MethodGet, base.JoinPath(sig.WellKnownPath).String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, _, body, err := roundTrip(s.http, req)
	if err != nil {
		return "", fmt.Errorf("client: the discovery document of %s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("client: the discovery document of %s: %w", base, problemError(resp.StatusCode, body))
	}
	var doc struct {
		AgentID string `json:"agent_id"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.AgentID == "" {
		return "", fmt.Errorf("client: the discovery document of %s names no agent_id", base)
	}
	return doc.AgentID, nil
}

// Send signs the call's request, sends it, follows a pending approval to
// the final reply (unless NoWait) and returns the verified result. A
// refusal (an ARSIA error reply, or a problem document for a request the
// receiver could not authenticate) is an *Error with its ASC status; a
// reply that does not verify wraps ErrUnverified.
func (s *Sender) Send(ctx context.Context, c Call) (*Result, error) {
	r, err := s.receiver(ctx, c.To, c.Agent)
	if err != nil {
		return nil, err
	}
	body, id, err := s.sign(r.agent, c)
	if err != nil {
		return nil, err
	}
	res, pending, err := s.post(ctx, r, body, id, c.IdempotencyKey)
	if err != nil || !pending || c.NoWait {
		return res, err
	}
	if c.OnPending != nil && res.Pending != nil {
		c.OnPending(res)
	}
	return s.follow(ctx, r, res)
}

// Sign builds and signs the request of c to the receiver agent and
// returns it with its id, for a caller that sends it itself.
func (s *Sender) sign(to string, c Call) ([]byte, string, error) {
	opts := arsia.BuildOptions{Now: s.o.Now(), TTL: c.TTL}
	comp := map[string]any{}
	for k, v := range c.Compliance {
		comp[k] = v
	}
	if c.Profile != "" {
		comp["profile"] = c.Profile
	}
	if len(comp) > 0 {
		opts.Compliance = comp
	}
	if c.TraceID != "" {
		opts.Context = &arsia.Context{TraceID: c.TraceID}
	}
	e, err := arsia.NewRequest(s.key.Agent, to, c.Capabilities, c.Type, c.Args, opts)
	if err != nil {
		return nil, "", err
	}
	env, err := e.Map()
	if err != nil {
		return nil, "", err
	}
	signed, err := sig.Sign(env, s.key.Signer, s.key.KID)
	if err != nil {
		return nil, "", err
	}
	body, err := json.Marshal(signed)
	if err != nil {
		return nil, "", err
	}
	return body, e.ID, nil
}

// post sends the signed request, retrying what may be retried, and reads
// its first answer. pending: the call is accepted and not answered yet.
func (s *Sender) post(ctx context.Context, r *receiver, body []byte, id, idem string) (*Result, bool, error) {
	var lastErr error
	for attempt := 1; ; attempt++ {
		req, err := newRequest(ctx, http.MethodPost, r.inbox.String(), body)
		if err != nil {
			return nil, false, err
		}
		req.Header.Set("Content-Type", ArsiaMediaType)
		req.Header.Set("Accept", ArsiaMediaType+", application/problem+json")
		if idem != "" {
			req.Header.Set("Idempotency-Key", idem)
		}
		if s.o.Token != "" {
			req.Header.Set("Authorization", "Bearer "+s.o.Token)
		}
		resp, mt, data, err := roundTrip(s.http, req)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			lastErr, wait = err, s.o.PollMin<<(attempt-1)
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
			lastErr = s.refusal(ctx, r, resp.StatusCode, mt, data, id)
			if errors.Is(lastErr, ErrUnverified) {
				return nil, false, lastErr
			}
			wait = retryAfter(resp.Header, s.o.PollMin<<(attempt-1))
		default:
			res := &Result{RequestID: id, HTTPStatus: resp.StatusCode, ExchangeID: resp.Header.Get("Custos-Exchange")}
			res.StatusURL = s.statusURL(r, resp, res.ExchangeID)
			return s.answer(ctx, r, res, resp.StatusCode, mt, data)
		}
		if attempt >= s.o.Attempts {
			return nil, false, lastErr
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(min(wait, s.o.PollMax)):
		}
	}
}

// statusURL is where the exchange is polled: the Location header when the
// server sends one on the inbox's origin, otherwise the Custos status URL
// next to the inbox (…/exchanges/{id}).
func (s *Sender) statusURL(r *receiver, resp *http.Response, exchange string) string {
	if loc := resp.Header.Get("Location"); loc != "" {
		if u, err := r.inbox.Parse(loc); err == nil && u.Scheme == r.inbox.Scheme && u.Host == r.inbox.Host {
			return u.String()
		}
	}
	if exchange == "" || strings.ContainsAny(exchange, "/?#%") {
		return ""
	}
	return r.inbox.JoinPath("..", "exchanges", exchange).String()
}

// answer reads one answer to the request (first, or from the status
// URL). pending: not final yet.
func (s *Sender) answer(ctx context.Context, r *receiver, res *Result, status int, mt string, data []byte) (*Result, bool, error) {
	if mt != "application/arsia+json" {
		if status == http.StatusAccepted {
			return res, true, nil // accepted and running: a problem document saying so
		}
		return nil, false, problemError(status, data)
	}
	env, err := s.verify(ctx, r, data, res.RequestID)
	if err != nil {
		return nil, false, err
	}
	intent, _ := env["intent"].(string)
	payload, _ := env["payload"].(map[string]any)
	switch arsia.Intent(intent) {
	case arsia.IntentResponse:
		if status < 200 || status > 299 {
			return nil, false, fmt.Errorf("%w: a response with HTTP status %d", ErrUnverified, status)
		}
		res.Intent, res.Envelope, res.HTTPStatus = arsia.IntentResponse, env, status
		if v, ok := payload["result"]; ok {
			raw, err := json.Marshal(v)
			if err != nil {
				return nil, false, err
			}
			res.Result = raw
		}
		return res, false, nil
	case arsia.IntentPendingApproval:
		res.Intent, res.Envelope, res.Pending, res.HTTPStatus = arsia.IntentPendingApproval, env, env, status
		return res, true, nil
	case arsia.IntentError:
		return nil, false, envelopeError(status, env)
	}
	return nil, false, fmt.Errorf("%w: a reply with intent %q", ErrUnverified, intent)
}

// refusal reads an answer that refuses the request for now (429, 503).
func (s *Sender) refusal(ctx context.Context, r *receiver, status int, mt string, data []byte, id string) error {
	if mt == "application/arsia+json" {
		env, err := s.verify(ctx, r, data, id)
		if err != nil {
			return err
		}
		return envelopeError(status, env)
	}
	return problemError(status, data)
}

// verify checks a reply: its signature against the receiver's keys, that
// the receiver signed it, and that it answers this request to this
// sender.
func (s *Sender) verify(ctx context.Context, r *receiver, data []byte, id string) (map[string]any, error) {
	v, err := sig.DecodeAndVerify(ctx, data, r.keys, sig.VerifyOptions{Algorithms: s.o.Algorithms, Now: s.o.Now})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnverified, err)
	}
	env := v.Envelope
	switch {
	case v.From != r.agent:
		return nil, fmt.Errorf("%w: signed by %q, not the receiver %q", ErrUnverified, v.From, r.agent)
	case env["to"] != s.key.Agent:
		return nil, fmt.Errorf("%w: addressed to %v, not to %s", ErrUnverified, env["to"], s.key.Agent)
	case !strings.EqualFold(fmt.Sprint(env["correlation_id"]), id):
		return nil, fmt.Errorf("%w: it answers message %v, not %s", ErrUnverified, env["correlation_id"], id)
	}
	return env, nil
}

// envelopeError is the *Error of a verified ARSIA error reply: its ASC
// status from details.agent_status, else the one its code maps to.
func envelopeError(status int, env map[string]any) *Error {
	e := &Error{HTTPStatus: status, Envelope: env}
	payload, _ := env["payload"].(map[string]any)
	obj, _ := payload["error"].(map[string]any)
	e.ARSIACode, _ = obj["code"].(string)
	e.Detail, _ = obj["description"].(string)
	details, _ := obj["details"].(map[string]any)
	st, _ := details["agent_status"].(map[string]any)
	if n, ok := statusCode(st["code"]); ok {
		e.Code = n
	} else if e.ARSIACode != "" {
		e.Code = arsia.ToASC(e.ARSIACode)
	}
	// A registered code's own name, not what the reply calls it.
	if e.Name = e.Code.Name(); e.Name == "" {
		e.Name, _ = st["name"].(string)
	}
	return e
}

// statusCode reads an ASC code decoded as a number (json.Number from the
// verifier's strict decoder, float64 from encoding/json).
func statusCode(v any) (asc.Code, bool) {
	var s string
	switch n := v.(type) {
	case json.Number:
		s = n.String()
	case float64:
		s = strconv.FormatFloat(n, 'f', -1, 64)
	default:
		return 0, false
	}
	c, err := strconv.Atoi(s)
	if err != nil || c < 1000 || c > 9999 {
		return 0, false
	}
	return asc.Code(c), true
}

// follow polls the status URL until the exchange has its final reply.
func (s *Sender) follow(ctx context.Context, r *receiver, res *Result) (*Result, error) {
	if res.StatusURL == "" {
		return nil, fmt.Errorf("client: the request %s is pending, but the receiver named no status URL", res.RequestID)
	}
	pending := res.Pending
	backoff := s.o.PollMin
	var hdr http.Header
	for {
		wait := retryAfter(hdr, backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("client: waiting for %s: %w", res.StatusURL, ctx.Err())
		case <-time.After(min(wait, s.o.PollMax)):
		}
		backoff = min(2*backoff, s.o.PollMax)
		req, err := newRequest(ctx, http.MethodGet, res.StatusURL, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", ArsiaMediaType+", application/problem+json")
		if s.o.Token != "" {
			req.Header.Set("Authorization", "Bearer "+s.o.Token)
		}
		resp, mt, data, err := roundTrip(s.http, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("client: waiting for %s: %w", res.StatusURL, ctx.Err())
			}
			hdr = nil
			continue // the network: poll again
		}
		hdr = resp.Header
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable && mt != "application/arsia+json" {
			continue
		}
		next := &Result{RequestID: res.RequestID, ExchangeID: res.ExchangeID, StatusURL: res.StatusURL, Pending: pending}
		out, still, err := s.answer(ctx, r, next, resp.StatusCode, mt, data)
		if err != nil {
			return nil, err
		}
		if still {
			if out.Pending != nil {
				pending = out.Pending
			}
			continue
		}
		out.Pending = pending
		return out, nil
	}
}

// retryAfter is the delay a Retry-After header asks for (delay-seconds or
// an HTTP date, at most a day), or def without one.
func retryAfter(h http.Header, def time.Duration) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return def
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		if n > 86400 {
			n = 86400
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), 86400*time.Second)
	}
	return def
}
