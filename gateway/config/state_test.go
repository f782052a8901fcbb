package config

import (
	"errors"
	"strings"
	"testing"
)

func TestState(t *testing.T) {
	c := Default()
	yml := `
state:
  enabled: true
  zones: [PT, EU]
  operator_id: agent:acme.operator
  audit_retention_days: 730
  max_entries: 5000
senders:
  - agent: agent:acme.advisor
    capabilities: [arsiaprotocol.state.*, arsiaprotocol.state.snapshot]
`
	if err := c.Decode(strings.NewReader(yml), "custos.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if s := c.State; !s.Enabled || len(s.Zones) != 2 || s.OperatorID != "agent:acme.operator" || s.AuditRetentionDays != 730 || s.MaxEntries != 5000 {
		t.Fatalf("state = %+v", s)
	}
	if d := Default(); d.State.Enabled {
		t.Fatal("state enabled by default")
	}
}

func TestStateRefused(t *testing.T) {
	for name, tc := range map[string]struct{ yml, want string }{
		"zone":            {"state:\n  enabled: true\n  zones: [pt]\n", "state.zones[0]"},
		"zone 3 letters":  {"state:\n  enabled: true\n  zones: [PRT]\n", "state.zones[0]"},
		"zone twice":      {"state:\n  enabled: true\n  zones: [PT, PT]\n", "listed twice"},
		"operator":        {"state:\n  enabled: true\n  operator_id: acme\n", "state.operator_id"},
		"retention":       {"state:\n  enabled: true\n  audit_retention_days: -1\n", "state.audit_retention_days"},
		"max entries":     {"state:\n  enabled: true\n  max_entries: -5\n", "state.max_entries"},
		"handler clash":   {"state:\n  enabled: true\nhandlers:\n  arsiaprotocol.state.read:\n    type: echo\n", "handlers.arsiaprotocol.state.read"},
		"disabled, tuned": {"state:\n  zones: [PT]\n", "enabled is false"},
		"unknown key":     {"state:\n  enable: true\n", "enable"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Default()
			err := c.Decode(strings.NewReader(tc.yml), "custos.yaml")
			if err == nil {
				err = c.Check()
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}
