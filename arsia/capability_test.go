package arsia

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestValidateCapability(t *testing.T) {
	valid := []string{
		"notes.read", "notes.*", "eu.mifid.risk.assess", "eu.mifid.*", "a1.b2", "1a.2b",
		"arsiaprotocol.audit.read", "arsiaprotocol.*", "arsiaprotocol.state.*", "arsiaprotocol.assets.transfer.*",
		strings.Repeat("a", 62) + "." + strings.Repeat("b", 65),
	}
	for _, c := range valid {
		if err := ValidateCapability(c); err != nil {
			t.Errorf("ValidateCapability(%q): %v", c, err)
		}
	}
	invalid := []struct{ in, code, keyword string }{
		{"", "empty_capability", "empty"},
		{strings.Repeat("a", 64) + "." + strings.Repeat("b", 64), "capability_too_long", "128"},
		{"read", "invalid_capability_grammar", "grammar"},
		{"notes.read-all", "invalid_capability_grammar", "hyphen"},
		{"notes.*.read", "invalid_capability_grammar", "grammar"},
		{"notes.re*", "invalid_capability_grammar", "grammar"},
		{"*", "invalid_capability_grammar", "grammar"},
		{".*", "invalid_capability_grammar", "grammar"},
		{"notes..read", "invalid_capability_grammar", "grammar"},
		{"notes.read.", "invalid_capability_grammar", "grammar"},
		{"notes.réad", "invalid_capability_grammar", "grammar"},
		{"notes.read_all", "invalid_capability_grammar", "grammar"},
		{"arsiaprotocol.custom.thing", "reserved_prefix_misuse", "reserved"},
		{"arsiaprotocol.custom.*", "reserved_prefix_misuse", "reserved"},
		{"arsiaprotocol.state.read.more", "reserved_prefix_misuse", "reserved"},
	}
	for _, tc := range invalid {
		err := ValidateCapability(tc.in)
		var ae *Error
		if !errors.As(err, &ae) {
			t.Errorf("ValidateCapability(%q) = %v, want *Error", tc.in, err)
			continue
		}
		if ae.Code != tc.code || !strings.Contains(err.Error(), tc.keyword) {
			t.Errorf("ValidateCapability(%q) = %v (code %s), want code %s mentioning %q", tc.in, err, ae.Code, tc.code, tc.keyword)
		}
		wantSentinel := ErrInvalidCapability
		if tc.code == "reserved_prefix_misuse" {
			wantSentinel = ErrReservedCapability
		}
		if !errors.Is(err, wantSentinel) {
			t.Errorf("ValidateCapability(%q) does not wrap %v", tc.in, wantSentinel)
		}
		if WireCode(ae.Code) != CodeInvalidRequest {
			t.Errorf("%s maps to wire %s", ae.Code, WireCode(ae.Code))
		}
	}
}

func TestReservedCapabilities(t *testing.T) {
	rc := ReservedCapabilities()
	if len(rc) != 16 {
		t.Fatalf("%d reserved capabilities, want 16", len(rc))
	}
	for _, c := range rc {
		if !IsReservedCapability(c) || ValidateCapability(c) != nil {
			t.Errorf("%s: reserved=%v err=%v", c, IsReservedCapability(c), ValidateCapability(c))
		}
	}
	rc[0] = "mutated"
	if !IsReservedCapability(CapOversightApprove) {
		t.Error("ReservedCapabilities returned the internal slice")
	}
	if IsReservedCapability("notes.read") || IsReservedCapability("arsiaprotocol.*") {
		t.Error("non-reserved reported reserved")
	}
	for _, c := range []string{CapStatePurge, CapStateSnapshot, CapOversightApprove} {
		if !IsExplicitGrantOnly(c) {
			t.Errorf("%s is explicit-grant-only", c)
		}
	}
	if IsExplicitGrantOnly(CapStateRead) {
		t.Error("state.read is not explicit-grant-only")
	}
}

func TestMatchCapability(t *testing.T) {
	tests := []struct {
		scope, req string
		want       bool
	}{
		{"notes.read", "notes.read", true},
		{"notes.*", "notes.read", true},
		{"notes.*", "notes.a.b", true},
		{"eu.mifid.*", "eu.mifid.risk.assess", true},
		{"notes.read", "notes.*", false},    // a wildcard request is never granted
		{"notes.*", "notes.*", false},       // not even by the same wildcard
		{"notes.*", "notes", false},         // bare prefix is not below it
		{"notes.*", "notesx.read", false},   // segment boundary
		{"notes.*", "billing.read", false},  // other domain
		{"Notes.read", "notes.read", false}, // case-sensitive
		{"arsiaprotocol.*", CapAuditRead, true},
		{"arsiaprotocol.*", CapStatePurge, false},
		{"arsiaprotocol.*", CapStateSnapshot, false},
		{"arsiaprotocol.*", CapOversightApprove, false},
		{"arsiaprotocol.state.*", CapStateWrite, true},
		{"arsiaprotocol.state.*", CapStatePurge, false},
		{CapStatePurge, CapStatePurge, true}, // exact grant
		{"arsiaprotocol.custom.*", "arsiaprotocol.custom.x", false},
		{"notes.read-all", "notes.read-all", false}, // invalid grants nothing
		{"", "", false},
	}
	for _, tc := range tests {
		if got := MatchCapability(tc.scope, tc.req); got != tc.want {
			t.Errorf("MatchCapability(%q, %q) = %v, want %v", tc.scope, tc.req, got, tc.want)
		}
	}
}

func TestMatchCapabilities(t *testing.T) {
	tests := []struct {
		scope, req []string
		want       bool
	}{
		{[]string{"notes.*"}, []string{"notes.read", "notes.write"}, true},
		{[]string{"notes.read"}, []string{"notes.read", "notes.write"}, false},
		{[]string{"notes.*", "billing.read"}, []string{"notes.write", "billing.read", "billing.export"}, false},
		{[]string{"notes.*"}, nil, false},
		{nil, []string{"notes.read"}, false},
	}
	for _, tc := range tests {
		if got := MatchCapabilities(tc.scope, tc.req); got != tc.want {
			t.Errorf("MatchCapabilities(%v, %v) = %v", tc.scope, tc.req, got)
		}
	}
}

func TestDowngradeCapabilities(t *testing.T) {
	got, err := DowngradeCapabilities([]string{"notes.read", "notes.write", "notes.delete", "notes.read"}, []string{"notes.write", "notes.read"})
	if err != nil || !slices.Equal(got, []string{"notes.read", "notes.write"}) {
		t.Errorf("downgrade = %v, %v", got, err)
	}
	got, err = DowngradeCapabilities([]string{"notes.read", "notes.write"}, []string{"notes.*"})
	if err != nil || !slices.Equal(got, []string{"notes.read", "notes.write"}) {
		t.Errorf("wildcard downgrade = %v, %v", got, err)
	}
	_, err = DowngradeCapabilities([]string{"billing.read"}, []string{"notes.*"})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeForbidden || !errors.Is(err, ErrNoEffectiveCapabilities) {
		t.Fatalf("empty downgrade: %v", err)
	}
	if CheckErrorDetails(ae.Code, ae.Details) != nil {
		t.Errorf("forbidden details incomplete: %v", ae.Details)
	}
	if _, ok := ae.Details["required_capabilities"]; !ok {
		t.Errorf("details %v lack required_capabilities", ae.Details)
	}
}
