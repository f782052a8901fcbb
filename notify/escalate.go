package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
)

// StepKind names a follow-up the Escalator takes.
type StepKind string

// The follow-ups, in the order they come due.
const (
	// StepReminder reminds the channels that announced a request (or
	// that cover a review) that it still waits.
	StepReminder StepKind = "reminder"
	// StepEscalation hands it to a second group: the channels an
	// escalation names.
	StepEscalation StepKind = "escalation"
	// StepDeadline resolves a request nobody decided: expired, or denied
	// by the runtime with a recorded reason.
	StepDeadline StepKind = "deadline"
)

// Escalation is what the runtime does about the pending requests its
// Route covers when nobody decides them. Every duration counts from the
// request's created_at; zero means that step is not taken.
type Escalation struct {
	// Name identifies the escalation in the audit and in the receipts
	// (unique).
	Name  string
	Route Route
	// RemindAfter: remind the channels whose routes cover the request.
	RemindAfter time.Duration
	// EscalateAfter: announce the request on the EscalateTo channels.
	EscalateAfter time.Duration
	EscalateTo    []string
	// Deadline: resolve the request as AtDeadline says: OutcomeExpired
	// (reported as expired, never as a denial) or OutcomeDenied (a
	// denial by the runtime, with DenyReason in the receipt).
	Deadline   time.Duration
	AtDeadline aais.Outcome
	DenyReason string
}

// ReviewEscalation is what the runtime does about the post-execution
// reviews its Route covers (profiles and capabilities; a review has no
// risk level, so a MinRisk never matches one) that are overdue. The
// durations count from the review's due time; zero means that step is
// not taken. At the due time itself the gateway already raises the
// oversight_timeout.
type ReviewEscalation struct {
	Name          string
	Route         Route
	RemindAfter   time.Duration
	EscalateAfter time.Duration
	EscalateTo    []string
}

// OverdueReview is an open post-execution review past its due time.
type OverdueReview struct {
	ExchangeID string    `json:"exchange_id"`
	Mode       string    `json:"mode"`
	Profile    string    `json:"profile"`
	Capability string    `json:"capability"`
	Sender     string    `json:"sender"`
	MessageID  string    `json:"message_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	DueAt      time.Time `json:"due_at"`
	// RequestID is the approval request of the exchange, "" when it had
	// none; the follow-up's AAIS activity message is about it.
	RequestID string `json:"request_id,omitempty"`
	// InboxURL opens the inbox (the Escalator's Inbox when empty).
	InboxURL string `json:"inbox_url,omitempty"`
}

// FollowUp is what a channel is told about a reminder or an escalation.
type FollowUp struct {
	// ID identifies the follow-up for receivers to drop duplicates by
	// (a webhook's webhook-id): "ntf_" + the subject + "." + the step.
	ID     string    `json:"id"`
	Step   StepKind  `json:"step"`
	Policy string    `json:"policy"`
	DueAt  time.Time `json:"due_at"`
	// Message is the display text, the AAIS activity message's.
	Message string `json:"message"`
	// Request is the pending request's notice (nil for a review).
	Request *Notice `json:"request,omitempty"`
	// Review is the overdue review (nil for a request).
	Review *OverdueReview `json:"review,omitempty"`
	// Activity is the AAIS approval.activity message recorded for the
	// step (nil when there is no request to attach it to).
	Activity json.RawMessage `json:"activity,omitempty"`
}

// FollowUpChannel is a Channel that can deliver reminders and
// escalations (Webhook, Slack and Email are).
type FollowUpChannel interface {
	Channel
	FollowUp(ctx context.Context, f FollowUp) error
}

// Approvals is what the Escalator needs of the authority: an
// *aais.Authority.
type Approvals interface {
	Snapshot(ctx context.Context) (*aais.Message, error)
	State(ctx context.Context, id string) (aais.RequestState, error)
	Activity(ctx context.Context, requestID, message, stage string) (*aais.Message, error)
	ResolveAtDeadline(ctx context.Context, id string, o aais.Outcome, d aais.Deadline) (*aais.Message, bool, error)
}

// Steps are the once-only step markers in the store shared by every
// replica (exchange.Steps).
type Steps interface {
	ClaimStep(ctx context.Context, key string, now time.Time, lease time.Duration) (bool, error)
	StepDone(ctx context.Context, key string, now time.Time) error
	PurgeSteps(ctx context.Context, before time.Time) (int, error)
}

// Reviews lists the open reviews overdue at now, and tells whether one is
// still open.
type Reviews interface {
	OverdueReviews(ctx context.Context, now time.Time) ([]OverdueReview, error)
	ReviewOpen(ctx context.Context, exchangeID string) (bool, error)
}

// Recorder appends audit records: an *audit.Log.
type Recorder interface {
	Append(ctx context.Context, r audit.Record) (audit.Record, error)
}

// EscalatorOptions configures an Escalator.
type EscalatorOptions struct {
	Approvals Approvals
	// Reviews lists the overdue reviews; nil when ReviewEscalations is
	// empty.
	Reviews           Reviews
	Steps             Steps
	Audit             Recorder
	Channels          []Routed
	Escalations       []Escalation
	ReviewEscalations []ReviewEscalation
	Inbox             string
	Redaction         Redaction
	// Agent is the runtime's agent id, the audit records' recipient.
	Agent string
	// Now is the clock every step is due by (time.Now when nil).
	Now func() time.Time
	// Lease is how long a claimed step is left to the process that
	// claimed it before another may take it (DefaultLease when zero).
	Lease  time.Duration
	Logger *slog.Logger
}

// DefaultLease is how long a claimed step stays with its claimer.
const DefaultLease = 2 * time.Minute

// stepRetention is how long the step markers are kept: far longer than
// a request may wait (arsia.MaxApprovalWindow, a day).
const stepRetention = 90 * 24 * time.Hour

// Escalator reminds, escalates and resolves at a deadline the requests
// and reviews nobody decided in time. Every replica may run one on a
// shared store: each step is claimed in the store (Steps) before it is
// taken, so it is taken once; a step due while no process ran is taken
// by the next Tick.
type Escalator struct {
	o        EscalatorOptions
	log      *slog.Logger
	channels map[string]Routed

	purgeMu   sync.Mutex
	lastPurge time.Time

	// taken remembers the steps this escalator found claimed or done, and
	// when, so that it asks the store again only once a lease has passed:
	// a request waiting for hours costs one write per step per lease, not
	// one per pass.
	takenMu sync.Mutex
	taken   map[string]time.Time
}

// NewEscalator checks o and returns an Escalator; Run or Tick drives it.
func NewEscalator(o EscalatorOptions) (*Escalator, error) {
	if o.Approvals == nil || o.Steps == nil || o.Audit == nil {
		return nil, errors.New("notify: an escalator needs the approvals, the step store and the audit log")
	}
	if len(o.ReviewEscalations) > 0 && o.Reviews == nil {
		return nil, errors.New("notify: review escalations need the reviews")
	}
	e := &Escalator{o: o, log: o.Logger, channels: map[string]Routed{}, taken: map[string]time.Time{}}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.o.Now == nil {
		e.o.Now = time.Now
	}
	if e.o.Lease <= 0 {
		e.o.Lease = DefaultLease
	}
	for _, c := range o.Channels {
		e.channels[c.Channel.Name()] = c
	}
	names := map[string]bool{}
	checkTo := func(name string, to []string, after time.Duration) error {
		if (after > 0) != (len(to) > 0) {
			return fmt.Errorf("notify: escalation %s: escalate_after and escalate_to go together", name)
		}
		for _, ch := range to {
			c, ok := e.channels[ch]
			if !ok {
				return fmt.Errorf("notify: escalation %s: no channel named %q", name, ch)
			}
			if _, ok := c.Channel.(FollowUpChannel); !ok {
				return fmt.Errorf("notify: escalation %s: channel %s cannot deliver escalations", name, ch)
			}
		}
		return nil
	}
	check := func(name string, r Route, durations ...time.Duration) error {
		if name == "" || names[name] {
			return fmt.Errorf("notify: escalation names must be unique and non-empty (%q)", name)
		}
		names[name] = true
		if err := r.Check(); err != nil {
			return fmt.Errorf("notify: escalation %s: %w", name, err)
		}
		some := false
		for _, d := range durations {
			if d < 0 {
				return fmt.Errorf("notify: escalation %s: a negative duration", name)
			}
			some = some || d > 0
		}
		if !some {
			return fmt.Errorf("notify: escalation %s takes no step", name)
		}
		return nil
	}
	for _, p := range o.Escalations {
		if err := check(p.Name, p.Route, p.RemindAfter, p.EscalateAfter, p.Deadline); err != nil {
			return nil, err
		}
		if err := checkTo(p.Name, p.EscalateTo, p.EscalateAfter); err != nil {
			return nil, err
		}
		switch {
		case p.Deadline == 0 && (p.AtDeadline != "" || p.DenyReason != ""):
			return nil, fmt.Errorf("notify: escalation %s: at_deadline without a deadline", p.Name)
		case p.Deadline > 0 && p.AtDeadline != aais.OutcomeExpired && p.AtDeadline != aais.OutcomeDenied:
			return nil, fmt.Errorf("notify: escalation %s: at_deadline %q: want expire or deny", p.Name, p.AtDeadline)
		case p.AtDeadline == aais.OutcomeDenied && strings.TrimSpace(p.DenyReason) == "":
			return nil, fmt.Errorf("notify: escalation %s: a denial at the deadline needs a deny_reason", p.Name)
		case p.AtDeadline == aais.OutcomeExpired && p.DenyReason != "":
			return nil, fmt.Errorf("notify: escalation %s: deny_reason goes with at_deadline: deny", p.Name)
		}
		if err := ordered(p.Name, p.RemindAfter, p.EscalateAfter, p.Deadline); err != nil {
			return nil, err
		}
	}
	for _, p := range o.ReviewEscalations {
		if err := check(p.Name, p.Route, p.RemindAfter, p.EscalateAfter); err != nil {
			return nil, err
		}
		if err := checkTo(p.Name, p.EscalateTo, p.EscalateAfter); err != nil {
			return nil, err
		}
		if err := ordered(p.Name, p.RemindAfter, p.EscalateAfter); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// ordered refuses steps configured out of order (a reminder after the
// escalation, an escalation after the deadline): each later one given
// must come after the earlier ones given.
func ordered(name string, ds ...time.Duration) error {
	var last time.Duration
	for _, d := range ds {
		if d == 0 {
			continue
		}
		if d <= last {
			return fmt.Errorf("notify: escalation %s: the steps must come due in order (remind, escalate, deadline)", name)
		}
		last = d
	}
	return nil
}

// Run takes the due steps every interval (5 s when <= 0) until ctx ends.
func (e *Escalator) Run(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := e.Tick(ctx); err != nil && ctx.Err() == nil {
			e.log.ErrorContext(ctx, "escalations: a pass failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Tick takes every step due at the clock's now, once across every
// escalator sharing the Steps store. It is safe for concurrent use.
func (e *Escalator) Tick(ctx context.Context) error {
	now := e.o.Now()
	var errs []error
	if len(e.o.Escalations) > 0 {
		errs = append(errs, e.requests(ctx, now))
	}
	if len(e.o.ReviewEscalations) > 0 {
		errs = append(errs, e.reviews(ctx, now))
	}
	errs = append(errs, e.purge(ctx, now))
	e.forgetTaken(now)
	return errors.Join(errs...)
}

// purge forgets the step markers older than stepRetention, once an hour.
func (e *Escalator) purge(ctx context.Context, now time.Time) error {
	e.purgeMu.Lock()
	defer e.purgeMu.Unlock()
	if !e.lastPurge.IsZero() && now.Sub(e.lastPurge) < time.Hour {
		return nil
	}
	if _, err := e.o.Steps.PurgeSteps(ctx, now.Add(-stepRetention)); err != nil {
		return err
	}
	e.lastPurge = now
	return nil
}

// requests takes the due steps of the pending requests.
func (e *Escalator) requests(ctx context.Context, now time.Time) error {
	snap, err := e.o.Approvals.Snapshot(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for i := range snap.Snapshot.Pending {
		req := &snap.Snapshot.Pending[i]
		n := NewNotice(req, snap.Snapshot.AsOfSequence, e.o.Inbox, e.o.Redaction)
		idx := slices.IndexFunc(e.o.Escalations, func(p Escalation) bool { return p.Route.Matches(n) })
		if idx < 0 {
			continue
		}
		p := e.o.Escalations[idx]
		age := now.Sub(n.CreatedAt)
		if p.Deadline > 0 && age >= p.Deadline {
			// Past the deadline, reminding is pointless: it is resolved.
			errs = append(errs, e.deadline(ctx, now, p, n))
			continue
		}
		if p.RemindAfter > 0 && age >= p.RemindAfter {
			errs = append(errs, e.requestStep(ctx, now, p, n, StepReminder, n.CreatedAt.Add(p.RemindAfter)))
		}
		if p.EscalateAfter > 0 && age >= p.EscalateAfter {
			errs = append(errs, e.requestStep(ctx, now, p, n, StepEscalation, n.CreatedAt.Add(p.EscalateAfter)))
		}
	}
	return errors.Join(errs...)
}

// claim claims a step; ok false when another process has it or had it.
func (e *Escalator) claim(ctx context.Context, key string, now time.Time) (bool, error) {
	e.takenMu.Lock()
	at, seen := e.taken[key]
	e.takenMu.Unlock()
	if seen && now.Sub(at) < e.o.Lease && !now.Before(at) {
		return false, nil
	}
	ok, err := e.o.Steps.ClaimStep(ctx, key, now, e.o.Lease)
	if err == nil {
		// Claimed here or elsewhere: either way, not this pass's again.
		e.takenMu.Lock()
		e.taken[key] = now
		e.takenMu.Unlock()
	}
	return ok, err
}

// forgetTaken drops what claim remembers once its lease has passed.
func (e *Escalator) forgetTaken(now time.Time) {
	e.takenMu.Lock()
	defer e.takenMu.Unlock()
	for k, at := range e.taken {
		if now.Sub(at) >= e.o.Lease || now.Before(at) {
			delete(e.taken, k)
		}
	}
}

// requestStep reminds or escalates one pending request.
func (e *Escalator) requestStep(ctx context.Context, now time.Time, p Escalation, n Notice, step StepKind, due time.Time) error {
	key := n.RequestID + "/" + string(step)
	if ok, err := e.claim(ctx, key, now); err != nil || !ok {
		return err
	}
	// Decided between the snapshot and the claim: nothing to remind of.
	st, err := e.o.Approvals.State(ctx, n.RequestID)
	if err != nil {
		return err
	}
	if !st.Pending() {
		return e.o.Steps.StepDone(ctx, key, now)
	}
	waited := now.Sub(n.CreatedAt).Round(time.Second)
	msg := fmt.Sprintf("Reminder: this request has waited %s for a decision.", waited)
	targets := e.routed(n)
	if step == StepEscalation {
		msg = fmt.Sprintf("Escalated to %s: nobody decided this request in %s.", strings.Join(p.EscalateTo, ", "), waited)
		targets = p.EscalateTo
	}
	act, err := e.o.Approvals.Activity(ctx, n.RequestID, msg, string(step))
	if err != nil {
		return err
	}
	wire, err := aais.Marshal(act)
	if err != nil {
		return err
	}
	f := FollowUp{ID: "ntf_" + n.RequestID + "." + string(step), Step: step, Policy: p.Name, DueAt: due,
		Message: msg, Request: &n, Activity: wire}
	delivered, failed := e.deliver(ctx, targets, f)
	if len(delivered) == 0 && len(failed) > 0 {
		// Not marked done: after the lease, the next pass tries again.
		return fmt.Errorf("escalations: the %s of %s reached no channel", step, n.RequestID)
	}
	rec := audit.Escalation(audit.Subject{Capability: n.ActionName, Profile: n.Profile, Sender: n.Agent, Recipient: e.o.Agent},
		n.RequestID, string(step), now)
	rec.Details = map[string]any{"policy": p.Name, "due_at": due.UTC().Format(time.RFC3339), "channels": delivered,
		"failed_channels": failed, "message": msg, "activity_id": act.ID}
	if _, err := e.o.Audit.Append(ctx, rec); err != nil {
		return err
	}
	e.log.InfoContext(ctx, "escalations: "+string(step)+" sent", "request", n.RequestID, "policy", p.Name, "channels", delivered)
	return e.o.Steps.StepDone(ctx, key, now)
}

// deadline resolves a request past its escalation deadline.
func (e *Escalator) deadline(ctx context.Context, now time.Time, p Escalation, n Notice) error {
	key := n.RequestID + "/" + string(StepDeadline)
	if ok, err := e.claim(ctx, key, now); err != nil || !ok {
		return err
	}
	d := aais.Deadline{Policy: p.Name}
	if p.AtDeadline == aais.OutcomeDenied {
		d.Reason = p.DenyReason
	}
	receipt, resolved, err := e.o.Approvals.ResolveAtDeadline(ctx, n.RequestID, p.AtDeadline, d)
	if err != nil {
		return err
	}
	if resolved {
		code := asc.Timeout
		if p.AtDeadline == aais.OutcomeDenied {
			code = asc.PermissionDenied
		}
		details := map[string]any{"policy": p.Name, "deadline": n.CreatedAt.Add(p.Deadline).UTC().Format(time.RFC3339)}
		if d.Reason != "" {
			details["reason"] = d.Reason
		}
		rec := audit.Escalation(audit.Subject{Capability: n.ActionName, Profile: n.Profile, Sender: n.Agent, Recipient: e.o.Agent},
			n.RequestID, "deadline_"+string(p.AtDeadline), now)
		rec.ResolutionID, rec.ASCCode, rec.Details = receipt.Resolution.ID, int(code), details
		if _, err := e.o.Audit.Append(ctx, rec); err != nil {
			return err
		}
		e.log.InfoContext(ctx, "escalations: deadline passed", "request", n.RequestID, "policy", p.Name, "outcome", p.AtDeadline)
	}
	return e.o.Steps.StepDone(ctx, key, now)
}

// reviews takes the due steps of the overdue reviews.
func (e *Escalator) reviews(ctx context.Context, now time.Time) error {
	overdue, err := e.o.Reviews.OverdueReviews(ctx, now)
	if err != nil {
		return err
	}
	var errs []error
	for i := range overdue {
		r := overdue[i]
		if r.InboxURL == "" && e.o.Inbox != "" {
			r.InboxURL = strings.TrimRight(e.o.Inbox, "/") + "/"
		}
		n := Notice{Profile: r.Profile, ActionName: r.Capability}
		idx := slices.IndexFunc(e.o.ReviewEscalations, func(p ReviewEscalation) bool { return p.Route.Matches(n) })
		if idx < 0 {
			continue
		}
		p := e.o.ReviewEscalations[idx]
		late := now.Sub(r.DueAt)
		if p.RemindAfter > 0 && late >= p.RemindAfter {
			errs = append(errs, e.reviewStep(ctx, now, p, r, StepReminder, r.DueAt.Add(p.RemindAfter)))
		}
		if p.EscalateAfter > 0 && late >= p.EscalateAfter {
			errs = append(errs, e.reviewStep(ctx, now, p, r, StepEscalation, r.DueAt.Add(p.EscalateAfter)))
		}
	}
	return errors.Join(errs...)
}

// reviewStep reminds of or escalates one overdue review.
func (e *Escalator) reviewStep(ctx context.Context, now time.Time, p ReviewEscalation, r OverdueReview, step StepKind, due time.Time) error {
	key := "review/" + r.ExchangeID + "/" + string(step)
	if ok, err := e.claim(ctx, key, now); err != nil || !ok {
		return err
	}
	// Completed between the list and the claim: nothing to remind of.
	if open, err := e.o.Reviews.ReviewOpen(ctx, r.ExchangeID); err != nil || !open {
		if err != nil {
			return err
		}
		return e.o.Steps.StepDone(ctx, key, now)
	}
	late := now.Sub(r.DueAt).Round(time.Second)
	msg := fmt.Sprintf("Reminder: the %s review of %s is %s overdue.", r.Mode, r.Capability, late)
	var targets []string
	if step == StepEscalation {
		msg = fmt.Sprintf("Escalated to %s: the %s review of %s is %s overdue.", strings.Join(p.EscalateTo, ", "), r.Mode, r.Capability, late)
		targets = p.EscalateTo
	} else {
		targets = e.routed(Notice{Profile: r.Profile, ActionName: r.Capability})
	}
	f := FollowUp{ID: "ntf_review_" + r.ExchangeID + "." + string(step), Step: step, Policy: p.Name, DueAt: due,
		Message: msg, Review: &r}
	details := map[string]any{"policy": p.Name, "exchange_id": r.ExchangeID, "due_at": due.UTC().Format(time.RFC3339),
		"review_due_at": r.DueAt.UTC().Format(time.RFC3339), "message": msg}
	if r.RequestID != "" {
		// The exchange's approval request, resolved long ago, is what an
		// AAIS presenter knows it by.
		act, err := e.o.Approvals.Activity(ctx, r.RequestID, msg, "review_"+string(step))
		if err != nil && !errors.Is(err, aais.ErrUnknownRequest) {
			return err
		}
		if act != nil {
			if f.Activity, err = aais.Marshal(act); err != nil {
				return err
			}
			details["activity_id"] = act.ID
		}
	}
	delivered, failed := e.deliver(ctx, targets, f)
	if len(delivered) == 0 && len(failed) > 0 {
		return fmt.Errorf("escalations: the %s of review %s reached no channel", step, r.ExchangeID)
	}
	details["channels"], details["failed_channels"] = delivered, failed
	rec := audit.Escalation(audit.Subject{MessageID: r.MessageID, Capability: r.Capability, Profile: r.Profile, Oversight: r.Mode,
		Sender: r.Sender, Recipient: e.o.Agent}, r.RequestID, "review_"+string(step), now)
	rec.ASCCode, rec.Details = int(asc.Timeout), details
	if _, err := e.o.Audit.Append(ctx, rec); err != nil {
		return err
	}
	e.log.InfoContext(ctx, "escalations: review "+string(step)+" sent", "exchange", r.ExchangeID, "policy", p.Name, "channels", delivered)
	return e.o.Steps.StepDone(ctx, key, now)
}

// routed names the follow-up channels whose routes cover n.
func (e *Escalator) routed(n Notice) []string {
	var out []string
	for _, c := range e.o.Channels {
		if _, ok := c.Channel.(FollowUpChannel); ok && c.Route.Matches(n) {
			out = append(out, c.Channel.Name())
		}
	}
	return out
}

// deliver hands f to the named channels concurrently, and returns the
// names of those that took it and of those that did not, sorted.
func (e *Escalator) deliver(ctx context.Context, names []string, f FollowUp) (delivered, failed []string) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	delivered, failed = []string{}, []string{}
	for _, name := range names {
		ch, ok := e.channels[name].Channel.(FollowUpChannel)
		if !ok {
			continue
		}
		wg.Go(func() {
			err := ch.FollowUp(ctx, f)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				e.log.ErrorContext(ctx, "escalations: not delivered", "channel", name, "step", f.Step, "id", f.ID, "err", err)
				failed = append(failed, name)
				return
			}
			delivered = append(delivered, name)
		})
	}
	wg.Wait()
	slices.Sort(delivered)
	slices.Sort(failed)
	return delivered, failed
}
