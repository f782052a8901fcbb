package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/custos-runtime/custos/internal/migrations"
)

var testSchema = Migrations{
	FS:  fstest.MapFS{"m/0001_init.sql": {Data: []byte("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL) STRICT;")}},
	Dir: "m",
	Applied: func(ctx context.Context, tx *Tx, m migrations.Migration) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO kv (k, v) VALUES ('seeded', ?)", m.Version)
		return err
	},
}

func open(t *testing.T, path string, o *Options) *DB {
	t.Helper()
	d, err := Open(t.Context(), path, o, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func get(t *testing.T, d *DB, k string) (int, bool) {
	t.Helper()
	var v int
	err := d.Read(t.Context(), func(tx *Tx) error {
		return tx.QueryRowContext(t.Context(), "SELECT v FROM kv WHERE k = ?", k).Scan(&v)
	})
	if err != nil {
		return 0, false
	}
	return v, true
}

// Every pooled connection runs with the durability settings, not only the
// first one; migrations ran once and their hook seeded the table.
func TestOpen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sub", "db.sqlite")
	d := open(t, path, &Options{BusyTimeout: 3 * time.Second, MaxConns: 3})
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 3 {
		c, err := d.SQL().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var mode string
		var sync, fk, busy int
		for q, dst := range map[string]any{"PRAGMA journal_mode": &mode, "PRAGMA synchronous": &sync,
			"PRAGMA foreign_keys": &fk, "PRAGMA busy_timeout": &busy} {
			if err := c.QueryRowContext(ctx, q).Scan(dst); err != nil {
				t.Fatal(err)
			}
		}
		if mode != "wal" || sync != 2 || fk != 1 || busy != 3000 {
			t.Fatalf("connection %d: journal_mode %s synchronous %d foreign_keys %d busy_timeout %d", i, mode, sync, fk, busy)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	if v, ok := get(t, d, "seeded"); !ok || v != 1 {
		t.Fatalf("seed row = %d, %v", v, ok)
	}
	again := open(t, path, nil)
	if v, ok := get(t, again, "seeded"); !ok || v != 1 {
		t.Fatal("reopening applied the migrations again")
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want no group or other access", p, fi.Mode())
		}
	}
	newer := testSchema
	newer.FS = fstest.MapFS{}
	if _, err := Open(ctx, path, nil, newer); err == nil {
		t.Fatal("a file with a newer schema than the build knows was opened")
	}
}

// Concurrent writes are batched; a failing write is answered alone and the
// others commit; the failed one wrote nothing.
func TestGroupCommit(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), "db.sqlite"), nil)
	ctx := t.Context()
	errBoom := errors.New("boom")
	const n = 64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = d.Write(ctx, func(tx *Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO kv (k, v) VALUES (?, ?)", fmt.Sprint(i), i); err != nil {
					return err
				}
				if i%7 == 0 {
					return errBoom
				}
				return nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		_, stored := get(t, d, fmt.Sprint(i))
		if i%7 == 0 {
			if !errors.Is(err, errBoom) || stored {
				t.Fatalf("write %d: err %v, stored %v; want its own error and nothing stored", i, err, stored)
			}
			continue
		}
		if err != nil || !stored {
			t.Fatalf("write %d: err %v, stored %v", i, err, stored)
		}
	}
	// A constraint failure is that write's alone too.
	if err := d.Write(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO kv (k, v) VALUES ('1', 1)")
		return err
	}); err == nil {
		t.Fatal("duplicate key accepted")
	}
}

// Readers are not blocked by a writer holding the write lock (WAL), and a
// writer waiting for the lock gives up when its context ends.
func TestReadersDuringWrite(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	d := open(t, path, nil)
	other := open(t, path, nil)
	tx, err := other.SQL().BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "UPDATE kv SET v = v"); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, d, "seeded"); !ok {
		t.Fatal("read blocked by a writer")
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = d.Write(short, func(tx *Tx) error {
		_, err := tx.ExecContext(short, "INSERT INTO kv (k, v) VALUES ('late', 1)")
		return err
	})
	if err == nil {
		t.Fatal("a write succeeded while another handle held the write lock")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("write waited %v past its context", el)
	}
}

func TestClosed(t *testing.T) {
	d, err := Open(t.Context(), filepath.Join(t.TempDir(), "db.sqlite"), nil, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(context.Background(), func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Write(ctx, func(*Tx) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write with a cancelled context: %v", err)
	}
}
