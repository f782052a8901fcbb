package assets

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/arsia"
)

// ValidateEscrowConditions checks an EscrowConditions object (§4.1)
// against its schema and checks that timeout_at is strictly later than
// envelopeTS, the ts of the enclosing AssetTransferRequest. An empty or
// malformed envelopeTS is itself a problem: the timeout cannot be
// verified.
func ValidateEscrowConditions(cond map[string]any, envelopeTS string) []*Error {
	if cond == nil {
		return []*Error{{Code: arsia.CodeInvalidRequest, Message: "escrow_conditions must be a JSON object", Err: ErrEscrow}}
	}
	p := schemaProblems(cond, schemaEscrow, nil)
	if e := checkEscrowTimeout(cond, envelopeTS); e != nil {
		p = append(p, e)
	}
	return p
}

// checkEscrowTimeout returns the problem with timeout_at versus the
// envelope ts, or nil. A missing timeout_at is the schema's to report.
func checkEscrowTimeout(cond map[string]any, envelopeTS string) *Error {
	raw, present := cond["timeout_at"]
	if !present {
		return nil
	}
	ts, err := arsia.ParseTimestamp(envelopeTS)
	if err != nil {
		return &Error{Code: arsia.CodeInvalidRequest, Field: "/timeout_at", Err: ErrEscrow,
			Message: "timeout_at cannot be checked: envelope.ts is missing or malformed; it must be later than envelope.ts"}
	}
	s, _ := raw.(string)
	timeout, err := arsia.ParseTimestamp(s)
	if err != nil {
		return nil // the schema reports the format
	}
	if !timeout.After(ts) {
		return &Error{Code: arsia.CodeInvalidRequest, Field: "/timeout_at", Err: ErrEscrow,
			Message: fmt.Sprintf("timeout_at %s must be later than envelope.ts %s", s, envelopeTS)}
	}
	return nil
}

// EscrowState is a state of the escrow lifecycle (§4.2).
type EscrowState string

// Escrow states. ESCROWED is the only initial state; RELEASED and
// RETURNED are terminal. An escrow cancelled by its payer (§4.2.4) ends
// in RETURNED.
const (
	Escrowed EscrowState = "ESCROWED"
	Released EscrowState = "RELEASED"
	Returned EscrowState = "RETURNED"
	Disputed EscrowState = "DISPUTED"
)

// escrowTransitions is the lifecycle: the release trigger, the timeout (or
// the payer's cancellation) and a dispute leave ESCROWED; the arbitration
// agent resolves a dispute by sending the release trigger (RELEASED) or an
// escrow-cancel (RETURNED).
var escrowTransitions = map[EscrowState][]EscrowState{
	Escrowed: {Released, Returned, Disputed},
	Disputed: {Released, Returned},
	Released: nil,
	Returned: nil,
}

// EscrowStates returns the four states.
func EscrowStates() []EscrowState { return []EscrowState{Escrowed, Released, Returned, Disputed} }

// Valid reports whether s is one of the four escrow states (exact,
// uppercase).
func (s EscrowState) Valid() bool {
	_, ok := escrowTransitions[s]
	return ok
}

// Terminal reports whether s is RELEASED or RETURNED.
func (s EscrowState) Terminal() bool { return s.Valid() && len(escrowTransitions[s]) == 0 }

// CanEscrowTransition reports whether the lifecycle allows from → to.
// Unknown states, self-transitions and anything leaving a terminal state
// are refused.
func CanEscrowTransition(from, to EscrowState) bool {
	return slices.Contains(escrowTransitions[from], to)
}

// EscrowTransition is CanEscrowTransition as an error (wrapping
// ErrEscrowTransition, code conflict) for a refused transition.
func EscrowTransition(from, to EscrowState) error {
	if e := escrowTransitionError(from, to); e != nil {
		return e
	}
	return nil
}

func escrowTransitionError(from, to EscrowState) *Error {
	if CanEscrowTransition(from, to) {
		return nil
	}
	why := "not an allowed transition"
	switch {
	case !from.Valid() || !to.Valid():
		why = "unknown escrow state"
	case from.Terminal():
		why = string(from) + " is terminal"
	}
	return &Error{Code: arsia.CodeConflict, Err: ErrEscrowTransition,
		Message: fmt.Sprintf("escrow transition %s -> %s refused: %s", from, to, why)}
}

// ValidateEscrowDispute checks the payload.args of an escrow-dispute
// message (§4.2.3): payment_reference (1-128 characters), dispute_reason
// (1-512) and disputed_by (an agent identifier) are required; no other
// member is checked. Who may dispute is AuthorizeEscrowDispute's question.
func ValidateEscrowDispute(args map[string]any) []*Error {
	var p problems
	p.requireString(args, "payment_reference", 128)
	p.requireString(args, "dispute_reason", 512)
	if p.requireString(args, "disputed_by", 256) && !arsia.ValidAgentID(args["disputed_by"].(string)) {
		p.invalid("/disputed_by", ErrEscrow, "disputed_by is not a valid agent identifier")
	}
	return p
}

// AuthorizeEscrowDispute checks that the sender of a dispute is a party to
// the escrow (its from_agent or to_agent, given as parties) and that
// args.disputed_by names the sender. Anything else, including an empty
// party list, is refused with code forbidden (§4.2.3).
func AuthorizeEscrowDispute(args map[string]any, sender string, parties []string) *Error {
	disputedBy, _ := args["disputed_by"].(string)
	switch {
	case !slices.ContainsFunc(parties, func(p string) bool { return arsia.SameAgent(p, sender) }):
		return forbidden("/disputed_by", "dispute refused: the sender is not a party to the escrow",
			map[string]any{"reason": "sender is not a party to the escrow"})
	case disputedBy != sender:
		return forbidden("/disputed_by", "dispute refused: disputed_by does not name the sender",
			map[string]any{"reason": "disputed_by does not name the sender"})
	}
	return nil
}

// ValidateEscrowCancel checks the payload.args of an escrow-cancel message
// (§4.2.4): payment_reference (1-128 characters) is required and
// cancellation_reason, when present, is a string of 1-512 characters.
// Who may cancel is AuthorizeEscrowCancel's question.
func ValidateEscrowCancel(args map[string]any) []*Error {
	var p problems
	p.requireString(args, "payment_reference", 128)
	if _, ok := args["cancellation_reason"]; ok {
		p.requireString(args, "cancellation_reason", 512)
	}
	return p
}

// AuthorizeEscrowCancel checks that the sender of an escrow-cancel is the
// escrow's from_agent, the payer who created it; anyone else is refused
// with code forbidden (§4.2.4).
func AuthorizeEscrowCancel(sender, fromAgent string) *Error {
	if !arsia.SameAgent(sender, fromAgent) {
		return forbidden("", "escrow cancellation refused: only the from_agent that created the escrow may cancel it",
			map[string]any{"reason": "sender is not the escrow's from_agent"})
	}
	return nil
}

// EscrowRelease describes a message that claims to release an escrow.
type EscrowRelease struct {
	// Sender is the message's from.
	Sender string
	// PayloadType is the message's payload.type.
	PayloadType string
	// State is the escrow's current state.
	State EscrowState
	// Now is the time of the check.
	Now time.Time
}

// AuthorizeEscrowRelease applies the release checks of §4.2.1 that do not
// need the signature (which the caller verifies): the sender is the
// release_agent (else forbidden), payload.type is the release_trigger, the
// escrow can still move to RELEASED, and Now is before timeout_at.
// conditions is the escrow's EscrowConditions object.
func AuthorizeEscrowRelease(conditions map[string]any, r EscrowRelease) []*Error {
	var p problems
	agent, _ := conditions["release_agent"].(string)
	trigger, _ := conditions["release_trigger"].(string)
	if !arsia.SameAgent(r.Sender, agent) {
		p = append(p, forbidden("", "escrow release refused: only the release_agent may release the escrow",
			map[string]any{"reason": "sender is not the release_agent"}))
	}
	if trigger == "" || r.PayloadType != trigger {
		p.invalid("/payload/type", ErrEscrow, "escrow release refused: payload.type is not the release_trigger")
	}
	if e := escrowTransitionError(r.State, Released); e != nil {
		p = append(p, e)
	}
	timeout, ok := timeMember(conditions, "timeout_at")
	switch {
	case r.Now.IsZero():
		p.invalid("", ErrNoClock, "escrow release cannot be checked without the current time")
	case !ok:
		p.invalid("/timeout_at", ErrEscrow, "escrow conditions have no valid timeout_at")
	case !r.Now.Before(timeout):
		p.add(arsia.CodeConflict, "/timeout_at", ErrEscrow, "escrow release refused: timeout_at has been reached")
	}
	return p
}

// forbidden builds a forbidden *Error; details are required on the wire.
func forbidden(field, msg string, details map[string]any) *Error {
	return &Error{Code: arsia.CodeForbidden, Field: field, Message: msg, Details: details, Err: ErrForbidden}
}

// requireString records a problem unless obj[key] is a string of 1..max
// characters; it reports whether the member is fine.
func (p *problems) requireString(obj map[string]any, key string, maxLen int) bool {
	v, present := obj[key]
	s, isString := v.(string)
	switch {
	case !present:
		p.invalid("", ErrSchema, fmt.Sprintf("'%s' is a required property", key))
	case !isString:
		p.invalid("/"+key, ErrSchema, fmt.Sprintf("%s must be a string", key))
	case s == "":
		p.invalid("/"+key, ErrSchema, fmt.Sprintf("%s must not be empty", key))
	case utf8.RuneCountInString(s) > maxLen:
		p.invalid("/"+key, ErrSchema, fmt.Sprintf("%s is longer than %d characters", key, maxLen))
	default:
		return true
	}
	return false
}
