// Package relay makes a gateway a Compliance Broker (ARSIA-Routing §7): it
// forwards a verified request addressed to another agent, for a data
// residency zone the broker serves, to that agent's inbox, byte for byte
// as the sender signed it (the recipient verifies the sender's signature
// itself; an encrypted payload stays encrypted to the recipient), and
// hands back the recipient's reply as it came.
//
// Before forwarding, the Relayer checks the relay preconditions
// (arsia.CheckRelayPreconditions: Rule 2, the broker serves the zone, from
// the EU/EEA for EU; Rule 9, at least 5 s of lifetime left), the route's
// own zones and the via list (HeaderVia: no loop, at most MaxHops
// brokers). Every attempt that can be recorded yields its ARSIA relay
// audit record (11 members, never the payload): success when the
// recipient answered, failure when it could not be reached or answered
// something that is no reply, timeout when it did not answer in time or
// the message had too little lifetime left (Rule 9).
//
// The package decides and forwards; the gateway authenticates the sender
// before, writes the record and signs the refusals after.
package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/internal/limits"
)

// Route is one recipient the broker relays to.
type Route struct {
	// Agent is the recipient (the envelopes' to); Inbox its ARSIA inbox.
	Agent, Inbox string
	// ResidencyZones, when not empty, are the only zones relayed to it
	// (a subset of the broker's).
	ResidencyZones []string
}

// Options configures a Relayer.
type Options struct {
	// Broker is the gateway's own broker entry: its agent id, its
	// jurisdiction and the zones it serves.
	Broker arsia.BrokerEntry
	// Routes say where each recipient is; one per agent.
	Routes []Route
	// Timeout bounds one forwarding attempt (arsia.RelayForwardTimeout
	// when zero; never more).
	Timeout time.Duration
	// MaxHops is how many brokers, this one included, a message may pass
	// through (DefaultMaxHops when zero).
	MaxHops int
	// MaxReplyBytes caps the recipient's reply (limits.MessageBytes when
	// zero).
	MaxReplyBytes int64
	// Client forwards (one that follows no redirects when nil; the
	// Relayer bounds each attempt by its own deadline).
	Client *http.Client
	// Rand is the source of relay ids (crypto/rand when nil).
	Rand io.Reader
}

// DefaultMaxHops is the hop limit when Options.MaxHops is zero.
const DefaultMaxHops = 3

// Relayer forwards requests for the agents it routes for. It is safe for
// concurrent use.
type Relayer struct {
	o      Options
	routes map[string]Route
}

// New checks o and returns a Relayer.
func New(o Options) (*Relayer, error) {
	if err := o.Broker.Validate(); err != nil {
		return nil, fmt.Errorf("relay: broker entry: %w", err)
	}
	switch {
	case o.Timeout < 0 || o.Timeout > arsia.RelayForwardTimeout:
		return nil, fmt.Errorf("relay: timeout %s: want at most %s", o.Timeout, arsia.RelayForwardTimeout)
	case o.MaxHops < 0 || o.MaxHops > MaxViaEntries:
		return nil, fmt.Errorf("relay: max hops %d: want 1 to %d", o.MaxHops, MaxViaEntries)
	case o.MaxReplyBytes < 0:
		return nil, fmt.Errorf("relay: max reply bytes %d: negative", o.MaxReplyBytes)
	}
	if o.Timeout == 0 {
		o.Timeout = arsia.RelayForwardTimeout
	}
	if o.MaxHops == 0 {
		o.MaxHops = DefaultMaxHops
	}
	if o.MaxReplyBytes == 0 {
		o.MaxReplyBytes = limits.MessageBytes
	}
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	r := &Relayer{o: o, routes: make(map[string]Route, len(o.Routes))}
	for _, rt := range o.Routes {
		switch {
		case !arsia.ValidAgentID(rt.Agent):
			return nil, fmt.Errorf("relay: route agent %q is not an agent id", rt.Agent)
		case rt.Agent == o.Broker.AgentID:
			return nil, fmt.Errorf("relay: a route to the broker itself (%s)", rt.Agent)
		case rt.Inbox == "":
			return nil, fmt.Errorf("relay: route to %s has no inbox", rt.Agent)
		}
		if _, dup := r.routes[rt.Agent]; dup {
			return nil, fmt.Errorf("relay: two routes to %s", rt.Agent)
		}
		for _, z := range rt.ResidencyZones {
			if !o.Broker.Serves(z) {
				return nil, fmt.Errorf("relay: route to %s lists zone %q, which the broker does not serve", rt.Agent, z)
			}
		}
		rt.ResidencyZones = slices.Clone(rt.ResidencyZones)
		r.routes[rt.Agent] = rt
	}
	return r, nil
}

// Broker is the broker entry the Relayer checks messages against.
func (r *Relayer) Broker() arsia.BrokerEntry { return r.o.Broker }

// Route returns the route to agent, if the Relayer has one.
func (r *Relayer) Route(agent string) (Route, bool) {
	rt, ok := r.routes[agent]
	return rt, ok
}

// Request is one message to relay.
type Request struct {
	// Route is where it goes (Relayer.Route of its to).
	Route Route
	// Body is the message exactly as received and verified; Envelope its
	// decoded form, as signed (an encrypted payload is the JWE).
	Body     []byte
	Envelope map[string]any
	// Via is the values of the HeaderVia header it came with.
	Via []string
	// TraceParent, TraceState and IdempotencyKey are passed on when set.
	TraceParent, TraceState, IdempotencyKey string
	// Received is when the gateway received it; Now is the time of the
	// relay decision (the clock is the caller's).
	Received, Now time.Time
}

// Outcome is how a relay ended. Either Forwarded, and Status, Body and
// ContentType are the recipient's reply to pass back unchanged, or Err is
// the refusal or failure to answer the sender with.
type Outcome struct {
	Forwarded   bool
	Status      int
	Body        []byte
	ContentType string
	// RetryAfter is the recipient's Retry-After, in seconds (0: none).
	RetryAfter time.Duration
	Err        *arsia.Error
	// Record is the relay audit record; nil only when the message can
	// have none (no readable residency zone, an id that is no UUID v4):
	// then nothing was forwarded and Err says why.
	Record *arsia.RelayAuditRecord
}

// Reasons a relay failed, in the details of its service_unavailable.
const (
	ReasonUnreachable  = "recipient_unreachable"
	ReasonTimeout      = "recipient_timeout"
	ReasonReplyTooBig  = "reply_too_large"
	ReasonReplyInvalid = "reply_not_arsia"
	ReasonRedirected   = "recipient_redirected"
	ReasonLoop         = "relay_loop"
	ReasonMaxHops      = "max_hops_exceeded"
	ReasonCancelled    = "cancelled"
)

// replyTypes are the media types passed back: an ARSIA envelope, or a
// problem or status document of a recipient that could not sign one.
var replyTypes = []string{"application/arsia+json", "application/problem+json", "application/agent-status+json", "application/json"}

// Relay checks req and forwards it. It never reads the payload beyond its
// hash. ctx bounds the attempt with the Relayer's timeout (and the
// message's remaining lifetime); a ctx that ends first ends it too.
func (r *Relayer) Relay(ctx context.Context, req Request) Outcome {
	env, broker := req.Envelope, r.o.Broker
	latency := max(req.Now.Sub(req.Received), 0)
	rec, recErr := arsia.NewRelayAuditRecord(env, arsia.RelayAuditInput{BrokerAgentID: broker.AgentID,
		RelayedAt: req.Now, RelayLatency: latency, ForwardingResult: arsia.ForwardingFailure, Rand: r.o.Rand})
	refuse := func(e *arsia.Error, result arsia.ForwardingResult) Outcome {
		if rec != nil {
			rec.ForwardingResult = result
			if e.Details == nil {
				e.Details = map[string]any{}
			}
			e.Details["relay_id"] = rec.RelayID
		}
		return Outcome{Err: e, Record: rec}
	}
	if err := arsia.CheckRelayPreconditions(env, broker, req.Now); err != nil {
		var ae *arsia.Error
		if !errors.As(err, &ae) {
			ae = &arsia.Error{Code: arsia.CodeInternalError, Description: "The relay preconditions could not be checked.", Err: err}
		} else {
			ae = &arsia.Error{Code: ae.Code, Description: ae.Description, Details: cloneDetails(ae.Details), Err: err}
		}
		result := arsia.ForwardingFailure
		if ae.Code == "zone_not_served" {
			ae.Details["available_zones"] = anyStrings(broker.ResidencyZones)
		}
		if ae.Code == "expiry_too_soon" {
			// The library's convention: a relay refused under Rule 9 is
			// recorded as a timeout.
			result = arsia.ForwardingTimeout
		}
		return refuse(ae, result)
	}
	if recErr != nil {
		id, _ := env["id"].(string)
		e := &arsia.Error{Code: arsia.CodeInvalidRequest, Description: "The message cannot be relayed: its relay could not be recorded.", Err: recErr}
		if !arsia.ValidMessageID(id) {
			e.Description = "The message cannot be relayed: a relayed message's id must be a UUID v4."
			e.Details = map[string]any{"field": "/id"}
		}
		return Outcome{Err: e}
	}
	zone := rec.ResidencyZone
	if z := req.Route.ResidencyZones; len(z) > 0 && !slices.Contains(z, zone) {
		return refuse(&arsia.Error{Code: "zone_not_served",
			Description: fmt.Sprintf("Rule 2: the broker relays to %s only for the zones %v, not %s.", req.Route.Agent, z, zone),
			Details: map[string]any{"data_residency_violation": true, "required_zone": zone, "available_zones": anyStrings(z),
				"broker_jurisdiction": broker.Jurisdiction}}, arsia.ForwardingFailure)
	}
	via, err := ParseVia(req.Via)
	if err != nil {
		return refuse(&arsia.Error{Code: "invalid_relay_via", Description: "The " + HeaderVia + " header cannot be read: it must list agent ids separated by commas.",
			Details: map[string]any{"field": "header " + HeaderVia}, Err: err}, arsia.ForwardingFailure)
	}
	failed := func(reason, words string, result arsia.ForwardingResult, cause error) Outcome {
		return refuse(&arsia.Error{Code: arsia.CodeServiceUnavailable, Description: words, Err: cause,
			Details: map[string]any{"relay_failed": true, "reason": reason, "to_agent": req.Route.Agent,
				"broker_agent_id": broker.AgentID, "forwarding_result": string(result), "residency_zone": zone}}, result)
	}
	if slices.Contains(via, broker.AgentID) || hasDuplicate(via) {
		return failed(ReasonLoop, "The message has passed through this broker before: the brokers' routes form a loop.", arsia.ForwardingFailure, nil)
	}
	if len(via)+1 > r.o.MaxHops {
		return failed(ReasonMaxHops, fmt.Sprintf("The message has passed through %d brokers; this broker relays through at most %d.", len(via), r.o.MaxHops),
			arsia.ForwardingFailure, nil)
	}
	timeout := r.o.Timeout
	if s, ok := env["expires_at"].(string); ok {
		if exp, err := arsia.ParseTimestamp(s); err == nil {
			// No point waiting for a reply to a message that expired.
			timeout = min(timeout, exp.Sub(req.Now))
		}
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(fctx, http.MethodPost, req.Route.Inbox, bytes.NewReader(req.Body))
	if err != nil {
		return failed(ReasonUnreachable, "The broker could not reach "+req.Route.Agent+".", arsia.ForwardingFailure, err)
	}
	hreq.Header.Set("Content-Type", "application/arsia+json; v=1")
	hreq.Header.Set("Accept", "application/arsia+json, application/problem+json")
	hreq.Header.Set(HeaderVia, FormatVia(append(slices.Clone(via), broker.AgentID)))
	for k, v := range map[string]string{"Traceparent": req.TraceParent, "Tracestate": req.TraceState, "Idempotency-Key": req.IdempotencyKey} {
		if v != "" {
			hreq.Header.Set(k, v)
		}
	}
	ended := func(err error) Outcome {
		switch {
		case ctx.Err() != nil:
			return failed(ReasonCancelled, "The relay to "+req.Route.Agent+" was cancelled.", arsia.ForwardingFailure, err)
		case fctx.Err() != nil || isTimeout(err):
			return failed(ReasonTimeout, fmt.Sprintf("%s did not answer the broker within %s.", req.Route.Agent, timeout.Round(time.Millisecond)),
				arsia.ForwardingTimeout, err)
		}
		return failed(ReasonUnreachable, "The broker could not reach "+req.Route.Agent+".", arsia.ForwardingFailure, err)
	}
	resp, err := r.o.Client.Do(hreq)
	if err != nil {
		return ended(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, r.o.MaxReplyBytes+1))
	if err != nil {
		return ended(err)
	}
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); {
	case int64(len(body)) > r.o.MaxReplyBytes:
		return failed(ReasonReplyTooBig, fmt.Sprintf("%s answered with more than %d bytes.", req.Route.Agent, r.o.MaxReplyBytes), arsia.ForwardingFailure, nil)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return failed(ReasonRedirected, req.Route.Agent+" answered with a redirection, which a broker does not follow.", arsia.ForwardingFailure, nil)
	case resp.StatusCode < 200 || resp.StatusCode > 599 || len(body) == 0 || !slices.Contains(replyTypes, mt):
		return failed(ReasonReplyInvalid, req.Route.Agent+" answered with something that is not an ARSIA reply.", arsia.ForwardingFailure,
			fmt.Errorf("status %d, content type %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body)))
	}
	rec.ForwardingResult = arsia.ForwardingSuccess
	out := Outcome{Forwarded: true, Status: resp.StatusCode, Body: body, ContentType: resp.Header.Get("Content-Type"), Record: rec}
	if s := arsia.ParseRateLimitHeaders(resp.Header).RetryAfterSeconds; s != nil && *s <= 86400 {
		out.RetryAfter = time.Duration(*s) * time.Second
	}
	return out
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func hasDuplicate(ids []string) bool {
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return true
		}
	}
	return false
}

func anyStrings(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func cloneDetails(d map[string]any) map[string]any {
	out := make(map[string]any, len(d)+2)
	for k, v := range d {
		out[k] = v
	}
	return out
}
