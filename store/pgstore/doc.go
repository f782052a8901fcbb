// Package pgstore is an aais.Store kept in a PostgreSQL schema, through
// pgx (pure Go, no cgo). It is the backend for several replicas of custos
// serve sharing one database: every Store opened on the same database and
// schema, in any process, is one authority stream, with one identity, one
// gapless event log and exactly one resolution per request.
//
//	s, err := pgstore.Open(ctx, "postgres://custos@db.internal/custos", &pgstore.Options{Schema: "custos"})
//	if err != nil { ... }
//	defer s.Close()
//	auth, err := aais.NewAuthority(s, nil)
//
// # Schema
//
// The tables live in Options.Schema ("custos" by default), which Open
// creates when missing; the pool's connections run with search_path set to
// that schema alone. They are:
//
//   - meta: one row, the store's identity (store_id) and latest_sequence,
//     the sequence of the last event recorded.
//   - events: the ordered log, sequence 1, 2, 3, ..., each row the exact
//     JSON aais.Marshal produced.
//   - requests: every request ever created (ids are never reused), with a
//     resolved flag and the partial index requests_pending (sequence)
//     WHERE NOT resolved, so Pending reads only the pending requests
//     however long the history is.
//   - resolutions: at most one per request (primary key request_id).
//   - rules: every rule ever saved, revoked ones included.
//   - votes: the votes of requests that need several approvals
//     (aais.VoteStore), one per reviewer and request; RecordVote locks the
//     request's row before it counts them, and writes the vote in the
//     statement that appends its event.
//   - schema_migrations: the migrations applied.
//
// Messages are parsed again with aais.Parse on every read, so callers get
// validated private copies and a damaged row is an error, never a result.
//
// # Sequences without gaps
//
// A write runs in two parts. First it prepares: it reads what it decides
// on and locks the rows that must not change under it (the request row,
// rule rows), writing nothing. Then one statement (appendSQL) takes the
// sequences and writes everything: UPDATE meta SET latest_sequence =
// latest_sequence + k, which locks the meta row, gives the events
// latest+1 .. latest+k, inserts the events and the rows that carry them
// and notifies; COMMIT is sent in the same round trip (a pipeline), so the
// meta row is locked for that one statement and the commit, not for the
// transaction. Concurrent writes of one Store share the transaction
// (group commit, below) and take the row once. Three properties follow:
//
//  1. No duplicates, no holes in what commits. The row lock admits one
//     appending transaction at a time. An UPDATE that waited for the
//     lock continues, under READ COMMITTED, from the row as the previous
//     holder committed it, so the sequences continue from that holder's
//     last; a transaction that rolls back (error, cancelled context,
//     killed backend) releases the lock without changing the row, and
//     the next one reuses its numbers. Sequences come from the row, never
//     from a PostgreSQL SEQUENCE, whose values are not returned on
//     rollback.
//
//  2. Commit order is sequence order. The holder of n commits before the
//     next writer can take n+1, because PostgreSQL releases row locks only
//     after the commit. Two transactions cannot take n and n+1 and commit
//     in the reverse order: the second cannot take n+1 before the first
//     committed.
//
//  3. No reader sees n+1 without n, at any isolation level, including
//     READ COMMITTED. PostgreSQL makes a transaction visible (removes it
//     from the set of running transactions every new snapshot consults)
//     before it releases its locks. The writer of n+1 obtained the meta
//     lock only after the writer of n released it, so the writer of n was
//     already visible before the writer of n+1 wrote its events, let alone
//     committed. Any snapshot that includes the writer of n+1 was
//     therefore taken after the writer of n became visible, and includes
//     it: a follower reading sequence > last never skips n. (On a hot
//     standby commit records are replayed in WAL order, and n's precedes
//     n+1's, so the same holds there.)
//
// The event JSON stores its own sequence, so a write marshals each event
// (aais.Marshal, which validates it) before the lock, with the sequence
// left open, and the statement builds the stored bytes as prefix ||
// sequence || suffix: exactly what aais.Marshal writes at that sequence.
// The statement's other reads would see the snapshot taken before it
// waited for the lock, so it makes none: what a write decides on is read
// while preparing, and what another writer may have done meanwhile is
// caught by the indexes, which see every committed row (a request created
// concurrently by another replica fails the requests primary key, and is
// then read back as existing; a rule id taken fails the rules keys, an
// ErrConflict).
//
// Readers use this by reading each answer in one statement, hence one
// snapshot: EventsAfter reads store_id, latest_sequence and the events
// after the caller's sequence together, and Pending reads
// latest_sequence (its asOf) with the pending requests. A request and its
// event commit in one transaction, so a reader that sees an
// approval.requested event can always read the request.
//
// Older builds lock the meta row at the start of their writes; they and
// this one still take turns on one row, so replicas of both may run on one
// schema during an upgrade.
//
// # Group commit
//
// A Store's concurrent writes are prepared one after another in one
// transaction and appended by one statement (pgutil.Batcher, up to
// Options.MaxBatch writes, Options.BatchConns transactions at once), so
// the batch pays one meta lock, one commit and one WAL flush. The first
// reads of the batch's writes (the request rows locked FOR UPDATE, the
// rule rows FOR SHARE) are sent together, in one round trip, so a batch
// takes about three round trips whatever its size. A write that
// depends on another write of the batch (the same request or rule) is run
// alone after it; a write whose preparation fails is run again alone, so
// it gets the answer it would have got alone; a batch that fails as a
// whole is run again write by write.
//
// # Units of work
//
// A write made with the context of a unit of work on the Store's pool
// (pgutil.Units: custos serve's reception, resolution and execution
// steps, which also write exchanges and audit records) is prepared and
// appended at once in the unit's transaction, without committing: the
// meta row is then locked from that statement until the unit commits,
// and the notification is delivered at that commit. The three properties
// above hold as they are, since the unit is one transaction that takes
// the meta row once it has written everything before it.
//
// # Atomic resolution across replicas
//
// ResolveIfPending prepares by locking the request row (SELECT resolved FROM requests
// WHERE id = $1 FOR UPDATE): the concurrent resolvers of one request, in
// every replica, queue on that row, and each one that obtains it after
// the winner committed reads resolved = true and returns the stored
// resolution (resolved false). Only the winner appends. The resolutions
// primary key would refuse a second resolution anyway.
//
// An automatic approval (ByRule) locks the rule row FOR SHARE, and
// RevokeRule locks it FOR UPDATE, so an approval by a rule either commits
// before the revocation or waits for it and then sees the rule revoked
// (ErrRuleInactive); it never commits after a revocation it did not see.
//
// Locks are taken in the order request row, rule rows, meta row, and the
// meta row last of all, in the statement that ends the transaction; a
// batch locks the rows of several requests, and two batches that lock the
// same two requests in opposite orders deadlock: PostgreSQL aborts one,
// and it is retried write by write. Reset, which locks whole tables, may
// deadlock too.
//
// # Failures and retries
//
// Write transactions run at READ COMMITTED. A transaction aborted with
// serialization_failure (40001) or deadlock_detected (40P01), or whose
// connection was lost or terminated before COMMIT was sent (the server has
// rolled it back), is retried whole, with jittered exponential backoff, up
// to Options.MaxAttempts times. The context is checked before every
// attempt and after the transaction's preparing statements: a context
// done before the appending statement writes nothing. That statement and
// COMMIT are sent together and are not cancelled by the context. When the
// server answers the statement with an error (a terminated backend
// included: the server skipped the COMMIT behind it), nothing was
// written and the transient cases are retried; if the connection fails
// without an answer once they are sent, the outcome is unknown, the write
// is not retried, and the error says so (pgutil.ErrCommitUnknown). Reads
// are retried on the same transient failures.
//
// A backend killed mid-write (pg_terminate_backend, a crashed replica, a
// dropped connection) leaves nothing: its transaction is rolled back and
// its locks released, and the writers queued behind it proceed.
//
// # Notifications
//
// The statement that appends a transaction's events also runs
// pg_notify(Channel(), '<store_id>:<sequence>') with the last sequence it
// assigned; PostgreSQL delivers the notification at commit, only if the
// transaction commits, in commit order. The payload names ids only, never
// message content (notifications are limited to 8000 bytes, and a
// listener need not be trusted with content). Reset notifies
// '<new store_id>:0'. The channel is "custos:<schema>" (a digest of the
// schema when that would exceed 63 bytes), so schemas do not hear each
// other.
//
// Store.Subscribe LISTENs on a dedicated connection and delivers
// Notifications: first, and after every reconnection, the latest sequence
// read after LISTEN took effect (Resync), then one per notification,
// coalesced so that a slow receiver sees the newest. Notifications are
// hints, the log is the truth: they are lost while a listener is
// disconnected and coalesced while it is slow, so a receiver must answer
// each one by reading EventsAfter from the last sequence it applied (and
// handle Gap and a changed StoreID), never by assuming it saw every
// sequence. A replica that serves event streams can therefore wake up on
// notifications instead of polling, and still catch up after any outage.
//
// # Migrations and replicas
//
// The schema is created by versioned migrations embedded in the binary
// (migrations/NNNN_description.sql) and recorded in schema_migrations.
// Open applies the missing ones in one transaction that first takes
// pg_advisory_xact_lock(MigrationLockKey): replicas starting at once
// serialise on the lock, the first applies the migrations, the others
// then find them applied. The store identity is created with the first
// migration. Open refuses a schema newer than the build (ErrSchemaTooNew)
// and a schema without its identity row. Because replicas still running an
// older build keep using the schema after a newer one migrated it, a new
// migration must keep the previous build working (add, do not rename or
// drop, until no older replica runs).
//
// Reset deletes every request, resolution, rule and event and takes a new
// identity; it is for tests and operators.
//
// Connection poolers in transaction mode (PgBouncer pool_mode=transaction)
// are not supported: the store relies on a per-connection search_path and
// a session-long LISTEN.
package pgstore
