package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/internal/jsonx"
	"github.com/custos-runtime/custos/internal/limits"
	"github.com/custos-runtime/custos/jcs"
)

// Limits on what Action accepts. They are chosen so that an AAIS request
// carrying the action always fits aais' own limits: the arguments object sits
// three levels below the message root (message, request, action), and a
// request also carries an origin, risk and choices next to the action.
const (
	// MaxArgumentsSize caps the arguments object in bytes.
	MaxArgumentsSize = limits.ArgumentsBytes
	// MaxArgumentsDepth caps the nesting of the arguments object (the object
	// itself is depth 1).
	MaxArgumentsDepth = aais.DefaultMaxDepth - 3
)

// Limits of the AAIS action schema (aais-1.0.schema.json, $defs/action and
// $defs/risk), checked here so that a bad descriptor gets a precise error.
const (
	maxIDLen          = 200
	maxSummaryLen     = 1000
	maxResourceLen    = 4096
	maxEffects        = 100
	maxEffectLen      = 1000
	maxRiskReasons    = 20
	maxRiskReasonLen  = 1000
	defaultRiskReason = "Assessed by the handler's configuration"
)

// Sentinel errors. Every error this package returns wraps one of them or is
// an *asc.Error from a handler, so callers test with errors.Is; errors that
// end a call also carry an ASC status (asc.FromError, asc.CodeOf).
var (
	// ErrStale: the action about to run is not the one that was approved.
	// Nothing ran. The ASC status is 4001 FAILED_PRECONDITION.
	ErrStale = errors.New("handler: action changed since approval (stale)")
	// ErrInvalidCall: the call cannot be described as an AAIS action (its
	// arguments are not one strict I-JSON object, or its capability is not
	// a concrete capability name). The ASC status is 4000 INVALID_REQUEST.
	ErrInvalidCall = errors.New("handler: invalid call")
	// ErrInvalidDescriptor: a handler described a call in a way AAIS cannot
	// carry. It is a defect of the handler or its configuration: the ASC
	// status is 6001 INTERNAL_ERROR.
	ErrInvalidDescriptor = errors.New("handler: invalid descriptor")
	// ErrInvalidResult: a handler returned a result that is not a JSON
	// object. The ASC status is 6001 INTERNAL_ERROR.
	ErrInvalidResult = errors.New("handler: invalid result")
	// ErrConfig: a built-in handler's configuration was refused by its
	// constructor.
	ErrConfig = errors.New("handler: invalid configuration")
)

// Call is one capability invocation the gateway is about to run, taken from
// a verified, validated and authorized ARSIA request.
//
// Only Capability and Args enter the action digest (together with the
// handler's Descriptor); the other fields identify the message and are passed
// to the upstream for correlation.
type Call struct {
	// Capability is the ARSIA capability being invoked, such as
	// "billing.invoice.create". It becomes the AAIS action name.
	Capability string
	// PayloadType is the request's payload type; built-ins answer with the
	// same type.
	PayloadType string
	// Args is the exact arguments object as received. It must be one JSON
	// object; it is hashed and forwarded as given.
	Args json.RawMessage
	// From and To are the sender and recipient agent ids.
	From, To string
	// MessageID is the request's message id; CorrelationID the id a
	// response must correlate to, when the request carried one; TraceID a
	// W3C trace id (32 lower-case hex digits) when known.
	MessageID, CorrelationID, TraceID string
	// IdempotencyKey is the request's idempotency key, when it had one.
	// The HTTP handler forwards it as Idempotency-Key.
	IdempotencyKey string
	// ExplanationRequired says that the request's effective compliance
	// profile requires an explanation with the result (ARSIA-Actions §5.2,
	// explainability_required). The HTTP handler tells its upstream with
	// the header ExplanationRequiredHeader: true.
	ExplanationRequired bool
	// Compliance is the request's compliance object as received (nil
	// when it had none) and Timestamp its ts, for handlers whose rules
	// depend on them (the state handler: legal basis, residency,
	// retention, audit records). Neither enters the action digest; a
	// call resumed after an approval carries them from the approval
	// request's exchange extension.
	Compliance map[string]any
	Timestamp  string
}

// ExplanationRequiredHeader is the request header by which the HTTP
// handler tells its upstream that the result must come with an
// explanation (ExplanationHeader).
const ExplanationRequiredHeader = "X-Custos-Explanation-Required"

// Descriptor says what running a call does, for the reviewer and the audit.
// Everything in it except Risk and RiskReasons is part of the hashed action,
// so a handler must derive it only from its configuration and the call: the
// same configuration and call must always give the same Descriptor, and a
// configuration change that changes what runs must change the Descriptor.
type Descriptor struct {
	// Kind is the AAIS action kind: "http.request", "process.exec",
	// "echo", ...
	Kind string
	// Summary is a one-line description for the reviewer. "" means Action
	// writes one from Kind, the capability and Resource.
	Summary string
	// Resource is what the call acts on: the upstream URL, the command's
	// absolute path. "" means none.
	Resource string
	// WorkingDirectory is where a process runs. "" means none.
	WorkingDirectory string
	// Effects are human-readable expected effects. They are advisory, but
	// hashed: changing them makes an approval stale.
	Effects []string
	// Risk is the advisory risk level for the AAIS request; RiskReasons
	// say why (AAIS requires 1 to 20). Neither is part of the action.
	Risk        aais.RiskLevel
	RiskReasons []string
	// RequiredApprovals is the required_approvals of the call's ARSIA
	// action descriptor: how many distinct reviewers must approve it (0
	// or 1: one). The gateway takes the larger of it and its configured
	// quorum. It is not part of the action.
	RequiredApprovals int
}

// AAISRisk returns the risk block of an AAIS request for d. When d has no
// reasons, a generic one is supplied because AAIS requires at least one.
func (d Descriptor) AAISRisk() aais.Risk {
	reasons := append([]string(nil), d.RiskReasons...)
	if len(reasons) == 0 {
		reasons = []string{defaultRiskReason}
	}
	return aais.Risk{Level: d.Risk, Reasons: reasons}
}

// Result is what a handler returns on success.
type Result struct {
	// PayloadType is the payload type of the ARSIA response.
	PayloadType string
	// Data is the result: one JSON object.
	Data json.RawMessage
	// Explanation, when the upstream gave one, is the ARSIA explanation
	// of the result (ARSIA-Actions §5.2: reasoning, confidence,
	// inputs_used, ...), for the response's payload.explanation: an HTTP
	// upstream's ExplanationHeader, an MCP tool result's _meta member
	// ExplanationMeta, the same member of an A2A agent's message, task
	// or artifact metadata, what an exec program wrote to the file
	// ExplanationFileEnv names. Run and Dispatch drop one that is not a
	// valid explanation and say why in ExplanationIssue.
	Explanation json.RawMessage
	// ExplanationIssue says why the upstream's explanation was dropped.
	ExplanationIssue string
	// Null makes the result JSON null instead of Data, which must then
	// be empty (ARSIA-State: GET of a key that does not exist).
	Null bool
	// Audit, when set, is added to the details of the call's execution
	// record in the audit log (the state handler's ARSIA-State audit
	// record). It must not hold secrets or personal data.
	Audit map[string]any
}

// ARSIAError is a handler failure answered to the sender as its ARSIA
// error, code, description and details as they are (a state conflict's
// {current_version, expected_version}), instead of the generic words of
// its ASC status. Only handlers whose errors are written for the sender
// (never an upstream's text) return one. Unwrap gives its ASC error
// (arsia.Error.AsASCScope), so asc.FromError finds the status.
type ARSIAError struct {
	E   *arsia.Error
	asc *asc.Error
}

// NewARSIAError returns the failure that answers e.
func NewARSIAError(e *arsia.Error) *ARSIAError {
	return &ARSIAError{E: e, asc: e.AsASCScope(asc.ScopeToolCall)}
}

func (e *ARSIAError) Error() string { return e.E.Error() }

// Unwrap returns the ASC error reporting E.
func (e *ARSIAError) Unwrap() error { return e.asc }

// ExplanationHeader is the response header in which an HTTP upstream may
// give the ARSIA explanation of its result, as one JSON object.
const ExplanationHeader = "X-Custos-Explanation"

// ExplanationMeta is the member of an MCP tool result's _meta, or of an
// A2A message's, task's or artifact's metadata, in which the tool or agent
// may give the ARSIA explanation of its result.
const ExplanationMeta = "arsia/explanation"

// checkExplanation keeps res.Explanation only when it is one JSON object
// that ValidateExplanation accepts.
func checkExplanation(res *Result) {
	if len(res.Explanation) == 0 {
		return
	}
	var v any
	if err := checkObject(res.Explanation, arsia.MaxReasoningLength*8); err != nil {
		res.ExplanationIssue = "not one JSON object: " + err.Error()
	} else if err := json.Unmarshal(res.Explanation, &v); err != nil {
		res.ExplanationIssue = err.Error()
	} else if issues := arsia.ErrorIssues(arsia.ValidateExplanation(v)); len(issues) > 0 {
		res.ExplanationIssue = issues[0].Pointer + ": " + issues[0].Message
	}
	if res.ExplanationIssue != "" {
		res.Explanation = nil
	}
}

// Handler executes calls of the capabilities it is configured for.
//
// Describe must be a pure function of the handler's configuration and the
// call: Dispatch calls it again immediately before Execute and compares the
// digest of the resulting action with the approved one.
//
// Execute runs the call. Its errors should be (or wrap) an *asc.Error
// carrying the status to report, with a retry contract that says what is
// known about side effects; any other error is reported by Dispatch as 6001
// INTERNAL_ERROR. Execute must honour ctx.
type Handler interface {
	Describe(c Call) (Descriptor, error)
	Execute(ctx context.Context, c Call) (Result, error)
}

// Action builds the AAIS action for c as d describes it, and its digest
// (aais.ActionDigest). The action is the compact JSON object
//
//	{"kind":K,"name":CAPABILITY,"summary":S,"arguments":ARGS,
//	 "resource":R,"working_directory":W,"effects":[...]}
//
// where ARGS is c.Args byte for byte except for insignificant whitespace
// (removed, as aais does with every action it keeps: member order, number
// literals and string escapes stay), resource and working_directory are
// omitted when empty, and effects is always present ([] when there are none,
// so that nil and empty cannot give two digests). The same call and
// descriptor always give the same bytes, and the bytes are exactly those an
// aais.Request built from them carries (aais.Action.Raw).
//
// c.Args must be one JSON object that jcs decodes strictly (no duplicate
// member names, valid UTF-8, interoperable numbers) within MaxArgumentsSize
// and MaxArgumentsDepth; otherwise the error wraps ErrInvalidCall and
// carries 4000 INVALID_REQUEST. A descriptor AAIS cannot carry gives an
// error wrapping ErrInvalidDescriptor (6001 INTERNAL_ERROR).
func Action(c Call, d Descriptor) (action json.RawMessage, digest string, err error) {
	args, err := compactArguments(c.Args)
	if err != nil {
		return nil, "", err
	}
	if err := checkCapability(c.Capability); err != nil {
		return nil, "", err
	}
	if err := checkDescriptor(d); err != nil {
		return nil, "", err
	}
	summary := d.Summary
	if summary == "" {
		summary = defaultSummary(c.Capability, d)
	}

	b := make([]byte, 0, len(args)+256)
	b = append(b, `{"kind":`...)
	b = appendString(b, d.Kind)
	b = append(b, `,"name":`...)
	b = appendString(b, c.Capability)
	b = append(b, `,"summary":`...)
	b = appendString(b, summary)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	if d.Resource != "" {
		b = append(b, `,"resource":`...)
		b = appendString(b, d.Resource)
	}
	if d.WorkingDirectory != "" {
		b = append(b, `,"working_directory":`...)
		b = appendString(b, d.WorkingDirectory)
	}
	b = append(b, `,"effects":[`...)
	for i, e := range d.Effects {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, e)
	}
	b = append(b, "]}"...)

	// aais checks the action against the AAIS action schema; whatever it
	// still refuses is the descriptor's fault, the arguments having passed.
	a, err := aais.NewAction(json.RawMessage(b))
	if err != nil {
		return nil, "", descriptorError("%v", err)
	}
	digest, err = a.Digest()
	if err != nil {
		return nil, "", descriptorError("%v", err)
	}
	return a.Raw(), digest, nil
}

// Check reports whether Action would accept c and d, without building the
// action or its digest: for a call that needs no approval, which has no
// approved action to match (see Run). Its errors are Action's.
func Check(c Call, d Descriptor) error {
	if _, err := compactArguments(c.Args); err != nil {
		return err
	}
	if err := checkCapability(c.Capability); err != nil {
		return err
	}
	return checkDescriptor(d)
}

// Run runs c with h, for a call that needs no approval (Check admitted
// it), and checks that the result's Data is one JSON object. Its errors
// carry an ASC status, as Dispatch's do. A call that was approved runs
// through Dispatch, never Run.
func Run(ctx context.Context, h Handler, c Call) (Result, error) {
	if h == nil {
		return Result{}, asc.Errorf(asc.InternalError, asc.ScopeToolCall, "handler: no handler")
	}
	return execute(ctx, h, c)
}

func execute(ctx context.Context, h Handler, c Call) (Result, error) {
	res, err := h.Execute(ctx, c)
	if err != nil {
		return Result{}, ensureASC(err, asc.InternalError)
	}
	if res.Null {
		if len(res.Data) != 0 {
			return Result{}, asc.Errorf(asc.InternalError, asc.ScopeToolCall, "%w: a null result with data", ErrInvalidResult)
		}
		checkExplanation(&res)
		return res, nil
	}
	if err := checkObject(res.Data, jcs.DefaultMaxSize); err != nil {
		return Result{}, asc.Errorf(asc.InternalError, asc.ScopeToolCall, "%w: %v", ErrInvalidResult, err)
	}
	checkExplanation(&res)
	return res, nil
}

// Dispatch runs c with h if, and only if, the action h describes for c now
// is the approved one. It calls h.Describe, builds the action (Action) and
// compares its digest with approvedDigest; when they differ, or the digest
// cannot be computed, nothing runs and the error wraps ErrStale with the ASC
// status 4001 FAILED_PRECONDITION (the approval no longer holds; ask again).
// Otherwise it returns h.Execute's result, after checking that Data is one
// JSON object.
//
// Every error Dispatch returns carries an ASC status: a handler error that
// is not an *asc.Error is wrapped as 6001 INTERNAL_ERROR.
//
// approvedDigest is the action_digest of the AAIS request that was
// approved.
func Dispatch(ctx context.Context, h Handler, c Call, approvedDigest string) (Result, error) {
	if h == nil {
		return Result{}, asc.Errorf(asc.InternalError, asc.ScopeToolCall, "handler: no handler")
	}
	if !jcs.IsDigest(approvedDigest) {
		return Result{}, staleError("the approved digest %q is not a sha256 digest", approvedDigest)
	}
	d, err := h.Describe(c)
	if err != nil {
		return Result{}, ensureASC(err, asc.InternalError)
	}
	_, digest, err := Action(c, d)
	if err != nil {
		// The call was approved, so it could be described then: whatever
		// fails now means the action that would run is not that one.
		return Result{}, staleError("the action cannot be rebuilt: %v", err)
	}
	if digest != approvedDigest {
		return Result{}, staleError("the action about to run has digest %s, the approved one is %s", digest, approvedDigest)
	}
	return execute(ctx, h, c)
}

func staleError(format string, args ...any) error {
	e := asc.Errorf(asc.FailedPrecondition, asc.ScopeToolCall, "%w: "+format, append([]any{ErrStale}, args...)...)
	e.Envelope.Retry = &asc.Retry{SideEffectState: asc.SideEffectNone}
	return e
}

func descriptorError(format string, args ...any) error {
	return asc.Errorf(asc.InternalError, asc.ScopeToolCall, "%w: "+format, append([]any{ErrInvalidDescriptor}, args...)...)
}

func callError(format string, args ...any) error {
	return asc.Errorf(asc.InvalidRequest, asc.ScopeToolCall, "%w: "+format, append([]any{ErrInvalidCall}, args...)...)
}

// ensureASC returns err if an *asc.Error is in its chain, else err wrapped
// as code.
func ensureASC(err error, code asc.Code) error {
	var ae *asc.Error
	if errors.As(err, &ae) {
		return err
	}
	return asc.Wrap(err, code, asc.ScopeToolCall)
}

var argsLimits = &jcs.Options{MaxSize: MaxArgumentsSize, MaxDepth: MaxArgumentsDepth}

// compactArguments decodes args strictly, checks it is an object and returns
// it with insignificant whitespace removed.
func compactArguments(args json.RawMessage) ([]byte, error) {
	v, err := argsLimits.Decode(args)
	if err != nil {
		return nil, callError("arguments: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, callError("arguments must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return nil, callError("arguments: %v", err)
	}
	return buf.Bytes(), nil
}

// checkObject reports whether data is one JSON object jcs decodes strictly
// within maxSize bytes.
func checkObject(data []byte, maxSize int) error {
	v, err := (&jcs.Options{MaxSize: maxSize}).Decode(data)
	if err != nil {
		return err
	}
	if _, ok := v.(map[string]any); !ok {
		return errors.New("not a JSON object")
	}
	return nil
}

func checkCapability(c string) error {
	if err := arsia.ValidateCapability(c); err != nil {
		return callError("capability: %v", err)
	}
	if arsia.IsWildcardCapability(c) {
		return callError("capability %q is a wildcard, not one capability", c)
	}
	if len(c) > maxIDLen {
		return callError("capability is longer than %d bytes", maxIDLen)
	}
	return nil
}

func checkDescriptor(d Descriptor) error {
	if !validID(d.Kind) {
		return descriptorError("kind %q is not an AAIS identifier", d.Kind)
	}
	if err := checkText("summary", d.Summary, 0, maxSummaryLen); err != nil {
		return err
	}
	if err := checkText("resource", d.Resource, 0, maxResourceLen); err != nil {
		return err
	}
	if err := checkText("working directory", d.WorkingDirectory, 0, maxResourceLen); err != nil {
		return err
	}
	if len(d.Effects) > maxEffects {
		return descriptorError("more than %d effects", maxEffects)
	}
	for i, e := range d.Effects {
		if err := checkText(fmt.Sprintf("effect %d", i), e, 1, maxEffectLen); err != nil {
			return err
		}
	}
	switch d.Risk {
	case aais.RiskLow, aais.RiskMedium, aais.RiskHigh, aais.RiskCritical:
	default:
		return descriptorError("risk level %q is not low, medium, high or critical", d.Risk)
	}
	if len(d.RiskReasons) > maxRiskReasons {
		return descriptorError("more than %d risk reasons", maxRiskReasons)
	}
	for i, r := range d.RiskReasons {
		if err := checkText(fmt.Sprintf("risk reason %d", i), r, 1, maxRiskReasonLen); err != nil {
			return err
		}
	}
	return nil
}

// checkText checks a string member: valid UTF-8 (encoding/json would
// silently replace invalid bytes, changing what is hashed) and a length in
// characters, as JSON Schema counts it. lo 0 means the member may be absent.
func checkText(what, s string, lo, hi int) error {
	if !utf8.ValidString(s) {
		return descriptorError("%s is not valid UTF-8", what)
	}
	n := utf8.RuneCountInString(s)
	if n < lo || n > hi {
		return descriptorError("%s must be %d to %d characters", what, max(lo, 1), hi)
	}
	return nil
}

// validID applies the AAIS id pattern ^[A-Za-z0-9][A-Za-z0-9._:-]*$, 1..200.
func validID(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
		case i > 0 && (ch == '.' || ch == '_' || ch == ':' || ch == '-'):
		default:
			return false
		}
	}
	return true
}

func defaultSummary(capability string, d Descriptor) string {
	s := capability + " (" + d.Kind + ")"
	if d.Resource != "" {
		s += " on " + d.Resource
	}
	return truncateRunes(s, maxSummaryLen)
}

// truncateRunes cuts s to at most n characters, marking a cut with "…".
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// appendString appends s as a JSON string without HTML escaping, so the
// action reads as the reviewer would expect ("<", ">" and "&" stay). The
// digest is over the canonical form and does not depend on escaping.
func appendString(b []byte, s string) []byte { return jsonx.AppendString(b, s) }

// handlerLimits checks a built-in's timeout and size cap and applies their
// defaults (DefaultTimeout, DefaultMaxResponseBytes); name is the size
// field, for the error.
func handlerLimits(timeout time.Duration, max int64, name string) (time.Duration, int64, error) {
	if timeout < 0 {
		return 0, 0, fmt.Errorf("%w: negative timeout", ErrConfig)
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if max < 0 || max > MaxResponseBytesLimit {
		return 0, 0, fmt.Errorf("%w: %s must be 0 to %d", ErrConfig, name, MaxResponseBytesLimit)
	}
	if max == 0 {
		max = DefaultMaxResponseBytes
	}
	return timeout, max, nil
}
