package ca

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MemoryRegistry is a Registry in memory, for tests and tools: what it
// holds is lost with the process.
type MemoryRegistry struct {
	mu    sync.Mutex
	certs []Certificate // in issuance order
	index map[string]int
}

// NewMemoryRegistry returns an empty MemoryRegistry.
func NewMemoryRegistry() *MemoryRegistry { return &MemoryRegistry{index: map[string]int{}} }

var _ Registry = (*MemoryRegistry)(nil)

// Record implements Registry.
func (m *MemoryRegistry) Record(_ context.Context, c Certificate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.index[c.Serial]; dup {
		return fmt.Errorf("%w: serial %s is already recorded", ErrRegistry, c.Serial)
	}
	c.ChainPEM = append([]byte(nil), c.ChainPEM...)
	m.index[c.Serial] = len(m.certs)
	m.certs = append(m.certs, c)
	return nil
}

// Get implements Registry.
func (m *MemoryRegistry) Get(_ context.Context, serial string) (Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.index[serial]
	if !ok {
		return Certificate{}, ErrNotFound
	}
	return m.certs[i], nil
}

// Revoke implements Registry.
func (m *MemoryRegistry) Revoke(_ context.Context, serial string, at time.Time, by, reason string) (Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.index[serial]
	if !ok {
		return Certificate{}, ErrNotFound
	}
	if !m.certs[i].Revoked() {
		m.certs[i].RevokedAt, m.certs[i].RevokedBy, m.certs[i].RevocationReason = at.UTC(), by, reason
	}
	return m.certs[i], nil
}

// List implements Registry.
func (m *MemoryRegistry) List(_ context.Context, agentID, before string, limit int) ([]Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	end := len(m.certs)
	if before != "" {
		i, ok := m.index[before]
		if !ok {
			return nil, ErrNotFound
		}
		end = i
	}
	var out []Certificate
	for i := end - 1; i >= 0 && len(out) < limit; i-- {
		if agentID == "" || m.certs[i].AgentID == agentID {
			out = append(out, m.certs[i])
		}
	}
	return out, nil
}
