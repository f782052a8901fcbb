package filestore

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrLockTimeout: the store's lock was not obtained within
	// Options.LockTimeout (another transaction, in this process or
	// another, held it).
	ErrLockTimeout = errors.New("filestore: timed out waiting for the store lock")
	// ErrRecoveryRequired: the state file was found damaged and moved
	// aside; every operation fails until an operator calls
	// AcknowledgeRecovery. Errors wrapping it are *RecoveryRequiredError.
	ErrRecoveryRequired = errors.New("filestore: store needs recovery")
	// ErrUnsupportedVersion: the state file was written in a newer
	// "aais.store.vN" format this build cannot read. The file is left
	// untouched and not quarantined.
	ErrUnsupportedVersion = errors.New("filestore: unsupported state file version")
	// ErrTooLarge: the state file, or the state a write would produce, is
	// larger than Options.MaxBytes. Nothing is quarantined or written.
	ErrTooLarge = errors.New("filestore: state file too large")
	// ErrSymlink: the state file or its lock file is a symbolic link, which
	// the store refuses to follow.
	ErrSymlink = errors.New("filestore: refusing to follow a symbolic link")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("filestore: store is closed")
)

// RecoveryRequiredError describes a quarantined state file: what was
// wrong, where the damaged file went, and the highest sequence number
// found in it. It is read from the "<file>.recovery-required" marker, so
// every process and every handle sees the same one. It wraps
// ErrRecoveryRequired.
type RecoveryRequiredError struct {
	// Path is the state file.
	Path string `json:"path"`
	// QuarantinedTo is where the damaged file was moved ("" when the
	// marker could not be read).
	QuarantinedTo string `json:"quarantined_to"`
	// Reason says what was wrong.
	Reason string `json:"reason"`
	// DetectedAt is when the damage was found.
	DetectedAt time.Time `json:"-"`
	// SequenceHint is the largest "sequence", "presenter_sequence" or
	// "as_of_sequence" value found in the damaged bytes (0 if none):
	// AcknowledgeRecovery restarts numbering after it by default.
	SequenceHint uint64 `json:"sequence_hint"`
}

func (e *RecoveryRequiredError) Error() string {
	s := fmt.Sprintf("filestore: %s needs recovery: %s", e.Path, e.Reason)
	if e.QuarantinedTo != "" {
		s += " (damaged file moved to " + e.QuarantinedTo + ")"
	}
	return s + "; inspect it, then call AcknowledgeRecovery"
}

// Unwrap returns ErrRecoveryRequired.
func (e *RecoveryRequiredError) Unwrap() error { return ErrRecoveryRequired }

// corruptError is a document that cannot be read as a valid state: it is
// quarantined.
type corruptError struct{ reason string }

func (e *corruptError) Error() string { return "corrupt state: " + e.reason }

func corrupt(format string, args ...any) error {
	return &corruptError{reason: fmt.Sprintf(format, args...)}
}
