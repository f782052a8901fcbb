// Package aaistest is the conformance kit every aais.Store backend runs
// from its own tests:
//
//	func TestConformance(t *testing.T) {
//		aaistest.Run(t, aaistest.Backend{
//			New: func(t *testing.T) aais.Store { return memstore.New() },
//		})
//	}
//
// The kit drives the store through an aais.Authority with an injected clock,
// so it checks both the backend's guarantees (idempotent creation, exactly
// one resolution per request under concurrency, contiguous ordered events,
// writes visible before their events) and the decision order the Authority
// builds on them.
package aaistest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/internal/manualclock"
)

// Start is the instant the kit's clock starts at.
var Start = time.Date(2026, 8, 30, 18, 0, 0, 0, time.UTC)

// Clock is a manual clock for an Authority (pass its Now as
// AuthorityOptions.Now): it only moves when told to.
type Clock = manualclock.Clock

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return manualclock.New(t) }

// Actor is the authenticated actor the kit decides as.
var Actor = aais.Actor{ID: "conformance_user", Type: aais.ActorHuman, AuthenticatedBy: "conformance"}

// Backend is how the kit makes and reopens the stores it checks.
type Backend struct {
	// New returns a new, empty store each time it is called (required).
	// The test owns it: close it with t.Cleanup.
	New func(t *testing.T) aais.Store
	// Reopen returns a second, independent handle on the storage s keeps
	// its state in, as another process or a restarted one would open it;
	// s stays open. Nil means the storage does not outlive its handle
	// (an in-memory store): the cases about second handles and restarts
	// are then skipped.
	Reopen func(t *testing.T, s aais.Store) aais.Store
}

// Run runs the conformance kit against the stores b makes.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.New == nil {
		t.Fatal("aaistest.Backend.New is nil")
	}
	tests := []struct {
		name string
		fn   func(*testing.T, *fixture)
	}{
		{"CreateIdempotent", testCreateIdempotent},
		{"CreateHonoursCancelledContext", testCreateCancelledContext},
		{"ApproveOnce", testApproveOnce},
		{"ApproveSession", testApproveSession},
		{"Deny", testDeny},
		{"Cancel", testCancel},
		{"UnofferedScopeIsInvalid", testUnoffered},
		{"WrongDigestIsStale", testWrongDigest},
		{"ChangedCurrentActionIsStale", testChangedCurrentAction},
		{"ExpiredIsNeverDenied", testExpired},
		{"IdenticalReplaySameReceipt", testIdenticalReplay},
		{"ConflictingReplay", testConflictingReplay},
		{"UnknownRequest", testUnknownRequest},
		{"ConcurrentDecisions", testConcurrentDecisions},
		{"EventsOrderedAndReadable", testEventsOrdered},
		{"SnapshotExcludesResolvedAndExpired", testSnapshot},
		{"ExpireOverdue", testExpireOverdue},
		{"CancelOwned", testCancelOwned},
		{"Withdraw", testWithdraw},
		{"CancelOwnedRacesApproval", testCancelOwnedRace},
		{"EmptyStore", testEmptyStore},
		{"EventsPageLimit", testEventsPageLimit},
		{"ApproveOnceSavesNoRule", testApproveOnceNoRule},
		{"SessionApprovalSavesRule", testSessionRule},
		{"RuleApprovesMatchingRequests", testRuleAutoApproves},
		{"RevokedRuleApprovesNothing", testRevokeRule},
		{"RevokedRuleRefusedAtWrite", testRuleRefusedAtWrite},
		{"ConcurrentApprovalsSaveOneRule", testConcurrentRules},
		{"CancelOwnedRevokesSessionRules", testCancelOwnedRevokes},
		{"OwnerRecordedAndChecked", testOwner},
		{"SecondHandleSeesEverything", testSecondHandle},
		{"RestartPreservesPendingAndRules", testRestart},
		{"WaitAcrossHandles", testWaitAcrossHandles},
		{"SnapshotAndEventsRebuildPending", testViewRebuild},
		{"ActivityChangesNothing", testActivity},
		{"ReturnedValuesArePrivate", testReturnedValuesArePrivate},
		{"RememberPolicyRefuses", testRememberPolicyRefuses},
		{"PersistentRuleByPolicy", testPersistentRuleByPolicy},
		{"PolicyChangedBeforeDecision", testPolicyChangedBeforeDecision},
		{"RevokeRacesMatchingRequests", testRevokeRace},
		{"HistorySearch", testHistorySearch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := b.New(t)
			if s == nil {
				t.Fatal("Backend.New returned nil")
			}
			f := newFixture(t, s)
			f.reopen = b.Reopen
			tc.fn(t, f)
		})
	}
}

type fixture struct {
	reopen func(*testing.T, aais.Store) aais.Store
	store  aais.Store
	clock  *Clock
	auth   *aais.Authority
	ctx    context.Context
}

func newFixture(t *testing.T, s aais.Store) *fixture {
	t.Helper()
	c := NewClock(Start)
	a, err := aais.NewAuthority(s, &aais.AuthorityOptions{Now: c.Now, Stream: "conformance.approvals"})
	if err != nil {
		t.Fatalf("NewAuthority: %v", err)
	}
	return &fixture{store: s, clock: c, auth: a, ctx: t.Context()}
}

// action returns the raw action of request number n.
func action(n string) []byte {
	return commandAction(n, "node --check script-"+n+".js")
}

// commandAction returns the raw action of request number n running cmd.
func commandAction(n, cmd string) []byte {
	c, _ := json.Marshal(cmd)
	return []byte(`{"kind":"process.exec","name":"shell.exec","summary":"Run the JavaScript syntax check",` +
		`"arguments":{"command":` + string(c) + `},"working_directory":"/workspace/example",` +
		`"effects":["Starts a local Node.js process","Reads script-` + n + `.js"]}`)
}

type reqOpt struct {
	session string
	ttl     time.Duration // 0: 10 minutes; negative: never expires
	command string        // "": "node --check script-<n>.js"
}

// request builds a request with id "apr_<n>" offering approve once,
// approve session, deny once and cancel once.
func (f *fixture) request(t *testing.T, n string, o reqOpt) *aais.Request {
	t.Helper()
	if o.session == "" {
		o.session = "s-1"
	}
	act := action(n)
	if o.command != "" {
		act = commandAction(n, o.command)
	}
	p := aais.RequestParams{
		ID:        "apr_" + n,
		CreatedAt: f.clock.Now(),
		Origin:    aais.Origin{Harness: "conformance", SessionID: o.session, RunID: "run-" + o.session},
		Action:    json.RawMessage(act),
		Risk:      aais.Risk{Level: aais.RiskMedium, Reasons: []string{"Executes a local process"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Approve, Scope: aais.ScopeSession, Label: "Allow matching checks for this session",
				ScopeConstraints: aais.Constraints{"action_name": []byte(`"shell.exec"`), "command_prefix": []byte(`"node --check "`)}},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
			{Decision: aais.Cancel, Scope: aais.ScopeOnce, Label: "Cancel"},
		},
	}
	switch {
	case o.ttl == 0:
		p.ExpiresAt = p.CreatedAt.Add(10 * time.Minute)
	case o.ttl > 0:
		p.ExpiresAt = p.CreatedAt.Add(o.ttl)
	}
	r, err := aais.NewRequest(p)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	return r
}

// create builds and records a request.
func (f *fixture) create(t *testing.T, n string, o reqOpt) (*aais.Request, *aais.Message) {
	t.Helper()
	r := f.request(t, n, o)
	ev, created, err := f.auth.Create(f.ctx, r)
	if err != nil {
		t.Fatalf("Create(%s): %v", r.ID, err)
	}
	if !created {
		t.Fatalf("Create(%s): created = false for a new request", r.ID)
	}
	return r, ev
}

// decision builds an offered decision on r; id "" generates one.
func (f *fixture) decision(t *testing.T, r *aais.Request, v aais.Verdict, s aais.Scope, id string) *aais.Decision {
	t.Helper()
	d, err := aais.NewDecision(r, aais.DecisionParams{ID: id, Decision: v, Scope: s, Actor: Actor, DecidedAt: f.clock.Now()})
	if err != nil {
		t.Fatalf("NewDecision: %v", err)
	}
	return d
}

func (f *fixture) decide(t *testing.T, d *aais.Decision, current []byte) *aais.Message {
	t.Helper()
	m, err := f.auth.Decide(f.ctx, d, Actor, current)
	if err != nil {
		t.Fatalf("Decide(%s on %s): %v", d.ID, d.RequestID, err)
	}
	if m == nil || m.Type != aais.TypeResolved || m.Resolution == nil {
		t.Fatalf("Decide(%s): not a receipt: %+v", d.ID, m)
	}
	return m
}

func (f *fixture) state(t *testing.T, id string) aais.RequestState {
	t.Helper()
	st, err := f.store.RequestState(f.ctx, id)
	if err != nil {
		t.Fatalf("RequestState(%s): %v", id, err)
	}
	return st
}

func (f *fixture) events(t *testing.T, after uint64) aais.EventPage {
	t.Helper()
	p, err := f.store.EventsAfter(f.ctx, after, 0)
	if err != nil {
		t.Fatalf("EventsAfter(%d): %v", after, err)
	}
	return p
}

func wire(t *testing.T, m *aais.Message) string {
	t.Helper()
	b, err := aais.Marshal(m)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return string(b)
}

func wantOutcome(t *testing.T, m *aais.Message, o aais.Outcome, scope aais.Scope) {
	t.Helper()
	if got := m.Resolution.Outcome; got != o {
		t.Fatalf("outcome = %s, want %s (message %q)", got, o, m.Resolution.Message)
	}
	if got := m.Resolution.EffectiveScope; got != scope {
		t.Fatalf("effective_scope = %q, want %q", got, scope)
	}
}

// wantResolved checks that the store holds exactly receipt as r's
// resolution.
func (f *fixture) wantResolved(t *testing.T, id string, receipt *aais.Message) {
	t.Helper()
	st := f.state(t, id)
	if st.Pending() {
		t.Fatalf("request %s still pending, want resolved by %s", id, receipt.Resolution.ID)
	}
	if got, want := wire(t, st.Resolution.Event), wire(t, receipt); got != want {
		t.Fatalf("stored resolution of %s:\n%s\nwant\n%s", id, got, want)
	}
}

func testCreateIdempotent(t *testing.T, f *fixture) {
	r := f.request(t, "1", reqOpt{})
	ev, created, err := f.auth.Create(f.ctx, r)
	if err != nil || !created {
		t.Fatalf("first Create = %v, %v; want created", created, err)
	}
	if ev.Sequence != 1 || ev.Type != aais.TypeRequested || ev.Request.ID != r.ID {
		t.Fatalf("first event: sequence %d type %s; want 1, approval.requested", ev.Sequence, ev.Type)
	}
	f.clock.Advance(time.Second)
	again, created, err := f.auth.Create(f.ctx, r)
	if err != nil || created {
		t.Fatalf("same Create again = %v, %v; want no-op", created, err)
	}
	if wire(t, again) != wire(t, ev) {
		t.Fatalf("repeated Create returned a different event:\n%s\nwant\n%s", wire(t, again), wire(t, ev))
	}
	other := f.request(t, "1", reqOpt{session: "s-2"})
	if _, _, err := f.auth.Create(f.ctx, other); !errors.Is(err, aais.ErrConflict) {
		t.Fatalf("different request under a used id: err = %v, want ErrConflict", err)
	}
	// Ids are never reused, not even once the request is resolved.
	f.decide(t, f.decision(t, r, aais.Deny, aais.ScopeOnce, ""), nil)
	if _, _, err := f.auth.Create(f.ctx, other); !errors.Is(err, aais.ErrConflict) {
		t.Fatalf("different request under a resolved id: err = %v, want ErrConflict", err)
	}
	if _, created, err := f.auth.Create(f.ctx, r); err != nil || created {
		t.Fatalf("same Create after resolution = %v, %v; want no-op", created, err)
	}
	if p := f.events(t, 0); len(p.Events) != 2 || p.Latest != 2 {
		t.Fatalf("events = %d (latest %d), want 2", len(p.Events), p.Latest)
	}
}

func testCreateCancelledContext(t *testing.T, f *fixture) {
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	if _, _, err := f.auth.Create(ctx, f.request(t, "1", reqOpt{})); err == nil {
		t.Fatal("Create with a cancelled context succeeded")
	}
	if _, err := f.store.RequestState(f.ctx, "apr_1"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("request written despite a cancelled context: err = %v", err)
	}
	if p := f.events(t, 0); len(p.Events) != 0 {
		t.Fatalf("%d events written despite a cancelled context", len(p.Events))
	}
}

func testApproveOnce(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	d := f.decision(t, r, aais.Approve, aais.ScopeOnce, "dec_1")
	m := f.decide(t, d, action("1"))
	wantOutcome(t, m, aais.OutcomeApproved, aais.ScopeOnce)
	res := m.Resolution
	if res.RequestID != r.ID || res.DecisionID != d.ID || res.ActionDigest != r.ActionDigest {
		t.Fatalf("receipt names request %s, decision %s, digest %s", res.RequestID, res.DecisionID, res.ActionDigest)
	}
	if m.Sequence != 2 || m.Stream != "conformance.approvals" {
		t.Fatalf("receipt event sequence %d stream %q, want 2 on conformance.approvals", m.Sequence, m.Stream)
	}
	if !res.ResolvedAt.Time().Equal(f.clock.Now()) {
		t.Fatalf("resolved_at = %s, want the authority clock %s", res.ResolvedAt, f.clock.Now())
	}
	f.wantResolved(t, r.ID, m)
}

func testApproveSession(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	m := f.decide(t, f.decision(t, r, aais.Approve, aais.ScopeSession, ""), nil)
	wantOutcome(t, m, aais.OutcomeApproved, aais.ScopeSession)
}

func testDeny(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	m := f.decide(t, f.decision(t, r, aais.Deny, aais.ScopeOnce, ""), nil)
	wantOutcome(t, m, aais.OutcomeDenied, aais.ScopeOnce)
	f.wantResolved(t, r.ID, m)
}

func testCancel(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	m := f.decide(t, f.decision(t, r, aais.Cancel, aais.ScopeOnce, ""), nil)
	wantOutcome(t, m, aais.OutcomeCancelled, "")
	f.wantResolved(t, r.ID, m)
}

// burned checks that a failed outcome resolved the request for good: a
// later, correct approval gets a conflict.
func (f *fixture) burned(t *testing.T, r *aais.Request, failed *aais.Message) {
	t.Helper()
	f.wantResolved(t, r.ID, failed)
	late := f.decide(t, f.decision(t, r, aais.Approve, aais.ScopeOnce, ""), nil)
	wantOutcome(t, late, aais.OutcomeConflict, "")
	f.wantResolved(t, r.ID, failed)
}

func testUnoffered(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	d := f.decision(t, r, aais.Approve, aais.ScopeOnce, "")
	d.Scope = aais.ScopePersistent // valid on the wire, never offered
	m := f.decide(t, d, nil)
	wantOutcome(t, m, aais.OutcomeInvalid, "")
	f.burned(t, r, m)
}

func testWrongDigest(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	other, err := aais.ActionDigest(action("2"))
	if err != nil {
		t.Fatal(err)
	}
	d := f.decision(t, r, aais.Approve, aais.ScopeOnce, "")
	d.ActionDigest = other
	m := f.decide(t, d, nil)
	wantOutcome(t, m, aais.OutcomeStale, "")
	f.burned(t, r, m)
}

func testChangedCurrentAction(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	m := f.decide(t, f.decision(t, r, aais.Approve, aais.ScopeOnce, ""), action("2"))
	wantOutcome(t, m, aais.OutcomeStale, "")
	f.burned(t, r, m)

	// An action that cannot even be digested is not the approved one.
	r2, _ := f.create(t, "3", reqOpt{})
	m2 := f.decide(t, f.decision(t, r2, aais.Approve, aais.ScopeOnce, ""), []byte(`{"a":1,"a":2}`))
	wantOutcome(t, m2, aais.OutcomeStale, "")

	// The same action written differently is the same action.
	r3, _ := f.create(t, "4", reqOpt{})
	reordered := []byte(` {"name":"shell.exec","kind":"process.exec","summary":"Run the JavaScript syntax check",` +
		`"effects":["Starts a local Node.js process","Reads script-4.js"],"working_directory":"/workspace/example",` +
		`"arguments":{"command":"node --check script-4.js"}}`)
	m3 := f.decide(t, f.decision(t, r3, aais.Approve, aais.ScopeOnce, ""), reordered)
	wantOutcome(t, m3, aais.OutcomeApproved, aais.ScopeOnce)
}

func testExpired(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{ttl: time.Minute})
	f.clock.Advance(time.Minute) // now == expires_at: expired
	for _, v := range []aais.Verdict{aais.Deny} {
		m := f.decide(t, f.decision(t, r, v, aais.ScopeOnce, ""), nil)
		wantOutcome(t, m, aais.OutcomeExpired, "")
		f.burned(t, r, m)
	}
	r2, _ := f.create(t, "2", reqOpt{ttl: time.Minute})
	f.clock.Advance(time.Hour)
	m := f.decide(t, f.decision(t, r2, aais.Approve, aais.ScopeOnce, ""), nil)
	wantOutcome(t, m, aais.OutcomeExpired, "")
}

func testIdenticalReplay(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	d := f.decision(t, r, aais.Approve, aais.ScopeOnce, "dec_1")
	first := f.decide(t, d, nil)
	f.clock.Advance(time.Minute)
	again := f.decide(t, d, nil)
	if wire(t, again) != wire(t, first) {
		t.Fatalf("identical replay got a different receipt:\n%s\nwant\n%s", wire(t, again), wire(t, first))
	}
	// Replay is judged before expiry and digests.
	f.clock.Advance(time.Hour)
	late := f.decide(t, d, action("2"))
	if wire(t, late) != wire(t, first) {
		t.Fatalf("replay after expiry got a different receipt:\n%s\nwant\n%s", wire(t, late), wire(t, first))
	}
	if p := f.events(t, 0); len(p.Events) != 2 {
		t.Fatalf("replays appended events: %d events, want 2", len(p.Events))
	}
}

func testConflictingReplay(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	first := f.decide(t, f.decision(t, r, aais.Approve, aais.ScopeOnce, "dec_1"), nil)
	for _, d := range []*aais.Decision{
		f.decision(t, r, aais.Deny, aais.ScopeOnce, "dec_2"),
		f.decision(t, r, aais.Approve, aais.ScopeOnce, "dec_3"),    // same verdict, another decision
		f.decision(t, r, aais.Approve, aais.ScopeSession, "dec_1"), // same id, other body
	} {
		m := f.decide(t, d, nil)
		wantOutcome(t, m, aais.OutcomeConflict, "")
		if m.Resolution.DecisionID != d.ID || m.Sequence != first.Sequence || m.ID == first.ID {
			t.Fatalf("conflict receipt: decision %s sequence %d id %s; want decision %s, sequence %d, a new id",
				m.Resolution.DecisionID, m.Sequence, m.ID, d.ID, first.Sequence)
		}
	}
	// A different authenticated actor makes a different decision.
	d := f.decision(t, r, aais.Approve, aais.ScopeOnce, "dec_1")
	other := aais.Actor{ID: "someone_else", Type: aais.ActorHuman, AuthenticatedBy: "conformance"}
	m, err := f.auth.Decide(f.ctx, d, other, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, m, aais.OutcomeConflict, "")
	f.wantResolved(t, r.ID, first)
	if p := f.events(t, 0); len(p.Events) != 2 {
		t.Fatalf("conflicts appended events: %d events, want 2", len(p.Events))
	}
}

func testUnknownRequest(t *testing.T, f *fixture) {
	r := f.request(t, "1", reqOpt{}) // never created
	_, err := f.auth.Decide(f.ctx, f.decision(t, r, aais.Approve, aais.ScopeOnce, ""), Actor, nil)
	if !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("decision on an unknown request: err = %v, want ErrUnknownRequest", err)
	}
	if _, err := f.auth.Decide(f.ctx, nil, Actor, nil); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("nil decision: err = %v, want ErrInvalid", err)
	}
	if p := f.events(t, 0); len(p.Events) != 0 {
		t.Fatalf("%d events after decisions on nothing", len(p.Events))
	}
}

func testConcurrentDecisions(t *testing.T, f *fixture) {
	r, _ := f.create(t, "1", reqOpt{})
	shared := f.decision(t, r, aais.Approve, aais.ScopeOnce, "dec_shared")
	const n = 100
	decisions := make([]*aais.Decision, n)
	for i := range decisions {
		switch i % 3 {
		case 0:
			decisions[i] = shared
		case 1:
			decisions[i] = f.decision(t, r, aais.Deny, aais.ScopeOnce, fmt.Sprintf("dec_deny_%d", i))
		default:
			decisions[i] = f.decision(t, r, aais.Approve, aais.ScopeOnce, fmt.Sprintf("dec_approve_%d", i))
		}
	}
	receipts := make([]*aais.Message, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			receipts[i], errs[i] = f.auth.Decide(f.ctx, decisions[i], Actor, nil)
		})
	}
	close(start)
	wg.Wait()

	st := f.state(t, r.ID)
	if st.Pending() {
		t.Fatal("request still pending after 100 decisions")
	}
	stored := st.Resolution.Event
	want := wire(t, stored)
	winners := 0
	for i, m := range receipts {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if decisions[i].ID == stored.Resolution.DecisionID {
			winners++
			if got := wire(t, m); got != want {
				t.Fatalf("caller %d made the winning decision but got\n%s\nwant\n%s", i, got, want)
			}
			continue
		}
		wantOutcome(t, m, aais.OutcomeConflict, "")
		if m.Sequence != stored.Sequence {
			t.Fatalf("caller %d: conflict sequence %d, want %d", i, m.Sequence, stored.Sequence)
		}
	}
	if winners == 0 {
		t.Fatal("no caller got the stored receipt")
	}
	p := f.events(t, 0)
	resolved := 0
	for _, e := range p.Events {
		if e.Type == aais.TypeResolved {
			resolved++
		}
	}
	if resolved != 1 || len(p.Events) != 2 {
		t.Fatalf("%d events, %d resolutions; want 2 events, exactly 1 resolution", len(p.Events), resolved)
	}
}

func testEventsOrdered(t *testing.T, f *fixture) {
	const writers, each = 8, 10
	const total = writers * each
	done := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		readerErr <- func() error {
			var last uint64
			for {
				select {
				case <-done:
					return nil
				default:
				}
				p, err := f.store.EventsAfter(f.ctx, last, 0)
				if err != nil {
					return err
				}
				if p.Gap {
					return fmt.Errorf("gap after %d", last)
				}
				for _, e := range p.Events {
					if e.Sequence != last+1 {
						return fmt.Errorf("event sequence %d after %d", e.Sequence, last)
					}
					last = e.Sequence
					if e.Type == aais.TypeRequested {
						if _, err := f.store.RequestState(f.ctx, e.Request.ID); err != nil {
							return fmt.Errorf("event %d announces %s before it is readable: %w", e.Sequence, e.Request.ID, err)
						}
					}
				}
			}
		}()
	}()
	var wg sync.WaitGroup
	errs := make(chan error, total)
	reqs := make([]*aais.Request, total)
	for i := range total {
		reqs[i] = f.request(t, fmt.Sprint(i), reqOpt{})
	}
	for w := range writers {
		wg.Go(func() {
			for i := w * each; i < (w+1)*each; i++ {
				if _, _, err := f.auth.Create(f.ctx, reqs[i]); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(done)
	close(errs)
	for err := range errs {
		t.Fatalf("Create: %v", err)
	}
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	p := f.events(t, 0)
	if p.Gap || p.Latest != total || len(p.Events) != total || p.StoreID == "" {
		t.Fatalf("EventsAfter(0): gap %v latest %d events %d store id %q; want no gap, %d, %d, an id",
			p.Gap, p.Latest, len(p.Events), p.StoreID, total, total)
	}
	for i, e := range p.Events {
		if e.Sequence != uint64(i+1) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
	}
	if q := f.events(t, total-5); len(q.Events) != 5 || q.Events[0].Sequence != total-4 || q.Gap || q.StoreID != p.StoreID {
		t.Fatalf("EventsAfter(%d): %d events, gap %v, store id %q", total-5, len(q.Events), q.Gap, q.StoreID)
	}
	if q := f.events(t, total); len(q.Events) != 0 || q.Gap {
		t.Fatalf("EventsAfter(latest): %d events, gap %v; want none, no gap", len(q.Events), q.Gap)
	}
	if q := f.events(t, total+1); !q.Gap {
		t.Fatal("EventsAfter(beyond latest) reports no gap")
	}
}

func testSnapshot(t *testing.T, f *fixture) {
	approved, _ := f.create(t, "approved", reqOpt{})
	f.create(t, "short", reqOpt{ttl: time.Minute})
	keep, _ := f.create(t, "keep", reqOpt{ttl: -1})
	denied, _ := f.create(t, "denied", reqOpt{})
	later, _ := f.create(t, "later", reqOpt{ttl: time.Hour})
	f.decide(t, f.decision(t, approved, aais.Approve, aais.ScopeOnce, ""), nil)
	f.decide(t, f.decision(t, denied, aais.Deny, aais.ScopeOnce, ""), nil)
	f.clock.Advance(time.Minute) // "short" is now expired, not yet swept

	m, err := f.auth.Snapshot(f.ctx)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if m.Type != aais.TypeSnapshot || m.Snapshot == nil {
		t.Fatalf("Snapshot returned %s", m.Type)
	}
	latest := f.events(t, 0).Latest
	if m.Snapshot.AsOfSequence != latest || m.Sequence != latest {
		t.Fatalf("as_of_sequence %d, sequence %d; want %d", m.Snapshot.AsOfSequence, m.Sequence, latest)
	}
	var ids []string
	for _, r := range m.Snapshot.Pending {
		ids = append(ids, r.ID)
	}
	if want := []string{keep.ID, later.ID}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("snapshot pending = %v, want %v", ids, want)
	}
}

func testExpireOverdue(t *testing.T, f *fixture) {
	soon, _ := f.create(t, "soon", reqOpt{ttl: time.Minute})
	later, _ := f.create(t, "later", reqOpt{ttl: time.Hour})
	never, _ := f.create(t, "never", reqOpt{ttl: -1})
	f.clock.Advance(5 * time.Minute)
	got, err := f.auth.ExpireOverdue(f.ctx)
	if err != nil {
		t.Fatalf("ExpireOverdue: %v", err)
	}
	if len(got) != 1 || got[0].Resolution.RequestID != soon.ID {
		t.Fatalf("ExpireOverdue resolved %d requests, want only %s", len(got), soon.ID)
	}
	wantOutcome(t, got[0], aais.OutcomeExpired, "")
	if got[0].Resolution.DecisionID != "" {
		t.Fatalf("sweep receipt names decision %s", got[0].Resolution.DecisionID)
	}
	f.wantResolved(t, soon.ID, got[0])
	f.burned(t, soon, got[0])
	for _, r := range []*aais.Request{later, never} {
		if !f.state(t, r.ID).Pending() {
			t.Fatalf("%s resolved by the sweep", r.ID)
		}
	}
	again, err := f.auth.ExpireOverdue(f.ctx)
	if err != nil || len(again) != 0 {
		t.Fatalf("second sweep = %d receipts, %v; want none", len(again), err)
	}
}

func testCancelOwned(t *testing.T, f *fixture) {
	a, _ := f.create(t, "a", reqOpt{session: "s-1"})
	b, _ := f.create(t, "b", reqOpt{session: "s-1"})
	c, _ := f.create(t, "c", reqOpt{session: "s-2"})
	done, _ := f.create(t, "done", reqOpt{session: "s-1"})
	approved := f.decide(t, f.decision(t, done, aais.Approve, aais.ScopeOnce, ""), nil)

	if _, err := f.auth.CancelOwned(f.ctx, aais.Owner{}); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("CancelOwned(everything): err = %v, want ErrInvalid", err)
	}
	got, err := f.auth.CancelOwned(f.ctx, aais.Owner{SessionID: "s-1"})
	if err != nil {
		t.Fatalf("CancelOwned: %v", err)
	}
	if len(got) != 2 || got[0].Resolution.RequestID != a.ID || got[1].Resolution.RequestID != b.ID {
		t.Fatalf("CancelOwned resolved %d requests, want %s and %s", len(got), a.ID, b.ID)
	}
	for _, m := range got {
		wantOutcome(t, m, aais.OutcomeCancelled, "")
		f.wantResolved(t, m.Resolution.RequestID, m)
	}
	f.wantResolved(t, done.ID, approved)
	if !f.state(t, c.ID).Pending() {
		t.Fatal("request of another session cancelled")
	}
	byRun, err := f.auth.CancelOwned(f.ctx, aais.Owner{RunID: "run-s-2"})
	if err != nil || len(byRun) != 1 || byRun[0].Resolution.RequestID != c.ID {
		t.Fatalf("CancelOwned(run) = %d receipts, %v; want %s", len(byRun), err, c.ID)
	}
}

// testWithdraw: Withdraw cancels the one request named, with its message,
// and leaves a resolved one, and every other request of its run, as they
// are.
func testWithdraw(t *testing.T, f *fixture) {
	a, _ := f.create(t, "wa", reqOpt{session: "w-1"})
	b, _ := f.create(t, "wb", reqOpt{session: "w-1"})
	done, _ := f.create(t, "wdone", reqOpt{session: "w-1"})
	approved := f.decide(t, f.decision(t, done, aais.Approve, aais.ScopeOnce, ""), nil)

	m, withdrawn, err := f.auth.Withdraw(f.ctx, a.ID, "Withdrawn by its submitter.")
	if err != nil || !withdrawn {
		t.Fatalf("Withdraw: withdrawn=%v err=%v", withdrawn, err)
	}
	wantOutcome(t, m, aais.OutcomeCancelled, "")
	if m.Resolution.Message != "Withdrawn by its submitter." {
		t.Errorf("message %q", m.Resolution.Message)
	}
	f.wantResolved(t, a.ID, m)
	if !f.state(t, b.ID).Pending() {
		t.Fatal("Withdraw cancelled another request of the same run")
	}
	again, withdrawn, err := f.auth.Withdraw(f.ctx, a.ID, "again")
	if err != nil || withdrawn || again.Resolution.ID != m.Resolution.ID {
		t.Fatalf("second Withdraw: withdrawn=%v err=%v", withdrawn, err)
	}
	kept, withdrawn, err := f.auth.Withdraw(f.ctx, done.ID, "too late")
	if err != nil || withdrawn || kept.Resolution.ID != approved.Resolution.ID {
		t.Fatalf("Withdraw of an approved request: withdrawn=%v err=%v", withdrawn, err)
	}
	if _, _, err := f.auth.Withdraw(f.ctx, "apr_unknown", "x"); !errors.Is(err, aais.ErrUnknownRequest) {
		t.Fatalf("unknown: %v", err)
	}
}

func testCancelOwnedRace(t *testing.T, f *fixture) {
	const rounds = 30
	for i := range rounds {
		r, _ := f.create(t, fmt.Sprint(i), reqOpt{session: fmt.Sprintf("race-%d", i)})
		d := f.decision(t, r, aais.Approve, aais.ScopeOnce, "")
		var (
			wg         sync.WaitGroup
			receipt    *aais.Message
			cancelled  []*aais.Message
			dErr, cErr error
		)
		wg.Go(func() { receipt, dErr = f.auth.Decide(f.ctx, d, Actor, nil) })
		wg.Go(func() { cancelled, cErr = f.auth.CancelOwned(f.ctx, aais.Owner{SessionID: r.Origin.SessionID}) })
		wg.Wait()
		if dErr != nil || cErr != nil {
			t.Fatalf("round %d: Decide %v, CancelOwned %v", i, dErr, cErr)
		}
		stored := f.state(t, r.ID).Resolution.Event
		switch stored.Resolution.Outcome {
		case aais.OutcomeApproved:
			if len(cancelled) != 0 || wire(t, receipt) != wire(t, stored) {
				t.Fatalf("round %d: approval won but cancel reported %d receipts", i, len(cancelled))
			}
		case aais.OutcomeCancelled:
			if len(cancelled) != 1 || wire(t, cancelled[0]) != wire(t, stored) {
				t.Fatalf("round %d: cancel won but returned %d receipts", i, len(cancelled))
			}
			wantOutcome(t, receipt, aais.OutcomeConflict, "")
		default:
			t.Fatalf("round %d: stored outcome %s", i, stored.Resolution.Outcome)
		}
	}
}

// testReturnedValuesArePrivate: whatever a store returns, and whatever it
// was given, the caller may change without changing what the store keeps.
func testReturnedValuesArePrivate(t *testing.T, f *fixture) {
	r := f.request(t, "1", reqOpt{})
	ev, _, err := f.auth.Create(f.ctx, r)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	wantRequest := wire(t, ev)
	scribbleRequest(r)
	scribbleMessage(ev)
	receipt := f.decide(t, f.decision(t, f.request(t, "1", reqOpt{}), aais.Approve, aais.ScopeSession, "dec_private"), nil)
	wantReceipt := wire(t, receipt)
	scribbleMessage(receipt)
	if _, _, err := f.auth.Create(f.ctx, f.request(t, "2", reqOpt{session: "s-2"})); err != nil {
		t.Fatalf("Create: %v", err)
	}
	wantEvents := func() []string {
		var out []string
		for _, m := range f.events(t, 0).Events {
			out = append(out, wire(t, m))
		}
		return out
	}()
	rules, err := f.store.Rules(f.ctx)
	if err != nil || len(rules) != 1 {
		t.Fatalf("Rules = %v, %v; want the session rule", rules, err)
	}
	wantRule, err := rules[0].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}

	// Change everything reachable from everything the store returns.
	for range 2 {
		st := f.state(t, "apr_1")
		scribbleMessage(st.Request.Event)
		scribbleMessage(st.Resolution.Event)
		pending, _, err := f.store.Pending(f.ctx)
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		for _, p := range pending {
			scribbleMessage(p.Event)
		}
		for _, m := range f.events(t, 0).Events {
			scribbleMessage(m)
		}
		rs, err := f.store.Rules(f.ctx)
		if err != nil {
			t.Fatalf("Rules: %v", err)
		}
		for _, ru := range rs {
			ru.ID = "changed"
			ru.Origin.SessionID = "changed"
		}
	}

	st := f.state(t, "apr_1")
	if got := wire(t, st.Request.Event); got != wantRequest {
		t.Fatalf("stored request changed through a returned value:\n%s\nwant\n%s", got, wantRequest)
	}
	if got := wire(t, st.Resolution.Event); got != wantReceipt {
		t.Fatalf("stored receipt changed through a returned value:\n%s\nwant\n%s", got, wantReceipt)
	}
	for i, m := range f.events(t, 0).Events {
		if got := wire(t, m); i >= len(wantEvents) || got != wantEvents[i] {
			t.Fatalf("event %d changed through a returned value:\n%s", i+1, got)
		}
	}
	rules, err = f.store.Rules(f.ctx)
	if err != nil || len(rules) != 1 {
		t.Fatalf("Rules = %v, %v", rules, err)
	}
	if got, _ := rules[0].MarshalJSON(); string(got) != string(wantRule) {
		t.Fatalf("stored rule changed through a returned value:\n%s\nwant\n%s", got, wantRule)
	}
}

// scribbleMessage changes in place everything of m a caller can reach.
func scribbleMessage(m *aais.Message) {
	if m == nil {
		return
	}
	m.ID = "changed"
	m.Sequence++
	scribbleRaw(m.Extensions)
	if m.Request != nil {
		scribbleRequest(m.Request)
	}
	if d := m.Decision; d != nil {
		d.ID = "changed"
		scribbleRaw(d.Extensions)
	}
	if r := m.Resolution; r != nil {
		r.Message = "changed"
		r.Outcome = aais.OutcomeDenied
		scribbleRaw(r.Extensions)
	}
}

func scribbleRequest(r *aais.Request) {
	r.ID = "changed"
	r.Origin.SessionID = "changed"
	for i := range r.Risk.Reasons {
		r.Risk.Reasons[i] = "changed"
	}
	for i := range r.Choices {
		r.Choices[i].Label = "changed"
		scribbleRaw(r.Choices[i].ScopeConstraints)
	}
	r.Choices = append(r.Choices[:0], r.Choices[len(r.Choices)-1])
	scribbleRaw(r.Extensions)
}

// scribbleRaw overwrites every raw value of a map in place and adds a member.
func scribbleRaw[M ~map[string]V, V ~[]byte](m M) {
	for k, v := range m {
		for i := range v {
			v[i] = ' '
		}
		m[k+"x"] = v
	}
}
