package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/store"
)

// testdata/layout-0 is a data directory written by the release before
// the state file (commit 86158e1, `custos demo --approve`, then `custos
// demo` left waiting): approvals.db, exchanges.db and audit.db at their
// schemas of then, and the gateway's marker. Three exchanges are done,
// one waits for approval; the audit chain has 8 records.
const fixture = "testdata/layout-0"

var oldLayout = []string{"approvals.db", "exchanges.db", "audit.db", "approvals.db" + store.ServeMarkerSuffix}

// copyFixture copies the fixture into a new data directory.
func copyFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range oldLayout {
		b, err := os.ReadFile(filepath.Join(fixture, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// old is what the fixture holds, read with plain SQL.
type old struct {
	storeID, logID, head                 string
	events, requests, exchanges, records int
}

func readOld(t *testing.T, dir string) old {
	t.Helper()
	q := func(file, query string, dest any) {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, file)+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.QueryRow(query).Scan(dest); err != nil {
			t.Fatalf("%s: %s: %v", file, query, err)
		}
	}
	var o old
	q("approvals.db", "SELECT store_id FROM meta", &o.storeID)
	q("approvals.db", "SELECT count(*) FROM events", &o.events)
	q("approvals.db", "SELECT count(*) FROM requests", &o.requests)
	q("exchanges.db", "SELECT count(*) FROM exchanges", &o.exchanges)
	q("audit.db", "SELECT log_id FROM meta", &o.logID)
	q("audit.db", "SELECT count(*) FROM records", &o.records)
	q("audit.db", "SELECT hash FROM records ORDER BY seq DESC LIMIT 1", &o.head)
	return o
}

// checkMigrated checks that the state at dir holds everything want does.
func checkMigrated(t *testing.T, dir string, want old) {
	t.Helper()
	ctx := t.Context()
	s := openState(t, filepath.Join(dir, store.StateFile), nil)
	id, err := s.Approvals.(interface {
		ID(context.Context) (string, error)
	}).ID(ctx)
	if err != nil || id != want.storeID {
		t.Errorf("store id %q, %v; want the old one %q (followers would see a reset)", id, err, want.storeID)
	}
	page, err := s.Approvals.EventsAfter(ctx, 0, 0)
	if err != nil || len(page.Events) != want.events || page.Gap {
		t.Errorf("events: %d (gap %v), %v; want %d", len(page.Events), page.Gap, err, want.events)
	}
	pending, _, err := s.Approvals.Pending(ctx)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending approvals: %d, %v; want 1", len(pending), err)
	}
	waiting, err := s.Exchanges.Waiting(ctx, exchange.PendingApproval)
	if err != nil || len(waiting) != 1 || waiting[0].ApprovalID != pending[0].Event.Request.ID {
		t.Errorf("waiting exchanges: %+v, %v; want the one of %s", waiting, err, pending[0].Event.Request.ID)
	}
	done, err := s.Exchanges.Waiting(ctx, exchange.Done)
	if err != nil || len(done)+len(waiting) != want.exchanges {
		t.Errorf("exchanges: %d done + %d waiting, %v; want %d", len(done), len(waiting), err, want.exchanges)
	}
	log := audit.New(s.Audit, nil)
	rep, err := log.Verify(ctx)
	if err != nil || !rep.OK() || rep.Records != want.records || rep.Head != want.head {
		t.Errorf("audit: %+v, %v; want %d records ending at %s", rep, err, want.records, want.head)
	}
	// The state goes on: the waiting approval can be decided, and the
	// chain grows from the old head.
	auth, err := aais.NewAuthority(s.Approvals, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := auth.Withdraw(ctx, pending[0].Event.Request.ID, "migration test"); err != nil || !ok {
		t.Errorf("deciding the migrated approval: %v", err)
	}
	if _, err := log.Append(ctx, audit.Record{Kind: audit.KindReceived, MessageID: "after"}); err != nil {
		t.Fatal(err)
	}
	if rep, err := log.Verify(ctx); err != nil || !rep.OK() || rep.Records != want.records+1 {
		t.Errorf("audit after an append: %+v, %v", rep, err)
	}
}

func TestMigrateLayout(t *testing.T) {
	dir := copyFixture(t)
	want := readOld(t, dir)
	path := filepath.Join(dir, store.StateFile)
	migrated, err := store.MigrateLayout(t.Context(), path)
	if err != nil || !migrated {
		t.Fatalf("MigrateLayout = %v, %v", migrated, err)
	}
	for _, n := range oldLayout {
		if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still in the data directory: %v", n, err)
		}
		if _, err := os.Stat(filepath.Join(dir, store.AsideDir, n)); err != nil {
			t.Errorf("%s not kept aside: %v", n, err)
		}
	}
	if b, err := os.ReadFile(path + store.ServeMarkerSuffix); err != nil || len(b) == 0 {
		t.Errorf("the gateway marker did not follow the store: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("data directory after migration: %v; want custos.db, its marker and %s", names(entries), store.AsideDir)
	}
	// The old files kept aside are as they were: still readable.
	if got := readOld(t, filepath.Join(dir, store.AsideDir)); got != want {
		t.Errorf("the old files changed: %+v, want %+v", got, want)
	}
	checkMigrated(t, dir, want)
	if migrated, err := store.MigrateLayout(t.Context(), path); err != nil || migrated {
		t.Errorf("second MigrateLayout = %v, %v", migrated, err)
	}
}

// Open migrates too: a gateway started on an old data directory.
func TestOpenMigrates(t *testing.T) {
	dir := copyFixture(t)
	want := readOld(t, dir)
	checkMigrated(t, dir, want)
}

// A migration stopped after the new file took its name, before the old
// files were moved aside, is finished at the next start; one stopped
// before (a half-built work directory) starts again from the old files.
func TestMigrateLayoutInterrupted(t *testing.T) {
	ctx := t.Context()
	t.Run("after the rename", func(t *testing.T) {
		dir := copyFixture(t)
		want := readOld(t, dir)
		if _, err := store.MigrateLayout(ctx, filepath.Join(dir, store.StateFile)); err != nil {
			t.Fatal(err)
		}
		for _, n := range oldLayout[:3] {
			if err := os.Rename(filepath.Join(dir, store.AsideDir, n), filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
		checkMigrated(t, dir, want)
		for _, n := range oldLayout[:3] {
			if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s not moved aside at the next start", n)
			}
		}
	})
	t.Run("before the rename", func(t *testing.T) {
		dir := copyFixture(t)
		want := readOld(t, dir)
		work := filepath.Join(dir, store.StateFile+".migrating")
		if err := os.MkdirAll(work, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, store.StateFile), []byte("half a database"), 0o600); err != nil {
			t.Fatal(err)
		}
		checkMigrated(t, dir, want)
		if _, err := os.Stat(work); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("work directory left: %v", err)
		}
	})
}

// A state file the migration did not build, next to old files, is
// refused: which of the two is the truth is the operator's call.
func TestBothLayoutsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(t.Context(), store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, store.StateFile)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	b, err := os.ReadFile(filepath.Join(fixture, "approvals.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "approvals.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(t.Context(), store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, store.StateFile)}, nil)
	if !errors.Is(err, store.ErrBothLayouts) {
		t.Fatalf("Open = %v, want ErrBothLayouts", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "approvals.db")); err != nil {
		t.Errorf("the old file was touched: %v", err)
	}
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// The old layout's file names are refused where they would split the
// state or start an empty store beside the migrated one; nothing is
// created or moved by a refusal.
func TestOldLayoutPathsRefused(t *testing.T) {
	ctx := t.Context()
	dir := copyFixture(t)
	sqlite := func(name string) store.Location {
		return store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, name)}
	}
	// Before the migration: the gateway may not run on approvals.db alone
	// while its exchanges and audit log wait beside it.
	if _, err := store.Open(ctx, sqlite("approvals.db"), nil); !errors.Is(err, store.ErrOldLayoutPath) {
		t.Fatalf("Open(approvals.db) of an old layout: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, store.StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refusal created the state file")
	}
	checkMigrated(t, dir, readOld(t, filepath.Join(fixture)))
	// After it: the old names would open empty stores.
	if _, err := store.OpenApprovals(ctx, sqlite("approvals.db")); !errors.Is(err, store.ErrOldLayoutPath) {
		t.Errorf("OpenApprovals(approvals.db) after the migration: %v", err)
	}
	if _, err := store.OpenAudit(ctx, sqlite("audit.db")); !errors.Is(err, store.ErrOldLayoutPath) {
		t.Errorf("OpenAudit(audit.db) after the migration: %v", err)
	}
	if _, err := store.Open(ctx, sqlite(store.StateFile), &store.StateOptions{Audit: sqlite("audit.db")}); !errors.Is(err, store.ErrOldLayoutPath) {
		t.Errorf("Open with audit_log = the old audit.db: %v", err)
	}
	for _, n := range []string{"approvals.db", "audit.db"} {
		if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s created by a refused open", n)
		}
	}
	// The files kept aside stay readable where they are.
	b, err := store.OpenAudit(ctx, store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, store.AsideDir, "audit.db")})
	if err != nil {
		t.Fatalf("the old audit log kept aside: %v", err)
	}
	_ = b.Close()
}

// An old file that is a symbolic link is neither migrated through the
// link nor skipped (which would start an empty state): Open refuses.
func TestMigrateLayoutRefusesALink(t *testing.T) {
	dir := copyFixture(t)
	elsewhere := filepath.Join(t.TempDir(), "approvals.db")
	if err := os.Rename(filepath.Join(dir, "approvals.db"), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "approvals.db")); err != nil {
		t.Skip(err)
	}
	if _, err := store.Open(t.Context(), store.Location{Kind: store.KindSQLite, Path: filepath.Join(dir, store.StateFile)}, nil); err == nil {
		t.Fatal("migrated through a symbolic link")
	}
	if _, err := os.Stat(filepath.Join(dir, store.StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refusal created the state file")
	}
}

// A damaged old file stops the migration before anything is renamed or
// moved: the old files stay where they are, and no state file appears.
func TestMigrateLayoutDamagedFile(t *testing.T) {
	dir := copyFixture(t)
	if err := os.WriteFile(filepath.Join(dir, "exchanges.db"), []byte("not a database, not at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MigrateLayout(t.Context(), filepath.Join(dir, store.StateFile)); err == nil {
		t.Fatal("migrated a damaged file")
	}
	for _, n := range oldLayout {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s moved after a failed migration: %v", n, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(oldLayout) {
		t.Errorf("left behind: %v", names(entries))
	}
}

// An old layout's audit.db is verified without being changed: the
// previous release must still open it (a read does not migrate it).
func TestOpenAuditReadOnlyLeavesAnOldFile(t *testing.T) {
	ctx := t.Context()
	dir := copyFixture(t)
	path := filepath.Join(dir, "audit.db")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.OpenAuditReadOnly(ctx, store.Location{Kind: store.KindSQLite, Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.New(b, nil).Verify(ctx)
	if err != nil || !rep.OK() || rep.Records != readOld(t, fixture).records {
		t.Errorf("verify of the old file: %+v, %v", rep, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("reading the old audit log changed the file")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(oldLayout) {
		t.Errorf("left behind: %v", names(entries))
	}
}
