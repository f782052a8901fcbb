package main

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/relay"
)

// newRelayer is the gateway's Compliance Broker when the relay section
// enables it (nil otherwise): its own broker entry, as of start, and the
// routes, timeout and hop limit of the configuration.
func newRelayer(cfg config.Config) (*relay.Relayer, error) {
	if !cfg.Relay.Enabled {
		return nil, nil
	}
	routes := make([]relay.Route, len(cfg.Relay.Routes))
	for i, r := range cfg.Relay.Routes {
		routes[i] = relay.Route{Agent: r.Agent, Inbox: r.Inbox, ResidencyZones: r.ResidencyZones}
	}
	rl, err := relay.New(relay.Options{Broker: cfg.BrokerEntry(time.Now()), Routes: routes,
		Timeout: cfg.Relay.Timeout(), MaxHops: cfg.Relay.Hops()})
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	return rl, nil
}

// brokers answers broker discovery when the gateway relays: its own entry,
// healthy as of the request (it is answering), for a zone it serves.
func (s *server) brokers() func(string) []arsia.BrokerEntry {
	if !s.cfg.Relay.Enabled {
		return nil
	}
	// The relay section needs a restart to change; a reload replaces
	// s.cfg while this answers.
	cfg := s.cfg
	return func(zone string) []arsia.BrokerEntry {
		e := cfg.BrokerEntry(time.Now())
		if !e.Serves(zone) {
			return nil
		}
		return []arsia.BrokerEntry{e}
	}
}

// capabilitiesSupported are the capabilities the discovery document
// lists: the handlers' and, for a broker, arsiaprotocol.broker.relay
// (ARSIA-Routing §1.4: senders pick brokers that declare it).
func (s *server) capabilitiesSupported() []string {
	caps := slices.Collect(maps.Keys(s.handlers))
	if s.cfg.Relay.Enabled {
		caps = append(caps, arsia.CapBrokerRelay)
	}
	slices.Sort(caps)
	return slices.Compact(caps)
}
