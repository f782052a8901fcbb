//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package filestore

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openNoFollow opens path read-only, refusing a symlink.
func openNoFollow(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) {
			return nil, fmt.Errorf("%w: %s", ErrSymlink, path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// syncDir flushes a directory's entries (renames, creations) to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// fileKey identifies a version of an open file: inode, size, mtime and
// ctime in nanoseconds.
func fileKey(f *os.File) (statKey, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return statKey{}, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return statKey{
		ino:   uint64(st.Ino),
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
	}, nil
}

// fullSync flushes f to stable storage.
func fullSync(f *os.File) error { return f.Sync() }
