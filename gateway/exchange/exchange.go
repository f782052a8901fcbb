package exchange

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/custos-runtime/custos/internal/sqlitedb"
)

// State is where an exchange is in its life (see the package doc for the
// state machine).
type State string

// The states.
const (
	// Received: recorded, nothing decided yet.
	Received State = "received"
	// PendingApproval: waiting for a human decision (an AAIS request,
	// ApprovalID); Reply is the pending envelope.
	PendingApproval State = "pending_approval"
	// Approved: the approval was granted; the action has not run.
	Approved State = "approved"
	// Executing: one Store claimed it and runs (or ran) the action.
	Executing State = "executing"
	// Done: the action ran; Reply is the final envelope.
	Done State = "done"
	// Failed: refused, denied, expired, failed, or interrupted; Reply is
	// the final envelope.
	Failed State = "failed"
)

// States lists every state.
var States = []State{Received, PendingApproval, Approved, Executing, Done, Failed}

// transitions is the state machine.
var transitions = map[State][]State{
	Received:        {Executing, PendingApproval, Failed},
	PendingApproval: {Approved, Failed},
	Approved:        {Executing, Failed},
	Executing:       {Done, Failed},
}

// Valid reports whether s is one of the States.
func (s State) Valid() bool {
	switch s {
	case Received, PendingApproval, Approved, Executing, Done, Failed:
		return true
	}
	return false
}

// Final reports whether s is done or failed: nothing leaves it.
func (s State) Final() bool { return s == Done || s == Failed }

// Legal reports whether the state machine moves from one state to another.
func Legal(from, to State) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// Errors. They are matched with errors.Is.
var (
	// ErrNotFound: no exchange has that id (or sender and message id).
	ErrNotFound = errors.New("exchange: not found")
	// ErrInvalid: an argument is malformed (empty id, unknown state,
	// reply that is not JSON, ...).
	ErrInvalid = errors.New("exchange: invalid argument")
	// ErrIllegalTransition: the state machine has no such transition.
	ErrIllegalTransition = errors.New("exchange: illegal transition")
	// ErrConflict: the request contradicts what is recorded (same
	// sender and message id, different request; an id already in use; a
	// different approval id or action digest than the one recorded).
	ErrConflict = errors.New("exchange: conflict")
	// ErrClosed: the Store is closed.
	ErrClosed = sqlitedb.ErrClosed
)

// Exchange is the record of one received ARSIA request.
type Exchange struct {
	// ID is the opaque handle of the status URL, unique in the store.
	ID string
	// Sender and MessageID identify the ARSIA request: at most one
	// exchange per pair.
	Sender    string
	MessageID string
	// CorrelationID is the request's correlation id, "" when none.
	CorrelationID string
	// Capability is the capability the request invokes.
	Capability string
	// ApprovalID is the AAIS request id, "" while no approval is needed.
	ApprovalID string
	// ActionDigest is the digest of the action approved or to dispatch,
	// "" while unknown.
	ActionDigest string
	State        State
	// Reply is the envelope the sender is answered with: the
	// pending_approval envelope while waiting, the final signed reply
	// once done or failed; nil when none. Kept byte for byte.
	Reply json.RawMessage
	// ReplyStatus is the HTTP status to answer with, 0 when no Reply.
	ReplyStatus int
	// ClaimedBy is the Options.Instance of the Store that claimed it,
	// "" until claimed.
	ClaimedBy string
	// CreatedAt and UpdatedAt are set by the store (UTC).
	CreatedAt, UpdatedAt time.Time
	// Deadline is the approval deadline, zero when none.
	Deadline time.Time
	// TraceID is the request's W3C trace id, "" when none.
	TraceID string
	// Decision is the signed approval_decision envelope, once the
	// approval resolved; nil before and when none was needed.
	Decision json.RawMessage
	// Request is the AAIS approval request (its JSON) the gateway submits
	// for an exchange that waits for a human, recorded by Create in the
	// same write as the exchange, so that a gateway stopped between the
	// two writes finishes the submission from it; nil when none. It needs
	// an ApprovalID and never changes.
	Request json.RawMessage
	// Idempotency, given to Create, records the request's idempotency key
	// in the same write (see Idempotency). It is not read back.
	Idempotency *Idempotency
}

// Change is what a transition records besides the new state. Zero fields
// leave the recorded values as they are.
type Change struct {
	// Reply and ReplyStatus replace the recorded reply; both or neither.
	// Required when entering pending_approval, done or failed.
	Reply       json.RawMessage
	ReplyStatus int
	// ApprovalID and Deadline may be given only when entering
	// pending_approval. An ApprovalID already recorded cannot change.
	ApprovalID string
	Deadline   time.Time
	// ActionDigest may be given when entering a state other than done or
	// failed. One already recorded cannot change.
	ActionDigest string
	// Decision records the signed approval_decision envelope, once, when
	// leaving pending_approval.
	Decision json.RawMessage
	// Review queues a post-execution review, entering done or failed.
	Review *Review
	// Deliveries queue envelopes for the sender's callback URL.
	Deliveries []Delivery
	// ReleaseKey deletes the idempotency key naming the exchange, entering
	// failed after a failure where nothing ran: a retry with the key must
	// run, not replay the failure.
	ReleaseKey bool
}

// Options tunes a Store. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// BusyTimeout bounds the wait for a lock another connection or
	// process holds. Zero means sqlitedb.DefaultBusyTimeout.
	BusyTimeout time.Duration
	// MaxConns caps the connection pool. Zero means
	// sqlitedb.DefaultMaxConns.
	MaxConns int
	// Instance names this Store in ClaimedBy, so that after a crash the
	// gateway can tell its own interrupted exchanges from those another
	// live process is running. A stable name (host and service) lets a
	// restarted process recognise its predecessor's claims. Zero means a
	// random name, new with every Open.
	Instance string
	// Now is the clock for CreatedAt and UpdatedAt. Nil means time.Now.
	Now func() time.Time
}

// Store is the exchange store kept in one SQLite file. It is safe for
// concurrent use; several Stores, in one process or several, may open the
// same file.
type Store struct {
	db       *sqlitedb.DB
	instance string
	now      func() time.Time
}

//go:embed migrations/*.sql
var migrationFS embed.FS

var schema = sqlitedb.Migrations{FS: migrationFS, Dir: "migrations"}

// SchemaVersion is the schema version this build creates and reads.
func SchemaVersion() int { return schema.SchemaVersion() }

// Open opens the store kept in the database file at path, creating it
// (mode 0600, parent directory 0700) when missing, and applies the schema
// migrations. A file that is not an SQLite database, or whose schema is
// newer than this build, is refused. o may be nil.
func Open(ctx context.Context, path string, o *Options) (*Store, error) {
	var so sqlitedb.Options
	s := &Store{now: time.Now}
	if o != nil {
		so.BusyTimeout, so.MaxConns = o.BusyTimeout, o.MaxConns
		s.instance = o.Instance
		if o.Now != nil {
			s.now = o.Now
		}
	}
	if s.instance == "" {
		s.instance = NewInstance()
	} else if err := CheckText("instance", s.instance, MaxID, true); err != nil {
		return nil, err
	}
	db, err := sqlitedb.Open(ctx, path, &so, schema)
	if err != nil {
		return nil, fmt.Errorf("exchange: %w", err)
	}
	if err := db.Prepare(ctx, hotQueries...); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("exchange: %w", err)
	}
	s.db = db
	return s, nil
}

// Close closes the database. Writes already acknowledged are on disk.
func (s *Store) Close() error { return s.db.Close() }

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.db.Path() }

// Instance returns the name this Store records in ClaimedBy.
func (s *Store) Instance() string { return s.instance }

const columns = `id, sender, message_id, correlation_id, capability, approval_id, action_digest,
	state, reply, reply_status, claimed_by, created_at, updated_at, deadline, decision, trace_id, request`

const (
	qByID   = "SELECT " + columns + " FROM exchanges WHERE id = ?"
	qByKey  = "SELECT " + columns + " FROM exchanges WHERE sender = ? AND message_id = ?"
	qInsert = `INSERT INTO exchanges (id, sender, message_id, correlation_id, capability, approval_id,
		action_digest, state, reply, reply_status, claimed_by, created_at, updated_at, deadline, trace_id, request)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`
	qUpdate = `UPDATE exchanges SET state = ?, reply = ?, reply_status = ?, approval_id = ?,
		action_digest = ?, deadline = ?, claimed_by = ?, updated_at = ?, decision = ?
		WHERE id = ? AND state = ?`
	qIdemGet = `SELECT fingerprint, exchange_id, expires_at FROM idempotency
		WHERE scope_from = ? AND scope_to = ? AND payload_type = ? AND idem_key = ?`
	qIdemPut = `INSERT INTO idempotency (scope_from, scope_to, payload_type, idem_key, fingerprint, exchange_id, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope_from, scope_to, payload_type, idem_key) DO UPDATE SET
		fingerprint = excluded.fingerprint, exchange_id = excluded.exchange_id, expires_at = excluded.expires_at`
)

var hotQueries = []string{qByID, qByKey, qInsert, qUpdate, qIdemGet, qIdemPut}

// Limits on the length of what identifies an exchange: ids, and the other
// text an exchange records.
const (
	MaxID   = 256
	MaxText = 1024
	// MaxRequest bounds an exchange's recorded approval request.
	MaxRequest = 4 << 20
)

// NewInstance returns a random Options.Instance ("store_" and 32 hex
// digits), for a store that was given none.
func NewInstance() string { return "store_" + randomHex() }

func randomHex() string {
	var b [16]byte
	// crypto/rand.Read never returns an error since Go 1.24.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CheckText refuses an empty (when required), over-long, non-UTF-8 or
// control-character-bearing value, naming it in the ErrInvalid.
func CheckText(name, v string, max int, required bool) error {
	switch {
	case v == "":
		if required {
			return fmt.Errorf("%w: empty %s", ErrInvalid, name)
		}
		return nil
	case len(v) > max:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalid, name, max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not UTF-8", ErrInvalid, name)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: %s has control characters", ErrInvalid, name)
	}
	return nil
}

// CheckState refuses a state that is not one of States.
func CheckState(s State) error {
	if !s.Valid() {
		return fmt.Errorf("%w: unknown state %q", ErrInvalid, s)
	}
	return nil
}

// checkReply checks a reply and its status: both or neither, JSON, an
// HTTP status.
func checkReply(reply json.RawMessage, status int) error {
	if len(reply) == 0 {
		if status != 0 {
			return fmt.Errorf("%w: reply status %d without a reply", ErrInvalid, status)
		}
		return nil
	}
	if !json.Valid(reply) {
		return fmt.Errorf("%w: reply is not valid JSON", ErrInvalid)
	}
	if status < 100 || status > 599 {
		return fmt.Errorf("%w: reply status %d is not an HTTP status", ErrInvalid, status)
	}
	return nil
}

func wrap(err error) error {
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalid),
		errors.Is(err, ErrIllegalTransition), errors.Is(err, ErrConflict),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("exchange: %w", err)
}

// ToNanos is how the stores keep a time: Unix nanoseconds, 0 for the zero
// time. FromNanos reads it back (UTC).
func ToNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromNanos is the time ToNanos kept as n.
func FromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

type scanner interface{ Scan(...any) error }

func scan(r scanner) (Exchange, error) {
	var (
		x                          Exchange
		state                      string
		reply, decision, request   []byte
		created, updated, deadline int64
	)
	err := r.Scan(&x.ID, &x.Sender, &x.MessageID, &x.CorrelationID, &x.Capability, &x.ApprovalID,
		&x.ActionDigest, &state, &reply, &x.ReplyStatus, &x.ClaimedBy, &created, &updated, &deadline, &decision, &x.TraceID, &request)
	if err != nil {
		return Exchange{}, err
	}
	x.State = State(state)
	if !x.State.Valid() {
		return Exchange{}, fmt.Errorf("exchange %s: unknown state %q in the database", x.ID, state)
	}
	if reply != nil {
		x.Reply = json.RawMessage(reply)
	}
	if decision != nil {
		x.Decision = json.RawMessage(decision)
	}
	if request != nil {
		x.Request = json.RawMessage(request)
	}
	x.CreatedAt, x.UpdatedAt, x.Deadline = FromNanos(created), FromNanos(updated), FromNanos(deadline)
	return x, nil
}

// getTx reads one exchange by id in tx.
func getTx(ctx context.Context, tx *sqlitedb.Tx, id string) (Exchange, error) {
	x, err := scan(tx.QueryRowContext(ctx, qByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Exchange{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return x, err
}

// Create records x as a new exchange in state received (or executing,
// claimed by this Store, when x.State is executing: the caller runs it
// at once, without a Claim), with ID (a new
// random one when x.ID is empty), Sender, MessageID, CorrelationID,
// Capability, ApprovalID, ActionDigest and Deadline from x; CreatedAt and
// UpdatedAt are the store's clock. x.State must be "", received or executing, and
// x.Reply, x.ReplyStatus and x.ClaimedBy empty.
//
// If an exchange with the same Sender and MessageID is recorded, Create
// records nothing and returns it with created=false (a retried request),
// whatever its state; x.ID is then ignored. If the recorded one differs in
// Capability or CorrelationID, or in an ApprovalID or ActionDigest both
// give, Create fails with ErrConflict.
func (s *Store) Create(ctx context.Context, x Exchange) (stored Exchange, created bool, err error) {
	if err := ctx.Err(); err != nil {
		return Exchange{}, false, err
	}
	if err := CheckNew(x); err != nil {
		return Exchange{}, false, err
	}
	id := x.ID
	if id == "" {
		id = "exc_" + randomHex()
	}
	err = s.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		stored, created = Exchange{}, false
		old, err := scan(tx.QueryRowContext(ctx, qByKey, x.Sender, x.MessageID))
		switch {
		case err == nil:
			if err := SameRequest(old, x); err != nil {
				return err
			}
			stored = old
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if x.Idempotency != nil {
			prior, found, err := idempotentPrior(ctx, tx, x.Idempotency, s.now())
			if err != nil || found {
				stored = prior
				return err
			}
		}
		now := s.now().UTC()
		state, claimedBy := Received, ""
		if x.State == Executing {
			state, claimedBy = Executing, s.instance
		}
		// The (sender, message id) key was just looked up under the write
		// lock; only the id can clash.
		res, err := tx.ExecContext(ctx, qInsert, id, x.Sender, x.MessageID, x.CorrelationID,
			x.Capability, x.ApprovalID, x.ActionDigest, string(state), claimedBy,
			now.UnixNano(), now.UnixNano(), ToNanos(x.Deadline), x.TraceID, nullBytes(x.Request))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("%w: id %s is in use", ErrConflict, id)
		}
		if k := x.Idempotency; k != nil {
			if _, err := tx.ExecContext(ctx, qIdemPut, k.From, k.To, k.PayloadType, k.Key, k.Fingerprint,
				id, k.ExpiresAt.UnixNano()); err != nil {
				return err
			}
		}
		// What was written, as scan would read it back.
		stored = Exchange{ID: id, Sender: x.Sender, MessageID: x.MessageID, CorrelationID: x.CorrelationID,
			Capability: x.Capability, ApprovalID: x.ApprovalID, ActionDigest: x.ActionDigest, State: state,
			ClaimedBy: claimedBy, CreatedAt: FromNanos(now.UnixNano()), UpdatedAt: FromNanos(now.UnixNano()),
			Deadline: FromNanos(ToNanos(x.Deadline)), TraceID: x.TraceID, Request: cloneRaw(x.Request)}
		created = true
		return nil
	})
	if err != nil {
		return Exchange{}, false, wrap(err)
	}
	return stored, created, nil
}

// CheckNew validates what Create records.
func CheckNew(x Exchange) error {
	if x.ID != "" {
		if err := CheckText("id", x.ID, MaxID, true); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name, v  string
		max      int
		required bool
	}{
		{"sender", x.Sender, MaxText, true},
		{"message id", x.MessageID, MaxText, true},
		{"capability", x.Capability, MaxText, true},
		{"correlation id", x.CorrelationID, MaxText, false},
		{"approval id", x.ApprovalID, MaxText, false},
		{"action digest", x.ActionDigest, MaxText, false},
		{"trace id", x.TraceID, MaxText, false},
	} {
		if err := CheckText(f.name, f.v, f.max, f.required); err != nil {
			return err
		}
	}
	if x.State != "" && x.State != Received && x.State != Executing {
		return fmt.Errorf("%w: an exchange is created in state received or executing, not %q", ErrInvalid, x.State)
	}
	if len(x.Reply) != 0 || x.ReplyStatus != 0 {
		return fmt.Errorf("%w: a new exchange has no reply", ErrInvalid)
	}
	if x.ClaimedBy != "" {
		return fmt.Errorf("%w: a new exchange is not claimed", ErrInvalid)
	}
	if len(x.Decision) != 0 {
		return fmt.Errorf("%w: a new exchange has no decision", ErrInvalid)
	}
	if len(x.Request) != 0 {
		if x.ApprovalID == "" || !json.Valid(x.Request) {
			return fmt.Errorf("%w: an approval request needs an approval id and must be JSON", ErrInvalid)
		}
		if len(x.Request) > MaxRequest {
			return fmt.Errorf("%w: approval request larger than %d bytes", ErrInvalid, MaxRequest)
		}
	}
	return checkIdempotency(x.Idempotency)
}

// SameRequest refuses a retry that is not the recorded request
// (ErrConflict): another capability, correlation id or action digest. The
// id and approval id a retry proposes are the caller's names for a new
// exchange, not part of the request: a retry gets the recorded ones.
func SameRequest(old, x Exchange) error {
	differs := func(a, b string) bool { return a != "" && b != "" && a != b }
	switch {
	case old.Capability != x.Capability:
		return fmt.Errorf("%w: %s/%s was recorded with capability %q", ErrConflict, x.Sender, x.MessageID, old.Capability)
	case old.CorrelationID != x.CorrelationID:
		return fmt.Errorf("%w: %s/%s was recorded with correlation id %q", ErrConflict, x.Sender, x.MessageID, old.CorrelationID)
	case differs(old.ActionDigest, x.ActionDigest):
		return fmt.Errorf("%w: %s/%s was recorded with another action digest", ErrConflict, x.Sender, x.MessageID)
	}
	return nil
}

// Get returns the exchange with the given id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Exchange, error) {
	if err := CheckText("id", id, MaxID, true); err != nil {
		return Exchange{}, err
	}
	var x Exchange
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) (err error) {
		x, err = getTx(ctx, tx, id)
		return err
	})
	return x, wrap(err)
}

// BySender returns the exchange of the request sender sent as messageID,
// or ErrNotFound.
func (s *Store) BySender(ctx context.Context, sender, messageID string) (Exchange, error) {
	if err := CheckText("sender", sender, MaxText, true); err != nil {
		return Exchange{}, err
	}
	if err := CheckText("message id", messageID, MaxText, true); err != nil {
		return Exchange{}, err
	}
	var x Exchange
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) (err error) {
		x, err = scan(tx.QueryRowContext(ctx, qByKey, sender, messageID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s/%s", ErrNotFound, sender, messageID)
		}
		return err
	})
	return x, wrap(err)
}

// Claim moves exchange id to executing if it is in one of the from states
// (each of which must have a transition to executing: received,
// approved), recording this Store's Instance in ClaimedBy, and returns it
// with claimed=true. If it is in another state, nothing changes and Claim
// returns it as it is with claimed=false. Of several concurrent claimers,
// in goroutines, Store handles or processes, exactly one wins; the winner
// alone may run the action.
func (s *Store) Claim(ctx context.Context, id string, from ...State) (Exchange, bool, error) {
	if len(from) == 0 {
		return Exchange{}, false, fmt.Errorf("%w: Claim needs at least one state to claim from", ErrInvalid)
	}
	for _, f := range from {
		if err := CheckState(f); err != nil {
			return Exchange{}, false, err
		}
		if !Legal(f, Executing) {
			return Exchange{}, false, fmt.Errorf("%w: %s -> %s", ErrIllegalTransition, f, Executing)
		}
	}
	return s.change(ctx, id, from, Executing, Change{})
}

// Transition moves exchange id from state from to state to, replacing its
// reply when reply is not empty, if it is in state from; it returns it
// with ok=true. If it is in another state, nothing changes and it is
// returned as it is with ok=false. A transition the state machine lacks
// is ErrIllegalTransition. It is Apply with only a reply.
func (s *Store) Transition(ctx context.Context, id string, from, to State, reply json.RawMessage, status int) (Exchange, bool, error) {
	return s.Apply(ctx, id, from, to, Change{Reply: reply, ReplyStatus: status})
}

// Apply is Transition recording c as well: the approval id and deadline
// when entering pending_approval, the action digest. See Change.
func (s *Store) Apply(ctx context.Context, id string, from, to State, c Change) (Exchange, bool, error) {
	if err := CheckState(from); err != nil {
		return Exchange{}, false, err
	}
	if err := CheckState(to); err != nil {
		return Exchange{}, false, err
	}
	if !Legal(from, to) {
		return Exchange{}, false, fmt.Errorf("%w: %s -> %s", ErrIllegalTransition, from, to)
	}
	return s.change(ctx, id, []State{from}, to, c)
}

// CheckTransition checks a transition's arguments before anything is read
// (what every Backend checks first): the id, the reply, what may be set
// entering to, and what the change queues.
func CheckTransition(id string, to State, c Change) error {
	if err := CheckText("id", id, MaxID, true); err != nil {
		return err
	}
	if err := checkReply(c.Reply, c.ReplyStatus); err != nil {
		return err
	}
	if (to == PendingApproval || to.Final()) && len(c.Reply) == 0 {
		return fmt.Errorf("%w: entering %s needs a reply", ErrInvalid, to)
	}
	if to != PendingApproval && (c.ApprovalID != "" || !c.Deadline.IsZero()) {
		return fmt.Errorf("%w: approval id and deadline are set only entering %s", ErrInvalid, PendingApproval)
	}
	if to.Final() && c.ActionDigest != "" {
		return fmt.Errorf("%w: action digest set entering %s", ErrInvalid, to)
	}
	if err := CheckText("approval id", c.ApprovalID, MaxText, false); err != nil {
		return err
	}
	if err := checkChange(to, c); err != nil {
		return err
	}
	return CheckText("action digest", c.ActionDigest, MaxText, false)
}

// change is Claim and Apply: from is legal towards to.
func (s *Store) change(ctx context.Context, id string, from []State, to State, c Change) (Exchange, bool, error) {
	if err := ctx.Err(); err != nil {
		return Exchange{}, false, err
	}
	if err := CheckTransition(id, to, c); err != nil {
		return Exchange{}, false, err
	}
	var (
		out Exchange
		ok  bool
	)
	err := s.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		out, ok = Exchange{}, false
		cur, err := getTx(ctx, tx, id)
		if err != nil {
			return err
		}
		out = cur
		if !inStates(cur.State, from) {
			return nil
		}
		next, err := Next(cur, to, c)
		if err != nil {
			return err
		}
		if to == Executing {
			next.ClaimedBy = s.instance
		}
		next.UpdatedAt = s.now().UTC()
		res, err := tx.ExecContext(ctx, qUpdate, string(next.State), nullBytes(next.Reply), next.ReplyStatus,
			next.ApprovalID, next.ActionDigest, ToNanos(next.Deadline), next.ClaimedBy,
			next.UpdatedAt.UnixNano(), nullBytes(next.Decision), id, string(cur.State))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// We hold the write lock and just read the row: this
			// cannot happen. Fail closed.
			return errors.Join(fmt.Errorf("exchange %s: update changed %d rows, want 1", id, n), err)
		}
		if err := s.queue(ctx, tx, next, c); err != nil {
			return err
		}
		// What was written, as scan would read it back.
		next.UpdatedAt = FromNanos(next.UpdatedAt.UnixNano())
		next.Idempotency = nil
		next.Reply, next.Decision = cloneRaw(next.Reply), cloneRaw(next.Decision)
		out, ok = next, true
		return nil
	})
	if err != nil {
		return Exchange{}, false, wrap(err)
	}
	return out, ok, nil
}

func inStates(s State, states []State) bool {
	for _, t := range states {
		if s == t {
			return true
		}
	}
	return false
}

// Next returns cur moved to state to with c recorded, checking what the
// target state needs (what every Backend applies under its lock).
func Next(cur Exchange, to State, c Change) (Exchange, error) {
	next := cur
	next.State = to
	if len(c.Reply) != 0 {
		next.Reply, next.ReplyStatus = c.Reply, c.ReplyStatus
	}
	if c.ApprovalID != "" {
		if cur.ApprovalID != "" && cur.ApprovalID != c.ApprovalID {
			return Exchange{}, fmt.Errorf("%w: exchange %s has approval id %q", ErrConflict, cur.ID, cur.ApprovalID)
		}
		next.ApprovalID = c.ApprovalID
	}
	if !c.Deadline.IsZero() {
		next.Deadline = c.Deadline
	}
	if c.ActionDigest != "" {
		if cur.ActionDigest != "" && cur.ActionDigest != c.ActionDigest {
			return Exchange{}, fmt.Errorf("%w: exchange %s has another action digest", ErrConflict, cur.ID)
		}
		next.ActionDigest = c.ActionDigest
	}
	if len(c.Decision) != 0 {
		if cur.State != PendingApproval {
			return Exchange{}, fmt.Errorf("%w: a decision is recorded leaving %s, not %s", ErrInvalid, PendingApproval, cur.State)
		}
		next.Decision = c.Decision
	}
	if (to == PendingApproval || to == Approved) && (next.ApprovalID == "" || next.ActionDigest == "") {
		return Exchange{}, fmt.Errorf("%w: %s needs an approval id and an action digest", ErrInvalid, to)
	}
	return next, nil
}

// Waiting returns the exchanges in any of the given states, oldest
// (first received) first: after a restart, the resumer's work list
// (pending_approval: watch the approval; approved: Claim and run).
func (s *Store) Waiting(ctx context.Context, states ...State) ([]Exchange, error) {
	if len(states) == 0 {
		return nil, fmt.Errorf("%w: Waiting needs at least one state", ErrInvalid)
	}
	args := make([]any, len(states))
	for i, st := range states {
		if err := CheckState(st); err != nil {
			return nil, err
		}
		args[i] = string(st)
	}
	q := "SELECT " + columns + " FROM exchanges WHERE state IN (?" +
		strings.Repeat(", ?", len(states)-1) + ") ORDER BY seq"
	out, err := queryAll(ctx, s, q, args, scan)
	if err != nil {
		return nil, wrap(err)
	}
	return out, nil
}

// queryAll reads every row q returns with scanOne, in one read
// transaction.
func queryAll[T any](ctx context.Context, s *Store, q string, args []any, scanOne func(scanner) (T, error)) ([]T, error) {
	var out []T
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = CollectRows(rows, func() (T, error) { return scanOne(rows) })
		return err
	})
	return out, err
}

// Interrupted returns the exchanges in executing, oldest first. After a
// crash their outcome is unknown: the gateway must answer them failed
// (ASC RESULT_STATE_UNKNOWN, Transition executing -> failed), never run
// them again. An exchange another live process is running is listed too:
// check ClaimedBy.
func (s *Store) Interrupted(ctx context.Context) ([]Exchange, error) {
	return s.Waiting(ctx, Executing)
}

// NewID returns a fresh exchange id ("exc_" + 32 hex digits), for callers
// that must know the id before Create (to link it to an approval first).
func NewID() string { return "exc_" + randomHex() }

// nullBytes is b for SQL, NULL when empty.
func nullBytes(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// cloneRaw copies b (nil stays nil), so that what a Store returns shares
// nothing with what its caller passed in.
func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// Rows is what CollectRows reads: database/sql's and pgx's result sets.
type Rows interface {
	Next() bool
	Err() error
}

// CollectRows reads every row of rows with scan, for the stores' list
// queries.
func CollectRows[T any](rows Rows, scan func() (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
