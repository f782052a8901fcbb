package sqlitestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Every pooled connection runs with the durability settings, not only the
// first one.
func TestConnectionSettings(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "store.db"), &Options{BusyTimeout: 3 * time.Second, MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var mode string
		var sync, fk, busy int
		if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != 2 || fk != 1 || busy != 3000 {
			t.Fatalf("connection %d: journal_mode %s synchronous %d foreign_keys %d busy_timeout %d; want wal 2 (FULL) 1 3000",
				i, mode, sync, fk, busy)
		}
	}
}

// Readers are not blocked by a writer holding the write lock (WAL), and a
// writer waiting for the lock gives up when its context ends.
func TestReadersDuringWrite(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "UPDATE meta SET created_at = created_at"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := s.EventsAfter(short, 0, 0); err != nil {
		t.Fatalf("read blocked by a writer: %v", err)
	}
	if _, _, err := s.Pending(short); err != nil {
		t.Fatalf("read blocked by a writer: %v", err)
	}
	start := time.Now()
	if err := s.Reset(short); err == nil {
		t.Fatal("Reset succeeded while another store held the write lock")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("write waited %v past its context", el)
	}
}

func TestSidecarFilePermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ID(t.Context()); err != nil {
		t.Fatal(err)
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
}

func TestMigrationsWellFormed(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || SchemaVersion() != len(ms) {
		t.Fatalf("%d migrations, SchemaVersion %d", len(ms), SchemaVersion())
	}
}
