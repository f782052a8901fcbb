package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/internal/jsonx"
	"github.com/custos-runtime/custos/jcs"
)

// Options configures a Proxy.
type Options struct {
	// Policy decides every tools/call (required).
	Policy *Policy
	// Approvals is where require_approval calls ask (required when a
	// rule requires approval).
	Approvals Approvals
	// SessionID is origin.session_id of every request: one per proxy
	// process, so that a session approval covers this process's later
	// calls and no other's. "" generates "mcp-" + 32 hex digits.
	SessionID string
	// Logger receives diagnostics (never standard output, which is the
	// MCP channel). Nil discards them.
	Logger *slog.Logger
	// Now is the clock of request times (time.Now when nil).
	Now func() time.Time
	// Progress is how often a waiting call sends an MCP progress
	// notification when the client asked for them (10 s when zero).
	Progress time.Duration
	// PerSession gives each MCP session of the hosts its own approval
	// session (origin.session_id "mcp-" + 32 hex digits), ended when that
	// MCP session closes: for a proxy serving many hosts over HTTP. When
	// false, every call is in SessionID's session, which End ends.
	PerSession bool

	// relay is set by Connect: the proxy then relays notifications.
	relay *notifier
}

// Proxy is an MCP server that forwards to a wrapped server's session,
// deciding every tools/call by its Policy.
type Proxy struct {
	o      Options
	child  *mcp.ClientSession
	server *mcp.Server
	dead   atomic.Bool
	// caps is what the proxy advertises.
	caps  *mcp.ServerCapabilities
	relay *notifier

	mu sync.Mutex
	// sessions maps a host session to its approval session (PerSession);
	// watched holds the host sessions whose end is awaited.
	sessions map[*mcp.ServerSession]string
	watched  map[*mcp.ServerSession]bool
	ended    bool
	// inflight are the tools/call being answered, so that a host that
	// leaves mid-call (Handler) does not leave them waiting.
	inflight map[*inflightCall]bool
}

// inflightCall is one tools/call being answered: tag is the HTTP POST that
// carried it ("" over stdio), ss the host session.
type inflightCall struct {
	tag    string
	ss     *mcp.ServerSession
	cancel context.CancelCauseFunc
}

// errHostLeft ends the calls of a host that is gone.
var errHostLeft = errors.New("the host left before the call was answered")

// track registers a call until done is called; ctx ends when the host
// that made it leaves.
func (p *Proxy) track(ctx context.Context, req *mcp.CallToolRequest) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &inflightCall{cancel: cancel}
	if req != nil {
		c.ss = req.Session
		if req.Extra != nil && req.Extra.Header != nil {
			c.tag = req.Extra.Header.Get(postTagHeader)
		}
	}
	p.mu.Lock()
	p.inflight[c] = true
	p.mu.Unlock()
	return ctx, func() {
		p.mu.Lock()
		delete(p.inflight, c)
		p.mu.Unlock()
		cancel(nil)
	}
}

// cancelCalls ends the calls for which match holds.
func (p *Proxy) cancelCalls(match func(*inflightCall) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.inflight {
		if match(c) {
			c.cancel(errHostLeft)
		}
	}
}

// New returns a proxy in front of child, an initialized client session
// on the wrapped server. The server it presents (Server) advertises the
// child's tools, prompts and resources.
func New(child *mcp.ClientSession, o Options) (*Proxy, error) {
	if child == nil || o.Policy == nil {
		return nil, errors.New("mcpproxy: a child session and a policy are required")
	}
	for i := range o.Policy.Rules {
		if o.Policy.Rules[i].Verdict == RequireApproval && o.Approvals == nil {
			return nil, errors.New("mcpproxy: the policy requires approvals but no authority is configured")
		}
	}
	if o.SessionID == "" {
		o.SessionID = "mcp-" + randomHex(16)
	} else if !aaisID.MatchString(o.SessionID) || len(o.SessionID) > 200 {
		return nil, fmt.Errorf("mcpproxy: session id %q is not an AAIS id", o.SessionID)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Progress <= 0 {
		o.Progress = 10 * time.Second
	}
	p := &Proxy{o: o, child: child, relay: o.relay,
		sessions: map[*mcp.ServerSession]string{}, watched: map[*mcp.ServerSession]bool{}, inflight: map[*inflightCall]bool{}}
	caps := &mcp.ServerCapabilities{}
	instructions := ""
	relays := o.relay != nil
	if ir := child.InitializeResult(); ir != nil {
		instructions = ir.Instructions
		if c := ir.Capabilities; c != nil {
			// List-change notifications and resource subscriptions are
			// advertised when the proxy relays them (Connect) and the
			// gated server offers them: advertise only what the proxy does.
			if c.Tools != nil {
				caps.Tools = &mcp.ToolCapabilities{ListChanged: relays && c.Tools.ListChanged}
			}
			if c.Prompts != nil {
				caps.Prompts = &mcp.PromptCapabilities{ListChanged: relays && c.Prompts.ListChanged}
			}
			if c.Resources != nil {
				caps.Resources = &mcp.ResourceCapabilities{ListChanged: relays && c.Resources.ListChanged,
					Subscribe: relays && c.Resources.Subscribe}
			}
			if c.Completions != nil {
				caps.Completions = &mcp.CompletionCapabilities{}
			}
		}
	}
	if caps.Tools == nil {
		// The proxy always answers tools/list and tools/call.
		caps.Tools = &mcp.ToolCapabilities{}
	}
	p.caps = caps
	so := &mcp.ServerOptions{
		Instructions: instructions,
		Capabilities: caps,
		Logger:       o.Logger,
	}
	if caps.Resources != nil && caps.Resources.Subscribe {
		so.SubscribeHandler = p.subscribe
		so.UnsubscribeHandler = p.unsubscribe
	}
	p.server = mcp.NewServer(&mcp.Implementation{Name: Harness, Version: "1"}, so)
	p.server.AddReceivingMiddleware(p.middleware)
	if p.relay != nil {
		p.relay.p.Store(p)
	}
	return p, nil
}

// Server is the MCP server to connect the host to.
func (p *Proxy) Server() *mcp.Server { return p.server }

// SessionID is origin.session_id of this proxy's approval requests.
func (p *Proxy) SessionID() string { return p.o.SessionID }

// ChildStopped records that the wrapped server is gone: later calls are
// answered with ASC DEPENDENCY_UNAVAILABLE.
func (p *Proxy) ChildStopped() { p.dead.Store(true) }

// End cancels the requests still pending in this proxy's approval
// sessions and revokes their session approvals; call it when the host
// disconnects (with PerSession, when the proxy stops serving).
func (p *Proxy) End(ctx context.Context) {
	p.mu.Lock()
	p.ended = true
	ids := []string{p.o.SessionID}
	if p.o.PerSession {
		ids = ids[:0]
		for _, id := range p.sessions {
			ids = append(ids, id)
		}
		clear(p.sessions)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.endSession(ctx, id)
	}
}

func (p *Proxy) endSession(ctx context.Context, id string) {
	if p.o.Approvals == nil {
		return
	}
	if err := p.o.Approvals.EndSession(ctx, id); err != nil {
		p.o.Logger.Warn("ending the approval session", "session", id, "err", err)
	}
}

// approvalSession is the origin.session_id of a call made in the host
// session ss ("" when the proxy has ended).
func (p *Proxy) approvalSession(ss *mcp.ServerSession) string {
	if !p.o.PerSession || ss == nil {
		return p.o.SessionID
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return ""
	}
	id, ok := p.sessions[ss]
	if !ok {
		id = "mcp-" + randomHex(16)
		p.sessions[ss] = id
		p.watchLocked(ss)
	}
	return id
}

// watch arranges that the end of the host session ss ends its approval
// session and drops its resource subscriptions.
func (p *Proxy) watch(ss *mcp.ServerSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watchLocked(ss)
}

func (p *Proxy) watchLocked(ss *mcp.ServerSession) {
	if ss == nil || p.watched[ss] {
		return
	}
	p.watched[ss] = true
	go func() {
		_ = ss.Wait()
		p.mu.Lock()
		id, had := p.sessions[ss]
		delete(p.sessions, ss)
		delete(p.watched, ss)
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if had {
			p.o.Logger.Info("a host session ended; ending its approval session", "session", id)
			p.endSession(ctx, id)
		}
		if p.relay != nil {
			p.relay.sessionGone(ctx, p, ss)
		}
	}()
}

// middleware answers the methods the proxy relays; everything else
// (initialize, ping, logging) is the proxy's own server's.
func (p *Proxy) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			r, ok := req.(*mcp.CallToolRequest)
			if !ok || r.Params == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs params"}
			}
			ctx, done := p.track(ctx, r)
			defer done()
			res, err := p.callTool(ctx, r)
			if err != nil {
				return nil, err
			}
			return res, nil
		case "tools/list":
			params, _ := req.GetParams().(*mcp.ListToolsParams)
			if params != nil {
				c := *params
				c.Meta = relayMeta(c.Meta)
				params = &c
			}
			return relay(p, func() (*mcp.ListToolsResult, error) { return p.child.ListTools(ctx, params) })
		case "prompts/list":
			params, _ := req.GetParams().(*mcp.ListPromptsParams)
			if params != nil {
				c := *params
				c.Meta = relayMeta(c.Meta)
				params = &c
			}
			return relay(p, func() (*mcp.ListPromptsResult, error) { return p.child.ListPrompts(ctx, params) })
		case "prompts/get":
			params, _ := req.GetParams().(*mcp.GetPromptParams)
			if params != nil {
				c := *params
				c.Meta = relayMeta(c.Meta)
				params = &c
			}
			return relay(p, func() (*mcp.GetPromptResult, error) { return p.child.GetPrompt(ctx, params) })
		case "resources/list":
			params, _ := req.GetParams().(*mcp.ListResourcesParams)
			if params != nil {
				c := *params
				c.Meta = relayMeta(c.Meta)
				params = &c
			}
			return relay(p, func() (*mcp.ListResourcesResult, error) { return p.child.ListResources(ctx, params) })
		case "resources/templates/list":
			params, _ := req.GetParams().(*mcp.ListResourceTemplatesParams)
			if params != nil {
				c := *params
				c.Meta = relayMeta(c.Meta)
				params = &c
			}
			return relay(p, func() (*mcp.ListResourceTemplatesResult, error) {
				return p.child.ListResourceTemplates(ctx, params)
			})
		case "resources/read":
			params, _ := req.GetParams().(*mcp.ReadResourceParams)
			if params != nil {
				c := *params
				c.Meta = relayMeta(c.Meta)
				params = &c
			}
			return relay(p, func() (*mcp.ReadResourceResult, error) { return p.child.ReadResource(ctx, params) })
		case "completion/complete":
			params, _ := req.GetParams().(*mcp.CompleteParams)
			if params != nil {
				c := *params
				c.Meta = relayMeta(c.Meta)
				params = &c
			}
			return relay(p, func() (*mcp.CompleteResult, error) { return p.child.Complete(ctx, params) })
		}
		return next(ctx, method, req)
	}
}

// relay returns the child's answer, or its error (a JSON-RPC error from
// the child travels back unchanged).
func relay[R mcp.Result](p *Proxy, f func() (R, error)) (mcp.Result, error) {
	if p.dead.Load() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the wrapped MCP server has stopped"}
	}
	r, err := f()
	if err != nil {
		if je, ok := peerError(err); ok {
			return nil, je
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the wrapped MCP server did not answer"}
	}
	return r, nil
}

// The SDK's own codes for a request its transport could not deliver
// (an HTTP upstream that refused the POST or could not be reached) and
// for a connection that is closing: these are not the gated server's
// answers.
const (
	codeServerClosing = -32004
	codeRejected      = -32005
)

// peerError is the JSON-RPC error the gated server answered, if err is
// one (and not the SDK's report of a transport failure).
func peerError(err error) (*jsonrpc.Error, bool) {
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code == codeRejected || je.Code == codeServerClosing {
		return nil, false
	}
	return je, true
}

// callTool decides one tools/call.
func (p *Proxy) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params := req.Params
	name := params.Name
	raw := bytes.TrimSpace(params.Arguments)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	v, err := jcs.Decode(raw)
	args, isObject := v.(map[string]any)
	if err != nil || !isObject {
		p.o.Logger.Warn("tools/call refused: arguments are not a strict JSON object", "tool", name, "err", err)
		return p.status(asc.InvalidRequest, "The tool arguments must be one JSON object without duplicate member names, with numbers every peer reads alike. Nothing ran.", nil, nil)
	}
	rule := p.o.Policy.Match(name, args)
	if rule == nil {
		p.o.Logger.Info("tools/call denied: no policy rule matches", "tool", name)
		return p.status(asc.PermissionDenied, fmt.Sprintf("No policy rule allows the tool %q, so the call was denied. Nothing ran.", name), nil, map[string]any{"verdict": "deny", "rule": nil})
	}
	info := map[string]any{"rule": rule.Index, "verdict": string(rule.Verdict)}
	if rule.Profile != "" {
		info["profile"] = rule.Profile
	}
	switch rule.Verdict {
	case Allow:
		p.o.Logger.Info("tools/call allowed", "tool", name, "rule", rule.Index)
		return p.forward(ctx, params, name, raw)
	case Deny:
		msg := rule.Message
		if msg == "" {
			msg = fmt.Sprintf("The policy denies the tool %q. Nothing ran.", name)
		}
		p.o.Logger.Info("tools/call denied", "tool", name, "rule", rule.Index)
		return p.status(asc.PermissionDenied, msg, rule, info)
	}
	return p.gate(ctx, req, rule, name, raw, args, info)
}

// forward sends exactly name and args to the wrapped server and returns
// its result unchanged.
func (p *Proxy) forward(ctx context.Context, params *mcp.CallToolParamsRaw, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	if p.dead.Load() {
		return p.status(asc.DependencyUnavailable, "The wrapped MCP server has stopped; the call did not run.", nil, nil)
	}
	res, err := p.child.CallTool(ctx, &mcp.CallToolParams{Meta: relayMeta(params.Meta), Name: name, Arguments: args,
		InputResponses: params.InputResponses, RequestState: params.RequestState})
	if err != nil {
		if je, ok := peerError(err); ok {
			// Unknown tools and malformed requests stay protocol errors.
			return nil, je
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.o.Logger.Error("forwarding tools/call", "tool", name, "err", err)
		if p.dead.Load() || errors.Is(err, mcp.ErrConnectionClosed) {
			return p.status(asc.ResultStateUnknown, "The wrapped MCP server stopped during the call; whether it took effect is unknown.", nil, nil)
		}
		return p.status(asc.DependencyUnavailable, "The wrapped MCP server did not answer.", nil, nil)
	}
	return res, nil
}

// relayMeta is the host's _meta without the protocol's own members
// (io.modelcontextprotocol/...), which describe the host's connection to
// the proxy, not the proxy's to the wrapped server; the progress token and
// other members pass.
func relayMeta(m mcp.Meta) mcp.Meta {
	if m == nil {
		return nil
	}
	out := mcp.Meta{}
	for k, v := range m {
		if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// gate asks the authority for a human decision on exactly this call,
// waits for it and forwards the call only when it was approved.
func (p *Proxy) gate(ctx context.Context, mreq *mcp.CallToolRequest, rule *Rule, name string, raw json.RawMessage, args map[string]any, info map[string]any) (*mcp.CallToolResult, error) {
	if p.dead.Load() {
		return p.status(asc.DependencyUnavailable, "The wrapped MCP server has stopped; the call did not run.", rule, info)
	}
	// No human is asked about a call that cannot be delivered: an HTTP
	// upstream that went away is noticed only when a request fails.
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	err := p.child.Ping(pctx, nil)
	pcancel()
	if _, answered := peerError(err); err != nil && !answered {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.o.Logger.Error("the gated MCP server does not answer a ping; not asking for approval", "tool", name, "err", err)
		return p.status(asc.DependencyUnavailable, "The gated MCP server cannot be reached; no approval was asked and the call did not run.", rule, info)
	}
	session := p.approvalSession(mreq.Session)
	if session == "" {
		return p.status(asc.Cancelled, "The proxy is stopping; the call did not run.", rule, info)
	}
	req, err := p.newRequest(session, rule, name, raw, args)
	if err != nil {
		p.o.Logger.Warn("tools/call refused: cannot ask for approval", "tool", name, "rule", rule.Index, "err", err)
		return p.status(asc.PermissionDenied, fmt.Sprintf("The call of %q needs approval but cannot be presented for it (%v). Nothing ran.", name, err), rule, info)
	}
	info["approval_request_id"] = req.ID
	receipt, err := p.o.Approvals.Submit(ctx, req)
	if err != nil {
		p.o.Logger.Error("submitting an approval request", "tool", name, "err", err)
		return p.status(asc.DependencyUnavailable, "The approval authority is unavailable; the call did not run.", rule, info)
	}
	if receipt == nil {
		p.o.Logger.Info("tools/call waiting for approval", "tool", name, "rule", rule.Index, "request", req.ID, "expires_at", req.ExpiresAt.String())
		receipt, err = p.wait(ctx, mreq, rule, req)
		if err != nil {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if werr := p.o.Approvals.Withdraw(wctx, req); werr != nil {
				p.o.Logger.Warn("withdrawing an approval request", "request", req.ID, "err", werr)
			}
			cancel()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				info["outcome"] = "no_decision"
				return p.status(asc.Timeout, "No decision arrived in time; the request was withdrawn and the call did not run.", rule, info)
			}
			p.o.Logger.Error("waiting for an approval", "request", req.ID, "err", err)
			return p.status(asc.DependencyUnavailable, "The approval authority is unavailable; the call did not run.", rule, info)
		}
	}
	res := receipt.Resolution
	if res == nil || res.RequestID != req.ID {
		return p.status(asc.IntegrityCheckFailed, "The authority answered for another request; the call did not run.", rule, info)
	}
	info["outcome"] = string(res.Outcome)
	info["resolution_id"] = res.ID
	if res.EffectiveScope != "" {
		info["effective_scope"] = string(res.EffectiveScope)
	}
	switch res.Outcome {
	case aais.OutcomeApproved:
	case aais.OutcomeDenied:
		return p.status(asc.PermissionDenied, "A reviewer denied this call. Nothing ran.", rule, info)
	case aais.OutcomeExpired:
		return p.status(asc.Timeout, "The approval request expired before anyone decided. Nothing ran.", rule, info)
	case aais.OutcomeCancelled:
		return p.status(asc.Cancelled, "The approval request was cancelled. Nothing ran.", rule, info)
	case aais.OutcomeStale:
		return p.status(asc.FailedPrecondition, "The decision was about a different action than this call (stale). Nothing ran.", rule, info)
	default:
		return p.status(asc.PermissionDenied, fmt.Sprintf("The call was not approved (%s). Nothing ran.", res.Outcome), rule, info)
	}
	// Immediately before running: the action about to be forwarded must
	// still be the one approved.
	forwardArgs := req.Action.Arguments()
	about, err := actionJSON(rule, name, forwardArgs, args)
	var digest string
	if err == nil {
		digest, err = aais.ActionDigest(about)
	}
	if err != nil || digest != req.ActionDigest || res.ActionDigest != req.ActionDigest || req.Action.Name() != name {
		p.o.Logger.Error("approved action differs from the call; not forwarding", "request", req.ID, "err", err)
		info["outcome"] = string(aais.OutcomeStale)
		return p.status(asc.FailedPrecondition, "The approved action differs from this call (stale); nothing ran.", rule, info)
	}
	p.o.Logger.Info("tools/call approved; forwarding", "tool", name, "request", req.ID, "scope", res.EffectiveScope)
	return p.forward(ctx, mreq.Params, name, forwardArgs)
}

// wait waits for the receipt, at most the rule's wait, sending progress
// notifications when the client asked for them.
func (p *Proxy) wait(ctx context.Context, mreq *mcp.CallToolRequest, rule *Rule, req *aais.Request) (*aais.Message, error) {
	wctx := ctx
	if d := p.o.Policy.wait(rule); d > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if tok := mreq.Params.GetProgressToken(); tok != nil && mreq.Session != nil {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(p.o.Progress)
			defer t.Stop()
			n := 0.0
			for {
				select {
				case <-stop:
					return
				case <-wctx.Done():
					return
				case <-t.C:
					n++
					_ = mreq.Session.NotifyProgress(wctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: n,
						Message: "Waiting for a human to approve " + req.Action.Name() + " (approval request " + req.ID + ")"})
				}
			}
		}()
	}
	return p.o.Approvals.Wait(wctx, req.ID)
}

// newRequest builds the AAIS request for exactly this call.
func (p *Proxy) newRequest(session string, rule *Rule, name string, raw json.RawMessage, args map[string]any) (*aais.Request, error) {
	if !aaisID.MatchString(name) || len(name) > 200 {
		return nil, fmt.Errorf("the tool name %q is not an AAIS action name", name)
	}
	action, err := actionJSON(rule, name, raw, args)
	if err != nil {
		return nil, err
	}
	now := p.o.Now().UTC()
	reasons := rule.Reasons
	if len(reasons) == 0 {
		reasons = []string{fmt.Sprintf("Policy rule %d (tool %q) requires a human to approve this call", rule.Index, rule.Tool)}
	}
	if rule.Profile != "" {
		reasons = append(append([]string{}, reasons...), "Compliance profile "+rule.Profile)
	}
	choices := []aais.Choice{
		{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow this call once"},
		{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
	}
	origin := aais.Origin{Harness: Harness, SessionID: session, RunID: "call-" + randomHex(16), AgentID: p.o.Policy.Agent, Profile: rule.Profile,
		// The project names the policy rule, so that a session approval
		// covers only later calls this same rule gates.
		Project: fmt.Sprintf("mcp-proxy rule %d", rule.Index)}
	if rr := rule.remembered(); rr != nil {
		kind, _ := json.Marshal(ActionKind)
		tool, _ := json.Marshal(name)
		project, _ := json.Marshal(origin.Project)
		harness, _ := json.Marshal(Harness)
		lim := aais.RememberLimits{MaxAge: rr.MaxAge, Required: rr.Constraints}
		for _, scope := range []aais.Scope{aais.ScopeSession, aais.ScopePersistent} {
			if !slices.Contains(rr.Scopes, scope) {
				continue
			}
			label := "Allow " + name + " for the rest of this MCP session"
			base := aais.Constraints{aais.ConstraintActionKind: kind, aais.ConstraintActionName: tool, aais.ConstraintOriginProject: project}
			if scope == aais.ScopePersistent {
				// Not bound to this process's session: to the harness,
				// the tool and the policy rule that gates it.
				base[aais.ConstraintOriginHarness] = harness
				label = "Always allow " + name + " under this policy rule, until revoked"
			}
			c, err := lim.Choice(scope, label, "Remember this approval of the tool ("+string(scope)+")", base)
			if err != nil {
				return nil, err
			}
			choices = append(choices, c)
		}
	}
	var ext aais.Extensions
	if rule.Profile != "" {
		// The reviewer policy (roles, separation of duties,
		// justifications) reads the profile here, as for the gateway's
		// requests.
		b, _ := json.Marshal(map[string]string{"profile": rule.Profile})
		ext = aais.Extensions{gateway.ExchangeExtension: b}
	}
	return aais.NewRequest(aais.RequestParams{
		CreatedAt:  now,
		ExpiresAt:  now.Add(p.o.Policy.ttl(rule)),
		Origin:     origin,
		Action:     json.RawMessage(action),
		Risk:       aais.Risk{Level: rule.Risk, Reasons: reasons},
		Choices:    choices,
		Extensions: ext,
	})
}

// actionJSON is the AAIS action of a call: kind tool.call, the tool's
// name, the exact arguments and the rule's description.
func actionJSON(rule *Rule, name string, raw json.RawMessage, args map[string]any) ([]byte, error) {
	summary := fmt.Sprintf("Call the MCP tool %s", name)
	if rule.Summary != "" {
		s, err := expand(rule.Summary, name, args)
		if err != nil {
			return nil, err
		}
		summary = s
	}
	summary = clip(summary, 1000)
	if summary == "" {
		summary = name
	}
	var buf bytes.Buffer
	buf.WriteString(`{"kind":`)
	writeString(&buf, ActionKind)
	buf.WriteString(`,"name":`)
	writeString(&buf, name)
	buf.WriteString(`,"summary":`)
	writeString(&buf, summary)
	buf.WriteString(`,"arguments":`)
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	if rule.Resource != "" {
		res, err := expand(rule.Resource, name, args)
		if err != nil {
			return nil, err
		}
		if res = clip(res, 4096); res != "" {
			buf.WriteString(`,"resource":`)
			writeString(&buf, res)
		}
	}
	if rule.Effects != nil {
		buf.WriteString(`,"effects":[`)
		for i, e := range rule.Effects {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(&buf, e)
		}
		buf.WriteByte(']')
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func writeString(buf *bytes.Buffer, s string) {
	buf.Write(jsonx.AppendString(buf.AvailableBuffer(), s))
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// status renders an ASC status as an MCP tool result, as the ASC MCP
// binding says: the user-safe message as text and the whole envelope as an
// application/agent-status+json resource. A call that did not run is an
// error for the model, whatever the code's class.
func (p *Proxy) status(code asc.Code, user string, rule *Rule, info map[string]any) (*mcp.CallToolResult, error) {
	env := asc.New(code, asc.ScopeToolCall, true, p.o.Now())
	env.Message = &asc.Message{User: user}
	if rule != nil {
		env.Provenance = &asc.Provenance{PolicyID: fmt.Sprintf("mcp-proxy/rule-%d", rule.Index)}
	}
	switch code {
	case asc.Timeout, asc.Cancelled:
		// Asking again makes a new approval request; nothing ran.
		env.Retry = &asc.Retry{Retryable: true, Safe: true, SideEffectState: asc.SideEffectNone}
	case asc.ResultStateUnknown:
		env.Retry = &asc.Retry{Retryable: false, Safe: false, SideEffectState: asc.SideEffectUnknown}
	default:
		env.Retry = &asc.Retry{Retryable: false, Safe: false, SideEffectState: asc.SideEffectNone}
	}
	if info != nil {
		env.Details = map[string]any{DetailsKey: info}
	}
	r, err := asc.ToMCPToolResult(env)
	if err != nil {
		return nil, err
	}
	out := &mcp.CallToolResult{IsError: true}
	for _, c := range r.Content {
		switch {
		case c.Type == "text":
			out.Content = append(out.Content, &mcp.TextContent{Text: c.Text})
		case c.Type == "resource" && c.Resource != nil:
			out.Content = append(out.Content, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: c.Resource.URI, MIMEType: c.Resource.MIMEType, Text: c.Resource.Text}})
		}
	}
	return out, nil
}
