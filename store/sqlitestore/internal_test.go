package sqlitestore

import (
	"testing"

	"github.com/custos-runtime/custos/internal/migrations"
)

// The connection settings, group commit and lock waits are tested in
// internal/sqlitedb; here, only what this package adds.

func TestMigrationsWellFormed(t *testing.T) {
	ms, err := migrations.Load(schema.FS, schema.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || SchemaVersion() != len(ms) {
		t.Fatalf("%d migrations, SchemaVersion %d", len(ms), SchemaVersion())
	}
}

// Open prepares every hot statement, so none is parsed per write.
func TestHotStatementsPrepared(t *testing.T) {
	s, err := Open(t.Context(), t.TempDir()+"/store.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range hotQueries {
		if s.db.Stmt(q) == nil {
			t.Errorf("not prepared: %s", q)
		}
	}
}
