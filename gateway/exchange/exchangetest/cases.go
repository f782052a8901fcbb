package exchangetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/gateway/exchange"
)

type (
	x = exchange.Exchange
	// st is a state.
	st = exchange.State
)

const (
	received        = exchange.Received
	pendingApproval = exchange.PendingApproval
	approved        = exchange.Approved
	executing       = exchange.Executing
	done            = exchange.Done
	failed          = exchange.Failed
)

func testStateMachine(t *testing.T, b Backend) {
	s := b.New(t, Config{})
	legal := map[[2]st]bool{
		{received, executing}: true, {received, pendingApproval}: true, {received, failed}: true,
		{pendingApproval, approved}: true, {pendingApproval, failed}: true,
		{approved, executing}: true, {approved, failed}: true,
		{executing, done}: true, {executing, failed}: true,
	}
	for _, from := range exchange.States {
		for _, to := range exchange.States {
			n := string(from) + "->" + string(to)
			t.Run(n, func(t *testing.T) {
				if got := exchange.Legal(from, to); got != legal[[2]st{from, to}] {
					t.Fatalf("Legal = %v", got)
				}
				cur := InState(t, s, n, from)
				r, status := Reply(to)
				got, ok, err := s.Transition(t.Context(), cur.ID, from, to, r, status)
				if legal[[2]st{from, to}] {
					if err != nil || !ok || got.State != to {
						t.Fatalf("ok=%v err=%v state=%s", ok, err, got.State)
					}
					if got.UpdatedAt.Before(cur.UpdatedAt) {
						t.Fatalf("UpdatedAt went back")
					}
					// The same transition again: no longer in from.
					again, ok, err := s.Transition(t.Context(), cur.ID, from, to, r, status)
					if err != nil || ok || again.State != to {
						t.Fatalf("repeat: ok=%v err=%v state=%s", ok, err, again.State)
					}
				} else if !errors.Is(err, exchange.ErrIllegalTransition) || ok {
					t.Fatalf("ok=%v err=%v, want ErrIllegalTransition", ok, err)
				}
				if to == executing {
					_, ok, err := s.Claim(t.Context(), cur.ID, from)
					if legal[[2]st{from, to}] != (err == nil) || ok {
						t.Fatalf("Claim after: ok=%v err=%v", ok, err)
					}
				}
				if !legal[[2]st{from, to}] {
					after, err := s.Get(t.Context(), cur.ID)
					if err != nil || !reflect.DeepEqual(after, cur) {
						t.Fatalf("changed by an illegal transition: %+v, %v", after, err)
					}
				}
			})
		}
	}
}

// A transition from a state the exchange is not in changes nothing.
func testTransitionStale(t *testing.T, b Backend) {
	s := b.New(t, Config{})
	cur := InState(t, s, "1", pendingApproval)
	got, ok, err := s.Transition(t.Context(), cur.ID, received, failed, FinalReply, 500)
	if err != nil || ok || !reflect.DeepEqual(got, cur) {
		t.Fatalf("ok=%v err=%v got=%+v", ok, err, got)
	}
	got, ok, err = s.Claim(t.Context(), cur.ID, received, approved)
	if err != nil || ok || got.State != pendingApproval {
		t.Fatalf("Claim: ok=%v err=%v state=%s", ok, err, got.State)
	}
	if after, err := s.Get(t.Context(), cur.ID); err != nil || !reflect.DeepEqual(after, cur) {
		t.Fatalf("a stale transition changed the exchange: %+v %v", after, err)
	}
}

func testValidation(t *testing.T, b Backend) {
	s := b.New(t, Config{})
	ctx := t.Context()
	cur := Create(t, s, "1")
	bad := []x{
		{MessageID: "m", Capability: "c"},
		{Sender: "s", Capability: "c"},
		{Sender: "s", MessageID: "m"},
		{Sender: "s", MessageID: "m\n", Capability: "c"},
		{Sender: "s", MessageID: "m", Capability: "c", State: approved},
		{Sender: "s", MessageID: "m", Capability: "c", State: done},
		{Sender: "s", MessageID: "m", Capability: "c", State: "bogus"},
		{Sender: "s", MessageID: "m", Capability: "c", Reply: FinalReply, ReplyStatus: 200},
		{Sender: "s", MessageID: "m", Capability: "c", ClaimedBy: "me"},
		{Sender: "s", MessageID: "m", Capability: "c", Decision: json.RawMessage(`{}`)},
		{Sender: strings.Repeat("s", 2000), MessageID: "m", Capability: "c"},
		{Sender: "s", MessageID: string([]byte{0xff}), Capability: "c"},
		{Sender: "s", MessageID: "m", Capability: "c", ID: "exc_\x00"},
		{Sender: "s", MessageID: "m", Capability: "c", TraceID: "t\x00"},
	}
	for i, bx := range bad {
		if _, _, err := s.Create(ctx, bx); !errors.Is(err, exchange.ErrInvalid) {
			t.Errorf("Create bad %d: %v", i, err)
		}
	}
	if _, err := s.BySender(ctx, "s", "m"); !errors.Is(err, exchange.ErrNotFound) {
		t.Errorf("a refused Create was recorded: %v", err)
	}
	if _, err := s.Get(ctx, ""); !errors.Is(err, exchange.ErrInvalid) {
		t.Errorf("Get empty: %v", err)
	}
	if _, err := s.Get(ctx, "exc_nope"); !errors.Is(err, exchange.ErrNotFound) {
		t.Errorf("Get unknown: %v", err)
	}
	if _, err := s.BySender(ctx, "agent://a", "nope"); !errors.Is(err, exchange.ErrNotFound) {
		t.Errorf("BySender unknown: %v", err)
	}
	if _, err := s.BySender(ctx, "", "m"); !errors.Is(err, exchange.ErrInvalid) {
		t.Errorf("BySender empty: %v", err)
	}
	if _, _, err := s.Transition(ctx, "exc_nope", received, failed, FinalReply, 500); !errors.Is(err, exchange.ErrNotFound) {
		t.Errorf("Transition unknown: %v", err)
	}
	if _, _, err := s.Claim(ctx, "exc_nope", received); !errors.Is(err, exchange.ErrNotFound) {
		t.Errorf("Claim unknown: %v", err)
	}
	checks := []struct {
		name     string
		from, to st
		c        exchange.Change
		want     error
	}{
		{"unknown from", "bogus", failed, exchange.Change{Reply: FinalReply, ReplyStatus: 500}, exchange.ErrInvalid},
		{"unknown to", received, "bogus", exchange.Change{}, exchange.ErrInvalid},
		{"invalid JSON", received, failed, exchange.Change{Reply: json.RawMessage(`{"a":`), ReplyStatus: 500}, exchange.ErrInvalid},
		{"no reply for final", received, failed, exchange.Change{}, exchange.ErrInvalid},
		{"no reply for pending", received, pendingApproval, exchange.Change{}, exchange.ErrInvalid},
		{"status without reply", received, executing, exchange.Change{ReplyStatus: 200}, exchange.ErrInvalid},
		{"reply without status", received, failed, exchange.Change{Reply: FinalReply}, exchange.ErrInvalid},
		{"bad status", received, failed, exchange.Change{Reply: FinalReply, ReplyStatus: 42}, exchange.ErrInvalid},
		{"approval outside pending", received, executing, exchange.Change{ApprovalID: "apr_x"}, exchange.ErrInvalid},
		{"deadline outside pending", received, executing, exchange.Change{Deadline: time.Now()}, exchange.ErrInvalid},
		{"digest on final", received, failed, exchange.Change{Reply: FinalReply, ReplyStatus: 500, ActionDigest: "d"}, exchange.ErrInvalid},
		{"release key entering executing", received, executing, exchange.Change{ReleaseKey: true}, exchange.ErrInvalid},
		{"illegal", received, approved, exchange.Change{}, exchange.ErrIllegalTransition},
		{"other approval id", received, pendingApproval, exchange.Change{Reply: PendingReply, ReplyStatus: 202, ApprovalID: "apr_other"}, exchange.ErrConflict},
		{"other digest", received, pendingApproval, exchange.Change{Reply: PendingReply, ReplyStatus: 202, ActionDigest: "sha256:other"}, exchange.ErrConflict},
	}
	for _, c := range checks {
		if _, _, err := s.Apply(ctx, cur.ID, c.from, c.to, c.c); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, _, err := s.Claim(ctx, cur.ID); !errors.Is(err, exchange.ErrInvalid) {
		t.Errorf("Claim without states: %v", err)
	}
	if _, _, err := s.Claim(ctx, cur.ID, "bogus"); !errors.Is(err, exchange.ErrInvalid) {
		t.Errorf("Claim from an unknown state: %v", err)
	}
	if _, _, err := s.Claim(ctx, cur.ID, pendingApproval); !errors.Is(err, exchange.ErrIllegalTransition) {
		t.Errorf("Claim from pending_approval: %v", err)
	}
	if _, err := s.Waiting(ctx); !errors.Is(err, exchange.ErrInvalid) {
		t.Errorf("Waiting without states: %v", err)
	}
	if _, err := s.Waiting(ctx, "bogus"); !errors.Is(err, exchange.ErrInvalid) {
		t.Errorf("Waiting unknown state: %v", err)
	}
	// pending_approval needs an approval id and a digest.
	y, _, err := s.Create(ctx, x{Sender: "s", MessageID: "m", Capability: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Transition(ctx, y.ID, received, pendingApproval, PendingReply, 202); !errors.Is(err, exchange.ErrInvalid) {
		t.Errorf("pending without approval id: %v", err)
	}
	dl := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
	got, ok, err := s.Apply(ctx, y.ID, received, pendingApproval, exchange.Change{Reply: PendingReply, ReplyStatus: 202,
		ApprovalID: "apr_y", ActionDigest: "sha256:y", Deadline: dl})
	if err != nil || !ok || got.ApprovalID != "apr_y" || got.ActionDigest != "sha256:y" || !got.Deadline.Equal(dl) {
		t.Fatalf("Apply: ok=%v err=%v %+v", ok, err, got)
	}
	if again, err := s.Get(ctx, y.ID); err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("Get after Apply: %+v %v, want %+v", again, err, got)
	}
	// Nothing of this changed cur.
	if after, err := s.Get(ctx, cur.ID); err != nil || !reflect.DeepEqual(after, cur) {
		t.Fatalf("x changed: %+v %v", after, err)
	}
}

func testCreateIdempotent(t *testing.T, b Backend) {
	s := b.New(t, Config{})
	ctx := t.Context()
	in := Request("1")
	in.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	in.Deadline = time.Date(2027, 1, 2, 3, 4, 5, 6, time.UTC)
	first, created, err := s.Create(ctx, in)
	if err != nil || !created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	if !strings.HasPrefix(first.ID, "exc_") || len(first.ID) != 36 || first.State != received ||
		first.CreatedAt.IsZero() || !first.CreatedAt.Equal(first.UpdatedAt) || first.ClaimedBy != "" ||
		first.TraceID != in.TraceID || !first.Deadline.Equal(in.Deadline) || first.Reply != nil || first.ReplyStatus != 0 ||
		first.Sender != in.Sender || first.MessageID != in.MessageID || first.CorrelationID != in.CorrelationID ||
		first.Capability != in.Capability || first.ApprovalID != in.ApprovalID || first.ActionDigest != in.ActionDigest {
		t.Fatalf("first: %+v", first)
	}
	if got, err := s.Get(ctx, first.ID); err != nil || !reflect.DeepEqual(got, first) {
		t.Fatalf("Get: %+v %v", got, err)
	}
	// A retry, with another proposed ID, returns the first.
	retry := Request("1")
	retry.ID = "exc_mine"
	again, created, err := s.Create(ctx, retry)
	if err != nil || created || !reflect.DeepEqual(again, first) {
		t.Fatalf("retry: created=%v err=%v %+v", created, err, again)
	}
	if _, err := s.Get(ctx, "exc_mine"); !errors.Is(err, exchange.ErrNotFound) {
		t.Fatalf("a retry recorded its id: %v", err)
	}
	// Even after the exchange moved on.
	fin := Move(t, s, first.ID, received, executing)
	fin = Move(t, s, fin.ID, executing, done)
	again, created, err = s.Create(ctx, Request("1"))
	if err != nil || created || !reflect.DeepEqual(again, fin) {
		t.Fatalf("retry after done: created=%v err=%v %+v", created, err, again)
	}
	if got, err := s.BySender(ctx, "agent://a", "msg_1"); err != nil || !reflect.DeepEqual(got, fin) {
		t.Fatalf("BySender: %v %+v", err, got)
	}
	// A retry proposing another id and approval id (a gateway names each
	// attempt afresh) is the recorded request, with the recorded names.
	renamed := Request("1")
	renamed.ID, renamed.ApprovalID = "exc_attempt2", "apr_attempt2"
	if got, created, err := s.Create(ctx, renamed); err != nil || created || got.ID != first.ID || got.ApprovalID != first.ApprovalID {
		t.Fatalf("renamed retry: created=%v err=%v %+v", created, err, got)
	}
	// A different request under the same message id is refused.
	for _, mod := range []func(*x){
		func(x *x) { x.Capability = "other" },
		func(x *x) { x.CorrelationID = "other" },
		func(x *x) { x.ActionDigest = "other" },
	} {
		c := Request("1")
		mod(&c)
		if _, _, err := s.Create(ctx, c); !errors.Is(err, exchange.ErrConflict) {
			t.Errorf("conflicting retry: %v", err)
		}
	}
	// A retry that leaves out the approval id and digest is the request.
	partial := Request("1")
	partial.ApprovalID, partial.ActionDigest = "", ""
	if got, created, err := s.Create(ctx, partial); err != nil || created || got.ID != first.ID {
		t.Fatalf("partial retry: %v %v", created, err)
	}
	// The same message id from another sender is another exchange.
	other := Request("1")
	other.Sender = "agent://b"
	o, created, err := s.Create(ctx, other)
	if err != nil || !created || o.ID == first.ID {
		t.Fatalf("other sender: created=%v err=%v", created, err)
	}
	// A caller-chosen ID is used, and may not be reused.
	mine := Request("2")
	mine.ID = "exc_chosen"
	if got, created, err := s.Create(ctx, mine); err != nil || !created || got.ID != "exc_chosen" {
		t.Fatalf("chosen id: %v %v %+v", created, err, got)
	}
	dup := Request("3")
	dup.ID = "exc_chosen"
	if _, _, err := s.Create(ctx, dup); !errors.Is(err, exchange.ErrConflict) {
		t.Fatalf("reused id: %v", err)
	}
	if _, err := s.BySender(ctx, "agent://a", "msg_3"); !errors.Is(err, exchange.ErrNotFound) {
		t.Fatalf("refused create recorded: %v", err)
	}
	if id := exchange.NewID(); !strings.HasPrefix(id, "exc_") || len(id) != 36 || id == exchange.NewID() {
		t.Fatalf("NewID = %q", id)
	}
}

// createRace runs Creates of one request concurrently, spread over
// handles: exactly one creates, and all get the same exchange.
func createRace(t *testing.T, handles []exchange.Backend, n int) {
	var (
		wg      sync.WaitGroup
		created atomic.Int32
	)
	ids := make([]string, n)
	for i := range ids {
		s := handles[i%len(handles)]
		wg.Go(func() {
			got, c, err := s.Create(t.Context(), Request("same"))
			if err != nil {
				t.Error(err)
				return
			}
			if c {
				created.Add(1)
			}
			ids[i] = got.ID
		})
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("%d created, want 1", created.Load())
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("ids differ: %v", ids)
		}
	}
	if w, err := handles[0].Waiting(t.Context(), received); err != nil || len(w) != 1 {
		t.Fatalf("Waiting = %d exchanges, %v; want 1", len(w), err)
	}
}

// Concurrent Creates of one request: one creates, all get the same.
func testCreateConcurrent(t *testing.T, b Backend) {
	createRace(t, []exchange.Backend{b.New(t, Config{})}, 30)
}

// The same across two handles.
func testCreateTwoHandles(t *testing.T, b Backend) {
	a := b.New(t, Config{Instance: "a"})
	createRace(t, []exchange.Backend{a, b.Reopen(t, a, Config{Instance: "b"})}, 30)
}

// An exchange created claimed runs without a Claim: nobody else can claim
// it, and after a crash it is interrupted like any claimed one.
func testCreateClaimed(t *testing.T, b Backend) {
	s := b.New(t, Config{Instance: "gw_claim"})
	ctx := t.Context()
	if s.Instance() != "gw_claim" {
		t.Fatalf("Instance = %q", s.Instance())
	}
	c := Request("c")
	c.State = executing
	got, created, err := s.Create(ctx, c)
	if err != nil || !created || got.State != executing || got.ClaimedBy != s.Instance() {
		t.Fatalf("Create(executing) = %+v %v %v", got, created, err)
	}
	if _, ok, err := s.Claim(ctx, got.ID, received, approved); err != nil || ok {
		t.Fatalf("claimed twice: %v %v", ok, err)
	}
	if xs, err := s.Interrupted(ctx); err != nil || len(xs) != 1 || xs[0].ID != got.ID {
		t.Fatalf("Interrupted = %+v %v", xs, err)
	}
	// A retry of it is answered from the record.
	if again, created, err := s.Create(ctx, c); err != nil || created || !reflect.DeepEqual(again, got) {
		t.Fatalf("retry = %+v %v %v", again, created, err)
	}
	// A random instance name when none is given.
	if r := b.New(t, Config{}); r.Instance() == "" || r.Instance() == s.Instance() {
		t.Fatalf("default Instance = %q", r.Instance())
	}
}

func testClaimGoroutines(t *testing.T, b Backend) {
	s := b.New(t, Config{})
	cur := InState(t, s, "1", approved)
	var (
		wg   sync.WaitGroup
		wins atomic.Int32
	)
	for range 50 {
		wg.Go(func() {
			got, ok, err := s.Claim(t.Context(), cur.ID, received, approved)
			if err != nil {
				t.Error(err)
				return
			}
			if got.State != executing {
				t.Errorf("state %s", got.State)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d winners, want 1", wins.Load())
	}
	got, err := s.Get(t.Context(), cur.ID)
	if err != nil || got.State != executing || got.ClaimedBy != s.Instance() {
		t.Fatalf("%+v %v", got, err)
	}
}

// Two handles, many goroutines each, many exchanges: one winner per
// exchange.
func testClaimTwoHandles(t *testing.T, b Backend) {
	a := b.New(t, Config{Instance: "a"})
	bh := b.Reopen(t, a, Config{Instance: "b"})
	const n = 20
	ids := make([]string, n)
	for i := range n {
		ids[i] = InState(t, a, name(i), approved).ID
	}
	wins := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	for _, s := range []exchange.Backend{a, bh, a, bh} {
		for _, shift := range []int{0, 7} {
			wg.Go(func() {
				for k := range n {
					i := (k + shift) % n
					_, ok, err := s.Claim(t.Context(), ids[i], approved)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						wins[i].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	for i := range n {
		if wins[i].Load() != 1 {
			t.Fatalf("exchange %d: %d winners", i, wins[i].Load())
		}
		got, err := bh.Get(t.Context(), ids[i])
		if err != nil || got.State != executing || (got.ClaimedBy != "a" && got.ClaimedBy != "b") {
			t.Fatalf("%+v %v", got, err)
		}
	}
}

// Close and reopen: everything is as it was, and an interrupted exchange
// is found and can be failed, never claimed again.
func testRestart(t *testing.T, b Backend) {
	clk := NewClock(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
	now := func() time.Time { clk.Advance(time.Millisecond + 7); return clk.Now() }
	s := b.New(t, Config{Instance: "gw1", Now: now})
	var before []x
	for i, state := range exchange.States {
		before = append(before, InState(t, s, name(i), state))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(t.Context(), Request("late")); !errors.Is(err, exchange.ErrClosed) {
		t.Fatalf("Create after Close: %v", err)
	}
	s = b.Reopen(t, s, Config{Instance: "gw1"})
	for _, want := range before {
		got, err := s.Get(t.Context(), want.ID)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("after restart:\n got %+v\nwant %+v\n%v", got, want, err)
		}
		if want.Reply != nil && !bytes.Equal(got.Reply, want.Reply) {
			t.Fatalf("reply bytes changed")
		}
	}
	in, err := s.Interrupted(t.Context())
	if err != nil || len(in) != 1 || in[0].ID != before[3].ID || in[0].ClaimedBy != "gw1" {
		t.Fatalf("Interrupted: %+v %v", in, err)
	}
	if _, ok, err := s.Claim(t.Context(), in[0].ID, received, approved); err != nil || ok {
		t.Fatalf("interrupted exchange claimed again: %v %v", ok, err)
	}
	unknown := json.RawMessage(`{"error":{"code":"RESULT_STATE_UNKNOWN"}}`)
	if got, ok, err := s.Transition(t.Context(), in[0].ID, executing, failed, unknown, 500); err != nil || !ok ||
		got.State != failed || !bytes.Equal(got.Reply, unknown) || got.ReplyStatus != 500 {
		t.Fatalf("fail interrupted: %v %v", ok, err)
	}
	w, err := s.Waiting(t.Context(), pendingApproval, approved)
	if err != nil || len(w) != 2 || w[0].ID != before[1].ID || w[1].ID != before[2].ID {
		t.Fatalf("Waiting: %+v %v", w, err)
	}
}

// A claim is abandoned once its instance's heartbeat is older than the
// cutoff, as another handle (replica) sees it; never its own, never one
// of an instance that sent no heartbeat, and never a later heartbeat
// moved back by an earlier one.
func testAbandoned(t *testing.T, b Backend) {
	ctx := t.Context()
	a := b.New(t, Config{Instance: "gw-a"})
	other := b.Reopen(t, a, Config{Instance: "gw-b"})
	silent := b.Reopen(t, a, Config{Instance: "gw-old"})
	mine := InState(t, a, "a1", executing)
	if mine.ClaimedBy != "gw-a" {
		t.Fatalf("claimed by %q", mine.ClaimedBy)
	}
	finished := InState(t, a, "a2", done)
	byOld := InState(t, silent, "o1", executing)
	t0 := Start
	if err := a.Heartbeat(ctx, t0); err != nil {
		t.Fatal(err)
	}
	if err := other.Heartbeat(ctx, t0); err != nil {
		t.Fatal(err)
	}
	ids := func(xs []exchange.Exchange, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range xs {
			out = append(out, x.ID)
		}
		return out
	}
	// Alive at the cutoff: nothing abandoned.
	if got := ids(other.Abandoned(ctx, t0)); len(got) != 0 {
		t.Fatalf("Abandoned at the heartbeat = %v", got)
	}
	// Past it: gw-a's claim, as gw-b sees it; gw-a never sees its own.
	if got := ids(other.Abandoned(ctx, t0.Add(time.Nanosecond))); !reflect.DeepEqual(got, []string{mine.ID}) {
		t.Fatalf("Abandoned = %v, want [%s] (not %s, finished, nor %s, of an instance without heartbeats)", got, mine.ID, finished.ID, byOld.ID)
	}
	if got := ids(a.Abandoned(ctx, t0.Add(time.Hour))); len(got) != 0 {
		t.Fatalf("Abandoned by its own instance = %v", got)
	}
	// A late heartbeat keeps it alive; an earlier one does not move it back.
	if err := a.Heartbeat(ctx, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := a.Heartbeat(ctx, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := ids(other.Abandoned(ctx, t0.Add(time.Minute))); len(got) != 0 {
		t.Fatalf("Abandoned after a later heartbeat = %v", got)
	}
	// Ended by the other, it is abandoned no more.
	if _, ok, err := other.Transition(ctx, mine.ID, executing, failed, FinalReply, 500); err != nil || !ok {
		t.Fatalf("end: %v %v", ok, err)
	}
	if got := ids(other.Abandoned(ctx, t0.Add(time.Hour))); len(got) != 0 {
		t.Fatalf("Abandoned after it ended = %v", got)
	}
}

// Waiting lists in order of receipt, whatever the order of updates.
func testWaitingOrder(t *testing.T, b Backend) {
	s := b.New(t, Config{})
	var ids []string
	for i := range 6 {
		ids = append(ids, Create(t, s, name(i)).ID)
	}
	// Update in reverse order.
	Move(t, s, ids[5], received, pendingApproval)
	Move(t, s, ids[4], received, pendingApproval)
	Move(t, s, ids[4], pendingApproval, approved)
	Move(t, s, ids[3], received, failed)
	Move(t, s, ids[2], received, pendingApproval)
	Move(t, s, ids[1], received, pendingApproval)
	Move(t, s, ids[1], pendingApproval, approved)
	w, err := s.Waiting(t.Context(), approved, pendingApproval)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range w {
		got = append(got, e.ID)
	}
	want := []string{ids[1], ids[2], ids[4], ids[5]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Waiting = %v, want %v", got, want)
	}
	if w, err := s.Waiting(t.Context(), received); err != nil || len(w) != 1 || w[0].ID != ids[0] {
		t.Fatalf("Waiting(received) = %+v %v", w, err)
	}
	if w, err := s.Waiting(t.Context(), done); err != nil || len(w) != 0 {
		t.Fatalf("Waiting(done) = %+v %v", w, err)
	}
	if w, err := s.Interrupted(t.Context()); err != nil || len(w) != 0 {
		t.Fatalf("Interrupted = %+v %v", w, err)
	}
}

// A cancelled context writes nothing.
func testCancelledContext(t *testing.T, b Backend) {
	s := b.New(t, Config{})
	cur := InState(t, s, "1", approved)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.Create(ctx, Request("2")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Create: %v", err)
	}
	if _, _, err := s.Claim(ctx, cur.ID, approved); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim: %v", err)
	}
	if _, _, err := s.Transition(ctx, cur.ID, approved, failed, FinalReply, 500); !errors.Is(err, context.Canceled) {
		t.Fatalf("Transition: %v", err)
	}
	if _, err := s.BySender(t.Context(), "agent://a", "msg_2"); !errors.Is(err, exchange.ErrNotFound) {
		t.Fatalf("cancelled Create recorded: %v", err)
	}
	if got, err := s.Get(t.Context(), cur.ID); err != nil || !reflect.DeepEqual(got, cur) {
		t.Fatalf("cancelled write changed the exchange: %+v %v", got, err)
	}
	// Cancelled while queued behind other writes: whatever the outcome,
	// an error means nothing was written.
	var wg sync.WaitGroup
	for i := range 40 {
		ctx, cancel := context.WithCancel(t.Context())
		wg.Go(func() {
			_, created, err := s.Create(ctx, Request(fmt.Sprint("q", i)))
			if err != nil && created {
				t.Error("created with an error")
			}
			_, err2 := s.BySender(t.Context(), "agent://a", fmt.Sprint("msg_q", i))
			if err != nil && !errors.Is(err2, exchange.ErrNotFound) {
				t.Errorf("Create failed (%v) but recorded (%v)", err, err2)
			}
			if err == nil && err2 != nil {
				t.Errorf("Create succeeded but not recorded: %v", err2)
			}
		})
		if i%2 == 0 {
			cancel()
		} else {
			defer cancel()
		}
	}
	wg.Wait()
}

func testIdempotencyKey(t *testing.T, b Backend) {
	clk := NewClock(Start)
	s := b.New(t, Config{Now: clk.Now})
	ctx := t.Context()
	key := func(fp string) *exchange.Idempotency {
		return &exchange.Idempotency{From: "agent:a.b", To: "agent:c.d", PayloadType: "t.x", Key: "k-1", Fingerprint: fp,
			ExpiresAt: clk.Now().Add(time.Hour)}
	}
	first := Request("1")
	first.Idempotency = key("sha256:one")
	x1, created, err := s.Create(ctx, first)
	if err != nil || !created {
		t.Fatalf("first: %v %v", created, err)
	}
	// A retry with another message id and the same request: the first
	// exchange, nothing new recorded.
	retry := Request("2")
	retry.Idempotency = key("sha256:one")
	x2, created, err := s.Create(ctx, retry)
	if err != nil || created || x2.ID != x1.ID {
		t.Fatalf("retry = %s created=%v err=%v, want %s", x2.ID, created, err, x1.ID)
	}
	if _, err := s.BySender(ctx, "agent://a", "msg_2"); !errors.Is(err, exchange.ErrNotFound) {
		t.Fatalf("a replayed request was recorded: %v", err)
	}
	// The key with another request: conflict, nothing recorded.
	other := Request("3")
	other.Idempotency = key("sha256:two")
	if _, _, err := s.Create(ctx, other); !errors.Is(err, exchange.ErrKeyReused) || !errors.Is(err, exchange.ErrConflict) {
		t.Fatalf("reused key: %v", err)
	}
	if _, err := s.BySender(ctx, "agent://a", "msg_3"); !errors.Is(err, exchange.ErrNotFound) {
		t.Fatalf("a refused request was recorded: %v", err)
	}
	// The same key in another scope is another key.
	scoped := Request("4")
	scoped.Idempotency = key("sha256:two")
	scoped.Idempotency.PayloadType = "t.y"
	if _, created, err := s.Create(ctx, scoped); err != nil || !created {
		t.Fatalf("other scope: %v %v", created, err)
	}
	// Nothing has expired yet.
	if n, err := s.PurgeIdempotency(ctx, clk.Now()); err != nil || n != 0 {
		t.Fatalf("early purge = %d %v, want 0", n, err)
	}
	// Expired: the key is free again, and the purge removes what is left.
	clk.Advance(2 * time.Hour)
	if _, created, err := s.Create(ctx, other); err != nil || !created {
		t.Fatalf("after expiry: %v %v", created, err)
	}
	clk.Advance(2 * time.Hour)
	if n, err := s.PurgeIdempotency(ctx, clk.Now()); err != nil || n != 2 {
		t.Fatalf("purge = %d %v, want 2", n, err)
	}
	// Purged: a new request may use the key.
	fresh := Request("5")
	fresh.Idempotency = key("sha256:three")
	if _, created, err := s.Create(ctx, fresh); err != nil || !created {
		t.Fatalf("after purge: %v %v", created, err)
	}
	for i, k := range []*exchange.Idempotency{
		{From: "a", To: "b", PayloadType: "c", Key: "", Fingerprint: "f", ExpiresAt: clk.Now()},
		{From: "a", To: "b", PayloadType: "c", Key: "k", Fingerprint: "", ExpiresAt: clk.Now()},
		{From: "a", To: "b", PayloadType: "c", Key: "k", Fingerprint: "f"},
		{From: "a\n", To: "b", PayloadType: "c", Key: "k", Fingerprint: "f", ExpiresAt: clk.Now()},
	} {
		bad := Request(fmt.Sprint("bad", i))
		bad.Idempotency = k
		if _, _, err := s.Create(ctx, bad); !errors.Is(err, exchange.ErrInvalid) {
			t.Fatalf("bad key %d: %v", i, err)
		}
	}
}

// ReleaseKey, entering failed, frees the key at once: a retry runs.
func testReleaseKey(t *testing.T, b Backend) {
	clk := NewClock(Start)
	s := b.New(t, Config{Now: clk.Now})
	ctx := t.Context()
	key := &exchange.Idempotency{From: "agent:a.b", To: "agent:c.d", PayloadType: "t.x", Key: "k-r",
		Fingerprint: "sha256:r", ExpiresAt: clk.Now().Add(time.Hour)}
	first := Request("r1")
	first.Idempotency = key
	x1, created, err := s.Create(ctx, first)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	if _, _, err := s.Apply(ctx, x1.ID, received, failed, exchange.Change{Reply: FinalReply, ReplyStatus: 503,
		ReleaseKey: true}); err != nil {
		t.Fatal(err)
	}
	retry := Request("r2")
	retry.Idempotency = key
	x2, created, err := s.Create(ctx, retry)
	if err != nil || !created || x2.ID == x1.ID {
		t.Fatalf("retry after release = %+v %v %v", x2, created, err)
	}
	// A key not released keeps naming its exchange after it failed.
	if _, _, err := s.Apply(ctx, x2.ID, received, failed, exchange.Change{Reply: FinalReply, ReplyStatus: 400}); err != nil {
		t.Fatal(err)
	}
	third := Request("r3")
	third.Idempotency = key
	if x3, created, err := s.Create(ctx, third); err != nil || created || x3.ID != x2.ID || x3.State != failed {
		t.Fatalf("retry of a failure = %+v %v %v", x3, created, err)
	}
	if n, err := s.PurgeIdempotency(ctx, clk.Now().Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("purge = %d %v, want 1 (the released key is gone)", n, err)
	}
}

func testDecisionRecordedOnce(t *testing.T, b Backend) {
	clk := NewClock(Start)
	s := b.New(t, Config{Now: clk.Now})
	ctx := t.Context()
	cur := InState(t, s, "d", pendingApproval)
	dec := json.RawMessage(`{"intent": "approval_decision",  "n":1}`)
	if _, _, err := s.Apply(ctx, InState(t, s, "e", received).ID, received, executing, exchange.Change{Decision: dec}); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatal("a decision accepted outside pending_approval")
	}
	if _, _, err := s.Apply(ctx, cur.ID, pendingApproval, approved, exchange.Change{Decision: json.RawMessage(`{`)}); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatalf("invalid decision JSON: %v", err)
	}
	got, ok, err := s.Apply(ctx, cur.ID, pendingApproval, approved, exchange.Change{Decision: dec})
	if err != nil || !ok || !bytes.Equal(got.Decision, dec) {
		t.Fatalf("Apply = %s %v %v", got.Decision, ok, err)
	}
	if _, _, err := s.Apply(ctx, cur.ID, approved, executing, exchange.Change{Decision: json.RawMessage(`{"n":2}`)}); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatalf("a second decision: %v", err)
	}
	if _, _, err := s.Apply(ctx, cur.ID, approved, executing, exchange.Change{Decision: json.RawMessage(`{`)}); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatalf("invalid decision JSON: %v", err)
	}
	// Kept byte for byte through later transitions.
	Move(t, s, cur.ID, approved, executing)
	fin := Move(t, s, cur.ID, executing, done)
	if !bytes.Equal(fin.Decision, dec) {
		t.Fatalf("decision = %s", fin.Decision)
	}
	if g, err := s.Get(ctx, cur.ID); err != nil || !bytes.Equal(g.Decision, dec) {
		t.Fatalf("Get decision = %s %v", g.Decision, err)
	}
	// Denied: the decision recorded entering failed.
	den := InState(t, s, "f", pendingApproval)
	if g, _, err := s.Apply(ctx, den.ID, pendingApproval, failed, exchange.Change{Reply: FinalReply, ReplyStatus: 403,
		Decision: dec}); err != nil || !bytes.Equal(g.Decision, dec) {
		t.Fatalf("deny with decision = %s %v", g.Decision, err)
	}
}

func testReviews(t *testing.T, b Backend) {
	clk := NewClock(Start)
	s := b.New(t, Config{Now: clk.Now})
	ctx := t.Context()
	run := func(n string, due time.Duration, outcome st) x {
		cur := InState(t, s, n, executing)
		r, status := Reply(outcome)
		cur, ok, err := s.Apply(ctx, cur.ID, executing, outcome, exchange.Change{Reply: r, ReplyStatus: status,
			Review: &exchange.Review{Mode: "required_within_24h", Profile: "P", DueAt: clk.Now().Add(due)}})
		if err != nil || !ok {
			t.Fatal(err)
		}
		return cur
	}
	if open, overdue, err := s.ReviewCounts(ctx, clk.Now()); err != nil || open != 0 || overdue != 0 {
		t.Fatalf("empty counts = %d %d %v", open, overdue, err)
	}
	soon, later := run("a", time.Hour, done), run("b", 24*time.Hour, failed)
	if _, _, err := s.Apply(ctx, InState(t, s, "c", received).ID, received, pendingApproval,
		exchange.Change{Reply: PendingReply, ReplyStatus: 202, Review: &exchange.Review{Mode: "m", DueAt: clk.Now()}}); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatalf("review queued entering pending_approval: %v", err)
	}
	for _, r := range []exchange.Review{{Mode: "", DueAt: clk.Now()}, {Mode: "m"}} {
		y := InState(t, s, "bad"+r.Mode, executing)
		if _, _, err := s.Apply(ctx, y.ID, executing, done, exchange.Change{Reply: FinalReply, ReplyStatus: 200, Review: &r}); !errors.Is(err, exchange.ErrInvalid) {
			t.Fatalf("bad review %+v: %v", r, err)
		}
	}
	rs, err := s.Reviews(ctx, exchange.ReviewFilter{Open: true})
	if err != nil || len(rs) != 2 || rs[0].ExchangeID != soon.ID || rs[0].Outcome != done || rs[0].Capability != "fs.write" ||
		rs[0].Sender != "agent://a" || rs[0].Profile != "P" || rs[0].Mode != "required_within_24h" ||
		!rs[0].CreatedAt.Equal(Start) || !rs[0].DueAt.Equal(Start.Add(time.Hour)) || !rs[0].Open() ||
		rs[1].ExchangeID != later.ID || rs[1].Outcome != failed {
		t.Fatalf("open reviews = %+v %v", rs, err)
	}
	clk.Advance(2 * time.Hour)
	if open, overdue, err := s.ReviewCounts(ctx, clk.Now()); err != nil || open != 2 || overdue != 1 {
		t.Fatalf("counts = %d %d %v", open, overdue, err)
	}
	rs, err = s.Reviews(ctx, exchange.ReviewFilter{Overdue: clk.Now()})
	if err != nil || len(rs) != 1 || rs[0].ExchangeID != soon.ID || !rs[0].Overdue(clk.Now()) {
		t.Fatalf("overdue = %+v %v", rs, err)
	}
	if ok, err := s.MarkTimedOut(ctx, soon.ID); err != nil || !ok {
		t.Fatalf("MarkTimedOut = %v %v", ok, err)
	}
	if ok, err := s.MarkTimedOut(ctx, soon.ID); err != nil || ok {
		t.Fatalf("second MarkTimedOut = %v %v", ok, err)
	}
	if rs, err := s.Reviews(ctx, exchange.ReviewFilter{Overdue: clk.Now(), NotTimedOut: true}); err != nil || len(rs) != 0 {
		t.Fatalf("overdue, not timed out = %+v %v", rs, err)
	}
	if rs, err := s.Reviews(ctx, exchange.ReviewFilter{Limit: 1}); err != nil || len(rs) != 1 || rs[0].ExchangeID != soon.ID {
		t.Fatalf("limit 1 = %+v %v", rs, err)
	}
	r, ok, err := s.CompleteReview(ctx, soon.ID, "alice", exchange.Flagged, "wrong account")
	if err != nil || !ok || r.Open() || r.Reviewer != "alice" || r.Verdict != exchange.Flagged ||
		r.Justification != "wrong account" || !r.TimedOut || !r.ReviewedAt.Equal(clk.Now()) {
		t.Fatalf("CompleteReview = %+v %v %v", r, ok, err)
	}
	if _, ok, err := s.CompleteReview(ctx, soon.ID, "alice", exchange.Flagged, "wrong account"); err != nil || !ok {
		t.Fatalf("retry = %v %v", ok, err)
	}
	if r, ok, err := s.CompleteReview(ctx, soon.ID, "bob", exchange.Accepted, ""); err != nil || ok || r.Reviewer != "alice" {
		t.Fatalf("second reviewer = %+v %v %v", r, ok, err)
	}
	if _, _, err := s.CompleteReview(ctx, later.ID, "bob", "maybe", ""); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatalf("bad verdict: %v", err)
	}
	if _, _, err := s.CompleteReview(ctx, later.ID, "", exchange.Accepted, ""); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatalf("no reviewer: %v", err)
	}
	if _, _, err := s.CompleteReview(ctx, later.ID, "bob", exchange.Accepted, strings.Repeat("j", 4001)); !errors.Is(err, exchange.ErrInvalid) {
		t.Fatalf("long justification: %v", err)
	}
	if _, _, err := s.CompleteReview(ctx, "exc_none", "bob", exchange.Accepted, ""); !errors.Is(err, exchange.ErrNotFound) {
		t.Fatalf("unknown review: %v", err)
	}
	if _, err := s.GetReview(ctx, "exc_none"); !errors.Is(err, exchange.ErrNotFound) {
		t.Fatalf("GetReview unknown: %v", err)
	}
	if ok, err := s.MarkTimedOut(ctx, "exc_none"); err != nil || ok {
		t.Fatalf("MarkTimedOut unknown = %v %v", ok, err)
	}
	got, err := s.GetReview(ctx, soon.ID)
	if err != nil || got.Reviewer != "alice" || !got.TimedOut {
		t.Fatalf("GetReview = %+v %v", got, err)
	}
	if open, overdue, err := s.ReviewCounts(ctx, clk.Now()); err != nil || open != 1 || overdue != 0 {
		t.Fatalf("counts after = %d %d %v", open, overdue, err)
	}
	// Completed reviews come after the open ones.
	if rs, err := s.Reviews(ctx, exchange.ReviewFilter{}); err != nil || len(rs) != 2 || rs[0].ExchangeID != later.ID || rs[1].ExchangeID != soon.ID {
		t.Fatalf("all reviews = %+v %v", rs, err)
	}
}

// Concurrent reviewers and timeout raisers: one of each wins.
func testReviewsConcurrent(t *testing.T, b Backend) {
	clk := NewClock(Start)
	s := b.New(t, Config{Now: clk.Now})
	ctx := t.Context()
	cur := InState(t, s, "a", executing)
	if _, _, err := s.Apply(ctx, cur.ID, executing, done, exchange.Change{Reply: FinalReply, ReplyStatus: 200,
		Review: &exchange.Review{Mode: "required_post_execution", DueAt: clk.Now()}}); err != nil {
		t.Fatal(err)
	}
	var (
		wg              sync.WaitGroup
		timeouts, dones atomic.Int32
	)
	for i := range 20 {
		wg.Go(func() {
			ok, err := s.MarkTimedOut(ctx, cur.ID)
			if err != nil {
				t.Error(err)
			}
			if ok {
				timeouts.Add(1)
			}
		})
		wg.Go(func() {
			_, ok, err := s.CompleteReview(ctx, cur.ID, fmt.Sprint("r", i), exchange.Accepted, "")
			if err != nil {
				t.Error(err)
			}
			if ok {
				dones.Add(1)
			}
		})
	}
	wg.Wait()
	if timeouts.Load() > 1 || dones.Load() != 1 {
		t.Fatalf("%d timeouts, %d completions; want at most 1 and 1", timeouts.Load(), dones.Load())
	}
}

func testDeliveriesInOrder(t *testing.T, b Backend) {
	clk := NewClock(Start)
	s := b.New(t, Config{Now: clk.Now})
	ctx := t.Context()
	if due, err := s.DueDeliveries(ctx, clk.Now(), 10); err != nil || len(due) != 0 {
		t.Fatalf("due on an empty store = %+v %v", due, err)
	}
	cur := InState(t, s, "p", pendingApproval)
	url := "http://127.0.0.1:9/cb"
	if _, _, err := s.Apply(ctx, cur.ID, pendingApproval, approved, exchange.Change{Decision: json.RawMessage(`{"n":1}`),
		Deliveries: []exchange.Delivery{{URL: url, Envelope: json.RawMessage(`{"n":1}`)}}}); err != nil {
		t.Fatal(err)
	}
	Move(t, s, cur.ID, approved, executing)
	if _, _, err := s.Apply(ctx, cur.ID, executing, done, exchange.Change{Reply: FinalReply, ReplyStatus: 200,
		Deliveries: []exchange.Delivery{{URL: url, Envelope: json.RawMessage(`{"n":2}`)}}}); err != nil {
		t.Fatal(err)
	}
	// Another exchange's delivery does not wait for this one's.
	other := InState(t, s, "o", pendingApproval)
	if _, _, err := s.Apply(ctx, other.ID, pendingApproval, failed, exchange.Change{Reply: FinalReply, ReplyStatus: 403,
		Deliveries: []exchange.Delivery{{URL: "https://agent.example/cb", Envelope: json.RawMessage(`{"o":1}`)}}}); err != nil {
		t.Fatal(err)
	}
	due, err := s.DueDeliveries(ctx, clk.Now(), 10)
	if err != nil || len(due) != 2 || string(due[0].Envelope) != `{"n":1}` || string(due[1].Envelope) != `{"o":1}` ||
		due[0].ExchangeID != cur.ID || due[0].URL != url || due[0].Attempts != 0 || due[0].Seq >= due[1].Seq {
		t.Fatalf("due = %+v %v (the second must wait for the first)", due, err)
	}
	if err := s.Delivered(ctx, due[1].Seq); err != nil {
		t.Fatal(err)
	}
	if err := s.DeliveryFailed(ctx, due[0].Seq, "connection refused", clk.Now().Add(time.Minute), false); err != nil {
		t.Fatal(err)
	}
	if due, err := s.DueDeliveries(ctx, clk.Now(), 10); err != nil || len(due) != 0 {
		t.Fatalf("a failed delivery is due again at once: %+v %v", due, err)
	}
	clk.Advance(time.Minute)
	due, _ = s.DueDeliveries(ctx, clk.Now(), 10)
	if len(due) != 1 || due[0].Attempts != 1 || due[0].LastError != "connection refused" || !due[0].NextAttempt.Equal(clk.Now()) {
		t.Fatalf("retry = %+v", due)
	}
	if err := s.Delivered(ctx, due[0].Seq); err != nil {
		t.Fatal(err)
	}
	due, _ = s.DueDeliveries(ctx, clk.Now(), 10)
	if len(due) != 1 || string(due[0].Envelope) != `{"n":2}` {
		t.Fatalf("after the first: %+v", due)
	}
	if err := s.Delivered(ctx, due[0].Seq); err != nil {
		t.Fatal(err)
	}
	if due, err := s.DueDeliveries(ctx, clk.Now().Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("delivered yet due: %+v %v", due, err)
	}
	for _, bad := range []string{"ftp://x/y", "http://example.com/cb", "https://user:pw@example.com/", "/relative", "https://h/#frag"} {
		y := InState(t, s, "q"+bad, pendingApproval)
		if _, _, err := s.Apply(ctx, y.ID, pendingApproval, approved, exchange.Change{Deliveries: []exchange.Delivery{{URL: bad, Envelope: json.RawMessage(`{}`)}}}); !errors.Is(err, exchange.ErrInvalid) {
			t.Errorf("callback %q: %v", bad, err)
		}
	}
	y := InState(t, s, "badenv", pendingApproval)
	if _, _, err := s.Apply(ctx, y.ID, pendingApproval, approved, exchange.Change{Deliveries: []exchange.Delivery{{URL: url, Envelope: json.RawMessage(`{`)}}}); !errors.Is(err, exchange.ErrInvalid) {
		t.Errorf("invalid envelope: %v", err)
	}
	if due, err := s.DueDeliveries(ctx, clk.Now().Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("refused transitions queued deliveries: %+v %v", due, err)
	}
}

// A given-up delivery is never due again, and the next one of its
// exchange no longer waits for it; limit caps the answer.
func testDeliveriesGiveUp(t *testing.T, b Backend) {
	clk := NewClock(Start)
	s := b.New(t, Config{Now: clk.Now})
	ctx := t.Context()
	cur := InState(t, s, "g", pendingApproval)
	url := "https://agent.example/cb"
	if _, _, err := s.Apply(ctx, cur.ID, pendingApproval, failed, exchange.Change{Reply: FinalReply, ReplyStatus: 403,
		Deliveries: []exchange.Delivery{{URL: url, Envelope: json.RawMessage(`{"n":1}`)}, {URL: url, Envelope: json.RawMessage(`{"n":2}`)}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		InState(t, s, fmt.Sprint("h", i), pendingApproval)
	}
	due, err := s.DueDeliveries(ctx, clk.Now(), 1)
	if err != nil || len(due) != 1 || string(due[0].Envelope) != `{"n":1}` {
		t.Fatalf("due = %+v %v", due, err)
	}
	long := strings.Repeat("é", 1000) + "\x00" + string([]byte{0xff})
	if err := s.DeliveryFailed(ctx, due[0].Seq, long, clk.Now().Add(time.Minute), true); err != nil {
		t.Fatal(err)
	}
	due, err = s.DueDeliveries(ctx, clk.Now().Add(time.Hour), 10)
	if err != nil || len(due) != 1 || string(due[0].Envelope) != `{"n":2}` || due[0].Attempts != 0 {
		t.Fatalf("after giving up = %+v %v", due, err)
	}
}

// testCreateWithRequest: the approval request recorded with an exchange is
// kept byte for byte, through transitions and a reopen, and is refused
// without an approval id or when it is not JSON.
func testCreateWithRequest(t *testing.T, b Backend) {
	s := b.New(t, Config{})
	ctx := t.Context()
	in := Request("r")
	in.Request = json.RawMessage(`{"aais_version":"1.0", "id":"apr_r"}`)
	x, created, err := s.Create(ctx, in)
	if err != nil || !created || string(x.Request) != string(in.Request) {
		t.Fatalf("Create: created=%v err=%v request=%s", created, err, x.Request)
	}
	x = Move(t, s, x.ID, received, pendingApproval)
	if b.Reopen != nil {
		s = b.Reopen(t, s, Config{})
	}
	got, err := s.Get(ctx, x.ID)
	if err != nil || string(got.Request) != string(in.Request) || got.State != pendingApproval {
		t.Fatalf("Get after a transition: %v %s %s", err, got.State, got.Request)
	}
	for _, bad := range []exchange.Exchange{
		func() exchange.Exchange { c := Request("r2"); c.ApprovalID = ""; c.Request = in.Request; return c }(),
		func() exchange.Exchange { c := Request("r3"); c.Request = json.RawMessage(`{"a":`); return c }(),
	} {
		if _, _, err := s.Create(ctx, bad); !errors.Is(err, exchange.ErrInvalid) {
			t.Errorf("Create(%s, request %s): %v, want ErrInvalid", bad.MessageID, bad.Request, err)
		}
	}
}
