package aaistest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
)

// The cases below check remembered decisions (rules), request owners and
// stores reopened by another handle or after a restart.

func testEmptyStore(t *testing.T, f *fixture) {
	pending, asOf, err := f.store.Pending(f.ctx)
	if err != nil || len(pending) != 0 || asOf != 0 {
		t.Fatalf("Pending = %d requests as of %d, %v; want none as of 0", len(pending), asOf, err)
	}
	p := f.events(t, 0)
	if len(p.Events) != 0 || p.Gap || p.Latest != 0 || p.StoreID == "" {
		t.Fatalf("EventsAfter(0) on an empty store: %d events, gap %v, latest %d, store id %q", len(p.Events), p.Gap, p.Latest, p.StoreID)
	}
	if rules := f.rules(t); len(rules) != 0 {
		t.Fatalf("Rules = %d, want none", len(rules))
	}
	if _, err := f.store.RequestState(f.ctx, "apr_none"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("RequestState(unknown) err = %v, want ErrUnknownRequest", err)
	}
	if _, _, err := f.store.RevokeRule(f.ctx, "rul_none", f.clock.Now(), Actor); !errors.Is(err, aais.ErrUnknownRule) {
		t.Fatalf("RevokeRule(unknown) err = %v, want ErrUnknownRule", err)
	}
}

func testEventsPageLimit(t *testing.T, f *fixture) {
	for i := range 5 {
		f.create(t, fmt.Sprint(i), reqOpt{})
	}
	p, err := f.store.EventsAfter(f.ctx, 1, 2)
	if err != nil {
		t.Fatalf("EventsAfter(1, 2): %v", err)
	}
	if len(p.Events) != 2 || p.Events[0].Sequence != 2 || p.Events[1].Sequence != 3 || p.Latest != 5 || p.Gap {
		t.Fatalf("EventsAfter(1, 2): %d events from %v, latest %d, gap %v; want 2 and 3 of 5", len(p.Events), seqs(p.Events), p.Latest, p.Gap)
	}
}

func seqs(ms []*aais.Message) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Sequence
	}
	return out
}

func (f *fixture) rules(t *testing.T) aais.RuleSet {
	t.Helper()
	rs, err := f.store.Rules(f.ctx)
	if err != nil {
		t.Fatalf("Rules: %v", err)
	}
	return rs
}

// submit submits r and fails on an error.
func (f *fixture) submit(t *testing.T, r *aais.Request) aais.Submission {
	t.Helper()
	s, err := f.auth.Submit(f.ctx, r)
	if err != nil {
		t.Fatalf("Submit(%s): %v", r.ID, err)
	}
	return s
}

// sessionRule approves request n of session s for the session and returns
// the rule it saved.
func (f *fixture) sessionRule(t *testing.T, n, session string) (*aais.Request, *aais.Message, *aais.Rule) {
	t.Helper()
	r, _ := f.create(t, n, reqOpt{session: session})
	m := f.decide(t, f.decision(t, r, aais.Approve, aais.ScopeSession, ""), nil)
	wantOutcome(t, m, aais.OutcomeApproved, aais.ScopeSession)
	for _, rule := range f.rules(t) {
		if rule.RequestID == r.ID {
			return r, m, rule
		}
	}
	t.Fatalf("no rule saved for the session approval of %s", r.ID)
	return nil, nil, nil
}

func testApproveOnceNoRule(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	f.decide(t, f.decision(t, r, aais.Approve, aais.ScopeOnce, ""), nil)
	d, _ := f.create(t, "2", reqOpt{})
	f.decide(t, f.decision(t, d, aais.Deny, aais.ScopeOnce, ""), nil)
	if rules := f.rules(t); len(rules) != 0 {
		t.Fatalf("%d rules saved by once approvals and denials, want none", len(rules))
	}
	if s := f.submit(t, f.request(t, "3", reqOpt{})); s.Receipt != nil || s.Rule != nil {
		t.Fatal("a request was approved without a rule")
	}
}

func testSessionRule(t *testing.T, f *fixture) {
	r, m, rule := f.sessionRule(t, "1", "s-1")
	if len(f.rules(t)) != 1 {
		t.Fatalf("%d rules, want 1", len(f.rules(t)))
	}
	switch {
	case rule.Scope != aais.ScopeSession, rule.DecisionID != m.Resolution.DecisionID, rule.ResolutionID != m.Resolution.ID,
		rule.ActionDigest != r.ActionDigest, rule.Actor != Actor, rule.Origin.SessionID != "s-1",
		!rule.CreatedAt.Equal(f.clock.Now()), rule.Revoked():
		t.Fatalf("rule does not record its approval: %+v", rule)
	}
	if _, ok := rule.Parsed(); !ok {
		t.Fatal("stored rule cannot be matched")
	}
	var prefix string
	if err := json.Unmarshal(rule.Constraints()["command_prefix"], &prefix); err != nil || prefix != "node --check " {
		t.Fatalf("constraints not kept: command_prefix %q (%v)", prefix, err)
	}
}

func testRuleAutoApproves(t *testing.T, f *fixture) {
	_, _, rule := f.sessionRule(t, "1", "s-1")
	before := f.events(t, 0).Latest
	f.clock.Advance(time.Second)

	s := f.submit(t, f.request(t, "2", reqOpt{session: "s-1"}))
	if !s.Created || s.Receipt == nil || s.Rule == nil || s.Rule.ID != rule.ID {
		t.Fatalf("matching request: created %v, receipt %v, rule %v; want approved by %s", s.Created, s.Receipt != nil, s.Rule, rule.ID)
	}
	wantOutcome(t, s.Receipt, aais.OutcomeApproved, aais.ScopeSession)
	res := s.Receipt.Resolution
	var ext struct {
		RuleID     string `json:"rule_id"`
		RequestID  string `json:"request_id"`
		ApprovedBy string `json:"approved_by"`
	}
	if err := json.Unmarshal(res.Extensions[aais.RuleExtension], &ext); err != nil || ext.RuleID != rule.ID ||
		ext.RequestID != rule.RequestID || ext.ApprovedBy != Actor.ID {
		t.Fatalf("receipt extension %s = %s (%v); want rule %s", aais.RuleExtension, res.Extensions[aais.RuleExtension], err, rule.ID)
	}
	if res.DecisionID != "" || res.RequestID != "apr_2" || !res.ResolvedAt.Time().Equal(f.clock.Now()) {
		t.Fatalf("automatic receipt: decision %q request %s resolved %s", res.DecisionID, res.RequestID, res.ResolvedAt)
	}
	if s.Event.Sequence != before+1 || s.Receipt.Sequence != before+2 {
		t.Fatalf("events %d and %d, want %d and %d", s.Event.Sequence, s.Receipt.Sequence, before+1, before+2)
	}
	f.wantResolved(t, "apr_2", s.Receipt)
	p := f.events(t, before)
	if len(p.Events) != 2 || p.Events[0].Type != aais.TypeRequested || p.Events[1].Type != aais.TypeResolved {
		t.Fatalf("events after the automatic approval: %d", len(p.Events))
	}
	// Submitting it again changes nothing and reports the receipt.
	again := f.submit(t, f.request(t, "2", reqOpt{session: "s-1"}))
	if again.Created || again.Rule != nil || again.Receipt == nil || wire(t, again.Receipt) != wire(t, s.Receipt) {
		t.Fatal("repeated Submit of an automatically approved request did not return its receipt")
	}

	// Not covered: another session, another command.
	for _, o := range []reqOpt{{session: "s-2"}, {session: "s-1", command: "rm -rf /workspace"}} {
		r := f.request(t, "x-"+o.session+fmt.Sprint(len(o.command)), o)
		if s := f.submit(t, r); s.Receipt != nil || s.Rule != nil || !f.state(t, r.ID).Pending() {
			t.Fatalf("request %+v approved by a rule that does not cover it", o)
		}
	}
	// A session rule without an expiry keeps matching as time passes.
	f.clock.Advance(48 * time.Hour)
	if s := f.submit(t, f.request(t, "3", reqOpt{session: "s-1"})); s.Receipt == nil {
		t.Fatal("a session rule without expiry stopped matching")
	}
}

func testRevokeRule(t *testing.T, f *fixture) {
	_, _, rule := f.sessionRule(t, "1", "s-1")
	admin := aais.Actor{ID: "admin", Type: aais.ActorHuman, AuthenticatedBy: "conformance"}
	f.clock.Advance(time.Minute)
	got, revoked, err := f.auth.RevokeRule(f.ctx, rule.ID, admin)
	if err != nil || !revoked || !got.Revoked() || got.RevokedBy != admin || !got.RevokedAt.Equal(f.clock.Now()) {
		t.Fatalf("RevokeRule = %+v, %v, %v", got, revoked, err)
	}
	f.clock.Advance(time.Minute)
	again, revoked, err := f.auth.RevokeRule(f.ctx, rule.ID, Actor)
	if err != nil || revoked || !again.RevokedAt.Equal(got.RevokedAt) || again.RevokedBy != admin {
		t.Fatalf("second RevokeRule = %+v, %v, %v; want the first revocation unchanged", again, revoked, err)
	}
	if rs := f.rules(t); len(rs) != 1 || !rs[0].Revoked() || len(rs.Active(f.clock.Now())) != 0 {
		t.Fatal("Rules does not list the revoked rule as revoked")
	}
	r := f.request(t, "2", reqOpt{session: "s-1"})
	if s := f.submit(t, r); s.Receipt != nil || !f.state(t, r.ID).Pending() {
		t.Fatal("a revoked rule approved a request")
	}
	if _, _, err := f.auth.RevokeRule(f.ctx, "rul_unknown", admin); !errors.Is(err, aais.ErrUnknownRule) {
		t.Fatalf("RevokeRule(unknown) err = %v, want ErrUnknownRule", err)
	}
}

// testRuleRefusedAtWrite: an automatic approval prepared with a rule that
// is revoked (or never existed) before the write is refused whole.
func testRuleRefusedAtWrite(t *testing.T, f *fixture) {
	_, _, rule := f.sessionRule(t, "1", "s-1")
	if _, _, err := f.store.RevokeRule(f.ctx, rule.ID, f.clock.Now(), Actor); err != nil {
		t.Fatal(err)
	}
	before := f.events(t, 0).Latest
	for _, tc := range []struct {
		ruleID string
		want   error
	}{{rule.ID, aais.ErrRuleInactive}, {"rul_never_saved", aais.ErrUnknownRule}} {
		req := f.request(t, "2", reqOpt{session: "s-1"})
		ev, err := aais.NewMessage(aais.Header{OccurredAt: f.clock.Now(), Stream: "conformance.approvals"}, req)
		if err != nil {
			t.Fatal(err)
		}
		res, err := aais.NewResolution(aais.ResolutionParams{Request: req, Outcome: aais.OutcomeApproved,
			EffectiveScope: aais.ScopeSession, ResolvedAt: f.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := aais.NewMessage(aais.Header{OccurredAt: f.clock.Now(), Stream: "conformance.approvals"}, res)
		if err != nil {
			t.Fatal(err)
		}
		rec := aais.RequestRecord{Event: ev, Fingerprint: "fp-2",
			Resolution: &aais.ResolutionRecord{Event: rev, ByRule: tc.ruleID}}
		if _, _, err := f.store.CreateRequestIfAbsent(f.ctx, rec); !errors.Is(err, tc.want) {
			t.Fatalf("automatic approval by %s: err = %v, want %v", tc.ruleID, err, tc.want)
		}
		if _, err := f.store.RequestState(f.ctx, req.ID); !errors.Is(err, aais.ErrUnknownRequest) {
			t.Fatalf("refused automatic approval left request %s behind (err %v)", req.ID, err)
		}
		if p := f.events(t, 0); p.Latest != before {
			t.Fatalf("refused automatic approval wrote events: latest %d, want %d", p.Latest, before)
		}
	}
}

func testConcurrentRules(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	const deciders = 20
	var wg sync.WaitGroup
	errs := make([]error, deciders)
	for i := range deciders {
		d := f.decision(t, r, aais.Approve, aais.ScopeSession, fmt.Sprintf("dec_%d", i))
		wg.Go(func() { _, errs[i] = f.auth.Decide(f.ctx, d, Actor, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("decider %d: %v", i, err)
		}
	}
	rules := f.rules(t)
	if len(rules) != 1 {
		t.Fatalf("%d rules saved by %d racing approvals of one request, want 1", len(rules), deciders)
	}
	if st := f.state(t, r.ID); rules[0].ResolutionID != st.Resolution.Event.Resolution.ID {
		t.Fatal("the saved rule does not come from the recorded approval")
	}
}

func testCancelOwnedRevokes(t *testing.T, f *fixture) {
	_, _, mine := f.sessionRule(t, "1", "s-1")
	_, _, other := f.sessionRule(t, "2", "s-2")
	pending, _ := f.create(t, "3", reqOpt{session: "s-1", command: "make test"})
	got, err := f.auth.CancelOwned(f.ctx, aais.Owner{SessionID: "s-1"})
	if err != nil || len(got) != 1 || got[0].Resolution.RequestID != pending.ID {
		t.Fatalf("CancelOwned = %d receipts, %v; want %s cancelled", len(got), err, pending.ID)
	}
	for _, r := range f.rules(t) {
		switch r.ID {
		case mine.ID:
			if !r.Revoked() || r.RevokedBy != aais.RuntimeActor {
				t.Fatalf("the ended session's rule is not revoked by the runtime: %+v", r)
			}
		case other.ID:
			if r.Revoked() {
				t.Fatal("another session's rule was revoked")
			}
		}
	}
	if s := f.submit(t, f.request(t, "4", reqOpt{session: "s-1"})); s.Receipt != nil {
		t.Fatal("a rule of an ended session approved a request")
	}
}

func testOwner(t *testing.T, f *fixture) {
	owner := aais.ProcessIdentity{PID: 4242, StartTime: 1767225600.25, HostID: "host-conformance"}
	var mu sync.Mutex
	alive := true
	a, err := aais.NewAuthority(f.store, &aais.AuthorityOptions{Now: f.clock.Now, Stream: "conformance.approvals",
		Owner: &owner,
		Liveness: func(p aais.ProcessIdentity) aais.Liveness {
			mu.Lock()
			defer mu.Unlock()
			if p != owner {
				return aais.LivenessUnknown
			}
			if alive {
				return aais.LivenessAlive
			}
			return aais.LivenessDead
		}})
	if err != nil {
		t.Fatal(err)
	}
	owned := f.request(t, "owned", reqOpt{})
	if _, _, err := a.Create(f.ctx, owned); err != nil {
		t.Fatal(err)
	}
	unowned, _ := f.create(t, "unowned", reqOpt{})
	if got := f.state(t, owned.ID).Request.Owner; got == nil || *got != owner {
		t.Fatalf("stored owner = %+v, want %+v", got, owner)
	}
	if got := f.state(t, unowned.ID).Request.Owner; got != nil {
		t.Fatalf("owner %+v recorded for a request created without one", got)
	}
	pending, _, err := f.store.Pending(f.ctx)
	if err != nil || len(pending) != 2 || pending[0].Owner == nil || *pending[0].Owner != owner || pending[1].Owner != nil {
		t.Fatalf("Pending does not return the owners: %v", err)
	}

	mu.Lock()
	alive = false
	mu.Unlock()
	if _, err := a.Decide(f.ctx, f.decision(t, owned, aais.Approve, aais.ScopeOnce, ""), Actor, nil); !errors.Is(err, aais.ErrOwnerStopped) {
		t.Fatalf("approving a request whose owner is dead: err = %v, want ErrOwnerStopped", err)
	}
	if !f.state(t, owned.ID).Pending() {
		t.Fatal("a refused approval changed the request")
	}
	snap, err := a.Snapshot(f.ctx)
	if err != nil || len(snap.Snapshot.Pending) != 1 || snap.Snapshot.Pending[0].ID != unowned.ID {
		t.Fatalf("snapshot lists a dead owner's request: %v", err)
	}
	got, err := a.CancelOrphaned(f.ctx)
	if err != nil || len(got) != 1 || got[0].Resolution.RequestID != owned.ID {
		t.Fatalf("CancelOrphaned = %d receipts, %v; want %s", len(got), err, owned.ID)
	}
	wantOutcome(t, got[0], aais.OutcomeCancelled, "")
	if !f.state(t, unowned.ID).Pending() {
		t.Fatal("CancelOrphaned cancelled a request without an owner")
	}
}

// other returns a second handle on f's storage, or skips.
func (f *fixture) other(t *testing.T) *fixture {
	t.Helper()
	if f.reopen == nil {
		t.Skip("the backend's storage does not outlive its handle (Backend.Reopen is nil)")
	}
	s := f.reopen(t, f.store)
	if s == nil {
		t.Fatal("Backend.Reopen returned nil")
	}
	a, err := aais.NewAuthority(s, &aais.AuthorityOptions{Now: f.clock.Now, Stream: "conformance.approvals"})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{reopen: f.reopen, store: s, clock: f.clock, auth: a, ctx: f.ctx}
}

func testSecondHandle(t *testing.T, f *fixture) {
	g := f.other(t)
	r, ev := f.create(t, "1", reqOpt{})
	if got := g.state(t, r.ID); !got.Pending() || wire(t, got.Request.Event) != wire(t, ev) {
		t.Fatal("the second handle does not see the request")
	}
	m := g.decide(t, g.decision(t, r, aais.Approve, aais.ScopeSession, ""), nil)
	f.wantResolved(t, r.ID, m)
	if len(f.rules(t)) != 1 {
		t.Fatal("the first handle does not see the rule saved through the second")
	}
	r2, _ := g.create(t, "2", reqOpt{command: "make lint"})
	if p := f.events(t, 0); p.Latest != 3 || len(p.Events) != 3 || p.StoreID != g.events(t, 0).StoreID {
		t.Fatalf("handles disagree: latest %d", p.Latest)
	}
	f.decide(t, f.decision(t, r2, aais.Deny, aais.ScopeOnce, ""), nil)
	if g.state(t, r2.ID).Pending() {
		t.Fatal("the second handle does not see the denial")
	}
}

func testRestart(t *testing.T, f *fixture) {
	_, _, rule := f.sessionRule(t, "1", "s-1")
	pending, _ := f.create(t, "2", reqOpt{command: "make deploy"})
	id := f.events(t, 0).StoreID
	g := f.other(t)
	if c, ok := f.store.(interface{ Close() error }); ok {
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	list, asOf, err := g.store.Pending(g.ctx)
	if err != nil || len(list) != 1 || list[0].Event.Request.ID != pending.ID || asOf != 3 {
		t.Fatalf("after restart Pending = %d as of %d, %v; want %s as of 3", len(list), asOf, err, pending.ID)
	}
	if rs := g.rules(t); len(rs) != 1 || rs[0].ID != rule.ID || rs[0].Revoked() {
		t.Fatal("after restart the rule is gone or changed")
	}
	if p := g.events(t, 0); p.StoreID != id || p.Latest != 3 {
		t.Fatalf("after restart store id %q latest %d, want %q and 3", p.StoreID, p.Latest, id)
	}
	if s := g.submit(t, g.request(t, "3", reqOpt{session: "s-1"})); s.Receipt == nil || s.Rule.ID != rule.ID {
		t.Fatal("after restart the rule approves nothing")
	}
}

func testWaitAcrossHandles(t *testing.T, f *fixture) {
	g := f.other(t)
	r, _ := f.create(t, "1", reqOpt{})
	var (
		wg      sync.WaitGroup
		got     *aais.Message
		waitErr error
	)
	wg.Go(func() { got, waitErr = f.auth.Wait(f.ctx, r.ID, 5*time.Millisecond) })
	m := g.decide(t, g.decision(t, r, aais.Deny, aais.ScopeOnce, ""), nil)
	wg.Wait()
	if waitErr != nil || got == nil || wire(t, got) != wire(t, m) {
		t.Fatalf("Wait = %v, %v; want the denial recorded through the other handle", got, waitErr)
	}
}

// testViewRebuild: a presenter that restores from a snapshot taken mid-way
// and applies the events after it sees exactly the pending set of a fresh
// snapshot; one that missed an event is told so.
func testViewRebuild(t *testing.T, f *fixture) {
	a, _ := f.create(t, "a", reqOpt{})
	f.create(t, "b", reqOpt{})
	mid, err := f.auth.Snapshot(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.decide(t, f.decision(t, a, aais.Deny, aais.ScopeOnce, ""), nil)
	c, _ := f.create(t, "c", reqOpt{})
	f.create(t, "d", reqOpt{})
	f.decide(t, f.decision(t, c, aais.Approve, aais.ScopeOnce, ""), nil)

	var v aais.View
	if err := v.Restore(mid); err != nil {
		t.Fatal(err)
	}
	p := f.events(t, mid.Snapshot.AsOfSequence)
	for _, e := range p.Events {
		if _, err := v.Apply(e); err != nil {
			t.Fatalf("Apply(%d): %v", e.Sequence, err)
		}
	}
	fresh, err := f.auth.Snapshot(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, r := range v.Pending(f.clock.Now()) {
		got = append(got, r.ID)
	}
	for _, r := range fresh.Snapshot.Pending {
		want = append(want, r.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || v.Sequence() != fresh.Snapshot.AsOfSequence {
		t.Fatalf("rebuilt view: %v at %d; fresh snapshot: %v at %d", got, v.Sequence(), want, fresh.Snapshot.AsOfSequence)
	}
	var late aais.View
	if err := late.Restore(mid); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Apply(p.Events[1]); !errors.Is(err, aais.ErrGap) {
		t.Fatalf("applying an event past a missed one: err = %v, want ErrGap", err)
	}
}

func testActivity(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	before := f.events(t, 0)
	m, err := f.auth.Activity(f.ctx, r.ID, "Waiting for the sandbox", "queued")
	if err != nil {
		t.Fatalf("Activity: %v", err)
	}
	if m.Type != aais.TypeActivity || m.Activity.RequestID != r.ID || m.Sequence != before.Latest {
		t.Fatalf("activity message: %s for %s at %d", m.Type, m.Activity.RequestID, m.Sequence)
	}
	if after := f.events(t, 0); after.Latest != before.Latest || !f.state(t, r.ID).Pending() {
		t.Fatal("an activity message changed the store")
	}
	if _, err := f.auth.Activity(f.ctx, "apr_unknown", "x", ""); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("activity about an unknown request: err = %v", err)
	}
}
