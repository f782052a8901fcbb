package sig

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// JWKSFile is a KeySource backed by a JWKS document on disk, for keys that a
// deployment tool or a sidecar writes. The file is checked on every Key
// call and read again when its size, modification time or identity changed
// (or when its modification time is too recent to trust, as on file systems
// with coarse timestamps); the content decides whether anything changed.
//
// As with HTTPJWKS, a kid that disappears from a newer version of the file
// is revoked (ErrRevokedKey) for the life of the JWKSFile. A file that is
// missing, too large or invalid fails closed; write it atomically (rename)
// to avoid ever exposing a half-written copy.
type JWKSFile struct {
	path string

	mu       sync.Mutex
	history  keyHistory
	info     os.FileInfo // stat of the loaded version
	loadedAt time.Time
	content  []byte
}

// racyWindow is how close to a load a modification time must be for the
// stat alone not to prove that the file is unchanged.
const racyWindow = 2 * time.Second

// NewJWKSFile returns a source for the JWKS file at path. The file is read
// at the first Key call. File times are wall-clock times, so the racy-time
// check uses time.Now, not an injected clock.
func NewJWKSFile(path string) *JWKSFile {
	return &JWKSFile{path: path}
}

// Key returns the key named kid from the current version of the file.
func (f *JWKSFile) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeySource, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f.history.lookup(kid)
}

// reload reads the file again when it may have changed.
func (f *JWKSFile) reload() error {
	info, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrKeySource, err)
	}
	if f.info != nil && os.SameFile(f.info, info) && f.info.Size() == info.Size() &&
		f.info.ModTime().Equal(info.ModTime()) && f.loadedAt.Sub(info.ModTime()) > racyWindow {
		return nil
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrKeySource, err)
	}
	defer fh.Close()
	data, err := readCapped(fh, MaxJWKSBytes)
	if err != nil {
		return err
	}
	if f.content != nil && bytes.Equal(data, f.content) {
		f.info, f.loadedAt = info, time.Now()
		return nil
	}
	set, err := parseKeySet(data, "")
	if err != nil {
		return err
	}
	f.history.replace(set)
	f.info, f.loadedAt, f.content = info, time.Now(), data
	return nil
}
