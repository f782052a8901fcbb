package arsia

import (
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
