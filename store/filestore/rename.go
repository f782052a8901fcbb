package filestore

import (
	"os"
	"runtime"
	"time"
)

const isWindows = runtime.GOOS == "windows"

// rename replaces newpath with oldpath. On Windows a reader holding the
// target open makes the replacement fail for a moment, so it is retried
// (20 times, 50 ms apart).
func rename(oldpath, newpath string) error {
	err := os.Rename(oldpath, newpath)
	if !isWindows {
		return err
	}
	for i := 0; err != nil && i < 20; i++ {
		time.Sleep(50 * time.Millisecond)
		err = os.Rename(oldpath, newpath)
	}
	return err
}
