package httpapi

import (
	"crypto/sha256"

	"github.com/custos-runtime/custos/aais"
)

// The reviewer settings a running server may change (custos serve's
// configuration reload): who holds which token, password and roles. Each
// Replace takes effect for the requests that arrive after it; requests
// already authenticated or checked are not affected.

// Replace makes t authenticate the tokens of n instead of its own.
func (t *Tokens) Replace(n *Tokens) {
	m := n.table()
	t.swapped.Store(&m)
}

// table is the tokens in force.
func (t *Tokens) table() map[[sha256.Size]byte]aais.Actor {
	if m := t.swapped.Load(); m != nil {
		return *m
	}
	return t.byHash
}

// Replace makes p verify the passwords of n instead of its own.
func (p *Passwords) Replace(n *Passwords) {
	m := n.table()
	p.swapped.Store(&m)
}

func (p *Passwords) table() map[string]PasswordEntry {
	if m := p.swapped.Load(); m != nil {
		return *m
	}
	return p.byID
}

// Replace makes p enforce n's roles, grants and profile rules.
func (p *Policy) Replace(n *Policy) {
	n = n.current()
	p.swapped.Store(&Policy{Roles: n.Roles, Grants: n.Grants, SeparationOfDuties: n.SeparationOfDuties,
		JustificationRequired: n.JustificationRequired})
}

// current is the policy in force: the last one Replace stored, else p.
func (p *Policy) current() *Policy {
	if p == nil {
		return nil
	}
	if c := p.swapped.Load(); c != nil {
		return c
	}
	return p
}

// EndSessionsExcept ends the browser sessions of every reviewer whose id
// keep does not report, so that a reviewer removed from the configuration
// is signed out at once.
func (s *Sessions) EndSessionsExcept(keep func(id string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ss := range s.m {
		if !keep(ss.actor.ID) {
			s.remove(ss)
			n++
		}
	}
	return n
}
