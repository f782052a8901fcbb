package exchange

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func open(t *testing.T, path string, o *Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func tempStore(t *testing.T) *Store {
	return open(t, filepath.Join(t.TempDir(), "exchanges.db"), nil)
}

func req(n string) Exchange {
	return Exchange{Sender: "agent://a", MessageID: "msg_" + n, CorrelationID: "corr_" + n,
		Capability: "fs.write", ApprovalID: "apr_" + n, ActionDigest: "sha256:" + n}
}

var (
	pendingReply = json.RawMessage(`{"status":"pending_approval"}`)
	finalReply   = json.RawMessage(`{"status":"done","result":{"ok":true}}`)
)

// reply is a reply valid for entering state to, nil when none is needed.
func reply(to State) (json.RawMessage, int) {
	switch to {
	case PendingApproval:
		return pendingReply, 202
	case Done, Failed:
		return finalReply, 200
	}
	return nil, 0
}

func create(t *testing.T, s *Store, n string) Exchange {
	t.Helper()
	x, created, err := s.Create(t.Context(), req(n))
	if err != nil || !created {
		t.Fatalf("Create %s: created=%v err=%v", n, created, err)
	}
	return x
}

func move(t *testing.T, s *Store, id string, from, to State) Exchange {
	t.Helper()
	r, st := reply(to)
	x, ok, err := s.Transition(t.Context(), id, from, to, r, st)
	if err != nil || !ok {
		t.Fatalf("Transition %s %s->%s: ok=%v err=%v", id, from, to, ok, err)
	}
	return x
}

// inState creates an exchange and brings it to state st along legal
// transitions.
func inState(t *testing.T, s *Store, n string, st State) Exchange {
	t.Helper()
	x := create(t, s, n)
	path := map[State][]State{
		Received:        nil,
		PendingApproval: {PendingApproval},
		Approved:        {PendingApproval, Approved},
		Executing:       {Executing},
		Done:            {Executing, Done},
		Failed:          {Failed},
	}[st]
	cur := Received
	for _, next := range path {
		x = move(t, s, x.ID, cur, next)
		cur = next
	}
	if x.State != st {
		t.Fatalf("state %s, want %s", x.State, st)
	}
	return x
}

func TestStateMachine(t *testing.T) {
	s := tempStore(t)
	legal := map[[2]State]bool{
		{Received, Executing}: true, {Received, PendingApproval}: true, {Received, Failed}: true,
		{PendingApproval, Approved}: true, {PendingApproval, Failed}: true,
		{Approved, Executing}: true, {Approved, Failed}: true,
		{Executing, Done}: true, {Executing, Failed}: true,
	}
	for _, from := range States {
		for _, to := range States {
			name := string(from) + "->" + string(to)
			t.Run(name, func(t *testing.T) {
				if got := Legal(from, to); got != legal[[2]State{from, to}] {
					t.Fatalf("Legal = %v", got)
				}
				x := inState(t, s, name, from)
				r, st := reply(to)
				got, ok, err := s.Transition(t.Context(), x.ID, from, to, r, st)
				if legal[[2]State{from, to}] {
					if err != nil || !ok || got.State != to {
						t.Fatalf("ok=%v err=%v state=%s", ok, err, got.State)
					}
					if !got.UpdatedAt.After(x.UpdatedAt) && !got.UpdatedAt.Equal(x.UpdatedAt) {
						t.Fatalf("UpdatedAt went back")
					}
					// The same transition again: no longer in from.
					again, ok, err := s.Transition(t.Context(), x.ID, from, to, r, st)
					if err != nil || ok || again.State != to {
						t.Fatalf("repeat: ok=%v err=%v state=%s", ok, err, again.State)
					}
				} else {
					if !errors.Is(err, ErrIllegalTransition) || ok {
						t.Fatalf("ok=%v err=%v, want ErrIllegalTransition", ok, err)
					}
				}
				if to == Executing {
					_, ok, err := s.Claim(t.Context(), x.ID, from)
					if legal[[2]State{from, to}] != (err == nil) || ok {
						t.Fatalf("Claim after: ok=%v err=%v", ok, err)
					}
				}
				if !legal[[2]State{from, to}] {
					after, err := s.Get(t.Context(), x.ID)
					if err != nil || !reflect.DeepEqual(after, x) {
						t.Fatalf("changed by an illegal transition: %+v, %v", after, err)
					}
				}
			})
		}
	}
}

// A transition from a state the exchange is not in changes nothing.
func TestTransitionStale(t *testing.T) {
	s := tempStore(t)
	x := inState(t, s, "1", PendingApproval)
	got, ok, err := s.Transition(t.Context(), x.ID, Received, Failed, finalReply, 500)
	if err != nil || ok || !reflect.DeepEqual(got, x) {
		t.Fatalf("ok=%v err=%v got=%+v", ok, err, got)
	}
	got, ok, err = s.Claim(t.Context(), x.ID, Received, Approved)
	if err != nil || ok || got.State != PendingApproval {
		t.Fatalf("Claim: ok=%v err=%v state=%s", ok, err, got.State)
	}
}

func TestValidation(t *testing.T) {
	s := tempStore(t)
	ctx := t.Context()
	x := create(t, s, "1")
	bad := []Exchange{
		{MessageID: "m", Capability: "c"},
		{Sender: "s", Capability: "c"},
		{Sender: "s", MessageID: "m"},
		{Sender: "s", MessageID: "m\n", Capability: "c"},
		{Sender: "s", MessageID: "m", Capability: "c", State: Approved},
		{Sender: "s", MessageID: "m", Capability: "c", State: "bogus"},
		{Sender: "s", MessageID: "m", Capability: "c", Reply: finalReply, ReplyStatus: 200},
		{Sender: "s", MessageID: "m", Capability: "c", ClaimedBy: "me"},
		{Sender: strings.Repeat("s", 2000), MessageID: "m", Capability: "c"},
		{Sender: "s", MessageID: string([]byte{0xff}), Capability: "c"},
	}
	for i, b := range bad {
		if _, _, err := s.Create(ctx, b); !errors.Is(err, ErrInvalid) {
			t.Errorf("Create bad %d: %v", i, err)
		}
	}
	if _, err := s.Get(ctx, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Get empty: %v", err)
	}
	if _, err := s.Get(ctx, "exc_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get unknown: %v", err)
	}
	if _, err := s.BySender(ctx, "agent://a", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("BySender unknown: %v", err)
	}
	if _, err := s.BySender(ctx, "", "m"); !errors.Is(err, ErrInvalid) {
		t.Errorf("BySender empty: %v", err)
	}
	if _, _, err := s.Transition(ctx, "exc_nope", Received, Failed, finalReply, 500); !errors.Is(err, ErrNotFound) {
		t.Errorf("Transition unknown: %v", err)
	}
	checks := []struct {
		name     string
		from, to State
		c        Change
		want     error
	}{
		{"unknown from", "bogus", Failed, Change{Reply: finalReply, ReplyStatus: 500}, ErrInvalid},
		{"unknown to", Received, "bogus", Change{}, ErrInvalid},
		{"invalid JSON", Received, Failed, Change{Reply: json.RawMessage(`{"a":`), ReplyStatus: 500}, ErrInvalid},
		{"no reply for final", Received, Failed, Change{}, ErrInvalid},
		{"no reply for pending", Received, PendingApproval, Change{}, ErrInvalid},
		{"status without reply", Received, Executing, Change{ReplyStatus: 200}, ErrInvalid},
		{"reply without status", Received, Failed, Change{Reply: finalReply}, ErrInvalid},
		{"bad status", Received, Failed, Change{Reply: finalReply, ReplyStatus: 42}, ErrInvalid},
		{"approval outside pending", Received, Executing, Change{ApprovalID: "apr_x"}, ErrInvalid},
		{"digest on final", Received, Failed, Change{Reply: finalReply, ReplyStatus: 500, ActionDigest: "d"}, ErrInvalid},
		{"other approval id", Received, PendingApproval, Change{Reply: pendingReply, ReplyStatus: 202, ApprovalID: "apr_other"}, ErrConflict},
		{"other digest", Received, PendingApproval, Change{Reply: pendingReply, ReplyStatus: 202, ActionDigest: "sha256:other"}, ErrConflict},
	}
	for _, c := range checks {
		if _, _, err := s.Apply(ctx, x.ID, c.from, c.to, c.c); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, _, err := s.Claim(ctx, x.ID); !errors.Is(err, ErrInvalid) {
		t.Errorf("Claim without states: %v", err)
	}
	if _, _, err := s.Claim(ctx, x.ID, PendingApproval); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("Claim from pending_approval: %v", err)
	}
	if _, err := s.Waiting(ctx); !errors.Is(err, ErrInvalid) {
		t.Errorf("Waiting without states: %v", err)
	}
	if _, err := s.Waiting(ctx, "bogus"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Waiting unknown state: %v", err)
	}
	// pending_approval needs an approval id and a digest.
	y, _, err := s.Create(ctx, Exchange{Sender: "s", MessageID: "m", Capability: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Transition(ctx, y.ID, Received, PendingApproval, pendingReply, 202); !errors.Is(err, ErrInvalid) {
		t.Errorf("pending without approval id: %v", err)
	}
	dl := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	got, ok, err := s.Apply(ctx, y.ID, Received, PendingApproval, Change{Reply: pendingReply, ReplyStatus: 202,
		ApprovalID: "apr_y", ActionDigest: "sha256:y", Deadline: dl})
	if err != nil || !ok || got.ApprovalID != "apr_y" || got.ActionDigest != "sha256:y" || !got.Deadline.Equal(dl) {
		t.Fatalf("Apply: ok=%v err=%v %+v", ok, err, got)
	}
	// Nothing of this changed x.
	if after, err := s.Get(ctx, x.ID); err != nil || !reflect.DeepEqual(after, x) {
		t.Fatalf("x changed: %+v %v", after, err)
	}
}

// The schema refuses what the Go code refuses, for writers that bypass it.
func TestSchemaEnforcesMachine(t *testing.T) {
	s := tempStore(t)
	x := inState(t, s, "1", Done)
	db := s.db.SQL()
	for _, q := range []string{
		"UPDATE exchanges SET state = 'executing' WHERE id = ?",
		"UPDATE exchanges SET state = 'received' WHERE id = ?",
		"UPDATE exchanges SET reply = x'7b7d' WHERE id = ?",
		"DELETE FROM exchanges WHERE id = ?",
	} {
		if _, err := db.Exec(q, x.ID); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	y := inState(t, s, "2", Approved)
	for _, q := range []string{
		"UPDATE exchanges SET state = 'executing', action_digest = 'other' WHERE id = ?",
		"UPDATE exchanges SET state = 'failed', sender = 'other', reply = x'7b7d', reply_status = 500 WHERE id = ?",
		"UPDATE exchanges SET state = 'failed', reply = NULL, reply_status = 0 WHERE id = ?",
	} {
		if _, err := db.Exec(q, y.ID); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	for _, id := range []string{x.ID, y.ID} {
		if _, err := s.Get(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCreateIdempotent(t *testing.T) {
	s := tempStore(t)
	ctx := t.Context()
	first, created, err := s.Create(ctx, req("1"))
	if err != nil || !created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	if !strings.HasPrefix(first.ID, "exc_") || len(first.ID) != 36 || first.State != Received ||
		first.CreatedAt.IsZero() || !first.CreatedAt.Equal(first.UpdatedAt) {
		t.Fatalf("first: %+v", first)
	}
	// A retry, with another proposed ID, returns the first.
	retry := req("1")
	retry.ID = "exc_mine"
	again, created, err := s.Create(ctx, retry)
	if err != nil || created || !reflect.DeepEqual(again, first) {
		t.Fatalf("retry: created=%v err=%v %+v", created, err, again)
	}
	// Even after the exchange moved on.
	done := move(t, s, first.ID, Received, Executing)
	done = move(t, s, done.ID, Executing, Done)
	again, created, err = s.Create(ctx, req("1"))
	if err != nil || created || !reflect.DeepEqual(again, done) {
		t.Fatalf("retry after done: created=%v err=%v %+v", created, err, again)
	}
	if got, err := s.BySender(ctx, "agent://a", "msg_1"); err != nil || !reflect.DeepEqual(got, done) {
		t.Fatalf("BySender: %v %+v", err, got)
	}
	// A different request under the same message id is refused.
	for _, mod := range []func(*Exchange){
		func(x *Exchange) { x.Capability = "other" },
		func(x *Exchange) { x.CorrelationID = "other" },
		func(x *Exchange) { x.ApprovalID = "other" },
		func(x *Exchange) { x.ActionDigest = "other" },
	} {
		x := req("1")
		mod(&x)
		if _, _, err := s.Create(ctx, x); !errors.Is(err, ErrConflict) {
			t.Errorf("conflicting retry: %v", err)
		}
	}
	// The same message id from another sender is another exchange.
	other := req("1")
	other.Sender = "agent://b"
	o, created, err := s.Create(ctx, other)
	if err != nil || !created || o.ID == first.ID {
		t.Fatalf("other sender: created=%v err=%v", created, err)
	}
	// A caller-chosen ID is used, and may not be reused.
	mine := req("2")
	mine.ID = "exc_chosen"
	if x, created, err := s.Create(ctx, mine); err != nil || !created || x.ID != "exc_chosen" {
		t.Fatalf("chosen id: %v %v %+v", created, err, x)
	}
	dup := req("3")
	dup.ID = "exc_chosen"
	if _, _, err := s.Create(ctx, dup); !errors.Is(err, ErrConflict) {
		t.Fatalf("reused id: %v", err)
	}
	if _, err := s.BySender(ctx, "agent://a", "msg_3"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refused create recorded: %v", err)
	}
}

// Concurrent Creates of one request: one creates, all get the same.
func TestCreateConcurrent(t *testing.T) {
	s := tempStore(t)
	var wg sync.WaitGroup
	var created atomic.Int32
	ids := make([]string, 30)
	for i := range ids {
		wg.Go(func() {
			x, c, err := s.Create(t.Context(), req("same"))
			if err != nil {
				t.Error(err)
				return
			}
			if c {
				created.Add(1)
			}
			ids[i] = x.ID
		})
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("%d created", created.Load())
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("ids differ: %v", ids)
		}
	}
}

func TestClaimGoroutines(t *testing.T) {
	s := tempStore(t)
	x := inState(t, s, "1", Approved)
	var wg sync.WaitGroup
	var wins atomic.Int32
	for range 50 {
		wg.Go(func() {
			got, ok, err := s.Claim(t.Context(), x.ID, Received, Approved)
			if err != nil {
				t.Error(err)
				return
			}
			if got.State != Executing {
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
	got, err := s.Get(t.Context(), x.ID)
	if err != nil || got.State != Executing || got.ClaimedBy != s.Instance() {
		t.Fatalf("%+v %v", got, err)
	}
}

// Two handles on one file, many goroutines each, many exchanges: one
// winner per exchange.
func TestClaimTwoHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exchanges.db")
	a := open(t, path, &Options{Instance: "a"})
	b := open(t, path, &Options{Instance: "b"})
	const n = 20
	ids := make([]string, n)
	for i := range n {
		ids[i] = inState(t, a, fmt.Sprint(i), Approved).ID
	}
	wins := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b, a, b} {
		for _, shift := range []int{0, 7} {
			wg.Go(func() {
				for k := range n {
					i := (k + shift) % n
					_, ok, err := s.Claim(t.Context(), ids[i], Approved)
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
		x, err := b.Get(t.Context(), ids[i])
		if err != nil || x.State != Executing || (x.ClaimedBy != "a" && x.ClaimedBy != "b") {
			t.Fatalf("%+v %v", x, err)
		}
	}
}

const (
	envPath     = "EXCHANGE_HELPER_PATH"
	envID       = "EXCHANGE_HELPER_ID"
	envChild    = "EXCHANGE_HELPER_CHILD"
	envStart    = "EXCHANGE_HELPER_START"
	claimedMark = "EXCHANGE_CLAIMED="
)

// TestHelperProcess is the child of TestCrossProcess; it does nothing
// unless started by it.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(envPath)
	if path == "" {
		t.Skip("helper process for TestCrossProcess")
	}
	child := os.Getenv(envChild)
	s := open(t, path, &Options{Instance: "child_" + child})
	start, err := strconv.ParseInt(os.Getenv(envStart), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	_, ok, err := s.Claim(t.Context(), os.Getenv(envID), Received, Approved)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s=%v\n", claimedMark, child, ok)
}

// Several processes claiming one exchange: exactly one wins.
func TestCrossProcess(t *testing.T) {
	if os.Getenv(envPath) != "" {
		t.Skip("in the helper process")
	}
	const children = 3
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "exchanges.db")
	s := open(t, path, nil)
	x := inState(t, s, "1", Approved)
	start := time.Now().Add(1500 * time.Millisecond).UnixNano()
	var wg sync.WaitGroup
	outs := make([][]byte, children)
	errs := make([]error, children)
	for c := range children {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), envPath+"="+path, envID+"="+x.ID,
				envChild+"="+fmt.Sprint(c), envStart+"="+fmt.Sprint(start))
			outs[c], errs[c] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	winners := 0
	winner := ""
	for c := range children {
		if errs[c] != nil {
			t.Fatalf("child %d: %v\n%s", c, errs[c], outs[c])
		}
		switch {
		case bytes.Contains(outs[c], []byte(fmt.Sprintf("%s%d=true", claimedMark, c))):
			winners++
			winner = fmt.Sprintf("child_%d", c)
		case bytes.Contains(outs[c], []byte(fmt.Sprintf("%s%d=false", claimedMark, c))):
		default:
			t.Fatalf("child %d reported nothing:\n%s", c, outs[c])
		}
	}
	if winners != 1 {
		t.Fatalf("%d winners, want 1", winners)
	}
	got, err := s.Get(ctx, x.ID)
	if err != nil || got.State != Executing || got.ClaimedBy != winner {
		t.Fatalf("%+v %v (winner %s)", got, err, winner)
	}
}

// Close and reopen: everything is as it was, and an interrupted exchange
// is found and can be failed, never claimed again.
func TestRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exchanges.db")
	clock := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	s, err := Open(t.Context(), path, &Options{Instance: "gw1", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var before []Exchange
	for i, st := range States {
		before = append(before, inState(t, s, fmt.Sprint(i), st))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(t.Context(), req("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Create after Close: %v", err)
	}
	s = open(t, path, &Options{Instance: "gw1"})
	for _, x := range before {
		got, err := s.Get(t.Context(), x.ID)
		if err != nil || !reflect.DeepEqual(got, x) {
			t.Fatalf("after restart:\n got %+v\nwant %+v\n%v", got, x, err)
		}
		if x.Reply != nil && !bytes.Equal(got.Reply, x.Reply) {
			t.Fatalf("reply bytes changed")
		}
	}
	in, err := s.Interrupted(t.Context())
	if err != nil || len(in) != 1 || in[0].ID != before[3].ID || in[0].ClaimedBy != "gw1" {
		t.Fatalf("Interrupted: %+v %v", in, err)
	}
	if _, ok, err := s.Claim(t.Context(), in[0].ID, Received, Approved); err != nil || ok {
		t.Fatalf("interrupted exchange claimed again: %v %v", ok, err)
	}
	unknown := json.RawMessage(`{"error":{"code":"RESULT_STATE_UNKNOWN"}}`)
	if got, ok, err := s.Transition(t.Context(), in[0].ID, Executing, Failed, unknown, 500); err != nil || !ok || got.State != Failed {
		t.Fatalf("fail interrupted: %v %v", ok, err)
	}
	w, err := s.Waiting(t.Context(), PendingApproval, Approved)
	if err != nil || len(w) != 2 || w[0].ID != before[1].ID || w[1].ID != before[2].ID {
		t.Fatalf("Waiting: %+v %v", w, err)
	}
}

// Waiting lists in order of receipt, whatever the order of updates.
func TestWaitingOrder(t *testing.T) {
	s := tempStore(t)
	var ids []string
	for i := range 6 {
		ids = append(ids, create(t, s, fmt.Sprint(i)).ID)
	}
	// Update in reverse order.
	move(t, s, ids[5], Received, PendingApproval)
	move(t, s, ids[4], Received, PendingApproval)
	move(t, s, ids[4], PendingApproval, Approved)
	move(t, s, ids[3], Received, Failed)
	move(t, s, ids[2], Received, PendingApproval)
	move(t, s, ids[1], Received, PendingApproval)
	move(t, s, ids[1], PendingApproval, Approved)
	w, err := s.Waiting(t.Context(), Approved, PendingApproval)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range w {
		got = append(got, x.ID)
	}
	want := []string{ids[1], ids[2], ids[4], ids[5]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Waiting = %v, want %v", got, want)
	}
	if w, err := s.Waiting(t.Context(), Received); err != nil || len(w) != 1 || w[0].ID != ids[0] {
		t.Fatalf("Waiting(received) = %+v %v", w, err)
	}
	if w, err := s.Waiting(t.Context(), Done); err != nil || len(w) != 0 {
		t.Fatalf("Waiting(done) = %+v %v", w, err)
	}
}

// A cancelled context writes nothing.
func TestCancelledContext(t *testing.T) {
	s := tempStore(t)
	x := inState(t, s, "1", Approved)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.Create(ctx, req("2")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Create: %v", err)
	}
	if _, _, err := s.Claim(ctx, x.ID, Approved); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim: %v", err)
	}
	if _, _, err := s.Transition(ctx, x.ID, Approved, Failed, finalReply, 500); !errors.Is(err, context.Canceled) {
		t.Fatalf("Transition: %v", err)
	}
	if _, err := s.BySender(t.Context(), "agent://a", "msg_2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancelled Create recorded: %v", err)
	}
	if got, err := s.Get(t.Context(), x.ID); err != nil || !reflect.DeepEqual(got, x) {
		t.Fatalf("cancelled write changed the exchange: %+v %v", got, err)
	}
	// Cancelled while queued behind other writes: whatever the outcome,
	// an error means nothing was written.
	var wg sync.WaitGroup
	for i := range 40 {
		ctx, cancel := context.WithCancel(t.Context())
		wg.Go(func() {
			_, created, err := s.Create(ctx, req(fmt.Sprint("q", i)))
			if err != nil && created {
				t.Error("created with an error")
			}
			_, err2 := s.BySender(t.Context(), "agent://a", fmt.Sprint("msg_q", i))
			if err != nil && !errors.Is(err2, ErrNotFound) {
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

func TestOpenRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a database "), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(t.Context(), path, nil); err == nil {
		_ = s.Close()
		t.Fatal("opened garbage")
	}
	if _, err := Open(t.Context(), filepath.Join(t.TempDir(), "y.db"), &Options{Instance: "bad\x00"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad instance: %v", err)
	}
	if SchemaVersion() != 2 {
		t.Fatalf("SchemaVersion = %d", SchemaVersion())
	}
}
