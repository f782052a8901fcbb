package exchange

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// clockStore is a store whose clock the test moves.
func clockStore(t *testing.T) (*Store, *time.Time) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := open(t, filepath.Join(t.TempDir(), "x.db"), &Options{Now: func() time.Time { return now }})
	return s, &now
}

func TestIdempotencyKey(t *testing.T) {
	s, now := clockStore(t)
	ctx := t.Context()
	key := func(fp string) *Idempotency {
		return &Idempotency{From: "agent:a.b", To: "agent:c.d", PayloadType: "t.x", Key: "k-1", Fingerprint: fp,
			ExpiresAt: now.Add(time.Hour)}
	}
	first := req("1")
	first.Idempotency = key("sha256:one")
	x1, created, err := s.Create(ctx, first)
	if err != nil || !created {
		t.Fatalf("first: %v %v", created, err)
	}
	// A retry with another message id and the same request: the first
	// exchange, nothing new recorded.
	retry := req("2")
	retry.Idempotency = key("sha256:one")
	x2, created, err := s.Create(ctx, retry)
	if err != nil || created || x2.ID != x1.ID {
		t.Fatalf("retry = %s created=%v err=%v, want %s", x2.ID, created, err, x1.ID)
	}
	// The key with another request: conflict, nothing recorded.
	other := req("3")
	other.Idempotency = key("sha256:two")
	if _, _, err := s.Create(ctx, other); !errors.Is(err, ErrKeyReused) || !errors.Is(err, ErrConflict) {
		t.Fatalf("reused key: %v", err)
	}
	if _, err := s.BySender(ctx, "agent://a", "msg_3"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused request was recorded: %v", err)
	}
	// The same key in another scope is another key.
	scoped := req("4")
	scoped.Idempotency = key("sha256:two")
	scoped.Idempotency.PayloadType = "t.y"
	if _, created, err := s.Create(ctx, scoped); err != nil || !created {
		t.Fatalf("other scope: %v %v", created, err)
	}
	// Expired: the key is free again, and the purge removes what is left.
	*now = now.Add(2 * time.Hour)
	if _, created, err := s.Create(ctx, other); err != nil || !created {
		t.Fatalf("after expiry: %v %v", created, err)
	}
	*now = now.Add(2 * time.Hour)
	if n, err := s.PurgeIdempotency(ctx, *now); err != nil || n != 2 {
		t.Fatalf("purge = %d %v, want 2", n, err)
	}
	bad := req("5")
	bad.Idempotency = &Idempotency{From: "a", To: "b", PayloadType: "c", Key: "", Fingerprint: "f", ExpiresAt: *now}
	if _, _, err := s.Create(ctx, bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty key: %v", err)
	}
}

func TestDecisionRecordedOnce(t *testing.T) {
	s, _ := clockStore(t)
	ctx := t.Context()
	x := inState(t, s, "d", PendingApproval)
	dec := json.RawMessage(`{"intent":"approval_decision"}`)
	if _, _, err := s.Apply(ctx, inState(t, s, "e", Received).ID, Received, Executing, Change{Decision: dec}); !errors.Is(err, ErrInvalid) {
		t.Fatal("a decision accepted outside pending_approval")
	}
	got, ok, err := s.Apply(ctx, x.ID, PendingApproval, Approved, Change{Decision: dec})
	if err != nil || !ok || string(got.Decision) != string(dec) {
		t.Fatalf("Apply = %s %v %v", got.Decision, ok, err)
	}
	if _, err := s.db.SQL().ExecContext(ctx, "UPDATE exchanges SET decision = x'7b7d' WHERE id = ?", x.ID); err == nil {
		t.Fatal("the schema let a decision change")
	}
	if _, _, err := s.Apply(ctx, x.ID, Approved, Executing, Change{Decision: json.RawMessage(`{`)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid decision JSON: %v", err)
	}
}

func TestReviews(t *testing.T) {
	s, now := clockStore(t)
	ctx := t.Context()
	run := func(n string, due time.Duration) Exchange {
		x := inState(t, s, n, Executing)
		r, st := reply(Done)
		x, ok, err := s.Apply(ctx, x.ID, Executing, Done, Change{Reply: r, ReplyStatus: st,
			Review: &Review{Mode: "required_within_24h", Profile: "P", DueAt: now.Add(due)}})
		if err != nil || !ok {
			t.Fatal(err)
		}
		return x
	}
	soon, later := run("a", time.Hour), run("b", 24*time.Hour)
	if _, _, err := s.Apply(ctx, inState(t, s, "c", Received).ID, Received, PendingApproval,
		Change{Reply: pendingReply, ReplyStatus: 202, Review: &Review{Mode: "m", DueAt: *now}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("review queued entering pending_approval: %v", err)
	}
	rs, err := s.Reviews(ctx, ReviewFilter{Open: true})
	if err != nil || len(rs) != 2 || rs[0].ExchangeID != soon.ID || rs[0].Outcome != Done || rs[0].Capability != "fs.write" {
		t.Fatalf("open reviews = %+v %v", rs, err)
	}
	*now = now.Add(2 * time.Hour)
	if open, overdue, err := s.ReviewCounts(ctx, *now); err != nil || open != 2 || overdue != 1 {
		t.Fatalf("counts = %d %d %v", open, overdue, err)
	}
	rs, err = s.Reviews(ctx, ReviewFilter{Overdue: *now})
	if err != nil || len(rs) != 1 || rs[0].ExchangeID != soon.ID || !rs[0].Overdue(*now) {
		t.Fatalf("overdue = %+v %v", rs, err)
	}
	if ok, err := s.MarkTimedOut(ctx, soon.ID); err != nil || !ok {
		t.Fatalf("MarkTimedOut = %v %v", ok, err)
	}
	if ok, err := s.MarkTimedOut(ctx, soon.ID); err != nil || ok {
		t.Fatalf("second MarkTimedOut = %v %v", ok, err)
	}
	r, done, err := s.CompleteReview(ctx, soon.ID, "alice", Flagged, "wrong account")
	if err != nil || !done || r.Open() || r.Reviewer != "alice" || !r.TimedOut {
		t.Fatalf("CompleteReview = %+v %v %v", r, done, err)
	}
	if _, done, err := s.CompleteReview(ctx, soon.ID, "alice", Flagged, "wrong account"); err != nil || !done {
		t.Fatalf("retry = %v %v", done, err)
	}
	if r, done, err := s.CompleteReview(ctx, soon.ID, "bob", Accepted, ""); err != nil || done || r.Reviewer != "alice" {
		t.Fatalf("second reviewer = %+v %v %v", r, done, err)
	}
	if _, _, err := s.CompleteReview(ctx, later.ID, "bob", "maybe", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad verdict: %v", err)
	}
	if _, _, err := s.CompleteReview(ctx, "exc_none", "bob", Accepted, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown review: %v", err)
	}
	if _, err := s.db.SQL().ExecContext(ctx, "UPDATE reviews SET verdict = 'accepted' WHERE exchange_id = ?", soon.ID); err == nil {
		t.Fatal("the schema let a finished review change")
	}
	if _, err := s.GetReview(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
}

func TestDeliveriesInOrder(t *testing.T) {
	s, now := clockStore(t)
	ctx := t.Context()
	x := inState(t, s, "p", PendingApproval)
	url := "http://127.0.0.1:9/cb"
	if _, _, err := s.Apply(ctx, x.ID, PendingApproval, Approved, Change{Decision: json.RawMessage(`{"n":1}`),
		Deliveries: []Delivery{{URL: url, Envelope: json.RawMessage(`{"n":1}`)}}}); err != nil {
		t.Fatal(err)
	}
	move(t, s, x.ID, Approved, Executing)
	if _, _, err := s.Apply(ctx, x.ID, Executing, Done, Change{Reply: finalReply, ReplyStatus: 200,
		Deliveries: []Delivery{{URL: url, Envelope: json.RawMessage(`{"n":2}`)}}}); err != nil {
		t.Fatal(err)
	}
	due, err := s.DueDeliveries(ctx, *now, 10)
	if err != nil || len(due) != 1 || string(due[0].Envelope) != `{"n":1}` {
		t.Fatalf("due = %+v %v (the second must wait for the first)", due, err)
	}
	if err := s.DeliveryFailed(ctx, due[0].Seq, "connection refused", now.Add(time.Minute), false); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.DueDeliveries(ctx, *now, 10); len(due) != 0 {
		t.Fatalf("a failed delivery is due again at once: %+v", due)
	}
	*now = now.Add(time.Minute)
	due, _ = s.DueDeliveries(ctx, *now, 10)
	if len(due) != 1 || due[0].Attempts != 1 || due[0].LastError != "connection refused" {
		t.Fatalf("retry = %+v", due)
	}
	if err := s.Delivered(ctx, due[0].Seq); err != nil {
		t.Fatal(err)
	}
	due, _ = s.DueDeliveries(ctx, *now, 10)
	if len(due) != 1 || string(due[0].Envelope) != `{"n":2}` {
		t.Fatalf("after the first: %+v", due)
	}
	for _, bad := range []string{"ftp://x/y", "http://example.com/cb", "https://user:pw@example.com/", "/relative"} {
		y := inState(t, s, "q"+bad, PendingApproval)
		if _, _, err := s.Apply(ctx, y.ID, PendingApproval, Approved, Change{Deliveries: []Delivery{{URL: bad, Envelope: json.RawMessage(`{}`)}}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("callback %q: %v", bad, err)
		}
	}
}

// An exchange created claimed runs without a Claim: nobody else can claim
// it, and after a crash it is interrupted like any claimed one.
func TestCreateClaimed(t *testing.T) {
	s, _ := clockStore(t)
	ctx := t.Context()
	x := req("c")
	x.State = Executing
	got, created, err := s.Create(ctx, x)
	if err != nil || !created || got.State != Executing || got.ClaimedBy != s.Instance() {
		t.Fatalf("Create(executing) = %+v %v %v", got, created, err)
	}
	if _, ok, err := s.Claim(ctx, got.ID, Received, Approved); err != nil || ok {
		t.Fatalf("claimed twice: %v %v", ok, err)
	}
	if xs, err := s.Interrupted(ctx); err != nil || len(xs) != 1 || xs[0].ID != got.ID {
		t.Fatalf("Interrupted = %+v %v", xs, err)
	}
	x = req("d")
	x.State = Done
	if _, _, err := s.Create(ctx, x); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Create(done): %v", err)
	}
}
