package sqlitedb

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"
)

func put(ctx context.Context, d *DB, k string, v int) error {
	return d.Write(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO kv (k, v) VALUES (?, ?)", k, v)
		return err
	})
}

// The writes a unit joins commit together or not at all; a joined write
// that fails fails the unit; reads in the unit see its own writes.
func TestUnit(t *testing.T) {
	ctx := t.Context()
	d := open(t, filepath.Join(t.TempDir(), "u.db"), nil)
	boom := errors.New("boom")

	err := d.Unit(ctx, func(ctx context.Context) error {
		if !d.InUnit(ctx) {
			t.Error("InUnit false inside the unit")
		}
		if err := put(ctx, d, "a", 1); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Unit = %v, want boom", err)
	}
	if _, ok := get(t, d, "a"); ok {
		t.Fatal("a write of a failed unit was committed")
	}

	// A write that fails half-way fails the unit, even when fn ignores
	// the error: its first statement, and every other write of the unit,
	// are never committed.
	err = d.Unit(ctx, func(ctx context.Context) error {
		if err := put(ctx, d, "a", 1); err != nil {
			return err
		}
		_ = d.Write(ctx, func(tx *Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO kv (k, v) VALUES ('b', 2)"); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO kv (k, v) VALUES ('a', 3)") // duplicate key
			return err
		})
		if err := put(ctx, d, "c", 3); err == nil {
			t.Error("a write after a failed one went through")
		}
		return nil
	})
	if err == nil {
		t.Fatal("a unit with a failed write committed")
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, ok := get(t, d, k); ok {
			t.Fatalf("%s of the failed unit was committed", k)
		}
	}

	// Reads in a unit see its own writes.
	err = d.Unit(ctx, func(ctx context.Context) error {
		if err := put(ctx, d, "a", 1); err != nil {
			return err
		}
		return d.Read(ctx, func(rt *Tx) error {
			var v int
			if err := rt.QueryRowContext(ctx, "SELECT v FROM kv WHERE k = 'a'").Scan(&v); err != nil {
				t.Errorf("a read in the unit does not see its write: %v", err)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, d, "a"); !ok || v != 1 {
		t.Fatalf("a = %d, %v after the unit; want 1", v, ok)
	}

	// A unit within a unit joins it.
	err = d.Unit(ctx, func(ctx context.Context) error {
		if err := d.Unit(ctx, func(ctx context.Context) error { return put(ctx, d, "c", 1) }); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if _, ok := get(t, d, "c"); ok {
		t.Fatal("the inner unit committed without the outer one")
	}
}

// Two handles on one file: a unit of one does not carry into the other.
func TestUnitOtherDB(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "u.db")
	d1, d2 := open(t, path, nil), open(t, path, &Options{BusyTimeout: 2 * time.Second})
	done := make(chan error, 1)
	err := d1.Unit(ctx, func(ctx context.Context) error {
		if d2.InUnit(ctx) {
			t.Error("d2 joins d1's unit")
		}
		return put(ctx, d1, "x", 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- put(ctx, d2, "y", 1) }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Several migration sets share one file, each in its own table.
func TestMigrateTables(t *testing.T) {
	ctx := t.Context()
	d := open(t, filepath.Join(t.TempDir(), "m.db"), nil)
	other := Migrations{FS: fstest.MapFS{"o/0001_x.sql": {Data: []byte("CREATE TABLE other (k TEXT) STRICT;")}}, Dir: "o", Table: "other_migrations"}
	for range 2 {
		if err := d.Migrate(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := d.SQL().QueryRowContext(ctx, "SELECT count(*) FROM other_migrations").Scan(&n); err != nil || n != 1 {
		t.Fatalf("other_migrations: %d rows, %v", n, err)
	}
	if err := d.SQL().QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != 1 {
		t.Fatalf("schema_migrations: %d rows, %v", n, err)
	}
	bad := other
	bad.Table = "x; DROP TABLE kv"
	if err := d.Migrate(ctx, bad); err == nil {
		t.Fatal("a table name with SQL in it was accepted")
	}
}

// A unit is one write and one commit, however many writes it joins.
func TestStatsCountAUnitOnce(t *testing.T) {
	ctx := t.Context()
	d := open(t, filepath.Join(t.TempDir(), "s.db"), nil)
	before := d.Stats()
	if err := d.Unit(ctx, func(ctx context.Context) error {
		if err := put(ctx, d, "a", 1); err != nil {
			return err
		}
		return put(ctx, d, "b", 2)
	}); err != nil {
		t.Fatal(err)
	}
	after := d.Stats()
	if after.Commits-before.Commits != 1 || after.Writes-before.Writes != 1 {
		t.Fatalf("stats %+v -> %+v", before, after)
	}
}

// AfterCommit runs at once outside a unit, after the commit inside one,
// and never for a unit that fails.
func TestAfterCommit(t *testing.T) {
	ctx := t.Context()
	d := open(t, filepath.Join(t.TempDir(), "a.db"), nil)
	ran := 0
	d.AfterCommit(ctx, func() { ran++ })
	if ran != 1 {
		t.Fatalf("outside a unit: ran %d", ran)
	}
	err := d.Unit(ctx, func(ctx context.Context) error {
		if err := put(ctx, d, "k", 1); err != nil {
			return err
		}
		d.AfterCommit(ctx, func() {
			if _, ok := get(t, d, "k"); !ok {
				t.Error("the hook ran before the write could be read")
			}
			ran++
		})
		if ran != 1 {
			t.Error("the hook ran inside the unit")
		}
		return nil
	})
	if err != nil || ran != 2 {
		t.Fatalf("after the unit: %v, ran %d", err, ran)
	}
	_ = d.Unit(ctx, func(ctx context.Context) error {
		d.AfterCommit(ctx, func() { ran++ })
		return errors.New("fails")
	})
	if ran != 2 {
		t.Fatalf("a failed unit ran its hook")
	}
}
