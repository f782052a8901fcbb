package assets

import (
	"errors"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/arsia"
)

func TestCapabilityRiskLevels(t *testing.T) {
	want := map[string]int{
		"arsiaprotocol.assets.transfer.initiate": 5, "arsiaprotocol.assets.transfer.approve": 7,
		"arsiaprotocol.assets.transfer.reverse": 6, "arsiaprotocol.assets.escrow.create": 5,
		"arsiaprotocol.assets.escrow.release": 7, "arsiaprotocol.assets.escrow.cancel": 6,
		"arsiaprotocol.assets.audit.read": 3,
	}
	got := CapabilityRiskLevels()
	if len(got) != len(want) {
		t.Fatalf("%d levels, want %d", len(got), len(want))
	}
	for c, l := range want {
		if got[c] != l {
			t.Errorf("%s = %d, want %d", c, got[c], l)
		}
		if lvl, ok := CapabilityRiskLevel(c); !ok || lvl != l {
			t.Errorf("CapabilityRiskLevel(%s) = %d, %v", c, lvl, ok)
		}
		if !arsia.IsReservedCapability(c) {
			t.Errorf("%s is not reserved", c)
		}
	}
	got[arsia.CapAssetsAuditRead] = 0
	if l, _ := CapabilityRiskLevel(arsia.CapAssetsAuditRead); l != 3 {
		t.Error("CapabilityRiskLevels returned the package's own map")
	}
	if _, ok := CapabilityRiskLevel("arsiaprotocol.state.read"); ok {
		t.Error("state.read has an assets risk level")
	}
}

func TestRequiresSCA(t *testing.T) {
	for risk := -1; risk <= 11; risk++ {
		got, err := RequiresSCA(risk)
		switch {
		case risk < 0 || risk > 10:
			if !errors.Is(err, ErrRiskLevel) || !got {
				t.Errorf("risk %d: %v, %v (want fail closed)", risk, got, err)
			}
		case err != nil || got != (risk >= 7):
			t.Errorf("risk %d: %v, %v", risk, got, err)
		}
	}
}

func TestCheckTwoPartyApproval(t *testing.T) {
	both := []string{arsia.CapAssetsTransferApprove, arsia.CapOversightApprove}
	tests := []struct {
		name                string
		initiator, approver string
		caps                []string
		ok                  bool
		keyword             string
	}{
		{"distinct with both", "agent:acme.alpha", "agent:acme.approver", both, true, ""},
		{"wildcard transfer caps", "agent:acme.alpha", "agent:acme.approver", []string{"arsiaprotocol.assets.transfer.*", arsia.CapOversightApprove}, true, ""},
		{"same agent", "agent:acme.alpha", "agent:acme.alpha", both, false, "distinct"},
		{"missing oversight", "agent:acme.alpha", "agent:acme.approver", both[:1], false, "missing"},
		{"oversight only by wildcard", "agent:acme.alpha", "agent:acme.approver", []string{arsia.CapAssetsTransferApprove, "arsiaprotocol.oversight.*"}, false, "missing"},
		{"no caps", "agent:acme.alpha", "agent:acme.approver", nil, false, "missing"},
		{"invalid approver", "agent:acme.alpha", "approver", both, false, "agent identifier"},
		{"invalid initiator", "alpha", "agent:acme.approver", both, false, "initiator"},
	}
	for _, tt := range tests {
		errs := CheckTwoPartyApproval(tt.initiator, tt.approver, tt.caps)
		wantProblems(t, tt.name, errs, tt.ok, tt.keyword, nil)
		if !tt.ok && tt.keyword != "initiator" && !HasCode(errs, arsia.CodeForbidden) {
			t.Errorf("%s: not forbidden", tt.name)
		}
	}
	e := CheckTwoPartyApproval("agent:acme.alpha", "agent:acme.approver", both[:1])[0]
	if e.Details["required_capabilities"] == nil || e.Details["provided_capabilities"] == nil {
		t.Errorf("forbidden details %v", e.Details)
	}
}

func TestValidateTokenScope(t *testing.T) {
	tests := []struct {
		scope []string
		ok    bool
	}{
		{[]string{arsia.CapAssetsTransferInitiate}, true},
		{[]string{arsia.CapAssetsTransferApprove, arsia.CapOversightApprove}, true},
		{[]string{arsia.CapAssetsTransferInitiate, arsia.CapAssetsEscrowCreate}, true},
		{nil, true},
		{[]string{arsia.CapAssetsTransferInitiate, arsia.CapAssetsTransferApprove}, false},
		{[]string{"arsiaprotocol.assets.transfer.*"}, false},
		{[]string{"arsiaprotocol.assets.*"}, false},
		{[]string{arsia.CapAssetsTransferInitiate, "arsiaprotocol.assets.transfer.*"}, false},
		{[]string{"arsiaprotocol.assets.escrow.*", arsia.CapAssetsTransferApprove}, true},
	}
	for _, tt := range tests {
		e := ValidateTokenScope(tt.scope)
		if (e == nil) != tt.ok {
			t.Errorf("ValidateTokenScope(%v) = %v", tt.scope, e)
			continue
		}
		if e != nil && (!errors.Is(e, ErrSeparationOfDuties) || e.Code != arsia.CodeForbidden ||
			!strings.Contains(e.Error(), "separation of duties")) {
			t.Errorf("ValidateTokenScope(%v) error %+v", tt.scope, e)
		}
	}
}

func TestIsSCAExempt(t *testing.T) {
	tests := []struct {
		name   string
		x      SCAExemption
		exempt bool
		reason string
	}{
		{"25 EUR", SCAExemption{Amount: MustParseAmount("25"), Currency: "EUR"}, true, ExemptLowValue},
		{"30 EUR exactly", SCAExemption{Amount: MustParseAmount("30.00"), Currency: "EUR"}, true, ExemptLowValue},
		{"30.01 EUR", SCAExemption{Amount: MustParseAmount("30.01"), Currency: "EUR"}, false, ""},
		{"25 USD", SCAExemption{Amount: MustParseAmount("25"), Currency: "USD"}, false, ""},
		{"zero EUR", SCAExemption{Currency: "EUR"}, false, ""},
		{"negative EUR", SCAExemption{Amount: MustParseAmount("-1"), Currency: "EUR"}, false, ""},
		{"cumulative over 100", SCAExemption{Amount: MustParseAmount("25"), Currency: "EUR", CumulativeSinceSCA: amt("100.01")}, false, ""},
		{"cumulative 100", SCAExemption{Amount: MustParseAmount("25"), Currency: "EUR", CumulativeSinceSCA: amt("100")}, true, ExemptLowValue},
		{"recurring", SCAExemption{Amount: MustParseAmount("500"), Currency: "EUR", Recurring: true}, true, ExemptRecurring},
		{"trusted", SCAExemption{Amount: MustParseAmount("500"), Currency: "EUR", TrustedBeneficiary: true}, true, ExemptTrustedBeneficiary},
		{"none", SCAExemption{Amount: MustParseAmount("500"), Currency: "EUR"}, false, ""},
	}
	for _, tt := range tests {
		exempt, reason := IsSCAExempt(tt.x)
		if exempt != tt.exempt || reason != tt.reason {
			t.Errorf("%s: %v %q, want %v %q", tt.name, exempt, reason, tt.exempt, tt.reason)
		}
	}
}

func TestValidateSCAFactors(t *testing.T) {
	jkt := "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
	tests := []struct {
		name    string
		f       SCAFactors
		ok      bool
		keyword string
	}{
		{"option A", SCAFactors{Knowledge: true, Possession: true}, true, ""},
		{"option A no possession", SCAFactors{Knowledge: true}, false, "possession"},
		{"option A no knowledge", SCAFactors{Possession: true}, false, "knowledge"},
		{"option B", SCAFactors{Knowledge: true, Possession: true, CNF: map[string]any{"jkt": jkt}}, true, ""},
		{"option B empty cnf", SCAFactors{Knowledge: true, Possession: true, CNF: map[string]any{}}, false, "jkt"},
		{"option B bad jkt", SCAFactors{Knowledge: true, Possession: true, CNF: map[string]any{"jkt": "short"}}, false, "jkt"},
		{"option B jkt not string", SCAFactors{Knowledge: true, Possession: true, CNF: map[string]any{"jkt": 5}}, false, "jkt"},
	}
	for _, tt := range tests {
		errs := ValidateSCAFactors(tt.f)
		wantProblems(t, tt.name, errs, tt.ok, tt.keyword, ErrSCA)
	}
}
