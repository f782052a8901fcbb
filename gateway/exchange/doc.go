// Package exchange is the gateway's durable record of the ARSIA requests it
// receives: one Exchange per request, its state, and, once there is one,
// the reply envelope the sender fetches from the request's status URL. It
// is kept in one SQLite database file (package internal/sqlitedb: WAL,
// synchronous=FULL, every write one BEGIN IMMEDIATE transaction), which
// several gateway processes may share.
//
// The requirement it serves: an approved action runs exactly once, even
// across restarts and with several gateway processes on one file, and
// nothing acknowledged is lost. A method that returned without error has
// its write on disk.
//
//	s, err := exchange.Open(ctx, "/var/lib/custos/exchanges.db", nil)
//	x, created, err := s.Create(ctx, exchange.Exchange{Sender: ..., MessageID: ..., Capability: ...})
//	if !created { /* a retry: answer from x */ }
//	x, ok, err := s.Claim(ctx, x.ID, exchange.Received)
//	if ok { /* this process, alone, runs the action */ }
//
// # Identity
//
// An exchange has two keys. (Sender, MessageID) is the idempotency key:
// Create of a request whose key is already recorded returns the recorded
// exchange and created=false, so a retried request is never run twice. ID
// is an opaque handle, "exc_" and 32 hex digits of crypto/rand unless the
// caller supplies one, for the status URL: it names one exchange without
// revealing the sender or the message id, and cannot be guessed. A retried
// request with the same key but a different capability, correlation id,
// approval id or action digest is refused with ErrConflict (two different
// requests may not share a message id).
//
// # State machine
//
//	received         -> executing | pending_approval | failed
//	pending_approval -> approved | failed
//	approved         -> executing | failed
//	executing        -> done | failed
//	done, failed     (final)
//
// Create records an exchange in state received. Every later change is one
// of the transitions above, made only if the exchange is still in the
// state the caller read (compare and set, in the store's write
// transaction): of several callers making the same transition, in goroutines,
// Store handles or processes, exactly one succeeds and the others get
// ok=false and the exchange as it now is. Claim is the transition to
// executing; whoever wins it runs the action, and nobody else ever can,
// because nothing leaves executing except done or failed.
//
// Asking for a transition the machine does not have is an error
// (ErrIllegalTransition), not ok=false: it is a bug in the caller, and the
// store fails closed. The schema enforces the machine too (a trigger
// refuses any other update), so a finished exchange is never rewritten.
//
// pending_approval and approved need an ApprovalID and an ActionDigest;
// once set, neither changes (ErrConflict). pending_approval, done and
// failed need a Reply (valid JSON, kept byte for byte) and a ReplyStatus
// (100-599): they are the states the sender is answered from.
//
// # Restarts
//
// Waiting lists the exchanges in given states in order of receipt, for the
// resumer (pending_approval: watch the approval; approved: Claim and run).
// An exchange left in executing by a crash is listed by Interrupted. Its
// outcome is unknown: the action may or may not have taken effect. The
// gateway must not run it again; it answers it failed with ASC
// RESULT_STATE_UNKNOWN (Transition executing -> failed). With several
// processes on one store, an exchange in executing may be running in a
// live process: ClaimedBy says which Store (Options.Instance) claimed it,
// and only exchanges whose claimer is known to be gone may be failed.
//
// Exchanges are never deleted (the schema refuses it); retention is for a
// later migration.
package exchange
