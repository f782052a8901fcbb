package arsia

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

func FuzzParseAgentID(f *testing.F) {
	for _, s := range []string{"agent:acme.echo-client", "agent:a.b.c/r_1", "agent:-a.b", "agent:a", "acme.b", "agent:a.b/", "agent:açme.b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseAgentID(s)
		if (err == nil) != ValidAgentID(s) {
			t.Fatalf("ParseAgentID and ValidAgentID disagree on %q", s)
		}
		if err != nil {
			return
		}
		// A valid identifier parses back to itself and is ASCII, bounded.
		if id.String() != s || len(s) > MaxAgentIDLength || !SameAgent(s, s) {
			t.Fatalf("%q parsed to %+v (%q)", s, id, id.String())
		}
		if strings.ContainsAny(s, "_") && !strings.Contains(s, "/") {
			t.Fatalf("underscore outside the resource accepted: %q", s)
		}
	})
}

func FuzzValidateSemantic(f *testing.F) {
	seeds := []string{
		`{"v":"1.0","id":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","ts":"2026-03-24T10:00:00.000Z","from":"agent:acme.a","to":"agent:acme.b","intent":"request","expires_at":"2026-03-24T10:00:30.000Z","capabilities":["echo.ping"],"payload":{"type":"com.acme.echo/ping","args":{}},"security":{"alg":"EdDSA","kid":"agent:acme.a#k","sig":"abc"}}`,
		`{"v":"1.0","intent":"error","correlation_id":"x","payload":{"type":"t","error":{"code":1}}}`,
		`{"intent":"request","capabilities":[1,"a",null,"a"],"idempotency":{"key":"\u0000","expires_at":5},"security":[]}`,
		`{"v":"9.9","min_v":"x","intent":"approval_decision","capabilities":{},"payload":"jwe","context":{"flags":1.5}}`,
		`[]`, `"x"`, `{}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseEnvelope(data)
		if err != nil {
			return
		}
		issues := ValidateSemantic(m, SemanticOptions{KnownPayloadType: func(s string) bool { return len(s)%2 == 0 }})
		for _, is := range issues {
			if is.Code == "" || is.Message == "" || (is.Severity != SeverityError && is.Severity != SeverityWarning) {
				t.Fatalf("malformed issue %+v", is)
			}
		}
		_ = ValidateActionDescriptor(m)
		_ = ValidateExplanation(m)
		// Whatever the struct accepts must convert back without loss.
		e, err := EnvelopeFromMap(m)
		if err != nil {
			return
		}
		back, err := e.Map()
		if err != nil {
			t.Fatalf("Map after EnvelopeFromMap: %v", err)
		}
		want, err1 := jcs.CanonicalizeValue(m)
		got, err2 := jcs.CanonicalizeValue(back)
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Fatalf("lossy round trip (%v, %v):\n got  %s\n want %s", err1, err2, got, want)
		}
		if _, err := json.Marshal(e); err != nil {
			t.Fatalf("Marshal: %v", err)
		}
	})
}
