package sqliteaudit_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
	"github.com/custos-runtime/custos/store/sqliteaudit"
)

func open(t testing.TB, path string, o *sqliteaudit.Options) *sqliteaudit.Backend {
	t.Helper()
	b, err := sqliteaudit.Open(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	audittest.Run(t, func(t *testing.T) audit.Backend {
		return open(t, filepath.Join(t.TempDir(), "audit.db"), nil)
	})
}

func TestConformanceNoGroupCommit(t *testing.T) {
	audittest.Run(t, func(t *testing.T) audit.Backend {
		return open(t, filepath.Join(t.TempDir(), "audit.db"), &sqliteaudit.Options{MaxBatch: 1})
	})
}
