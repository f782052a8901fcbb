package main

import (
	"fmt"
	"time"

	arsiastate "github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/handler"
)

// stateStoreOptions are the rules of the state's ARSIA-State store that
// the configuration sets (store.StateOptions.StateStore).
func stateStoreOptions(cfg config.Config) *arsiastate.StoreOptions {
	return &arsiastate.StoreOptions{Zones: cfg.State.Zones, MaxEntries: cfg.State.MaxEntries}
}

// openState builds the state handler when state is enabled, on the
// state's store, and serves it (addStateHandlers).
func (s *server) openState() error {
	if !s.cfg.State.Enabled {
		return nil
	}
	if s.state.StateStore == nil {
		return fmt.Errorf("state: the store %s keeps no ARSIA state", s.loc.Kind)
	}
	h, err := handler.NewState(s.state.StateStore, handler.StateOptions{
		OperatorID: s.cfg.State.OperatorID, Now: time.Now, AuditRetentionDays: s.cfg.State.AuditRetentionDays,
	})
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	s.stateHandler = h
	return s.addStateHandlers(s.handlers)
}

// addStateHandlers puts the state handler (when enabled) in handlers for
// each state capability: at start, and in the handlers a reload builds,
// which come from the handlers section only. A handler configured for
// one of them is refused: state is served until a restart turns it off.
func (s *server) addStateHandlers(handlers map[string]handler.Handler) error {
	if s.stateHandler == nil {
		return nil
	}
	for _, capability := range config.StateCapabilities {
		if _, ok := handlers[capability]; ok {
			return fmt.Errorf("handlers.%s: the state service serves it (state.enabled; turning it off needs a restart)", capability)
		}
		handlers[capability] = s.stateHandler
	}
	return nil
}
