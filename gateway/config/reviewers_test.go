package config

import (
	"strings"
	"testing"
)

// allowed_origins takes exact browser origins only: what an Origin header
// carries, so that the comparison with it is exact.
func TestAllowedOrigins(t *testing.T) {
	for origin, ok := range map[string]bool{
		"https://review.example":      true,
		"http://127.0.0.1:8080":       true,
		"https://[::1]:8443":          true,
		"https://review.example/":     false,
		"https://review.example/path": false,
		"https://Review.example":      false,
		"ftp://review.example":        false,
		"review.example":              false,
		"https://user@review.example": false,
		"https://review.example?x=1":  false,
		"https://review.example#x":    false,
		"null":                        false,
		"":                            false,
	} {
		c := Default()
		if err := c.Decode(strings.NewReader("allowed_origins: [\""+origin+"\"]\n"), "test"); err != nil {
			t.Fatal(err)
		}
		err := c.Check()
		if (err == nil) != ok {
			t.Errorf("%q: %v, want accepted %v", origin, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "allowed_origins[0]") {
			t.Errorf("%q: %v does not name the key", origin, err)
		}
	}
}

func TestQuorumChecks(t *testing.T) {
	base := func() Config {
		c := Default()
		c.Roles = map[string]Role{"finance": {Capabilities: []string{"billing.*"}}, "security": {All: true}}
		return c
	}
	tests := []struct {
		name string
		rule QuorumRule
		want string // "" = accepted
	}{
		{"two of two roles", QuorumRule{Capabilities: []string{"billing.*"}, ApprovalsRequired: 2, ApprovalsFromRoles: []string{"finance", "security"}}, ""},
		{"deny quorum", QuorumRule{ApprovalsRequired: 3, Deny: "quorum"}, ""},
		{"zero", QuorumRule{ApprovalsRequired: 0}, "approvals_required: 0"},
		{"too many", QuorumRule{ApprovalsRequired: 21}, "approvals_required: 21"},
		{"more roles than approvals", QuorumRule{ApprovalsRequired: 1, ApprovalsFromRoles: []string{"finance", "security"}}, "more than approvals_required"},
		{"unknown role", QuorumRule{ApprovalsRequired: 2, ApprovalsFromRoles: []string{"legal"}}, `unknown role "legal"`},
		{"role twice", QuorumRule{ApprovalsRequired: 2, ApprovalsFromRoles: []string{"finance", "finance"}}, "appears twice"},
		{"bad deny", QuorumRule{ApprovalsRequired: 2, Deny: "all"}, `deny: "all"`},
		{"bad pattern", QuorumRule{ApprovalsRequired: 2, Capabilities: []string{"["}}, "not a capability pattern"},
		{"unknown profile", QuorumRule{ApprovalsRequired: 2, Profiles: []string{"NOPE"}}, "unknown compliance profile"},
	}
	for _, tc := range tests {
		c := base()
		c.Quorum = []QuorumRule{tc.rule}
		errs := c.checkQuorum()
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", tc.name, errs)
		case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, errs, tc.want)
		}
	}
	c := base()
	c.Handlers = map[string]Handler{"billing.pay": {Type: "echo", RequiredApprovals: -1}}
	if errs := c.checkQuorum(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "handlers.billing.pay.required_approvals") {
		t.Errorf("a negative required_approvals: %v", errs)
	}
}
