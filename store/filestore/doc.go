// Package filestore is an aais.Store kept in one JSON state file, in the
// layout of the AAIS reference library's FileApprovalStore ("aais.store.v1"),
// so that the Python library and Custos can share a store. Several
// processes, and several Stores in one process, may use the same file at
// once: they form one authority stream.
//
//	s, err := filestore.Open("/var/lib/custos/approvals.json", nil)
//	if err != nil { ... }
//	defer s.Close()
//	auth, err := aais.NewAuthority(s, nil)
//
// It is meant for small stores: thousands of pending requests, not a
// million. Every write rewrites the whole file (and every read checks it),
// so the cost of an operation grows with the number of requests and
// events kept; use store/sqlitestore for large or busy stores.
//
// # Format
//
// The file is one JSON object, written with sorted keys and no
// whitespace:
//
//	schema              "aais.store.v1"
//	store_id            random id; a new one after Reset or recovery
//	sequence            the last event sequence handed out
//	presenter_sequence  kept as found (this store writes no presenter events)
//	compacted_through   the highest sequence removed from the event log
//	pending             {request id: approval.requested envelope}
//	owners              {request id: {pid, process_start_time, host_id}}, or a
//	                    bare PID (older files): an owner on this host
//	decisions           {request id: approval.decided envelope}, kept as found
//	resolutions         {request id: approval.resolved envelope}
//	events              [approval.requested and approval.resolved envelopes]
//	extensions          {name: JSON}
//
// Envelopes are stored as the bytes aais.Marshal produced and parsed again
// on every read, so callers get private, validated copies. Members and
// extensions this package does not know are kept as they are found.
//
// Data only Custos uses lives in extensions: ExtFingerprints (request
// fingerprints), ExtDecisionFingerprints (the fingerprint of the decision
// that caused each resolution, for replays), ExtRules (saved rules, in
// the storage form of aais.Rule), ExtByRule (the rule that approved a
// request automatically) and ExtResolvedRequests (the approval.requested
// envelope of each resolved request: the reference layout removes
// resolved requests from "pending", and RequestState must keep returning
// them until compaction removes their resolution). Requests written by
// another library have no fingerprint: they get the one aais.Authority
// computes, the JCS SHA-256 digest of the request payload; a decision
// found in "decisions" whose id the receipt names gets the decision
// fingerprint the same way. A resolved request whose envelope is not in
// ExtResolvedRequests is found in the event log, and copied into the
// extension at the next write. A resolved request's envelope is thus held
// twice while its event is still in the log.
//
// # Locking
//
// Every operation, reads included, is one transaction over the whole
// load-modify-save. It takes a per-path lock shared by all Stores open on
// the same absolute path in the process, then an exclusive lock on
// "<file>.lock" (flock(2) on Unix, LockFileEx on byte 0 on Windows),
// polling with a backoff from 1 ms to 20 ms. Waiting longer than
// Options.LockTimeout (10 s by default) fails with ErrLockTimeout; a done
// context stops the wait. Advisory locks on network file systems are not
// supported: keep the file on a local file system.
//
// The parsed document is cached per path, keyed by the file's inode,
// size, modification and change times and the SHA-256 of its bytes, so an
// unchanged file is not parsed again.
//
// # Durability
//
// A write goes to a temporary file ".<name>.*.tmp" in the same directory,
// is synced, renamed over the state file, and the directory is synced
// (Unix). A crash leaves either the old or the new file whole; temporary
// files left by a crashed writer are removed at the next write. A write
// that fails, or whose context is done before it is saved, changes
// nothing. The state file, the lock file and the marker are created with
// mode 0600 and a missing directory with mode 0700; a state or lock file
// that is a symbolic link is refused (ErrSymlink).
//
// # Recovery
//
// A file that is not valid UTF-8 or JSON, or not a valid document
// (checked in the reference order: an object; a known schema; integer
// counters; a store_id; object and list members; then each pending
// request, decision, resolution, owner and event; then the Custos
// extensions) is never read as empty. It is moved to
// "<file>.corrupt-YYYYMMDDTHHMMSSZ" and a "<file>.recovery-required"
// marker records why. While the marker exists every operation of every
// process fails with a *RecoveryRequiredError (ErrRecoveryRequired), even
// when the marker cannot be read. AcknowledgeRecovery ends the condition:
// it uses a valid file the operator restored, or starts a new, empty
// store whose numbering continues after the highest sequence found in the
// damaged file, so presenters see a gap rather than sequences used again.
// A file in a newer format ("aais.store.v2" and later) is refused with
// ErrUnsupportedVersion and left untouched.
//
// # Limits and retention
//
// A file larger than Options.MaxBytes (64 MiB by default), or a write
// that would make it larger, is refused with ErrTooLarge. After every
// write, and on Compact, the Retention limits are applied: resolved
// requests beyond the newest 1000 or older than 30 days are removed with
// their owner, fingerprints and decision; then the oldest events beyond
// the newest 10000 (the reference library keeps 1000), and events older
// than 30 days, are removed from the log, and compacted_through records
// the highest sequence removed. Pending requests and rules are never
// removed. Ages are measured on Options.Now, which should be the
// authority's clock. EventsAfter reports a Gap for a sequence below
// compacted_through; RequestState of a removed request yields
// aais.ErrUnknownRequest, and its id can no longer be recognised as used.
package filestore
