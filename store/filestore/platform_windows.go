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
