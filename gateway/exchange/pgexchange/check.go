package pgexchange

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/custos-runtime/custos/gateway/exchange"
)

// The checks below are those package exchange makes before it writes
// (they are unexported there). The conformance kit (exchangetest) runs
// the same cases against both stores, so the two cannot drift apart
// unnoticed.

// Limits on the length of what identifies an exchange (as in package
// exchange).
const (
	maxID   = 256
	maxText = 1024
)

func randomHex() string {
	var b [16]byte
	// crypto/rand.Read never returns an error since Go 1.24.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkText refuses an empty (when required), over-long, non-UTF-8 or
// control-character-bearing value.
func checkText(name, v string, max int, required bool) error {
	switch {
	case v == "":
		if required {
			return fmt.Errorf("%w: empty %s", exchange.ErrInvalid, name)
		}
		return nil
	case len(v) > max:
		return fmt.Errorf("%w: %s longer than %d bytes", exchange.ErrInvalid, name, max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not UTF-8", exchange.ErrInvalid, name)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: %s has control characters", exchange.ErrInvalid, name)
	}
	return nil
}

func checkState(s exchange.State) error {
	if !s.Valid() {
		return fmt.Errorf("%w: unknown state %q", exchange.ErrInvalid, s)
	}
	return nil
}

// checkReply checks a reply and its status: both or neither, JSON, an
// HTTP status.
func checkReply(reply json.RawMessage, status int) error {
	if len(reply) == 0 {
		if status != 0 {
			return fmt.Errorf("%w: reply status %d without a reply", exchange.ErrInvalid, status)
		}
		return nil
	}
	if !json.Valid(reply) {
		return fmt.Errorf("%w: reply is not valid JSON", exchange.ErrInvalid)
	}
	if status < 100 || status > 599 {
		return fmt.Errorf("%w: reply status %d is not an HTTP status", exchange.ErrInvalid, status)
	}
	return nil
}

// checkNew validates what Create records.
func checkNew(x exchange.Exchange) error {
	if x.ID != "" {
		if err := checkText("id", x.ID, maxID, true); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name, v  string
		max      int
		required bool
	}{
		{"sender", x.Sender, maxText, true},
		{"message id", x.MessageID, maxText, true},
		{"capability", x.Capability, maxText, true},
		{"correlation id", x.CorrelationID, maxText, false},
		{"approval id", x.ApprovalID, maxText, false},
		{"action digest", x.ActionDigest, maxText, false},
		{"trace id", x.TraceID, maxText, false},
	} {
		if err := checkText(f.name, f.v, f.max, f.required); err != nil {
			return err
		}
	}
	if x.State != "" && x.State != exchange.Received && x.State != exchange.Executing {
		return fmt.Errorf("%w: an exchange is created in state received or executing, not %q", exchange.ErrInvalid, x.State)
	}
	if len(x.Reply) != 0 || x.ReplyStatus != 0 {
		return fmt.Errorf("%w: a new exchange has no reply", exchange.ErrInvalid)
	}
	if x.ClaimedBy != "" {
		return fmt.Errorf("%w: a new exchange is not claimed", exchange.ErrInvalid)
	}
	if len(x.Decision) != 0 {
		return fmt.Errorf("%w: a new exchange has no decision", exchange.ErrInvalid)
	}
	return checkIdempotency(x.Idempotency)
}

func checkIdempotency(k *exchange.Idempotency) error {
	if k == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{{"idempotency scope from", k.From}, {"idempotency scope to", k.To},
		{"idempotency payload type", k.PayloadType}, {"idempotency key", k.Key}, {"idempotency fingerprint", k.Fingerprint}} {
		if err := checkText(f.name, f.v, maxText, true); err != nil {
			return err
		}
	}
	if k.ExpiresAt.IsZero() {
		return fmt.Errorf("%w: idempotency key without an expiry", exchange.ErrInvalid)
	}
	return nil
}

// sameRequest refuses a retry that is not the recorded request.
func sameRequest(old, x exchange.Exchange) error {
	differs := func(a, b string) bool { return a != "" && b != "" && a != b }
	switch {
	case old.Capability != x.Capability:
		return fmt.Errorf("%w: %s/%s was recorded with capability %q", exchange.ErrConflict, x.Sender, x.MessageID, old.Capability)
	case old.CorrelationID != x.CorrelationID:
		return fmt.Errorf("%w: %s/%s was recorded with correlation id %q", exchange.ErrConflict, x.Sender, x.MessageID, old.CorrelationID)
	case differs(old.ApprovalID, x.ApprovalID):
		return fmt.Errorf("%w: %s/%s was recorded with approval id %q", exchange.ErrConflict, x.Sender, x.MessageID, old.ApprovalID)
	case differs(old.ActionDigest, x.ActionDigest):
		return fmt.Errorf("%w: %s/%s was recorded with another action digest", exchange.ErrConflict, x.Sender, x.MessageID)
	}
	return nil
}

// checkTransition checks a transition's arguments before anything is
// read: from is legal towards to.
func checkTransition(id string, to exchange.State, c exchange.Change) error {
	if err := checkText("id", id, maxID, true); err != nil {
		return err
	}
	if err := checkReply(c.Reply, c.ReplyStatus); err != nil {
		return err
	}
	if (to == exchange.PendingApproval || to.Final()) && len(c.Reply) == 0 {
		return fmt.Errorf("%w: entering %s needs a reply", exchange.ErrInvalid, to)
	}
	if to != exchange.PendingApproval && (c.ApprovalID != "" || !c.Deadline.IsZero()) {
		return fmt.Errorf("%w: approval id and deadline are set only entering %s", exchange.ErrInvalid, exchange.PendingApproval)
	}
	if to.Final() && c.ActionDigest != "" {
		return fmt.Errorf("%w: action digest set entering %s", exchange.ErrInvalid, to)
	}
	if err := checkText("approval id", c.ApprovalID, maxText, false); err != nil {
		return err
	}
	if err := checkChange(to, c); err != nil {
		return err
	}
	return checkText("action digest", c.ActionDigest, maxText, false)
}

// checkChange checks what a transition queues besides the new state.
func checkChange(to exchange.State, c exchange.Change) error {
	if len(c.Decision) != 0 && !json.Valid(c.Decision) {
		return fmt.Errorf("%w: decision is not valid JSON", exchange.ErrInvalid)
	}
	if c.ReleaseKey && to != exchange.Failed {
		return fmt.Errorf("%w: an idempotency key is released entering failed, not %s", exchange.ErrInvalid, to)
	}
	if r := c.Review; r != nil {
		if !to.Final() {
			return fmt.Errorf("%w: a review is queued entering done or failed, not %s", exchange.ErrInvalid, to)
		}
		if err := checkText("review mode", r.Mode, maxText, true); err != nil {
			return err
		}
		// PostgreSQL text is UTF-8 without NUL; SQLite stores any bytes.
		if err := checkText("review profile", r.Profile, maxText, false); err != nil {
			return err
		}
		if r.DueAt.IsZero() {
			return fmt.Errorf("%w: a review without a deadline", exchange.ErrInvalid)
		}
	}
	for _, d := range c.Deliveries {
		if err := exchange.CheckCallbackURL(d.URL); err != nil {
			return err
		}
		if !json.Valid(d.Envelope) {
			return fmt.Errorf("%w: delivery envelope is not valid JSON", exchange.ErrInvalid)
		}
	}
	return nil
}

// apply returns cur moved to state to with c recorded, checking what the
// target state needs.
func apply(cur exchange.Exchange, to exchange.State, c exchange.Change) (exchange.Exchange, error) {
	next := cur
	next.State = to
	if len(c.Reply) != 0 {
		next.Reply, next.ReplyStatus = c.Reply, c.ReplyStatus
	}
	if c.ApprovalID != "" {
		if cur.ApprovalID != "" && cur.ApprovalID != c.ApprovalID {
			return exchange.Exchange{}, fmt.Errorf("%w: exchange %s has approval id %q", exchange.ErrConflict, cur.ID, cur.ApprovalID)
		}
		next.ApprovalID = c.ApprovalID
	}
	if !c.Deadline.IsZero() {
		next.Deadline = c.Deadline
	}
	if c.ActionDigest != "" {
		if cur.ActionDigest != "" && cur.ActionDigest != c.ActionDigest {
			return exchange.Exchange{}, fmt.Errorf("%w: exchange %s has another action digest", exchange.ErrConflict, cur.ID)
		}
		next.ActionDigest = c.ActionDigest
	}
	if len(c.Decision) != 0 {
		if cur.State != exchange.PendingApproval {
			return exchange.Exchange{}, fmt.Errorf("%w: a decision is recorded leaving %s, not %s", exchange.ErrInvalid, exchange.PendingApproval, cur.State)
		}
		next.Decision = c.Decision
	}
	if (to == exchange.PendingApproval || to == exchange.Approved) && (next.ApprovalID == "" || next.ActionDigest == "") {
		return exchange.Exchange{}, fmt.Errorf("%w: %s needs an approval id and an action digest", exchange.ErrInvalid, to)
	}
	return next, nil
}

// cleanText makes s storable as PostgreSQL text of at most max bytes:
// valid UTF-8, no NUL, cut on a character boundary.
func cleanText(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
