package config

import (
	"fmt"
	"slices"

	"github.com/custos-runtime/custos/arsia"
)

// StateService turns on ARSIA-State, the agents' memory, served by the
// gateway itself (docs/state.md):
//
//	state:
//	  enabled: true
//	  zones: [PT]                        # where the store lies; empty: no residency check
//	  operator_id: agent:acme.operator   # the audit records' operator; default: agent
//	  audit_retention_days: 365          # least retention of their audit records
//	  max_entries: 100000                # keys (and grants) the store holds at most
//
// When enabled, the gateway serves the capabilities arsiaprotocol.state.read,
// .write, .snapshot and .purge (no handler may be configured for them) in
// the store of store (the state file, or the PostgreSQL schema). Senders
// still need grants for them. A change needs a restart.
type StateService struct {
	Enabled bool `yaml:"enabled"`
	// Zones are the data-residency zones (ISO 3166-1 alpha-2 codes, or
	// EU) the store's storage lies in: an entry whose data_residency
	// none of them satisfies is refused. Empty means no check.
	Zones []string `yaml:"zones"`
	// OperatorID is the operator_id of the state audit records; empty
	// means the gateway's agent.
	OperatorID string `yaml:"operator_id"`
	// AuditRetentionDays is the least retention of the state audit
	// records when the request's profile sets less (0: 365 days).
	AuditRetentionDays int `yaml:"audit_retention_days"`
	// MaxEntries caps the keys, and separately the grants, the store
	// holds (0: 100 000); past it a new key is service_unavailable.
	MaxEntries int `yaml:"max_entries"`
}

// StateCapabilities are the capabilities the state service serves.
var StateCapabilities = []string{arsia.CapStateRead, arsia.CapStateWrite, arsia.CapStateSnapshot, arsia.CapStatePurge}

// checkState reports the problems of the state settings.
func (c *Config) checkState() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("state."+format, a...)) }
	s := c.State
	for i, z := range s.Zones {
		if !(z == "EU" || len(z) == 2 && z[0] >= 'A' && z[0] <= 'Z' && z[1] >= 'A' && z[1] <= 'Z') {
			bad("zones[%d] %q: want an ISO 3166-1 alpha-2 code (PT) or EU", i, z)
		} else if slices.Contains(s.Zones[:i], z) {
			bad("zones[%d] %q is listed twice", i, z)
		}
	}
	if s.OperatorID != "" && !arsia.ValidAgentID(s.OperatorID) {
		bad("operator_id %q is not an ARSIA agent identifier", s.OperatorID)
	}
	if s.AuditRetentionDays < 0 || s.AuditRetentionDays > 100*366 {
		bad("audit_retention_days %d: want 0 (the default) to %d", s.AuditRetentionDays, 100*366)
	}
	if s.MaxEntries < 0 {
		bad("max_entries %d: negative", s.MaxEntries)
	}
	if s.Enabled {
		for _, capability := range StateCapabilities {
			if _, ok := c.Handlers[capability]; ok {
				bad("enabled: handlers.%s: the state service serves %s; remove the handler", capability, capability)
			}
		}
	} else if len(s.Zones) > 0 || s.OperatorID != "" || s.AuditRetentionDays != 0 || s.MaxEntries != 0 {
		bad("enabled is false: zones, operator_id, audit_retention_days and max_entries have no effect; set enabled: true or remove them")
	}
	return errs
}
