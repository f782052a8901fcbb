//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly || windows)

package filestore

import (
	"errors"
	"os"
)

var errPlatform = errors.New("filestore: file locking is not supported on this platform")

func openLockFile(string) (*os.File, error) { return nil, errPlatform }
func tryLock(*os.File) (bool, error)        { return false, errPlatform }
func unlock(*os.File) error                 { return errPlatform }
func openNoFollow(string) (*os.File, error) { return nil, errPlatform }
func syncDir(string) error                  { return errPlatform }
func fileKey(*os.File) (statKey, error)     { return statKey{}, errPlatform }
func fullSync(f *os.File) error             { return f.Sync() }
