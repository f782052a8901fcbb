package filestore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// statKey identifies one version of the state file.
type statKey struct {
	ino          uint64
	size         int64
	mtime, ctime int64
}

// pathState is shared by every Store open on one absolute path in this
// process: the in-process lock taken before the file lock, and the parsed
// document cache.
type pathState struct {
	sem  chan struct{} // capacity 1: the in-process lock
	refs int           // guarded by registryMu

	// Guarded by sem.
	cacheKey    statKey
	cacheDigest [sha256.Size]byte
	cacheDoc    *document
}

var (
	registryMu sync.Mutex
	registry   = map[string]*pathState{}
)

func acquirePathState(abs string) *pathState {
	registryMu.Lock()
	defer registryMu.Unlock()
	ps, ok := registry[abs]
	if !ok {
		ps = &pathState{sem: make(chan struct{}, 1)}
		registry[abs] = ps
	}
	ps.refs++
	return ps
}

func releasePathState(abs string, ps *pathState) {
	registryMu.Lock()
	defer registryMu.Unlock()
	ps.refs--
	if ps.refs == 0 && registry[abs] == ps {
		delete(registry, abs)
	}
}

// tx is one transaction: the in-process and file locks are held while it
// is open.
type tx struct {
	s    *Store
	ps   *pathState
	lock *os.File
}

const (
	minBackoff = time.Millisecond
	maxBackoff = 20 * time.Millisecond
)

// begin takes the in-process lock, then the file lock, waiting at most
// LockTimeout in all and giving up when ctx is done.
func (s *Store) begin(ctx context.Context) (*tx, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timer := time.NewTimer(s.opts.LockTimeout)
	defer timer.Stop()
	select {
	case s.ps.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fmt.Errorf("%w: %s (held in this process)", ErrLockTimeout, s.path)
	}
	t := &tx{s: s, ps: s.ps}
	ok := false
	defer func() {
		if !ok {
			if t.lock != nil {
				_ = t.lock.Close()
			}
			<-s.ps.sem
		}
	}()
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	f, err := openLockFile(s.lockPath)
	if err != nil {
		return nil, fmt.Errorf("filestore: lock file: %w", err)
	}
	t.lock = f
	backoff := minBackoff
	for {
		got, err := tryLock(f)
		if err != nil {
			return nil, fmt.Errorf("filestore: %w", err)
		}
		if got {
			break
		}
		wait := time.NewTimer(backoff)
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return nil, ctx.Err()
		case <-timer.C:
			wait.Stop()
			return nil, fmt.Errorf("%w: %s", ErrLockTimeout, s.path)
		}
		backoff = min(2*backoff, maxBackoff)
	}
	ok = true
	return t, nil
}

func (t *tx) end() {
	_ = unlock(t.lock)
	_ = t.lock.Close()
	<-t.ps.sem
}

// recoveryMarker returns the recovery condition recorded for the state
// file, or nil when there is none. An unreadable marker still blocks.
func (s *Store) recoveryMarker() (*RecoveryRequiredError, error) {
	b, err := readLimited(s.markerPath, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	e := &RecoveryRequiredError{Path: s.path}
	var m markerJSON
	if err != nil || json.Unmarshal(b, &m) != nil || m.Reason == "" {
		e.Reason = "the recovery marker " + s.markerPath + " exists but cannot be read"
		return e, nil
	}
	e.QuarantinedTo, e.Reason = m.QuarantinedTo, m.Reason
	if m.SequenceHint != nil {
		if n, ok := jsonUint(*m.SequenceHint); ok {
			e.SequenceHint = n
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, m.DetectedAt); err == nil {
		e.DetectedAt = t
	}
	return e, nil
}

type markerJSON struct {
	DetectedAt    string           `json:"detected_at"`
	Path          string           `json:"path"`
	QuarantinedTo string           `json:"quarantined_to"`
	Reason        string           `json:"reason"`
	SequenceHint  *json.RawMessage `json:"sequence_hint"`
}

// readLimited reads at most limit bytes of a regular file, refusing
// symlinks and larger files.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrTooLarge, path, limit)
	}
	return b, nil
}

// load reads the state document under the lock: nil when there is no
// state file. A damaged file is quarantined and yields a
// *RecoveryRequiredError; a newer schema ErrUnsupportedVersion.
func (t *tx) load() (*document, error) {
	s := t.s
	if m, err := s.recoveryMarker(); err != nil {
		return nil, fmt.Errorf("filestore: recovery marker: %w", err)
	} else if m != nil {
		return nil, m
	}
	return t.loadFile()
}

// loadFile reads the state file, ignoring any recovery marker.
func (t *tx) loadFile() (*document, error) {
	s := t.s
	f, err := openNoFollow(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	defer f.Close()
	key, err := fileKey(f)
	if err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	if key.size > s.opts.MaxBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, s.path, key.size, s.opts.MaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, s.opts.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	if int64(len(data)) > s.opts.MaxBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrTooLarge, s.path, s.opts.MaxBytes)
	}
	sum := sha256.Sum256(data)
	if t.ps.cacheDoc != nil && t.ps.cacheKey == key && t.ps.cacheDigest == sum {
		return t.ps.cacheDoc, nil
	}
	s.parses.Add(1)
	d, err := parseDocument(data)
	if err != nil {
		var ce *corruptError
		if errors.As(err, &ce) {
			_ = f.Close()
			return nil, t.quarantine(ce.reason, data)
		}
		return nil, err
	}
	t.ps.cacheKey, t.ps.cacheDigest, t.ps.cacheDoc = key, sum, d
	return d, nil
}

// save replaces the state file with d: a temporary file in the same
// directory, written, synced and renamed over the state file, then the
// directory synced. On failure the temporary file is removed and the state
// file is unchanged.
func (t *tx) save(d *document) error {
	s := t.s
	data, err := d.marshal()
	if err != nil {
		return fmt.Errorf("filestore: encoding the state: %w", err)
	}
	if int64(len(data)) > s.opts.MaxBytes {
		return fmt.Errorf("%w: the new state would be %d bytes, the limit is %d", ErrTooLarge, len(data), s.opts.MaxBytes)
	}
	if fi, err := os.Lstat(s.path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s", ErrSymlink, s.path)
	}
	s.removeStaleTemps()
	if err := writeAtomic(s.dir, s.base, s.path, data); err != nil {
		t.ps.cacheDoc = nil
		return fmt.Errorf("filestore: saving the state: %w", err)
	}
	t.ps.cacheDoc = nil
	if f, err := openNoFollow(s.path); err == nil {
		if key, err := fileKey(f); err == nil {
			t.ps.cacheKey, t.ps.cacheDigest, t.ps.cacheDoc = key, sha256.Sum256(data), d
		}
		_ = f.Close()
	}
	return nil
}

// writeAtomic writes data to path through a temporary file named
// ".<base>.*.tmp" in dir.
func writeAtomic(dir, base, path string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o600); err != nil && !isWindows {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = fullSync(f); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// removeStaleTemps deletes temporary files left by writers that crashed;
// only lock holders create them, so under the lock none is in use.
func (s *Store) removeStaleTemps() {
	matches, _ := filepath.Glob(filepath.Join(s.dir, "."+globEscape(s.base)+".*.tmp"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	if isWindows {
		r = strings.NewReplacer(`*`, `[*]`, `?`, `[?]`, `[`, `[[]`)
	}
	return r.Replace(s)
}

// quarantine moves the damaged state file aside and records why in the
// recovery marker. It returns the condition as a *RecoveryRequiredError.
func (t *tx) quarantine(reason string, data []byte) error {
	s := t.s
	now := s.opts.Now().UTC()
	base := s.path + ".corrupt-" + now.Format("20060102T150405Z")
	dest := base
	for i := 1; ; i++ {
		if _, err := os.Lstat(dest); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dest = fmt.Sprintf("%s-%d", base, i)
	}
	t.ps.cacheDoc = nil
	if err := os.Rename(s.path, dest); err != nil {
		return fmt.Errorf("filestore: quarantining damaged state (%s): %w", reason, err)
	}
	_ = syncDir(s.dir)
	e := &RecoveryRequiredError{Path: s.path, QuarantinedTo: dest, Reason: reason, DetectedAt: now, SequenceHint: sequenceHint(data)}
	if err := s.writeMarker(e); err != nil {
		return fmt.Errorf("filestore: recording the recovery marker (%s): %w", reason, err)
	}
	return e
}

func (s *Store) writeMarker(e *RecoveryRequiredError) error {
	hint := json.RawMessage(fmt.Sprint(e.SequenceHint))
	b, err := encode(markerJSON{
		DetectedAt:    e.DetectedAt.UTC().Format(time.RFC3339),
		Path:          e.Path,
		QuarantinedTo: e.QuarantinedTo,
		Reason:        e.Reason,
		SequenceHint:  &hint,
	})
	if err != nil {
		return err
	}
	return writeAtomic(s.dir, filepath.Base(s.markerPath), s.markerPath, b)
}

func (s *Store) clearMarker() error {
	if err := os.Remove(s.markerPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(s.dir)
}
