package arsia

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// SemanticOptions tunes ValidateSemantic. The zero value applies every
// rule that needs no receiver configuration.
type SemanticOptions struct {
	// KnownPayloadType, when set, is the receiver's payload-type registry:
	// a request, response or event whose payload.type it does not know is
	// reported as unrecognised_payload_type (answer not_implemented).
	KnownPayloadType func(payloadType string) bool
}

// L2 issue codes, in the order ValidateSemantic applies them.
const (
	IssueInvalidFromAgentID             = "invalid_from_agent_id"
	IssueInvalidToAgentID               = "invalid_to_agent_id"
	IssueInvalidIntent                  = "invalid_intent"
	IssueUnsupportedMinV                = "unsupported_min_v"
	IssueUnsupportedProtocolVersion     = "unsupported_protocol_version"
	IssueMissingExpiresAt               = "missing_expires_at"
	IssueMissingCapabilities            = "missing_capabilities"
	IssueEmptyCapabilities              = "empty_capabilities"
	IssueDuplicateCapabilities          = "duplicate_capabilities"
	IssueInvalidCapabilityFormat        = "invalid_capability_format"
	IssueMissingCorrelationID           = "missing_correlation_id"
	IssueMissingErrorPayload            = "missing_error_payload"
	IssueMissingErrorObject             = "missing_error_object"
	IssueMissingErrorCode               = "missing_error_code"
	IssueMissingErrorDescription        = "missing_error_description"
	IssueUnrecognisedPayloadType        = "unrecognised_payload_type"
	IssueExpiresAtNotAfterTS            = "expires_at_not_after_ts"
	IssueIdempotencyExpiresAtNotAfterTS = "idempotency_expires_at_not_after_ts"
	IssueIdempotencyKeyInvalidChar      = "idempotency_key_invalid_char"
	IssueKidPrefixMismatch              = "kid_prefix_mismatch"
	IssueInvalidSigEncoding             = "invalid_sig_encoding"
	// issueInvalidEnvelopeType: the envelope is not an object at all.
	issueInvalidEnvelopeType = "invalid_envelope_type"
)

// Codes of the other validators.
const (
	IssueSchemaViolation                = "schema_violation"                  // structural rule (ValidateActionDescriptor, ValidateExplanation)
	IssueRisk34AuditRecommended         = "risk_34_audit_recommended"         // warning: risk 3-4 without audit_required
	IssueDecisionTimestampAfterEnvelope = "decision_timestamp_after_envelope" // CheckDecisionTimestamp
)

// ValidateSemantic applies the L2 (semantic) rules of Core §4 to an
// envelope in generic form (ParseEnvelope), in this order:
//
//   - from and to are agent identifiers;
//   - intent is one of the six (a Custos addition, so that L2 alone never
//     lets an unknown intent skip the intent rules);
//   - min_v is not above ProtocolVersion, v's major is not above 1;
//   - request and pending_approval carry expires_at;
//   - request and approval_decision carry non-empty capabilities; a
//     request's are unique and grammatical (ARSIA-Actions §1.1 ABNF;
//     Custos also refuses wildcards and misuse of the reserved prefix in a
//     request, as L1 refuses wildcards);
//   - response, error, approval_decision and pending_approval carry
//     correlation_id (pending_approval is a Custos addition matching the
//     schema and Core §4.2.1);
//   - an error carries payload.error{code, description};
//   - payload.type is known, when opts has a registry;
//   - expires_at and idempotency.expires_at are after ts; the idempotency
//     key is printable ASCII;
//   - security.kid starts with from + "#" and security.sig is base64url
//     without padding.
//
// It never panics and never trusts types: a member of the wrong type
// produces an issue, not a crash. It does not repeat L1 (structure): run
// the JSON Schema first, and the compliance rules after.
func ValidateSemantic(env map[string]any, opts SemanticOptions) []Issue {
	var l issueList
	if env == nil {
		l.err(issueInvalidEnvelopeType, "", "envelope must be a JSON object")
		return l
	}
	intent, _ := env["intent"].(string)

	for _, f := range []struct{ name, code string }{{"from", IssueInvalidFromAgentID}, {"to", IssueInvalidToAgentID}} {
		v, present := env[f.name]
		var problem string
		switch s, isStr := v.(string); {
		case !present:
			problem = "missing"
		case !isStr:
			problem = pyRepr(v) + " is not a string"
		case wellFormedAgentID(s):
			// parseAgentID would accept it; skip its message building.
		default:
			_, problem = parseAgentID(s)
		}
		if problem != "" {
			l.err(f.code, "/"+f.name, fmt.Sprintf("%s is not a valid ARSIA agent identifier: %s", pyRepr(f.name), problem))
		}
	}

	if !Intent(intent).Valid() {
		l.err(IssueInvalidIntent, "/intent", fmt.Sprintf("'intent' must be one of %s, got %s",
			pyRepr(intentNames()), pyRepr(truncateAny(env["intent"]))))
	}

	if v, present := env["min_v"]; present {
		s, _ := v.(string)
		switch mv, err := ParseVersion(s); {
		case err != nil:
			l.err(IssueUnsupportedMinV, "/min_v", fmt.Sprintf("min_v %s is not a valid protocol version", pyRepr(truncateAny(v))))
		case mv.Compare(current) > 0:
			l.err(IssueUnsupportedMinV, "/min_v", fmt.Sprintf("min_v %s is above the supported protocol version %s", pyRepr(s), pyRepr(ProtocolVersion)))
		}
	}
	{
		v := env["v"]
		s, _ := v.(string)
		switch pv, err := ParseVersion(s); {
		case err != nil:
			l.err(IssueUnsupportedProtocolVersion, "/v", fmt.Sprintf("protocol version %s is not a valid version", pyRepr(truncateAny(v))))
		case pv.Major > current.Major:
			l.err(IssueUnsupportedProtocolVersion, "/v", fmt.Sprintf("protocol version %s has major version %d; supported major version is %d", pyRepr(s), pv.Major, current.Major))
		}
	}

	if intent == string(IntentRequest) || intent == string(IntentPendingApproval) {
		if _, present := env["expires_at"]; !present {
			l.err(IssueMissingExpiresAt, "/expires_at", fmt.Sprintf("expires_at is required when intent=%s", pyRepr(intent)))
		}
	}

	if intent == string(IntentRequest) || intent == string(IntentApprovalDecision) {
		checkEnvelopeCapabilities(&l, env, intent)
	}

	switch Intent(intent) {
	case IntentResponse, IntentError, IntentApprovalDecision, IntentPendingApproval:
		switch v, present := env["correlation_id"]; {
		case !present || v == nil:
			l.err(IssueMissingCorrelationID, "/correlation_id", fmt.Sprintf("correlation_id is required when intent=%s", pyRepr(intent)))
		default:
			if s, isStr := v.(string); !isStr || s == "" {
				l.err(IssueMissingCorrelationID, "/correlation_id", fmt.Sprintf("correlation_id must be a non-empty string when intent=%s", pyRepr(intent)))
			}
		}
	}

	if intent == string(IntentError) {
		checkErrorPayload(&l, env)
	}

	if opts.KnownPayloadType != nil {
		switch Intent(intent) {
		case IntentRequest, IntentResponse, IntentEvent:
			if p, ok := objectOf(env["payload"]); ok {
				if t, ok := p["type"].(string); ok && !opts.KnownPayloadType(t) {
					l.err(IssueUnrecognisedPayloadType, "/payload/type", fmt.Sprintf("payload.type %s is not recognised by this receiver", pyRepr(truncateForMessage(t))))
				}
			}
		}
	}

	ts := envelopeTS{raw: env["ts"]}
	if v, present := env["expires_at"]; present {
		checkAfterTS(&l, IssueExpiresAtNotAfterTS, "/expires_at", "expires_at", v, &ts)
	}
	if v, present := env["idempotency"]; present {
		if idem, ok := objectOf(v); ok {
			if exp, present := idem["expires_at"]; present {
				checkAfterTS(&l, IssueIdempotencyExpiresAtNotAfterTS, "/idempotency/expires_at", "idempotency.expires_at", exp, &ts)
			}
			if key, present := idem["key"]; present {
				checkIdempotencyKey(&l, key)
			}
		}
	}

	if v, present := env["security"]; present {
		checkSecurity(&l, env, v)
	}
	return l
}

func intentNames() []string {
	out := make([]string, 0, 6)
	for _, i := range Intents() {
		out = append(out, string(i))
	}
	return out
}

func truncateAny(v any) any {
	if s, ok := v.(string); ok {
		return truncateForMessage(s)
	}
	if _, ok := v.(map[string]any); ok {
		return "<object>"
	}
	if _, ok := v.([]any); ok {
		return "<array>"
	}
	return v
}

func checkEnvelopeCapabilities(l *issueList, env map[string]any, intent string) {
	v, present := env["capabilities"]
	if !present || v == nil {
		l.err(IssueMissingCapabilities, "/capabilities", fmt.Sprintf("capabilities is required when intent=%s", pyRepr(intent)))
		return
	}
	arr, isArr := arrayOf(v)
	if !isArr {
		l.err(IssueInvalidCapabilityFormat, "/capabilities", fmt.Sprintf("capabilities must be an array of strings, got %s", pyRepr(truncateAny(v))))
		return
	}
	if len(arr) == 0 {
		l.err(IssueEmptyCapabilities, "/capabilities", fmt.Sprintf("capabilities must not be empty when intent=%s", pyRepr(intent)))
		return
	}
	if intent != string(IntentRequest) {
		return
	}
	if dups := duplicateStrings(arr); len(dups) > 0 {
		l.err(IssueDuplicateCapabilities, "/capabilities", fmt.Sprintf("capabilities contains duplicate entries: %s", pyRepr(dups)))
	}
	for i, item := range arr {
		s, ok := item.(string)
		if ok && plainConcreteCapability(s) {
			continue // ValidateCapability accepts it and it is no wildcard
		}
		p := fmt.Sprintf("/capabilities/%d", i)
		if !ok {
			l.err(IssueInvalidCapabilityFormat, p, fmt.Sprintf("capability %s is not a string", pyRepr(truncateAny(item))))
			continue
		}
		if err := ValidateCapability(s); err != nil {
			msg := err.Error()
			if ae, ok := errors.AsType[*Error](err); ok {
				msg = ae.Description
			}
			l.err(IssueInvalidCapabilityFormat, p, "invalid capability format: "+msg+" (ARSIA-Actions §1.1)")
			continue
		}
		if IsWildcardCapability(s) {
			l.err(IssueInvalidCapabilityFormat, p, fmt.Sprintf("invalid capability format: capability %s is a wildcard; a request names concrete capabilities", pyRepr(s)))
		}
	}
}

// parseTimestamp is ParseTimestamp with a shortcut for well-formed
// timestamps: exactly YYYY-MM-DDTHH:MM:SS.mmmZ with every field in range
// (the checks time.Parse makes) is converted directly; anything else, and
// every error, comes from ParseTimestamp.
func parseTimestamp(s string) (time.Time, error) {
	if !wellFormedTimestamp(s) {
		return ParseTimestamp(s)
	}
	year, month, day := digitsAt(s, 0, 4), digitsAt(s, 5, 7), digitsAt(s, 8, 10)
	hour, minute, sec, ms := digitsAt(s, 11, 13), digitsAt(s, 14, 16), digitsAt(s, 17, 19), digitsAt(s, 20, 23)
	return time.Date(year, time.Month(month), day, hour, minute, sec, ms*int(time.Millisecond), time.UTC), nil
}

// wellFormedTimestamp reports that s is exactly YYYY-MM-DDTHH:MM:SS.mmmZ
// with every field in range, the checks time.Parse makes: ParseTimestamp
// accepts it. Such timestamps, all of one width and in UTC, order as
// strings in the order of the instants they name.
func wellFormedTimestamp(s string) bool {
	const layout = "dddd-dd-ddTdd:dd:dd.dddZ"
	if len(s) != len(layout) {
		return false
	}
	for i := 0; i < len(layout); i++ {
		if c := s[i]; layout[i] == 'd' && (c < '0' || c > '9') || layout[i] != 'd' && c != layout[i] {
			return false
		}
	}
	year, month, day := digitsAt(s, 0, 4), digitsAt(s, 5, 7), digitsAt(s, 8, 10)
	hour, minute, sec := digitsAt(s, 11, 13), digitsAt(s, 14, 16), digitsAt(s, 17, 19)
	return month >= 1 && month <= 12 && day >= 1 && day <= daysIn(time.Month(month), year) &&
		hour <= 23 && minute <= 59 && sec <= 59
}

// digitsAt is the number written in the ASCII digits s[from:to].
func digitsAt(s string, from, to int) int {
	n := 0
	for i := from; i < to; i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// monthDays is the length of each month outside leap Februaries.
var monthDays = [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// daysIn is the length of month m (1-12) in year (proleptic Gregorian, as
// time.Parse checks it).
func daysIn(m time.Month, year int) int {
	if m == time.February && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return monthDays[m]
}

// duplicateStrings returns the strings of arr that occur more than once,
// each once, in the order of their second occurrence.
func duplicateStrings(arr []any) []string {
	var dups []string
	if len(arr) <= 16 {
		for i, item := range arr {
			s, ok := item.(string)
			if !ok {
				continue
			}
			for _, prev := range arr[:i] {
				if p, ok := prev.(string); ok && p == s {
					if !slices.Contains(dups, s) {
						dups = append(dups, s)
					}
					break
				}
			}
		}
		return dups
	}
	seen := make(map[string]bool, len(arr))
	for _, item := range arr {
		if s, ok := item.(string); ok {
			if seen[s] && !slices.Contains(dups, s) {
				dups = append(dups, s)
			}
			seen[s] = true
		}
	}
	return dups
}

// wellFormedAgentID reports, without building any message, that
// parseAgentID accepts s: "agent:", at least two dot-separated segments of
// ASCII letters, digits and inner hyphens, and optionally '/' and a
// resource of letters, digits, '-' and '_' starting with a letter or
// digit, at most MaxAgentIDLength characters. False means "ask
// parseAgentID".
func wellFormedAgentID(s string) bool {
	if len(s) > MaxAgentIDLength || !strings.HasPrefix(s, AgentIDPrefix) {
		return false
	}
	path, resource, hasResource := strings.Cut(s[len(AgentIDPrefix):], "/")
	if hasResource {
		if resource == "" || !isAlnum(resource[0]) {
			return false
		}
		for i := 1; i < len(resource); i++ {
			if c := resource[i]; !isAlnum(c) && c != '-' && c != '_' {
				return false
			}
		}
	}
	segments := 0
	for {
		seg, rest, more := strings.Cut(path, ".")
		if seg == "" || seg[0] == '-' || seg[len(seg)-1] == '-' {
			return false
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !isAlnum(c) && c != '-' {
				return false
			}
		}
		segments++
		if !more {
			break
		}
		path = rest
	}
	return segments >= 2
}

// plainConcreteCapability reports, without building any message, that
// ValidateCapability accepts c and that c is no wildcard: two or more
// dot-separated segments of ASCII letters and digits, at most
// MaxCapabilityLength bytes, outside the reserved namespace (whose rules
// ValidateCapability applies). False means "ask ValidateCapability".
func plainConcreteCapability(c string) bool {
	if c == "" || len(c) > MaxCapabilityLength || strings.HasPrefix(c, ReservedCapabilityPrefix) {
		return false
	}
	segments := 0
	for {
		seg, rest, more := strings.Cut(c, ".")
		if seg == "" {
			return false
		}
		for i := 0; i < len(seg); i++ {
			if !isAlnum(seg[i]) {
				return false
			}
		}
		segments++
		if !more {
			break
		}
		c = rest
	}
	return segments >= 2
}

func checkErrorPayload(l *issueList, env map[string]any) {
	payload, ok := objectOf(env["payload"])
	if !ok {
		l.err(IssueMissingErrorPayload, "/payload", "payload object is required when intent='error'")
		return
	}
	errObj, ok := objectOf(payload["error"])
	if !ok {
		l.err(IssueMissingErrorObject, "/payload/error", "payload.error object is required when intent='error'")
		return
	}
	if s, ok := errObj["code"].(string); !ok || s == "" {
		l.err(IssueMissingErrorCode, "/payload/error/code", "payload.error.code is required when intent='error'")
	}
	if _, ok := errObj["description"].(string); !ok {
		l.err(IssueMissingErrorDescription, "/payload/error/description", "payload.error.description is required when intent='error'")
	}
}

// envelopeTS is the envelope's ts member, parsed when first needed.
type envelopeTS struct {
	raw    any
	parsed bool
	t      time.Time
	err    error
}

func (e *envelopeTS) get() (time.Time, error) {
	if !e.parsed {
		e.parsed = true
		s, ok := e.raw.(string)
		if !ok {
			e.err = fmt.Errorf("%w: ts is missing or not a string", ErrInvalidTimestamp)
		} else {
			e.t, e.err = parseTimestamp(s)
		}
	}
	return e.t, e.err
}

func checkAfterTS(l *issueList, code, pointer, name string, v any, ts *envelopeTS) {
	s, _ := v.(string)
	if tsStr, ok := ts.raw.(string); ok && wellFormedTimestamp(s) && wellFormedTimestamp(tsStr) {
		// Compared as strings, which order as their instants.
		if s <= tsStr {
			l.err(code, pointer, fmt.Sprintf("%s %s must be after ts %s", name, pyRepr(s), pyRepr(ts.raw)))
		}
		return
	}
	t, err := parseTimestamp(s)
	if err != nil {
		l.err(code, pointer, fmt.Sprintf("%s %s is not a valid timestamp, so it cannot be checked against ts", name, pyRepr(truncateAny(v))))
		return
	}
	tsT, tsErr := ts.get()
	switch {
	case tsErr != nil:
		l.err(code, pointer, fmt.Sprintf("%s cannot be checked: ts %s is not a valid timestamp", name, pyRepr(truncateAny(ts.raw))))
	case !t.After(tsT):
		l.err(code, pointer, fmt.Sprintf("%s %s must be after ts %s", name, pyRepr(s), pyRepr(ts.raw)))
	}
}

func checkIdempotencyKey(l *issueList, key any) {
	s, ok := key.(string)
	if !ok {
		l.err(IssueIdempotencyKeyInvalidChar, "/idempotency/key", fmt.Sprintf("idempotency.key must be a string, got %s", pyRepr(truncateAny(key))))
		return
	}
	pos := 0
	for i := 0; i < len(s); pos++ {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r < 0x20 || r > 0x7e {
			what := fmt.Sprintf("U+%04X", r)
			if r == utf8.RuneError && size == 1 {
				what = fmt.Sprintf("byte 0x%02X", s[i])
			}
			l.err(IssueIdempotencyKeyInvalidChar, "/idempotency/key",
				fmt.Sprintf("idempotency.key contains %s at position %d; only printable ASCII (U+0020-U+007E) is allowed", what, pos))
			return
		}
		i += size
	}
}

func checkSecurity(l *issueList, env map[string]any, v any) {
	sec, ok := objectOf(v)
	if !ok {
		l.err(IssueKidPrefixMismatch, "/security", "security must be an object with kid and sig")
		return
	}
	from, _ := env["from"].(string)
	switch kid, isStr := sec["kid"].(string); {
	case !isStr:
		l.err(IssueKidPrefixMismatch, "/security/kid", fmt.Sprintf("security.kid must be a string starting with %s", pyRepr(truncateForMessage(from)+"#")))
	case !strings.HasPrefix(kid, from+"#"):
		l.err(IssueKidPrefixMismatch, "/security/kid", fmt.Sprintf("security.kid %s must start with %s", pyRepr(truncateForMessage(kid)), pyRepr(truncateForMessage(from)+"#")))
	}
	if sig, isStr := sec["sig"].(string); !isStr || !isBase64URLNoPad(sig) {
		l.err(IssueInvalidSigEncoding, "/security/sig", "security.sig must be base64url without padding ([A-Za-z0-9_-]+)")
	}
}

func isBase64URLNoPad(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !base64URLByte[s[i]] {
			return false
		}
	}
	return true
}

// base64URLByte marks the bytes of the base64url alphabet.
var base64URLByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = isAlnum(byte(c)) || c == '-' || c == '_'
	}
	return t
}()

// CheckIdentityConsistency compares the three identity layers of Identity
// §1.1: the envelope's from, the agent named by the kid (the part before
// '#') and the agent_id of the sender's IdentityRecord (skipped when
// identityAgentID is ""). It returns one warning per disagreeing pair
// (kid prefix vs from, IdentityRecord vs from, IdentityRecord vs kid
// prefix); none means consistent.
func CheckIdentityConsistency(from, kid, identityAgentID string) []string {
	var warnings []string
	kidAgent, _, hasLabel := strings.Cut(kid, "#")
	switch {
	case !hasLabel:
		warnings = append(warnings, fmt.Sprintf("kid %s has no '#', so its kid prefix cannot match from %s", pyRepr(kid), pyRepr(from)))
	case kidAgent != from:
		warnings = append(warnings, fmt.Sprintf("kid prefix %s does not match from %s", pyRepr(kidAgent), pyRepr(from)))
	}
	if identityAgentID != "" {
		if identityAgentID != from {
			warnings = append(warnings, fmt.Sprintf("IdentityRecord agent_id %s does not match from %s", pyRepr(identityAgentID), pyRepr(from)))
		}
		if identityAgentID != kidAgent {
			warnings = append(warnings, fmt.Sprintf("IdentityRecord agent_id %s does not match kid prefix %s", pyRepr(identityAgentID), pyRepr(kidAgent)))
		}
	}
	return warnings
}
