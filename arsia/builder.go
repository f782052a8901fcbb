package arsia

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/jcs"
)

// DefaultRequestTTL is how long a request or pending approval stays valid
// when BuildOptions.TTL is zero: expires_at = ts + 300 s.
const DefaultRequestTTL = 300 * time.Second

// MaxApprovalWindow bounds a pending approval's deadline after its ts.
const MaxApprovalWindow = 24 * time.Hour

// BuildOptions are the inputs every builder shares. Now is required: the
// builders never read the clock, so that callers (and tests) control time.
type BuildOptions struct {
	// Now is the message time (ts). Required.
	Now time.Time
	// ID is the message id; "" draws a fresh UUID v4 from Rand.
	ID string
	// Rand is the randomness for ID; nil means crypto/rand.
	Rand io.Reader
	// TTL sets expires_at = Now + TTL. Zero means DefaultRequestTTL for
	// request and pending_approval and no expires_at for the other
	// intents.
	TTL time.Duration
	// MinV, when set, is the lowest protocol version the receiver must
	// speak to process the message.
	MinV string
	// PayloadVersion is payload.version, when set.
	PayloadVersion string
	// Context, Idempotency and Compliance are copied into the envelope.
	Context     *Context
	Idempotency *Idempotency
	Compliance  map[string]any
	// Explanation (responses only) becomes payload.explanation; it is
	// checked with ValidateExplanation.
	Explanation any
}

// NewRequest builds a request from one agent to another. payloadType names
// the action (for MCP and A2A carriage use PayloadTypeMCPToolCall or
// PayloadTypeA2ATask and pass the JSON-RPC object, unchanged, as args).
// capabilities must be non-empty, unique and grammatical. args may be nil
// (no args member), a json.RawMessage, or any value encoding/json accepts.
func NewRequest(from, to string, capabilities []string, payloadType string, args any, opts BuildOptions) (*Envelope, error) {
	if err := checkRequestCapabilities(capabilities); err != nil {
		return nil, err
	}
	e, err := newEnvelope(IntentRequest, from, to, "", payloadType, args, opts)
	if err != nil {
		return nil, err
	}
	e.Capabilities = slices.Clone(capabilities)
	return e, nil
}

// NewResponse builds the response to the message correlationID.
// opts.Explanation, when set, becomes payload.explanation.
func NewResponse(from, to, correlationID, payloadType string, result any, opts BuildOptions) (*Envelope, error) {
	e, err := newEnvelope(IntentResponse, from, to, correlationID, payloadType, result, opts)
	if err != nil {
		return nil, err
	}
	if opts.Explanation != nil {
		raw, err := rawJSON(opts.Explanation)
		if err != nil {
			return nil, buildErr("explanation: %v", err)
		}
		generic, err := parseRaw(raw)
		if err != nil {
			return nil, buildErr("explanation: %v", err)
		}
		if issues := ErrorIssues(ValidateExplanation(generic)); len(issues) > 0 {
			return nil, buildErr("explanation: %s", issues[0].Message)
		}
		if ts, ok := generic.(map[string]any)["decision_timestamp"].(string); ok {
			if err := CheckDecisionTimestamp(ts, e.TS); err != nil {
				return nil, buildErr("%v", err)
			}
		}
		e.Payload.Explanation = raw
	}
	return e, nil
}

// NewEvent builds a fire-and-forget event carrying data.
func NewEvent(from, to, payloadType string, data any, opts BuildOptions) (*Envelope, error) {
	return newEnvelope(IntentEvent, from, to, "", payloadType, data, opts)
}

// NewError builds an error message answering correlationID. The payload is
// {type: PayloadTypeError, error: failure.Object()}: the wire code, an
// English description and the details. The details a standard code
// requires (CheckErrorDetails) must be present.
func NewError(from, to, correlationID string, failure *Error, opts BuildOptions) (*Envelope, error) {
	if failure == nil {
		return nil, buildErr("no error to send")
	}
	obj := failure.Object()
	details, _ := obj["details"].(map[string]any)
	if err := CheckErrorDetails(obj["code"].(string), details); err != nil {
		return nil, buildErr("%v", err)
	}
	if !isASCIIPrintable(obj["description"].(string)) {
		return nil, buildErr("error descriptions must be printable ASCII English text")
	}
	return newEnvelope(IntentError, from, to, correlationID, PayloadTypeError, obj, opts)
}

// PendingApproval is the args of a pending_approval message (ARSIA-Actions
// §3.2).
type PendingApproval struct {
	ActionID          string
	OriginalRequestID string
	// ApproverCapability defaults to CapOversightApprove, the only value
	// of v1.0.
	ApproverCapability string
	// Context tells the approver what is being asked (1-1024 chars).
	Context   string
	RiskLevel int
	// Summary (1-1024 chars) is required for arsiaprotocol.assets/
	// actions.
	Summary string
}

var assetsActionRE = regexp.MustCompile(`^arsiaprotocol\.assets/`)

// NewPendingApproval tells the requester that its request (correlationID)
// awaits a human decision. The approval deadline is expires_at = Now + TTL
// (default 300 s) and may not be more than 24 hours away.
func NewPendingApproval(from, to, correlationID string, p PendingApproval, opts BuildOptions) (*Envelope, error) {
	ttl := opts.TTL
	if ttl == 0 {
		ttl = DefaultRequestTTL
	}
	if ttl > MaxApprovalWindow {
		return nil, buildErr("approval deadline more than 24h after ts")
	}
	switch {
	case p.ActionID == "":
		return nil, buildErr("pending approval needs an action_id")
	case !ValidMessageID(p.OriginalRequestID):
		return nil, buildErr("original_request_id %s is not a lowercase UUID v4", pyRepr(p.OriginalRequestID))
	case p.RiskLevel < 1 || p.RiskLevel > MaxRiskLevel:
		return nil, buildErr("risk_level %d is outside 1-10", p.RiskLevel)
	case !lengthBetween(p.Context, 1, 1024):
		return nil, buildErr("context must be 1-1024 characters")
	case p.Summary != "" && !lengthBetween(p.Summary, 1, 1024):
		return nil, buildErr("summary must be 1-1024 characters")
	case p.Summary == "" && assetsActionRE.MatchString(p.ActionID):
		return nil, buildErr("summary is required for %s", p.ActionID)
	}
	approver := p.ApproverCapability
	if approver == "" {
		approver = CapOversightApprove
	}
	args := map[string]any{
		"action_id":           p.ActionID,
		"original_request_id": p.OriginalRequestID,
		"approver_capability": approver,
		"context":             p.Context,
		"risk_level":          p.RiskLevel,
	}
	if p.Summary != "" {
		args["summary"] = p.Summary
	}
	opts.TTL = ttl
	e, err := newEnvelope(IntentPendingApproval, from, to, correlationID, PayloadTypeOversightPending, nil, opts)
	if err != nil {
		return nil, err
	}
	args["approval_deadline"] = e.ExpiresAt
	if e.Payload.Args, err = rawJSON(args); err != nil {
		return nil, buildErr("%v", err)
	}
	return e, nil
}

// Approval decisions.
const (
	DecisionApproved = "approved"
	DecisionDenied   = "denied"
)

// ApprovalDecision is the result of an approval_decision message
// (ARSIA-Actions §3.3).
type ApprovalDecision struct {
	Decision   string // DecisionApproved or DecisionDenied
	ApproverID string
	// Reason (≤512 chars) is recommended for a denial.
	Reason string
	// Conditions attached to an approval; nil omits the member.
	Conditions []string
}

// NewApprovalDecision answers a pending approval (correlationID). The
// envelope's capabilities default to [CapOversightApprove], the capability
// that entitles the sender to decide.
func NewApprovalDecision(from, to, correlationID string, d ApprovalDecision, capabilities []string, opts BuildOptions) (*Envelope, error) {
	switch {
	case d.Decision != DecisionApproved && d.Decision != DecisionDenied:
		return nil, buildErr("decision must be %q or %q", DecisionApproved, DecisionDenied)
	case d.ApproverID == "":
		return nil, buildErr("approval decision needs an approver_id")
	case utf8.RuneCountInString(d.Reason) > 512:
		return nil, buildErr("reason is longer than 512 characters")
	}
	if capabilities == nil {
		capabilities = []string{CapOversightApprove}
	}
	for _, c := range capabilities {
		if err := ValidateCapability(c); err != nil {
			return nil, err
		}
	}
	if len(capabilities) == 0 {
		return nil, buildErr("approval decision needs capabilities")
	}
	result := map[string]any{"decision": d.Decision, "approver_id": d.ApproverID}
	if d.Reason != "" {
		result["reason"] = d.Reason
	}
	if d.Conditions != nil {
		result["conditions"] = slices.Clone(d.Conditions)
	}
	e, err := newEnvelope(IntentApprovalDecision, from, to, correlationID, PayloadTypeOversightDecision, result, opts)
	if err != nil {
		return nil, err
	}
	e.Capabilities = slices.Clone(capabilities)
	return e, nil
}

// NewDecision builds an approval_decision whose payload is of type
// payloadType with result as its result, for decisions of other modules
// than oversight (the onboarding decision, ARSIA-Identity §7.6): no
// approver_id is added. capabilities must be non-empty and grammatical.
func NewDecision(from, to, correlationID, payloadType string, result any, capabilities []string, opts BuildOptions) (*Envelope, error) {
	if len(capabilities) == 0 {
		return nil, buildErr("approval decision needs capabilities")
	}
	for _, c := range capabilities {
		if err := ValidateCapability(c); err != nil {
			return nil, err
		}
	}
	e, err := newEnvelope(IntentApprovalDecision, from, to, correlationID, payloadType, result, opts)
	if err != nil {
		return nil, err
	}
	e.Capabilities = slices.Clone(capabilities)
	return e, nil
}

func buildErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidBuild, fmt.Sprintf(format, args...))
}

func checkRequestCapabilities(caps []string) error {
	if len(caps) == 0 {
		return buildErr("a request needs at least one capability")
	}
	for i, c := range caps {
		if err := ValidateCapability(c); err != nil {
			return err
		}
		if IsWildcardCapability(c) {
			return buildErr("a request names concrete capabilities, not %s", pyRepr(c))
		}
		if slices.Contains(caps[:i], c) {
			return buildErr("capability %s is listed twice", pyRepr(c))
		}
	}
	return nil
}

// newEnvelope fills the members every builder shares and puts content in
// the intent's content member.
func newEnvelope(intent Intent, from, to, correlationID, payloadType string, content any, opts BuildOptions) (*Envelope, error) {
	if opts.Now.IsZero() {
		return nil, ErrNoClock
	}
	if y := opts.Now.UTC().Year(); y < 1 || y > 9999 {
		return nil, buildErr("time %v cannot be written as a timestamp", opts.Now)
	}
	if _, err := ParseAgentID(from); err != nil {
		return nil, buildErr("from: %v", err)
	}
	if _, err := ParseAgentID(to); err != nil {
		return nil, buildErr("to: %v", err)
	}
	if !ValidPayloadType(payloadType) {
		return nil, buildErr("payload type %s is not valid", pyRepr(payloadType))
	}
	needsCorrelation := intent != IntentRequest && intent != IntentEvent
	switch {
	case needsCorrelation && !ValidMessageID(strings.ToLower(correlationID)):
		return nil, buildErr("correlation_id %s is not a UUID v4", pyRepr(correlationID))
	case !needsCorrelation && correlationID != "":
		return nil, buildErr("a %s has no correlation_id", intent)
	}
	if opts.MinV != "" {
		if _, err := ParseVersion(opts.MinV); err != nil {
			return nil, buildErr("min_v: %v", err)
		}
	}
	if opts.PayloadVersion != "" {
		if _, err := ParseVersion(opts.PayloadVersion); err != nil {
			return nil, buildErr("payload version: %v", err)
		}
	}
	id := opts.ID
	if id == "" {
		var err error
		if opts.Rand == nil {
			id = NewID()
		} else if id, err = newIDFrom(opts.Rand); err != nil {
			return nil, buildErr("id: %v", err)
		}
	} else if !ValidMessageID(id) {
		return nil, buildErr("id %s is not a lowercase UUID v4", pyRepr(id))
	}
	e := &Envelope{
		V:             ProtocolVersion,
		ID:            id,
		TS:            FormatTimestamp(opts.Now),
		From:          from,
		To:            to,
		Intent:        intent,
		CorrelationID: correlationID,
		MinV:          opts.MinV,
		Payload:       &Payload{Type: payloadType, Version: opts.PayloadVersion},
	}
	ttl := opts.TTL
	if ttl == 0 && (intent == IntentRequest || intent == IntentPendingApproval) {
		ttl = DefaultRequestTTL
	}
	if ttl < 0 {
		return nil, buildErr("negative TTL")
	}
	if ttl > 0 {
		// Whole milliseconds, so that expires_at - ts is exactly the TTL.
		if ttl < time.Millisecond {
			return nil, buildErr("TTL below one millisecond")
		}
		e.ExpiresAt = FormatTimestamp(opts.Now.Truncate(time.Millisecond).Add(ttl))
	}
	if content != nil {
		raw, err := rawJSON(content)
		if err != nil {
			return nil, buildErr("%s: %v", intent.ContentField(), err)
		}
		switch intent.ContentField() {
		case "args":
			e.Payload.Args = raw
		case "result":
			e.Payload.Result = raw
		case "data":
			e.Payload.Data = raw
		case "error":
			e.Payload.Error = raw
		}
	}
	if opts.Context != nil {
		c := *opts.Context
		c.Extra = maps.Clone(c.Extra)
		e.Context = &c
	}
	if opts.Idempotency != nil {
		i := *opts.Idempotency
		i.Extra = maps.Clone(i.Extra)
		e.Idempotency = &i
	}
	if opts.Compliance != nil {
		e.Compliance = maps.Clone(opts.Compliance)
	}
	return e, nil
}

// parseRaw decodes raw JSON strictly into the generic form.
func parseRaw(raw json.RawMessage) (any, error) { return jcs.Decode(raw) }

func lengthBetween(s string, lo, hi int) bool {
	n := utf8.RuneCountInString(s)
	return n >= lo && n <= hi
}

func isASCIIPrintable(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
