package arsia

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// baseEnvelope is an L2-valid signed request in generic form.
func baseEnvelope(t testing.TB) map[string]any {
	t.Helper()
	m, err := ParseEnvelope([]byte(`{
		"v": "1.0", "id": "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", "ts": "2026-03-24T10:00:00.000Z",
		"from": "agent:acme.echo-client", "to": "agent:acme.echo-server", "intent": "request",
		"expires_at": "2026-03-24T10:00:30.000Z", "capabilities": ["echo.ping"],
		"idempotency": {"key": "k-1", "expires_at": "2026-03-24T11:00:00.000Z"},
		"payload": {"type": "com.acme.echo/ping", "args": {"message": "hello", "n": 1.50}},
		"security": {"alg": "EdDSA", "kid": "agent:acme.echo-client#key1", "sig": "P4UV8EGxaFLuun-kmdTxFgjd_w"}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func issueCodes(issues []Issue) []string {
	out := make([]string, len(issues))
	for i, is := range issues {
		out[i] = is.Code
	}
	return out
}

func TestValidateSemanticValid(t *testing.T) {
	env := baseEnvelope(t)
	if issues := ValidateSemantic(env, SemanticOptions{}); len(issues) != 0 {
		t.Fatalf("base envelope: %v", issues)
	}
	for _, intent := range Intents() {
		e := maps.Clone(env)
		e["intent"] = string(intent)
		e["correlation_id"] = "b1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
		if intent == IntentError {
			e["payload"] = map[string]any{"type": "org.arsiaprotocol.error", "error": map[string]any{"code": "not_found", "description": "No."}}
		}
		if issues := ValidateSemantic(e, SemanticOptions{}); len(issues) != 0 {
			t.Errorf("%s: %v", intent, issues)
		}
	}
}

func TestValidateSemanticRules(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(e map[string]any)
		code    string
		message string // substring of the issue's message
	}{
		{"from missing", func(e map[string]any) { delete(e, "from") }, IssueInvalidFromAgentID, "'from' is not a valid ARSIA agent identifier: missing"},
		{"from no prefix", func(e map[string]any) { e["from"] = "echo-client" }, IssueInvalidFromAgentID, "'from' is not a valid ARSIA agent identifier: 'echo-client' must start with the 'agent:' prefix"},
		{"from not string", func(e map[string]any) { e["from"] = json.Number("7") }, IssueInvalidFromAgentID, "7 is not a string"},
		{"to invalid", func(e map[string]any) { e["to"] = "agent:acme" }, IssueInvalidToAgentID, "'to' is not a valid ARSIA agent identifier"},
		{"intent unknown", func(e map[string]any) { e["intent"] = "command" }, IssueInvalidIntent, "got 'command'"},
		{"intent missing", func(e map[string]any) { delete(e, "intent") }, IssueInvalidIntent, "got None"},
		{"min_v too new", func(e map[string]any) { e["min_v"] = "1.1" }, IssueUnsupportedMinV, "min_v '1.1' is above the supported protocol version '1.0'"},
		{"min_v bad", func(e map[string]any) { e["min_v"] = 1 }, IssueUnsupportedMinV, "not a valid protocol version"},
		{"v major 2", func(e map[string]any) { e["v"] = "2.0" }, IssueUnsupportedProtocolVersion, "major version 2"},
		{"v missing", func(e map[string]any) { delete(e, "v") }, IssueUnsupportedProtocolVersion, "not a valid version"},
		{"expires_at missing", func(e map[string]any) { delete(e, "expires_at") }, IssueMissingExpiresAt, "expires_at is required when intent='request'"},
		{"pending expires_at", func(e map[string]any) {
			e["intent"], e["correlation_id"] = "pending_approval", "b1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
			delete(e, "expires_at")
		}, IssueMissingExpiresAt, "expires_at is required when intent='pending_approval'"},
		{"caps missing", func(e map[string]any) { delete(e, "capabilities") }, IssueMissingCapabilities, "capabilities is required when intent='request'"},
		{"decision caps missing", func(e map[string]any) {
			e["intent"], e["correlation_id"] = "approval_decision", "b1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
			delete(e, "capabilities")
		}, IssueMissingCapabilities, "intent='approval_decision'"},
		{"caps empty", func(e map[string]any) { e["capabilities"] = []any{} }, IssueEmptyCapabilities, "must not be empty"},
		{"caps dup", func(e map[string]any) { e["capabilities"] = []any{"a.b", "c.d", "a.b"} }, IssueDuplicateCapabilities, "['a.b']"},
		{"cap single segment", func(e map[string]any) { e["capabilities"] = []any{"notes"} }, IssueInvalidCapabilityFormat, "capability 'notes'"},
		{"cap wildcard", func(e map[string]any) { e["capabilities"] = []any{"notes.*"} }, IssueInvalidCapabilityFormat, "wildcard"},
		{"cap not string", func(e map[string]any) { e["capabilities"] = []any{true} }, IssueInvalidCapabilityFormat, "True is not a string"},
		{"caps not list", func(e map[string]any) { e["capabilities"] = "a.b" }, IssueInvalidCapabilityFormat, "array of strings"},
		{"correlation missing", func(e map[string]any) { e["intent"] = "response" }, IssueMissingCorrelationID, "correlation_id is required when intent='response'"},
		{"correlation empty", func(e map[string]any) { e["intent"], e["correlation_id"] = "error", "" }, IssueMissingCorrelationID, "non-empty"},
		{"error payload missing", func(e map[string]any) {
			e["intent"], e["correlation_id"] = "error", "b1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
			delete(e, "payload")
		}, IssueMissingErrorPayload, "payload object is required"},
		{"error object missing", func(e map[string]any) {
			e["intent"], e["correlation_id"] = "error", "b1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
		}, IssueMissingErrorObject, "payload.error object is required"},
		{"error code missing", func(e map[string]any) {
			e["intent"], e["correlation_id"] = "error", "b1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
			e["payload"] = map[string]any{"type": "x.y", "error": map[string]any{"description": "d"}}
		}, IssueMissingErrorCode, "payload.error.code"},
		{"error description missing", func(e map[string]any) {
			e["intent"], e["correlation_id"] = "error", "b1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
			e["payload"] = map[string]any{"type": "x.y", "error": map[string]any{"code": "not_found"}}
		}, IssueMissingErrorDescription, "payload.error.description"},
		{"expires_at equal", func(e map[string]any) { e["expires_at"] = e["ts"] }, IssueExpiresAtNotAfterTS, "must be after ts '2026-03-24T10:00:00.000Z'"},
		{"expires_at before", func(e map[string]any) { e["expires_at"] = "2026-03-24T09:00:00.000Z" }, IssueExpiresAtNotAfterTS, "must be after ts"},
		{"expires_at malformed", func(e map[string]any) { e["expires_at"] = "soon" }, IssueExpiresAtNotAfterTS, "not a valid timestamp"},
		{"ts malformed", func(e map[string]any) { e["ts"] = "2026-03-24T10:00:00Z" }, IssueExpiresAtNotAfterTS, "ts '2026-03-24T10:00:00Z' is not a valid timestamp"},
		{"idempotency expiry", func(e map[string]any) {
			e["idempotency"] = map[string]any{"key": "k", "expires_at": "2026-03-24T10:00:00.000Z"}
		}, IssueIdempotencyExpiresAtNotAfterTS, "idempotency.expires_at"},
		{"idempotency key tab", func(e map[string]any) {
			e["idempotency"] = map[string]any{"key": "ab\tcd", "expires_at": "2026-03-24T11:00:00.000Z"}
		}, IssueIdempotencyKeyInvalidChar, "U+0009"},
		{"idempotency key unicode", func(e map[string]any) {
			e["idempotency"] = map[string]any{"key": "clé", "expires_at": "2026-03-24T11:00:00.000Z"}
		}, IssueIdempotencyKeyInvalidChar, "U+00E9 at position 2"},
		{"idempotency key type", func(e map[string]any) {
			e["idempotency"] = map[string]any{"key": 5, "expires_at": "2026-03-24T11:00:00.000Z"}
		}, IssueIdempotencyKeyInvalidChar, "must be a string"},
		{"kid mismatch", func(e map[string]any) {
			e["security"] = map[string]any{"alg": "EdDSA", "kid": "agent:other.agent#key1", "sig": "abc"}
		}, IssueKidPrefixMismatch, "security.kid 'agent:other.agent#key1' must start with 'agent:acme.echo-client#'"},
		{"kid prefix without hash", func(e map[string]any) {
			e["security"] = map[string]any{"alg": "EdDSA", "kid": "agent:acme.echo-client-evil#k", "sig": "abc"}
		}, IssueKidPrefixMismatch, "must start with"},
		{"kid missing", func(e map[string]any) { e["security"] = map[string]any{"alg": "EdDSA", "sig": "abc"} }, IssueKidPrefixMismatch, "security.kid"},
		{"security not object", func(e map[string]any) { e["security"] = "x" }, IssueKidPrefixMismatch, "security must be an object"},
		{"sig padded", func(e map[string]any) {
			e["security"] = map[string]any{"alg": "EdDSA", "kid": "agent:acme.echo-client#key1", "sig": "abc="}
		}, IssueInvalidSigEncoding, "base64url"},
		{"sig std alphabet", func(e map[string]any) {
			e["security"] = map[string]any{"alg": "EdDSA", "kid": "agent:acme.echo-client#key1", "sig": "ab+/"}
		}, IssueInvalidSigEncoding, "base64url"},
		{"sig empty", func(e map[string]any) {
			e["security"] = map[string]any{"alg": "EdDSA", "kid": "agent:acme.echo-client#key1", "sig": ""}
		}, IssueInvalidSigEncoding, "base64url"},
	}
	for _, tc := range tests {
		env := baseEnvelope(t)
		tc.mod(env)
		issues := ValidateSemantic(env, SemanticOptions{})
		var hit *Issue
		for i := range issues {
			if issues[i].Code == tc.code && strings.Contains(issues[i].Message, tc.message) {
				hit = &issues[i]
			}
		}
		if hit == nil {
			t.Errorf("%s: want %s with %q, got %v", tc.name, tc.code, tc.message, issues)
			continue
		}
		if hit.Severity != SeverityError || hit.Pointer == "" {
			t.Errorf("%s: issue %+v", tc.name, *hit)
		}
	}
}

func TestValidateSemanticPayloadRegistry(t *testing.T) {
	env := baseEnvelope(t)
	known := func(pt string) bool { return pt == "com.acme.echo/ping" }
	if issues := ValidateSemantic(env, SemanticOptions{KnownPayloadType: known}); len(issues) != 0 {
		t.Errorf("known type: %v", issues)
	}
	env["payload"] = map[string]any{"type": "com.acme.other/thing"}
	issues := ValidateSemantic(env, SemanticOptions{KnownPayloadType: known})
	if !slices.Equal(issueCodes(issues), []string{IssueUnrecognisedPayloadType}) || WireCode(issues[0].Code) != CodeNotImplemented {
		t.Errorf("unknown type: %v", issues)
	}
	if issues := ValidateSemantic(env, SemanticOptions{}); len(issues) != 0 {
		t.Errorf("no registry: %v", issues)
	}
}

func TestValidateSemanticOrder(t *testing.T) {
	env := map[string]any{
		"v": "2.0", "ts": "2026-03-24T10:00:00.000Z", "from": "bad", "to": "bad", "intent": "request",
		"min_v": "9.0", "capabilities": []any{"x", "x"}, "expires_at": "2026-03-24T09:00:00.000Z",
		"idempotency": map[string]any{"key": "\x00", "expires_at": "2026-03-24T09:00:00.000Z"},
		"security":    map[string]any{"kid": "k", "sig": "="},
	}
	want := []string{IssueInvalidFromAgentID, IssueInvalidToAgentID, IssueUnsupportedMinV, IssueUnsupportedProtocolVersion,
		IssueDuplicateCapabilities, IssueInvalidCapabilityFormat, IssueInvalidCapabilityFormat, IssueExpiresAtNotAfterTS,
		IssueIdempotencyExpiresAtNotAfterTS, IssueIdempotencyKeyInvalidChar, IssueKidPrefixMismatch, IssueInvalidSigEncoding}
	if got := issueCodes(ValidateSemantic(env, SemanticOptions{})); !slices.Equal(got, want) {
		t.Errorf("order:\n got  %v\n want %v", got, want)
	}
}

func TestValidateSemanticHostileTypes(t *testing.T) {
	values := []any{nil, true, json.Number("1e2"), 3.5, 7, "s", []any{}, []any{nil, map[string]any{}}, map[string]any{}, map[string]any{"kid": []any{}}}
	keys := []string{"v", "id", "ts", "from", "to", "intent", "correlation_id", "expires_at", "min_v", "capabilities",
		"idempotency", "context", "payload", "security", "compliance"}
	for _, intent := range append(Intents(), "x") {
		for _, k := range keys {
			for _, v := range values {
				env := baseEnvelope(t)
				env["intent"] = string(intent)
				env[k] = v
				_ = ValidateSemantic(env, SemanticOptions{KnownPayloadType: func(string) bool { return false }})
			}
		}
	}
	if issues := ValidateSemantic(nil, SemanticOptions{}); len(issues) != 1 {
		t.Errorf("nil envelope: %v", issues)
	}
	if got := issueCodes(ValidateSemantic(map[string]any{}, SemanticOptions{})); !slices.Contains(got, IssueInvalidFromAgentID) || !slices.Contains(got, IssueInvalidIntent) {
		t.Errorf("empty envelope: %v", got)
	}
}

func TestCheckIdentityConsistency(t *testing.T) {
	tests := []struct {
		from, kid, identity string
		want                int
		contains            string
	}{
		{"agent:acme.billing", "agent:acme.billing#key-1", "agent:acme.billing", 0, ""},
		{"agent:acme.billing", "agent:acme.billing#key-1", "", 0, ""},
		{"agent:acme.billing", "agent:contoso.crm#key-1", "agent:acme.billing", 2, "kid prefix"},
		{"agent:acme.billing", "agent:acme.billing#key-1", "agent:contoso.crm", 2, "IdentityRecord"},
		{"agent:acme.billing", "agent:contoso.crm#key-1", "agent:contoso.crm", 2, "kid prefix"},
		{"agent:acme.billing", "agent:acme.billing", "", 1, "no '#'"},
	}
	for _, tc := range tests {
		w := CheckIdentityConsistency(tc.from, tc.kid, tc.identity)
		if len(w) != tc.want || (tc.contains != "" && !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, tc.contains) })) {
			t.Errorf("CheckIdentityConsistency(%q, %q, %q) = %q", tc.from, tc.kid, tc.identity, w)
		}
	}
}

func TestValidateReportsSchemaKeyword(t *testing.T) {
	issues := Validate(map[string]any{"v": "1.0"}, ValidateOptions{})
	var found bool
	for _, is := range issues {
		if is.Code == IssueSchemaViolation && is.Keyword == "required" && is.Params["property"] != nil {
			found = true
		}
	}
	if !found {
		t.Fatalf("no required-keyword issue with its property among %+v", issues)
	}
}
