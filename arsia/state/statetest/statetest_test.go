package statetest_test

import (
	"testing"

	"github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/arsia/state/statetest"
)

func TestMemoryStore(t *testing.T) {
	statetest.Run(t, func(t *testing.T, o *state.StoreOptions) state.Store { return state.NewMemoryStore(o) })
}
