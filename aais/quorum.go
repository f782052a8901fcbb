package aais

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// QuorumExtension is Custos's extension for M-of-N approvals (AAIS itself
// leaves quorum to the runtime, spec §4). On a request it is the
// requirement, a Quorum:
//
//	{"approvals_required": 2, "from_roles": ["finance", "security"], "deny": "any"}
//
// On the approval.activity event recorded for each partial vote, and on
// the receipt that resolves the request, it is the Tally: the requirement
// and every vote counted so far.
const QuorumExtension = "custos.dev/quorum"

// QuorumStage is the activity stage of a recorded partial vote.
const QuorumStage = "quorum"

// MaxApprovalsRequired caps Quorum.ApprovalsRequired.
const MaxApprovalsRequired = 20

// Deny rules of a Quorum.
const (
	// DenyAny: the first denial by an eligible reviewer resolves the
	// request denied (the default).
	DenyAny = "any"
	// DenyQuorum: denials are votes too; the request resolves denied once
	// as many distinct reviewers denied it as approvals are required.
	DenyQuorum = "quorum"
)

// Errors of quorum decisions.
var (
	// ErrAlreadyVoted: the reviewer already voted on this request (with
	// another decision); a reviewer counts once.
	ErrAlreadyVoted = errors.New("aais: this reviewer already voted on the request")
	// ErrQuorumUnsupported: the store keeps no partial votes (it is not a
	// VoteStore), so a request needing several approvals cannot be kept.
	ErrQuorumUnsupported = errors.New("aais: the store cannot keep partial approvals")
)

// Quorum is what a request needs to be approved: ApprovalsRequired
// distinct reviewers approving, among them, for each of FromRoles, a
// different reviewer holding that role.
type Quorum struct {
	ApprovalsRequired int      `json:"approvals_required"`
	FromRoles         []string `json:"from_roles,omitempty"`
	Deny              string   `json:"deny,omitempty"`
}

// Multi reports whether q needs more than one approval (a quorum with
// ApprovalsRequired <= 1 and no roles is an ordinary request).
func (q Quorum) Multi() bool { return q.ApprovalsRequired > 1 || len(q.FromRoles) > 0 }

// Check reports whether q is a quorum an authority can enforce.
func (q Quorum) Check() error {
	switch {
	case q.ApprovalsRequired < 1 || q.ApprovalsRequired > MaxApprovalsRequired:
		return fmt.Errorf("%w: approvals_required %d is not between 1 and %d", ErrInvalid, q.ApprovalsRequired, MaxApprovalsRequired)
	case len(q.FromRoles) > q.ApprovalsRequired:
		return fmt.Errorf("%w: %d roles need %d distinct approvers, more than approvals_required %d", ErrInvalid, len(q.FromRoles), len(q.FromRoles), q.ApprovalsRequired)
	case q.Deny != "" && q.Deny != DenyAny && q.Deny != DenyQuorum:
		return fmt.Errorf("%w: deny %q is not %q or %q", ErrInvalid, q.Deny, DenyAny, DenyQuorum)
	}
	for i, r := range q.FromRoles {
		if r == "" || strings.ContainsAny(r, " \t\r\n") || len(r) > 200 {
			return fmt.Errorf("%w: from_roles[%d] %q is not a role name", ErrInvalid, i, r)
		}
		if slices.Contains(q.FromRoles[:i], r) {
			return fmt.Errorf("%w: from_roles names %q twice", ErrInvalid, r)
		}
	}
	return nil
}

// Extension returns q as the value of a request's QuorumExtension.
func (q Quorum) Extension() (json.RawMessage, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	return json.Marshal(q)
}

// QuorumOf returns the quorum req's QuorumExtension asks for; ok is false
// when it carries none (one approval decides). A malformed extension is
// ErrInvalid: the authority refuses such a request rather than guess.
func QuorumOf(req *Request) (q Quorum, ok bool, err error) {
	if req == nil {
		return Quorum{}, false, nil
	}
	raw, present := req.Extensions[QuorumExtension]
	if !present {
		return Quorum{}, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		return Quorum{}, false, fmt.Errorf("%w: extension %s: %w", ErrInvalid, QuorumExtension, err)
	}
	if dec.More() {
		return Quorum{}, false, fmt.Errorf("%w: extension %s: trailing data", ErrInvalid, QuorumExtension)
	}
	if err := q.Check(); err != nil {
		return Quorum{}, false, fmt.Errorf("extension %s: %w", QuorumExtension, err)
	}
	return q, true, nil
}

// Vote is one reviewer's counted decision on a quorum request.
type Vote struct {
	// Actor is the reviewer, as their authenticated channel established.
	Actor Actor `json:"actor"`
	// Decision is approve or deny.
	Decision Verdict `json:"decision"`
	// DecisionID and DecidedAt come from the decision.
	DecisionID string    `json:"decision_id"`
	DecidedAt  Timestamp `json:"decided_at"`
	// Roles are the reviewer's roles when they voted (from the caller's
	// policy); they fill the quorum's from_roles.
	Roles []string `json:"roles,omitempty"`
	// Justification is the reviewer's justification, when given.
	Justification string `json:"justification,omitempty"`
}

// Tally is the value of QuorumExtension on a partial vote's activity and
// on a quorum request's receipt: the requirement and the votes counted.
type Tally struct {
	Quorum
	Approvals []Vote `json:"approvals"`
	Denials   []Vote `json:"denials,omitempty"`
}

// TallyOf returns the tally a message (a partial vote's approval.activity,
// or a quorum request's receipt) carries in its QuorumExtension.
func TallyOf(m *Message) (Tally, bool) {
	if m == nil {
		return Tally{}, false
	}
	var raw json.RawMessage
	switch {
	case m.Type == TypeActivity:
		raw = m.Extensions[QuorumExtension]
	case m.Type == TypeResolved && m.Resolution != nil:
		raw = m.Resolution.Extensions[QuorumExtension]
	}
	var t Tally
	if raw == nil || json.Unmarshal(raw, &t) != nil {
		return Tally{}, false
	}
	return t, true
}

// Partial reports whether m is the answer to a vote that did not resolve
// its request yet (a recorded approval.activity carrying a Tally).
func Partial(m *Message) bool {
	if m == nil || m.Type != TypeActivity {
		return false
	}
	_, ok := m.Extensions[QuorumExtension]
	return ok
}

// Missing says what the approvals of t still lack: how many more
// approvers, and which roles no distinct approver fills yet.
func (t Tally) Missing() (approvers int, roles []string) {
	n := len(distinct(t.Approvals))
	approvers = max(t.ApprovalsRequired-n, 0)
	_, roles = assignRoles(t.FromRoles, distinct(t.Approvals))
	return max(approvers, len(roles)), roles
}

// distinct returns votes with each actor's first vote only.
func distinct(votes []Vote) []Vote {
	seen := map[string]bool{}
	var out []Vote
	for _, v := range votes {
		if v.Actor.ID == "" || seen[v.Actor.ID] {
			continue
		}
		seen[v.Actor.ID] = true
		out = append(out, v)
	}
	return out
}

// assignRoles matches each role to a different approver holding it
// (bipartite matching by augmenting paths: a few roles, a few approvers).
// It reports whether every role got one, and the roles left unfilled by a
// maximum matching.
func assignRoles(roles []string, approvers []Vote) (bool, []string) {
	owner := make([]int, len(approvers)) // approver -> role index + 1
	var try func(r int, seen []bool) bool
	try = func(r int, seen []bool) bool {
		for a, v := range approvers {
			if seen[a] || !slices.Contains(v.Roles, roles[r]) {
				continue
			}
			seen[a] = true
			if owner[a] == 0 || try(owner[a]-1, seen) {
				owner[a] = r + 1
				return true
			}
		}
		return false
	}
	var missing []string
	for r := range roles {
		if !try(r, make([]bool, len(approvers))) {
			missing = append(missing, roles[r])
		}
	}
	return len(missing) == 0, missing
}

// judgeQuorum is the pure rule of a quorum: the outcome the votes reach,
// done false while they reach none. Each reviewer counts once (their first
// vote); denials decide only under DenyQuorum here (under DenyAny the
// first denial resolves the request before it is counted).
func judgeQuorum(q Quorum, votes []Vote) (Outcome, bool) {
	var approvals, denials []Vote
	for _, v := range distinct(votes) {
		switch v.Decision {
		case Approve:
			approvals = append(approvals, v)
		case Deny:
			denials = append(denials, v)
		}
	}
	if q.Deny == DenyQuorum && len(denials) >= q.ApprovalsRequired {
		return OutcomeDenied, true
	}
	if q.Deny != DenyQuorum && len(denials) > 0 {
		return OutcomeDenied, true
	}
	if ok, _ := assignRoles(q.FromRoles, approvals); ok && len(approvals) >= q.ApprovalsRequired {
		return OutcomeApproved, true
	}
	return "", false
}

// StoredVote is a vote as a VoteStore keeps it.
type StoredVote struct {
	Vote Vote
	// Fingerprint is the fingerprint of the decision that cast it: the
	// same decision again is a replay.
	Fingerprint string
	// Event is the approval.activity event recorded with it; nil for the
	// vote that resolved the request (its receipt is the resolution).
	Event *Message
}

// VoteRecord is one vote to record.
type VoteRecord struct {
	RequestID string
	Vote      StoredVote
	// Seen is how many votes the caller read before it built Vote.Event or
	// Resolution: the store records nothing, and answers Changed, when
	// the request has another number of votes by then.
	Seen int
	// Resolution, when set, resolves the request in the same write (the
	// vote completed the quorum); Vote.Event is then nil. Otherwise
	// Vote.Event is the approval.activity to append to the log.
	Resolution *ResolutionRecord
}

// VoteResult is what RecordVote did.
type VoteResult struct {
	// Recorded is true when the vote was written; Event is then its
	// activity or its receipt as recorded, sequence included.
	Recorded bool
	Event    *Message
	// Resolution is the resolution already recorded when the request was
	// no longer pending (nothing was written).
	Resolution *ResolutionRecord
	// Changed: other votes were recorded since the caller read Seen of
	// them; nothing was written; read again.
	Changed bool
}

// VoteStore is a Store that keeps partial votes, for requests that need
// several approvals (QuorumExtension). sqlitestore, pgstore and memstore
// are VoteStores.
type VoteStore interface {
	Store
	// Votes returns the votes recorded for a request, in the order they
	// were recorded (ErrUnknownRequest for an unknown request).
	Votes(ctx context.Context, requestID string) ([]StoredVote, error)
	// RecordVote atomically, when the request is pending and has exactly
	// rec.Seen votes: records the vote and appends its event (its
	// activity, or with rec.Resolution the resolution as ResolveIfPending
	// would), in one write. A reviewer has at most one vote per request:
	// a second is ErrAlreadyVoted and nothing is written.
	RecordVote(ctx context.Context, rec VoteRecord) (VoteResult, error)
}

// CheckVoteRecord reports whether rec is a vote a VoteStore may write.
func CheckVoteRecord(rec VoteRecord) error {
	v := rec.Vote
	switch {
	case rec.RequestID == "":
		return fmt.Errorf("%w: vote without a request", ErrInvalid)
	case v.Vote.Actor.ID == "":
		return fmt.Errorf("%w: vote without an actor", ErrInvalid)
	case v.Vote.Decision != Approve && v.Vote.Decision != Deny:
		return fmt.Errorf("%w: a vote approves or denies", ErrInvalid)
	case v.Fingerprint == "":
		return fmt.Errorf("%w: vote without a decision fingerprint", ErrInvalid)
	case rec.Seen < 0:
		return fmt.Errorf("%w: negative vote count", ErrInvalid)
	}
	if rec.Resolution != nil {
		if v.Event != nil {
			return fmt.Errorf("%w: a resolving vote records its receipt, not an activity", ErrInvalid)
		}
		if err := CheckResolutionRecord(*rec.Resolution); err != nil {
			return err
		}
		if rec.Resolution.Event.Resolution.RequestID != rec.RequestID || rec.Resolution.Rule != nil || rec.Resolution.ByRule != "" {
			return fmt.Errorf("%w: the vote's resolution is not a plain resolution of its request", ErrInvalid)
		}
		return nil
	}
	if e := v.Event; e == nil || e.Type != TypeActivity || e.Activity == nil || e.Activity.RequestID != rec.RequestID || !Partial(e) {
		return fmt.Errorf("%w: a partial vote records an approval.activity with a tally for its request", ErrInvalid)
	}
	return nil
}

// MarshalVote and UnmarshalVote are how durable stores keep a vote.
func MarshalVote(v Vote) ([]byte, error) { return json.Marshal(v) }

// UnmarshalVote reads a vote MarshalVote wrote, refusing a damaged one.
func UnmarshalVote(b []byte) (Vote, error) {
	var v Vote
	if err := json.Unmarshal(b, &v); err != nil || v.Actor.ID == "" || (v.Decision != Approve && v.Decision != Deny) {
		return Vote{}, fmt.Errorf("%w: stored vote is damaged", ErrInvalid)
	}
	return v, nil
}

// DecodeStoredVote is a vote as a durable store keeps it: the vote
// (MarshalVote), the fingerprint of the decision that cast it and its
// approval.activity event (nil for the vote that resolved the request).
func DecodeStoredVote(vote []byte, fingerprint string, event []byte) (StoredVote, error) {
	v, err := UnmarshalVote(vote)
	if err != nil {
		return StoredVote{}, err
	}
	sv := StoredVote{Vote: v, Fingerprint: fingerprint}
	if event != nil {
		if sv.Event, err = Parse(event); err != nil {
			return StoredVote{}, fmt.Errorf("stored vote event: %w", err)
		}
	}
	return sv, nil
}

// maxVoteAttempts bounds how often Decide reads the votes again after
// other votes raced it: each retry means another reviewer's vote was
// recorded, and a request has at most a few reviewers.
const maxVoteAttempts = 64

// votes reads a quorum request's votes from s.
func (a *Authority) voteStore() (VoteStore, error) {
	vs, ok := a.store.(VoteStore)
	if !ok {
		return nil, ErrQuorumUnsupported
	}
	return vs, nil
}

// decideQuorum is Decide for a pending request that needs a quorum, once
// judge has accepted the decision as an approval or a denial. The vote is
// counted, and the request resolves only when the votes reach the
// quorum's outcome (or at once on a denial under DenyAny).
func (a *Authority) decideQuorum(ctx context.Context, req *Request, q Quorum, dec *Decision, fp string, roles []string, now time.Time) (*Message, error) {
	vs, err := a.voteStore()
	if err != nil {
		return nil, err
	}
	if dec.Scope != ScopeOnce {
		return nil, fmt.Errorf("%w: a request needing %d approvals is decided once, not for a %s", ErrInvalid, q.ApprovalsRequired, dec.Scope)
	}
	vote := Vote{Actor: dec.Actor, Decision: dec.Decision, DecisionID: dec.ID, DecidedAt: dec.DecidedAt,
		Roles: slices.Clone(roles), Justification: Justification(dec)}
	slices.Sort(vote.Roles)
	vote.Roles = slices.Compact(vote.Roles)
	for range maxVoteAttempts {
		stored, err := vs.Votes(ctx, req.ID)
		if err != nil {
			return nil, err
		}
		votes := make([]Vote, 0, len(stored)+1)
		for _, s := range stored {
			if s.Vote.Actor.ID == vote.Actor.ID {
				if s.Fingerprint == fp && s.Event != nil {
					return s.Event, nil // a replay of a partial vote
				}
				return nil, fmt.Errorf("%w: %s on %s", ErrAlreadyVoted, vote.Actor.ID, req.ID)
			}
			votes = append(votes, s.Vote)
		}
		votes = append(votes, vote)
		tally := Tally{Quorum: q}
		for _, v := range votes {
			if v.Decision == Approve {
				tally.Approvals = append(tally.Approvals, v)
			} else {
				tally.Denials = append(tally.Denials, v)
			}
		}
		if tally.Approvals == nil {
			tally.Approvals = []Vote{}
		}
		ext, err := json.Marshal(tally)
		if err != nil {
			return nil, err
		}
		rec := VoteRecord{RequestID: req.ID, Vote: StoredVote{Vote: vote, Fingerprint: fp}, Seen: len(stored)}
		if outcome, done := judgeQuorum(q, votes); done {
			msg := fmt.Sprintf("Denied by %s.", actorList(tally.Denials))
			if outcome == OutcomeApproved {
				msg = fmt.Sprintf("Approved by %d reviewers: %s.", len(tally.Approvals), actorList(tally.Approvals))
			}
			res, err := a.resolutionWith(req, dec, outcome, now, msg, Extensions{QuorumExtension: ext})
			if err != nil {
				return nil, err
			}
			res.DecisionFingerprint = fp
			rec.Resolution = &res
		} else {
			ev, err := a.partialEvent(req, tally, vote, ext, now)
			if err != nil {
				return nil, err
			}
			rec.Vote.Event = ev
		}
		out, err := vs.RecordVote(ctx, rec)
		if err != nil {
			return nil, err
		}
		switch {
		case out.Recorded:
			return out.Event, nil
		case out.Resolution != nil:
			return a.answerResolved(req, *out.Resolution, dec, fp, now)
		}
		// Changed: another vote came first; count again.
	}
	return nil, fmt.Errorf("%w: request %s: votes kept changing", ErrConflict, req.ID)
}

// partialEvent builds the approval.activity a vote that does not resolve
// its request records: "1 of 2 approvals (alice); waiting for 1 more".
func (a *Authority) partialEvent(req *Request, t Tally, v Vote, ext json.RawMessage, now time.Time) (*Message, error) {
	need, roles := t.Missing()
	var msg string
	if v.Decision == Approve {
		msg = fmt.Sprintf("Approval %d of %d by %s; waiting for %d more", len(t.Approvals), t.ApprovalsRequired, v.Actor.ID, need)
	} else {
		msg = fmt.Sprintf("Denial %d of %d by %s (approvals so far: %d of %d)", len(t.Denials), t.ApprovalsRequired, v.Actor.ID, len(t.Approvals), t.ApprovalsRequired)
	}
	if len(roles) > 0 && v.Decision == Approve {
		msg += " (roles still needed: " + strings.Join(roles, ", ") + ")"
	}
	return a.opts.NewMessage(Header{OccurredAt: now, Stream: a.stream, Extensions: Extensions{QuorumExtension: ext}},
		&Activity{RequestID: req.ID, Message: msg + ".", Stage: QuorumStage})
}

func actorList(votes []Vote) string {
	ids := make([]string, len(votes))
	for i, v := range votes {
		ids[i] = v.Actor.ID
	}
	return strings.Join(ids, ", ")
}

// denyQuorum resolves a quorum request denied by one reviewer (DenyAny):
// the receipt's QuorumExtension lists the approvals recorded before it.
func (a *Authority) denyQuorum(ctx context.Context, req *Request, q Quorum, dec *Decision, fp string, now time.Time) (*Message, error) {
	tally := Tally{Quorum: q, Approvals: []Vote{}}
	if vs, ok := a.store.(VoteStore); ok {
		stored, err := vs.Votes(ctx, req.ID)
		if err != nil {
			return nil, err
		}
		for _, s := range stored {
			if s.Vote.Decision == Approve {
				tally.Approvals = append(tally.Approvals, s.Vote)
			}
		}
	}
	tally.Denials = []Vote{{Actor: dec.Actor, Decision: Deny, DecisionID: dec.ID, DecidedAt: dec.DecidedAt, Justification: Justification(dec)}}
	ext, err := json.Marshal(tally)
	if err != nil {
		return nil, err
	}
	rec, err := a.resolutionWith(req, dec, OutcomeDenied, now, "", Extensions{QuorumExtension: ext})
	if err != nil {
		return nil, err
	}
	rec.DecisionFingerprint = fp
	stored, resolved, err := a.store.ResolveIfPending(ctx, rec)
	if err != nil {
		return nil, err
	}
	if resolved {
		return receiptOf(stored)
	}
	return a.answerResolved(req, stored, dec, fp, now)
}

// tallyOf reads the votes of a quorum request into its Tally.
func tallyOf(ctx context.Context, vs VoteStore, id string, q Quorum) (Tally, error) {
	stored, err := vs.Votes(ctx, id)
	if err != nil {
		return Tally{}, err
	}
	t := Tally{Quorum: q, Approvals: []Vote{}}
	for _, s := range stored {
		if s.Vote.Decision == Approve {
			t.Approvals = append(t.Approvals, s.Vote)
		} else {
			t.Denials = append(t.Denials, s.Vote)
		}
	}
	return t, nil
}

// Tally returns the votes counted so far on a request that needs a
// quorum; ok is false for a request that needs one approval.
func (a *Authority) Tally(ctx context.Context, id string) (t Tally, ok bool, err error) {
	st, err := a.store.RequestState(ctx, id)
	if err != nil {
		return Tally{}, false, err
	}
	req, err := requestOf(st.Request)
	if err != nil {
		return Tally{}, false, err
	}
	q, multi, err := QuorumOf(req)
	if err != nil || !multi {
		return Tally{}, false, err
	}
	vs, err := a.voteStore()
	if err != nil {
		return Tally{}, false, err
	}
	t, err = tallyOf(ctx, vs, id, q)
	return t, err == nil, err
}

// SnapshotTallies returns the tallies a snapshot's QuorumExtension
// carries, by request id (nil when none).
func SnapshotTallies(m *Message) map[string]Tally {
	if m == nil || m.Type != TypeSnapshot {
		return nil
	}
	var out map[string]Tally
	if json.Unmarshal(m.Extensions[QuorumExtension], &out) != nil {
		return nil
	}
	return out
}
