// Package flock takes advisory, exclusive, non-blocking locks on files:
// flock(2) on Unix, LockFileEx on byte 0 on Windows. A lock is held by an
// open file and released when it is unlocked or closed, or when the process
// exits, so a crashed holder never leaves a stale lock behind.
package flock

import (
	"errors"
	"fmt"
	"os"
)

// ErrSymlink: the lock file is a symbolic link (refused: it could point
// anywhere).
var ErrSymlink = errors.New("flock: the lock file is a symbolic link")

// ErrLocked: another open file holds the lock.
var ErrLocked = errors.New("flock: locked by another process")

// Open opens (creating, mode 0600) the lock file at path without following
// a symbolic link.
func Open(path string) (*os.File, error) { return openLockFile(path) }

// TryLock takes an exclusive lock on f without blocking; false when another
// open file holds it.
func TryLock(f *os.File) (bool, error) { return tryLock(f) }

// Unlock releases the lock f holds.
func Unlock(f *os.File) error { return unlock(f) }

// Hold opens path and locks it, or fails with ErrLocked when another
// process (or another open file of this one) holds it. Close the file to
// release the lock.
func Hold(path string) (*os.File, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	ok, err := TryLock(f)
	if err == nil && !ok {
		err = fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
