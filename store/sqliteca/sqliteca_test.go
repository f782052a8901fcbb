package sqliteca_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-runtime/custos/gateway/ca"
	"github.com/custos-runtime/custos/gateway/ca/catest"
	"github.com/custos-runtime/custos/internal/sqlitedb"
	"github.com/custos-runtime/custos/store/sqliteca"
)

func open(t *testing.T, path string) *sqliteca.Registry {
	t.Helper()
	db, err := sqlitedb.Open(t.Context(), path, nil, sqlitedb.Migrations{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	r, err := sqliteca.New(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistryContract(t *testing.T) {
	catest.Run(t, func(t *testing.T) ca.Registry { return open(t, filepath.Join(t.TempDir(), "custos.db")) })
}

// A revocation is on disk: a registry opened again on the file (after a
// restart) still refuses the certificate.
func TestRevocationSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "custos.db")
	db, err := sqlitedb.Open(t.Context(), path, nil, sqlitedb.Migrations{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sqliteca.New(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := r.Record(ctx, ca.Certificate{Issued: ca.Issued{Serial: "ab", AgentID: "agent:a.b", NotBefore: at, NotAfter: at.Add(time.Hour), ChainPEM: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Revoke(ctx, "ab", at, "admin", "compromised"); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	c, err := open(t, path).Get(ctx, "ab")
	if err != nil || !c.Revoked() || c.RevocationReason != "compromised" {
		t.Fatalf("after reopen: %+v, %v", c, err)
	}
}
