package main

import (
	"fmt"
	"time"

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
