package mcpproxy

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connect opens a client session on the gated server through t (a
// CommandTransport for a stdio child, a StreamableClientTransport for a
// remote server) and returns the proxy in front of it. Unlike New, the
// proxy relays the server's list-changed notifications (tools, prompts,
// resources) and resource updates to the host's sessions, and the host's
// resource subscriptions to the server.
func Connect(ctx context.Context, t mcp.Transport, o Options) (*Proxy, error) {
	r := &notifier{}
	logger := o.Logger
	client := mcp.NewClient(&mcp.Implementation{Name: Harness, Version: "1"}, &mcp.ClientOptions{
		Logger:                     logger,
		MultiRoundTrip:             &mcp.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { r.changed(kindTools) },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { r.changed(kindPrompts) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { r.changed(kindResources) },
		ResourceUpdatedHandler:     r.updated,
	})
	child, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	o.relay = r
	p, err := New(child, o)
	if err != nil {
		_ = child.Close()
		return nil, err
	}
	go func() {
		err := child.Wait()
		p.ChildStopped()
		p.o.Logger.Warn("the gated MCP server's session ended; tool calls now fail with DEPENDENCY_UNAVAILABLE", "err", err)
	}()
	return p, nil
}

type listKind int

const (
	kindTools listKind = iota
	kindPrompts
	kindResources
)

// notifier carries notifications between the gated server and the hosts.
// It exists before the proxy (the client's handlers are set before it
// connects); notifications that arrive before the proxy is attached reach
// no host, as there is none yet.
type notifier struct {
	p atomic.Pointer[Proxy]

	// mu guards subs; it is held while subscribing upstream, which the
	// relaying of notifications (p) never waits for.
	mu sync.Mutex
	// subs maps a subscribed URI to the host sessions subscribed to it;
	// the proxy holds one subscription upstream per URI.
	subs map[string]map[*mcp.ServerSession]bool
	// kindMu serializes the placeholder add/remove of each list kind.
	kindMu [3]sync.Mutex
}

func (r *notifier) proxy() *Proxy { return r.p.Load() }

// changed tells the host sessions that a list changed upstream.
//
// The SDK server sends list-changed notifications (to sessions of every
// protocol version, on the stream each expects) only when its own feature
// set changes. The proxy answers every list from the gated server, never
// from that set, so it signals a change by adding and at once removing a
// placeholder feature that no list ever shows: the SDK debounces the two
// into one notification.
func (r *notifier) changed(k listKind) {
	p := r.proxy()
	if p == nil {
		return
	}
	caps := p.caps
	r.kindMu[k].Lock()
	defer r.kindMu[k].Unlock()
	name := placeholderName
	switch k {
	case kindTools:
		if caps.Tools == nil || !caps.Tools.ListChanged {
			return
		}
		p.server.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool"}
			})
		p.server.RemoveTools(name)
	case kindPrompts:
		if caps.Prompts == nil || !caps.Prompts.ListChanged {
			return
		}
		p.server.AddPrompt(&mcp.Prompt{Name: name}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown prompt"}
		})
		p.server.RemovePrompts(name)
	case kindResources:
		if caps.Resources == nil || !caps.Resources.ListChanged {
			return
		}
		uri := "urn:" + name
		p.server.AddResource(&mcp.Resource{URI: uri, Name: name}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return nil, mcp.ResourceNotFoundError(uri)
		})
		p.server.RemoveResources(uri)
	}
	p.o.Logger.Debug("relayed a list-changed notification", "list", [...]string{"tools", "prompts", "resources"}[k])
}

// placeholderName names the placeholder features of changed; the random
// part keeps it from ever being a name of the gated server.
var placeholderName = "custos.mcp-proxy.list-changed." + randomHex(8)

// updated relays a resources/updated notification to the host sessions
// subscribed to the resource.
func (r *notifier) updated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	p := r.proxy()
	if p == nil || req.Params == nil {
		return
	}
	params := *req.Params
	params.Meta = relayMeta(params.Meta)
	if err := p.server.ResourceUpdated(context.WithoutCancel(ctx), &params); err != nil {
		p.o.Logger.Warn("relaying resources/updated", "err", err)
	}
}

// subscribe is the proxy server's SubscribeHandler: the first host session
// subscribing to a URI subscribes the proxy upstream.
func (p *Proxy) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	r := p.relay
	if req.Params == nil || req.Params.URI == "" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "resources/subscribe needs a uri"}
	}
	if p.dead.Load() {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the gated MCP server has stopped"}
	}
	uri := req.Params.URI
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.subs[uri][req.Session] {
		return nil
	}
	if len(r.subs[uri]) == 0 {
		// Holding the lock while asking upstream orders subscribes and
		// unsubscribes of one URI; they are rare.
		if err := p.child.Subscribe(ctx, &mcp.SubscribeParams{URI: uri, Meta: relayMeta(req.Params.Meta)}); err != nil {
			if je, ok := peerError(err); ok {
				return je
			}
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the gated MCP server did not answer"}
		}
	}
	if r.subs == nil {
		r.subs = map[string]map[*mcp.ServerSession]bool{}
	}
	if r.subs[uri] == nil {
		r.subs[uri] = map[*mcp.ServerSession]bool{}
	}
	r.subs[uri][req.Session] = true
	p.watch(req.Session)
	return nil
}

// unsubscribe is the proxy server's UnsubscribeHandler: the last host
// session leaving a URI unsubscribes the proxy upstream.
func (p *Proxy) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	if req.Params == nil || req.Params.URI == "" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "resources/unsubscribe needs a uri"}
	}
	p.relay.drop(ctx, p, req.Params.URI, req.Session)
	return nil
}

// drop removes one host session's subscription to uri.
func (r *notifier) drop(ctx context.Context, p *Proxy, uri string, ss *mcp.ServerSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.subs[uri][ss] {
		return
	}
	delete(r.subs[uri], ss)
	if len(r.subs[uri]) > 0 {
		return
	}
	delete(r.subs, uri)
	if p.dead.Load() {
		return
	}
	if err := p.child.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		p.o.Logger.Warn("unsubscribing upstream", "uri", uri, "err", err)
	}
}

// sessionGone drops the subscriptions of a closed host session.
func (r *notifier) sessionGone(ctx context.Context, p *Proxy, ss *mcp.ServerSession) {
	r.mu.Lock()
	var uris []string
	for uri, set := range r.subs {
		if set[ss] {
			uris = append(uris, uri)
		}
	}
	r.mu.Unlock()
	for _, uri := range uris {
		r.drop(ctx, p, uri, ss)
	}
}
