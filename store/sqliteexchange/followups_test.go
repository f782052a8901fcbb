package sqliteexchange

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/custos-runtime/custos/gateway/exchange"
)

// What the SQLite schema enforces below the Go code, for writers that
// bypass it. The behaviour every exchange.Backend shares is in the conformance kit
// (exchangetest, run by TestConformance in exchange_test.go).

func tempStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "exchanges.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// inState creates an exchange and brings it to st along legal transitions
// (received, approved, executing or done).
func inState(t *testing.T, s *Store, n string, st exchange.State) exchange.Exchange {
	t.Helper()
	x, _, err := s.Create(t.Context(), exchange.Exchange{Sender: "agent://a", MessageID: "msg_" + n,
		Capability: "fs.write", ApprovalID: "apr_" + n, ActionDigest: "sha256:" + n})
	if err != nil {
		t.Fatal(err)
	}
	path := map[exchange.State][]exchange.State{exchange.Approved: {exchange.PendingApproval, exchange.Approved}, exchange.Executing: {exchange.Executing}, exchange.Done: {exchange.Executing, exchange.Done}}[st]
	cur := exchange.Received
	for _, next := range path {
		var c exchange.Change
		switch next {
		case exchange.PendingApproval:
			c = exchange.Change{Reply: json.RawMessage(`{"status":"pending_approval"}`), ReplyStatus: 202}
		case exchange.Done:
			c = exchange.Change{Reply: json.RawMessage(`{"status":"done"}`), ReplyStatus: 200}
		}
		var ok bool
		if x, ok, err = s.Apply(t.Context(), x.ID, cur, next, c); err != nil || !ok {
			t.Fatalf("%s -> %s: %v %v", cur, next, ok, err)
		}
		cur = next
	}
	return x
}

func TestSchemaEnforcesMachine(t *testing.T) {
	s := tempStore(t)
	x := inState(t, s, "1", exchange.Done)
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
	y := inState(t, s, "2", exchange.Approved)
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

func TestSchemaDecisionOnce(t *testing.T) {
	s := tempStore(t)
	ctx := t.Context()
	x := inState(t, s, "d", exchange.Approved)
	// exchange.Approved without a decision: the schema lets a transition set one.
	if _, err := s.db.SQL().ExecContext(ctx, "UPDATE exchanges SET state = 'executing', decision = x'7b7d' WHERE id = ?", x.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.SQL().ExecContext(ctx, "UPDATE exchanges SET state = 'failed', reply = x'7b7d', reply_status = 500, decision = x'5b5d' WHERE id = ?", x.ID); err == nil {
		t.Fatal("the schema let a decision change")
	}
}

func TestSchemaReviewOnce(t *testing.T) {
	s := tempStore(t)
	ctx := t.Context()
	x := inState(t, s, "r", exchange.Executing)
	if _, _, err := s.Apply(ctx, x.ID, exchange.Executing, exchange.Done, exchange.Change{Reply: json.RawMessage(`{}`), ReplyStatus: 200,
		Review: &exchange.Review{Mode: "required_post_execution", DueAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CompleteReview(ctx, x.ID, "alice", exchange.Flagged, "why"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"UPDATE reviews SET verdict = 'accepted' WHERE exchange_id = ?",
		"UPDATE reviews SET reviewer = 'bob' WHERE exchange_id = ?",
		"UPDATE reviews SET justification = '' WHERE exchange_id = ?",
		"UPDATE reviews SET reviewed_at = 1 WHERE exchange_id = ?",
	} {
		if _, err := s.db.SQL().ExecContext(ctx, q, x.ID); err == nil {
			t.Errorf("%s: the schema let a finished review change", q)
		}
	}
}
