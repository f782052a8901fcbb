package compliance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestClockSkew(t *testing.T) {
	want := map[string]time.Duration{
		"GDPR-STANDARD": 300 * time.Second, "EU-AI-ACT-HIGH-RISK": 120 * time.Second,
		"EU-AI-ACT-LIMITED-RISK": 300 * time.Second, "MIFID-II": 60 * time.Second,
		"PAC-AGRICULTURE": 300 * time.Second, "DSA-VLOP": 300 * time.Second, "DORA": 60 * time.Second,
	}
	for _, name := range Default().Names() {
		env := map[string]any{"compliance": map[string]any{"profile": name}}
		if got := ClockSkew(env, nil); got != want[name] {
			t.Errorf("%s: %v, want %v", name, got, want[name])
		}
	}
	for _, env := range []string{`{}`, `{"compliance":{}}`, `{"compliance":{"profile":"NOPE"}}`, `{"compliance":7}`,
		`{"compliance":{"profile":"GDPR-STANDARD","clock_skew_seconds":3600}}`} {
		if got := ClockSkew(mustJSON(t, env), nil); got != 300*time.Second {
			t.Errorf("%s: %v", env, got)
		}
	}
}

func TestOversightTimeout(t *testing.T) {
	received := time.Date(2026, 4, 16, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := received.Add(d); return &x }
	within := mustJSON(t, `{"compliance":{"profile":"DSA-VLOP"}}`)
	cases := []struct {
		name     string
		env      map[string]any
		reviewed *time.Time
		now      time.Time
		timeout  bool
	}{
		{"pending before deadline", within, nil, received.Add(23 * time.Hour), false},
		{"pending at deadline", within, nil, received.Add(24 * time.Hour), false},
		{"pending just after", within, nil, received.Add(24*time.Hour + time.Millisecond), true},
		{"reviewed in time, checked later", within, at(24 * time.Hour), received.Add(48 * time.Hour), false},
		{"reviewed late", within, at(25 * time.Hour), received.Add(26 * time.Hour), true},
		{"before execution has no deadline here", mustJSON(t, `{"compliance":{"profile":"MIFID-II"}}`), nil, received.Add(1000 * time.Hour), false},
		{"not required", mustJSON(t, `{"compliance":{}}`), nil, received.Add(1000 * time.Hour), false},
		{"no compliance", mustJSON(t, `{}`), nil, received.Add(1000 * time.Hour), false},
		{"message overrides profile", mustJSON(t, `{"compliance":{"profile":"GDPR-STANDARD","human_oversight":"required_within_24h"}}`), nil, received.Add(25 * time.Hour), true},
		{"post execution within retention", mustJSON(t, `{"compliance":{"profile":"PAC-AGRICULTURE"}}`), nil, received.AddDate(0, 0, 1096), false},
		{"post execution after retention", mustJSON(t, `{"compliance":{"profile":"PAC-AGRICULTURE"}}`), nil, received.AddDate(0, 0, 1096).Add(time.Millisecond), true},
		{"post execution without retention", mustJSON(t, `{"compliance":{"human_oversight":"required_post_execution"}}`), nil, received.AddDate(50, 0, 0), false},
	}
	for _, c := range cases {
		got := CheckOversightTimeout(c.env, nil, c.reviewed, received, c.now)
		if (len(got) > 0) != c.timeout {
			t.Errorf("%s: got %v, want timeout %v", c.name, got, c.timeout)
			continue
		}
		if c.timeout && (got[0].Code != CodeOversightTimeout || !strings.HasPrefix(got[0].Message, "oversight_timeout: ")) {
			t.Errorf("%s: violation %+v", c.name, got[0])
		}
	}
	if d, ok := OversightDeadline(within, nil, received); !ok || !d.Equal(received.Add(ReviewWindow)) {
		t.Errorf("deadline %v %v", d, ok)
	}
}

func TestValidateExplainability(t *testing.T) {
	required := mustJSON(t, `{"compliance":{"profile":"EU-AI-ACT-LIMITED-RISK"}}`)
	resp := func(explanation string) map[string]any {
		return mustJSON(t, `{"intent":"response","payload":{"type":"a/b","result":{},"explanation":`+explanation+`}}`)
	}
	good := `{"reasoning":"Score above threshold","confidence":0.82,"inputs_used":["state:a","message:b"]}`
	cases := []struct {
		name     string
		request  map[string]any
		response map[string]any
		want     []string // codes
	}{
		{"not required (GDPR)", mustJSON(t, `{"compliance":{}}`), mustJSON(t, `{}`), nil},
		{"not required (DORA)", mustJSON(t, `{"compliance":{"profile":"DORA"}}`), mustJSON(t, `{}`), nil},
		{"not required (no compliance)", mustJSON(t, `{}`), mustJSON(t, `{}`), nil},
		{"message switches it on", mustJSON(t, `{"compliance":{"explainability_required":true}}`), mustJSON(t, `{"payload":{}}`), []string{CodeMissingExplanation}},
		{"message switches it off", mustJSON(t, `{"compliance":{"profile":"MIFID-II","explainability_required":false}}`), mustJSON(t, `{}`), nil},
		{"well formed", required, resp(good), nil},
		{"confidence bounds", required, resp(`{"reasoning":"r","confidence":1,"inputs_used":["x"]}`), nil},
		{"no payload", required, mustJSON(t, `{}`), []string{CodeMissingExplanation}},
		{"encrypted payload", required, mustJSON(t, `{"payload":"eyJ.a.b.c.d"}`), []string{CodeMissingExplanation}},
		{"no explanation", required, mustJSON(t, `{"payload":{"type":"a/b"}}`), []string{CodeMissingExplanation}},
		{"explanation not object", required, resp(`"because"`), []string{CodeMissingExplanation}},
		{"empty explanation", required, resp(`{}`), []string{CodeInvalidExplanation, CodeInvalidExplanation, CodeInvalidExplanation}},
		{"bad fields", required, resp(`{"reasoning":"","confidence":1.5,"inputs_used":[]}`), []string{CodeInvalidExplanation, CodeInvalidExplanation, CodeInvalidExplanation}},
		{"reasoning not string", required, resp(`{"reasoning":1,"confidence":0,"inputs_used":["x"]}`), []string{CodeInvalidExplanation}},
		{"reasoning too long", required, resp(`{"reasoning":"` + strings.Repeat("é", 4097) + `","confidence":0,"inputs_used":["x"]}`), []string{CodeInvalidExplanation}},
		{"confidence string", required, resp(`{"reasoning":"r","confidence":"high","inputs_used":["x"]}`), []string{CodeInvalidExplanation}},
		{"inputs duplicated", required, resp(`{"reasoning":"r","confidence":0.5,"inputs_used":["x","x"]}`), []string{CodeInvalidExplanation}},
		{"inputs not strings", required, resp(`{"reasoning":"r","confidence":0.5,"inputs_used":[1]}`), []string{CodeInvalidExplanation}},
	}
	for _, c := range cases {
		got := ValidateExplainability(c.request, c.response, nil)
		var codes []string
		for _, v := range got {
			codes = append(codes, v.Code)
		}
		if strings.Join(codes, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestNewAuditRecord(t *testing.T) {
	processed := time.Date(2026, 4, 16, 12, 0, 0, 0, time.UTC)
	in := AuditInput{RecordID: "00000000-0000-4000-8000-000000000001", EventType: "request",
		OperatorID: "agent:test.operator", ProcessedAt: processed}
	env := mustJSON(t, `{"id":"12345678-0000-4000-8000-0000000c0c03","from":"agent:a.b","to":"agent:c.d","intent":"request",
		"payload":{"type":"arsiaprotocol.mcp/tool-call","tool":"example","n":1.0},
		"compliance":{"profile":"MIFID-II","retention_days":2000}}`)
	rec, err := NewAuditRecord(env, nil, in)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`{"n":1,"tool":"example","type":"arsiaprotocol.mcp/tool-call"}`))
	want := AuditRecord{RecordID: in.RecordID, MessageID: "12345678-0000-4000-8000-0000000c0c03", EventType: "request",
		FromAgent: "agent:a.b", ToAgent: "agent:c.d", Intent: "request", PayloadType: "arsiaprotocol.mcp/tool-call",
		PayloadHash: hex.EncodeToString(sum[:]), ComplianceProfile: "MIFID-II", HumanOversightStatus: "pending",
		ProcessedAt: "2026-04-16T12:00:00.000Z", RetainedUntil: "2031-10-07T12:00:00.000Z", DataResidency: "EU",
		OperatorID: "agent:test.operator"}
	if *rec != want {
		t.Errorf("record\n got  %+v\n want %+v", *rec, want)
	}
	data, _ := json.Marshal(rec)
	if bytes.Contains(data, []byte("plaintext_hash")) || bytes.Contains(data, []byte("approver_id")) {
		t.Errorf("empty optional members serialized: %s", data)
	}

	// Caller retention longer than the profile's wins; shorter does not.
	in2 := in
	in2.RetentionDays = 3000
	if rec, _ := NewAuditRecord(env, nil, in2); rec.RetainedUntil != "2034-07-03T12:00:00.000Z" {
		t.Errorf("retained_until %s", rec.RetainedUntil)
	}
	in2.RetentionDays = 10
	if rec, _ := NewAuditRecord(env, nil, in2); rec.RetainedUntil != want.RetainedUntil {
		t.Errorf("retention shortened: %s", rec.RetainedUntil)
	}

	// Profile naming.
	for src, profile := range map[string]string{`{}`: "GDPR-STANDARD", `{"profile":"X-CUSTOM"}`: "X-CUSTOM"} {
		e := mustJSON(t, `{"id":"i","from":"f","to":"t","intent":"event","payload":{"type":"a"},"compliance":`+src+`}`)
		in3 := in
		in3.RetentionDays = 30
		rec, err := NewAuditRecord(e, nil, in3)
		if err != nil || rec.ComplianceProfile != profile || rec.HumanOversightStatus != "not_required" {
			t.Errorf("%s: %+v %v", src, rec, err)
		}
	}
	noComp := mustJSON(t, `{"id":"i","from":"f","to":"t","intent":"event","payload":{"type":"a"}}`)
	in4 := in
	in4.RetentionDays = 1
	if rec, err := NewAuditRecord(noComp, nil, in4); err != nil || rec.ComplianceProfile != "none" {
		t.Errorf("no compliance: %+v %v", rec, err)
	}

	// Encrypted payload: hash of the JWE string, plaintext hash and type from the plaintext.
	jwe := "eyJhbGciOiJFQ0RILUVTIn0..iv.ct.tag"
	enc := mustJSON(t, `{"id":"i","from":"f","to":"t","intent":"request","payload":"`+jwe+`",
		"security":{"encrypted":true},"compliance":{"profile":"DORA"}}`)
	if _, err := NewAuditRecord(enc, nil, in); !errors.Is(err, ErrAudit) {
		t.Errorf("encrypted without plaintext: %v", err)
	}
	in5 := in
	in5.Plaintext = map[string]any{"type": "x/y", "args": map[string]any{}}
	in5.HumanOversightStatus, in5.ApproverID = "approved", "agent:human.reviewer"
	rec, err = NewAuditRecord(enc, nil, in5)
	if err != nil {
		t.Fatal(err)
	}
	jweSum := sha256.Sum256([]byte(jwe))
	ptSum := sha256.Sum256([]byte(`{"args":{},"type":"x/y"}`))
	if rec.PayloadHash != hex.EncodeToString(jweSum[:]) || rec.PlaintextHash != hex.EncodeToString(ptSum[:]) ||
		rec.PayloadType != "x/y" || rec.ApproverID != "agent:human.reviewer" || rec.DataResidency != "EU" {
		t.Errorf("encrypted record %+v", rec)
	}

	// Input errors.
	bad := []struct {
		name string
		env  map[string]any
		in   func(*AuditInput)
	}{
		{"record id upper case", env, func(a *AuditInput) { a.RecordID = "0000000A-0000-4000-8000-000000000001" }},
		{"record id v1", env, func(a *AuditInput) { a.RecordID = "00000000-0000-1000-8000-000000000001" }},
		{"event type", env, func(a *AuditInput) { a.EventType = "delivery" }},
		{"operator", env, func(a *AuditInput) { a.OperatorID = "" }},
		{"time", env, func(a *AuditInput) { a.ProcessedAt = time.Time{} }},
		{"oversight status", env, func(a *AuditInput) { a.HumanOversightStatus = "maybe" }},
		{"approver missing", env, func(a *AuditInput) { a.HumanOversightStatus = "denied" }},
		{"no retention", mustJSON(t, `{"id":"i","from":"f","to":"t","intent":"event","payload":{"type":"a"},"compliance":{}}`), func(*AuditInput) {}},
		{"retention past 9999", env, func(a *AuditInput) { a.RetentionDays = 1 << 30 }},
		{"no id", mustJSON(t, `{"from":"f","to":"t","intent":"event","payload":{"type":"a"}}`), func(*AuditInput) {}},
		{"no payload", mustJSON(t, `{"id":"i","from":"f","to":"t","intent":"event"}`), func(*AuditInput) {}},
		{"payload without type", mustJSON(t, `{"id":"i","from":"f","to":"t","intent":"event","payload":{}}`), func(*AuditInput) {}},
		{"string payload not encrypted", mustJSON(t, `{"id":"i","from":"f","to":"t","intent":"event","payload":"x"}`), func(*AuditInput) {}},
		{"compliance not object", mustJSON(t, `{"id":"i","from":"f","to":"t","intent":"event","payload":{"type":"a"},"compliance":1}`), func(*AuditInput) {}},
		{"payload not canonicalizable", map[string]any{"id": "i", "from": "f", "to": "t", "intent": "event",
			"payload": map[string]any{"type": "a", "x": struct{}{}}}, func(*AuditInput) {}},
	}
	for _, b := range bad {
		a := in
		a.RetentionDays = 0
		b.in(&a)
		if _, err := NewAuditRecord(b.env, nil, a); !errors.Is(err, ErrAudit) {
			t.Errorf("%s: err = %v", b.name, err)
		}
	}
}

func TestNewRecordID(t *testing.T) {
	id, err := NewRecordID(bytes.NewReader(bytes.Repeat([]byte{0xff}, 16)))
	if err != nil || id != "ffffffff-ffff-4fff-bfff-ffffffffffff" || !isUUIDv4(id) {
		t.Errorf("got %q %v", id, err)
	}
	id, err = NewRecordID(nil)
	if err != nil || !isUUIDv4(id) {
		t.Errorf("random id %q %v", id, err)
	}
	if _, err := NewRecordID(bytes.NewReader(nil)); err == nil {
		t.Error("short reader accepted")
	}
}
