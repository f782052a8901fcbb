package arsia

import (
	"strconv"
	"strings"

	"github.com/custos-runtime/custos/asc"
)

// codeMapping says, for one code, what to answer on the ARSIA wire and which
// ASC status reports it. The table is documented in docs/arsia-errors.md;
// keep the two in step.
type codeMapping struct {
	wire string
	asc  asc.Code
}

// wireMappings covers the 14 standard codes.
var wireMappings = map[string]asc.Code{
	CodeInvalidRequest: asc.InvalidRequest,
	// A missing or bad credential: the caller must (re)authenticate. A
	// failed signature is reported with an internal code (signature_*)
	// that maps to 7005 while the wire still says unauthorized.
	CodeUnauthorized:       asc.AuthenticationRequired,
	CodeForbidden:          asc.PermissionDenied,
	CodeNotFound:           asc.NotFound,
	CodeConflict:           asc.Conflict,
	CodePayloadTooLarge:    asc.InvalidRequest,
	CodeRateLimited:        asc.RateLimited,
	CodeInternalError:      asc.InternalError,
	CodeNotImplemented:     asc.UnsupportedCapability,
	CodeServiceUnavailable: asc.DependencyUnavailable,
	CodeCertificateInvalid: asc.IntegrityCheckFailed,
	CodeCertificateExpired: asc.IntegrityCheckFailed,
	CodeKeyMismatch:        asc.IntegrityCheckFailed,
	CodeCertificateRevoked: asc.IntegrityCheckFailed,
}

// internalMappings covers the internal (non-wire) validation codes by exact
// name.
var internalMappings = map[string]codeMapping{
	// Envelope structure (L1) and pre-checks.
	"schema_violation":      {CodeInvalidRequest, asc.InvalidRequest},
	"invalid_envelope_type": {CodeInvalidRequest, asc.InvalidRequest},
	"encrypted_payload":     {CodeInvalidRequest, asc.InvalidRequest},

	// L2 semantics (ValidateSemantic).
	"invalid_from_agent_id":               {CodeInvalidRequest, asc.InvalidRequest},
	"invalid_to_agent_id":                 {CodeInvalidRequest, asc.InvalidRequest},
	"invalid_intent":                      {CodeInvalidRequest, asc.InvalidRequest},
	"unsupported_min_v":                   {CodeNotImplemented, asc.UnsupportedCapability},
	"unsupported_protocol_version":        {CodeNotImplemented, asc.UnsupportedCapability},
	"missing_expires_at":                  {CodeInvalidRequest, asc.InvalidRequest},
	"missing_capabilities":                {CodeInvalidRequest, asc.InvalidRequest},
	"empty_capabilities":                  {CodeInvalidRequest, asc.InvalidRequest},
	"duplicate_capabilities":              {CodeInvalidRequest, asc.InvalidRequest},
	"invalid_capability_format":           {CodeInvalidRequest, asc.InvalidRequest},
	"missing_correlation_id":              {CodeInvalidRequest, asc.InvalidRequest},
	"missing_error_payload":               {CodeInvalidRequest, asc.InvalidRequest},
	"missing_error_object":                {CodeInvalidRequest, asc.InvalidRequest},
	"missing_error_code":                  {CodeInvalidRequest, asc.InvalidRequest},
	"missing_error_description":           {CodeInvalidRequest, asc.InvalidRequest},
	"unrecognised_payload_type":           {CodeNotImplemented, asc.UnsupportedCapability},
	"expires_at_not_after_ts":             {CodeInvalidRequest, asc.InvalidRequest},
	"idempotency_expires_at_not_after_ts": {CodeInvalidRequest, asc.InvalidRequest},
	"idempotency_key_invalid_char":        {CodeInvalidRequest, asc.InvalidRequest},
	// The kid names a key of another agent, or the signature cannot be
	// decoded: the message is refused as unauthenticated (Core §5.2), and
	// what failed is the integrity binding.
	"kid_prefix_mismatch":  {CodeUnauthorized, asc.IntegrityCheckFailed},
	"invalid_sig_encoding": {CodeUnauthorized, asc.IntegrityCheckFailed},

	// Capabilities (ARSIA-Actions §1).
	"empty_capability":           {CodeInvalidRequest, asc.InvalidRequest},
	"capability_too_long":        {CodeInvalidRequest, asc.InvalidRequest},
	"invalid_capability_grammar": {CodeInvalidRequest, asc.InvalidRequest},
	"reserved_prefix_misuse":     {CodeInvalidRequest, asc.InvalidRequest},
	"no_effective_capabilities":  {CodeForbidden, asc.PermissionDenied},

	// Actions.
	"risk_34_audit_recommended":         {CodeInvalidRequest, asc.InvalidRequest},
	"invalid_risk_level":                {CodeInvalidRequest, asc.InvalidRequest},
	"decision_timestamp_after_envelope": {CodeInvalidRequest, asc.InvalidRequest},
	"oversight_timeout":                 {CodeForbidden, asc.Timeout},

	// Compliance rules R1-R7 (Core §4.3.8). R6 is a policy refusal, the
	// others say the compliance block is incomplete or malformed.
	"unknown_profile":           {CodeInvalidRequest, asc.InvalidRequest},
	"missing_legal_basis":       {CodeInvalidRequest, asc.InvalidRequest},
	"missing_human_oversight":   {CodeInvalidRequest, asc.InvalidRequest},
	"missing_profile":           {CodeInvalidRequest, asc.InvalidRequest},
	"insufficient_retention":    {CodeInvalidRequest, asc.InvalidRequest},
	"invalid_data_residency":    {CodeInvalidRequest, asc.InvalidRequest},
	"classification_escalation": {CodeForbidden, asc.GuardrailBlocked},

	// Routing (ARSIA-Routing). No broker serves the zone: the residency
	// policy cannot be met now (503 on the wire, dependency unavailable).
	// A broker entry that is itself wrong is an invalid configuration.
	"zone_not_served":              {CodeServiceUnavailable, asc.DependencyUnavailable},
	"eu_jurisdiction_required":     {CodeInvalidRequest, asc.InvalidRequest},
	"zone_jurisdiction_mismatch":   {CodeInvalidRequest, asc.InvalidRequest},
	"eu_zone_non_eea_jurisdiction": {CodeInvalidRequest, asc.InvalidRequest},
	"invalid_broker_agent_id":      {CodeInvalidRequest, asc.InvalidRequest},
	"invalid_expires_at":           {CodeInvalidRequest, asc.InvalidRequest},
	"expiry_too_soon":              {CodeServiceUnavailable, asc.FailedPrecondition},

	// Freshness (CheckFreshness, Core §4.2.2 and §8.3): the wire code
	// ARSIA and its vectors give is invalid_request.
	IssueMessageExpired:    {CodeInvalidRequest, asc.InvalidRequest},
	IssueClockSkewExceeded: {CodeInvalidRequest, asc.InvalidRequest},
}

// prefixMappings covers code families by prefix, longest first.
var prefixMappings = []struct {
	prefix string
	m      codeMapping
}{
	{"token_scope", codeMapping{CodeForbidden, asc.PermissionDenied}},
	{"token_", codeMapping{CodeUnauthorized, asc.AuthenticationRequired}},
	{"dpop_", codeMapping{CodeUnauthorized, asc.AuthenticationRequired}},
	{"signature_", codeMapping{CodeUnauthorized, asc.IntegrityCheckFailed}},
	{"decryption_", codeMapping{CodeUnauthorized, asc.IntegrityCheckFailed}},
	{"jwe_", codeMapping{CodeUnauthorized, asc.IntegrityCheckFailed}},
	{"jwks_", codeMapping{CodeUnauthorized, asc.IntegrityCheckFailed}},
	{"unknown_kid", codeMapping{CodeUnauthorized, asc.IntegrityCheckFailed}},
	{"certificate_", codeMapping{CodeUnauthorized, asc.IntegrityCheckFailed}},
	{"idempotency_in_progress", codeMapping{CodeConflict, asc.Conflict}},
	{"idempotency_", codeMapping{CodeInvalidRequest, asc.InvalidRequest}},
	{"missing_", codeMapping{CodeInvalidRequest, asc.InvalidRequest}},
	{"invalid_", codeMapping{CodeInvalidRequest, asc.InvalidRequest}},
}

func lookupMapping(code string) (codeMapping, bool) {
	if a, ok := wireMappings[code]; ok {
		return codeMapping{code, a}, true
	}
	if m, ok := internalMappings[code]; ok {
		return m, true
	}
	for _, p := range prefixMappings {
		if strings.HasPrefix(code, p.prefix) {
			return p.m, true
		}
	}
	return codeMapping{}, false
}

// WireCode returns the payload.error.code to answer with for code: the code
// itself for a standard or custom code, the mapped standard code for an
// internal validation code, and internal_error for anything else (fail
// closed: an unknown condition is never reported as success or as the
// peer's fault).
func WireCode(code string) string {
	if IsCustomErrorCode(code) {
		return code
	}
	if m, ok := lookupMapping(code); ok {
		return m.wire
	}
	return CodeInternalError
}

// ToASC maps an ARSIA code (standard, internal or custom) to the ASC status
// that reports it; docs/arsia-errors.md has the table. A custom
// reverse-domain code, whose meaning only its owner knows, and any unknown
// code map to 6000 FATAL_ERROR: terminal, without claiming a defect of our
// own (6001) or that a retry could help (5xxx).
func ToASC(code string) asc.Code {
	if m, ok := lookupMapping(code); ok {
		return m.asc
	}
	return asc.FatalError
}

// ErrorDetailsKey is the reverse-domain key under which AsASC puts the ARSIA
// code and details in the ASC envelope's details.
const ErrorDetailsKey = "org.arsiaprotocol.error"

// AsASC builds the ASC error that reports e for scope task: the code from
// ToASC, the English description as the developer message and, under
// details[ErrorDetailsKey], the ARSIA code, wire code and details. The Go
// cause (e.Err) stays out of the envelope. A nil e yields nil.
func (e *Error) AsASC() *asc.Error {
	return e.AsASCScope(asc.ScopeTask)
}

// AsASCScope is AsASC for another ASC scope.
func (e *Error) AsASCScope(scope asc.Scope) *asc.Error {
	if e == nil {
		return nil
	}
	ae := asc.Wrap(e, ToASC(e.Code), scope)
	obj := e.Object()
	if ae.Envelope.Message != nil {
		ae.Envelope.Message.Developer = obj["description"].(string)
	}
	info := map[string]any{"code": e.Code, "wire_code": obj["code"]}
	if d, ok := obj["details"]; ok {
		info["details"] = d
	}
	ae.Envelope.Details = map[string]any{ErrorDetailsKey: info}
	if wi, ok := LookupError(e.WireCode()); ok && wi.Retryable {
		r := &asc.Retry{Retryable: true}
		if s, ok := numberOf(e.Details["retry_after_seconds"]); ok && s >= 0 && s < 1e9 {
			r.AfterMS = int64(s * 1000)
		}
		ae.Envelope.Retry = r
	}
	return ae
}

// ascOutcome is one row of the "Handler outcomes -> ARSIA errors" table of
// docs/arsia-errors.md: the wire code that answers a handler failure with
// this ASC status, and what the sender is told. Both texts are printable
// ASCII English (NewError refuses anything else).
type ascOutcome struct {
	wire string
	// what says what happened; advice what the sender should do next.
	what, advice string
	// noResult marks a status that says nothing final about the action
	// (it may still be running, or it may have committed): the retry
	// contract sent is always "not retryable, not safe, side effects
	// unknown", whatever the producer said.
	noResult bool
}

// Advice shared by several rows.
const (
	adviceFix        = "Correct the request before sending it again."
	adviceNoResend   = "Do not send the same request again unchanged."
	adviceReconcile  = "The action may or may not have taken effect: check its effect before sending a new request for it; resending this message returns this same reply."
	adviceRetryLater = "A retry may succeed later; follow details.agent_status.retry."
	adviceReport     = "This is a fault of the receiver or of the service it calls; report it if it persists."
)

// ascOutcomes maps every registered ASC code. TestFromASCCoversRegistry
// fails when the registry gains a code that is not here.
var ascOutcomes = map[asc.Code]ascOutcome{
	// 1xxx and 2xxx are not failures: a handler that fails with one has
	// ended without a final result, so nothing is known about its effect.
	asc.Accepted:            {CodeInternalError, "The action was accepted by the service it calls but no final result was obtained", adviceReconcile, true},
	asc.Running:             {CodeInternalError, "The action was still running when the receiver stopped waiting for it", adviceReconcile, true},
	asc.WaitingDependency:   {CodeInternalError, "The action was waiting for a dependency when the receiver stopped waiting for it", adviceReconcile, true},
	asc.RetryScheduled:      {CodeInternalError, "The service the action calls scheduled another attempt but no final result was obtained", adviceReconcile, true},
	asc.Success:             {CodeInternalError, "The action reported success together with a failure", adviceReconcile, true},
	asc.SuccessWithWarnings: {CodeInternalError, "The action reported success together with a failure", adviceReconcile, true},
	asc.PartialSuccess:      {CodeInternalError, "Part of the action succeeded and part failed", adviceReconcile, true},
	asc.NoActionRequired:    {CodeInternalError, "The action reported that nothing was needed together with a failure", adviceReconcile, true},

	// 3xxx: the service the action calls needs something the receiver
	// cannot supply in this exchange. The call cannot be resumed here, so
	// these are the "non-resumable synchronous" case of ASC's HTTP
	// suggestions (409), except authentication (see 3003).
	asc.HumanInputRequired:     {CodeConflict, "The service the action calls needs more information from a person", "Send a new request that supplies the missing information; resending this one will not help.", false},
	asc.HumanApprovalRequired:  {CodeConflict, "The service the action calls is waiting for a human approval", "Send the request again only after the approval has been given there.", false},
	asc.AuthenticationRequired: {CodeForbidden, "The service the action calls requires authentication or credentials that the receiver does not hold", "Resending will not help until those credentials are provided; your own signature and token were accepted.", false},
	asc.Cancelled:              {CodeConflict, "The action was cancelled before it completed", "Check what it did before sending a new request for it.", false},

	// 4xxx: the request, as it stands, is refused.
	asc.InvalidRequest:        {CodeInvalidRequest, "The service the action calls refused the request as invalid", adviceFix, false},
	asc.FailedPrecondition:    {CodeConflict, "The action cannot run in the current state", "Repair the state (for an approved action whose approval no longer covers it: ask for a new approval) before sending it again.", false},
	asc.PermissionDenied:      {CodeForbidden, "The action was refused: it is not permitted", adviceNoResend, false},
	asc.GuardrailBlocked:      {CodeForbidden, "A policy or safety control blocked the action", adviceNoResend, false},
	asc.PolicyRedacted:        {CodeForbidden, "Policy withheld the result of the action", adviceNoResend, false},
	asc.Conflict:              {CodeConflict, "The action conflicts with the current state of the service it calls", "Read the current state and send a new request that accounts for it.", false},
	asc.NotFound:              {CodeNotFound, "Something the action needs could not be found", adviceNoResend, false},
	asc.UnsupportedCapability: {CodeNotImplemented, "The service the action calls does not implement it", adviceNoResend, false},

	// 5xxx: transient failures.
	asc.RetryableError:        {CodeServiceUnavailable, "The action failed with a transient error", adviceRetryLater, false},
	asc.RateLimited:           {CodeRateLimited, "The service the action calls is rate limited", "Retry after details.retry_after_seconds, if given.", false},
	asc.ResourceExhausted:     {CodeServiceUnavailable, "A resource or quota the action needs is exhausted", adviceRetryLater, false},
	asc.DependencyUnavailable: {CodeServiceUnavailable, "The service the action calls is unavailable", adviceRetryLater, false},
	asc.Timeout:               {CodeServiceUnavailable, "The action did not complete in time", adviceRetryLater, false},
	asc.ToolExecutionFailed:   {CodeInternalError, "The service the action calls accepted it and then failed", "Check details.agent_status.retry.side_effect_state before sending a new request.", false},
	asc.AbortedConcurrency:    {CodeConflict, "The action was aborted by a concurrent change", "Read the current state and send a new request that accounts for it.", false},

	// 6xxx: fatal or indeterminate.
	asc.FatalError:            {CodeInternalError, "The action failed", adviceReport, false},
	asc.InternalError:         {CodeInternalError, "The action failed on an internal error", adviceReport, false},
	asc.ModelBehaviourError:   {CodeInternalError, "A model taking part in the action produced an invalid step", adviceReport, false},
	asc.DataLoss:              {CodeInternalError, "State or evidence the action needs was lost or corrupted", adviceReport, false},
	asc.MaxIterationsExceeded: {CodeInternalError, "The action exhausted its step budget", adviceReport, false},
	asc.ResultStateUnknown:    {CodeInternalError, "It is not known whether the action took effect", adviceReconcile, true},

	// 7xxx: the result failed a verification and is withheld.
	asc.OutputUnverified:       {CodeInternalError, "The result of the action could not be verified and is withheld", adviceReport, false},
	asc.LowConfidence:          {CodeInternalError, "The result of the action fell below a quality threshold and is withheld", adviceReport, false},
	asc.HallucinationSuspected: {CodeInternalError, "The result of the action is suspected to be unsupported and is withheld", adviceReport, false},
	asc.HallucinationDetected:  {CodeInternalError, "The result of the action was found to be unsupported and is withheld", adviceReport, false},
	asc.ProvenanceIncomplete:   {CodeInternalError, "The provenance of the result of the action is incomplete; the result is withheld", adviceReport, false},
	asc.IntegrityCheckFailed:   {CodeInternalError, "The answer of the service the action calls failed an integrity check and is withheld", "Check details.agent_status.retry.side_effect_state before sending a new request.", false},

	// 8xxx are events only and never a primary outcome.
	asc.PromptCacheHit:  {CodeInternalError, "The action ended with an event instead of an outcome", adviceReconcile, true},
	asc.PromptCacheMiss: {CodeInternalError, "The action ended with an event instead of an outcome", adviceReconcile, true},
	asc.FallbackUsed:    {CodeInternalError, "The action ended with an event instead of an outcome", adviceReconcile, true},
	asc.RetryAttempted:  {CodeInternalError, "The action ended with an event instead of an outcome", adviceReconcile, true},
}

// classOutcome is the row of a code the registry does not know, by its
// first digit (ASC §4.2 rule 6).
func classOutcome(c asc.Code) ascOutcome {
	switch asc.ClassOf(c) {
	case asc.ClassInterrupted:
		return ascOutcome{CodeConflict, "The service the action calls needs something the receiver cannot supply", adviceNoResend, false}
	case asc.ClassRequestOrPolicy:
		return ascOutcome{CodeInvalidRequest, "The action was refused", adviceNoResend, false}
	case asc.ClassTransientFailure:
		return ascOutcome{CodeServiceUnavailable, "The action failed with a transient error", adviceRetryLater, false}
	case asc.ClassFatalOrIndeterminate, asc.ClassQualityOrVerification:
		return ascOutcome{CodeInternalError, "The action failed", adviceReport, false}
	}
	// Lifecycle, success, event, extension and out-of-range codes say
	// nothing final about the action.
	return ascOutcome{CodeInternalError, "The action ended without a known outcome", adviceReconcile, true}
}

// maxRetryAfterMS caps the delay FromASC passes on (one day), so that a
// service cannot park a sender for ever.
const maxRetryAfterMS = 24 * 60 * 60 * 1000

// FromASC is the opposite of ToASC: the ARSIA error that answers a handler
// (execution) failure reported with the ASC status env, through the one
// table of docs/arsia-errors.md ("Handler outcomes -> ARSIA errors"). Every
// registered code has a row; an unregistered one is mapped by its class.
//
// The error's Code is the wire code; its Description says what happened
// and what the sender should do, naming the ASC code; its Details carry
//
//	agent_status: {code, name (registered codes), retry?}
//
// where retry is the ASC retry contract reduced to retryable, safe,
// after_ms and side_effect_state. Statuses that say nothing final about
// the action (6005 RESULT_STATE_UNKNOWN, and 1xxx, 2xxx, 8xxx or
// unclassifiable codes used as a failure) always carry retry {retryable:
// false, safe: false, side_effect_state: unknown}: the sender must
// reconcile before repeating the action. A contract whose side effects are
// possible or unknown is never passed on as safe. A delay (after_ms) also
// becomes details.retry_after_seconds, and not_implemented carries the
// supported_versions ARSIA requires.
//
// Nothing else of env (messages, details, causes) is copied: it may hold
// text from the service the handler called.
func FromASC(env asc.Envelope) *Error {
	code := env.Status.Code
	row, ok := ascOutcomes[code]
	if !ok {
		row = classOutcome(code)
	}
	label := "ASC " + strconv.Itoa(int(code))
	if name := code.Name(); name != "" {
		label += " " + name
	}
	status := AgentStatus{Code: code, Retry: retryOf(env.Retry, row.noResult)}
	details := map[string]any{"agent_status": status.Value()}
	if r := status.Retry; r != nil && r.AfterMS > 0 {
		details["retry_after_seconds"] = (min(r.AfterMS, maxRetryAfterMS) + 999) / 1000
	}
	if row.wire == CodeNotImplemented {
		details["supported_versions"] = SupportedVersions().Details()
	}
	return &Error{
		Code:        row.wire,
		Description: row.what + " (" + label + "). " + row.advice,
		Details:     details,
	}
}

// AgentStatus is the ASC status an ARSIA error carries as
// details.agent_status: what happened in ASC's words, for a sender that
// acts on status codes rather than on ARSIA's.
type AgentStatus struct {
	Code asc.Code
	// Retry is the retry contract passed on (nil for none).
	Retry *asc.Retry
	// Provenance says who reported the status (nil for nobody named).
	Provenance *asc.Provenance
}

// Value is s as error details hold it,
//
//	{code, name (registered codes), retry?, provenance?}
//
// with retry reduced to retryable, safe, after_ms (at most a day) and
// side_effect_state, and never safe when side effects are possible or
// unknown; provenance has the members of an ASC provenance that are set.
func (s AgentStatus) Value() map[string]any {
	v := map[string]any{"code": int(s.Code)}
	if name := s.Code.Name(); name != "" {
		v["name"] = name
	}
	if r := s.Retry; r != nil {
		out := map[string]any{"retryable": r.Retryable, "safe": r.Safe}
		switch r.SideEffectState {
		case asc.SideEffectNone, asc.SideEffectConfirmed:
			out["side_effect_state"] = string(r.SideEffectState)
		case asc.SideEffectPossible, asc.SideEffectUnknown:
			out["side_effect_state"] = string(r.SideEffectState)
			out["safe"] = false
		}
		if r.AfterMS > 0 {
			out["after_ms"] = min(r.AfterMS, maxRetryAfterMS)
		}
		v["retry"] = out
	}
	if p := s.Provenance; p != nil {
		out := map[string]any{}
		for _, m := range [...]struct{ name, value string }{
			{"run_id", p.RunID}, {"step_id", p.StepID}, {"agent_id", p.AgentID}, {"tool_call_id", p.ToolCallID},
			{"provider_code", p.ProviderCode}, {"trace_id", p.TraceID}, {"span_id", p.SpanID},
			{"policy_id", p.PolicyID}, {"evaluator_id", p.EvaluatorID},
		} {
			if m.value != "" {
				out[m.name] = m.value
			}
		}
		v["provenance"] = out
	}
	return v
}

// SetProvenance records who reports e's ASC status
// (details.agent_status.provenance). An error without an agent_status yet
// gets the one its code maps to (AsASC).
func (e *Error) SetProvenance(p asc.Provenance) {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	st, _ := e.Details["agent_status"].(map[string]any)
	if st == nil {
		st = AgentStatus{Code: e.AsASC().Code()}.Value()
		e.Details["agent_status"] = st
	}
	st["provenance"] = AgentStatus{Provenance: &p}.Value()["provenance"]
}

// retryOf is the retry contract FromASC passes on, or nil when there is
// none to pass: a status that says nothing final about the action
// (noResult) is never retryable and its side effects are unknown (or
// possible, when the contract said so).
func retryOf(r *asc.Retry, noResult bool) *asc.Retry {
	if noResult {
		state := asc.SideEffectUnknown
		if r != nil && r.SideEffectState == asc.SideEffectPossible {
			state = asc.SideEffectPossible
		}
		return &asc.Retry{SideEffectState: state}
	}
	return r
}
