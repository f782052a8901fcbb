package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"sync"
)

// This file is a hand-written decision procedure for the common envelopes
// of arsia-message.schema.json: request, response, event and error
// messages with plain (unencrypted) payloads. It answers only "certainly
// valid" (fastEnvelopeValid returns true, and the full validator would
// report no error) or "don't know" (false), in which case the caller runs
// the full validator, which alone produces error messages. Every branch
// that is rare or complex declines: the pending_approval and
// approval_decision intents, encrypted envelopes, string payloads,
// explanations, assets and state payload types, the escrow capability,
// error codes whose details have their own schemas, Go floats where an
// integer is wanted, and anything else not spelled out below.
//
// Soundness is the only requirement: the procedure must never accept an
// instance that the full schema rejects. It is written against the exact
// bytes of arsia-message.schema.json and arsia-common.schema.json; when
// either embedded file changes, fastPathEnabled turns the fast path off
// until the procedure is re-audited and the pins below updated.
//
// Patterns are checked by hand, with the semantics the validator gives
// them: Go RE2 over the whole string (each pattern is anchored with ^ and
// $, and $ without (?m) matches only at the end of the text), \d meaning
// [0-9]. Each checker's comment quotes the pattern it implements.

// Pinned SHA-256 digests of the schema files the fast path was audited
// against.
var fastPathPins = map[string]string{
	"arsia-message.schema.json": "d4026b4b5357d305d3d844abb0c2510561c1973616c0f964c3b38de0dabc3d74",
	"arsia-common.schema.json":  "2ffd6bf5301636978ebc29d6c2e2acae67a0f89035cf3a72928d083c78f69102",
}

// fastPathEnabled reports, once, whether the embedded files are exactly
// the audited ones and the envelope schema compiles (so that an unusable
// schema still fails closed through the full validator). The check runs on
// a throwaway registry over the same embedded files, so that the fast path
// does not keep the compiled schemas (about a megabyte) alive: the default
// registry loads and compiles them, identically, on the first instance
// that needs the full validator.
var fastPathEnabled = sync.OnceValue(func() bool {
	sub, err := fs.Sub(embedded, "schemas")
	if err != nil {
		return false
	}
	r, err := newRegistry(sub)
	if err != nil {
		return false
	}
	return r.fastPathUsable()
})

func (r *registry) fastPathUsable() bool {
	for name, pin := range fastPathPins {
		data, ok := r.files[name]
		if !ok {
			return false
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != pin {
			return false
		}
	}
	_, err := r.schemaFor(EnvelopeSchema)
	return err == nil
}

// maxFastDepth bounds the recursion over free-form values (args, result,
// data, details, compliance extensions); deeper instances go to the full
// validator.
const maxFastDepth = 256

// fastEnvelopeValid reports whether instance is certainly valid under
// arsia-message.schema.json. False means "not decided here".
func fastEnvelopeValid(instance any) bool {
	m, ok := instance.(map[string]any)
	if !ok {
		return false
	}
	var (
		intent                        string
		hasV, hasID, hasTS, hasFrom   bool
		hasTo, hasIntent, hasCorr     bool
		hasExpires, hasCaps, hasSec   bool
		hasPayload, payloadIsErrorObj bool
	)
	for k, v := range m {
		switch k {
		case "v":
			hasV = true
			if s, ok := v.(string); !ok || !isVersion(s) {
				return false
			}
		case "id":
			hasID = true
			if s, ok := v.(string); !ok || !isUUIDv4Lower(s) {
				return false
			}
		case "ts":
			hasTS = true
			if s, ok := v.(string); !ok || !isTimestampMS(s) {
				return false
			}
		case "from":
			hasFrom = true
			if s, ok := v.(string); !ok || !isAgentID(s) {
				return false
			}
		case "to":
			hasTo = true
			if s, ok := v.(string); !ok || !isAgentID(s) {
				return false
			}
		case "intent":
			hasIntent = true
			s, ok := v.(string)
			if !ok {
				return false
			}
			switch s {
			case "request", "response", "event", "error":
				intent = s
			default: // pending_approval, approval_decision, or invalid
				return false
			}
		case "correlation_id":
			hasCorr = true
			if s, ok := v.(string); !ok || !isUUIDv4(s) {
				return false
			}
		case "expires_at":
			hasExpires = true
			if s, ok := v.(string); !ok || !isTimestampMS(s) {
				return false
			}
		case "min_v":
			if s, ok := v.(string); !ok || !isVersion(s) {
				return false
			}
		case "capabilities":
			hasCaps = true
			if !fastCapabilities(v) {
				return false
			}
		case "idempotency":
			if !fastIdempotency(v) {
				return false
			}
		case "context":
			if !fastContext(v) {
				return false
			}
		case "security":
			hasSec = true
			if !fastSecurity(v) {
				return false
			}
		case "compliance":
			if !fastCompliance(v) {
				return false
			}
		case "payload":
			hasPayload = true
			p, ok := v.(map[string]any)
			if !ok { // a JWE string, or invalid
				return false
			}
			isErr, ok := fastPayload(p)
			if !ok {
				return false
			}
			payloadIsErrorObj = isErr
		default: // additionalProperties: false
			return false
		}
	}
	if !(hasV && hasID && hasTS && hasFrom && hasTo && hasIntent) {
		return false
	}
	switch intent {
	case "request":
		if !(hasExpires && hasCaps && hasSec) {
			return false
		}
	case "response":
		if !(hasCorr && hasSec) {
			return false
		}
	case "error":
		if !hasCorr {
			return false
		}
		// properties.payload: {type: object, required: [error]}, which
		// holds vacuously when payload is absent.
		if hasPayload && !payloadIsErrorObj {
			return false
		}
	}
	return true
}

// fastPayload checks a payload object against the first two branches of
// payload.oneOf and the payload-type conditionals. isErr tells which branch
// matched; exactly one does, since the error branch requires "error" and
// the other one forbids it.
func fastPayload(p map[string]any) (isErr, ok bool) {
	typ, hasType := p["type"].(string)
	if !hasType {
		return false, false
	}
	// Payload types with conditionals of their own (assets transfers and
	// escrow, state operations) are left to the full validator.
	if strings.HasPrefix(typ, "arsiaprotocol.assets/") || strings.HasPrefix(typ, "arsiaprotocol.state/") {
		return false, false
	}
	if _, present := p["error"]; present {
		// Error branch: required [type, error], additionalProperties
		// false, type any string.
		if len(p) != 2 {
			return false, false
		}
		return true, fastErrorObject(p["error"])
	}
	// Plain branch: required [type], additionalProperties false,
	// type is a payload-type, version a version, args/result/data
	// anything but at most one of them; explanation is not decided here.
	if !isPayloadType(typ) {
		return false, false
	}
	bodies := 0
	for k, v := range p {
		switch k {
		case "type":
		case "version":
			if s, ok := v.(string); !ok || !isVersion(s) {
				return false, false
			}
		case "args", "result", "data":
			bodies++
			if !jsonValue(v, 0) {
				return false, false
			}
		default: // explanation, or an unknown member
			return false, false
		}
	}
	return false, bodies <= 1
}

// standardErrorCodes are the enum branch of payload.error.code.
var standardErrorCodes = map[string]bool{
	"invalid_request": true, "unauthorized": true, "forbidden": true,
	"not_found": true, "conflict": true, "payload_too_large": true,
	"rate_limited": true, "internal_error": true, "not_implemented": true,
	"service_unavailable": true, "certificate_invalid": true,
	"certificate_expired": true, "key_mismatch": true,
	"certificate_revoked": true,
}

// fastErrorObject checks payload.error with its code conditionals.
func fastErrorObject(v any) bool {
	e, ok := v.(map[string]any)
	if !ok {
		return false
	}
	var (
		code                string
		hasCode, hasDesc    bool
		details             map[string]any
		hasDetails, unknown bool
	)
	for k, val := range e {
		switch k {
		case "code":
			code, hasCode = val.(string)
			if !hasCode {
				return false
			}
		case "description":
			if _, hasDesc = val.(string); !hasDesc {
				return false
			}
		case "details":
			hasDetails = true
			if details, ok = val.(map[string]any); !ok {
				return false
			}
		default:
			unknown = true
		}
	}
	if unknown || !hasCode || !hasDesc {
		return false
	}
	// code: oneOf [standard enum, custom pattern]. No standard code has a
	// dot, which the pattern requires, so at most one branch matches.
	standard := standardErrorCodes[code]
	if !standard && !isCustomErrorCode(code) {
		return false
	}
	if hasDetails {
		// The rollback-partial conditional applies whatever the code.
		if _, present := details["partial_rollback"]; present {
			return false
		}
		if !jsonValue(details, 0) {
			return false
		}
	}
	switch code {
	case "forbidden":
		if !hasDetails {
			return false
		}
		if _, present := details["oversight_decision"]; present {
			return false
		}
		if _, present := details["required_capabilities"]; present {
			// error-details-forbidden: both lists, of strings.
			if !stringArray(details["required_capabilities"]) {
				return false
			}
			prov, present := details["provided_capabilities"]
			if !present || !stringArray(prov) {
				return false
			}
		}
	case "conflict":
		if hasDetails {
			if _, present := details["already_rolled_back"]; present {
				return false
			}
			if _, present := details["current_version"]; present {
				return false
			}
		}
	case "service_unavailable":
		if hasDetails {
			if _, present := details["data_residency_violation"]; present {
				return false
			}
			if _, present := details["relay_failed"]; present {
				return false
			}
		}
	case "rate_limited", "payload_too_large":
		if hasDetails {
			return false
		}
	case "not_implemented", "certificate_invalid", "certificate_expired", "key_mismatch", "certificate_revoked":
		return false
	}
	return true
}

func stringArray(v any) bool {
	a, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range a {
		if _, ok := e.(string); !ok {
			return false
		}
	}
	return true
}

// escrowRelease is the capability whose presence adds requirements.
const escrowRelease = "arsiaprotocol.assets.escrow.release"

// fastCapabilities: a non-empty array of unique capability names of at
// most 128 characters.
func fastCapabilities(v any) bool {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return false
	}
	for i, e := range a {
		s, ok := e.(string)
		if !ok || len(s) > 128 || !isCapability(s) || s == escrowRelease {
			return false
		}
		if len(a) <= 16 {
			for _, prev := range a[:i] {
				if prev.(string) == s {
					return false
				}
			}
		}
	}
	if len(a) > 16 {
		seen := make(map[string]struct{}, len(a))
		for _, e := range a {
			s := e.(string)
			if _, dup := seen[s]; dup {
				return false
			}
			seen[s] = struct{}{}
		}
	}
	return true
}

// fastIdempotency: {key, expires_at} exactly; key printable ASCII of 1 to
// 128 characters.
func fastIdempotency(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 {
		return false
	}
	key, ok := m["key"].(string)
	if !ok || len(key) < 1 || len(key) > 128 || !isPrintableASCII(key) {
		return false
	}
	exp, ok := m["expires_at"].(string)
	return ok && isTimestampMS(exp)
}

// fastContext: the W3C trace members, flags 0-255, locale, priority 0-10.
func fastContext(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k, val := range m {
		switch k {
		case "trace_id":
			if s, ok := val.(string); !ok || len(s) != 32 || !isLowerHex(s) {
				return false
			}
		case "span_id":
			if s, ok := val.(string); !ok || len(s) != 16 || !isLowerHex(s) {
				return false
			}
		case "flags":
			if n, ok := smallInt(val); !ok || n < 0 || n > 255 {
				return false
			}
		case "locale":
			if _, ok := val.(string); !ok {
				return false
			}
		case "priority":
			if n, ok := smallInt(val); !ok || n < 0 || n > 10 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// fastSecurity: {alg, kid, sig} with the optional encryption members;
// encrypted envelopes are left to the full validator.
func fastSecurity(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	required := 0
	for k, val := range m {
		switch k {
		case "alg":
			required++
			switch s, _ := val.(string); s {
			case "EdDSA", "ES256", "RS256":
			default:
				return false
			}
		case "kid", "sig":
			required++
			if _, ok := val.(string); !ok {
				return false
			}
		case "encrypted":
			if b, ok := val.(bool); !ok || b {
				return false
			}
		case "enc_alg", "enc_method":
			if _, ok := val.(string); !ok {
				return false
			}
		default:
			return false
		}
	}
	return required == 3
}

var humanOversightModes = map[string]bool{
	"not_required": true, "required_before_execution": true,
	"required_within_24h": true, "required_post_execution": true,
}

var legalBases = map[string]bool{
	"consent": true, "contract": true, "legal_obligation": true,
	"vital_interests": true, "public_task": true,
	"legitimate_interests": true, "explicit_consent": true,
	"employment_social_security": true, "vital_interests_incapacity": true,
	"legitimate_activities": true, "manifestly_public": true,
	"legal_claims": true, "substantial_public_interest": true,
	"health_medicine": true, "public_health": true,
	"archiving_research": true,
}

var classifications = map[string]bool{
	"minimal-risk": true, "limited-risk": true, "high-risk": true,
	"unacceptable-risk": true,
}

// retentionFloors are the profile-conditional minimums of retention_days.
var retentionFloors = map[string]int64{
	"MIFID-II": 1827, "PAC-AGRICULTURE": 1096, "DSA-VLOP": 730, "DORA": 1827,
}

// fastCompliance: the typed members, extension members of any JSON value,
// and the pii/legal_basis, high-risk/human_oversight and retention floor
// conditionals.
func fastCompliance(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	var (
		profile                     string
		hasProfile, hasRetention    bool
		retention                   int64
		pii, highRisk               bool
		hasLegalBasis, hasOversight bool
	)
	for k, val := range m {
		switch k {
		case "profile":
			if profile, hasProfile = val.(string); !hasProfile {
				return false
			}
		case "data_residency":
			if s, ok := val.(string); !ok || !isUpper2(s) {
				return false
			}
		case "audit_required", "explainability_required":
			if _, ok := val.(bool); !ok {
				return false
			}
		case "pii_involved":
			if pii, ok = val.(bool); !ok {
				return false
			}
		case "retention_days":
			hasRetention = true
			if retention, ok = smallInt(val); !ok || retention < 1 {
				return false
			}
		case "human_oversight":
			hasOversight = true
			if s, ok := val.(string); !ok || !humanOversightModes[s] {
				return false
			}
		case "legal_basis":
			hasLegalBasis = true
			if s, ok := val.(string); !ok || !legalBases[s] {
				return false
			}
		case "ai_system_classification":
			s, ok := val.(string)
			if !ok || !classifications[s] {
				return false
			}
			highRisk = s == "high-risk"
		default: // additionalProperties: true
			if !jsonValue(val, 1) {
				return false
			}
		}
	}
	if pii && !hasLegalBasis {
		return false
	}
	if highRisk && !hasOversight {
		return false
	}
	if hasProfile && hasRetention {
		if floor, ok := retentionFloors[profile]; ok && retention < floor {
			return false
		}
	}
	return true
}

// jsonValue reports whether v is decoded JSON all the way down, as the
// full validator's pre-check (nonJSON) requires, within maxFastDepth.
func jsonValue(v any, depth int) bool {
	switch v := v.(type) {
	case string, bool, nil:
		return true
	case json.Number:
		return isJSONNumber(string(v))
	case map[string]any:
		if depth >= maxFastDepth {
			return false
		}
		for _, e := range v {
			if !jsonValue(e, depth+1) {
				return false
			}
		}
		return true
	case []any:
		if depth >= maxFastDepth {
			return false
		}
		for _, e := range v {
			if !jsonValue(e, depth+1) {
				return false
			}
		}
		return true
	case float64:
		return !math.IsNaN(v) && !math.IsInf(v, 0)
	case float32:
		return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	}
	return false
}

// smallInt returns v when it is certainly a JSON Schema integer of
// moderate size: a json.Number integer literal of at most 15 digits or a
// Go integer. Go floats and other spellings (1.0, 1e2) are declined.
func smallInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		s := string(n)
		digits := strings.TrimPrefix(s, "-")
		if len(digits) == 0 || len(digits) > 15 || (len(digits) > 1 && digits[0] == '0') || !isDigits(digits) {
			return 0, false
		}
		i, err := strconv.ParseInt(s, 10, 64)
		return i, err == nil
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint:
		if uint64(n) > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isAlnum(c byte) bool { return isAlpha(c) || isDigit(c) }
func isLowerHexByte(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'f'
}
func isHexByte(c byte) bool {
	return isLowerHexByte(c) || 'A' <= c && c <= 'F'
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLowerHexByte(s[i]) {
			return false
		}
	}
	return true
}

// isVersion: ^\d+\.\d+$
func isVersion(s string) bool {
	dot := strings.IndexByte(s, '.')
	return dot > 0 && dot < len(s)-1 && isDigits(s[:dot]) && isDigits(s[dot+1:])
}

// isUUIDv4Lower: ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$
func isUUIDv4Lower(s string) bool {
	if !uuidShape(s, isLowerHexByte) {
		return false
	}
	switch s[19] {
	case '8', '9', 'a', 'b':
		return true
	}
	return false
}

// isUUIDv4: ^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$
func isUUIDv4(s string) bool {
	if !uuidShape(s, isHexByte) {
		return false
	}
	switch s[19] {
	case '8', '9', 'a', 'b', 'A', 'B':
		return true
	}
	return false
}

// uuidShape checks 8-4-4-4-12 digits of class hex with a '4' starting the
// third group; the caller checks the variant digit at index 19.
func uuidShape(s string, hex func(byte) bool) bool {
	if len(s) != 36 || s[14] != '4' {
		return false
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !hex(s[i]) {
				return false
			}
		}
	}
	return true
}

// isTimestampMS: ^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$
func isTimestampMS(s string) bool {
	const layout = "dddd-dd-ddTdd:dd:dd.dddZ"
	if len(s) != len(layout) {
		return false
	}
	for i := 0; i < len(layout); i++ {
		if layout[i] == 'd' {
			if !isDigit(s[i]) {
				return false
			}
		} else if s[i] != layout[i] {
			return false
		}
	}
	return true
}

// isAgentID: maxLength 256 and
// ^agent:[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(\/[a-zA-Z0-9][a-zA-Z0-9_-]*)?$
//
// That is: two or more dot-separated labels of letters, digits and inner
// hyphens, then optionally '/' and a suffix of letters, digits, '_' and
// '-' starting with a letter or digit. The pattern admits ASCII only, so
// the length in bytes is the length in characters.
func isAgentID(s string) bool {
	if len(s) > 256 || !strings.HasPrefix(s, "agent:") {
		return false
	}
	host := s[len("agent:"):]
	if slash := strings.IndexByte(host, '/'); slash >= 0 {
		suffix := host[slash+1:]
		host = host[:slash]
		if len(suffix) == 0 || !isAlnum(suffix[0]) {
			return false
		}
		for i := 1; i < len(suffix); i++ {
			if c := suffix[i]; !isAlnum(c) && c != '_' && c != '-' {
				return false
			}
		}
	}
	labels := 0
	for {
		dot := strings.IndexByte(host, '.')
		label := host
		if dot >= 0 {
			label = host[:dot]
		}
		if !isLabel(label) {
			return false
		}
		labels++
		if dot < 0 {
			break
		}
		host = host[dot+1:]
	}
	return labels >= 2
}

// isLabel: [a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?
func isLabel(s string) bool {
	if len(s) == 0 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' {
			return false
		}
	}
	return true
}

// isCapability: ^[a-zA-Z][a-zA-Z0-9]*(\.[a-zA-Z][a-zA-Z0-9]*)+$
func isCapability(s string) bool {
	segments := 0
	for {
		dot := strings.IndexByte(s, '.')
		seg := s
		if dot >= 0 {
			seg = s[:dot]
		}
		if len(seg) == 0 || !isAlpha(seg[0]) {
			return false
		}
		for i := 1; i < len(seg); i++ {
			if !isAlnum(seg[i]) {
				return false
			}
		}
		segments++
		if dot < 0 {
			break
		}
		s = s[dot+1:]
	}
	return segments >= 2
}

// isCustomErrorCode: ^[a-z][a-z0-9]*(\.[a-z][a-z0-9-]*)+$
func isCustomErrorCode(s string) bool {
	segments := 0
	for {
		dot := strings.IndexByte(s, '.')
		seg := s
		if dot >= 0 {
			seg = s[:dot]
		}
		if len(seg) == 0 || seg[0] < 'a' || seg[0] > 'z' {
			return false
		}
		for i := 1; i < len(seg); i++ {
			c := seg[i]
			if !('a' <= c && c <= 'z' || isDigit(c) || c == '-' && segments > 0) {
				return false
			}
		}
		segments++
		if dot < 0 {
			break
		}
		s = s[dot+1:]
	}
	return segments >= 2
}

// isPayloadType: ^[a-zA-Z][a-zA-Z0-9]*(\.[a-zA-Z][a-zA-Z0-9]*)*(\/[a-zA-Z][a-zA-Z0-9_-]*)*$
//
// Dot segments of letters and digits, then slash segments that may also
// hold '_' and '-'; every segment starts with a letter. A dot after the
// first slash cannot match.
func isPayloadType(s string) bool {
	path := ""
	if slash := strings.IndexByte(s, '/'); slash >= 0 {
		s, path = s[:slash], s[slash:]
	}
	for {
		dot := strings.IndexByte(s, '.')
		seg := s
		if dot >= 0 {
			seg = s[:dot]
		}
		if len(seg) == 0 || !isAlpha(seg[0]) {
			return false
		}
		for i := 1; i < len(seg); i++ {
			if !isAlnum(seg[i]) {
				return false
			}
		}
		if dot < 0 {
			break
		}
		s = s[dot+1:]
	}
	for len(path) > 0 { // path = ("/" seg)+
		path = path[1:]
		end := strings.IndexByte(path, '/')
		seg := path
		if end >= 0 {
			seg = path[:end]
		}
		if len(seg) == 0 || !isAlpha(seg[0]) {
			return false
		}
		for i := 1; i < len(seg); i++ {
			if c := seg[i]; !isAlnum(c) && c != '_' && c != '-' {
				return false
			}
		}
		if end < 0 {
			break
		}
		path = path[end:]
	}
	return true
}

// isPrintableASCII: ^[ -~]+$ (the caller checks non-emptiness).
func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// isUpper2: ^[A-Z]{2}$
func isUpper2(s string) bool {
	return len(s) == 2 && 'A' <= s[0] && s[0] <= 'Z' && 'A' <= s[1] && s[1] <= 'Z'
}
