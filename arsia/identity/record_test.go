package identity

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/schema"
)

const sampleRecord = `{
  "agent_id": "agent:arsialabs.demo.risk-assessor",
  "owner_id": "PT509876543",
  "owner_name": "Arsia Labs",
  "jurisdiction": "PT",
  "ai_system_classification": "high-risk",
  "deployer_id": "DE812345678",
  "deployer_name": "Frankfurt Financial Services GmbH",
  "created_at": "2026-03-24T10:00:00.000Z",
  "valid_until": "2026-06-22T10:00:00.000Z",
  "contact_email": "ops@arsialabs.example"
}`

func TestParseIdentityRecord(t *testing.T) {
	r, err := ParseIdentityRecord([]byte(sampleRecord))
	if err != nil {
		t.Fatal(err)
	}
	if r.AgentID != "agent:arsialabs.demo.risk-assessor" || r.AISystemClassification != HighRisk ||
		!r.CreatedAt.Equal(time.Date(2026, 3, 24, 10, 0, 0, 0, time.UTC)) || r.CertificateChain != nil {
		t.Errorf("parsed %+v", r)
	}
	if errs, err := schema.Validate(r.Map(), IdentityRecordSchema); err != nil || len(errs) > 0 {
		t.Errorf("Map does not validate: %v %v", errs, err)
	}
	if r.ClaimedTrustLevel() != L1 {
		t.Errorf("claimed level %v", r.ClaimedTrustLevel())
	}
	if err := r.ValidAt(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Errorf("ValidAt: %v", err)
	}
	for _, at := range []time.Time{time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)} {
		if err := r.ValidAt(at); !errors.Is(err, ErrRecordExpired) {
			t.Errorf("ValidAt(%v): %v", at, err)
		}
	}
}

func TestParseIdentityRecordRefuses(t *testing.T) {
	edit := func(old, new string) string { return strings.Replace(sampleRecord, old, new, 1) }
	tests := map[string]string{
		"not JSON":                "{",
		"not an object":           "[]",
		"duplicate member":        edit(`"owner_name": "Arsia Labs",`, `"owner_name": "Arsia Labs", "owner_name": "Evil",`),
		"unknown member":          edit(`"owner_name"`, `"public_key": "x", "owner_name"`),
		"bad agent id":            edit(`agent:arsialabs.demo.risk-assessor`, `agent:-arsialabs.demo`),
		"bad classification":      edit(`"high-risk"`, `"medium-risk"`),
		"deployer without name":   edit(`"deployer_name": "Frankfurt Financial Services GmbH",`, ``),
		"bad timestamp":           edit(`2026-03-24T10:00:00.000Z`, `2026-03-24T10:00:00Z`),
		"impossible date":         edit(`2026-03-24T10:00:00.000Z`, `2026-02-30T10:00:00.000Z`),
		"expiry before creation":  edit(`2026-06-22T10:00:00.000Z`, `2026-01-22T10:00:00.000Z`),
		"personal-name email":     edit(`"ops@arsialabs.example"`, `"Ops <ops@arsialabs.example>"`),
		"not an email":            edit(`"ops@arsialabs.example"`, `"ops"`),
		"chain not PEM":           edit(`"owner_name"`, `"certificate_chain": ["MIIB"], "owner_name"`),
		"lower-case jurisdiction": edit(`"PT"`, `"pt"`),
		"oversized":               sampleRecord + strings.Repeat(" ", MaxRecordBytes),
	}
	for name, doc := range tests {
		if _, err := ParseIdentityRecord([]byte(doc)); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestRecordVerifyTrustLevel(t *testing.T) {
	p := newTestPKI(t)
	leaf, _ := p.leaf(t, leafOpts{})
	r := &IdentityRecord{
		AgentID: testAgent, OwnerID: "PT501234567", OwnerName: "Acme Corp", Jurisdiction: "PT",
		AISystemClassification: MinimalRisk, CreatedAt: testNow.AddDate(0, -1, 0),
		CertificateChain: []string{leaf, p.inter.pem},
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	o := p.opts()
	o.AgentID = ""
	if level, err := r.VerifyTrustLevel(o); level != L2 || err != nil {
		t.Errorf("VerifyTrustLevel: %v, %v", level, err)
	}
	o.AgentID = "agent:acme.other"
	if level, err := r.VerifyTrustLevel(o); level != L1 || !errors.Is(err, ErrIdentityMismatch) {
		t.Errorf("other agent: %v, %v", level, err)
	}
	if err := (*IdentityRecord)(nil).Validate(); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("nil record: %v", err)
	}
}

func TestCheckLayers(t *testing.T) {
	rec := &IdentityRecord{AgentID: "agent:acme.billing"}
	tests := []struct {
		name, from, kid string
		rec             *IdentityRecord
		ok              bool
	}{
		{"all agree", "agent:acme.billing", "agent:acme.billing#key-1", rec, true},
		{"no record", "agent:acme.billing", "agent:acme.billing#key-1", nil, true},
		{"kid of another agent", "agent:acme.billing", "agent:acme.crm#key-1", rec, false},
		{"record of another agent", "agent:acme.crm", "agent:acme.crm#key-1", rec, false},
		{"kid without label", "agent:acme.billing", "agent:acme.billing", rec, false},
		{"empty record agent", "agent:acme.billing", "agent:acme.billing#k", &IdentityRecord{}, false},
		{"invalid from", "agent:acme", "agent:acme#k", nil, false},
	}
	for _, tc := range tests {
		err := CheckLayers(tc.from, tc.kid, tc.rec)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if err != nil {
			var ae *arsia.Error
			if !errors.As(err, &ae) || ae.Code != arsia.CodeUnauthorized || !errors.Is(err, ErrIdentityMismatch) {
				t.Errorf("%s: %v", tc.name, err)
			}
			if strings.Contains(ae.Object()["description"].(string), "agent:") {
				t.Errorf("%s: wire description leaks detail: %v", tc.name, ae.Object())
			}
		}
	}
}
