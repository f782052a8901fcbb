// Package pgexchange is an exchange.Backend kept in a PostgreSQL (15+)
// schema, through pgx (pure Go, no cgo): the exchange store for several
// replicas of custos serve sharing one database. It gives the guarantees
// package exchange documents for its SQLite Store, across replicas, and
// passes the same conformance kit (exchangetest).
//
//	s, err := pgexchange.Open(ctx, "postgres://custos@db.internal/custos", &pgexchange.Options{
//		Schema: "custos", Instance: "gw-1.custos-serve",
//	})
//	if err != nil { ... }
//	defer s.Close()
//	var xs exchange.Backend = s
//
// # Schema
//
// The tables mirror the SQLite schema (exchanges, idempotency, reviews,
// deliveries), with the same CHECK constraints, and PL/pgSQL triggers that
// refuse, below the Go code, any update that is not one legal transition
// (a finished exchange is never rewritten, what identifies an exchange
// never changes), a second decision, a rewritten finished review, and any
// DELETE or TRUNCATE of exchanges. Times are Unix nanoseconds in bigint
// columns, as in SQLite, so they round-trip exactly.
//
// They live in Options.Schema ("custos" by default, the approval store's:
// no table names clash, so one schema may hold both); the pool's
// connections have that schema alone on their search_path. Migrations are
// embedded (migrations/NNNN_description.sql), recorded in
// exchange_migrations (not pgstore's schema_migrations: each store counts
// its own versions), and applied by Open in one transaction holding
// pg_advisory_xact_lock(pgutil.MigrationLockKey): replicas starting at
// once serialise on the lock, the first applies the migrations, the others
// find them applied. A schema newer than the build is refused
// (ErrSchemaTooNew); a new migration must keep the previous build working,
// since older replicas keep running on the migrated schema.
//
// # Concurrency across replicas
//
// Every write is one READ COMMITTED transaction, retried whole on
// serialization failures, deadlocks and connections lost before COMMIT
// (pgutil.Runner); a context done before COMMIT writes nothing. A Store
// made by New on the approval store's pool (as store.Open does) also
// joins units of work (pgutil.Units): a write made with a unit's context
// runs in the unit's transaction and commits with the approval and the
// audit record of the same step.
//
//   - Create takes transaction-scoped advisory locks on (sender, message
//     id) and, with an idempotency key, on the key's scope (always in that
//     order, so they cannot deadlock), then looks for the request: of
//     concurrent Creates of one request, in any replica, one creates it
//     and the others get it with created=false, and an idempotency key
//     names one exchange.
//   - Claim, Transition and Apply lock the exchange row (SELECT ... FOR
//     UPDATE), decide on what they read, and update it compare-and-set
//     (UPDATE ... WHERE id = $1 AND state = $2), writing what the Change
//     queues (review, deliveries, key release) in the same transaction.
//     Concurrent claimers queue on the row lock; each one after the winner
//     reads executing and gets claimed=false: exactly one wins.
//   - MarkTimedOut is one UPDATE ... WHERE timed_out = 0: a concurrent one
//     waits for the row and re-checks it after the first committed, so one
//     caller raises the timeout. CompleteReview locks the review row.
//   - DueDeliveries hands each due delivery to one replica: it selects
//     them FOR UPDATE SKIP LOCKED and, in the same transaction, leases
//     them by moving next_attempt to now + Options.DeliveryLease; Delivered
//     or DeliveryFailed ends the lease. Delivery is at least once: a
//     replica that dies after posting but before Delivered leaves the
//     delivery due again when its lease ends, and another replica posts it
//     again. Two replicas never post one envelope concurrently as long as
//     a batch of posts ends within the lease. An exchange's later
//     envelopes still wait for its earlier ones (delivered or given up).
//
// Waiting lists exchanges by seq, an identity assigned at insert: the
// order of receipt, up to concurrent inserts in different replicas, which
// may commit in another order than their seq.
//
// # Differences from the SQLite Store
//
// PostgreSQL text cannot hold NUL or invalid UTF-8: a review profile or a
// justification with NUL is refused (ErrInvalid), and a delivery failure
// message is cleaned and cut on a character boundary. DueDeliveries with
// limit <= 0 returns nothing.
//
// Connection poolers in transaction mode (PgBouncer pool_mode=transaction)
// are not supported: the store relies on a per-connection search_path and
// pgx's per-connection prepared statements.
package pgexchange
