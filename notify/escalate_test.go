package notify

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/store/memstore"
)

// memSteps is exchange.Steps in memory, with the same lease rule.
type memSteps struct {
	mu     sync.Mutex
	claims map[string]time.Time
	done   map[string]bool
}

func newMemSteps() *memSteps {
	return &memSteps{claims: map[string]time.Time{}, done: map[string]bool{}}
}

func (m *memSteps) ClaimStep(_ context.Context, key string, now time.Time, lease time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.claims[key]
	if m.done[key] || (ok && now.Sub(at) < lease) {
		return false, nil
	}
	m.claims[key] = now
	return true, nil
}

func (m *memSteps) StepDone(_ context.Context, key string, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done[key] = true
	return nil
}

func (m *memSteps) PurgeSteps(context.Context, time.Time) (int, error) { return 0, nil }

// fakeChannel records the follow-ups it is handed; fail makes it refuse
// them.
type fakeChannel struct {
	name string
	mu   sync.Mutex
	got  []FollowUp
	fail bool
}

func (f *fakeChannel) Name() string { return f.name }
func (f *fakeChannel) Announce(context.Context, Notice) (string, error) {
	return "", nil
}
func (f *fakeChannel) Resolve(context.Context, string, Notice, Resolved) error { return nil }
func (f *fakeChannel) FollowUp(_ context.Context, fu FollowUp) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("down")
	}
	f.got = append(f.got, fu)
	return nil
}

func (f *fakeChannel) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, g := range f.got {
		out = append(out, g.ID)
	}
	return out
}

// keptAudit is an audit log that keeps a copy of what it appended.
type keptAudit struct {
	log  *audit.Log
	mu   sync.Mutex
	recs []audit.Record
}

func (k *keptAudit) Append(ctx context.Context, r audit.Record) (audit.Record, error) {
	out, err := k.log.Append(ctx, r)
	if err == nil {
		k.mu.Lock()
		k.recs = append(k.recs, out)
		k.mu.Unlock()
	}
	return out, err
}

func (k *keptAudit) outcomes() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, r := range k.recs {
		if r.Kind == audit.KindEscalation {
			out = append(out, r.RequestID+" "+r.Outcome)
		}
	}
	return out
}

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

type escWorld struct {
	t       *testing.T
	clock   *aaistest.Clock
	auth    *aais.Authority
	steps   *memSteps
	audit   *keptAudit
	first   *fakeChannel // the reviewers' channel
	second  *fakeChannel // the group escalated to
	policy  Escalation
	reviews []OverdueReview

	mu       sync.Mutex
	reviewed map[string]bool
}

func newEscWorld(t *testing.T, p Escalation) *escWorld {
	clock := aaistest.NewClock(t0)
	auth, err := aais.NewAuthority(memstore.New(), &aais.AuthorityOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &escWorld{t: t, clock: clock, auth: auth, steps: newMemSteps(),
		audit: &keptAudit{log: audit.New(audit.NewMemory(), nil)},
		first: &fakeChannel{name: "reviewers"}, second: &fakeChannel{name: "managers"}, policy: p,
		reviewed: map[string]bool{}}
}

func (w *escWorld) OverdueReviews(_ context.Context, now time.Time) ([]OverdueReview, error) {
	var out []OverdueReview
	for _, r := range w.reviews {
		if !now.Before(r.DueAt) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (w *escWorld) ReviewOpen(_ context.Context, id string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.reviewed[id], nil
}

// escalator is one process's escalator on the world's state.
func (w *escWorld) escalator(reviews ...ReviewEscalation) *Escalator {
	w.t.Helper()
	return w.escalatorOn(w.steps, reviews...)
}

// escalatorOn is an escalator whose step markers are kept in steps.
func (w *escWorld) escalatorOn(steps Steps, reviews ...ReviewEscalation) *Escalator {
	w.t.Helper()
	e, err := NewEscalator(EscalatorOptions{Approvals: w.auth, Steps: steps, Audit: w.audit, Reviews: w,
		Channels: []Routed{
			{Channel: w.first},
			// Covers nothing by itself: it hears only of escalations.
			{Channel: w.second, Route: Route{Profiles: []string{"nobody"}}},
		},
		Escalations: []Escalation{w.policy}, ReviewEscalations: reviews, Now: w.clock.Now, Agent: "agent:custos",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		w.t.Fatal(err)
	}
	return e
}

func (w *escWorld) create(id string) *aais.Request {
	w.t.Helper()
	action, _ := json.Marshal(map[string]any{"kind": "tool.call", "name": "payments.send", "summary": "Pay 5", "arguments": map[string]any{"amount": 5}})
	ext, _ := json.Marshal(map[string]string{"profile": "DORA"})
	now := w.clock.Now()
	req, err := aais.NewRequest(aais.RequestParams{ID: id, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour),
		Origin: aais.Origin{Harness: "custos", SessionID: "agent:acme.bot", AgentID: "agent:acme.bot"},
		Action: json.RawMessage(action), Risk: aais.Risk{Level: aais.RiskHigh, Reasons: []string{"Moves money"}},
		Choices: []aais.Choice{{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"}},
		Extensions: aais.Extensions{"custos.dev/exchange": ext}})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, _, err := w.auth.Create(w.t.Context(), req); err != nil {
		w.t.Fatal(err)
	}
	return req
}

func (w *escWorld) tick(e *Escalator) {
	w.t.Helper()
	if err := e.Tick(w.t.Context()); err != nil {
		w.t.Fatal(err)
	}
}

func (w *escWorld) at(d time.Duration) {
	w.clock.Advance(t0.Add(d).Sub(w.clock.Now()))
}

func same(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

var payments = Escalation{Name: "payments", Route: Route{Capabilities: []string{"payments.*"}},
	RemindAfter: 10 * time.Minute, EscalateAfter: 30 * time.Minute, EscalateTo: []string{"managers"}}

// A reminder at N to the reviewers' channels, an escalation at M to the
// second group only, each once however often the escalator passes, each
// an audit record and an AAIS activity message; then the deadline.
func TestEscalationRemindEscalateDeadline(t *testing.T) {
	for _, tc := range []struct {
		at      aais.Outcome
		reason  string
		message string
	}{
		{at: aais.OutcomeExpired},
		{at: aais.OutcomeDenied, reason: "nobody decided within an hour", message: "Denied at the deadline: nobody decided within an hour"},
	} {
		t.Run(string(tc.at), func(t *testing.T) {
			p := payments
			p.Deadline, p.AtDeadline, p.DenyReason = time.Hour, tc.at, tc.reason
			w := newEscWorld(t, p)
			e := w.escalator()
			w.create("apr_1")
			for _, d := range []time.Duration{0, time.Minute, 10*time.Minute - time.Nanosecond} {
				w.at(d)
				w.tick(e)
			}
			if len(w.first.ids())+len(w.second.ids()) != 0 || len(w.audit.outcomes()) != 0 {
				t.Fatalf("before N: %v %v %v", w.first.ids(), w.second.ids(), w.audit.outcomes())
			}
			w.at(10 * time.Minute)
			w.tick(e)
			w.tick(e)
			w.at(29 * time.Minute)
			w.tick(e)
			if !same(w.first.ids(), []string{"ntf_apr_1.reminder"}) || len(w.second.ids()) != 0 {
				t.Fatalf("at N: first %v, second %v", w.first.ids(), w.second.ids())
			}
			f := w.first.got[0]
			if f.Step != StepReminder || f.Policy != "payments" || f.Request == nil || f.Request.RequestID != "apr_1" ||
				!f.DueAt.Equal(t0.Add(10*time.Minute)) {
				t.Fatalf("reminder = %+v", f)
			}
			act, err := aais.Parse(f.Activity)
			if err != nil || act.Type != aais.TypeActivity || act.Activity.RequestID != "apr_1" || act.Activity.Stage != "reminder" ||
				act.Activity.Message != f.Message {
				t.Fatalf("activity = %+v, %v", act, err)
			}
			w.at(30 * time.Minute)
			w.tick(e)
			w.tick(e)
			if !same(w.second.ids(), []string{"ntf_apr_1.escalation"}) || len(w.first.ids()) != 1 {
				t.Fatalf("at M: first %v, second %v", w.first.ids(), w.second.ids())
			}
			if g := w.second.got[0]; !strings.Contains(g.Message, "Escalated to managers") || g.Activity == nil {
				t.Fatalf("escalation = %+v", g)
			}
			if st, _ := w.auth.State(t.Context(), "apr_1"); !st.Pending() {
				t.Fatal("resolved before the deadline")
			}
			w.at(time.Hour)
			w.tick(e)
			w.tick(e)
			st, err := w.auth.State(t.Context(), "apr_1")
			if err != nil || st.Pending() {
				t.Fatalf("at the deadline: %+v, %v", st, err)
			}
			res := st.Resolution.Event.Resolution
			if res.Outcome != tc.at || (tc.message != "" && res.Message != tc.message) {
				t.Fatalf("receipt = %s %q", res.Outcome, res.Message)
			}
			want := []string{"apr_1 reminder", "apr_1 escalation", "apr_1 deadline_" + string(tc.at)}
			if !same(w.audit.outcomes(), want) {
				t.Fatalf("audit = %v, want %v", w.audit.outcomes(), want)
			}
			last := w.audit.recs[len(w.audit.recs)-1]
			if last.ResolutionID != res.ID || (tc.reason != "" && last.Details["reason"] != tc.reason) {
				t.Fatalf("deadline record = %+v", last)
			}
			if len(w.first.ids()) != 1 || len(w.second.ids()) != 1 {
				t.Fatalf("the deadline sent follow-ups: %v %v", w.first.ids(), w.second.ids())
			}
		})
	}
}

// A request decided before N gets no reminder, nor anything after.
func TestEscalationDecidedBeforeReminder(t *testing.T) {
	p := payments
	p.Deadline, p.AtDeadline, p.DenyReason = time.Hour, aais.OutcomeDenied, "too slow"
	w := newEscWorld(t, p)
	e := w.escalator()
	req := w.create("apr_1")
	w.at(9 * time.Minute)
	w.tick(e)
	dec, err := aais.NewDecision(req, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeOnce,
		Actor: aais.Actor{ID: "alice", Type: aais.ActorHuman}, DecidedAt: w.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.auth.Decide(t.Context(), dec, aais.Actor{}, nil); err != nil || m.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatalf("decide = %+v, %v", m, err)
	}
	for _, d := range []time.Duration{10 * time.Minute, 30 * time.Minute, 2 * time.Hour} {
		w.at(d)
		w.tick(e)
	}
	if len(w.first.ids())+len(w.second.ids()) != 0 || len(w.audit.outcomes()) != 0 {
		t.Fatalf("a decided request was followed up: %v %v %v", w.first.ids(), w.second.ids(), w.audit.outcomes())
	}
	if st, _ := w.auth.State(t.Context(), "apr_1"); st.Resolution.Event.Resolution.Outcome != aais.OutcomeApproved {
		t.Fatal("the deadline overrode a decision")
	}
}

// A reminder due while no process ran is sent by the next one, once; a
// process stopped after its claim and before StepDone leaves the step to
// another after the lease.
func TestEscalationAcrossRestarts(t *testing.T) {
	w := newEscWorld(t, payments)
	w.create("apr_1")
	w.at(25 * time.Minute) // the first process was down throughout
	w.tick(w.escalator())
	w.tick(w.escalator()) // restarted again
	if !same(w.first.ids(), []string{"ntf_apr_1.reminder"}) || len(w.audit.outcomes()) != 1 {
		t.Fatalf("after restarts: %v %v", w.first.ids(), w.audit.outcomes())
	}
	// A process claimed the escalation and stopped.
	w.at(30 * time.Minute)
	if ok, _ := w.steps.ClaimStep(t.Context(), "apr_1/escalation", w.clock.Now(), DefaultLease); !ok {
		t.Fatal("claim")
	}
	w.tick(w.escalator())
	if len(w.second.ids()) != 0 {
		t.Fatal("a step claimed within its lease was taken again")
	}
	w.at(30*time.Minute + DefaultLease)
	w.tick(w.escalator())
	w.tick(w.escalator())
	if !same(w.second.ids(), []string{"ntf_apr_1.escalation"}) {
		t.Fatalf("after the lease: %v", w.second.ids())
	}
}

// Two escalators on one step store, passing at once many times: each
// step once.
func TestEscalationTwoInstances(t *testing.T) {
	w := newEscWorld(t, payments)
	a, b := w.escalator(), w.escalator()
	for i := range 5 {
		w.create("apr_" + string(rune('a'+i)))
	}
	w.at(45 * time.Minute)
	var wg sync.WaitGroup
	for range 4 {
		for _, e := range []*Escalator{a, b} {
			wg.Go(func() {
				if err := e.Tick(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if len(w.first.ids()) != 5 || len(w.second.ids()) != 5 || len(w.audit.outcomes()) != 10 {
		t.Fatalf("first %v, second %v, audit %v", w.first.ids(), w.second.ids(), w.audit.outcomes())
	}
}

// A follow-up no channel took is not done: it is tried again after the
// lease, and recorded once it is delivered.
func TestEscalationRetriedWhenUndelivered(t *testing.T) {
	w := newEscWorld(t, payments)
	e := w.escalator()
	w.create("apr_1")
	w.first.fail = true
	w.at(10 * time.Minute)
	if err := e.Tick(t.Context()); err == nil {
		t.Fatal("an undelivered reminder was not reported")
	}
	if len(w.audit.outcomes()) != 0 {
		t.Fatalf("undelivered but recorded: %v", w.audit.outcomes())
	}
	w.first.fail = false
	w.tick(e)
	if len(w.first.ids()) != 0 {
		t.Fatal("retried within the lease")
	}
	w.at(10*time.Minute + DefaultLease)
	w.tick(e)
	if !same(w.first.ids(), []string{"ntf_apr_1.reminder"}) || len(w.audit.outcomes()) != 1 {
		t.Fatalf("after the lease: %v %v", w.first.ids(), w.audit.outcomes())
	}
}

// An overdue post-execution review is reminded of and escalated, counted
// from its due time, each step once and audited.
func TestReviewEscalation(t *testing.T) {
	w := newEscWorld(t, payments)
	w.reviews = []OverdueReview{{ExchangeID: "exc_1", Mode: "post_execution_review", Profile: "DORA",
		Capability: "payments.send", Sender: "agent:acme.bot", CreatedAt: t0, DueAt: t0.Add(time.Hour)}}
	e := w.escalator(ReviewEscalation{Name: "late-reviews", RemindAfter: time.Minute, EscalateAfter: 2 * time.Hour,
		EscalateTo: []string{"managers"}})
	w.at(time.Hour) // due, not yet a minute late
	w.tick(e)
	if len(w.first.ids()) != 0 {
		t.Fatal("reminded before remind_after")
	}
	w.at(time.Hour + time.Minute)
	w.tick(e)
	w.tick(e)
	w.at(3 * time.Hour)
	w.tick(e)
	w.tick(e)
	if !same(w.first.ids(), []string{"ntf_review_exc_1.reminder"}) || !same(w.second.ids(), []string{"ntf_review_exc_1.escalation"}) {
		t.Fatalf("first %v, second %v", w.first.ids(), w.second.ids())
	}
	if g := w.second.got[0]; g.Review == nil || g.Review.ExchangeID != "exc_1" || !strings.Contains(g.Message, "overdue") {
		t.Fatalf("escalation = %+v", g)
	}
	if !same(w.audit.outcomes(), []string{" review_reminder", " review_escalation"}) {
		t.Fatalf("audit = %v", w.audit.outcomes())
	}
	if d := w.audit.recs[1].Details; d["exchange_id"] != "exc_1" || d["policy"] != "late-reviews" {
		t.Fatalf("details = %v", d)
	}
	// A review completed (still listed by a lagging list) is not
	// escalated.
	w.reviews = append(w.reviews, OverdueReview{ExchangeID: "exc_2", Mode: "post_execution_review", Profile: "DORA",
		Capability: "payments.send", CreatedAt: t0, DueAt: t0.Add(time.Hour)})
	w.mu.Lock()
	w.reviewed["exc_2"] = true
	w.mu.Unlock()
	w.tick(e)
	if len(w.first.ids()) != 1 || len(w.second.ids()) != 1 || len(w.audit.outcomes()) != 2 {
		t.Fatalf("a completed review was followed up: %v %v", w.first.ids(), w.second.ids())
	}
}

func TestNewEscalatorRefusesBadPolicies(t *testing.T) {
	ok := Escalation{Name: "p", RemindAfter: time.Minute}
	for name, tc := range map[string]struct {
		e []Escalation
		r []ReviewEscalation
	}{
		"no step":             {e: []Escalation{{Name: "p"}}},
		"no name":             {e: []Escalation{{RemindAfter: time.Minute}}},
		"two names":           {e: []Escalation{ok, ok}},
		"unknown channel":     {e: []Escalation{{Name: "p", EscalateAfter: time.Minute, EscalateTo: []string{"nope"}}}},
		"escalate nowhere":    {e: []Escalation{{Name: "p", EscalateAfter: time.Minute}}},
		"to without after":    {e: []Escalation{{Name: "p", RemindAfter: time.Minute, EscalateTo: []string{"managers"}}}},
		"out of order":        {e: []Escalation{{Name: "p", RemindAfter: time.Hour, EscalateAfter: time.Minute, EscalateTo: []string{"managers"}}}},
		"deadline first":      {e: []Escalation{{Name: "p", RemindAfter: time.Hour, Deadline: time.Minute, AtDeadline: aais.OutcomeExpired}}},
		"deny without reason": {e: []Escalation{{Name: "p", Deadline: time.Hour, AtDeadline: aais.OutcomeDenied}}},
		"expire with reason":  {e: []Escalation{{Name: "p", Deadline: time.Hour, AtDeadline: aais.OutcomeExpired, DenyReason: "x"}}},
		"approve at deadline": {e: []Escalation{{Name: "p", Deadline: time.Hour, AtDeadline: aais.OutcomeApproved}}},
		"deadline without at": {e: []Escalation{{Name: "p", Deadline: time.Hour}}},
		"at without deadline": {e: []Escalation{{Name: "p", RemindAfter: time.Minute, AtDeadline: aais.OutcomeExpired}}},
		"negative":            {e: []Escalation{{Name: "p", RemindAfter: -time.Minute, Deadline: time.Hour, AtDeadline: aais.OutcomeExpired}}},
		"bad route":           {e: []Escalation{{Name: "p", RemindAfter: time.Minute, Route: Route{Capabilities: []string{"["}}}}},
		"review no step":      {r: []ReviewEscalation{{Name: "r"}}},
		"review name reused":  {e: []Escalation{ok}, r: []ReviewEscalation{{Name: "p", RemindAfter: time.Minute}}},
		"review unknown chan": {r: []ReviewEscalation{{Name: "r", EscalateAfter: time.Minute, EscalateTo: []string{"x"}}}},
		"review out of order": {r: []ReviewEscalation{{Name: "r", RemindAfter: time.Hour, EscalateAfter: time.Hour, EscalateTo: []string{"managers"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			w := newEscWorld(t, payments)
			_, err := NewEscalator(EscalatorOptions{Approvals: w.auth, Steps: w.steps, Audit: w.audit, Reviews: w,
				Channels: []Routed{{Channel: w.first}, {Channel: w.second}}, Escalations: tc.e, ReviewEscalations: tc.r})
			if err == nil {
				t.Fatal("accepted")
			}
		})
	}
	w := newEscWorld(t, payments)
	if _, err := NewEscalator(EscalatorOptions{Approvals: w.auth, Audit: w.audit}); err == nil {
		t.Fatal("accepted without steps")
	}
	if _, err := NewEscalator(EscalatorOptions{Approvals: w.auth, Steps: w.steps, Audit: w.audit,
		ReviewEscalations: []ReviewEscalation{{Name: "r", RemindAfter: time.Minute}}}); err == nil {
		t.Fatal("review escalations accepted without reviews")
	}
}

// The channels' own formats: a signed webhook of type approval.reminder
// carrying the AAIS activity message, a Slack message with the request's
// buttons for the group escalated to, a reply email that decides nothing.
func TestFollowUpOnTheChannels(t *testing.T) {
	world := newWorld(t)
	w := newEscWorld(t, payments)
	email, err := NewEmail(EmailOptions{Name: "mail", Addr: world.smtp.addr(), From: "custos@example.test",
		To: []string{"reviewers@example.test"}, Retry: &Retry{Attempts: 2, Backoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEscalator(EscalatorOptions{Approvals: w.auth, Steps: w.steps, Audit: w.audit, Now: w.clock.Now,
		Logger: slog.New(slog.DiscardHandler), Inbox: "https://custos.example",
		Channels: []Routed{{Channel: world.hook}, {Channel: email},
			{Channel: world.slackCh, Route: Route{Profiles: []string{"nobody"}}}},
		Escalations: []Escalation{{Name: "payments", RemindAfter: 10 * time.Minute, EscalateAfter: 30 * time.Minute,
			EscalateTo: []string{"ops"}}}})
	if err != nil {
		t.Fatal(err)
	}
	w.create("apr_1")
	w.at(10 * time.Minute)
	w.tick(e)
	ev, ok := world.sink.got("ntf_apr_1.reminder")
	if !ok || ev.Type != "approval.reminder" {
		t.Fatalf("webhook = %+v, %v", ev, ok)
	}
	var f FollowUp
	if err := json.Unmarshal(ev.Data, &f); err != nil || f.Request == nil || f.Request.InboxURL == "" {
		t.Fatalf("data = %s, %v", ev.Data, err)
	}
	if act, err := aais.Parse(f.Activity); err != nil || act.Activity.RequestID != "apr_1" {
		t.Fatalf("activity = %v, %v", act, err)
	}
	msgs := world.smtp.messages()
	if len(msgs) != 1 || !strings.Contains(msgs[0].Data, "Reminder") || !strings.Contains(msgs[0].Data, "In-Reply-To: <ntf_apr_1.requested@custos.invalid>") {
		t.Fatalf("email = %+v", msgs)
	}
	if len(world.slack.of("chat.postMessage")) != 0 {
		t.Fatal("the escalation channel heard of a reminder")
	}
	w.at(30 * time.Minute)
	w.tick(e)
	posts := world.slack.of("chat.postMessage")
	if len(posts) != 1 || !strings.Contains(posts[0].Raw, "Escalated to ops") || !strings.Contains(posts[0].Raw, slackApprove) ||
		posts[0].Args["channel"] != "C0PS" {
		t.Fatalf("slack = %+v", posts)
	}
	if _, ok := world.sink.got("ntf_apr_1.escalation"); ok {
		t.Fatal("the reviewers' webhook heard of the escalation")
	}
}

// countingSteps counts the claims that reach the store.
type countingSteps struct {
	*memSteps
	mu     sync.Mutex
	claims int
}

func (c *countingSteps) ClaimStep(ctx context.Context, key string, now time.Time, lease time.Duration) (bool, error) {
	c.mu.Lock()
	c.claims++
	c.mu.Unlock()
	return c.memSteps.ClaimStep(ctx, key, now, lease)
}

// A request waiting long past its reminder costs the store one claim per
// step per lease, not one per pass.
func TestEscalationAsksTheStoreOncePerLease(t *testing.T) {
	w := newEscWorld(t, Escalation{Name: "p", RemindAfter: time.Minute})
	steps := &countingSteps{memSteps: w.steps}
	e := w.escalatorOn(steps)
	w.create("apr_1")
	w.at(time.Minute)
	for range 20 {
		w.tick(e)
		w.clock.Advance(5 * time.Second) // 20 passes, 100 s: within one lease
	}
	if steps.claims != 1 || len(w.first.ids()) != 1 {
		t.Fatalf("%d claims, %d reminders; want 1 and 1", steps.claims, len(w.first.ids()))
	}
	w.clock.Advance(DefaultLease)
	w.tick(e)
	if steps.claims != 2 || len(w.first.ids()) != 1 {
		t.Fatalf("after the lease: %d claims, %d reminders; want 2 and 1", steps.claims, len(w.first.ids()))
	}
}
