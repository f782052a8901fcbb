// Package sqliteaudit is an audit.Backend kept in its own SQLite file,
// through the pure-Go driver modernc.org/sqlite (no cgo). Several
// processes may open the same file: they extend one chain.
//
//	b, err := sqliteaudit.Open(ctx, "/var/lib/custos/audit.db", nil)
//	if err != nil { ... }
//	log := audit.New(b, nil)
//	defer log.Close()
//
// # Durability and ordering
//
// As in store/sqlitestore: every connection runs with journal_mode=WAL and
// synchronous=FULL (the WAL is synced on every commit, so an acknowledged
// record survives a crash or power loss; Open refuses a file where either
// cannot be set), fullfsync on macOS, and every write is a transaction
// started with BEGIN IMMEDIATE, which takes SQLite's write lock before the
// first read. An append reads the last record, lets audit.Log compute seq,
// prev and hash, and inserts the record, all under that lock, so
// goroutines, Backends and processes sharing the file never fork the chain
// or leave a gap.
//
// Group commit: one Backend's appends go through one writer goroutine that
// commits every append queued meanwhile in one transaction (one fsync); a
// failing append is answered alone and the others run again without it
// (package internal/sqlitedb). Each append sees the ones before it in the
// batch: the last record appended in the transaction is kept in memory, so
// only the first append of a batch reads the last row, and it parses that
// row only when it is not exactly the JSON this Backend last committed
// (another process appended, or a purge ran). The statements of the
// append path are prepared once. The record arrives encoded and hashed by
// audit.Log (audit.SealedBackend), so the write lock covers one INSERT
// per record. Options.MaxBatch = 1 turns group commit off. An append whose
// context is done before its transaction commits is rolled back: nothing
// is written.
//
// # Schema
//
// Versioned migrations are embedded and recorded in schema_migrations. The
// records table keeps each record's canonical JSON (the only column
// Verify reads) and copies of a few members for indexes and the purge job.
// Triggers refuse DELETE and any UPDATE other than a redaction: a guard
// against mistakes, not against someone who can write the file; the hash
// chain is what detects tampering.
//
// The database file is created with mode 0600 and its directory, when
// missing, with mode 0700.
package sqliteaudit
