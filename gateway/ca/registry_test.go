package ca_test

import (
	"testing"

	"github.com/custos-runtime/custos/gateway/ca"
	"github.com/custos-runtime/custos/gateway/ca/catest"
)

func TestMemoryRegistryContract(t *testing.T) {
	catest.Run(t, func(*testing.T) ca.Registry { return ca.NewMemoryRegistry() })
}
