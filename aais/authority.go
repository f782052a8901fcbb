package aais

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
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
	// Owner is recorded on every request this Authority creates: the
	// process that waits to run the approved action (package
	// aais/liveness gives the current one). Nil records none.
	Owner *ProcessIdentity
	// Liveness tells whether a request's owner still runs (package
	// aais/liveness's Check). With it, an approval of a request whose
	// owner is dead is refused (ErrOwnerStopped), snapshots leave such
	// requests out and CancelOrphaned withdraws them. Nil: owners are
	// never checked.
	Liveness func(ProcessIdentity) Liveness
	// RuleMaxAge caps how long a rule made from a session or persistent
	// approval lives (the scope_constraints may end it sooner). Zero means
	// no cap.
	RuleMaxAge time.Duration
	// Remember, when set, is the policy on remembered approvals: which
	// session and persistent choices may be offered, with which required
	// constraints, and how long their rules live (see RememberPolicy).
	// Nil holds remembered approvals to nothing but their constraints.
	Remember RememberPolicy
}

// DecisionExtension is the extension key of a receipt that a decision
// resolved: {"actor": the decision's actor, "justification": the
// reviewer's words (JustificationExtension), when given}. Receipts are
// what the store keeps, so this is where the audit finds who decided.
const DecisionExtension = "custos.dev/decision"

// JustificationExtension is the decision extension carrying the reviewer's
// justification: a JSON string of at most 2,000 characters.
const JustificationExtension = "custos.dev/justification"

type decidedBy struct {
	Actor         Actor  `json:"actor"`
	Justification string `json:"justification,omitempty"`
	// Response is the reviewer's reply to a question (ResponseExtension).
	Response string `json:"response,omitempty"`
}

// Justification returns the decision's JustificationExtension, "" when
// absent or not a string.
func Justification(d *Decision) string {
	var s string
	if d == nil || json.Unmarshal(d.Extensions[JustificationExtension], &s) != nil {
		return ""
	}
	return s
}

// DecidedBy returns the actor and justification a receipt's
// DecisionExtension records; ok is false when it has none (expiry,
// cancellation by the runtime, a rule).
func DecidedBy(r *Resolution) (actor Actor, justification string, ok bool) {
	var v decidedBy
	if r == nil || json.Unmarshal(r.Extensions[DecisionExtension], &v) != nil || v.Actor.ID == "" {
		return Actor{}, "", false
	}
	return v.Actor, v.Justification, true
}

// RuleExtension is the extension key of a receipt that a rule approved
// automatically. Its value names the rule and the approval it came from:
//
//	{"rule_id": "rul_…", "scope": "session", "request_id": "apr_…",
//	 "resolution_id": "res_…", "approved_by": "alice",
//	 "because": ["rule rul_…: a session approval by alice of request apr_…",
//	             "not revoked; expires at …", "action_name is \"billing.refund\"",
//	             "argument \"/amount\": value <= 100 holds", …]}
const RuleExtension = "custos.dev/rule"

// RuntimeActor is the actor recorded when the runtime itself revokes rules
// (CancelOwned ending a session).
var RuntimeActor = Actor{ID: "custos.runtime", Type: ActorPolicy, AuthenticatedBy: "authority"}

// RulesActor is the actor recorded for a request a remembered rule
// approved (its resolution carries RuleExtension): no person decided it
// then, a rule a person made earlier did.
var RulesActor = Actor{ID: "custos.rules", Type: ActorPolicy, AuthenticatedBy: "authority"}

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
	store      Store
	now        func() time.Time
	opts       *Options
	stream     string
	owner      *ProcessIdentity
	liveness   func(ProcessIdentity) Liveness
	ruleMaxAge time.Duration
	remember   RememberPolicy
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
		if o.Owner != nil {
			if o.Owner.PID <= 0 || o.Owner.HostID == "" {
				return nil, fmt.Errorf("%w: owner without a pid or host", ErrBuild)
			}
			c := *o.Owner
			a.owner = &c
		}
		a.liveness = o.Liveness
		if o.RuleMaxAge < 0 {
			return nil, fmt.Errorf("%w: negative rule age", ErrBuild)
		}
		a.ruleMaxAge = o.RuleMaxAge
		a.remember = o.Remember
	}
	return a, nil
}

// Submission is what Submit did with a request.
type Submission struct {
	// Event is the approval.requested event as recorded (the first time,
	// when the request already existed).
	Event *Message
	// Created is false when the request already existed.
	Created bool
	// Receipt is the request's approval.resolved event when it is already
	// resolved: approved automatically by a rule just now, or resolved
	// before this call. Nil while it is pending.
	Receipt *Message
	// Rule is the rule that approved it automatically just now; nil
	// otherwise.
	Rule *Rule
}

// Create is Submit for callers that only need the event: it returns
// Submission.Event and Submission.Created.
func (a *Authority) Create(ctx context.Context, req *Request) (event *Message, created bool, err error) {
	s, err := a.Submit(ctx, req)
	if err != nil {
		return nil, false, err
	}
	return s.Event, s.Created, nil
}

// Submit validates req and records it, with its approval.requested event,
// before returning: nothing is announced that is not stored. Submitting
// the same request again (same id, same content) changes nothing and
// returns what was recorded the first time with Created false; a different
// request under a used id yields ErrConflict.
//
// A new request that an active rule covers (see Rule.Matches) is recorded
// already approved, in the same write: the receipt (outcome approved, the
// rule's scope as effective scope, RuleExtension naming the rule) follows
// the request in the event log, and Submission.Receipt and Rule say so. A
// rule revoked between matching and writing is not used.
//
// A request whose session or persistent approve choices could never make a
// rule (malformed constraints, constraints that do not name the action, a
// session choice without an origin session) is refused with ErrInvalid:
// offering a choice the authority cannot honour would mislead the
// reviewer.
func (a *Authority) Submit(ctx context.Context, req *Request) (Submission, error) {
	if req == nil {
		return Submission{}, fmt.Errorf("%w: nil request", ErrInvalid)
	}
	now := a.now()
	ev, err := a.opts.NewMessage(Header{OccurredAt: now, Stream: a.stream}, req)
	if err != nil {
		return Submission{}, err
	}
	if err := checkRuleChoices(ev.Request); err != nil {
		return Submission{}, err
	}
	q, multi, err := QuorumOf(ev.Request)
	if err != nil {
		return Submission{}, err
	}
	if multi {
		if _, ok := a.store.(VoteStore); !ok {
			return Submission{}, fmt.Errorf("%w: request %s needs %d approvals", ErrQuorumUnsupported, ev.Request.ID, q.ApprovalsRequired)
		}
		for _, c := range ev.Request.Choices {
			if c.Decision == Approve && c.Scope.Bounded() {
				return Submission{}, fmt.Errorf("%w: a request needing %d approvals offers no %s approval (a rule would skip the quorum)", ErrInvalid, q.ApprovalsRequired, c.Scope)
			}
		}
	}
	if err := a.checkRemember(ev.Request); err != nil {
		return Submission{}, err
	}
	fp, err := fingerprint(ev.Request)
	if err != nil {
		return Submission{}, err
	}
	rec := RequestRecord{Event: ev, Fingerprint: fp, Owner: a.owner}
	// A rule revoked after Rules was read makes the store refuse the
	// automatic approval; read the rules again, a bounded number of times.
	for attempt := 0; ; attempt++ {
		rec.Resolution = nil
		// The store ignores rec.Resolution when the request exists.
		// A rule never stands in for a quorum: its one approver is not N.
		var rule *Rule
		var because []string
		if !multi {
			if rule, because, err = a.matchRule(ctx, ev.Request, now); err != nil {
				return Submission{}, err
			}
		}
		if rule != nil {
			res, err := a.ruleResolution(ev.Request, rule, because, now)
			if err != nil {
				return Submission{}, err
			}
			rec.Resolution = &res
		}
		stored, created, err := a.store.CreateRequestIfAbsent(ctx, rec)
		if rule != nil && attempt < 3 && (errors.Is(err, ErrRuleInactive) || errors.Is(err, ErrUnknownRule)) {
			continue
		}
		if err != nil {
			return Submission{}, err
		}
		if _, err := requestOf(stored); err != nil {
			return Submission{}, err
		}
		sub := Submission{Event: stored.Event, Created: created}
		if !created {
			rule = nil
		}
		sub.Rule = rule
		if rule != nil || !created {
			st, err := a.store.RequestState(ctx, ev.Request.ID)
			if err != nil {
				return Submission{}, err
			}
			if st.Resolution != nil {
				if sub.Receipt, err = receiptOf(*st.Resolution); err != nil {
					return Submission{}, err
				}
			}
		}
		return sub, nil
	}
}

// matchRule returns the first rule, in matching order, that covers req
// under the remember policy, and why; nil when none does.
func (a *Authority) matchRule(ctx context.Context, req *Request, now time.Time) (*Rule, []string, error) {
	rules, err := a.store.Rules(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range rules.Sorted() {
		if ok, _, because := a.explainRule(r, req, now); ok {
			return r, because, nil
		}
	}
	return nil, nil, nil
}

// ExplainRules evaluates every saved rule against req at the authority's
// clock, as Submit would under the remember policy, in matching order:
// the first entry with Matched true is the rule that would approve req.
// It records nothing.
func (a *Authority) ExplainRules(ctx context.Context, req *Request) ([]RuleMatch, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", ErrInvalid)
	}
	rules, err := a.store.Rules(ctx)
	if err != nil {
		return nil, err
	}
	now := a.now()
	sorted := rules.Sorted()
	out := make([]RuleMatch, len(sorted))
	for i, r := range sorted {
		ok, why, because := a.explainRule(r, req, now)
		out[i] = RuleMatch{Rule: r, Matched: ok, Reason: why, Because: because}
	}
	return out, nil
}

// ruleResolution builds the receipt of an automatic approval by rule;
// because (Rule.Explain) goes in its RuleExtension.
func (a *Authority) ruleResolution(req *Request, r *Rule, because []string, now time.Time) (ResolutionRecord, error) {
	ext, err := json.Marshal(map[string]any{
		"rule_id":       r.ID,
		"scope":         string(r.Scope),
		"request_id":    r.RequestID,
		"resolution_id": r.ResolutionID,
		"approved_by":   r.Actor.ID,
		"because":       because,
	})
	if err != nil {
		return ResolutionRecord{}, err
	}
	res, _, err := a.opts.buildResolution(ResolutionParams{
		Request:        req,
		Outcome:        OutcomeApproved,
		EffectiveScope: r.Scope,
		Message:        fmt.Sprintf("Approved automatically by rule %s (a %s approval by %s).", r.ID, r.Scope, r.Actor.ID),
		ResolvedAt:     now,
		Extensions:     Extensions{RuleExtension: ext},
	})
	if err != nil {
		return ResolutionRecord{}, err
	}
	ev, err := a.opts.NewMessage(Header{OccurredAt: now, Stream: a.stream}, res)
	if err != nil {
		return ResolutionRecord{}, err
	}
	return ResolutionRecord{Event: ev, ByRule: r.ID}, nil
}

// checkRuleChoices refuses a request offering a session or persistent
// approval that NewRule could not turn into a rule.
func checkRuleChoices(req *Request) error {
	for _, c := range req.Choices {
		if c.Decision != Approve || !c.Scope.Bounded() {
			continue
		}
		cs, err := ParseConstraints(c.ScopeConstraints)
		if err != nil {
			return fmt.Errorf("%w: the %s choice: %w", ErrInvalid, c.Scope, err)
		}
		if !cs.narrowsAction() {
			return fmt.Errorf("%w: the %s choice's scope_constraints must name the action (action_kind, action_name or action_digest)", ErrInvalid, c.Scope)
		}
		if c.Scope == ScopeSession && (req.Origin.SessionID == "" || req.Origin.Harness == "") {
			return fmt.Errorf("%w: a session choice needs the origin's harness and session_id", ErrInvalid)
		}
	}
	return nil
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
//  8. an approval of a request whose owner process is dead (with
//     AuthorityOptions.Liveness): ErrOwnerStopped, and nothing changes;
//  9. otherwise approved, denied or cancelled, as decided.
//
// An approved session or persistent choice also saves a rule (NewRule), in
// the same write as the receipt: from then on Submit approves the requests
// it covers without asking.
//
// Outcomes 4 to 7 and 9 all resolve the request: a failed decision burns it, so a
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
	return a.DecideWith(ctx, d, DecideOptions{Actor: actor, CurrentAction: currentAction})
}

// DecideOptions are the arguments of DecideWith.
type DecideOptions struct {
	// Actor and CurrentAction are those of Decide.
	Actor         Actor
	CurrentAction []byte
	// Roles are the actor's roles as the caller's policy grants them;
	// they fill a quorum's from_roles (QuorumExtension) and are recorded
	// with the vote.
	Roles []string
}

// DecideWith is Decide with the actor's roles. On a request that needs a
// quorum (QuorumExtension), checks 1 to 8 are the same, with one change
// at step 9: an approval (or a denial under DenyQuorum) is a vote. A vote
// that does not yet reach the quorum is recorded with its approval.activity
// event (stage QuorumStage, QuorumExtension carrying the Tally) and that
// event is returned instead of a receipt: the request stays pending. The
// vote that reaches it resolves the request; its receipt's
// QuorumExtension lists every vote. Each actor votes once
// (ErrAlreadyVoted for a second, different decision; the same decision
// again gets its activity back); a quorum request is decided with scope
// once only (ErrInvalid otherwise, nothing changes); a store that is not
// a VoteStore yields ErrQuorumUnsupported.
func (a *Authority) DecideWith(ctx context.Context, d *Decision, o DecideOptions) (*Message, error) {
	actor, currentAction := o.Actor, o.CurrentAction
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
	if outcome == OutcomeApproved && a.dead(st.Request.Owner) {
		return nil, fmt.Errorf("%w: request %s (pid %d on %s)", ErrOwnerStopped, req.ID, st.Request.Owner.PID, st.Request.Owner.HostID)
	}
	q, multi, err := QuorumOf(req)
	if err != nil {
		return nil, err
	}
	if multi && (outcome == OutcomeApproved || outcome == OutcomeDenied) {
		if outcome == OutcomeApproved || q.Deny == DenyQuorum {
			return a.decideQuorum(ctx, req, q, dec, fp, o.Roles, now)
		}
		// A denial under DenyAny resolves at once; its receipt still
		// lists the approvals it overrode.
		return a.denyQuorum(ctx, req, q, dec, fp, now)
	}
	rec, err := a.resolution(req, dec, outcome, now)
	if err != nil {
		return nil, err
	}
	rec.DecisionFingerprint = fp
	if outcome == OutcomeApproved && dec.Scope.Bounded() {
		choice, _ := req.Choice(Approve, dec.Scope)
		lim, err := a.ruleLimits(req, dec.Scope, choice.ScopeConstraints)
		if err != nil {
			return nil, err
		}
		p := RuleParams{Request: req, Decision: dec, Resolution: rec.Event.Resolution, Now: now}
		if a.ruleMaxAge > 0 {
			p.ExpiresAt = now.Add(a.ruleMaxAge)
		}
		if lim.MaxAge > 0 && (p.ExpiresAt.IsZero() || now.Add(lim.MaxAge).Before(p.ExpiresAt)) {
			p.ExpiresAt = now.Add(lim.MaxAge)
		}
		if rec.Rule, err = a.opts.NewRule(p); err != nil {
			return nil, err
		}
	}
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
	res, _, err := a.opts.buildResolution(ResolutionParams{
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
	return a.resolutionWith(req, d, o, now, "", nil)
}

// resolutionWith is resolution with a message ("" for the stock one) and
// extensions besides DecisionExtension.
func (a *Authority) resolutionWith(req *Request, d *Decision, o Outcome, now time.Time, msg string, extra Extensions) (ResolutionRecord, error) {
	p := ResolutionParams{Request: req, Decision: d, Outcome: o, ResolvedAt: now, Message: msg}
	if d != nil || len(extra) > 0 {
		p.Extensions = Extensions{}
		for k, v := range extra {
			p.Extensions[k] = v
		}
	}
	if d != nil {
		// The store keeps receipts, not decisions: the receipt says who
		// decided, as the authenticated channel established it.
		ext, err := json.Marshal(decidedBy{Actor: d.Actor, Justification: Justification(d), Response: Response(d)})
		if err != nil {
			return ResolutionRecord{}, err
		}
		p.Extensions[DecisionExtension] = ext
	}
	// Validated once, as the message NewMessage builds.
	res, _, err := a.opts.buildResolution(p)
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
	return a.resolvePending(ctx, OutcomeExpired, now, func(_ RequestRecord, r *Request) bool {
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
//
// When o names a session, the session rules made in it are revoked too
// (by RuntimeActor): a session's approvals end with it. Persistent rules
// stay.
func (a *Authority) CancelOwned(ctx context.Context, o Owner) ([]*Message, error) {
	if o == (Owner{}) {
		return nil, fmt.Errorf("%w: owner selects no session or run", ErrInvalid)
	}
	now := a.now()
	out, err := a.resolvePending(ctx, OutcomeCancelled, now, func(st RequestRecord, r *Request) bool {
		return (o.SessionID == "" || o.SessionID == r.Origin.SessionID) &&
			(o.RunID == "" || o.RunID == r.Origin.RunID)
	})
	if err != nil || o.SessionID == "" {
		return out, err
	}
	rules, err := a.store.Rules(ctx)
	if err != nil {
		return out, err
	}
	for _, r := range rules {
		if r.Scope != ScopeSession || r.Revoked() || r.Origin.SessionID != o.SessionID ||
			(o.RunID != "" && r.Origin.RunID != o.RunID) {
			continue
		}
		if _, _, err := a.store.RevokeRule(ctx, r.ID, now, RuntimeActor); err != nil {
			return out, err
		}
	}
	return out, nil
}

// CancelOrphaned resolves as cancelled every pending request whose owner
// process is dead (AuthorityOptions.Liveness; without it, none is), and
// returns the receipts it recorded. Nobody is left to run those actions.
func (a *Authority) CancelOrphaned(ctx context.Context) ([]*Message, error) {
	return a.resolvePending(ctx, OutcomeCancelled, a.now(), func(st RequestRecord, _ *Request) bool {
		return a.dead(st.Owner)
	})
}

// OwnerLiveness tells whether the process that created a request is still
// running: LivenessUnknown without AuthorityOptions.Liveness or without a
// recorded owner.
func (a *Authority) OwnerLiveness(owner *ProcessIdentity) Liveness {
	if owner == nil || a.liveness == nil {
		return LivenessUnknown
	}
	return a.liveness(*owner)
}

func (a *Authority) dead(owner *ProcessIdentity) bool {
	return a.OwnerLiveness(owner) == LivenessDead
}

// Rules returns every rule in the store, revoked and expired ones
// included, in matching order; RuleSet.Active(now) keeps the ones in force.
func (a *Authority) Rules(ctx context.Context) (RuleSet, error) {
	return a.store.Rules(ctx)
}

// RevokeRule revokes the rule with the given id on behalf of by (from the
// caller's authenticated channel) at the authority's clock. Requests it
// approved stay approved; it approves nothing more. Revoking a revoked rule
// returns it unchanged with revoked false.
func (a *Authority) RevokeRule(ctx context.Context, id string, by Actor) (rule *Rule, revoked bool, err error) {
	return a.store.RevokeRule(ctx, id, a.now(), by)
}

// Activity builds an approval.activity message about a known request: a
// display-only progress note ("waiting for the sandbox", "running") that a
// presenter shows next to it and that never changes approval state.
// Activity messages are not recorded: they carry the store's latest
// sequence, and a View ignores them for ordering.
func (a *Authority) Activity(ctx context.Context, requestID, message, stage string) (*Message, error) {
	if _, err := a.store.RequestState(ctx, requestID); err != nil {
		return nil, err
	}
	p, err := a.store.EventsAfter(ctx, MaxSequence, 1)
	if err != nil {
		return nil, err
	}
	return a.opts.NewMessage(Header{OccurredAt: a.now(), Sequence: p.Latest, Stream: a.stream},
		&Activity{RequestID: requestID, Message: message, Stage: stage})
}

// Expire resolves one request as expired if it is still pending past its
// expires_at on the authority's clock, and returns its receipt then (or the
// resolution another caller recorded first); nil when it is pending and not
// overdue. It is ExpireOverdue for one request, without listing the others.
func (a *Authority) Expire(ctx context.Context, id string) (*Message, error) {
	st, err := a.store.RequestState(ctx, id)
	if err != nil {
		return nil, err
	}
	if st.Resolution != nil {
		return receiptOf(*st.Resolution)
	}
	return a.expire(ctx, st)
}

// expire is Expire on a pending request's state.
func (a *Authority) expire(ctx context.Context, st RequestState) (*Message, error) {
	req, err := requestOf(st.Request)
	if err != nil {
		return nil, err
	}
	now := a.now()
	if req.ExpiresAt.IsZero() || now.Before(req.ExpiresAt.Time()) {
		return nil, nil
	}
	rec, err := a.resolution(req, nil, OutcomeExpired, now)
	if err != nil {
		return nil, err
	}
	stored, _, err := a.store.ResolveIfPending(ctx, rec)
	if err != nil {
		return nil, err
	}
	return receiptOf(stored)
}

// State returns what the store knows about one request.
func (a *Authority) State(ctx context.Context, id string) (RequestState, error) {
	return a.store.RequestState(ctx, id)
}

// Wait polls the store every interval (100 ms when <= 0) until the request
// is resolved, and returns its receipt; it returns ctx's error when ctx is
// done first. It works across processes sharing a store. A request still
// pending at its expires_at (on the authority's clock) is resolved as
// expired by Wait itself, so a waiter never outlives the request.
func (a *Authority) Wait(ctx context.Context, id string, interval time.Duration) (*Message, error) {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		st, err := a.store.RequestState(ctx, id)
		if err != nil {
			return nil, err
		}
		if st.Resolution != nil {
			return receiptOf(*st.Resolution)
		}
		if m, err := a.expire(ctx, st); m != nil || err != nil {
			return m, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (a *Authority) resolvePending(ctx context.Context, o Outcome, now time.Time, match func(RequestRecord, *Request) bool) ([]*Message, error) {
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
		if !match(p, req) {
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
// are left out even before ExpireOverdue has resolved them, and so are
// requests whose owner process is dead (nobody would run them).
func (a *Authority) Snapshot(ctx context.Context) (*Message, error) {
	pending, asOf, err := a.store.Pending(ctx)
	if err != nil {
		return nil, err
	}
	return a.snapshotOf(ctx, pending, asOf)
}

// snapshotOf is Snapshot of what Store.Pending returned (Follow shares one
// Pending read between the followers that start together).
//
// When pending requests that need a quorum have votes, the snapshot's
// envelope carries QuorumExtension: an object from request id to its Tally
// (read after the pending list, so it may already count votes whose
// activity follows as_of_sequence; each activity carries the whole tally,
// so applying it again changes nothing).
func (a *Authority) snapshotOf(ctx context.Context, pending []RequestRecord, asOf uint64) (*Message, error) {
	now := a.now()
	s := &Snapshot{AsOfSequence: asOf, Pending: []Request{}}
	tallies := map[string]Tally{}
	vs, votes := a.store.(VoteStore)
	for _, p := range pending {
		req, err := requestOf(p)
		if err != nil {
			return nil, err
		}
		if (!req.ExpiresAt.IsZero() && !now.Before(req.ExpiresAt.Time())) || a.dead(p.Owner) {
			continue
		}
		s.Pending = append(s.Pending, *req)
		if q, multi, err := QuorumOf(req); votes && multi && err == nil {
			t, err := tallyOf(ctx, vs, req.ID, q)
			if err != nil {
				return nil, err
			}
			if len(t.Approvals)+len(t.Denials) > 0 {
				tallies[req.ID] = t
			}
		}
	}
	h := Header{OccurredAt: now, Sequence: asOf, Stream: a.stream}
	if len(tallies) > 0 {
		ext, err := json.Marshal(tallies)
		if err != nil {
			return nil, err
		}
		h.Extensions = Extensions{QuorumExtension: ext}
	}
	return a.opts.NewMessage(h, s)
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
