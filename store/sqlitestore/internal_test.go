package sqlitestore

import (
	"database/sql"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
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

// A file written by schema version 2 (each message stored twice) opens
// under this build: migration 3 drops the copies and everything stays
// readable through the event log.
func TestUpgradeFromVersion2(t *testing.T) {
	ctx := t.Context()
	path := t.TempDir() + "/v2.db"
	db, err := sql.Open("sqlite", "file://"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations.Load(schema.FS, schema.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:2] {
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatal(err)
		}
	}
	c := aaistest.NewClock(aaistest.Start)
	req := aaistest.Request(t, c.Now(), "old")
	ev, err := aais.NewMessage(aais.Header{OccurredAt: c.Now(), Sequence: 1, Stream: "test"}, req)
	if err != nil {
		t.Fatal(err)
	}
	evJSON, err := aais.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init', 'then'), (2, '0002_rules_owners', 'then')`,
		`INSERT INTO meta (singleton, store_id, created_at) VALUES (1, 'old-store', 'then')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO events (sequence, type, request_id, json) VALUES (1, 'approval.requested', ?, ?)`, req.ID, evJSON); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO requests (id, fingerprint, event, sequence) VALUES (?, 'fp-old', ?, 1)`, req.ID, evJSON); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("opening a version 2 file: %v", err)
	}
	defer s.Close()
	if id, err := s.ID(ctx); err != nil || id != "old-store" {
		t.Fatalf("store id %q, %v", id, err)
	}
	st, err := s.RequestState(ctx, req.ID)
	if err != nil || !st.Pending() || st.Request.Fingerprint != "fp-old" || aaistest.Wire(t, st.Request.Event) != string(evJSON) {
		t.Fatalf("request after the upgrade: %+v, %v", st, err)
	}
	a := aaistest.NewAuthority(t, s, c)
	m, err := a.Decide(ctx, aaistest.Decision(t, req, aais.Approve, "", c.Now()), aaistest.Actor, nil)
	if err != nil || m.Sequence != 2 || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("decide after the upgrade: %v, %v", m, err)
	}
	if st, err := s.RequestState(ctx, req.ID); err != nil || st.Pending() {
		t.Fatalf("resolution not readable: %v", err)
	}
}
