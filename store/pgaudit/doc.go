// Package pgaudit is an audit.Backend (and audit.SealedBackend) kept in a
// PostgreSQL schema, through pgx. Several replicas of custos serve
// opening the same database and schema extend ONE chain.
//
//	b, err := pgaudit.Open(ctx, "postgres://custos@db.internal/custos?custos_schema=custos", nil)
//	if err != nil { ... }
//	log := audit.New(b, nil)
//	defer log.Close()
//
// New takes a shared *pgxpool.Pool instead (Close then leaves it open).
//
// # One order across replicas
//
// The one-row table audit_head holds the seq and hash of the last record.
// Every append is one READ COMMITTED transaction that locks that row
// (SELECT … FOR UPDATE) and, in the same round trip, reads the last record
// (a second statement, whose snapshot is taken once the lock is held, so
// it sees what the previous holder committed); audit.Log links the new
// record to it; the INSERT and the head's UPDATE go in one more round
// trip; then COMMIT. Row locks are released only after the commit, so
// commit order is seq order and no two writers ever take the same seq.
// A transaction that fails (error, done context, terminated backend)
// releases the lock having changed nothing, and the next writer reuses
// its seq: the chain has no gaps. Serialization failures, deadlocks and
// connections lost before COMMIT are retried with a new transaction
// (internal/pgutil.Runner), calling build again; a connection lost after
// COMMIT was sent is an error (the record may be stored: one more than
// acknowledged, never one less).
//
// The last record is parsed only when its stored bytes are not exactly
// those this Backend last committed (another replica appended, or a purge
// rewrote it). A last record that does not parse, or that does not match
// the head, stops every append (fail closed) until an operator looks.
//
// # Group commit
//
// A Backend's appends are queued for one writer goroutine, which commits
// up to Options.MaxBatch (64) of them in one transaction: one lock, one
// set of round trips and one WAL flush for the batch. A failing build is
// answered alone; an append whose context ends while queued leaves the
// queue, and one whose context ends during the transaction is taken out
// and the batch run again without it, so a done context never writes.
// MaxBatch 1 runs every append in its caller's goroutine, in its own
// transaction.
//
// An append made with the context of a unit of work on the Backend's pool
// (pgutil.Units) bypasses the writer and takes its place in the chain when
// the unit's transaction commits: just before, the transaction locks the
// head and reads the last record (one round trip), and the records of its
// units are inserted after it, with the head's update, in the round trip
// of the COMMIT, together with the exchange and approval writes of the
// same steps. The head is locked for the end of the transaction only,
// and always after every other row the units lock, so units never
// deadlock on it; such an append returns the zero Record, and is not
// visible to reads of the unit.
//
// # Storage
//
// Tables audit_meta (identity), audit_head and audit_records, and the
// migrations table audit_migrations, in the schema named by
// Options.Schema, else the DSN's custos_schema parameter, else "custos";
// the names never clash with the other custos stores sharing the schema.
// Migrations are embedded and applied at Open under the advisory lock all
// custos stores share (pgutil.MigrationLockKey). Each record is stored as
// bytea, byte for byte as audit.Log produced it (never jsonb, which would
// re-order keys and break the hash); other columns copy members for
// indexes and the purge job. Range reads pages of 512 records, one
// statement each.
//
// Triggers refuse DELETE and TRUNCATE of the records and the head, any
// UPDATE of a record other than a redaction that keeps seq, prev and hash,
// and moving the head back. They guard against accidents: the table's
// owner can disable them (ALTER TABLE … DISABLE TRIGGER) and a superuser
// can also skip them (session_replication_role = replica) or rewrite the
// files. The hash chain is what detects tampering; cutting records off the
// end is detected only against an anchor kept outside the database
// (audit.VerifyOptions.Anchors); Backend.Head returns the head row, itself
// an anchor as long as it was not rewritten too.
package pgaudit
