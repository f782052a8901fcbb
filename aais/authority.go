package aais

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/custos-runtime/custos/jcs"
)

// DefaultStream is the stream an Authority writes its events on when
// AuthorityOptions.Stream is empty.
const DefaultStream = "authority"

// AuthorityOptions tunes an Authority. A nil *AuthorityOptions, and every
// zero field, means the default.
type AuthorityOptions struct {
	// Now is the authority's clock, the only one that decides expiry.
	// Nil means time.Now.
	Now func() time.Time
	// Rand is where generated ids ("evt_", "res_") come from. Nil means
	// crypto/rand.
	Rand io.Reader
	// Stream is the stream id written on every event. Empty means
	// DefaultStream. Sequences come from the Store, so one Store serves one
	// stream.
	Stream string
}

// Authority is the side of AAIS that may execute: it records requests,
// turns decisions into receipts and keeps exactly one resolution per
// request. All state lives in its Store; an Authority is safe for
// concurrent use when its Store is, and several Authorities may share one
// Store.
//
// The decision rules are pure (see judge); only recording a result touches
// the Store, through ResolveIfPending, so the first recorded resolution
// wins and every later caller observes it.
type Authority struct {
	store  Store
	now    func() time.Time
	opts   *Options
	stream string
}

// NewAuthority returns an Authority keeping its state in s.
func NewAuthority(s Store, o *AuthorityOptions) (*Authority, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: authority without a store", ErrBuild)
	}
	a := &Authority{store: s, now: time.Now, opts: &Options{}, stream: DefaultStream}
	if o != nil {
		if o.Now != nil {
			a.now = o.Now
		}
		a.opts.Rand = o.Rand
		if o.Stream != "" {
			a.stream = o.Stream
		}
	}
	return a, nil
}

// Create validates req and records it as pending, with its
// approval.requested event, before returning that event: nothing is
// announced that is not stored. Creating the same request again (same id,
// same content) changes nothing and returns the event recorded the first
// time with created false; a different request under a used id yields
// ErrConflict.
func (a *Authority) Create(ctx context.Context, req *Request) (event *Message, created bool, err error) {
	if req == nil {
		return nil, false, fmt.Errorf("%w: nil request", ErrInvalid)
	}
	ev, err := a.opts.NewMessage(Header{OccurredAt: a.now(), Stream: a.stream}, req)
	if err != nil {
		return nil, false, err
	}
	fp, err := fingerprint(ev.Request)
	if err != nil {
		return nil, false, err
	}
	stored, created, err := a.store.CreateRequestIfAbsent(ctx, RequestRecord{Event: ev, Fingerprint: fp})
	if err != nil {
		return nil, false, err
	}
	if _, err := requestOf(stored); err != nil {
		return nil, false, err
	}
	return stored.Event, created, nil
}

// Decide turns a presenter's decision into a receipt: the approval.resolved
// message to send back. Only a receipt whose outcome is OutcomeApproved
// authorizes anything, and only once it has been returned here, that is,
// recorded.
//
// actor is the actor the caller's authenticated channel established; when
// it is not the zero Actor it replaces whatever the decision body claims.
// currentAction is the raw JSON of the action about to run, or nil when
// nothing is about to run yet; it is compared by digest with the request.
//
// Checks run in this order, the first that applies deciding:
//
//  1. the decision is validated (ErrInvalid otherwise);
//  2. the request is already resolved: a decision identical to the one
//     that resolved it gets that same receipt back (same ids, same
//     sequence); any other decision gets a conflict receipt, which is an
//     answer only: it is not recorded and the stored resolution stays;
//  3. the request is unknown: ErrUnknownRequest;
//  4. now >= expires_at on the authority's clock: expired;
//  5. the decision's action_digest differs from the request's: stale;
//  6. currentAction's digest differs from the request's, or cannot be
//     computed: stale;
//  7. the (decision, scope) pair was not offered: invalid;
//  8. otherwise approved, denied or cancelled, as decided.
//
// Outcomes 4 to 8 all resolve the request: a failed decision burns it, so a
// later correct decision gets a conflict and the runtime must ask again.
// This fails closed and matches the reference libraries (spec §4): a
// request that answered "stale" once must never be approved later.
//
// "Identical" means the same JCS (RFC 8785) SHA-256 digest of the decision
// body after the authenticated actor is put in it: same decision id,
// decided_at, verdict, scope, digest, actor and extensions.
//
// Conflict receipts carry the sequence of the stored resolution's event and
// a fresh event id; they are not events of the stream.
func (a *Authority) Decide(ctx context.Context, d *Decision, actor Actor, currentAction []byte) (*Message, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil decision", ErrInvalid)
	}
	dc := *d
	if actor != (Actor{}) {
		dc.Actor = actor
	}
	now := a.now()
	// NewMessage validates the decision and hands back a deep copy the
	// caller can no longer change under us.
	dm, err := a.opts.NewMessage(Header{ID: "check", OccurredAt: now}, &dc)
	if err != nil {
		return nil, err
	}
	dec := dm.Decision
	fp, err := fingerprint(dec)
	if err != nil {
		return nil, err
	}
	st, err := a.store.RequestState(ctx, dec.RequestID)
	if err != nil {
		return nil, err
	}
	req, err := requestOf(st.Request)
	if err != nil {
		return nil, err
	}
	if st.Resolution != nil {
		return a.answerResolved(req, *st.Resolution, dec, fp, now)
	}
	outcome := judge(req, dec, currentAction, now)
	rec, err := a.resolution(req, dec, outcome, now)
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

// judge is the pure decision rule for a pending request: checks 4 to 8 of
// Decide.
func judge(req *Request, d *Decision, currentAction []byte, now time.Time) Outcome {
	if !req.ExpiresAt.IsZero() && !now.Before(req.ExpiresAt.Time()) {
		return OutcomeExpired
	}
	if d.ActionDigest != req.ActionDigest {
		return OutcomeStale
	}
	if currentAction != nil {
		if got, err := ActionDigest(currentAction); err != nil || got != req.ActionDigest {
			return OutcomeStale
		}
	}
	if _, ok := OfferedChoice(req, d); !ok {
		return OutcomeInvalid
	}
	switch d.Decision {
	case Approve:
		return OutcomeApproved
	case Deny:
		return OutcomeDenied
	case Cancel:
		return OutcomeCancelled
	}
	// Unreachable for a validated decision; refuse rather than guess.
	return OutcomeInvalid
}

// answerResolved answers a decision on a request that already has a
// resolution: the stored receipt for a replay, a conflict receipt
// otherwise.
func (a *Authority) answerResolved(req *Request, stored ResolutionRecord, d *Decision, fp string, now time.Time) (*Message, error) {
	if _, err := receiptOf(stored); err != nil {
		return nil, err
	}
	if stored.DecisionFingerprint != "" && stored.DecisionFingerprint == fp {
		return stored.Event, nil
	}
	res, err := a.opts.NewResolution(ResolutionParams{
		Request:    req,
		Decision:   d,
		Outcome:    OutcomeConflict,
		Message:    fmt.Sprintf("The request was already resolved as %s.", stored.Event.Resolution.Outcome),
		ResolvedAt: now,
	})
	if err != nil {
		return nil, err
	}
	return a.opts.NewMessage(Header{OccurredAt: now, Sequence: stored.Event.Sequence, Stream: a.stream}, res)
}

// resolution builds the receipt and its event for req; d may be nil.
func (a *Authority) resolution(req *Request, d *Decision, o Outcome, now time.Time) (ResolutionRecord, error) {
	res, err := a.opts.NewResolution(ResolutionParams{Request: req, Decision: d, Outcome: o, ResolvedAt: now})
	if err != nil {
		return ResolutionRecord{}, err
	}
	ev, err := a.opts.NewMessage(Header{OccurredAt: now, Stream: a.stream}, res)
	if err != nil {
		return ResolutionRecord{}, err
	}
	return ResolutionRecord{Event: ev}, nil
}

// ExpireOverdue resolves as expired every pending request whose expires_at
// has passed on the authority's clock, and returns the receipts it
// recorded. A request resolved by someone else meanwhile is skipped. On an
// error it stops and returns the receipts recorded so far.
func (a *Authority) ExpireOverdue(ctx context.Context) ([]*Message, error) {
	now := a.now()
	return a.resolvePending(ctx, OutcomeExpired, now, func(r *Request) bool {
		return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt.Time())
	})
}

// Owner selects requests by origin. Every non-empty field must equal the
// request's origin field; at least one must be set.
type Owner struct {
	SessionID string
	RunID     string
}

// CancelOwned resolves as cancelled every pending request whose origin
// matches o, for when a session or run ends, and returns the receipts it
// recorded. Each request is resolved through ResolveIfPending, so a
// decision racing with it either was recorded first (the request keeps
// that outcome and is skipped here) or loses and gets a conflict receipt.
// Requests created after CancelOwned has listed the pending ones are not
// cancelled: stop creating requests for o first. An Owner with no field set
// is refused (ErrInvalid) rather than cancelling everything.
func (a *Authority) CancelOwned(ctx context.Context, o Owner) ([]*Message, error) {
	if o == (Owner{}) {
		return nil, fmt.Errorf("%w: owner selects no session or run", ErrInvalid)
	}
	return a.resolvePending(ctx, OutcomeCancelled, a.now(), func(r *Request) bool {
		return (o.SessionID == "" || o.SessionID == r.Origin.SessionID) &&
			(o.RunID == "" || o.RunID == r.Origin.RunID)
	})
}

func (a *Authority) resolvePending(ctx context.Context, o Outcome, now time.Time, match func(*Request) bool) ([]*Message, error) {
	pending, _, err := a.store.Pending(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Message
	for _, p := range pending {
		req, err := requestOf(p)
		if err != nil {
			return out, err
		}
		if !match(req) {
			continue
		}
		rec, err := a.resolution(req, nil, o, now)
		if err != nil {
			return out, err
		}
		stored, resolved, err := a.store.ResolveIfPending(ctx, rec)
		if err != nil {
			return out, err
		}
		if resolved {
			m, err := receiptOf(stored)
			if err != nil {
				return out, err
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// Snapshot returns the approval.snapshot message a reconnecting presenter
// starts from: every request still pending and not expired on the
// authority's clock, as of the store's latest sequence. Expired requests
// are left out even before ExpireOverdue has resolved them.
func (a *Authority) Snapshot(ctx context.Context) (*Message, error) {
	pending, asOf, err := a.store.Pending(ctx)
	if err != nil {
		return nil, err
	}
	now := a.now()
	s := &Snapshot{AsOfSequence: asOf, Pending: []Request{}}
	for _, p := range pending {
		req, err := requestOf(p)
		if err != nil {
			return nil, err
		}
		if !req.ExpiresAt.IsZero() && !now.Before(req.ExpiresAt.Time()) {
			continue
		}
		s.Pending = append(s.Pending, *req)
	}
	return a.opts.NewMessage(Header{OccurredAt: now, Sequence: asOf, Stream: a.stream}, s)
}

// requestOf returns the request a record carries, refusing a malformed
// record from a faulty store.
func requestOf(r RequestRecord) (*Request, error) {
	if r.Event == nil || r.Event.Type != TypeRequested || r.Event.Request == nil {
		return nil, fmt.Errorf("%w: store returned a request record without a request", ErrInvalid)
	}
	return r.Event.Request, nil
}

// receiptOf returns the receipt event a record carries, refusing a
// malformed record from a faulty store.
func receiptOf(r ResolutionRecord) (*Message, error) {
	if r.Event == nil || r.Event.Type != TypeResolved || r.Event.Resolution == nil {
		return nil, fmt.Errorf("%w: store returned a resolution record without a receipt", ErrInvalid)
	}
	return r.Event, nil
}

// fingerprint is the JCS SHA-256 digest of a payload's JSON.
func fingerprint(p interface{ MarshalJSON() ([]byte, error) }) (string, error) {
	b, err := p.MarshalJSON()
	if err != nil {
		return "", err
	}
	d, err := jcs.Digest(b)
	if err != nil {
		return "", errors.Join(ErrInvalid, err)
	}
	return d, nil
}
