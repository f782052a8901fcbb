package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

// Relay makes the gateway a Compliance Broker (ARSIA-Routing, docs/relay.md):
// it forwards the signed requests addressed to the agents of routes, for the
// data-residency zones it serves, unchanged, and passes their replies back.
//
//	relay:
//	  enabled: true
//	  jurisdiction: PT                 # where the broker is (ISO 3166-1 alpha-2)
//	  residency_zones: [PT, EU]        # the zones it relays for
//	  forward_timeout: 10s             # one forwarding attempt (at most 10s)
//	  max_hops: 3                      # brokers a message may pass through
//	  routes:
//	    - agent: agent:acme.ledger
//	      inbox: https://ledger.acme.example/v1/arsia/inbox
//	      residency_zones: [PT]        # optional: only these of the broker's zones
//
// A sender needs a grant for arsiaprotocol.broker.relay. A change needs a
// restart.
type Relay struct {
	Enabled bool `yaml:"enabled"`
	// Jurisdiction is the ISO 3166-1 alpha-2 code of the country the
	// broker is located in; a broker serving EU must be in the EU/EEA.
	Jurisdiction string `yaml:"jurisdiction"`
	// ResidencyZones are the zones (country codes, or EU) the broker
	// relays for; a country zone must be its jurisdiction.
	ResidencyZones []string `yaml:"residency_zones"`
	// ForwardTimeout bounds one forwarding attempt (0: 10 s, the most).
	ForwardTimeout time.Duration `yaml:"forward_timeout"`
	// MaxHops is how many brokers, this one included, a message may
	// have passed through (0: DefaultRelayMaxHops).
	MaxHops int `yaml:"max_hops"`
	// Routes say where each recipient's inbox is.
	Routes []RelayRoute `yaml:"routes"`
}

// RelayRoute is one recipient the broker relays to.
type RelayRoute struct {
	// Agent is the recipient's agent id (the envelopes' to).
	Agent string `yaml:"agent"`
	// Inbox is the recipient's ARSIA inbox URL.
	Inbox string `yaml:"inbox"`
	// ResidencyZones, when set, restricts the route to these of the
	// broker's zones.
	ResidencyZones []string `yaml:"residency_zones"`
}

// Relay defaults and bounds.
const (
	DefaultRelayMaxHops = 3
	MaxRelayHops        = 16
	MinRelayTimeout     = 100 * time.Millisecond
)

// Timeout is the forwarding timeout in force.
func (r Relay) Timeout() time.Duration {
	if r.ForwardTimeout == 0 {
		return arsia.RelayForwardTimeout
	}
	return r.ForwardTimeout
}

// Hops is the hop limit in force.
func (r Relay) Hops() int {
	if r.MaxHops == 0 {
		return DefaultRelayMaxHops
	}
	return r.MaxHops
}

// BrokerEntry is the gateway's own broker entry, as of now: what the relay
// preconditions are checked against, and what it would publish.
func (c *Config) BrokerEntry(now time.Time) arsia.BrokerEntry {
	return arsia.BrokerEntry{AgentID: c.Agent, Inbox: strings.TrimSuffix(c.PublicURL, "/") + "/v1/arsia/inbox",
		Jurisdiction: c.Relay.Jurisdiction, ResidencyZones: slices.Clone(c.Relay.ResidencyZones),
		Health: arsia.BrokerHealthy, LastHealthCheck: arsia.FormatTimestamp(now)}
}

func validZone(z string) bool {
	return z == arsia.ZoneEU || validCountry(z)
}

func validCountry(z string) bool {
	return len(z) == 2 && z[0] >= 'A' && z[0] <= 'Z' && z[1] >= 'A' && z[1] <= 'Z'
}

// checkRelay reports the problems of the relay settings. It runs after
// PublicURL has its default.
func (c *Config) checkRelay() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("relay."+format, a...)) }
	r := c.Relay
	if !r.Enabled {
		if r.Jurisdiction != "" || len(r.ResidencyZones) > 0 || r.ForwardTimeout != 0 || r.MaxHops != 0 || len(r.Routes) > 0 {
			bad("enabled is false: jurisdiction, residency_zones, forward_timeout, max_hops and routes have no effect; set enabled: true or remove them")
		}
		return errs
	}
	zonesOK := true
	if !validCountry(r.Jurisdiction) {
		bad("jurisdiction %q: want an ISO 3166-1 alpha-2 code (PT)", r.Jurisdiction)
		zonesOK = false
	}
	if len(r.ResidencyZones) == 0 {
		bad("residency_zones: empty; a broker relays for at least one zone")
		zonesOK = false
	}
	for i, z := range r.ResidencyZones {
		if !validZone(z) {
			bad("residency_zones[%d] %q: want an ISO 3166-1 alpha-2 code (PT) or EU", i, z)
			zonesOK = false
		} else if slices.Contains(r.ResidencyZones[:i], z) {
			bad("residency_zones[%d] %q is listed twice", i, z)
			zonesOK = false
		}
	}
	if zonesOK && arsia.ValidAgentID(c.Agent) {
		// The entry's own rules: EU only from the EU/EEA, a country
		// zone only from that country (Rule 2).
		if err := c.BrokerEntry(time.Unix(0, 0)).Validate(); err != nil {
			bad("residency_zones: %v", err)
		}
	}
	if r.ForwardTimeout != 0 && (r.ForwardTimeout < MinRelayTimeout || r.ForwardTimeout > arsia.RelayForwardTimeout) {
		bad("forward_timeout %s: want %s to %s (0: %s)", r.ForwardTimeout, MinRelayTimeout, arsia.RelayForwardTimeout, arsia.RelayForwardTimeout)
	}
	if r.MaxHops < 0 || r.MaxHops > MaxRelayHops {
		bad("max_hops %d: want 1 to %d (0: %d)", r.MaxHops, MaxRelayHops, DefaultRelayMaxHops)
	}
	if len(r.Routes) == 0 {
		bad("routes: empty; name the agents the broker relays to")
	}
	own := strings.TrimSuffix(c.PublicURL, "/") + "/v1/arsia/inbox"
	for i, rt := range r.Routes {
		switch {
		case !arsia.ValidAgentID(rt.Agent):
			bad("routes[%d].agent %q is not an ARSIA agent identifier", i, rt.Agent)
		case rt.Agent == c.Agent:
			bad("routes[%d].agent %s is this gateway: messages to it are not relayed", i, rt.Agent)
		case slices.ContainsFunc(r.Routes[:i], func(o RelayRoute) bool { return o.Agent == rt.Agent }):
			bad("routes[%d].agent %s has a route already", i, rt.Agent)
		}
		if p := relayInboxProblem(rt.Inbox); p != "" {
			bad("routes[%d].inbox %q: %s", i, rt.Inbox, p)
		} else if strings.TrimSuffix(rt.Inbox, "/") == own {
			bad("routes[%d].inbox %q is this gateway's own inbox", i, rt.Inbox)
		}
		for j, z := range rt.ResidencyZones {
			switch {
			case !slices.Contains(r.ResidencyZones, z):
				bad("routes[%d].residency_zones[%d] %q is not one of relay.residency_zones", i, j, z)
			case slices.Contains(rt.ResidencyZones[:j], z):
				bad("routes[%d].residency_zones[%d] %q is listed twice", i, j, z)
			}
		}
	}
	return errs
}

func relayInboxProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "want an absolute http or https URL"
	case u.Host == "":
		return "no host"
	case u.User != nil:
		return "must not carry credentials"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "must not have a fragment"
	}
	return ""
}
