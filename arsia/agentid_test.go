package arsia

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseAgentID(t *testing.T) {
	valid := []struct {
		in   string
		want AgentID
	}{
		{"agent:acme.echo-client", AgentID{Org: "acme", Name: "echo-client", Sub: []string{}}},
		{"agent:arsialabs.demo.risk-assessor", AgentID{Org: "arsialabs", Name: "demo", Sub: []string{"risk-assessor"}}},
		{"agent:acme.bot/key1", AgentID{Org: "acme", Name: "bot", Sub: []string{}, Resource: "key1"}},
		{"agent:acme.bot/session_abc", AgentID{Org: "acme", Name: "bot", Sub: []string{}, Resource: "session_abc"}},
		{"agent:org1.app2.v3.x4", AgentID{Org: "org1", Name: "app2", Sub: []string{"v3", "x4"}}},
		{"agent:Acme.Billing", AgentID{Org: "Acme", Name: "Billing", Sub: []string{}}},
		{"agent:" + strings.Repeat("a", 124) + "." + strings.Repeat("b", 125), AgentID{Org: strings.Repeat("a", 124), Name: strings.Repeat("b", 125), Sub: []string{}}},
	}
	for _, tc := range valid {
		got, err := ParseAgentID(tc.in)
		if err != nil {
			t.Errorf("ParseAgentID(%q): %v", tc.in, err)
			continue
		}
		if got.Org != tc.want.Org || got.Name != tc.want.Name || !slices.Equal(got.Sub, tc.want.Sub) || got.Sub == nil || got.Resource != tc.want.Resource {
			t.Errorf("ParseAgentID(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), tc.in)
		}
		if !ValidAgentID(tc.in) {
			t.Errorf("ValidAgentID(%q) = false", tc.in)
		}
	}

	invalid := []struct{ in, keyword string }{
		{"", "empty"},
		{"acme.echo-client", "prefix"},
		{"Agent:acme.bot", "prefix"},
		{"agent:acme", "segment"},
		{"agent:-acme.bot", "hyphen"},
		{"agent:acme-.bot", "hyphen"},
		{"agent:acme.bot-", "hyphen"},
		{"agent:açme.bot", "non-ascii"},
		{"agent:acme.my_bot", "'_'"},
		{"agent:acme..bot", "empty segment"},
		{"agent:.acme.bot", "empty segment"},
		{"agent:acme.bot.", "empty segment"},
		{"agent:acme.bot/", "empty resource"},
		{"agent:acme.bot/a/b", "'/'"},
		{"agent:acme.bot/-x", "start with"},
		{"agent:acme.bot/a.b", "'.'"},
		{"agent:acme.b t", "' '"},
		{"agent:acme.bot#key1", "'#'"},
		{"agent:acme.bot-" + strings.Repeat("a", 250), "256"},
	}
	for _, tc := range invalid {
		_, err := ParseAgentID(tc.in)
		if err == nil {
			t.Errorf("ParseAgentID(%q) succeeded", tc.in)
			continue
		}
		if !errors.Is(err, ErrInvalidAgentID) {
			t.Errorf("ParseAgentID(%q) error %v does not wrap ErrInvalidAgentID", tc.in, err)
		}
		if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.keyword)) {
			t.Errorf("ParseAgentID(%q) error %q does not mention %q", tc.in, err, tc.keyword)
		}
		if ValidAgentID(tc.in) {
			t.Errorf("ValidAgentID(%q) = true", tc.in)
		}
	}
}

func TestSameAgent(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"agent:acme.billing", "agent:acme.billing", true},
		{"agent:acme.billing", "agent:Acme.Billing", false},
		{"agent:acme.billing", "agent:acme.billing/r1", false},
		{"acme.billing", "acme.billing", false}, // invalid never equal
	}
	for _, tc := range tests {
		if got := SameAgent(tc.a, tc.b); got != tc.want {
			t.Errorf("SameAgent(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
	a, _ := ParseAgentID("agent:acme.billing.eu/r")
	b, _ := ParseAgentID("agent:acme.billing.eu/r")
	if !a.Equal(b) {
		t.Error("Equal on identical ids is false")
	}
}
