package config

import (
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

const relayYAML = `
agent: agent:acme.broker
relay:
  enabled: true
  jurisdiction: PT
  residency_zones: [PT, EU]
  forward_timeout: 2s
  max_hops: 2
  routes:
    - agent: agent:acme.ledger
      inbox: https://ledger.acme.example/v1/arsia/inbox
      residency_zones: [PT]
    - agent: agent:acme.notes
      inbox: http://127.0.0.1:9000/v1/arsia/inbox
`

func TestRelay(t *testing.T) {
	c := Default()
	if err := c.Decode(strings.NewReader(relayYAML), "custos.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	r := c.Relay
	if !r.Enabled || r.Jurisdiction != "PT" || len(r.ResidencyZones) != 2 || r.Timeout() != 2*time.Second || r.Hops() != 2 || len(r.Routes) != 2 {
		t.Fatalf("relay = %+v", r)
	}
	e := c.BrokerEntry(time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC))
	if err := e.Validate(); err != nil || e.AgentID != "agent:acme.broker" || !strings.HasSuffix(e.Inbox, "/v1/arsia/inbox") {
		t.Fatalf("broker entry %+v: %v", e, err)
	}
	d := Default()
	if d.Relay.Enabled || d.Relay.Timeout() != arsia.RelayForwardTimeout || d.Relay.Hops() != DefaultRelayMaxHops {
		t.Fatalf("defaults = %+v", d.Relay)
	}
	if err := d.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestRelayRefused(t *testing.T) {
	base := func(relay string) string {
		return "agent: agent:acme.broker\npublic_url: https://broker.example\nrelay:\n  enabled: true\n" + relay
	}
	ok := "  jurisdiction: PT\n  residency_zones: [PT]\n"
	route := "  routes:\n    - agent: agent:acme.ledger\n      inbox: https://ledger.example/v1/arsia/inbox\n"
	for name, tc := range map[string]struct{ yml, want string }{
		"disabled with keys":      {"relay:\n  jurisdiction: PT\n", "enabled is false"},
		"no jurisdiction":         {base("  residency_zones: [PT]\n" + route), "relay.jurisdiction"},
		"lower-case jurisdiction": {base("  jurisdiction: pt\n  residency_zones: [PT]\n" + route), "relay.jurisdiction"},
		"no zones":                {base("  jurisdiction: PT\n" + route), "residency_zones: empty"},
		"bad zone":                {base("  jurisdiction: PT\n  residency_zones: [PRT]\n" + route), "residency_zones[0]"},
		"zone twice":              {base("  jurisdiction: PT\n  residency_zones: [PT, PT]\n" + route), "listed twice"},
		"EU outside the EU":       {base("  jurisdiction: CH\n  residency_zones: [EU]\n" + route), "Rule 2"},
		"country mismatch":        {base("  jurisdiction: PT\n  residency_zones: [DE]\n" + route), "jurisdiction is 'PT'"},
		"timeout too long":        {base(ok + "  forward_timeout: 11s\n" + route), "forward_timeout"},
		"timeout too short":       {base(ok + "  forward_timeout: 1ms\n" + route), "forward_timeout"},
		"timeout negative":        {base(ok + "  forward_timeout: -1s\n" + route), "forward_timeout"},
		"hops negative":           {base(ok + "  max_hops: -1\n" + route), "max_hops"},
		"hops too many":           {base(ok + "  max_hops: 17\n" + route), "max_hops"},
		"no routes":               {base(ok), "routes: empty"},
		"bad agent":               {base(ok + "  routes:\n    - agent: ledger\n      inbox: https://l.example/\n"), "routes[0].agent"},
		"own agent":               {base(ok + "  routes:\n    - agent: agent:acme.broker\n      inbox: https://l.example/\n"), "is this gateway"},
		"duplicate agent": {base(ok + "  routes:\n    - agent: agent:acme.l\n      inbox: https://l.example/\n" +
			"    - agent: agent:acme.l\n      inbox: https://m.example/\n"), "has a route already"},
		"relative inbox":   {base(ok + "  routes:\n    - agent: agent:acme.l\n      inbox: /v1/arsia/inbox\n"), "routes[0].inbox"},
		"ftp inbox":        {base(ok + "  routes:\n    - agent: agent:acme.l\n      inbox: ftp://l.example/\n"), "http or https"},
		"credentials":      {base(ok + "  routes:\n    - agent: agent:acme.l\n      inbox: https://u:p@l.example/\n"), "credentials"},
		"fragment":         {base(ok + "  routes:\n    - agent: agent:acme.l\n      inbox: https://l.example/#x\n"), "fragment"},
		"own inbox":        {base(ok + "  routes:\n    - agent: agent:acme.l\n      inbox: https://broker.example/v1/arsia/inbox\n"), "own inbox"},
		"route zone":       {base(ok + "  routes:\n    - agent: agent:acme.l\n      inbox: https://l.example/\n      residency_zones: [EU]\n"), "not one of relay.residency_zones"},
		"route zone twice": {base(ok + "  routes:\n    - agent: agent:acme.l\n      inbox: https://l.example/\n      residency_zones: [PT, PT]\n"), "listed twice"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Default()
			if err := c.Decode(strings.NewReader(tc.yml), "custos.yaml"); err != nil {
				t.Fatal(err)
			}
			err := c.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check() = %v, want %q", err, tc.want)
			}
		})
	}
}
