// Package audit is Custos's tamper-evident audit log: one record per
// received message, gateway decision, approval, execution and oversight
// timeout, hash-chained, kept per compliance profile and purged by
// redaction.
//
//	b, err := sqliteaudit.Open(ctx, "/var/lib/custos/audit.db", nil)
//	log := audit.New(b, &audit.Options{Retention: audit.ProfileRetention(nil, 0)})
//	rec, err := log.Append(ctx, audit.Received(audit.Subject{MessageID: id, Sender: from, ...}))
//	if err != nil { /* fail closed: refuse the request */ }
//
// # Records and the chain
//
// A Record (see its fields) holds what happened, to which message, by whom,
// with what outcome and ASC code; never a payload, only its hash
// ("sha256:" + hex SHA-256 of the RFC 8785 canonical payload). Log.Append
// gives each record the next seq (1, 2, 3, ... without gaps), the hash of
// the previous record as prev (Genesis, "sha256:" + 64 zeros, for seq 1),
// and its own hash:
//
//	hash = "sha256:" + hex(SHA-256(JCS(record without its "hash" member)))
//
// where the record is its JSON form: snake_case members, empty members left
// out, times as fixed-width UTC strings (TimeLayout). The stored and
// exported form of a record is exactly that canonical JSON with "hash"
// added, so anyone can check a record of an export: remove "hash",
// canonicalize (RFC 8785; removing a member of a canonical object leaves it
// canonical) and hash. The hash covers the record's JSON value, not its
// bytes: re-encoding a record in another key order or with "details":{}
// does not count as a change.
//
// The chain logic is separate from storage. A Backend only runs a function
// under its write lock (a transaction that serialises with every other
// writer, in any process or replica) and stores what the function returns;
// the function is given the last record and computes seq, prev and hash, so
// concurrent writers always extend one chain in one order. Everything that
// does not depend on the previous record (time, retention, checks, the
// canonical JSON with placeholders for seq and prev) is done by Append
// before it asks for the lock, concurrently with other appends; under the
// lock the real seq and prev are spliced into those bytes, which are
// hashed once (SHA-256 over about a kilobyte). A SealedBackend also takes
// the stored JSON from the Log instead of encoding the record again under
// its lock. The records and hashes are byte for byte what encoding the
// whole record under the lock gave. Append returns
// once the backend says the record is durable, and any failure, including a
// cancelled context, is an error wrapping ErrAppend: the caller must fail
// the request (fail closed). A context done before the commit writes
// nothing.
//
// # Verification
//
// Log.Verify (and VerifyJSONL for an export) reads every record in storage
// order, recomputes each hash and checks each prev and seq. The Report
// counts records and names the first Problem: which seq, and whether a
// record was altered (content does not match its hash, or its hash is not
// the one the next record links to, so it was rehashed or replaced),
// removed (a seq is missing), reordered (a record stored after a higher
// seq) or inserted (two records claim one seq and the chain links past one
// of them).
//
// The chain is unkeyed: it proves that the records form one unbroken
// sequence, not who wrote them. Someone who can write the storage and
// recompute hashes can rewrite the chain from some record on, or append
// forged records at its end, and can remove records from its end. Save
// Report.Anchor (seq and head hash) outside the storage, for instance in
// the operator's ticketing system or another store, and pass saved anchors
// to VerifyWith: a rewritten or truncated chain no longer holds them.
// Checkpoints (Log.Checkpoint, checkpoint.go) are records that carry a
// signed statement of the record before them: with the signer's key
// (VerifyOptions.Checkpoints), a rewrite of any record a checkpoint
// vouches for is detected without an anchor. A checkpoint says why it was
// signed (CheckpointEvent: start, interval, stop, purge) and how often its
// writer promises one (Options.CheckpointEvery); Report.Tail judges the
// end of the chain by them (a clean stop, records still within the
// promise, records overdue: a suspected truncation or crash), and a
// checkpoint record kept outside the chain (VerifyOptions.Heads, HeadOf:
// the gateway's head file) proves a truncation (ProblemTruncated). A
// bundle (Log.ExportBundle, VerifyBundle) carries the chain, its counts
// and the signer's JWKS for offline verification.
//
// # Retention and redaction
//
// Each record has a retain_until, set by the caller or by Options.Retention
// (ProfileRetention: the record's compliance profile's retention_days, at
// least the profile's schema floor, else a fallback; zero keeps it
// forever). Log.Purge (run it periodically: the purge job) redacts every
// record whose retain_until is before now: the record keeps seq, time,
// kind, retain_until, prev and hash and gets "redacted": true; every other
// member is removed. Records are never deleted, so the chain keeps every
// seq and every link, and removals stay detectable. In the same
// transaction Purge appends a "purge" record saying how many records, from
// which seq to which, it redacted (a backend may split a large purge into
// several transactions, each with its own purge record).
//
// A redacted record's hash cannot be recomputed, since its content is gone.
// Verify checks it by linkage instead: its prev must be the previous
// record's hash and its hash must be the next record's prev; it must carry
// no content; and it cannot be the last record (a purge record always
// follows a redaction). The limits of this design: a redacted record's
// hash is vouched for only by the next record's prev, not recomputed, and
// its time, kind and retain_until are not checked at all (they are
// informative once the record is redacted); someone who can write the
// storage can redact a record early (destroy its content) without Verify
// noticing, though not alter its content, remove it or move it. A content
// commitment kept in the record (hash = H(header, H(content))) would make
// redacted records fully verifiable; the current hash definition does not
// have one.
//
// # Backends
//
// NewMemory is an in-memory backend for tests. Package
// audit/sqliteaudit keeps the chain in its own SQLite file (WAL,
// synchronous=FULL, BEGIN IMMEDIATE), which several processes may share.
//
// # ARSIA
//
// FromARSIA turns the ARSIA audit record of an envelope
// (compliance.NewAuditRecord) into a received record that embeds it, so
// the ARSIA record can be exported as the specification defines it.
package audit
