package aais

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"unicode/utf8"
)

// This file is a hand-written decision procedure for aais-1.0.schema.json.
// It answers only "certainly valid" (fastValid returns true, and the full
// validator would report no error) or "don't know" (false), in which case
// schemaIssues runs the full validator, which alone produces issues.
//
// Soundness is the only requirement: the procedure must never accept an
// instance that the full schema rejects. It is written against the exact
// bytes of schema/aais-1.0.schema.json; when the embedded file changes,
// fastPathEnabled turns the fast path off until the procedure is
// re-audited and fastPathPin updated (TestFastPathPinned fails until then).
//
// It follows the schema as the validator (santhosh-tekuri/jsonschema v6,
// draft 2020-12, format assertion on) evaluates it:
//
//   - oneOf over the five envelopes: every envelope requires "type" (base)
//     and constrains it to its own const, so a document matches at most the
//     envelope its "type" names, and only that one is checked.
//   - unevaluatedProperties: false over allOf[base, kind]: the top-level
//     members are exactly base's properties and the kind's body member.
//   - additionalProperties: false everywhere else; "arguments",
//     "scope_constraints" and extension values are only type-checked, as the
//     validator never descends into them.
//   - minLength/maxLength count code points (utf8.RuneCount, each invalid
//     byte counting as one), exactly as the validator does.
//   - patterns are Go RE2 and match as written: ^...$ anchors the whole
//     string ($ without (?m) matches only at the end of the text), and the
//     extension-name pattern is anchored only at the start. Each checker's
//     comment quotes the pattern it implements.
//   - format date-time is the validator's validateDateTime; isDateTime
//     accepts a strict subset of it (see there).
//
// What it declines (leaving the verdict to the full validator), although
// the schema may accept it: integers ("sequence", "as_of_sequence") written
// other than as plain digits (41.0, 4.1e1, -0, leading zeros) or held in
// Go floats; date-times with a leap second (":60") or with anything other
// than ASCII digits where numbers go; values of Go types other than those
// jcs.Decode produces (and Go integers for the integer members); and the
// schema being disabled by a pin mismatch or a compile failure.

// fastPathPin is the SHA-256 of schema/aais-1.0.schema.json the procedure
// was audited against.
const fastPathPin = "c2679588d4a9199e227d1cf9fd3b8f5cdfcf4973e1cb5714bd8316cb043d9cfa"

// fastPathUsable reports whether schema is exactly the audited file and
// the compiled schemas are usable. A compile error disables the fast path
// so that schemaIssues still reports it to every caller (fail closed).
func fastPathUsable(schema []byte, compileErr error) bool {
	if compileErr != nil {
		return false
	}
	sum := sha256.Sum256(schema)
	return hex.EncodeToString(sum[:]) == fastPathPin
}

// fastPathEnabled is decided once, over the embedded schema.
var fastPathEnabled = sync.OnceValue(func() bool {
	_, err := schemas()
	return fastPathUsable(schemaJSON, err)
})

// fastValid reports whether doc is certainly valid under the embedded
// schema. False means "not decided here".
func fastValid(doc any) bool {
	return fastPathEnabled() && fastEnvelope(doc)
}

// Members of the base definition, as bits.
const (
	baseAAIS = 1 << iota
	baseType
	baseID
	baseOccurredAt
	baseSequence
	baseBody // the kind's required body member

	baseRequired = baseAAIS | baseType | baseID | baseOccurredAt | baseSequence | baseBody
)

// fastEnvelope: one of the five envelopes, chosen by "type".
func fastEnvelope(doc any) bool {
	m, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	t, _ := m["type"].(string)
	var (
		bodyName string
		body     func(any) bool
	)
	switch t {
	case "approval.requested":
		bodyName, body = "request", fastRequest
	case "approval.decided":
		bodyName, body = "decision", fastDecision
	case "approval.resolved":
		bodyName, body = "resolution", fastResolution
	case "approval.snapshot":
		bodyName, body = "snapshot", fastSnapshot
	case "approval.activity":
		bodyName, body = "activity", fastActivity
	default:
		return false
	}
	have := 0
	for k, v := range m {
		switch k {
		case "aais": // const "1.0"
			if s, ok := v.(string); !ok || s != "1.0" {
				return false
			}
			have |= baseAAIS
		case "type": // checked above
			have |= baseType
		case "id":
			if !isIDValue(v) {
				return false
			}
			have |= baseID
		case "occurred_at":
			if !isTimestampValue(v) {
				return false
			}
			have |= baseOccurredAt
		case "sequence":
			if !isNonNegativeInteger(v) {
				return false
			}
			have |= baseSequence
		case "stream":
			if !isIDValue(v) {
				return false
			}
		case "extensions":
			if !fastExtensions(v) {
				return false
			}
		default:
			// unevaluatedProperties: false; another kind's body member is
			// unevaluated too.
			if k != bodyName || !body(v) {
				return false
			}
			have |= baseBody
		}
	}
	return have == baseRequired
}

// fastRequest: $defs/request.
func fastRequest(v any) bool {
	r, ok := v.(map[string]any)
	if !ok {
		return false
	}
	const (
		id = 1 << iota
		createdAt
		status
		origin
		action
		actionDigest
		risk
		choices
		required = id | createdAt | status | origin | action | actionDigest | risk | choices
	)
	have := 0
	for k, v := range r {
		switch k {
		case "id":
			if !isIDValue(v) {
				return false
			}
			have |= id
		case "created_at":
			if !isTimestampValue(v) {
				return false
			}
			have |= createdAt
		case "expires_at":
			if !isTimestampValue(v) {
				return false
			}
		case "status": // const "pending"
			if s, ok := v.(string); !ok || s != "pending" {
				return false
			}
			have |= status
		case "origin":
			if !fastOrigin(v) {
				return false
			}
			have |= origin
		case "action":
			if !fastAction(v) {
				return false
			}
			have |= action
		case "action_digest":
			if !isDigestValue(v) {
				return false
			}
			have |= actionDigest
		case "risk":
			if !fastRisk(v) {
				return false
			}
			have |= risk
		case "choices": // 1 to 10 choices
			a, ok := v.([]any)
			if !ok || len(a) < 1 || len(a) > 10 {
				return false
			}
			for _, c := range a {
				if !fastChoice(c) {
					return false
				}
			}
			have |= choices
		case "extensions":
			if !fastExtensions(v) {
				return false
			}
		default: // additionalProperties: false
			return false
		}
	}
	return have == required
}

// fastOrigin: $defs/origin.
func fastOrigin(v any) bool {
	o, ok := v.(map[string]any)
	if !ok {
		return false
	}
	const (
		harness = 1 << iota
		sessionID
		required = harness | sessionID
	)
	have := 0
	for k, v := range o {
		switch k {
		case "harness":
			have |= harness
		case "session_id":
			have |= sessionID
		case "run_id", "task_id", "graph_id", "node_id", "agent_id", "profile",
			"subagent_run_id", "parent_run_id":
		case "project":
			if !isStringLen(v, 4096) {
				return false
			}
			continue
		default: // additionalProperties: false
			return false
		}
		if !isIDValue(v) {
			return false
		}
	}
	return have == required
}

// fastAction: $defs/action.
func fastAction(v any) bool {
	a, ok := v.(map[string]any)
	if !ok {
		return false
	}
	const (
		kind = 1 << iota
		name
		summary
		arguments
		required = kind | name | summary | arguments
	)
	have := 0
	for k, v := range a {
		switch k {
		case "kind":
			if !isIDValue(v) {
				return false
			}
			have |= kind
		case "name":
			if !isIDValue(v) {
				return false
			}
			have |= name
		case "summary":
			if !isStringLen(v, 1000) {
				return false
			}
			have |= summary
		case "arguments": // type object, members unconstrained
			if _, ok := v.(map[string]any); !ok {
				return false
			}
			have |= arguments
		case "resource", "working_directory":
			if !isStringLen(v, 4096) {
				return false
			}
		case "effects": // at most 100 strings of 1 to 1000 characters
			e, ok := v.([]any)
			if !ok || len(e) > 100 {
				return false
			}
			for _, s := range e {
				if !isStringLen(s, 1000) {
					return false
				}
			}
		case "presentation":
			if !fastPresentation(v) {
				return false
			}
		default: // additionalProperties: false
			return false
		}
	}
	return have == required
}

// fastPresentation: $defs/presentation, with its conditional: redacted
// true requires binding_hint.
func fastPresentation(v any) bool {
	p, ok := v.(map[string]any)
	if !ok {
		return false
	}
	redacted, hasHint := false, false
	for k, v := range p {
		switch k {
		case "redacted":
			if redacted, ok = v.(bool); !ok {
				return false
			}
		case "binding_hint":
			if !isStringLen(v, 1000) {
				return false
			}
			hasHint = true
		case "details":
			if !isStringLen(v, 10000) {
				return false
			}
		default: // additionalProperties: false
			return false
		}
	}
	return !redacted || hasHint
}

// fastRisk: $defs/risk.
func fastRisk(v any) bool {
	r, ok := v.(map[string]any)
	if !ok {
		return false
	}
	const (
		level = 1 << iota
		reasons
		required = level | reasons
	)
	have := 0
	for k, v := range r {
		switch k {
		case "level":
			switch s, _ := v.(string); s {
			case "low", "medium", "high", "critical":
			default:
				return false
			}
			have |= level
		case "reasons": // 1 to 20 strings of 1 to 1000 characters
			a, ok := v.([]any)
			if !ok || len(a) < 1 || len(a) > 20 {
				return false
			}
			for _, s := range a {
				if !isStringLen(s, 1000) {
					return false
				}
			}
			have |= reasons
		default: // additionalProperties: false
			return false
		}
	}
	return have == required
}

// fastChoice: $defs/choice, with its conditionals: deny and cancel take
// scope "once"; session and persistent scopes require scope_constraints.
func fastChoice(v any) bool {
	c, ok := v.(map[string]any)
	if !ok {
		return false
	}
	var decision, scope string
	hasLabel, hasConstraints := false, false
	for k, v := range c {
		switch k {
		case "decision":
			if decision, ok = v.(string); !ok || !isDecisionEnum(decision) {
				return false
			}
		case "scope":
			if scope, ok = v.(string); !ok || !isScopeEnum(scope) {
				return false
			}
		case "label":
			if !isStringLen(v, 200) {
				return false
			}
			hasLabel = true
		case "scope_constraints": // type object, minProperties 1
			sc, ok := v.(map[string]any)
			if !ok || len(sc) < 1 {
				return false
			}
			hasConstraints = true
		default: // additionalProperties: false
			return false
		}
	}
	if decision == "" || scope == "" || !hasLabel {
		return false
	}
	if decision != "approve" && scope != "once" {
		return false
	}
	return scope == "once" || hasConstraints
}

// fastDecision: $defs/decision, with its conditional: deny and cancel take
// scope "once".
func fastDecision(v any) bool {
	d, ok := v.(map[string]any)
	if !ok {
		return false
	}
	const (
		id = 1 << iota
		requestID
		actionDigest
		decidedAt
		actor
		required = id | requestID | actionDigest | decidedAt | actor
	)
	var decision, scope string
	have := 0
	for k, v := range d {
		switch k {
		case "id":
			if !isIDValue(v) {
				return false
			}
			have |= id
		case "request_id":
			if !isIDValue(v) {
				return false
			}
			have |= requestID
		case "action_digest":
			if !isDigestValue(v) {
				return false
			}
			have |= actionDigest
		case "decided_at":
			if !isTimestampValue(v) {
				return false
			}
			have |= decidedAt
		case "decision":
			if decision, ok = v.(string); !ok || !isDecisionEnum(decision) {
				return false
			}
		case "scope":
			if scope, ok = v.(string); !ok || !isScopeEnum(scope) {
				return false
			}
		case "actor":
			if !fastActor(v) {
				return false
			}
			have |= actor
		case "extensions":
			if !fastExtensions(v) {
				return false
			}
		default: // additionalProperties: false
			return false
		}
	}
	if have != required || decision == "" || scope == "" {
		return false
	}
	return decision == "approve" || scope == "once"
}

// fastActor: $defs/actor.
func fastActor(v any) bool {
	a, ok := v.(map[string]any)
	if !ok {
		return false
	}
	const (
		id = 1 << iota
		typ
		required = id | typ
	)
	have := 0
	for k, v := range a {
		switch k {
		case "id":
			if !isIDValue(v) {
				return false
			}
			have |= id
		case "type":
			switch s, _ := v.(string); s {
			case "human", "policy":
			default:
				return false
			}
			have |= typ
		case "display_name", "authenticated_by":
			if !isStringLen(v, 200) {
				return false
			}
		default: // additionalProperties: false
			return false
		}
	}
	return have == required
}

// fastResolution: $defs/resolution.
func fastResolution(v any) bool {
	r, ok := v.(map[string]any)
	if !ok {
		return false
	}
	const (
		id = 1 << iota
		requestID
		actionDigest
		resolvedAt
		outcome
		message
		required = id | requestID | actionDigest | resolvedAt | outcome | message
	)
	have := 0
	for k, v := range r {
		switch k {
		case "id":
			if !isIDValue(v) {
				return false
			}
			have |= id
		case "request_id":
			if !isIDValue(v) {
				return false
			}
			have |= requestID
		case "decision_id":
			if !isIDValue(v) {
				return false
			}
		case "action_digest":
			if !isDigestValue(v) {
				return false
			}
			have |= actionDigest
		case "resolved_at":
			if !isTimestampValue(v) {
				return false
			}
			have |= resolvedAt
		case "outcome":
			switch s, _ := v.(string); s {
			case "approved", "denied", "cancelled", "expired", "stale", "conflict", "invalid":
			default:
				return false
			}
			have |= outcome
		case "message":
			if !isStringLen(v, 2000) {
				return false
			}
			have |= message
		case "effective_scope":
			if s, ok := v.(string); !ok || !isScopeEnum(s) {
				return false
			}
		case "extensions":
			if !fastExtensions(v) {
				return false
			}
		default: // additionalProperties: false
			return false
		}
	}
	return have == required
}

// fastSnapshot: the snapshot envelope's body: as_of_sequence and the
// pending requests, each a $defs/request.
func fastSnapshot(v any) bool {
	s, ok := v.(map[string]any)
	if !ok {
		return false
	}
	const (
		asOf = 1 << iota
		pending
		required = asOf | pending
	)
	have := 0
	for k, v := range s {
		switch k {
		case "as_of_sequence":
			if !isNonNegativeInteger(v) {
				return false
			}
			have |= asOf
		case "pending":
			a, ok := v.([]any)
			if !ok {
				return false
			}
			for _, r := range a {
				if !fastRequest(r) {
					return false
				}
			}
			have |= pending
		default: // additionalProperties: false
			return false
		}
	}
	return have == required
}

// fastActivity: the activity envelope's body.
func fastActivity(v any) bool {
	a, ok := v.(map[string]any)
	if !ok {
		return false
	}
	const (
		requestID = 1 << iota
		message
		required = requestID | message
	)
	have := 0
	for k, v := range a {
		switch k {
		case "request_id":
			if !isIDValue(v) {
				return false
			}
			have |= requestID
		case "message":
			if !isStringLen(v, 2000) {
				return false
			}
			have |= message
		case "stage":
			if !isIDValue(v) {
				return false
			}
		default: // additionalProperties: false
			return false
		}
	}
	return have == required
}

// fastExtensions: $defs/extensions: an object whose member names match
// the propertyNames pattern; the values are unconstrained.
func fastExtensions(v any) bool {
	e, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for name := range e {
		if !isExtensionName(name) {
			return false
		}
	}
	return true
}

func isDecisionEnum(s string) bool {
	return s == "approve" || s == "deny" || s == "cancel"
}

func isScopeEnum(s string) bool {
	return s == "once" || s == "session" || s == "persistent"
}

// isStringLen: {type: string, minLength: 1, maxLength: max}, lengths in
// code points as the validator counts them (utf8.RuneCount: each invalid
// byte is one). A string of at most max bytes has at most max code points.
func isStringLen(v any, max int) bool {
	s, ok := v.(string)
	if !ok || len(s) == 0 {
		return false
	}
	return len(s) <= max || utf8.RuneCountInString(s) <= max
}

// isIDValue: $defs/id: {type: string, minLength: 1, maxLength: 200,
// pattern: ^[A-Za-z0-9][A-Za-z0-9._:-]*$}. The pattern admits ASCII only,
// so bytes are code points.
func isIDValue(v any) bool {
	s, ok := v.(string)
	return ok && isID(s)
}

func isID(s string) bool {
	if len(s) < 1 || len(s) > 200 || !isAlnumByte(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case isAlnumByte(c), c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// isDigestValue: {type: string, pattern: ^sha256:[0-9a-f]{64}$}.
func isDigestValue(v any) bool {
	s, ok := v.(string)
	return ok && isDigestPattern(s)
}

func isDigestPattern(s string) bool {
	const prefix = "sha256:"
	if len(s) != len(prefix)+64 || s[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		if c := s[i]; !isDigitByte(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isExtensionName: ^(https?://|[A-Za-z0-9-]+\.[A-Za-z0-9.-]+/), anchored
// at the start only, so anything may follow the match.
//
// The second alternative is deterministic: [A-Za-z0-9-]+ cannot consume a
// dot, so the \. is the first byte outside that class; [A-Za-z0-9.-]+
// cannot consume a slash, so the / is the first byte outside that class
// after the dot.
func isExtensionName(s string) bool {
	if len(s) >= 7 && s[:7] == "http://" || len(s) >= 8 && s[:8] == "https://" {
		return true
	}
	i := 0
	for i < len(s) && (isAlnumByte(s[i]) || s[i] == '-') {
		i++
	}
	if i == 0 || i == len(s) || s[i] != '.' {
		return false
	}
	i++
	j := i
	for j < len(s) && (isAlnumByte(s[j]) || s[j] == '.' || s[j] == '-') {
		j++
	}
	return j > i && j < len(s) && s[j] == '/'
}

// isNonNegativeInteger: {type: integer, minimum: 0}, for the spellings the
// fast path decides: a json.Number of plain decimal digits without leading
// zeros, or a non-negative Go integer. Other spellings the schema accepts
// (41.0, 4.1e1, -0) and Go floats are left to the full validator.
func isNonNegativeInteger(v any) bool {
	switch n := v.(type) {
	case json.Number:
		s := string(n)
		if len(s) == 0 || len(s) > 1 && s[0] == '0' {
			return false
		}
		for i := 0; i < len(s); i++ {
			if !isDigitByte(s[i]) {
				return false
			}
		}
		return true
	case int:
		return n >= 0
	case int8:
		return n >= 0
	case int16:
		return n >= 0
	case int32:
		return n >= 0
	case int64:
		return n >= 0
	case uint, uint8, uint16, uint32, uint64:
		return true
	}
	return false
}

// isTimestampValue: $defs/timestamp: {type: string, format: date-time}.
func isTimestampValue(v any) bool {
	s, ok := v.(string)
	return ok && isDateTime(s)
}

// isDateTime accepts a subset of what the validator's date-time format
// (validateDateTime in jsonschema v6.0.3 format.go) accepts:
//
//	dddd-dd-dd[Tt]dd:dd:dd(\.d+)?([Zz]|[+-]dd:dd)
//
// with every d an ASCII digit, a real calendar date (the proleptic
// Gregorian calendar of time.Parse, year 0000 to 9999), hour 00-23, minute
// 00-59, second 00-59 and an offset of at most 23:59. The validator's
// date is time.Parse("2006-01-02"); its time fields go through
// strconv.Atoi, which would also take signs; and a second of 60 is a leap
// second it checks against the UTC time. Those are declined here.
func isDateTime(s string) bool {
	// yyyy-mm-ddThh:mm:ss is 19 bytes; at least one more for the zone.
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' && s[10] != 't' ||
		s[13] != ':' || s[16] != ':' {
		return false
	}
	year, ok1 := digits4(s[0:4])
	month, ok2 := digits2(s[5:7])
	day, ok3 := digits2(s[8:10])
	hour, ok4 := digits2(s[11:13])
	minute, ok5 := digits2(s[14:16])
	second, ok6 := digits2(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return false
	}
	if month < 1 || month > 12 || day < 1 || day > daysInMonth(month, year) ||
		hour > 23 || minute > 59 || second > 59 {
		return false
	}
	rest := s[19:]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && isDigitByte(rest[n]) {
			n++
		}
		if n == 1 {
			return false
		}
		rest = rest[n:]
	}
	switch {
	case rest == "Z" || rest == "z":
		return true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		zh, ok1 := digits2(rest[1:3])
		zm, ok2 := digits2(rest[4:6])
		return ok1 && ok2 && zh <= 23 && zm <= 59
	}
	return false
}

func daysInMonth(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func digits2(s string) (int, bool) {
	if !isDigitByte(s[0]) || !isDigitByte(s[1]) {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}

func digits4(s string) (int, bool) {
	hi, ok1 := digits2(s[:2])
	lo, ok2 := digits2(s[2:])
	return hi*100 + lo, ok1 && ok2
}

func isDigitByte(c byte) bool { return '0' <= c && c <= '9' }

func isAlnumByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
