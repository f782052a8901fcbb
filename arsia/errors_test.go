package arsia

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/custos-runtime/custos/asc"
)

func TestWireErrorRegistry(t *testing.T) {
	want := []struct {
		code   string
		status int
		retry  bool
		asc    asc.Code
	}{
		{CodeInvalidRequest, 400, false, asc.InvalidRequest},
		{CodeUnauthorized, 401, false, asc.AuthenticationRequired},
		{CodeForbidden, 403, false, asc.PermissionDenied},
		{CodeNotFound, 404, false, asc.NotFound},
		{CodeConflict, 409, false, asc.Conflict},
		{CodePayloadTooLarge, 413, false, asc.InvalidRequest},
		{CodeRateLimited, 429, true, asc.RateLimited},
		{CodeInternalError, 500, true, asc.InternalError},
		{CodeNotImplemented, 501, false, asc.UnsupportedCapability},
		{CodeServiceUnavailable, 503, true, asc.DependencyUnavailable},
		{CodeCertificateInvalid, 401, false, asc.IntegrityCheckFailed},
		{CodeCertificateExpired, 401, false, asc.IntegrityCheckFailed},
		{CodeKeyMismatch, 401, false, asc.IntegrityCheckFailed},
		{CodeCertificateRevoked, 401, false, asc.IntegrityCheckFailed},
	}
	codes := WireErrorCodes()
	if len(codes) != len(want) {
		t.Fatalf("%d codes", len(codes))
	}
	for i, w := range want {
		info, err := ErrorInfoFor(w.code)
		if err != nil || codes[i] != w.code || info.HTTPStatus != w.status || info.Retryable != w.retry {
			t.Errorf("%s: %+v, %v", w.code, info, err)
		}
		if !isASCIIPrintable(info.Description) {
			t.Errorf("%s: description %q", w.code, info.Description)
		}
		if got := ToASC(w.code); got != w.asc {
			t.Errorf("ToASC(%s) = %d, want %d", w.code, got, w.asc)
		}
		if WireCode(w.code) != w.code || !ValidWireErrorCode(w.code) {
			t.Errorf("WireCode(%s) = %s", w.code, WireCode(w.code))
		}
	}
	if _, err := ErrorInfoFor("not_a_real_code"); !errors.Is(err, ErrUnknownErrorCode) {
		t.Errorf("unknown code: %v", err)
	}
}

func TestCustomErrorCodes(t *testing.T) {
	for _, c := range []string{"com.example.insufficient-funds", "org.acme.x", "a.b-c.d"} {
		if !IsCustomErrorCode(c) || !ValidWireErrorCode(c) || WireCode(c) != c || ToASC(c) != asc.FatalError {
			t.Errorf("%s: custom=%v wire=%s asc=%d", c, IsCustomErrorCode(c), WireCode(c), ToASC(c))
		}
	}
	for _, c := range []string{"", "Com.example.x", "com", "com.1x", "com.example.", "com..x", "com.ex_ample"} {
		if IsCustomErrorCode(c) || ValidWireErrorCode(c) {
			t.Errorf("%q accepted", c)
		}
	}
}

func TestInternalCodeMappings(t *testing.T) {
	tests := []struct {
		code string
		wire string
		asc  asc.Code
	}{
		{IssueInvalidFromAgentID, CodeInvalidRequest, asc.InvalidRequest},
		{IssueUnsupportedMinV, CodeNotImplemented, asc.UnsupportedCapability},
		{IssueUnrecognisedPayloadType, CodeNotImplemented, asc.UnsupportedCapability},
		{IssueKidPrefixMismatch, CodeUnauthorized, asc.IntegrityCheckFailed},
		{IssueInvalidSigEncoding, CodeUnauthorized, asc.IntegrityCheckFailed},
		{"invalid_capability_grammar", CodeInvalidRequest, asc.InvalidRequest},
		{"reserved_prefix_misuse", CodeInvalidRequest, asc.InvalidRequest},
		{"schema_violation", CodeInvalidRequest, asc.InvalidRequest},
		{"missing_legal_basis", CodeInvalidRequest, asc.InvalidRequest},
		{"classification_escalation", CodeForbidden, asc.GuardrailBlocked},
		{"oversight_timeout", CodeForbidden, asc.Timeout},
		{"zone_not_served", CodeServiceUnavailable, asc.DependencyUnavailable},
		{"expiry_too_soon", CodeServiceUnavailable, asc.FailedPrecondition},
		{"token_expired", CodeUnauthorized, asc.AuthenticationRequired},
		{"token_scope_insufficient", CodeForbidden, asc.PermissionDenied},
		{"dpop_replay", CodeUnauthorized, asc.AuthenticationRequired},
		{"signature_invalid", CodeUnauthorized, asc.IntegrityCheckFailed},
		{"decryption_failed", CodeUnauthorized, asc.IntegrityCheckFailed},
		{"idempotency_in_progress", CodeConflict, asc.Conflict},
		{"something_else", CodeInternalError, asc.FatalError},
	}
	for _, tc := range tests {
		if WireCode(tc.code) != tc.wire || ToASC(tc.code) != tc.asc {
			t.Errorf("%s: wire %s asc %d; want %s %d", tc.code, WireCode(tc.code), ToASC(tc.code), tc.wire, tc.asc)
		}
	}
	for code, m := range internalMappings {
		if _, ok := LookupError(m.wire); !ok {
			t.Errorf("%s maps to non-standard wire code %s", code, m.wire)
		}
		if _, ok := asc.Lookup(m.asc); !ok {
			t.Errorf("%s maps to unregistered ASC code %d", code, m.asc)
		}
	}
}

func TestRetryDelays(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second} {
		if got, err := RetryDelay(n); err != nil || got != want {
			t.Errorf("RetryDelay(%d) = %v, %v", n, got, err)
		}
	}
	for _, n := range []int{0, -1, 4, 1 << 30} {
		if _, err := RetryDelay(n); !errors.Is(err, ErrRetryAttempt) {
			t.Errorf("RetryDelay(%d): %v", n, err)
		}
	}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 6: 32 * time.Second, 7: 32 * time.Second, 1 << 30: 32 * time.Second} {
		if got, err := RoutingRetryDelay(n); err != nil || got != want {
			t.Errorf("RoutingRetryDelay(%d) = %v, %v", n, got, err)
		}
	}
	for _, n := range []int{0, -5} {
		if _, err := RoutingRetryDelay(n); !errors.Is(err, ErrRetryAttempt) {
			t.Errorf("RoutingRetryDelay(%d): %v", n, err)
		}
	}
}

func TestErrorType(t *testing.T) {
	cause := errors.New("ed25519: bad signature for key abc")
	e := &Error{Code: "signature_invalid", Description: "Signature of key abc failed", Err: cause}
	wrapped := fmt.Errorf("handling: %w", e)
	var ae *Error
	if !errors.As(wrapped, &ae) || !errors.Is(wrapped, cause) {
		t.Fatal("errors.As/Is through *Error")
	}
	if e.WireCode() != CodeUnauthorized || e.HTTPStatus() != 401 {
		t.Errorf("wire %s %d", e.WireCode(), e.HTTPStatus())
	}
	obj := e.Object()
	if obj["code"] != CodeUnauthorized || obj["description"] != "The sender could not be authenticated." {
		t.Errorf("unauthorized object leaks detail: %v", obj)
	}
	if _, ok := obj["details"]; ok {
		t.Error("details without Details")
	}
	if (&Error{Code: "x"}).Error() != "arsia: x" || (&Error{Code: "x", Err: cause}).Error() != "arsia: x: "+cause.Error() {
		t.Error("Error() text")
	}

	ascErr := e.AsASC()
	if ascErr.Code() != asc.IntegrityCheckFailed || !errors.Is(ascErr, cause) {
		t.Errorf("AsASC code %d", ascErr.Code())
	}
	if err := asc.Validate(&ascErr.Envelope); err != nil {
		t.Errorf("ASC envelope invalid: %v", err)
	}
	info := ascErr.Envelope.Details[ErrorDetailsKey].(map[string]any)
	if info["code"] != "signature_invalid" || info["wire_code"] != CodeUnauthorized {
		t.Errorf("details %v", info)
	}
	if ascErr.Envelope.Message.Developer != obj["description"] {
		t.Errorf("developer message %q", ascErr.Envelope.Message.Developer)
	}

	rl := &Error{Code: CodeRateLimited, Description: "Slow down.", Details: map[string]any{"retry_after_seconds": 30}}
	ae2 := rl.AsASCScope(asc.ScopeToolCall)
	if ae2.Code() != asc.RateLimited || ae2.Envelope.Retry == nil || ae2.Envelope.Retry.AfterMS != 30000 || ae2.Envelope.Status.Scope != asc.ScopeToolCall {
		t.Errorf("rate limited ASC: %+v", ae2.Envelope)
	}
	if err := asc.Validate(&ae2.Envelope); err != nil {
		t.Errorf("ASC envelope invalid: %v", err)
	}
	var nilErr *Error
	if nilErr.AsASC() != nil {
		t.Error("nil AsASC")
	}
}

func TestCheckErrorDetails(t *testing.T) {
	tests := []struct {
		code    string
		details map[string]any
		ok      bool
	}{
		{CodeInvalidRequest, nil, true},
		{CodeForbidden, nil, false},
		{CodeForbidden, map[string]any{"required_capabilities": []any{}}, true},
		{CodeNotImplemented, map[string]any{}, false},
		{CodeNotImplemented, map[string]any{"supported_versions": map[string]any{"min": "1.0"}}, false},
		{CodeNotImplemented, map[string]any{"supported_versions": map[string]any{"min": "1.0", "max": "1.0"}}, true},
		{CodeCertificateExpired, map[string]any{"x": 1}, false},
		{CodeCertificateExpired, map[string]any{"reason": "expired"}, true},
		{"com.example.x", nil, true},
		{"bogus", nil, false},
	}
	for _, tc := range tests {
		if err := CheckErrorDetails(tc.code, tc.details); (err == nil) != tc.ok {
			t.Errorf("CheckErrorDetails(%s, %v) = %v", tc.code, tc.details, err)
		}
	}
}

func TestPyRepr(t *testing.T) {
	tests := map[string]any{
		"'abc'":         "abc",
		`"it's"`:        "it's",
		`'a"b\'c'`:      `a"b'c`,
		`'a\\b\n\x01'`:  "a\\b\n\x01",
		"'é'":           "é",
		`'\x85'`:        "\u0085",
		"True":          true,
		"None":          nil,
		"1.0":           1.0,
		"1e+16":         1e16,
		"1.5e-05":       0.000015,
		"0.93":          0.93,
		"11":            11,
		"8542.0":        json.Number("8542.0"),
		"150":           json.Number("150"),
		"['a', 1]":      []any{"a", 1},
		"{'a': [True]}": map[string]any{"a": []any{true}},
	}
	for want, in := range tests {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%#v) = %s, want %s", in, got, want)
		}
	}
}
