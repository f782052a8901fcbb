package flock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestHold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	f, err := Hold(path)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := Hold(path); !errors.Is(err, ErrLocked) {
		if g != nil {
			_ = g.Close()
		}
		t.Fatalf("second Hold: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", fi, err)
	}
	_ = f.Close()
	g, err := Hold(path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	_ = g.Close()
}

func TestRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link.lock")
	if err := os.Symlink(filepath.Join(dir, "target"), link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	if _, err := Hold(link); !errors.Is(err, ErrSymlink) {
		t.Fatalf("Hold(symlink) = %v", err)
	}
}
