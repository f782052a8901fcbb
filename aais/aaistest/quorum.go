package aaistest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/custos-runtime/custos/aais"
)

// RunQuorum runs the M-of-N cases (aais.QuorumExtension) against the
// stores b makes, which must be aais.VoteStores. With b.Reopen, the race
// is decided through several handles on one storage (replicas).
func RunQuorum(t *testing.T, b Backend) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, *fixture)
	}{
		{"PartialThenResolved", testQuorumTwo},
		{"PartialReplayAndSecondVote", testQuorumReplay},
		{"DenyAfterPartial", testQuorumDenyAny},
		{"DenyQuorum", testQuorumDenyQuorum},
		{"FromDistinctRoles", testQuorumRoles},
		{"OnlyOnceScope", testQuorumScope},
		{"RacingReviewers", testQuorumRace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := b.New(t)
			if _, ok := s.(aais.VoteStore); !ok {
				t.Fatalf("%T is not an aais.VoteStore", s)
			}
			f := newFixture(t, s)
			f.reopen = b.Reopen
			tc.fn(t, f)
		})
	}
}

// Reviewer returns the actor of a test reviewer.
func Reviewer(id string) aais.Actor {
	return aais.Actor{ID: id, Type: aais.ActorHuman, AuthenticatedBy: "conformance"}
}

// quorumRequest records a request "apr_<n>" that needs q, offering approve
// once, deny once and cancel once.
func (f *fixture) quorumRequest(t *testing.T, n string, q aais.Quorum) *aais.Request {
	t.Helper()
	ext, err := q.Extension()
	if err != nil {
		t.Fatal(err)
	}
	r, err := aais.NewRequest(aais.RequestParams{
		ID:        "apr_" + n,
		CreatedAt: f.clock.Now(),
		ExpiresAt: f.clock.Now().Add(10 * 60e9),
		Origin:    aais.Origin{Harness: "conformance", SessionID: "s-1", RunID: "run-s-1"},
		Action:    json.RawMessage(action(n)),
		Risk:      aais.Risk{Level: aais.RiskHigh, Reasons: []string{"Moves money"}},
		Choices: []aais.Choice{
			{Decision: aais.Approve, Scope: aais.ScopeOnce, Label: "Allow once"},
			{Decision: aais.Deny, Scope: aais.ScopeOnce, Label: "Deny"},
			{Decision: aais.Cancel, Scope: aais.ScopeOnce, Label: "Cancel"},
		},
		Extensions: aais.Extensions{aais.QuorumExtension: ext},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.auth.Create(f.ctx, r); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return r
}

// vote decides v on r as reviewer id holding roles.
func (f *fixture) vote(t *testing.T, a *aais.Authority, r *aais.Request, id string, v aais.Verdict, roles ...string) (*aais.Message, error) {
	t.Helper()
	d, err := aais.NewDecision(r, aais.DecisionParams{Decision: v, Scope: aais.ScopeOnce, Actor: Reviewer(id), DecidedAt: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return a.DecideWith(f.ctx, d, aais.DecideOptions{Actor: Reviewer(id), Roles: roles})
}

func (f *fixture) mustVote(t *testing.T, r *aais.Request, id string, v aais.Verdict, roles ...string) *aais.Message {
	t.Helper()
	m, err := f.vote(t, f.auth, r, id, v, roles...)
	if err != nil {
		t.Fatalf("%s %s: %v", id, v, err)
	}
	return m
}

func wantPartial(t *testing.T, m *aais.Message, approvals, denials int) aais.Tally {
	t.Helper()
	if !aais.Partial(m) || m.Sequence == 0 {
		t.Fatalf("want a recorded partial vote, got %s %+v", m.Type, m)
	}
	tl, ok := aais.TallyOf(m)
	if !ok || len(tl.Approvals) != approvals || len(tl.Denials) != denials {
		t.Fatalf("tally %+v: want %d approvals, %d denials", tl, approvals, denials)
	}
	return tl
}

func voters(votes []aais.Vote) []string {
	var ids []string
	for _, v := range votes {
		ids = append(ids, v.Actor.ID)
	}
	return ids
}

func (f *fixture) wantPending(t *testing.T, id string) {
	t.Helper()
	if st := f.state(t, id); !st.Pending() {
		t.Fatalf("%s resolved early: %+v", id, st.Resolution.Event.Resolution)
	}
}

// wantOneResolution checks the log holds exactly one approval.resolved of
// id, and that a View built from the whole log applies every event.
func (f *fixture) wantOneResolution(t *testing.T, id string) {
	t.Helper()
	page := f.events(t, 0)
	var v aais.View
	n := 0
	for _, m := range page.Events {
		if _, err := v.Apply(m); err != nil {
			t.Fatalf("View.Apply(%d %s): %v", m.Sequence, m.Type, err)
		}
		if m.Type == aais.TypeResolved && m.Resolution.RequestID == id {
			n++
		}
	}
	if n != 1 || v.Sequence() != page.Latest {
		t.Fatalf("%d resolutions of %s in the log (view at %d of %d), want 1", n, id, v.Sequence(), page.Latest)
	}
}

func testQuorumTwo(t *testing.T, f *fixture) {
	r := f.quorumRequest(t, "q1", aais.Quorum{ApprovalsRequired: 2})
	first := f.mustVote(t, r, "alice", aais.Approve)
	tl := wantPartial(t, first, 1, 0)
	if tl.ApprovalsRequired != 2 || voters(tl.Approvals)[0] != "alice" {
		t.Fatalf("tally %+v", tl)
	}
	f.wantPending(t, r.ID)
	snap, err := f.auth.Snapshot(f.ctx)
	if err != nil || len(snap.Snapshot.Pending) != 1 {
		t.Fatalf("snapshot after a partial vote: %v %+v", err, snap)
	}
	if st := aais.SnapshotTallies(snap)[r.ID]; len(st.Approvals) != 1 || st.ApprovalsRequired != 2 {
		t.Fatalf("snapshot tally %+v, want alice's approval of 2", st)
	}
	second := f.mustVote(t, r, "bob", aais.Approve)
	wantOutcome(t, second, aais.OutcomeApproved, aais.ScopeOnce)
	tl, ok := aais.TallyOf(second)
	if !ok || !slices.Equal(voters(tl.Approvals), []string{"alice", "bob"}) {
		t.Fatalf("receipt tally %+v, want alice and bob", tl)
	}
	f.wantResolved(t, r.ID, second)
	f.wantOneResolution(t, r.ID)
}

func testQuorumReplay(t *testing.T, f *fixture) {
	r := f.quorumRequest(t, "q2", aais.Quorum{ApprovalsRequired: 2})
	d, err := aais.NewDecision(r, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeOnce, Actor: Reviewer("alice"), DecidedAt: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.auth.Decide(f.ctx, d, Reviewer("alice"), nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.auth.Decide(f.ctx, d, Reviewer("alice"), nil)
	if err != nil || again.ID != first.ID || again.Sequence != first.Sequence {
		t.Fatalf("replay: %v, %+v, want %+v", err, again, first)
	}
	// The same reviewer approving again (another decision) counts nothing.
	if _, err := f.vote(t, f.auth, r, "alice", aais.Approve); !errors.Is(err, aais.ErrAlreadyVoted) {
		t.Fatalf("second vote of alice: %v, want ErrAlreadyVoted", err)
	}
	f.wantPending(t, r.ID)
	if wantPartial(t, first, 1, 0); f.events(t, 0).Latest != first.Sequence {
		t.Fatal("the refused vote wrote an event")
	}
	wantOutcome(t, f.mustVote(t, r, "bob", aais.Approve), aais.OutcomeApproved, aais.ScopeOnce)
	if m := f.mustVote(t, r, "carol", aais.Approve); m.Resolution == nil || m.Resolution.Outcome != aais.OutcomeConflict {
		t.Fatalf("a vote after the resolution: %+v, want a conflict", m)
	}
}

func testQuorumDenyAny(t *testing.T, f *fixture) {
	r := f.quorumRequest(t, "q3", aais.Quorum{ApprovalsRequired: 2})
	wantPartial(t, f.mustVote(t, r, "alice", aais.Approve), 1, 0)
	denied := f.mustVote(t, r, "carol", aais.Deny)
	wantOutcome(t, denied, aais.OutcomeDenied, aais.ScopeOnce)
	tl, ok := aais.TallyOf(denied)
	if !ok || !slices.Equal(voters(tl.Approvals), []string{"alice"}) || !slices.Equal(voters(tl.Denials), []string{"carol"}) {
		t.Fatalf("receipt tally %+v", tl)
	}
	if m := f.mustVote(t, r, "bob", aais.Approve); m.Resolution == nil || m.Resolution.Outcome != aais.OutcomeConflict {
		t.Fatalf("an approval after the denial: %+v, want a conflict", m)
	}
	f.wantResolved(t, r.ID, denied)
	f.wantOneResolution(t, r.ID)
}

func testQuorumDenyQuorum(t *testing.T, f *fixture) {
	r := f.quorumRequest(t, "q4", aais.Quorum{ApprovalsRequired: 2, Deny: aais.DenyQuorum})
	wantPartial(t, f.mustVote(t, r, "carol", aais.Deny), 0, 1)
	wantPartial(t, f.mustVote(t, r, "alice", aais.Approve), 1, 1)
	denied := f.mustVote(t, r, "dave", aais.Deny)
	wantOutcome(t, denied, aais.OutcomeDenied, aais.ScopeOnce)
	f.wantOneResolution(t, r.ID)
}

func testQuorumRoles(t *testing.T, f *fixture) {
	r := f.quorumRequest(t, "q5", aais.Quorum{ApprovalsRequired: 2, FromRoles: []string{"finance", "security"}})
	wantPartial(t, f.mustVote(t, r, "alice", aais.Approve, "finance", "security"), 1, 0)
	// bob holds finance only; alice can fill security: two approvers, both roles.
	m := f.mustVote(t, r, "bob", aais.Approve, "finance")
	wantOutcome(t, m, aais.OutcomeApproved, aais.ScopeOnce)

	r2 := f.quorumRequest(t, "q6", aais.Quorum{ApprovalsRequired: 2, FromRoles: []string{"finance", "security"}})
	wantPartial(t, f.mustVote(t, r2, "alice", aais.Approve, "finance"), 1, 0)
	tl := wantPartial(t, f.mustVote(t, r2, "bob", aais.Approve, "finance"), 2, 0)
	if n, roles := tl.Missing(); n != 1 || !slices.Equal(roles, []string{"security"}) {
		t.Fatalf("missing %d %v, want 1 [security]", n, roles)
	}
	f.wantPending(t, r2.ID)
	m = f.mustVote(t, r2, "carol", aais.Approve, "security")
	wantOutcome(t, m, aais.OutcomeApproved, aais.ScopeOnce)
	if tl, _ := aais.TallyOf(m); len(tl.Approvals) != 3 {
		t.Fatalf("receipt lists %v, want all three approvers", voters(tl.Approvals))
	}
}

func testQuorumScope(t *testing.T, f *fixture) {
	q, _ := aais.Quorum{ApprovalsRequired: 2}.Extension()
	r := f.request(t, "q7", reqOpt{}) // offers approve for the session
	r.Extensions = aais.Extensions{aais.QuorumExtension: q}
	if _, _, err := f.auth.Create(f.ctx, r); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("a quorum request offering a session approval: %v, want ErrInvalid", err)
	}
	bad := f.request(t, "q8", reqOpt{})
	bad.Choices = slices.DeleteFunc(bad.Choices, func(c aais.Choice) bool { return c.Scope != aais.ScopeOnce })
	bad.Extensions = aais.Extensions{aais.QuorumExtension: json.RawMessage(`{"approvals_required":0}`)}
	if _, _, err := f.auth.Create(f.ctx, bad); !errors.Is(err, aais.ErrInvalid) {
		t.Fatalf("a malformed quorum: %v, want ErrInvalid", err)
	}
}

// testQuorumRace: N+5 reviewers approve at once, through several handles
// when the storage has them; exactly one resolution, listing N or more
// approvers, and every other vote is a partial or a conflict.
func testQuorumRace(t *testing.T, f *fixture) {
	const n = 3
	r := f.quorumRequest(t, "q9", aais.Quorum{ApprovalsRequired: n})
	auths := []*aais.Authority{f.auth}
	if f.reopen != nil {
		for range 2 {
			a, err := aais.NewAuthority(f.reopen(t, f.store), &aais.AuthorityOptions{Now: f.clock.Now, Stream: "conformance.approvals"})
			if err != nil {
				t.Fatal(err)
			}
			auths = append(auths, a)
		}
	}
	out := make([]*aais.Message, n+5)
	errs := make([]error, n+5)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			out[i], errs[i] = f.vote(t, auths[i%len(auths)], r, fmt.Sprintf("reviewer-%d", i), aais.Approve)
		})
	}
	wg.Wait()
	resolutions := map[string]bool{}
	for i, m := range out {
		switch {
		case errs[i] != nil:
			t.Fatalf("reviewer %d: %v", i, errs[i])
		case aais.Partial(m):
		case m.Resolution != nil && m.Resolution.Outcome == aais.OutcomeApproved:
			resolutions[m.Resolution.ID] = true
			if tl, _ := aais.TallyOf(m); len(tl.Approvals) < n {
				t.Fatalf("receipt lists %d approvers, want %d", len(tl.Approvals), n)
			}
		case m.Resolution != nil && m.Resolution.Outcome == aais.OutcomeConflict:
		default:
			t.Fatalf("reviewer %d: unexpected %s %+v", i, m.Type, m)
		}
	}
	if len(resolutions) != 1 {
		t.Fatalf("%d approval receipts handed out, want exactly 1", len(resolutions))
	}
	f.wantOneResolution(t, r.ID)
}
