package notify

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgexchange"
	"github.com/custos-runtime/custos/store/sqliteexchange"
)

// twoInstances runs two escalators, each on its own handle of one store
// (two processes, or two replicas), passing at once over five requests
// due for their reminder and escalation, then again after a "restart":
// every step is sent once.
func twoInstances(t *testing.T, a, b Steps) {
	w := newEscWorld(t, payments)
	ea, eb := w.escalatorOn(a), w.escalatorOn(b)
	for i := range 5 {
		w.create("apr_" + string(rune('a'+i)))
	}
	w.at(45 * time.Minute)
	var wg sync.WaitGroup
	for range 3 {
		for _, e := range []*Escalator{ea, eb} {
			wg.Go(func() {
				if err := e.Tick(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	w.at(46 * time.Minute)
	w.tick(w.escalatorOn(a))
	w.tick(w.escalatorOn(b))
	if len(w.first.ids()) != 5 || len(w.second.ids()) != 5 || len(w.audit.outcomes()) != 10 {
		t.Fatalf("first %v, second %v, audit %v", w.first.ids(), w.second.ids(), w.audit.outcomes())
	}
}

func TestEscalationTwoProcessesOnSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "custos.db")
	open := func(instance string) *sqliteexchange.Store {
		s, err := sqliteexchange.Open(t.Context(), path, &sqliteexchange.Options{Instance: instance})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	twoInstances(t, open("a"), open("b"))
}

func TestEscalationTwoReplicasOnPostgreSQL(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t)
	open := func(instance string) *pgexchange.Store {
		s, err := pgexchange.Open(t.Context(), dsn, &pgexchange.Options{Schema: schema, Instance: instance})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	twoInstances(t, open("a"), open("b"))
}
