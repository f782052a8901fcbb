// Package onboard serves ARSIA onboarding (ARSIA-Identity §7): an agent
// of another organization asks the gateway to work with it, the gateway
// runs the six phases in their fixed order against the agent's well-known
// endpoints and the organization's capability policy, answers with the
// signed decision message and, on approval, makes the agent a sender of
// the running gateway with an access token scoped to what was granted.
//
// The phases, as Service runs them (package arsia/onboarding has the
// rules):
//
//  1. discovery_and_identity, six steps in order (StepTracker):
//     GET /.well-known/arsia, GET /.well-known/arsia/identity, the JWKS,
//     the identity record's X-ARSIA-Sig, the signing kid's prefix, the AI
//     system classification. The request itself must then verify with the
//     JWKS just fetched: until it does the request is nobody's, and is
//     answered unsigned, unaudited;
//  2. compliance_conformance: CHECK-01 to CHECK-05 (checks.go);
//  3. capability_scoping: the requested capabilities against the policy;
//  4. provenance: informational;
//  5. decision: audited (Options.Record) before anything is granted,
//     then, on approval, activated (Options.Activate) and its token
//     issued (Options.Issue); an approval that cannot be completed is
//     undone and recorded as withdrawn;
//  6. operational: the agent is a sender; the decision is its answer.
//
// Nothing is fetched from a URL outside Options.DiscoveryURLs, redirects
// included, and at most Options.MaxInFlight onboardings run at once.
package onboard

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/identity"
	"github.com/custos-runtime/custos/arsia/onboarding"
	"github.com/custos-runtime/custos/arsia/sig"
)

// Path is where agents ask to be onboarded.
const Path = "/v1/arsia/onboarding"

// Agent is an onboarded agent: what activation puts in force.
type Agent struct {
	ID string `json:"agent_id"`
	// URL is the base URL its keys and identity are discovered under.
	URL string `json:"url"`
	// FreelyAllowed and OversightRequired are its grants (each call of
	// the latter waits for a human approval).
	FreelyAllowed     []string `json:"freely_allowed"`
	OversightRequired []string `json:"oversight_required"`
	PolicyVersion     string   `json:"policy_version"`
	Classification    string   `json:"ai_system_classification"`
	OnboardedAt       string   `json:"onboarded_at"`
	// RequestID is the id of the onboarding request that was approved.
	RequestID string `json:"request_id"`
	// jkt is the DPoP key the token is bound to ("" for a bearer token).
	jkt string
}

// Outcome is what Options.Record audits: the decision about an
// authenticated agent, with what each phase found.
type Outcome struct {
	Agent, MessageID string
	Decision         *onboarding.Payload
	// Steps and Phases are those completed, in order.
	Steps          []onboarding.Step
	Phases         []onboarding.Phase
	Conformance    *onboarding.ConformanceResult
	Provenance     *onboarding.Provenance
	Classification string
	// Result is the decision's result member without the token (issued
	// and audited separately).
	Result map[string]any
	// Withdrawn, when set, says why an approval already recorded was
	// withdrawn (its activation or token failed): nothing was granted.
	Withdrawn string
}

// Token is the access token Options.Issue returns.
type Token struct {
	Value, ID string
	ExpiresAt time.Time
}

// Options configure a Service.
type Options struct {
	// Agent, Signer and KID are the gateway's: the decision messages
	// come from Agent, signed with Signer under KID.
	Agent  string
	Signer sig.Signer
	KID    string
	// Policy is the capability policy of Phase 3; RiskLevels, when set,
	// returns the risk levels (0 to 10) of the actions of the capabilities
	// served now, which the policy's max_risk_level is applied to.
	Policy     *onboarding.CapabilityPolicy
	RiskLevels func() map[string]int
	// DiscoveryURLs are the URL prefixes the agents' endpoints may be
	// fetched under (https, or http to a loopback host).
	DiscoveryURLs []string
	// Profile is the compliance profile of the decision messages;
	// Profiles the registry (nil: the bundled profiles).
	Profile  string
	Profiles *compliance.Registry
	// Client makes the fetches (its transport is wrapped to refuse URLs
	// outside DiscoveryURLs); FetchTimeout bounds each.
	Client       *http.Client
	FetchTimeout time.Duration
	// MaxInFlight caps concurrent onboardings (4 when zero); MaxBody the
	// request body (1 MiB when zero).
	MaxInFlight int
	MaxBody     int64
	// Algorithms are the signature algorithms accepted on the request
	// (EdDSA when empty).
	Algorithms []string
	Now        func() time.Time
	Logger     *slog.Logger
	// Configured reports whether an agent is configured statically (a
	// sender or trust peer): it is not onboarded over it.
	Configured func(agent string) bool
	// Seen, when set, remembers each authenticated request (its sender
	// and id) until it expires and reports one seen before: a replayed
	// request is refused (409) instead of onboarding again and answering
	// a fresh token to whoever replayed it.
	Seen func(ctx context.Context, key string, until time.Time) (bool, error)
	// Record audits a decision, before anything is granted; an error
	// withholds it (the agent is told the gateway is unavailable, nothing
	// is activated). It is called again with Withdrawn set when an
	// approval recorded cannot be completed.
	Record func(ctx context.Context, o Outcome) error
	// Activate persists an approved agent and puts it in force;
	// Deactivate undoes it when its token cannot be issued.
	Activate   func(ctx context.Context, a Agent) error
	Deactivate func(ctx context.Context, agent string) error
	// Issue issues the agent's access token for scope, valid at most
	// lifetime, bound to the DPoP key with thumbprint jkt when not empty.
	Issue func(ctx context.Context, agent string, scope []string, jkt string, lifetime time.Duration) (Token, error)
	// DPoP, when set, checks the RFC 9449 proof an onboarding request came
	// with (a DPoP header: htm POST, htu the onboarding URL, no ath) and
	// returns its key's thumbprint, which the token is then bound to. It
	// is asked only once the request authenticated (it records the
	// proof's jti). Without it a proof is refused.
	DPoP func(ctx context.Context, proof string, now time.Time) (jkt string, err error)
}

// Service answers onboarding requests. It is safe for concurrent use.
type Service struct {
	o        Options
	client   *http.Client
	prefixes []*url.URL
	slots    chan struct{}
	log      *slog.Logger
}

// New checks o and returns its Service.
func New(o Options) (*Service, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("onboard: "+format, a...)) }
	switch {
	case !arsia.ValidAgentID(o.Agent):
		bad("agent %q is not an agent id", o.Agent)
	case o.Signer == nil || o.KID == "":
		bad("no signer")
	case o.Policy == nil:
		bad("no capability policy")
	case o.Record == nil || o.Activate == nil || o.Deactivate == nil || o.Issue == nil:
		bad("Record, Activate, Deactivate and Issue are required")
	case len(o.DiscoveryURLs) == 0:
		bad("no discovery URLs")
	}
	if o.Policy != nil {
		if err := o.Policy.Validate(); err != nil {
			bad("%v", err)
		}
	}
	s := &Service{o: o, log: o.Logger}
	for _, raw := range o.DiscoveryURLs {
		u, err := ParsePrefix(raw)
		if err != nil {
			bad("discovery URL %v", err)
			continue
		}
		s.prefixes = append(s.prefixes, u)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if s.o.FetchTimeout <= 0 {
		s.o.FetchTimeout = 10 * time.Second
	}
	if s.o.MaxInFlight <= 0 {
		s.o.MaxInFlight = 4
	}
	if s.o.MaxBody <= 0 {
		s.o.MaxBody = 1 << 20
	}
	if len(s.o.Algorithms) == 0 {
		s.o.Algorithms = []string{sig.EdDSA}
	}
	if s.o.Now == nil {
		s.o.Now = time.Now
	}
	if s.o.Profile == "" {
		s.o.Profile = "GDPR-STANDARD"
	}
	if s.o.Configured == nil {
		s.o.Configured = func(string) bool { return false }
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var c http.Client
	if o.Client != nil {
		c = *o.Client
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = guard{next: next, allowed: s.allowed}
	c.Timeout = s.o.FetchTimeout
	s.client = &c
	s.slots = make(chan struct{}, s.o.MaxInFlight)
	return s, nil
}

// ParsePrefix reads a discovery URL prefix (onboarding.discovery_urls):
// an absolute URL without user info, query or fragment, https or http to
// a loopback host; its path is made a directory (ends with "/").
func ParsePrefix(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: want an absolute URL without user info, query or fragment", u.Redacted())
	}
	if u.Scheme != "https" && (u.Scheme != "http" || !arsia.IsLoopbackHost(u.Hostname())) {
		return nil, fmt.Errorf("%q: want https (plain http only to localhost)", u.Redacted())
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// allowed reports whether u lies under one of the discovery prefixes:
// the same scheme and host (port included), and a path under the prefix's.
func (s *Service) allowed(u *url.URL) bool {
	if u == nil || u.User != nil {
		return false
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") || strings.Contains(p, "%2e") || strings.Contains(p, "%2E") {
		return false
	}
	for _, pre := range s.prefixes {
		if u.Scheme == pre.Scheme && strings.EqualFold(u.Host, pre.Host) && strings.HasPrefix(p+"/", pre.EscapedPath()) {
			return true
		}
	}
	return false
}

// guard refuses every request, redirects included, outside the prefixes.
type guard struct {
	next    http.RoundTripper
	allowed func(*url.URL) bool
}

func (g guard) RoundTrip(r *http.Request) (*http.Response, error) {
	if !g.allowed(r.URL) {
		return nil, fmt.Errorf("%s is outside the configured discovery URLs", r.URL.Redacted())
	}
	return g.next.RoundTrip(r)
}

// Request is a parsed onboarding request: the envelope (not verified yet)
// and its arguments.
type Request struct {
	Env map[string]any
	// DPoP is the request's DPoP proof header, "" when none.
	DPoP      string
	From, ID  string
	BaseURL   string
	Requested []string
	// Declared is the request's compliance.ai_system_classification, ""
	// when absent; Profile its compliance profile.
	Declared, Profile string
}

// maxRequested caps the capabilities one request may ask for.
const maxRequested = 256

// refusal is an answer to a request that is not (yet) any agent's: an
// unsigned problem with an HTTP status, nothing recorded.
type refusal struct {
	status int
	code   string
	desc   string
	// denial is the onboarding denial reason, when a phase 1 step failed
	// before the agent was authenticated, and step that step.
	denial    string
	step      onboarding.Step
	completed []onboarding.Step
}

func (r *refusal) Error() string { return r.code + ": " + r.desc }

// ParseRequest decodes and checks an onboarding request: a request
// envelope to the gateway of type PayloadTypeRequest whose capabilities
// are those the agent asks for and whose args name its base URL
// (discovery_url), fresh and valid by the envelope rules. Its signature
// is not checked here.
func (s *Service) ParseRequest(body []byte, now time.Time) (*Request, error) {
	bad := func(desc string) error {
		return &refusal{status: http.StatusBadRequest, code: arsia.CodeInvalidRequest, desc: desc}
	}
	env, err := sig.DecodeEnvelope(body)
	if err != nil {
		return nil, bad("The body is not an ARSIA envelope.")
	}
	if issues := arsia.ErrorIssues(arsia.Validate(env, arsia.ValidateOptions{Profiles: s.o.Profiles})); len(issues) > 0 {
		return nil, bad("The envelope is invalid: " + issues[0].Message)
	}
	if e := arsia.CheckFreshness(env, s.o.Profiles, now); e != nil {
		return nil, &refusal{status: http.StatusBadRequest, code: e.Code, desc: e.Description}
	}
	r := &Request{Env: env}
	r.From, _ = env["from"].(string)
	r.ID, _ = env["id"].(string)
	to, _ := env["to"].(string)
	intent, _ := env["intent"].(string)
	caps, _ := env["capabilities"].([]any)
	payload, _ := env["payload"].(map[string]any)
	pt, _ := payload["type"].(string)
	args, _ := payload["args"].(map[string]any)
	switch {
	case to != s.o.Agent:
		return nil, bad("This gateway is " + s.o.Agent + "; the request is addressed to another agent.")
	case intent != string(arsia.IntentRequest):
		return nil, bad("An onboarding request is a request message.")
	case pt != onboarding.PayloadTypeRequest:
		return nil, bad("An onboarding request's payload type is " + onboarding.PayloadTypeRequest + ".")
	case args == nil:
		return nil, bad("payload.args must be an object.")
	}
	r.BaseURL, _ = args["discovery_url"].(string)
	if r.BaseURL == "" {
		return nil, bad("payload.args.discovery_url must be the agent's base URL.")
	}
	if len(caps) > maxRequested {
		return nil, bad(fmt.Sprintf("An onboarding request asks for at most %d capabilities.", maxRequested))
	}
	for _, v := range caps {
		c, _ := v.(string)
		if arsia.IsWildcardCapability(c) {
			return nil, bad("An onboarding request names exact capabilities, not patterns.")
		}
		if !slices.Contains(r.Requested, c) {
			r.Requested = append(r.Requested, c)
		}
	}
	if comp, ok := env["compliance"].(map[string]any); ok {
		r.Declared, _ = comp["ai_system_classification"].(string)
		r.Profile, _ = comp["profile"].(string)
	}
	u, err := url.Parse(r.BaseURL)
	if err != nil || !s.allowed(u) {
		return nil, &refusal{status: http.StatusForbidden, code: arsia.CodeForbidden,
			desc: "The discovery URL is not one this gateway onboards agents from."}
	}
	return r, nil
}

// found is what Phase 1 established.
type found struct {
	meta     *sig.AgentMetadata
	record   *identity.IdentityRecord
	jwks     []byte
	keys     *sig.StaticJWKS
	kid      string
	verified *sig.Verified
	// earliestAudit is the earliest processed_at of the agent's audit
	// records (CHECK-04), "" when unknown.
	earliestAudit string
}

// phase1 runs the six steps of discovery and identity verification in
// order, on t, and authenticates the request with the JWKS fetched (after
// step 5, before the classification is acted on). A refusal names the
// failed step and its denial reason.
func (s *Service) phase1(ctx context.Context, r *Request, t *onboarding.StepTracker) (*found, error) {
	f := &found{}
	fail := func(step onboarding.Step, desc string, cause error) error {
		if cause != nil {
			s.log.InfoContext(ctx, "onboarding: a phase 1 step failed", "agent", r.From, "step", step, "err", cause)
		}
		done := t.Completed()
		if n := len(done); n > 0 && done[n-1] == step {
			done = done[:n-1] // entered, not completed
		}
		return &refusal{status: http.StatusForbidden, code: arsia.CodeForbidden, desc: desc,
			denial: step.DenialReason(), step: step, completed: done}
	}
	enter := func(step onboarding.Step) error {
		if err := t.Enter(step); err != nil {
			return fmt.Errorf("onboard: %w", err)
		}
		return nil
	}
	// 1. discovery
	if err := enter(onboarding.StepFetchDiscovery); err != nil {
		return nil, err
	}
	meta, err := sig.FetchAgentMetadata(ctx, r.BaseURL, r.From,
		&sig.HTTPJWKSOptions{Client: s.client, AllowHTTPInsecure: true, Now: s.o.Now})
	if err != nil {
		return nil, fail(onboarding.StepFetchDiscovery, "The agent's discovery document could not be read, or is not the sender's.", err)
	}
	if meta.ProtocolVersion == "" || meta.Raw["capabilities_supported"] == nil && meta.Raw["capabilities"] == nil {
		return nil, fail(onboarding.StepFetchDiscovery, "The agent's discovery document lacks protocol_version or its capabilities.", nil)
	}
	f.meta = meta
	// 2. identity record
	if err := enter(onboarding.StepFetchIdentityRecord); err != nil {
		return nil, err
	}
	body, sigHeader, err := s.get(ctx, strings.TrimSuffix(r.BaseURL, "/")+"/"+identity.RecordPath, identity.MaxRecordBytes)
	if err == nil {
		f.record, err = identity.ParseIdentityRecord(body)
	}
	if err == nil && f.record.AgentID != r.From {
		err = fmt.Errorf("the identity record is for %s", f.record.AgentID)
	}
	if err != nil {
		return nil, fail(onboarding.StepFetchIdentityRecord, "The agent's identity record could not be read, is invalid, or is not the sender's.", err)
	}
	// 3. JWKS
	if err := enter(onboarding.StepFetchJWKS); err != nil {
		return nil, err
	}
	if f.jwks, _, err = s.get(ctx, meta.JWKS, sig.MaxJWKSBytes); err == nil {
		f.keys, err = sig.ParseStaticJWKS(f.jwks)
	}
	var set jose.JSONWebKeySet
	if err == nil {
		err = json.Unmarshal(f.jwks, &set)
	}
	if err == nil && !slices.ContainsFunc(set.Keys, isEd25519) {
		err = errors.New("no Ed25519 key")
	}
	if err != nil {
		return nil, fail(onboarding.StepFetchJWKS, "The agent's JWKS could not be read or holds no Ed25519 key.", err)
	}
	// 4. the identity record's signature
	if err := enter(onboarding.StepVerifyIdentitySignature); err != nil {
		return nil, err
	}
	signature, err := identity.ParseSignatureHeader(sigHeader)
	if err == nil {
		digest := sha256.Sum256(body)
		err = errors.New("no key of the JWKS verifies it")
		for _, k := range set.Keys {
			if pub, ok := k.Key.(ed25519.PublicKey); ok && isEd25519(k) && ed25519.Verify(pub, digest[:], signature) {
				f.kid, err = k.KeyID, nil
				break
			}
		}
	}
	if err != nil {
		return nil, fail(onboarding.StepVerifyIdentitySignature, "The identity record's X-ARSIA-Sig does not verify with the agent's JWKS.", err)
	}
	// 5. the kid prefix
	if err := enter(onboarding.StepCheckKidPrefix); err != nil {
		return nil, err
	}
	if label, ok := strings.CutPrefix(f.kid, r.From+"#"); !ok || label == "" {
		return nil, fail(onboarding.StepCheckKidPrefix, "The key that signed the identity record is not the agent's (its kid lacks the agent id prefix).", nil)
	}
	// The request is the agent's only if it verifies with a key of the
	// agent's JWKS under its prefix.
	own := sig.KeySourceFunc(func(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
		if !strings.HasPrefix(kid, r.From+"#") {
			return nil, sig.ErrUnknownKid
		}
		return f.keys.Key(ctx, kid)
	})
	if f.verified, err = sig.Verify(ctx, r.Env, own, sig.VerifyOptions{Algorithms: s.o.Algorithms, Now: s.o.Now}); err != nil {
		return nil, &refusal{status: http.StatusUnauthorized, code: arsia.CodeUnauthorized,
			desc: "The request could not be authenticated with the agent's published keys.", completed: t.Completed()}
	}
	// 6. the classification (a decision about an authenticated agent).
	if err := enter(onboarding.StepCheckClassification); err != nil {
		return nil, err
	}
	return f, nil
}

func isEd25519(k jose.JSONWebKey) bool {
	pub, ok := k.Key.(ed25519.PublicKey)
	return ok && len(pub) == ed25519.PublicKeySize && (k.Use == "" || k.Use == "sig")
}

// get fetches u (under the prefixes) and returns its body, at most max
// bytes, and its X-ARSIA-Sig header.
func (s *Service) get(ctx context.Context, u string, max int64) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, "", &statusError{resp.StatusCode}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(body)) > max {
		return nil, "", fmt.Errorf("%s: larger than %d bytes", u, max)
	}
	return body, resp.Header.Get(identity.SignatureHeader), nil
}

type statusError struct{ status int }

func (e *statusError) Error() string { return fmt.Sprintf("status %d", e.status) }
