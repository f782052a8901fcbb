package exchange

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/internal/sqlitedb"
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

// idempotentPrior returns the exchange an unexpired key names (found), or
// ErrKeyReused when that exchange was another request.
func idempotentPrior(ctx context.Context, tx *sqlitedb.Tx, k *Idempotency, now time.Time) (Exchange, bool, error) {
	var (
		fp, id  string
		expires int64
	)
	err := tx.QueryRowContext(ctx, qIdemGet, k.From, k.To, k.PayloadType, k.Key).Scan(&fp, &id, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Exchange{}, false, nil
	case err != nil:
		return Exchange{}, false, err
	case now.UnixNano() > expires:
		return Exchange{}, false, nil // expired: Create replaces it
	case fp != k.Fingerprint:
		return Exchange{}, false, fmt.Errorf("%w (key %q)", ErrKeyReused, k.Key)
	}
	x, err := getTx(ctx, tx, id)
	return x, err == nil, err
}

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

// PurgeIdempotency deletes the idempotency keys expired at now and returns
// how many.
func (s *Store) PurgeIdempotency(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM idempotency WHERE expires_at < ?", now.UnixNano())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), wrap(err)
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

// queue writes what a transition queues, in its transaction.
func (s *Store) queue(ctx context.Context, tx *sqlitedb.Tx, x Exchange, c Change) error {
	now := s.now().UTC().UnixNano()
	if r := c.Review; r != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO reviews (exchange_id, mode, profile, sender, capability, outcome,
			created_at, due_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			x.ID, r.Mode, r.Profile, x.Sender, x.Capability, string(x.State), now, r.DueAt.UnixNano()); err != nil {
			return err
		}
	}
	if c.ReleaseKey {
		if _, err := tx.ExecContext(ctx, "DELETE FROM idempotency WHERE exchange_id = ?", x.ID); err != nil {
			return err
		}
	}
	for _, d := range c.Deliveries {
		if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (exchange_id, url, envelope, next_attempt)
			VALUES (?, ?, ?, ?)`, x.ID, d.URL, []byte(d.Envelope), now); err != nil {
			return err
		}
	}
	return nil
}

const reviewColumns = `exchange_id, mode, profile, sender, capability, outcome, created_at, due_at,
	reviewed_at, reviewer, verdict, justification, timed_out`

func scanReview(r scanner) (Review, error) {
	var (
		v                           Review
		outcome, verdict            string
		created, due, reviewed, out int64
	)
	if err := r.Scan(&v.ExchangeID, &v.Mode, &v.Profile, &v.Sender, &v.Capability, &outcome, &created, &due,
		&reviewed, &v.Reviewer, &verdict, &v.Justification, &out); err != nil {
		return Review{}, err
	}
	v.Outcome, v.Verdict, v.TimedOut = State(outcome), Verdict(verdict), out == 1
	v.CreatedAt, v.DueAt, v.ReviewedAt = FromNanos(created), FromNanos(due), FromNanos(reviewed)
	return v, nil
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

// Reviews lists reviews, those due first.
func (s *Store) Reviews(ctx context.Context, f ReviewFilter) ([]Review, error) {
	q := "SELECT " + reviewColumns + " FROM reviews"
	var (
		where []string
		args  []any
	)
	if f.Open || !f.Overdue.IsZero() {
		where = append(where, "reviewed_at = 0")
	}
	if !f.Overdue.IsZero() {
		where = append(where, "due_at <= ?")
		args = append(args, f.Overdue.UnixNano())
	}
	if f.NotTimedOut {
		where = append(where, "timed_out = 0")
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	q += " ORDER BY reviewed_at <> 0, due_at, exchange_id LIMIT ?"
	args = append(args, f.Limit)
	out, err := queryAll(ctx, s, q, args, scanReview)
	return out, wrap(err)
}

// GetReview returns the review of an exchange, or ErrNotFound.
func (s *Store) GetReview(ctx context.Context, exchangeID string) (Review, error) {
	var r Review
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) (err error) {
		r, err = scanReview(tx.QueryRowContext(ctx, "SELECT "+reviewColumns+" FROM reviews WHERE exchange_id = ?", exchangeID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no review for %s", ErrNotFound, exchangeID)
		}
		return err
	})
	return r, wrap(err)
}

// CompleteReview records a reviewer's verdict on an open review and
// returns it with done=true. A review already completed is returned as it
// is with done=false, unless the same reviewer gave the same verdict and
// justification (a retry), which is done=true again.
func (s *Store) CompleteReview(ctx context.Context, exchangeID, reviewer string, v Verdict, justification string) (Review, bool, error) {
	if v != Accepted && v != Flagged {
		return Review{}, false, fmt.Errorf("%w: verdict %q (want accepted or flagged)", ErrInvalid, v)
	}
	if err := CheckText("reviewer", reviewer, MaxText, true); err != nil {
		return Review{}, false, err
	}
	if len(justification) > 4000 || !utf8.ValidString(justification) {
		return Review{}, false, fmt.Errorf("%w: justification must be UTF-8 of at most 4000 bytes", ErrInvalid)
	}
	var (
		out  Review
		done bool
	)
	err := s.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		get := func() (err error) {
			out, err = scanReview(tx.QueryRowContext(ctx, "SELECT "+reviewColumns+" FROM reviews WHERE exchange_id = ?", exchangeID))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("%w: no review for %s", ErrNotFound, exchangeID)
			}
			return err
		}
		if err := get(); err != nil {
			return err
		}
		if !out.Open() {
			done = out.Reviewer == reviewer && out.Verdict == v && out.Justification == justification
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE reviews SET reviewed_at = ?, reviewer = ?, verdict = ?, justification = ?
			WHERE exchange_id = ? AND reviewed_at = 0`, s.now().UTC().UnixNano(), reviewer, string(v), justification, exchangeID); err != nil {
			return err
		}
		done = true
		return get()
	})
	return out, done, wrap(err)
}

// MarkTimedOut records that an oversight_timeout was raised for an open,
// overdue review; ok is false when it was already marked or is closed, so
// of several callers one raises the event.
func (s *Store) MarkTimedOut(ctx context.Context, exchangeID string) (bool, error) {
	var ok bool
	err := s.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE reviews SET timed_out = 1 WHERE exchange_id = ? AND timed_out = 0 AND reviewed_at = 0", exchangeID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return err
	})
	return ok, wrap(err)
}

// ReviewCounts returns how many reviews are open and how many of those are
// overdue at now.
func (s *Store) ReviewCounts(ctx context.Context, now time.Time) (open, overdue int, err error) {
	err = s.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(due_at <= ?), 0) FROM reviews WHERE reviewed_at = 0`,
			now.UnixNano()).Scan(&open, &overdue)
	})
	return open, overdue, wrap(err)
}

// DueDeliveries returns up to limit undelivered envelopes due at now, in
// order; an exchange's later envelopes wait for its earlier ones.
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]Delivery, error) {
	var out []Delivery
	err := s.db.Read(ctx, func(tx *sqlitedb.Tx) error {
		out = nil
		rows, err := tx.QueryContext(ctx, `SELECT d.seq, d.exchange_id, d.url, d.envelope, d.attempts, d.next_attempt, d.last_error
			FROM deliveries d WHERE d.delivered_at = 0 AND d.given_up = 0 AND d.next_attempt <= ?
			AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.exchange_id = d.exchange_id AND e.seq < d.seq
				AND e.delivered_at = 0 AND e.given_up = 0)
			ORDER BY d.seq LIMIT ?`, now.UnixNano(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				d    Delivery
				env  []byte
				next int64
			)
			if err := rows.Scan(&d.Seq, &d.ExchangeID, &d.URL, &env, &d.Attempts, &next, &d.LastError); err != nil {
				return err
			}
			d.Envelope, d.NextAttempt = env, FromNanos(next)
			out = append(out, d)
		}
		return rows.Err()
	})
	return out, wrap(err)
}

// Delivered records a delivery as done.
func (s *Store) Delivered(ctx context.Context, seq int64) error {
	return wrap(s.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE deliveries SET delivered_at = ?, attempts = attempts + 1 WHERE seq = ?",
			s.now().UTC().UnixNano(), seq)
		return err
	}))
}

// DeliveryFailed records a failed attempt: the next one is due at next,
// or, when giveUp, none is.
func (s *Store) DeliveryFailed(ctx context.Context, seq int64, failure string, next time.Time, giveUp bool) error {
	if len(failure) > MaxText {
		failure = failure[:MaxText]
	}
	return wrap(s.db.Write(ctx, func(tx *sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE deliveries SET attempts = attempts + 1, last_error = ?, next_attempt = ?,
			given_up = ? WHERE seq = ?`, failure, next.UnixNano(), map[bool]int{true: 1}[giveUp], seq)
		return err
	}))
}
