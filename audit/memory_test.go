package audit_test

import (
	"testing"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
)

func TestMemoryConformance(t *testing.T) {
	audittest.Run(t, func(t *testing.T) audit.Backend { return audit.NewMemory() })
}
