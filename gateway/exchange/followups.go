package exchange

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

// Idempotency is an ARSIA idempotency key (Core §10) within its scope
// tuple, recorded by Create in the same write as the exchange it names.
type Idempotency struct {
	// From, To and PayloadType are the scope tuple; Key the key.
	From, To, PayloadType, Key string
	// Fingerprint identifies the request (arsia.IdempotencyFingerprint).
	Fingerprint string
	// ExpiresAt is when the key may be used for another request.
	ExpiresAt time.Time
}

// ErrKeyReused: an idempotency key, still unexpired, was first used for a
// request with another fingerprint. The wire answer is conflict.
var ErrKeyReused = fmt.Errorf("%w: idempotency key used for another request", ErrConflict)

func checkIdempotency(k *Idempotency) error {
	if k == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{{"idempotency scope from", k.From}, {"idempotency scope to", k.To},
		{"idempotency payload type", k.PayloadType}, {"idempotency key", k.Key}, {"idempotency fingerprint", k.Fingerprint}} {
		if err := CheckText(f.name, f.v, MaxText, true); err != nil {
			return err
		}
	}
	if k.ExpiresAt.IsZero() {
		return fmt.Errorf("%w: idempotency key without an expiry", ErrInvalid)
	}
	return nil
}

// Review is a human review a compliance profile demands after an action
// ran (required_post_execution, required_within_24h).
type Review struct {
	ExchangeID string
	// Mode is the oversight mode that demanded it.
	Mode string
	// Profile, Sender and Capability describe the call.
	Profile, Sender, Capability string
	// Outcome is how the execution ended: done or failed.
	Outcome State
	// CreatedAt is set by the store; DueAt is the deadline.
	CreatedAt, DueAt time.Time
	// ReviewedAt is zero while the review is open; Reviewer, Verdict and
	// Justification are set with it.
	ReviewedAt    time.Time
	Reviewer      string
	Verdict       Verdict
	Justification string
	// TimedOut says an oversight_timeout was raised: it was overdue.
	TimedOut bool
}

// Verdict is a reviewer's finding on an executed action.
type Verdict string

// The verdicts.
const (
	// Accepted: the action was right.
	Accepted Verdict = "accepted"
	// Flagged: the action needs follow-up (a reversal, an incident).
	Flagged Verdict = "flagged"
)

// Open reports whether the review still waits for a reviewer.
func (r Review) Open() bool { return r.ReviewedAt.IsZero() }

// Overdue reports whether an open review is past its deadline at now.
func (r Review) Overdue(now time.Time) bool { return r.Open() && !now.Before(r.DueAt) }

// Delivery is an envelope for a sender's callback URL.
type Delivery struct {
	Seq        int64
	ExchangeID string
	URL        string
	Envelope   json.RawMessage
	// Attempts so far; NextAttempt is when the next is due.
	Attempts    int
	NextAttempt time.Time
	LastError   string
}

// checkChange checks what a transition queues besides the new state.
func checkChange(to State, c Change) error {
	if len(c.Decision) != 0 && !json.Valid(c.Decision) {
		return fmt.Errorf("%w: decision is not valid JSON", ErrInvalid)
	}
	if c.ReleaseKey && to != Failed {
		return fmt.Errorf("%w: an idempotency key is released entering failed, not %s", ErrInvalid, to)
	}
	if r := c.Review; r != nil {
		if !to.Final() {
			return fmt.Errorf("%w: a review is queued entering done or failed, not %s", ErrInvalid, to)
		}
		if err := CheckText("review mode", r.Mode, MaxText, true); err != nil {
			return err
		}
		if err := CheckText("review profile", r.Profile, MaxText, false); err != nil {
			return err
		}
		if r.DueAt.IsZero() {
			return fmt.Errorf("%w: a review without a deadline", ErrInvalid)
		}
	}
	for _, d := range c.Deliveries {
		if err := CheckCallbackURL(d.URL); err != nil {
			return err
		}
		if !json.Valid(d.Envelope) {
			return fmt.Errorf("%w: delivery envelope is not valid JSON", ErrInvalid)
		}
	}
	return nil
}

// CheckCallbackURL accepts an https URL, or an http one to the loopback
// interface (for local agents and tests).
func CheckCallbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%w: callback URL %q is not an absolute URL without credentials", ErrInvalid, raw)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && arsia.IsLoopbackHost(u.Hostname())) {
		return fmt.Errorf("%w: callback URL %q must be https (http only to localhost)", ErrInvalid, raw)
	}
	return nil
}

// ReviewFilter selects reviews.
type ReviewFilter struct {
	// Open selects the open reviews only; Overdue those open and due
	// before the given time.
	Open    bool
	Overdue time.Time
	// NotTimedOut leaves out the reviews an oversight_timeout was raised
	// for.
	NotTimedOut bool
	// Limit caps the answer (100 when zero).
	Limit int
}
