package filestore

import (
	"errors"
	"fmt"
	"os"

	"github.com/custos-runtime/custos/internal/flock"
)

// openLockFile opens (creating) the lock file, refusing a symlink.
func openLockFile(path string) (*os.File, error) {
	f, err := flock.Open(path)
	if errors.Is(err, flock.ErrSymlink) {
		return nil, fmt.Errorf("%w: %s", ErrSymlink, path)
	}
	return f, err
}

// tryLock takes an exclusive lock on f without blocking; false when
// another open file holds it.
func tryLock(f *os.File) (bool, error) { return flock.TryLock(f) }

func unlock(f *os.File) error { return flock.Unlock(f) }
