package exchange

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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
	ErrClosed = errors.New("exchange: closed")
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

// NewID returns a fresh exchange id ("exc_" + 32 hex digits), for callers
// that must know the id before Create (to link it to an approval first).
func NewID() string { return "exc_" + randomHex() }
