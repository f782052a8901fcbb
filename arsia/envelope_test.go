package arsia

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/jcs"
)

var testNow = time.Date(2026, 3, 24, 10, 0, 0, 123456789, time.UTC)

const (
	alice = "agent:acme.alice"
	bob   = "agent:acme.bob"
	reqID = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
)

// roundTrip marshals e, parses it back and checks that nothing changed.
func roundTrip(t *testing.T, e *Envelope) map[string]any {
	t.Helper()
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	back, err := EnvelopeFromMap(m)
	if err != nil {
		t.Fatalf("EnvelopeFromMap: %v\n%s", err, data)
	}
	data2, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, data2) {
		t.Errorf("round trip changed the envelope:\n %s\n %s", data, data2)
	}
	return m
}

func mustL2Valid(t *testing.T, m map[string]any) {
	t.Helper()
	if issues := ValidateSemantic(m, SemanticOptions{}); len(issues) != 0 {
		t.Errorf("built envelope fails L2: %v", issues)
	}
}

func TestBuilders(t *testing.T) {
	opts := BuildOptions{Now: testNow}

	req, err := NewRequest(alice, bob, []string{"notes.read"}, "com.acme.notes/read", map[string]any{"id": 42, "all": false, "tags": []string{}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if req.V != "1.0" || req.TS != "2026-03-24T10:00:00.123Z" || req.ExpiresAt != "2026-03-24T10:05:00.123Z" || !ValidMessageID(req.ID) {
		t.Errorf("request header: %+v", req)
	}
	if string(req.Payload.Args) != `{"all":false,"id":42,"tags":[]}` || req.Payload.Content(IntentRequest) == nil {
		t.Errorf("args %s", req.Payload.Args)
	}
	m := roundTrip(t, req)
	mustL2Valid(t, addSecurity(m))

	resp, err := NewResponse(bob, alice, req.ID, "com.acme.notes/read", map[string]any{"effective_capabilities": []string{"notes.read"}},
		BuildOptions{Now: testNow.Add(time.Second), Explanation: map[string]any{
			"reasoning": "Exact scope match.", "confidence": 0.9, "inputs_used": []string{"state:notes/42"},
			"decision_timestamp": "2026-03-24T10:00:01.000Z",
		}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.CorrelationID != req.ID || resp.ExpiresAt != "" || resp.Payload.Result == nil || resp.Payload.Explanation == nil {
		t.Errorf("response: %+v", resp)
	}
	mustL2Valid(t, addSecurity(roundTrip(t, resp)))

	ev, err := NewEvent(alice, bob, "com.acme.notes/changed", map[string]any{"n": json.Number("8542.0")}, BuildOptions{Now: testNow, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if string(ev.Payload.Data) != `{"n":8542.0}` || ev.ExpiresAt != "2026-03-24T10:01:00.123Z" {
		t.Errorf("event: %s %s", ev.Payload.Data, ev.ExpiresAt)
	}
	mustL2Valid(t, roundTrip(t, ev))

	failure := &Error{Code: CodeForbidden, Description: "Capability not granted.", Details: map[string]any{"required_capabilities": []string{"notes.write"}, "provided_capabilities": []string{"notes.read"}}}
	errEnv, err := NewError(bob, alice, req.ID, failure, opts)
	if err != nil {
		t.Fatal(err)
	}
	if errEnv.Payload.Type != PayloadTypeError || !strings.Contains(string(errEnv.Payload.Error), `"code":"forbidden"`) {
		t.Errorf("error payload %s", errEnv.Payload.Error)
	}
	mustL2Valid(t, roundTrip(t, errEnv))

	pa, err := NewPendingApproval(bob, alice, req.ID, PendingApproval{ActionID: "com.acme.notes/delete", OriginalRequestID: req.ID, Context: "Delete all notes", RiskLevel: 7}, BuildOptions{Now: testNow, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	if err := json.Unmarshal(pa.Payload.Args, &args); err != nil || args["approval_deadline"] != pa.ExpiresAt || args["approver_capability"] != CapOversightApprove {
		t.Errorf("pending args %s (%v)", pa.Payload.Args, err)
	}
	mustL2Valid(t, addSecurity(roundTrip(t, pa)))

	dec, err := NewApprovalDecision("agent:acme.reviewer", bob, pa.ID, ApprovalDecision{Decision: DecisionDenied, ApproverID: "human:jane", Reason: "Too broad", Conditions: []string{}}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.Capabilities) != 1 || !strings.Contains(string(dec.Payload.Result), `"conditions":[]`) {
		t.Errorf("decision: %v %s", dec.Capabilities, dec.Payload.Result)
	}
	mustL2Valid(t, addSecurity(roundTrip(t, dec)))
}

// addSecurity adds a well-formed security block for the L2 kid/sig rules.
func addSecurity(m map[string]any) map[string]any {
	m["security"] = map[string]any{"alg": "EdDSA", "kid": m["from"].(string) + "#key1", "sig": "c2ln"}
	return m
}

func TestBuilderErrors(t *testing.T) {
	opts := BuildOptions{Now: testNow}
	tests := []struct {
		name string
		fn   func() error
		want error
	}{
		{"no clock", func() error {
			_, err := NewRequest(alice, bob, []string{"a.b"}, "a.b/c", nil, BuildOptions{})
			return err
		}, ErrNoClock},
		{"bad from", func() error { _, err := NewEvent("alice", bob, "a.b/c", nil, opts); return err }, ErrInvalidBuild},
		{"bad to", func() error { _, err := NewEvent(alice, "agent:x", "a.b/c", nil, opts); return err }, ErrInvalidBuild},
		{"bad type", func() error { _, err := NewEvent(alice, bob, "1bad", nil, opts); return err }, ErrInvalidBuild},
		{"no caps", func() error { _, err := NewRequest(alice, bob, nil, "a.b/c", nil, opts); return err }, ErrInvalidBuild},
		{"bad cap", func() error { _, err := NewRequest(alice, bob, []string{"read"}, "a.b/c", nil, opts); return err }, ErrInvalidCapability},
		{"wildcard cap", func() error { _, err := NewRequest(alice, bob, []string{"a.*"}, "a.b/c", nil, opts); return err }, ErrInvalidBuild},
		{"dup cap", func() error { _, err := NewRequest(alice, bob, []string{"a.b", "a.b"}, "a.b/c", nil, opts); return err }, ErrInvalidBuild},
		{"bad correlation", func() error { _, err := NewResponse(bob, alice, "nope", "a.b/c", nil, opts); return err }, ErrInvalidBuild},
		{"event correlation", func() error {
			_, err := newEnvelope(IntentEvent, alice, bob, reqID, "a.b/c", nil, opts)
			return err
		}, ErrInvalidBuild},
		{"bad id", func() error {
			_, err := NewEvent(alice, bob, "a.b/c", nil, BuildOptions{Now: testNow, ID: strings.ToUpper(reqID)})
			return err
		}, ErrInvalidBuild},
		{"rand fails", func() error {
			_, err := NewEvent(alice, bob, "a.b/c", nil, BuildOptions{Now: testNow, Rand: strings.NewReader("short")})
			return err
		}, ErrInvalidBuild},
		{"negative ttl", func() error {
			_, err := NewEvent(alice, bob, "a.b/c", nil, BuildOptions{Now: testNow, TTL: -1})
			return err
		}, ErrInvalidBuild},
		{"bad min_v", func() error {
			_, err := NewEvent(alice, bob, "a.b/c", nil, BuildOptions{Now: testNow, MinV: "1"})
			return err
		}, ErrInvalidBuild},
		{"unencodable", func() error { _, err := NewEvent(alice, bob, "a.b/c", func() {}, opts); return err }, ErrInvalidBuild},
		{"bad explanation", func() error {
			_, err := NewResponse(bob, alice, reqID, "a.b/c", nil, BuildOptions{Now: testNow, Explanation: map[string]any{"reasoning": ""}})
			return err
		}, ErrInvalidBuild},
		{"late decision", func() error {
			_, err := NewResponse(bob, alice, reqID, "a.b/c", nil, BuildOptions{Now: testNow, Explanation: map[string]any{
				"reasoning": "r", "confidence": 1, "inputs_used": []string{"x"}, "decision_timestamp": "2027-01-01T00:00:00.000Z"}})
			return err
		}, ErrInvalidBuild},
		{"nil error", func() error { _, err := NewError(bob, alice, reqID, nil, opts); return err }, ErrInvalidBuild},
		{"forbidden without details", func() error {
			_, err := NewError(bob, alice, reqID, &Error{Code: CodeForbidden, Description: "No."}, opts)
			return err
		}, ErrInvalidBuild},
		{"non-English description", func() error {
			_, err := NewError(bob, alice, reqID, &Error{Code: CodeNotFound, Description: "Não encontrado"}, opts)
			return err
		}, ErrInvalidBuild},
		{"approval window", func() error {
			_, err := NewPendingApproval(bob, alice, reqID, PendingApproval{ActionID: "a.b/c", OriginalRequestID: reqID, Context: "c", RiskLevel: 5}, BuildOptions{Now: testNow, TTL: 25 * time.Hour})
			return err
		}, ErrInvalidBuild},
		{"assets summary", func() error {
			_, err := NewPendingApproval(bob, alice, reqID, PendingApproval{ActionID: "arsiaprotocol.assets/transfer-request", OriginalRequestID: reqID, Context: "c", RiskLevel: 7}, opts)
			return err
		}, ErrInvalidBuild},
		{"risk 0", func() error {
			_, err := NewPendingApproval(bob, alice, reqID, PendingApproval{ActionID: "a.b/c", OriginalRequestID: reqID, Context: "c"}, opts)
			return err
		}, ErrInvalidBuild},
		{"bad decision", func() error {
			_, err := NewApprovalDecision(bob, alice, reqID, ApprovalDecision{Decision: "maybe", ApproverID: "x"}, nil, opts)
			return err
		}, ErrInvalidBuild},
		{"decision no caps", func() error {
			_, err := NewApprovalDecision(bob, alice, reqID, ApprovalDecision{Decision: DecisionApproved, ApproverID: "x"}, []string{}, opts)
			return err
		}, ErrInvalidBuild},
	}
	for _, tc := range tests {
		if err := tc.fn(); !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestDeterministicID(t *testing.T) {
	e, err := NewEvent(alice, bob, "a.b/c", nil, BuildOptions{Now: testNow, Rand: bytes.NewReader(make([]byte, 16))})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != "00000000-0000-4000-8000-000000000000" {
		t.Errorf("id %s", e.ID)
	}
	seen := map[string]bool{}
	for range 100 {
		id := NewID()
		if !ValidMessageID(id) || seen[id] {
			t.Fatalf("NewID %s", id)
		}
		seen[id] = true
	}
}

func TestTimestamps(t *testing.T) {
	if got := FormatTimestamp(time.Date(2026, 1, 2, 3, 4, 5, 999999999, time.FixedZone("x", 3600))); got != "2026-01-02T02:04:05.999Z" {
		t.Errorf("FormatTimestamp = %s", got)
	}
	for _, bad := range []string{"2026-01-02T02:04:05Z", "2026-01-02T02:04:05.1Z", "2026-01-02T02:04:05.000+00:00", "2026-13-02T02:04:05.000Z", "2026-01-02 02:04:05.000Z", "２０２６-01-02T02:04:05.000Z"} {
		if _, err := ParseTimestamp(bad); !errors.Is(err, ErrInvalidTimestamp) {
			t.Errorf("ParseTimestamp(%q) = %v", bad, err)
		}
	}
	if ts, err := ParseTimestamp("2026-01-02T02:04:05.999Z"); err != nil || ts.Nanosecond() != 999000000 {
		t.Errorf("ParseTimestamp: %v %v", ts, err)
	}
}

func TestParseEnvelopeStrict(t *testing.T) {
	tests := []struct {
		in   string
		code string
		is   error
	}{
		{`{"v":"1.0","v":"2.0"}`, CodeInvalidRequest, jcs.ErrDuplicateKey},
		{`{"a":9007199254740993}`, CodeInvalidRequest, jcs.ErrNumber},
		{`[1]`, "invalid_envelope_type", ErrInvalidEnvelope},
		{`{"a":1} x`, CodeInvalidRequest, jcs.ErrSyntax},
		{`{"a":"` + strings.Repeat("x", DefaultMaxMessageBytes) + `"}`, CodePayloadTooLarge, jcs.ErrSize},
	}
	for _, tc := range tests {
		_, err := ParseEnvelope([]byte(tc.in))
		var ae *Error
		if !errors.As(err, &ae) || ae.Code != tc.code || !errors.Is(err, tc.is) || !errors.Is(err, ErrInvalidEnvelope) {
			t.Errorf("ParseEnvelope(%.40s) = %v", tc.in, err)
		}
	}
	var e Envelope
	if err := json.Unmarshal([]byte(`{"v":"1.0","v":"1.0"}`), &e); !errors.Is(err, jcs.ErrDuplicateKey) {
		t.Errorf("UnmarshalJSON duplicate: %v", err)
	}
}

// TestEnvelopeLossless checks that the struct keeps everything the generic
// form has: false, empty arrays and objects, null content, number literals,
// unknown members, an encrypted string payload.
func TestEnvelopeLossless(t *testing.T) {
	docs := []string{
		`{"v":"1.0","id":"` + reqID + `","ts":"2026-03-24T10:00:00.000Z","from":"agent:a.b","to":"agent:c.d","intent":"request",` +
			`"expires_at":"2026-03-24T10:05:00.000Z","min_v":"1.0","capabilities":[],` +
			`"idempotency":{"key":"k","expires_at":"2026-03-24T11:00:00.000Z"},` +
			`"context":{"trace_id":"0123456789abcdef0123456789abcdef","span_id":"0123456789abcdef","flags":0,"locale":"","priority":0},` +
			`"payload":{"type":"a.b/c","version":"1.0","args":{"amount":8542.0,"ok":false,"list":[],"obj":{},"nil":null,"big":1e21},"explanation":{"reasoning":"r","confidence":0.5,"inputs_used":["x"]}},` +
			`"security":{"alg":"EdDSA","kid":"agent:a.b#k","sig":"","encrypted":false,"enc_alg":"","enc_method":"A256GCM"},` +
			`"compliance":{"audit_required":false,"retention_days":1827,"x-ext":{"deep":[1.50]}},"future_member":[true]}`,
		`{"v":"1.0","id":"` + reqID + `","ts":"2026-03-24T10:00:00.000Z","from":"agent:a.b","to":"agent:c.d","intent":"response","correlation_id":"` + reqID + `",` +
			`"payload":"eyJhbGciOiJFQ0RILUVTIn0..iv.ct.tag","security":{"alg":"EdDSA","kid":"agent:a.b#k","sig":"s","encrypted":true,"enc_alg":"ECDH-ES","enc_method":"A256GCM"},"compliance":{}}`,
		`{"v":"1.0","id":"` + reqID + `","ts":"2026-03-24T10:00:00.000Z","from":"agent:a.b","to":"agent:c.d","intent":"event","payload":{"type":"a.b/c","data":null,"extra":1},"context":{"x":1}}`,
	}
	for _, doc := range docs {
		m, err := ParseEnvelope([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := jcs.CanonicalizeValue(m)
		var e Envelope
		if err := json.Unmarshal([]byte(doc), &e); err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		back, err := e.Map()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := jcs.CanonicalizeValue(back)
		if !bytes.Equal(got, want) {
			t.Errorf("lossy conversion:\n got  %s\n want %s", got, want)
		}
		// Number literals in raw content are kept as written.
		if data, _ := json.Marshal(e); bytes.Contains([]byte(doc), []byte(`8542.0`)) && !bytes.Contains(data, []byte(`8542.0`)) {
			t.Errorf("number literal rewritten: %s", data)
		}
	}
	var e Envelope
	_ = json.Unmarshal([]byte(docs[1]), &e)
	if e.Payload.JWE == "" || !e.Security.IsEncrypted() {
		t.Errorf("encrypted payload: %+v", e.Payload)
	}
}

func TestEnvelopeFromMapRejects(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"v": "1.0", "id": reqID, "ts": "2026-03-24T10:00:00.000Z", "from": "agent:a.b", "to": "agent:c.d", "intent": "event"}
	}
	if _, err := EnvelopeFromMap(base()); err != nil {
		t.Fatalf("minimal: %v", err)
	}
	mods := map[string]func(map[string]any){
		"missing from":       func(m map[string]any) { delete(m, "from") },
		"v not string":       func(m map[string]any) { m["v"] = json.Number("1") },
		"empty correlation":  func(m map[string]any) { m["correlation_id"] = "" },
		"caps not strings":   func(m map[string]any) { m["capabilities"] = []any{1} },
		"caps null":          func(m map[string]any) { m["capabilities"] = nil },
		"context not object": func(m map[string]any) { m["context"] = "x" },
		"flags not int":      func(m map[string]any) { m["context"] = map[string]any{"flags": json.Number("1.5")} },
		"flags rewritten":    func(m map[string]any) { m["context"] = map[string]any{"flags": json.Number("1.0")} },
		"payload number":     func(m map[string]any) { m["payload"] = json.Number("1") },
		"payload empty str":  func(m map[string]any) { m["payload"] = "" },
		"payload no type":    func(m map[string]any) { m["payload"] = map[string]any{} },
		"security no kid":    func(m map[string]any) { m["security"] = map[string]any{"alg": "EdDSA", "sig": "x"} },
		"encrypted not bool": func(m map[string]any) {
			m["security"] = map[string]any{"alg": "EdDSA", "kid": "k", "sig": "x", "encrypted": "yes"}
		},
		"compliance array":    func(m map[string]any) { m["compliance"] = []any{} },
		"idempotency partial": func(m map[string]any) { m["idempotency"] = map[string]any{"key": "k"} },
	}
	for name, mod := range mods {
		m := base()
		mod(m)
		if _, err := EnvelopeFromMap(m); !errors.Is(err, ErrInvalidEnvelope) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := Envelope{Payload: &Payload{Type: "a.b", Args: json.RawMessage(`{`)}}
	if _, err := json.Marshal(bad); err == nil {
		t.Error("invalid raw args marshalled")
	}
}

func TestIntents(t *testing.T) {
	want := map[Intent]string{IntentRequest: "args", IntentResponse: "result", IntentEvent: "data", IntentError: "error",
		IntentPendingApproval: "args", IntentApprovalDecision: "result", "x": ""}
	for i, f := range want {
		if i.ContentField() != f || i.Valid() != (f != "") {
			t.Errorf("%s: %s %v", i, i.ContentField(), i.Valid())
		}
	}
	var p *Payload
	if p.Content(IntentRequest) != nil {
		t.Error("nil payload content")
	}
}
