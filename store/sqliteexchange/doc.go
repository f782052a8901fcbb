// Package sqliteexchange is the exchange store (gateway/exchange.Backend)
// kept in SQLite: in the deployment's state file next to the approvals
// and the audit log (New, on the state's sqlitedb.DB: one writer, one
// group commit, units of work across the three), or in a file of its own
// (Open; the layout before the state file, and tests). WAL,
// synchronous=FULL, every write one BEGIN IMMEDIATE transaction; several
// processes may share the file, and exactly one of them wins each Claim.
// The schema enforces the state machine too: a trigger refuses any other
// update, and exchanges are never deleted.
//
//	st, err := store.Open(ctx, loc, nil) // st.Exchanges is a *Store on custos.db
//
// Its SQL is parallel to store/pgexchange's, statement by statement; the
// kit exchangetest holds both to one behaviour.
package sqliteexchange
