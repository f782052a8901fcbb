package config

import (
	"strings"
	"testing"
	"time"
)

func TestOnboarding(t *testing.T) {
	c := Default()
	yml := "authorization_server: {enabled: true}\nonboarding:\n  enabled: true\n  policy_file: /etc/custos/policy.json\n" +
		"  discovery_urls: [\"https://agents.partner.example/\", \"http://localhost:9000/\"]\n" +
		"senders:\n  - agent: agent:acme.advisor\n    capabilities: [\"billing.*\"]\n    oversight: [billing.refund]\n"
	if err := c.Decode(strings.NewReader(yml), "custos.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if o := c.Onboarding; o.Profile != DefaultOnboardingProfile || o.FetchTimeout != DefaultOnboardingFetchTimeout || o.MaxInFlight != DefaultOnboardingInFlight {
		t.Errorf("defaults not filled: %+v", o)
	}
	if got := c.Senders[0].Oversight; len(got) != 1 || got[0] != "billing.refund" {
		t.Errorf("oversight %v", got)
	}
}

func TestOnboardingRefused(t *testing.T) {
	const on = "authorization_server: {enabled: true}\nonboarding:\n  enabled: true\n  policy_file: /p.json\n"
	for name, tc := range map[string]struct{ yml, want string }{
		"no policy":         {"authorization_server: {enabled: true}\nonboarding:\n  enabled: true\n  discovery_urls: [\"https://a.example/\"]\n", "policy_file"},
		"no discovery urls": {on, "discovery_urls: required"},
		"no auth server":    {"onboarding:\n  enabled: true\n  policy_file: /p.json\n  discovery_urls: [\"https://a.example/\"]\n", "authorization_server"},
		"plain http":        {on + "  discovery_urls: [\"http://agents.example/\"]\n", "discovery_urls[0]"},
		"user info":         {on + "  discovery_urls: [\"https://u:p@agents.example/\"]\n", "discovery_urls[0]"},
		"query":             {on + "  discovery_urls: [\"https://agents.example/?x=1\"]\n", "discovery_urls[0]"},
		"relative":          {on + "  discovery_urls: [\"/agents/\"]\n", "discovery_urls[0]"},
		"timeout":           {on + "  discovery_urls: [\"https://a.example/\"]\n  fetch_timeout: 2m\n", "fetch_timeout"},
		"in flight":         {on + "  discovery_urls: [\"https://a.example/\"]\n  max_in_flight: 1000\n", "max_in_flight"},
		"empty oversight":   {"senders:\n  - agent: agent:acme.advisor\n    capabilities: [\"a.b\"]\n    oversight: [\"\"]\n", "senders[0].oversight"},
	} {
		c := Default()
		if err := c.Decode(strings.NewReader(tc.yml), "custos.yaml"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := c.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %s", name, err, tc.want)
		}
	}
	if d := Default(); d.Onboarding.Enabled || d.Onboarding.FetchTimeout != 0*time.Second {
		t.Error("onboarding on by default")
	}
}

func TestHandlerRiskLevel(t *testing.T) {
	for yml, ok := range map[string]bool{
		"handlers:\n  a.b: {type: echo, risk_level: 0}\n":  true,
		"handlers:\n  a.b: {type: echo, risk_level: 10}\n": true,
		"handlers:\n  a.b: {type: echo, risk_level: 11}\n": false,
		"handlers:\n  a.b: {type: echo, risk_level: -1}\n": false,
	} {
		c := Default()
		if err := c.Decode(strings.NewReader(yml), "custos.yaml"); err != nil {
			t.Fatal(err)
		}
		if err := c.Check(); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", yml, err, ok)
		}
	}
	c := Default()
	if err := c.Decode(strings.NewReader("handlers:\n  a.b: {type: echo, risk_level: 4}\n  c.d: {type: echo}\n"), "custos.yaml"); err != nil {
		t.Fatal(err)
	}
	if got := RiskLevels(c.Handlers); len(got) != 1 || got["a.b"] != 4 {
		t.Errorf("RiskLevels = %v", got)
	}
}
