// Package gateway is the pipeline of custos serve, independent of HTTP: one
// signed ARSIA request in, one signed ARSIA reply out (a response, an error
// or a pending_approval), with every step recorded in the audit log.
//
//	1 decode       strict JSON, size cap (the HTTP adapter checks the media type)
//	2 identity     the sender's key by kid from the trust store; signature
//	2b decrypt     an encrypted payload, by the gateway's key (Decryption),
//	               after the signature verified; every reply to it is then
//	               encrypted to the sender's "use": "enc" key
//	3 structure    L1 (JSON Schema), L2 (semantics), compliance rules
//	4 authorize    the recipient is this gateway; the sender holds a grant
//	               for the capability; a handler serves it
//	5 oversight    the effective profile's human_oversight: not_required and
//	               the post-execution modes run now; required_before_execution
//	               creates an AAIS request for exactly the call that would run
//	               and answers pending_approval (202)
//	6 execute      the handler runs the call; an approved one only after its
//	               action digest is recomputed (handler.Dispatch): a changed
//	               call never runs. A call that needs no approval builds no
//	               AAIS action and no digest (handler.Check, handler.Run)
//	7 record       audit records for the reception, the decision and the
//	               execution; a failed audit write fails the request
//	8 report       every reply carries an ASC status (for errors, in the
//	               ARSIA error's details)
//
// A request waiting for approval is an exchange in the exchange store; Run
// resumes it when the authority records the decision, after a restart too,
// and the approved call runs exactly once (Exchanges.Claim).
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/gateway/relay"
)

// Options configures a Gateway.
type Options struct {
	// Agent is the gateway's agent id; Signer and KID sign its replies.
	Agent  string
	Signer sig.Signer
	KID    string
	// Keys resolves senders' keys; Algorithms is the accepted list
	// (EdDSA, ES256, RS256 when nil).
	Keys       sig.KeySource
	Algorithms []string
	// Decryption, when set, is the gateway's private encryption key (EC
	// P-256, "use" "enc" or absent, a kid of the gateway's): requests
	// whose payload is encrypted to it (ARSIA-Core §5.3, ECDH-ES with
	// A256GCM) are decrypted once their signature verified, and every
	// reply to such a request is encrypted to the sender. Publish its
	// public half in the gateway's JWKS with "use": "enc". Nil refuses
	// encrypted payloads.
	Decryption *jose.JSONWebKey
	// EncryptionKeys finds a sender's encryption key ("use": "enc" in its
	// JWKS), for the replies to its encrypted requests. When nil, the
	// policy's Keys in force (SetPolicy) are asked, if they are a
	// sig.EncryptionKeySource (the trust store is).
	EncryptionKeys sig.EncryptionKeySource
	// Grants maps a sender agent id to the capability patterns it may
	// call ("billing.*").
	Grants map[string][]string
	// Oversight maps a sender to the capability patterns whose every call
	// waits for a human approval, whatever its profile (Policy.Oversight).
	Oversight map[string][]string
	// Handlers runs each capability.
	Handlers map[string]handler.Handler
	// Authority, Exchanges and Audit are the gateway's state.
	Authority *aais.Authority
	Exchanges exchange.Backend
	Audit     *audit.Log
	// Units, when set, makes the writes of one pipeline step (the
	// exchange's state, its approval request or resolution, the audit
	// record that describes them) one transaction: store.State on one
	// SQLite file or one PostgreSQL pool. Nil writes each on its own, and
	// the pipeline recovers from a crash between them (reconcile).
	Units UnitOfWork
	// Profiles are the compliance profiles (the bundled ones when nil).
	Profiles *compliance.Registry
	// ApprovalTTL is how long a reviewer has (10 minutes when zero).
	ApprovalTTL time.Duration
	// AllowSession offers "approve for this session", limited to the
	// capability and the sender, when Remember is nil.
	AllowSession bool
	// Quorums say which calls need several approvals (M-of-N, two-person
	// rules); see QuorumRule. A call needs the largest ApprovalsRequired
	// of the rules that match it and of its descriptor's
	// RequiredApprovals.
	Quorums []QuorumRule
	// Remember, when set, decides which remembered choices a call's
	// approval offers: the scopes its entry for the capability and
	// profile allows (session: bound to the capability and the sender's
	// session; persistent: to the capability and the sender), each with
	// the constraints the entry requires. Give the Authority the same
	// policy (AuthorityOptions.Remember) so it holds them too.
	Remember *aais.RememberRules
	// StatusURL is where a sender polls an exchange (put in
	// pending_approval replies).
	StatusURL func(exchangeID string) string
	// Trust, when set, decides whether a verified sender's key is trusted
	// enough for the call (certificate trust levels, revocation).
	Trust TrustPolicy
	// Authorizer, when set, checks the access token (bearer or DPoP) of
	// every request; its scope bounds the capabilities granted.
	Authorizer Authorizer
	// RateLimit bounds each sender's requests (no limit when zero);
	// refused requests get rate_limited (429) with a Retry-After.
	RateLimit RateLimit
	// Limiter, when set, replaces the in-process limiter RateLimit
	// configures (a shared one for several replicas).
	Limiter RateLimiter
	// Callbacks maps a sender to the URL the gateway POSTs its
	// approval_decision and final reply to, once an approval resolves
	// (the status URL serves them too).
	Callbacks map[string]string
	// ReviewWithin is the deadline of the review required_post_execution
	// demands (24 h when zero); required_within_24h is never later than
	// 24 h.
	ReviewWithin time.Duration
	// Client delivers callbacks (a client with a 10 s timeout that
	// follows no redirects when nil).
	Client *http.Client
	// Poll is how often Run looks for decisions (200 ms when zero).
	Poll time.Duration
	// ClaimLease, when set, is how long the claims of a replica sharing
	// the exchange store outlive its last heartbeat: Run records this
	// process's heartbeat every third of it, and ends the calls another
	// replica left executing once that replica's heartbeat is older (it
	// was killed, or lost its host), answered ASC 6005 and never run
	// again. Zero sends no heartbeats and ends no other process's claims:
	// one gateway process per store, which Recover covers at start.
	ClaimLease time.Duration
	// CheckpointEvery, when set, is how often Run signs a checkpoint of
	// the audit chain with the gateway's key (audit.Log.Checkpoint), when
	// records were added since the last one; Checkpoint signs one at
	// once (at shutdown, say).
	CheckpointEvery time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger receives diagnostics (nothing is logged when nil).
	Logger *slog.Logger
	// Tracer, when set, traces every request: a span per request, per
	// stage and per handler call, propagated to the upstreams (W3C
	// traceparent, MCP _meta). Nil traces nothing, at no cost.
	Tracer trace.TracerProvider
	// Relay, when set, makes the gateway a Compliance Broker: a request
	// addressed to an agent it has a route for is relayed there (see
	// relayed) instead of refused. Its broker entry's agent id must be
	// Agent.
	Relay *relay.Relayer
	// Metrics is the registry the gateway registers its metrics on (one
	// of its own, with the Go runtime and process collectors, when nil);
	// Gateway.Metrics returns it.
	Metrics *prometheus.Registry
}

// UnitOfWork runs fn so that every write of the gateway's stores it makes
// with fn's context commits together, or none does. fn may run more than
// once (a retried transaction): it only reads and writes the stores.
type UnitOfWork interface {
	Unit(ctx context.Context, fn func(ctx context.Context) error) error
	// Atomic reports whether Unit commits the writes together; false
	// means each write commits on its own, as without a unit.
	Atomic() bool
}

// separate is the UnitOfWork of stores that share no transaction.
type separate struct{}

func (separate) Unit(ctx context.Context, fn func(context.Context) error) error { return fn(ctx) }

func (separate) Atomic() bool { return false }

// atomic reports whether a unit of work commits its writes together.
func (g *Gateway) atomic() bool { return g.o.Units.Atomic() }

// Gateway runs the pipeline. It is safe for concurrent use.
type Gateway struct {
	o       Options
	limiter RateLimiter
	// lastPurge is when housekeeping last purged idempotency keys (Unix
	// ns).
	lastPurge atomic.Int64
	// resuming holds the ids of the exchanges a goroutine of this process
	// is moving on (resumeOne).
	resuming sync.Map
	// reconciling holds the ids of the exchanges in received a goroutine
	// of this process is advancing (reconcile). Apart from resuming: an
	// advance that finds its approval decided already resumes the
	// exchange at once, which a marker shared with reconcile would refuse.
	reconciling sync.Map
	// running holds the ids of the exchanges claimed by this process
	// whose call a goroutine of it is running or recording.
	running sync.Map
	metrics metrics
	// live is the policy in force (SetPolicy).
	live atomic.Pointer[Policy]
	// tracer is nil when tracing is off.
	tracer trace.Tracer
	// logSample counts unauthenticated refusals, for sampled logging.
	logSample atomic.Uint64
}

// DefaultClaimLease is the ClaimLease of replicas sharing a store (custos
// serve on PostgreSQL): the calls of a replica that stopped are ended
// within about 45 s (30 s after its last heartbeat, sent every 10 s,
// seen by the next scan).
const DefaultClaimLease = 30 * time.Second

// New checks o and returns a Gateway.
func New(o Options) (*Gateway, error) {
	switch {
	case !arsia.ValidAgentID(o.Agent):
		return nil, fmt.Errorf("gateway: agent %q is not an ARSIA agent id", o.Agent)
	case o.Signer == nil || o.KID == "":
		return nil, errors.New("gateway: no signing key")
	case o.Keys == nil:
		return nil, errors.New("gateway: no trust store")
	case o.Authority == nil || o.Exchanges == nil || o.Audit == nil:
		return nil, errors.New("gateway: the authority, the exchange store and the audit log are required")
	case o.Remember != nil && (o.Remember.ProfileOf == nil || !o.Authority.Remembers()):
		// The gateway offers by the call's profile; an authority that
		// read another profile (or held no policy) would judge other
		// choices than those offered.
		return nil, errors.New("gateway: a remember policy needs ProfileOf (RequestProfile) and the same policy on the authority")
	}
	if o.Relay != nil && o.Relay.Broker().AgentID != o.Agent {
		return nil, fmt.Errorf("gateway: the relay's broker is %s, not the gateway's agent %s", o.Relay.Broker().AgentID, o.Agent)
	}
	if err := checkQuorums(o.Quorums); err != nil {
		return nil, err
	}
	if o.Decryption != nil {
		if err := checkDecryptionKey(o.Decryption, o.Agent); err != nil {
			return nil, err
		}
	}
	if o.Algorithms == nil {
		o.Algorithms = []string{sig.EdDSA, sig.ES256, sig.RS256}
	}
	if o.Units == nil {
		o.Units = separate{}
	}
	if o.Profiles == nil {
		o.Profiles = compliance.Default()
	}
	if o.ApprovalTTL <= 0 {
		o.ApprovalTTL = 10 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Millisecond
	}
	if o.ReviewWithin <= 0 {
		o.ReviewWithin = 24 * time.Hour
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	for sender, u := range o.Callbacks {
		if err := exchange.CheckCallbackURL(u); err != nil {
			return nil, fmt.Errorf("gateway: callback of %s: %w", sender, err)
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StatusURL == nil {
		o.StatusURL = func(id string) string { return "/v1/arsia/exchanges/" + id }
	}
	lim := o.Limiter
	if lim == nil {
		lim = NewMemoryRateLimiter(o.RateLimit)
	}
	g := &Gateway{o: o, limiter: lim}
	g.live.Store(&Policy{Keys: o.Keys, Trust: o.Trust, Grants: o.Grants, Handlers: o.Handlers, Callbacks: o.Callbacks, Oversight: o.Oversight})
	if o.Tracer != nil {
		g.tracer = o.Tracer.Tracer(tracerName)
	}
	var err error
	if g.metrics, err = newMetrics(g, o.Metrics); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	return g, nil
}

// Reply is what the gateway answers: the HTTP status and the signed ARSIA
// envelope (nil only when no reply can be signed for the sender, then
// Problem is set).
type Reply struct {
	Status     int
	Envelope   json.RawMessage
	ExchangeID string
	// RetryAfter, when set, is how long the sender should wait (429).
	RetryAfter time.Duration
	// Problem is an ASC status for answers that cannot be an ARSIA reply
	// (the body is not an envelope, so there is nobody to answer to).
	Problem *asc.Error
	// ContentType, when set, is the media type of Envelope: a relayed
	// recipient's reply, passed back as it came (an ARSIA envelope signed
	// by the recipient, or its problem document). Empty means an ARSIA
	// envelope of the gateway's.
	ContentType string
}

// Inbound is one request as the transport received it.
type Inbound struct {
	// Body is the ARSIA envelope.
	Body []byte
	// Authorization and DPoP are the HTTP headers of those names ("" when
	// absent).
	Authorization, DPoP string
	// IdempotencyKey is the Idempotency-Key header ("" when absent); it
	// wins over the envelope's idempotency.key.
	IdempotencyKey string
	// Method and URL are the HTTP method and the absolute URL the request
	// was sent to (DPoP's htm and htu).
	Method, URL string
	// TraceParent and TraceState are the W3C Trace Context headers ("" when
	// absent): the request's span is their child, and its trace id the
	// request's when the envelope names none.
	TraceParent, TraceState string
	// RelayVia is the values of the ARSIA-Relay-Via header (RelayViaHeader):
	// the brokers a relayed message passed through.
	RelayVia []string
}

// RelayViaHeader is the header in which brokers list themselves when they
// relay a message (relay.HeaderVia).
const RelayViaHeader = relay.HeaderVia

// TrustPolicy decides whether a sender whose signature verified may make a
// call: certificate trust levels, revoked keys.
type TrustPolicy interface {
	// Check returns nil, or the ARSIA error to answer (certificate_*,
	// key_mismatch, forbidden for a trust level below the minimum).
	Check(ctx context.Context, q TrustQuery) *arsia.Error
}

// TrustQuery is what a TrustPolicy decides on.
type TrustQuery struct {
	// Sender is the verified "from"; KID the key that signed.
	Sender, KID string
	// Capability is the call; Profile the effective compliance profile
	// ("" when none).
	Capability, Profile string
}

// Authorizer checks the access token that accompanies a request.
type Authorizer interface {
	// Authorize returns the token's grant, or the ARSIA error to answer
	// (unauthorized for a missing, invalid, expired or replayed token or
	// proof).
	Authorize(ctx context.Context, q AuthzQuery) (*Grant, *arsia.Error)
}

// AuthzQuery is what an Authorizer decides on.
type AuthzQuery struct {
	// Sender and Recipient are the envelope's from and to (the token's
	// sub and aud).
	Sender, Recipient string
	// Capabilities are the ones requested, in request order.
	Capabilities []string
	// Authorization, DPoP, Method and URL come from the transport.
	Authorization, DPoP, Method, URL string
	Now                              time.Time
}

// Grant is what a valid access token allows.
type Grant struct {
	// Scope are the capabilities the token covers (exact strings).
	Scope []string
	// TokenID is the token's jti, Issuer its iss; Bound says a DPoP
	// proof bound it to the sender's key.
	TokenID, Issuer string
	Bound           bool
}
