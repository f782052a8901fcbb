//go:build windows

package filestore

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

func refuseSymlink(path string) error {
	fi, err := os.Lstat(path)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s", ErrSymlink, path)
	}
	return nil
}

// openLockFile opens (creating) the lock file, refusing a symlink.
func openLockFile(path string) (*os.File, error) {
	if err := refuseSymlink(path); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

// tryLock locks byte 0 of f exclusively without blocking; false when
// another handle holds it.
func tryLock(f *os.File) (bool, error) {
	ol := new(windows.Overlapped)
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if err == nil {
		return true, nil
	}
	if err == windows.ERROR_LOCK_VIOLATION || err == windows.ERROR_IO_PENDING {
		return false, nil
	}
	return false, &os.PathError{Op: "LockFileEx", Path: f.Name(), Err: err}
}

func unlock(f *os.File) error {
	ol := new(windows.Overlapped)
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, ol)
}

// openNoFollow opens path read-only, refusing a symlink.
func openNoFollow(path string) (*os.File, error) {
	if err := refuseSymlink(path); err != nil {
		return nil, err
	}
	return os.Open(path)
}

// syncDir is a no-op on Windows, where directories cannot be flushed
// through os.File.
func syncDir(string) error { return nil }

// fileKey identifies a version of an open file: file index, size and
// last write time.
func fileKey(f *os.File) (statKey, error) {
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &fi); err != nil {
		return statKey{}, &os.PathError{Op: "GetFileInformationByHandle", Path: f.Name(), Err: err}
	}
	return statKey{
		ino:   uint64(fi.FileIndexHigh)<<32 | uint64(fi.FileIndexLow),
		size:  int64(fi.FileSizeHigh)<<32 | int64(fi.FileSizeLow),
		mtime: fi.LastWriteTime.Nanoseconds(),
		ctime: fi.CreationTime.Nanoseconds(),
	}, nil
}

func fullSync(f *os.File) error { return f.Sync() }
