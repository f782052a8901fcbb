package identity

import (
	"errors"
	"testing"

	"github.com/custos-runtime/custos/arsia"
)

func TestPolicyRequired(t *testing.T) {
	p := Policy{
		Default: L1,
		ByCapability: map[string]TrustLevel{
			"payments.*":       L2,
			"payments.execute": L3,
			"arsiaprotocol.*":  L2,
			"notes.read":       L1,
		},
		ByProfile: map[string]TrustLevel{"MIFID-II": L3, "DORA": L2},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		caps    []string
		profile string
		want    TrustLevel
	}{
		{"nothing applies", []string{"notes.read"}, "", L1},
		{"wildcard", []string{"notes.read", "payments.refund"}, "", L2},
		{"deeper under wildcard", []string{"payments.sepa.refund"}, "", L2},
		{"exact beats wildcard", []string{"payments.execute"}, "", L3},
		{"wildcard does not cover its prefix", []string{"payments"}, "", L3}, // invalid request: every entry applies
		{"explicit-grant-only still covered", []string{arsia.CapStatePurge}, "", L2},
		{"profile", []string{"notes.read"}, "MIFID-II", L3},
		{"profile is case-sensitive", []string{"notes.read"}, "mifid-ii", L1},
		{"max of capability and profile", []string{"payments.refund"}, "DORA", L2},
		{"wildcard request gets every entry", []string{"notes.*"}, "", L3},
		{"no capabilities", nil, "", L1},
	}
	for _, tc := range tests {
		if got := p.Required(tc.caps, tc.profile); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := (Policy{}).Required([]string{"a.b"}, "X"); got != L1 {
		t.Errorf("zero policy requires %v", got)
	}
}

func TestPolicyCheck(t *testing.T) {
	p := Policy{Default: L1, ByCapability: map[string]TrustLevel{"payments.*": L2}, ByProfile: map[string]TrustLevel{"MIFID-II": L3}}
	if err := p.Check(L2, []string{"payments.refund"}, ""); err != nil {
		t.Errorf("L2 for L2: %v", err)
	}
	if err := p.Check(L3, []string{"payments.refund"}, "MIFID-II"); err != nil {
		t.Errorf("L3 for L3: %v", err)
	}
	err := p.Check(L2, []string{"payments.refund"}, "MIFID-II")
	var ae *arsia.Error
	if !errors.As(err, &ae) || ae.Code != arsia.CodeForbidden || !errors.Is(err, ErrInsufficientTrust) {
		t.Fatalf("short of L3: %v", err)
	}
	if ae.Details["required_trust_level"] != "L3" || ae.Details["actual_trust_level"] != "L2" {
		t.Errorf("details %v", ae.Details)
	}
	if err := arsia.CheckErrorDetails(ae.WireCode(), ae.Details); err != nil {
		t.Errorf("wire details: %v", err)
	}
	for _, bad := range []TrustLevel{0, -1, 4} {
		if err := (Policy{}).Check(bad, nil, ""); !errors.Is(err, ErrInsufficientTrust) {
			t.Errorf("level %v passes: %v", bad, err)
		}
	}
	// A level no one can reach fails closed rather than being ignored.
	if err := (Policy{Default: 9}).Check(L3, nil, ""); !errors.Is(err, ErrInsufficientTrust) {
		t.Errorf("unreachable requirement passes: %v", err)
	}
}

func TestPolicyValidate(t *testing.T) {
	bad := map[string]Policy{
		"default out of range": {Default: 4},
		"bad pattern":          {ByCapability: map[string]TrustLevel{"payments": L2}},
		"bad pattern level":    {ByCapability: map[string]TrustLevel{"payments.*": 0}},
		"empty profile":        {ByProfile: map[string]TrustLevel{"": L2}},
		"bad profile level":    {ByProfile: map[string]TrustLevel{"DORA": 5}},
	}
	for name, p := range bad {
		if err := p.Validate(); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (Policy{}).Validate(); err != nil {
		t.Errorf("zero policy: %v", err)
	}
}
