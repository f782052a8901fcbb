package onboarding

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/identity"
)

func intp(n int) *int { return &n }

func testPolicy() *CapabilityPolicy {
	return &CapabilityPolicy{
		PolicyVersion:        "test-1",
		TokenLifetimeSeconds: 3600,
		Capabilities: []CapabilityRule{
			{Capability: "notes.read", Status: StatusAllowed},
			{Capability: "notes.write", Status: StatusOversightRequired},
			{Capability: "notes.delete", Status: StatusProhibited},
			{Capability: "payments.charge", Status: StatusAllowed, MaxRiskLevel: intp(3)},
			{Capability: "payments.refund", Status: StatusOversightRequired, MaxRiskLevel: intp(6)},
			{Capability: arsia.CapAuditRead, Status: StatusAllowed},
		},
	}
}

func TestProfileRequirement(t *testing.T) {
	tests := []struct {
		class, profile, intent string
		want                   error
	}{
		{"minimal-risk", "", "", nil},
		{"limited-risk", "", "", nil},
		{"high-risk", "", "", ErrProfileRequired},
		{"high-risk", "", "request", ErrProfileRequired},
		{"high-risk", "EU-AI-ACT-HIGH-RISK", "", nil},
		{"high-risk", "GDPR-STANDARD", "", nil},
		{"high-risk", "", IntentError, nil},
		{"high-risk", "", IntentEvent, nil},
		{"high-risk", "NOT-A-PROFILE", "", ErrUnknownProfile},
		{"minimal-risk", "NOT-A-PROFILE", "", ErrUnknownProfile},
		{"unacceptable-risk", "EU-AI-ACT-HIGH-RISK", "", ErrUnacceptableRisk},
		{"unacceptable-risk", "", IntentError, ErrUnacceptableRisk},
		{"", "", "", ErrUnknownClassification},
		{"High-Risk", "EU-AI-ACT-HIGH-RISK", "", ErrUnknownClassification},
	}
	for _, tt := range tests {
		err := CheckProfileRequirement(nil, tt.class, tt.profile, tt.intent)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("CheckProfileRequirement(%q, %q, %q) = %v, want %v", tt.class, tt.profile, tt.intent, err, tt.want)
		}
	}
	if err := CheckProfileRequirement(compliance.Default(), "high-risk", "DORA", ""); err != nil {
		t.Errorf("explicit registry: %v", err)
	}
	for _, want := range []string{"MUST declare a compliance profile", "MUST NOT be onboarded"} {
		class := map[bool]string{true: "high-risk", false: "unacceptable-risk"}[strings.Contains(want, "declare")]
		if err := CheckProfileRequirement(nil, class, "", ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v does not say %q", class, err, want)
		}
	}
}

func TestClassificationConsistent(t *testing.T) {
	classes := []string{"minimal-risk", "limited-risk", "high-risk", "unacceptable-risk"}
	for i, d := range classes {
		for j, id := range classes {
			if got, want := ClassificationConsistent(d, id), i <= j; got != want {
				t.Errorf("ClassificationConsistent(%q, %q) = %v, want %v", d, id, got, want)
			}
		}
		for _, bad := range []string{"", "not-a-real-class", "HIGH-RISK"} {
			if ClassificationConsistent(d, bad) || ClassificationConsistent(bad, d) {
				t.Errorf("%q vs %q is consistent", d, bad)
			}
		}
	}
	rec := &identity.IdentityRecord{AgentID: "agent:acme.x", AISystemClassification: "limited-risk"}
	for declared, want := range map[string]error{
		"minimal-risk": nil, "limited-risk": nil, "high-risk": ErrClassificationEscalation, "bogus": ErrUnknownClassification,
	} {
		if err := CheckRecordClassification(rec, declared); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("CheckRecordClassification(%q) = %v, want %v", declared, err, want)
		}
	}
	if err := CheckRecordClassification(nil, "minimal-risk"); !errors.Is(err, ErrUnknownClassification) {
		t.Errorf("nil record: %v", err)
	}
}

func TestPolicyValidation(t *testing.T) {
	rule := func(c, s string) map[string]any { return map[string]any{"capability": c, "status": s} }
	doc := func(rules ...any) map[string]any {
		return map[string]any{"policy_version": "v1", "token_lifetime_seconds": 3600, "capabilities": rules}
	}
	tests := []struct {
		name     string
		m        map[string]any
		sentinel error
		contains string
	}{
		{"valid", doc(rule("notes.read", "allowed"), rule("notes.write", "oversight_required"), rule("notes.delete", "prohibited")), nil, ""},
		{"empty rules", doc(), nil, ""},
		{"reserved ok", doc(rule("arsiaprotocol.audit.read", "allowed")), nil, ""},
		{"max risk", doc(map[string]any{"capability": "a.b", "status": "allowed", "max_risk_level": 10, "conditions": "x"}), nil, ""},
		{"float integer", map[string]any{"policy_version": "v", "token_lifetime_seconds": 60.0, "capabilities": []any{}}, nil, ""},
		{"duplicate", doc(rule("notes.read", "allowed"), rule("notes.read", "oversight_required")), ErrDuplicateCapability, "duplicate capability"},
		{"reserved misuse", doc(rule("arsiaprotocol.bogus", "allowed")), ErrReservedCapability, "reserved"},
		{"wildcard", doc(rule("notes.*", "allowed")), ErrInvalidPolicy, "wildcard"},
		{"bad grammar", doc(rule("notes", "allowed")), ErrInvalidPolicy, "capability"},
		{"bad status", doc(rule("notes.read", "maybe")), ErrInvalidPolicy, "maybe"},
		{"risk too high", doc(map[string]any{"capability": "a.b", "status": "allowed", "max_risk_level": 11}), ErrInvalidPolicy, "max_risk_level"},
		{"unknown member", doc(map[string]any{"capability": "a.b", "status": "allowed", "extra": true}), ErrInvalidPolicy, "extra"},
		{"missing version", map[string]any{"token_lifetime_seconds": 1, "capabilities": []any{}}, ErrInvalidPolicy, "policy_version"},
		{"empty version", map[string]any{"policy_version": "", "token_lifetime_seconds": 1, "capabilities": []any{}}, ErrInvalidPolicy, "policy_version"},
		{"zero lifetime", map[string]any{"policy_version": "v", "token_lifetime_seconds": 0, "capabilities": []any{}}, ErrInvalidPolicy, "token_lifetime_seconds"},
		{"huge lifetime", map[string]any{"policy_version": "v", "token_lifetime_seconds": MaxTokenLifetimeSeconds + 1, "capabilities": []any{}}, ErrInvalidPolicy, "exceeds"},
		{"fractional lifetime", map[string]any{"policy_version": "v", "token_lifetime_seconds": 1.5, "capabilities": []any{}}, ErrInvalidPolicy, "integer"},
		{"rules not list", map[string]any{"policy_version": "v", "token_lifetime_seconds": 1, "capabilities": "x"}, ErrInvalidPolicy, "array"},
		{"nil", nil, ErrInvalidPolicy, "no policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PolicyFromMap(tt.m)
			if tt.sentinel == nil {
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Validate(); err != nil {
					t.Fatalf("Validate after PolicyFromMap: %v", err)
				}
				return
			}
			if p != nil || !errors.Is(err, tt.sentinel) || !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("got %v, %v; want %v", p, err, tt.sentinel)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("error %q does not contain %q", err, tt.contains)
			}
		})
	}
}

func TestPolicyStructValidate(t *testing.T) {
	if err := testPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	var nilPolicy *CapabilityPolicy
	if err := nilPolicy.Validate(); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("nil: %v", err)
	}
	bad := testPolicy()
	bad.Capabilities = append(bad.Capabilities, CapabilityRule{Capability: "notes.read", Status: StatusAllowed},
		CapabilityRule{Capability: "x.y", Status: "nope"}, CapabilityRule{Capability: "x.z", Status: StatusAllowed, MaxRiskLevel: intp(-1)})
	err := bad.Validate()
	for _, s := range []error{ErrDuplicateCapability, ErrInvalidPolicy} {
		if !errors.Is(err, s) {
			t.Errorf("%v does not wrap %v", err, s)
		}
	}
	if !strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "max_risk_level") {
		t.Errorf("error misses the status or risk problem: %v", err)
	}
}

func TestParsePolicyRoundTrip(t *testing.T) {
	p := testPolicy()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParsePolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", q, p)
	}
	var r CapabilityPolicy
	if err := json.Unmarshal(data, &r); err != nil || !reflect.DeepEqual(p, &r) {
		t.Fatalf("UnmarshalJSON: %v", err)
	}
	for _, bad := range []string{
		`[]`, `null`, `{`, `{"policy_version":"v","policy_version":"w","token_lifetime_seconds":1,"capabilities":[]}`,
		`{"policy_version":"v","token_lifetime_seconds":1e400,"capabilities":[]}`,
	} {
		if _, err := ParsePolicy([]byte(bad)); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("ParsePolicy(%s) = %v", bad, err)
		}
	}
	if _, err := ParsePolicy(make([]byte, MaxPolicyBytes+1)); !errors.Is(err, ErrInvalidPolicy) {
		t.Error("oversized document accepted")
	}
	if err := json.Unmarshal([]byte(`{"policy_version":"v"}`), &r); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("UnmarshalJSON accepted an invalid policy: %v", err)
	}
}

func TestPolicyHelpers(t *testing.T) {
	p := testPolicy()
	if r, ok := p.Rule("notes.write"); !ok || r.Status != StatusOversightRequired {
		t.Errorf("Rule = %+v, %v", r, ok)
	}
	if _, ok := p.Rule("notes.*"); ok {
		t.Error("Rule matched a wildcard")
	}
	if p.TokenLifetime() != time.Hour {
		t.Errorf("TokenLifetime = %v", p.TokenLifetime())
	}
	if w := p.Warnings(); len(w) != 0 {
		t.Errorf("Warnings = %v", w)
	}
	short := &CapabilityPolicy{PolicyVersion: "v", TokenLifetimeSeconds: 60}
	if w := short.Warnings(); len(w) != 2 {
		t.Errorf("Warnings = %v", w)
	}
	var nilPolicy *CapabilityPolicy
	if nilPolicy.Map() != nil || nilPolicy.Warnings() != nil || nilPolicy.TokenLifetime() != 0 {
		t.Error("nil policy helpers")
	}
	if _, ok := nilPolicy.Rule("a.b"); ok {
		t.Error("nil policy has a rule")
	}
}

// TestEvaluateMatrix covers every status against every request shape.
func TestEvaluateMatrix(t *testing.T) {
	type want struct {
		approved           bool
		free, over, denied []string
	}
	tests := []struct {
		name      string
		requested []string
		risk      map[string]int
		want      want
	}{
		{"allowed", []string{"notes.read"}, nil, want{true, []string{"notes.read"}, nil, nil}},
		{"oversight", []string{"notes.write"}, nil, want{true, nil, []string{"notes.write"}, nil}},
		{"both", []string{"notes.write", "notes.read"}, nil, want{true, []string{"notes.read"}, []string{"notes.write"}, nil}},
		{"prohibited alone", []string{"notes.delete"}, nil, want{false, nil, nil, []string{"notes.delete"}}},
		{"prohibited poisons", []string{"notes.read", "notes.delete"}, nil, want{false, []string{"notes.read"}, nil, []string{"notes.delete"}}},
		{"unlisted", []string{"mail.send"}, nil, want{false, nil, nil, []string{"mail.send"}}},
		{"partial", []string{"notes.read", "mail.send"}, nil, want{true, []string{"notes.read"}, nil, []string{"mail.send"}}},
		{"empty", nil, nil, want{false, nil, nil, nil}},
		{"repeats", []string{"notes.read", "notes.read", "mail.send", "mail.send"}, nil, want{true, []string{"notes.read"}, nil, []string{"mail.send"}}},
		{"wildcard request", []string{"notes.*"}, nil, want{false, nil, nil, []string{"notes.*"}}},
		{"invalid request", []string{"notes", "", "no-tes.read"}, nil, want{false, nil, nil, []string{"notes", "", "no-tes.read"}}},
		{"case sensitive", []string{"Notes.read"}, nil, want{false, nil, nil, []string{"Notes.read"}}},
		{"reserved", []string{arsia.CapAuditRead}, nil, want{true, []string{arsia.CapAuditRead}, nil, nil}},
		{"risk within", []string{"payments.charge"}, map[string]int{"payments.charge": 3}, want{true, []string{"payments.charge"}, nil, nil}},
		{"risk above", []string{"payments.charge"}, map[string]int{"payments.charge": 5}, want{false, nil, nil, []string{"payments.charge"}}},
		{"risk above poisons", []string{"notes.read", "payments.charge"}, map[string]int{"payments.charge": 4}, want{false, []string{"notes.read"}, nil, []string{"payments.charge"}}},
		{"risk unknown", []string{"payments.charge"}, map[string]int{"notes.read": 9}, want{true, []string{"payments.charge"}, nil, nil}},
		{"risk negative", []string{"payments.charge"}, map[string]int{"payments.charge": -1}, want{false, nil, nil, []string{"payments.charge"}}},
		{"risk out of scale", []string{"payments.refund"}, map[string]int{"payments.refund": 11}, want{false, nil, nil, []string{"payments.refund"}}},
		{"risk oversight within", []string{"payments.refund"}, map[string]int{"payments.refund": 6}, want{true, nil, []string{"payments.refund"}, nil}},
		{"risk without max", []string{"notes.read"}, map[string]int{"notes.read": 10}, want{true, []string{"notes.read"}, nil, nil}},
	}
	norm := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(testPolicy(), tt.requested, tt.risk)
			if d.Approved != tt.want.approved || !slices.Equal(d.FreelyAllowed, norm(tt.want.free)) ||
				!slices.Equal(d.OversightRequired, norm(tt.want.over)) || !slices.Equal(d.Denied, norm(tt.want.denied)) {
				t.Fatalf("got %+v, want %+v", d, tt.want)
			}
			wantReason := []string(nil)
			if !d.Approved {
				wantReason = []string{ReasonNoPermittedCapabilities}
			}
			if !slices.Equal(d.DenialReason, wantReason) {
				t.Fatalf("DenialReason = %v", d.DenialReason)
			}
			if eff := d.Effective(); d.Approved != (len(eff) > 0) {
				t.Fatalf("Effective = %v", eff)
			}
		})
	}
}

func TestEvaluateInvalidPolicyGrantsNothing(t *testing.T) {
	dup := testPolicy()
	dup.Capabilities = append(dup.Capabilities, CapabilityRule{Capability: "notes.read", Status: StatusAllowed})
	for name, p := range map[string]*CapabilityPolicy{"nil": nil, "duplicate": dup, "empty": {}} {
		d := Evaluate(p, []string{"notes.read"}, nil)
		if d.Approved || len(d.FreelyAllowed) != 0 || !slices.Equal(d.Denied, []string{"notes.read"}) {
			t.Errorf("%s: %+v", name, d)
		}
	}
}

func TestMostRestrictiveRuleWins(t *testing.T) {
	// A policy cannot hold two rules for one capability; statusFor still
	// combines them the safe way should one slip through.
	p := &CapabilityPolicy{Capabilities: []CapabilityRule{
		{Capability: "a.b", Status: StatusAllowed}, {Capability: "a.b", Status: StatusOversightRequired},
		{Capability: "c.d", Status: StatusProhibited}, {Capability: "c.d", Status: StatusAllowed},
	}}
	if s, ok := p.statusFor("a.b", nil); !ok || s != StatusOversightRequired {
		t.Errorf("a.b: %v %v", s, ok)
	}
	if s, ok := p.statusFor("c.d", nil); !ok || s != StatusProhibited {
		t.Errorf("c.d: %v %v", s, ok)
	}
}

func TestPhaseOrder(t *testing.T) {
	all := Phases()
	if len(all) != 6 || all[0] != PhaseDiscoveryAndIdentity || all[5] != PhaseOperational {
		t.Fatalf("Phases = %v", all)
	}
	for i, p := range all {
		if p.Number() != i+1 || !p.Valid() {
			t.Errorf("%s: Number %d", p, p.Number())
		}
	}
	good := [][]Phase{nil, all[:1], all[:3], all}
	for _, seq := range good {
		if err := CheckPhaseOrder(seq); err != nil {
			t.Errorf("CheckPhaseOrder(%v) = %v", seq, err)
		}
	}
	bad := map[string][]Phase{
		"skip first":  {PhaseComplianceConformance},
		"skip middle": {PhaseDiscoveryAndIdentity, PhaseCapabilityScoping},
		"reorder":     {PhaseDiscoveryAndIdentity, PhaseCapabilityScoping, PhaseComplianceConformance},
		"repeat":      {PhaseDiscoveryAndIdentity, PhaseDiscoveryAndIdentity},
		"unknown":     {"registration"},
		"after last":  append(Phases(), PhaseOperational),
	}
	for name, seq := range bad {
		if err := CheckPhaseOrder(seq); !errors.Is(err, ErrPhaseOrder) {
			t.Errorf("%s: CheckPhaseOrder(%v) = %v", name, seq, err)
		}
	}
	if Phase("x").Valid() || Phase("x").Number() != 0 {
		t.Error("unknown phase is valid")
	}
}

func TestPhaseTracker(t *testing.T) {
	var tr PhaseTracker
	if tr.Current() != "" {
		t.Fatal("Current before start")
	}
	if err := tr.Enter(PhaseCapabilityScoping); !errors.Is(err, ErrPhaseOrder) {
		t.Fatalf("skip accepted: %v", err)
	}
	for _, p := range Phases()[:3] {
		if next, ok := tr.Next(); !ok || next != p {
			t.Fatalf("Next = %v, %v; want %v", next, ok, p)
		}
		if err := tr.Enter(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Enter(PhaseComplianceConformance); !errors.Is(err, ErrPhaseOrder) {
		t.Fatalf("going back accepted: %v", err)
	}
	if tr.Current() != PhaseCapabilityScoping || len(tr.Completed()) != 3 {
		t.Fatalf("state: %v %v", tr.Current(), tr.Completed())
	}
	if got := tr.Fail(); got != PhaseCapabilityScoping || tr.Failed() != got {
		t.Fatalf("Fail = %v", got)
	}
	if tr.Fail() != PhaseCapabilityScoping {
		t.Fatal("second Fail changed the phase")
	}
	if err := tr.Enter(PhaseProvenance); !errors.Is(err, ErrPhaseOrder) {
		t.Fatalf("phase after failure accepted: %v", err)
	}
	if _, ok := tr.Next(); ok {
		t.Fatal("Next after failure")
	}
	var early PhaseTracker
	if early.Fail() != PhaseDiscoveryAndIdentity {
		t.Fatal("failing before the first phase")
	}
	var full PhaseTracker
	for _, p := range Phases() {
		if err := full.Enter(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := full.Next(); ok || full.Enter(PhaseOperational) == nil {
		t.Fatal("flow continues after operational")
	}
}

func TestStepTracker(t *testing.T) {
	steps := Phase1Steps()
	reasons := []string{ReasonDiscoveryFailed, ReasonIdentityVerificationFailed, ReasonIdentityVerificationFailed,
		ReasonIdentityVerificationFailed, ReasonIdentityVerificationFailed, ReasonUnacceptableRisk}
	for i, s := range steps {
		if s.Number() != i+1 || !s.Valid() || s.DenialReason() != reasons[i] {
			t.Errorf("%s: %d %s", s, s.Number(), s.DenialReason())
		}
	}
	if Step("x").DenialReason() != "" {
		t.Error("unknown step has a reason")
	}
	if err := CheckStepOrder(steps); err != nil {
		t.Fatal(err)
	}
	if err := CheckStepOrder([]Step{StepFetchDiscovery, StepFetchJWKS}); !errors.Is(err, ErrPhaseOrder) {
		t.Fatalf("skip: %v", err)
	}
	var tr StepTracker
	if tr.Fail() != ReasonDiscoveryFailed {
		t.Fatal("Fail before any step")
	}
	tr = StepTracker{}
	for i, s := range steps {
		if err := tr.Enter(s); err != nil {
			t.Fatal(err)
		}
		if len(tr.Completed()) != i+1 {
			t.Fatal("Completed")
		}
	}
	if !tr.Done() {
		t.Fatal("not done")
	}
	if tr.Fail() != ReasonUnacceptableRisk || tr.Enter(StepFetchDiscovery) == nil {
		t.Fatal("failing the last step")
	}
}

func TestVerifyProvenance(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, created, audit string
		now                  time.Time
		verified             bool
		note                 string
	}{
		{"older identity", "2026-01-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z", now, true, ""},
		{"equal", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z", now, true, ""},
		{"audit first", "2026-03-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z", now, false, "audit predates identity"},
		{"no identity", "", "2026-03-01T00:00:00.000Z", now, false, "identity_created_at is missing"},
		{"no audit", "2026-03-01T00:00:00.000Z", "", now, false, "earliest_audit_record is missing"},
		{"no milliseconds", "2026-01-01T00:00:00Z", "2026-03-01T00:00:00.000Z", now, false, "not an RFC 3339"},
		{"offset", "2026-01-01T00:00:00.000+01:00", "2026-03-01T00:00:00.000Z", now, false, "not an RFC 3339"},
		{"bad date", "2026-02-30T00:00:00.000Z", "2026-03-01T00:00:00.000Z", now, false, "not an RFC 3339"},
		{"future identity", "2026-07-01T00:00:00.000Z", "2026-07-02T00:00:00.000Z", now, false, "in the future"},
		{"within skew", "2026-01-01T00:00:00.000Z", "2026-06-01T00:04:00.000Z", now, true, ""},
		{"no clock", "2026-01-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z", time.Time{}, false, "not set"},
	}
	for _, tt := range tests {
		p := VerifyProvenance(tt.created, tt.audit, tt.now)
		if p.Verified != tt.verified {
			t.Errorf("%s: Verified = %v (%v)", tt.name, p.Verified, p.Notes)
			continue
		}
		if tt.verified && len(p.Notes) != 0 {
			t.Errorf("%s: verified with notes %v", tt.name, p.Notes)
		}
		if tt.note != "" && !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, tt.note) }) {
			t.Errorf("%s: notes %v lack %q", tt.name, p.Notes, tt.note)
		}
	}
	rec := &identity.IdentityRecord{CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := ProvenanceFromRecord(rec, "2026-02-01T00:00:00.000Z", now)
	m := p.Map()
	if !p.Verified || m["identity_created_at"] != "2026-01-01T00:00:00.000Z" || m["earliest_audit_record"] != "2026-02-01T00:00:00.000Z" || m["provenance_verified"] != true {
		t.Errorf("from record: %+v %v", p, m)
	}
	if p := ProvenanceFromRecord(nil, "2026-02-01T00:00:00.000Z", now); p.Verified || p.Notes[0] != "identity_created_at is missing" {
		t.Errorf("nil record: %+v", p)
	}
}

func TestBuildDecisionPayload(t *testing.T) {
	pol := testPolicy()
	approved, err := BuildDecisionPayload(DecisionInput{AgentID: "agent:acme.client", Policy: pol,
		Requested: []string{"notes.read", "notes.write", "mail.send"}})
	if err != nil {
		t.Fatal(err)
	}
	m := approved.Map()
	for _, k := range []string{"decision", "agent_id", "policy_version", "freely_allowed", "oversight_required", "token_lifetime_seconds", "phase"} {
		if _, ok := m[k]; !ok {
			t.Errorf("approved payload lacks %s", k)
		}
	}
	for _, k := range []string{"denial_reason", "access_token", "jwt", "bearer", "token"} {
		if _, ok := m[k]; ok {
			t.Errorf("approved payload has %s", k)
		}
	}
	if m["decision"] != "approved" || m["phase"] != "decision" || m["token_lifetime_seconds"] != 3600 || m["policy_version"] != "test-1" ||
		!slices.Equal(approved.Effective(), []string{"notes.read", "notes.write"}) {
		t.Errorf("approved payload: %v", m)
	}
	if got := approved.AuditEvents(); !slices.Equal(got, []string{EventApprovalDecision, EventAgentOnboarded, EventCapabilityGranted}) {
		t.Errorf("AuditEvents = %v", got)
	}

	denied, err := BuildDecisionPayload(DecisionInput{AgentID: "agent:acme.client", Policy: pol, Requested: []string{"notes.read", "notes.delete"}})
	if err != nil {
		t.Fatal(err)
	}
	m = denied.Map()
	if m["decision"] != "denied" || m["phase"] != "capability_scoping" || m["token_lifetime_seconds"] != 0 ||
		len(denied.FreelyAllowed) != 0 || !reflect.DeepEqual(m["denial_reason"], []any{"no_permitted_capabilities"}) || len(denied.Effective()) != 0 {
		t.Errorf("denied payload: %v", m)
	}
	if got := denied.AuditEvents(); !slices.Equal(got, []string{EventApprovalDecision, EventAgentRejected}) {
		t.Errorf("AuditEvents = %v", got)
	}

	tests := []struct {
		name    string
		in      DecisionInput
		phase   Phase
		reasons []string
		err     bool
	}{
		{"upstream wins", DecisionInput{Policy: pol, Requested: []string{"notes.read"}, DenialReasons: []string{ReasonDiscoveryFailed}, Phase: PhaseDiscoveryAndIdentity},
			PhaseDiscoveryAndIdentity, []string{ReasonDiscoveryFailed}, false},
		{"phase inferred", DecisionInput{DenialReasons: []string{ReasonConformanceFailed, ReasonConformanceFailed}},
			PhaseComplianceConformance, []string{ReasonConformanceFailed}, false},
		{"two phase 1 reasons", DecisionInput{DenialReasons: []string{ReasonIdentityVerificationFailed, ReasonUnacceptableRisk}},
			PhaseDiscoveryAndIdentity, []string{ReasonIdentityVerificationFailed, ReasonUnacceptableRisk}, false},
		{"phase mismatch", DecisionInput{DenialReasons: []string{ReasonDiscoveryFailed}, Phase: PhaseComplianceConformance}, "", nil, true},
		{"mixed phases", DecisionInput{DenialReasons: []string{ReasonDiscoveryFailed, ReasonConformanceFailed}}, "", nil, true},
		{"unknown reason", DecisionInput{DenialReasons: []string{"tired"}}, "", nil, true},
		{"unknown phase", DecisionInput{DenialReasons: []string{ReasonDiscoveryFailed}, Phase: "nap"}, "", nil, true},
		{"phase without reason", DecisionInput{Policy: pol, Requested: []string{"notes.read"}, Phase: PhaseDiscoveryAndIdentity}, "", nil, true},
		{"no policy", DecisionInput{Requested: []string{"notes.read"}}, "", nil, true},
	}
	for _, tt := range tests {
		tt.in.AgentID = "agent:acme.client"
		p, err := BuildDecisionPayload(tt.in)
		if tt.err {
			if !errors.Is(err, ErrInvalidDecision) || p != nil {
				t.Errorf("%s: got %v, %v", tt.name, p, err)
			}
			continue
		}
		if err != nil || p.Approved() || p.Phase != tt.phase || !slices.Equal(p.DenialReason, tt.reasons) {
			t.Errorf("%s: got %+v, %v", tt.name, p, err)
		}
	}
	if _, err := BuildDecisionPayload(DecisionInput{AgentID: "acme.client", Policy: pol, Requested: []string{"notes.read"}}); !errors.Is(err, ErrInvalidDecision) {
		t.Errorf("bad agent id: %v", err)
	}
	data, err := json.Marshal(approved)
	if err != nil || !strings.Contains(string(data), `"decision":"approved"`) {
		t.Errorf("MarshalJSON: %s %v", data, err)
	}
	var nilPayload *Payload
	if nilPayload.Map() != nil || nilPayload.Approved() || len(nilPayload.Effective()) != 0 {
		t.Error("nil payload")
	}
}

func TestAuditEvents(t *testing.T) {
	want := []string{"approval_decision", "agent_onboarded", "agent_rejected", "capability_granted",
		"capability_revoked", "token_issued", "token_revoked"}
	if got := AuditEvents(); !slices.Equal(got, want) {
		t.Fatalf("AuditEvents = %v", got)
	}
	if len(DenialReasons()) != 5 {
		t.Fatal("DenialReasons")
	}
	for _, r := range DenialReasons() {
		if _, ok := PhaseOf(r); !ok {
			t.Errorf("no phase for %s", r)
		}
	}
}

func TestIssueToken(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const gw = "agent:finco.gateway"
	kid := gw + "#key-1"
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p, err := BuildDecisionPayload(DecisionInput{AgentID: "agent:acme.client", Policy: testPolicy(),
		Requested: []string{"notes.read", "notes.write"}})
	if err != nil {
		t.Fatal(err)
	}
	opts := TokenOptions{Signer: priv, KeyID: kid, Issuer: gw, Audience: []string{gw}, Now: now}
	tok, claims, err := IssueToken(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if claims.Scope != "notes.read notes.write" || claims.ExpiresAt-claims.IssuedAt != 3600 || claims.Subject != "agent:acme.client" {
		t.Errorf("claims: %+v", claims)
	}
	jwk, err := arsia.NewSigningJWK(kid, pub)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(map[string]any{"keys": []any{jwk.Map()}})
	keys, err := auth.ParseStaticKeys(jwks)
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := auth.ValidateAccessToken(context.Background(), tok, keys, auth.TokenOptions{Now: now.Add(time.Minute),
		Issuer: gw, ExpectedSubject: "agent:acme.client", ExpectedAudience: gw, RequiredScope: []string{"notes.write"}}); len(errs) > 0 {
		t.Fatalf("token does not validate: %v", errs)
	}

	short := opts
	short.Lifetime = 10 * time.Minute
	short.JKT = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
	if _, c, err := IssueToken(p, short); err != nil || c.ExpiresAt-c.IssuedAt != 600 || c.Confirmation == nil {
		t.Errorf("short lifetime: %+v %v", c, err)
	}

	denied, _ := BuildDecisionPayload(DecisionInput{AgentID: "agent:acme.client", Policy: testPolicy(), Requested: []string{"notes.delete"}})
	forged := *p
	forged.FreelyAllowed = []string{"notes.*"}
	noGrant := *p
	noGrant.FreelyAllowed, noGrant.OversightRequired = nil, nil
	withReason := *p
	withReason.DenialReason = []string{ReasonConformanceFailed}
	badAgent := *p
	badAgent.AgentID = "acme"
	zeroLife := *p
	zeroLife.TokenLifetimeSeconds = 0
	mod := func(f func(*TokenOptions)) TokenOptions { o := opts; f(&o); return o }
	bad := []struct {
		name string
		p    *Payload
		o    TokenOptions
	}{
		{"nil payload", nil, opts},
		{"denied", denied, opts},
		{"wildcard grant", &forged, opts},
		{"no grant", &noGrant, opts},
		{"with reason", &withReason, opts},
		{"bad agent", &badAgent, opts},
		{"zero policy lifetime", &zeroLife, opts},
		{"too long", p, mod(func(o *TokenOptions) { o.Lifetime = 2 * time.Hour })},
		{"fractional", p, mod(func(o *TokenOptions) { o.Lifetime = 1500 * time.Millisecond })},
		{"negative", p, mod(func(o *TokenOptions) { o.Lifetime = -time.Second })},
		{"no issuer", p, mod(func(o *TokenOptions) { o.Issuer = "" })},
		{"no audience", p, mod(func(o *TokenOptions) { o.Audience = nil })},
		{"empty audience", p, mod(func(o *TokenOptions) { o.Audience = []string{""} })},
		{"no clock", p, mod(func(o *TokenOptions) { o.Now = time.Time{} })},
		{"no signer", p, mod(func(o *TokenOptions) { o.Signer = nil })},
		{"no kid", p, mod(func(o *TokenOptions) { o.KeyID = "" })},
		{"bad jti", p, mod(func(o *TokenOptions) { o.JTI = "1" })},
	}
	for _, tt := range bad {
		if tok, _, err := IssueToken(tt.p, tt.o); !errors.Is(err, ErrTokenIssue) || tok != "" {
			t.Errorf("%s: %q, %v", tt.name, tok, err)
		}
	}
}
