package gateway

import (
	"errors"
	"fmt"
	"maps"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/gateway/handler"
)

// Policy is the part of the Options a running gateway may change
// (SetPolicy): whose keys it trusts and how much, who may call what, how
// each capability runs, where callbacks go.
type Policy struct {
	Keys      sig.KeySource
	Trust     TrustPolicy
	Grants    map[string][]string
	Handlers  map[string]handler.Handler
	Callbacks map[string]string
	// Oversight maps a sender to the capability patterns whose every call
	// waits for a human approval, whatever its compliance profile says
	// (the oversight_required grants of an onboarded agent).
	Oversight map[string][]string
}

// policy is the Policy in force; every request reads it once per use.
func (g *Gateway) policy() *Policy { return g.live.Load() }

// SetPolicy replaces the policy for the requests received from now on,
// and for the approved calls executed from now on: an exchange waiting
// for a human keeps its approval and, once decided, runs with the handler
// then configured (or ends not_found when none serves its capability any
// more). Requests already past a stage are not affected. p is checked as
// New checks the Options; on error nothing changes. The caller keeps the
// previous handlers open until the calls running on them are done.
func (g *Gateway) SetPolicy(p Policy) error {
	if p.Keys == nil {
		return errors.New("gateway: no trust store")
	}
	for sender, u := range p.Callbacks {
		if err := exchange.CheckCallbackURL(u); err != nil {
			return fmt.Errorf("gateway: callback of %s: %w", sender, err)
		}
	}
	p.Grants, p.Handlers, p.Callbacks, p.Oversight = maps.Clone(p.Grants), maps.Clone(p.Handlers), maps.Clone(p.Callbacks), maps.Clone(p.Oversight)
	g.live.Store(&p)
	return nil
}

// Policy returns a copy of the policy in force: what an authorization
// server in front of the gateway must grant by (the senders' keys and
// grants, the capabilities served).
func (g *Gateway) Policy() Policy {
	p := *g.policy()
	p.Grants, p.Handlers, p.Callbacks, p.Oversight = maps.Clone(p.Grants), maps.Clone(p.Handlers), maps.Clone(p.Callbacks), maps.Clone(p.Oversight)
	return p
}
