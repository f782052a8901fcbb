package aais

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/jcs"
)

// Supersession: "edit, then approve".
//
// AAIS 1.0 has no approve-with-edits: a decision approves exactly the
// action it names by digest. A reviewer who wants different arguments
// proposes them instead, and Supersede turns the proposal into two
// ordinary AAIS events:
//
//   - a new request (approval.requested): the original with
//     action.arguments replaced, a new action_digest, a new id, its own
//     decision to come, and SupersedesExtension naming the original and
//     the proposer;
//   - the original's receipt (approval.resolved, outcome cancelled) with
//     SupersededByExtension naming the new request.
//
// Peers that know nothing of the extensions see a cancelled request and a
// new pending one, which is exactly what happened. A runtime waiting on
// the original follows SupersededByExtension (Authority.Chain) and runs
// the edited action once the last request of the chain is approved.
//
// What the new request keeps: kind, name, summary, resource,
// working_directory, effects and presentation (the action minus its
// arguments), the origin, the risk, the choices (an action_digest scope
// constraint that pinned the original action is moved to the new digest;
// other constraints are kept as they are and may simply not match the
// edited action), expires_at (an edit does not extend the time the
// requesting process waits) and every extension of the original. It gets
// a fresh created_at and the original's owner process (the one that will
// run it). Remembered rules never approve a superseding request on
// creation: an edit always needs a decision.
//
// The Store interface has no write that creates one request and resolves
// another, so Supersede writes the new request first and then cancels the
// original. A crash (or a lost race) between the two leaves a new request
// whose original is still pending: an orphan. Readers tolerate it:
// Chain never reaches it (the original has no superseded_by receipt),
// CheckSupersession reports it (ErrSupersessionIncomplete) so that a
// presenter refuses to approve it, the next Supersede of the same original
// that succeeds withdraws it (cancelled), and otherwise it expires with
// the original's expires_at. Concurrent edits of one original race on the
// second write: the first to cancel the original wins, and each loser
// withdraws the request it created and returns ErrNotPending (as when a
// decision resolved the original first).

// SupersedesExtension is the request extension of a request created by
// Supersede: a SupersedesRef.
const SupersedesExtension = "custos.dev/supersedes"

// SupersededByExtension is the receipt extension of a request cancelled by
// Supersede: a SupersededByRef.
const SupersededByExtension = "custos.dev/superseded_by"

// MaxSupersessions caps the edits of one original request (the length of
// a chain).
const MaxSupersessions = 20

// Errors of Supersede and CheckSupersession.
var (
	// ErrNotPending: the request is already resolved, or past its
	// expires_at; it can no longer be edited.
	ErrNotPending = errors.New("aais: the request is no longer pending")
	// ErrSupersessionIncomplete: the request supersedes a request that is
	// still pending (Supersede stopped between its two writes); it must
	// not be approved.
	ErrSupersessionIncomplete = errors.New("aais: the edit that created this request did not complete")
)

// SupersedesRef is the value of SupersedesExtension.
type SupersedesRef struct {
	// RequestID is the request this one replaces.
	RequestID string `json:"request_id"`
	// RootRequestID is the first request of the chain (RequestID for a
	// first edit).
	RootRequestID string `json:"root_request_id"`
	// ProposedBy is who proposed the edited arguments, as the
	// authenticated channel established them.
	ProposedBy Actor `json:"proposed_by"`
	// Justification is the proposer's reason ("" when none).
	Justification string `json:"justification,omitempty"`
	// EarlierProposers are the ids of the proposers of the earlier edits
	// of the chain, oldest first.
	EarlierProposers []string `json:"earlier_proposers,omitempty"`
}

// Proposers returns the ids of every proposer of the chain up to this
// request: EarlierProposers and ProposedBy.
func (s SupersedesRef) Proposers() []string {
	return append(slices.Clone(s.EarlierProposers), s.ProposedBy.ID)
}

// SupersededByRef is the value of SupersededByExtension.
type SupersededByRef struct {
	// RequestID is the request that replaces this one.
	RequestID string `json:"request_id"`
	// Actor proposed the edit; Justification is their reason.
	Actor         Actor  `json:"actor"`
	Justification string `json:"justification,omitempty"`
}

// Supersedes returns the SupersedesExtension of req; ok is false when it
// has none or it is malformed.
func Supersedes(req *Request) (ref SupersedesRef, ok bool) {
	if req == nil {
		return SupersedesRef{}, false
	}
	raw, found := req.Extensions[SupersedesExtension]
	if !found || json.Unmarshal(raw, &ref) != nil || ref.RequestID == "" || ref.ProposedBy.ID == "" {
		return SupersedesRef{}, false
	}
	return ref, true
}

// SupersededBy returns the SupersededByExtension of a receipt; ok is false
// when it has none, it is malformed, or the receipt is not a cancellation.
func SupersededBy(res *Resolution) (ref SupersededByRef, ok bool) {
	if res == nil || res.Outcome != OutcomeCancelled {
		return SupersededByRef{}, false
	}
	raw, found := res.Extensions[SupersededByExtension]
	if !found || json.Unmarshal(raw, &ref) != nil || ref.RequestID == "" {
		return SupersededByRef{}, false
	}
	return ref, true
}

// Supersede proposes editedArguments for the pending request requestID on
// behalf of actor (from the caller's authenticated channel): it creates
// the superseding request and cancels the original, and returns the
// original's receipt and the new request's approval.requested event (see
// the comment on SupersedesExtension for what the new request keeps).
//
// It refuses (ErrInvalid) arguments that are not one strict I-JSON object,
// an edit that changes nothing (the same arguments up to RFC 8785
// canonical form), an original whose arguments are not an object, an
// actor without an id or type, a justification over 2,000 characters, and
// a chain already MaxSupersessions long. A request that is resolved or
// past its expires_at gives ErrNotPending, an unknown one
// ErrUnknownRequest, and one whose owner process has stopped
// ErrOwnerStopped.
//
// Who may propose, and who may then approve, is the caller's policy: the
// new request records the proposer (SupersedesRef.ProposedBy and
// EarlierProposers) so that a separation-of-duties policy can refuse the
// proposer's approval.
func (a *Authority) Supersede(ctx context.Context, requestID string, editedArguments json.RawMessage, actor Actor, justification string) (cancelled *Message, created *Message, err error) {
	if actor.ID == "" || actor.Type == "" {
		return nil, nil, fmt.Errorf("%w: an edit needs an authenticated actor", ErrInvalid)
	}
	justification = strings.TrimSpace(justification)
	if n := utf8.RuneCountInString(justification); n > 2000 {
		return nil, nil, fmt.Errorf("%w: the justification is %d characters long; at most 2000 are allowed", ErrInvalid, n)
	}
	edited, err := objectJSON(editedArguments)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: edited arguments: %w", ErrInvalid, err)
	}
	st, err := a.store.RequestState(ctx, requestID)
	if err != nil {
		return nil, nil, err
	}
	orig, err := requestOf(st.Request)
	if err != nil {
		return nil, nil, err
	}
	now := a.now()
	if st.Resolution != nil {
		return nil, nil, fmt.Errorf("%w: request %s is %s", ErrNotPending, orig.ID, st.Resolution.Event.Resolution.Outcome)
	}
	if !orig.ExpiresAt.IsZero() && !now.Before(orig.ExpiresAt.Time()) {
		return nil, nil, fmt.Errorf("%w: request %s has expired", ErrNotPending, orig.ID)
	}
	if a.dead(st.Request.Owner) {
		return nil, nil, fmt.Errorf("%w: request %s", ErrOwnerStopped, orig.ID)
	}
	args := orig.Action.Arguments()
	if _, err := objectJSON(args); err != nil {
		return nil, nil, fmt.Errorf("%w: the arguments of request %s are not an object; they cannot be edited", ErrInvalid, orig.ID)
	}
	same, err := sameJSON(args, edited)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if same {
		return nil, nil, fmt.Errorf("%w: the edited arguments are those of request %s; approve it instead", ErrInvalid, orig.ID)
	}
	action, err := replaceArguments(orig.Action, edited)
	if err != nil {
		return nil, nil, err
	}
	ref := SupersedesRef{RequestID: orig.ID, RootRequestID: orig.ID, ProposedBy: actor, Justification: justification}
	if prev, ok := Supersedes(orig); ok {
		ref.RootRequestID = prev.RootRequestID
		if ref.RootRequestID == "" {
			ref.RootRequestID = prev.RequestID
		}
		ref.EarlierProposers = prev.Proposers()
		if len(ref.EarlierProposers) >= MaxSupersessions {
			return nil, nil, fmt.Errorf("%w: request %s has been edited %d times already", ErrInvalid, ref.RootRequestID, len(ref.EarlierProposers))
		}
	}
	refJSON, err := json.Marshal(ref)
	if err != nil {
		return nil, nil, err
	}
	ext := Extensions{}
	for k, v := range orig.Extensions {
		ext[k] = bytes.Clone(v)
	}
	ext[SupersedesExtension] = refJSON

	var newDigest string
	if newDigest, err = action.Digest(); err != nil {
		return nil, nil, err
	}
	choices := make([]Choice, len(orig.Choices))
	for i, c := range orig.Choices {
		if c.ScopeConstraints != nil {
			cs := Constraints{}
			for k, v := range c.ScopeConstraints {
				cs[k] = bytes.Clone(v)
			}
			var pinned string
			if json.Unmarshal(cs[ConstraintActionDigest], &pinned) == nil && pinned == orig.ActionDigest {
				cs[ConstraintActionDigest], _ = json.Marshal(newDigest)
			}
			c.ScopeConstraints = cs
		}
		choices[i] = c
	}

	// The new request, under the first free id of the chain. An id taken
	// by an orphan of this original (an earlier Supersede that stopped
	// between its writes) is cancelled and skipped.
	base := ref.RootRequestID
	var expires time.Time
	if !orig.ExpiresAt.IsZero() {
		expires = orig.ExpiresAt.Time()
	}
	var stored RequestRecord
	var skipped []string
	for n := len(ref.EarlierProposers) + 1; ; n++ {
		if n > MaxSupersessions*4 {
			return nil, nil, fmt.Errorf("%w: no free id for an edit of %s", ErrConflict, orig.ID)
		}
		id := editID(base, n)
		req, err := a.opts.NewRequest(RequestParams{
			ID: id, CreatedAt: now, ExpiresAt: expires, Origin: orig.Origin, Action: action,
			Risk: orig.Risk, Choices: choices, Extensions: ext,
		})
		if err != nil {
			return nil, nil, err
		}
		if err := checkRuleChoices(req); err != nil {
			return nil, nil, err
		}
		ev, err := a.opts.NewMessage(Header{OccurredAt: now, Stream: a.stream}, req)
		if err != nil {
			return nil, nil, err
		}
		fp, err := fingerprint(ev.Request)
		if err != nil {
			return nil, nil, err
		}
		s, isNew, err := a.store.CreateRequestIfAbsent(ctx, RequestRecord{Event: ev, Fingerprint: fp, Owner: st.Request.Owner})
		if err != nil && !errors.Is(err, ErrConflict) {
			return nil, nil, err
		}
		if err == nil && isNew {
			stored = s
			break
		}
		// Taken: by an unrelated request, by a concurrent edit of this
		// original still in flight, or by an orphan. Only once this edit
		// has won (below) are the others known to be orphans.
		skipped = append(skipped, id)
	}
	newReq := stored.Event.Request

	// Then the original, with the link.
	linkJSON, err := json.Marshal(SupersededByRef{RequestID: newReq.ID, Actor: actor, Justification: justification})
	if err != nil {
		return nil, nil, err
	}
	byJSON, err := json.Marshal(decidedBy{Actor: actor, Justification: justification})
	if err != nil {
		return nil, nil, err
	}
	res, _, err := a.opts.buildResolution(ResolutionParams{
		Request:    orig,
		Outcome:    OutcomeCancelled,
		Message:    fmt.Sprintf("Superseded by request %s: %s proposed different arguments.", newReq.ID, actor.ID),
		ResolvedAt: now,
		Extensions: Extensions{SupersededByExtension: linkJSON, DecisionExtension: byJSON},
	})
	if err != nil {
		return nil, nil, err
	}
	rev, err := a.opts.NewMessage(Header{OccurredAt: now, Stream: a.stream}, res)
	if err != nil {
		return nil, nil, err
	}
	rs, resolved, err := a.store.ResolveIfPending(ctx, ResolutionRecord{Event: rev})
	if err != nil {
		// The orphan stays until the next Supersede or its expiry;
		// CheckSupersession keeps it from being approved.
		return nil, nil, err
	}
	if !resolved {
		// Someone decided the original first: withdraw the new request.
		if err := a.withdraw(ctx, newReq, now, "The edit lost to a decision on request "+orig.ID+"."); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: request %s was resolved (%s) before the edit", ErrNotPending, orig.ID, rs.Event.Resolution.Outcome)
	}
	receipt, err := receiptOf(rs)
	if err != nil {
		return nil, nil, err
	}
	// This edit won: the other requests claiming to supersede the original
	// can never complete; withdraw them.
	for _, id := range skipped {
		if err := a.cancelOrphan(ctx, id, orig.ID, now); err != nil {
			return receipt, stored.Event, nil // best effort: CheckSupersession still refuses them
		}
	}
	return receipt, stored.Event, nil
}

// cancelOrphan withdraws the request id when it is a pending orphan
// superseding origID; any other request under that id is left alone.
func (a *Authority) cancelOrphan(ctx context.Context, id, origID string, now time.Time) error {
	st, err := a.store.RequestState(ctx, id)
	if err != nil {
		if errors.Is(err, ErrUnknownRequest) {
			return nil
		}
		return err
	}
	req, err := requestOf(st.Request)
	if err != nil {
		return err
	}
	if ref, ok := Supersedes(req); !ok || ref.RequestID != origID || st.Resolution != nil {
		return nil
	}
	return a.withdraw(ctx, req, now, "Withdrawn: another edit of request "+origID+" was recorded instead.")
}

// withdraw cancels a pending request with a message; a request resolved
// meanwhile is left as it is.
func (a *Authority) withdraw(ctx context.Context, req *Request, now time.Time, msg string) error {
	_, _, err := a.cancel(ctx, req, now, msg)
	return err
}

// cancel records req as cancelled with msg if it is still pending, and
// returns the resolution stored (the earlier one, withdrawn false, when
// it was resolved meanwhile).
func (a *Authority) cancel(ctx context.Context, req *Request, now time.Time, msg string) (ResolutionRecord, bool, error) {
	res, _, err := a.opts.buildResolution(ResolutionParams{Request: req, Outcome: OutcomeCancelled, Message: msg, ResolvedAt: now})
	if err != nil {
		return ResolutionRecord{}, false, err
	}
	ev, err := a.opts.NewMessage(Header{OccurredAt: now, Stream: a.stream}, res)
	if err != nil {
		return ResolutionRecord{}, false, err
	}
	return a.store.ResolveIfPending(ctx, ResolutionRecord{Event: ev})
}

// Withdraw cancels the request id, if it is still pending, with msg as
// the resolution's message (its submitter takes it back), and returns the
// receipt stored for it: the cancellation (withdrawn true), or the
// resolution recorded before (withdrawn false; a decision racing with it
// either was recorded first or loses). Unlike CancelOwned it touches no
// other request. An unknown id is ErrUnknownRequest.
func (a *Authority) Withdraw(ctx context.Context, id, msg string) (receipt *Message, withdrawn bool, err error) {
	st, err := a.store.RequestState(ctx, id)
	if err != nil {
		return nil, false, err
	}
	stored, withdrawn := ResolutionRecord{}, false
	if st.Resolution != nil {
		stored = *st.Resolution
	} else {
		req, err := requestOf(st.Request)
		if err != nil {
			return nil, false, err
		}
		if stored, withdrawn, err = a.cancel(ctx, req, a.now(), msg); err != nil {
			return nil, false, err
		}
	}
	receipt, err = receiptOf(stored)
	return receipt, withdrawn, err
}

// CheckSupersession returns ErrSupersessionIncomplete when req supersedes
// a request that is still pending (an orphan: see SupersedesExtension),
// and nil when req supersedes nothing or its original was cancelled in
// its favour. A presenter checks it before it lets anyone approve req.
func (a *Authority) CheckSupersession(ctx context.Context, req *Request) error {
	ref, ok := Supersedes(req)
	if !ok {
		if _, present := req.Extensions[SupersedesExtension]; present {
			return fmt.Errorf("%w: request %s has a malformed %s extension", ErrSupersessionIncomplete, req.ID, SupersedesExtension)
		}
		return nil
	}
	st, err := a.store.RequestState(ctx, ref.RequestID)
	if err != nil {
		return err
	}
	if st.Resolution == nil {
		return fmt.Errorf("%w: request %s is still pending", ErrSupersessionIncomplete, ref.RequestID)
	}
	if link, ok := SupersededBy(st.Resolution.Event.Resolution); !ok || link.RequestID != req.ID {
		return fmt.Errorf("%w: request %s was not superseded by %s", ErrSupersessionIncomplete, ref.RequestID, req.ID)
	}
	return nil
}

// Chain follows SupersededByExtension from the request id: it returns the
// state of id, then of the request that superseded it, and so on, ending
// with a request that is pending or resolved otherwise than by
// supersession. A runtime waiting on id waits on the last one and runs its
// action. Each link must be confirmed by the successor's
// SupersedesExtension naming its predecessor; a broken link, a missing
// successor or a chain longer than MaxSupersessions is an error (fail
// closed: nothing of the chain may run).
func (a *Authority) Chain(ctx context.Context, id string) ([]RequestState, error) {
	st, err := a.store.RequestState(ctx, id)
	if err != nil {
		return nil, err
	}
	chain := []RequestState{st}
	for {
		if st.Resolution == nil {
			return chain, nil
		}
		prev, err := requestOf(st.Request)
		if err != nil {
			return nil, err
		}
		res, err := receiptOf(*st.Resolution)
		if err != nil {
			return nil, err
		}
		link, ok := SupersededBy(res.Resolution)
		if !ok {
			return chain, nil
		}
		if len(chain) > MaxSupersessions {
			return nil, fmt.Errorf("%w: the supersession chain of %s is longer than %d", ErrInvalid, id, MaxSupersessions)
		}
		next, err := a.store.RequestState(ctx, link.RequestID)
		if err != nil {
			return nil, fmt.Errorf("request %s is superseded by %s: %w", prev.ID, link.RequestID, err)
		}
		req, err := requestOf(next.Request)
		if err != nil {
			return nil, err
		}
		if ref, ok := Supersedes(req); !ok || ref.RequestID != prev.ID {
			return nil, fmt.Errorf("%w: request %s does not say it supersedes %s", ErrInvalid, req.ID, prev.ID)
		}
		chain = append(chain, next)
		st = next
	}
}

// editID is the id of the nth edit of the request base: base + "-e<n>",
// with base cut so that the id stays within AAIS's 200 characters.
func editID(base string, n int) string {
	suffix := "-e" + strconv.Itoa(n)
	if len(base)+len(suffix) > 200 {
		base = base[:200-len(suffix)]
	}
	return base + suffix
}

// objectJSON returns raw compacted when it is one strict I-JSON object.
func objectJSON(raw json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	if _, err := jcs.Canonicalize(raw); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sameJSON reports whether a and b have the same RFC 8785 canonical form.
func sameJSON(a, b json.RawMessage) (bool, error) {
	ca, err := jcs.Canonicalize(a)
	if err != nil {
		return false, err
	}
	cb, err := jcs.Canonicalize(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

// replaceArguments returns act with its arguments member replaced by args
// (compact JSON), every other member kept as it was.
func replaceArguments(act Action, args json.RawMessage) (Action, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(act.raw, &members); err != nil {
		return Action{}, fmt.Errorf("%w: action: %v", ErrMalformed, err)
	}
	members["arguments"] = args
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return Action{}, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(members[k])
	}
	b.WriteByte('}')
	return NewAction(json.RawMessage(b.Bytes()))
}
