// Package sqlitestore is an aais.Store kept in one SQLite database file,
// through the pure-Go driver modernc.org/sqlite (no cgo). Pending requests,
// their resolutions and the event log survive restarts and crashes, and
// several processes may share one file: they then form one authority
// stream.
//
//	s, err := sqlitestore.Open(ctx, "/var/lib/custos/approvals.db", nil)
//	if err != nil { ... }
//	defer s.Close()
//	auth, err := aais.NewAuthority(s, nil)
//
// # Durability
//
// Every connection runs with journal_mode=WAL, synchronous=FULL,
// foreign_keys=ON and a busy_timeout (Options.BusyTimeout, 5 s by
// default); on macOS fullfsync is also on, because plain fsync there does
// not flush the drive's cache. With synchronous=FULL the WAL is synced on
// every commit, so a write the Store has acknowledged survives a process
// crash and a power loss (synchronous=NORMAL, the usual WAL setting, may
// lose the last commits on power loss; an approval that was answered and
// then forgotten could be decided twice, so it is not used). WAL lets
// readers run alongside the one writer without blocking it. Open refuses a
// file on which WAL cannot be enabled, and a file that is not an SQLite
// database: it never replaces damaged state with an empty store.
//
// # Atomicity and ordering
//
// Every write is one transaction started with BEGIN IMMEDIATE, which takes
// SQLite's single write lock at once. Inside it the store reads what it
// decides on (does the request exist, is it still pending, the last
// sequence) and writes the rows and the event, sequence max+1, before
// committing. Because the lock is held from the first read to the commit,
// concurrent writers, whether goroutines, several Stores or several
// processes on the same file, never produce gaps or duplicate sequences
// and ResolveIfPending succeeds exactly once per request; the resolutions
// primary key would refuse a second resolution anyway. RecordVote (the
// votes of requests that need several approvals, aais.VoteStore) counts a
// request's votes and writes the new one under the same lock. A request and its
// event are committed together, so a reader that sees the event can read
// the request. Reads run in (deferred) read transactions, so Pending's list
// and its as-of sequence, and an EventPage's events, Latest and StoreID,
// each describe one snapshot.
//
// Within one Store, writers queue on an in-process lock before asking
// SQLite for the write lock, so they wait in Go (honouring their context)
// rather than polling SQLite's busy handler. Across Stores and processes
// the busy_timeout applies, and a transaction that still fails with
// SQLITE_BUSY is retried whole until the busy timeout has passed.
//
// A context that is done before the commit rolls the transaction back:
// nothing is written. A failure that cannot be recorded whole is refused.
//
// # Schema
//
// The schema is created by versioned migrations embedded in the binary and
// recorded in a schema_migrations table. Open applies the missing ones in
// one BEGIN IMMEDIATE transaction, so opening a file again is a no-op and
// two processes opening a new file at once apply them once. A file with a
// schema newer than the build is refused. The store identity (EventPage
// StoreID) is a random id created with the schema; Reset deletes every
// request, resolution and event and takes a new one.
//
// Messages are stored as the JSON aais.Marshal produced and parsed again
// with aais.Parse on every read, so callers get validated private copies,
// and a damaged row is reported as an error rather than returned.
//
// The database file is created with mode 0600 and its directory, when
// missing, with mode 0700; SQLite gives the -wal and -shm files the mode
// of the database file.
package sqlitestore
