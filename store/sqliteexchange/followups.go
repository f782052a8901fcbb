package sqliteexchange

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/store/internal/rowutil"

	"github.com/custos-runtime/custos/internal/sqlitedb"
)

// idempotentPrior returns the exchange an unexpired key names (found), or
// exchange.ErrKeyReused when that exchange was another request.
func idempotentPrior(ctx context.Context, tx *sqlitedb.Tx, k *exchange.Idempotency, now time.Time) (exchange.Exchange, bool, error) {
	var (
		fp, id  string
		expires int64
	)
	err := tx.QueryRowContext(ctx, qIdemGet, k.From, k.To, k.PayloadType, k.Key).Scan(&fp, &id, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return exchange.Exchange{}, false, nil
	case err != nil:
		return exchange.Exchange{}, false, err
	case now.UnixNano() > expires:
		return exchange.Exchange{}, false, nil // expired: Create replaces it
	case fp != k.Fingerprint:
		return exchange.Exchange{}, false, fmt.Errorf("%w (key %q)", exchange.ErrKeyReused, k.Key)
	}
	x, err := getTx(ctx, tx, id)
	return x, err == nil, err
}

// PurgeIdempotency deletes the idempotency keys expired at now and returns
// how many.
func (s *Store) PurgeIdempotency(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sqlitedb.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM idempotency WHERE expires_at < ?", now.UnixNano())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), wrap(err)
}

// queue writes what a transition queues, in its transaction.
func (s *Store) queue(ctx context.Context, tx *sqlitedb.Tx, x exchange.Exchange, c exchange.Change) error {
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

func scanReview(r scanner) (exchange.Review, error) {
	var (
		v                           exchange.Review
		outcome, verdict            string
		created, due, reviewed, out int64
	)
	if err := r.Scan(&v.ExchangeID, &v.Mode, &v.Profile, &v.Sender, &v.Capability, &outcome, &created, &due,
		&reviewed, &v.Reviewer, &verdict, &v.Justification, &out); err != nil {
		return exchange.Review{}, err
	}
	v.Outcome, v.Verdict, v.TimedOut = exchange.State(outcome), exchange.Verdict(verdict), out == 1
	v.CreatedAt, v.DueAt, v.ReviewedAt = rowutil.FromNanos(created), rowutil.FromNanos(due), rowutil.FromNanos(reviewed)
	return v, nil
}

// Reviews lists reviews, those due first.
func (s *Store) Reviews(ctx context.Context, f exchange.ReviewFilter) ([]exchange.Review, error) {
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

// GetReview returns the review of an exchange, or exchange.ErrNotFound.
func (s *Store) GetReview(ctx context.Context, exchangeID string) (exchange.Review, error) {
	var r exchange.Review
	err := s.read(ctx, func(tx *sqlitedb.Tx) (err error) {
		r, err = scanReview(tx.QueryRowContext(ctx, "SELECT "+reviewColumns+" FROM reviews WHERE exchange_id = ?", exchangeID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no review for %s", exchange.ErrNotFound, exchangeID)
		}
		return err
	})
	return r, wrap(err)
}

// CompleteReview records a reviewer's verdict on an open review and
// returns it with done=true. A review already completed is returned as it
// is with done=false, unless the same reviewer gave the same verdict and
// justification (a retry), which is done=true again.
func (s *Store) CompleteReview(ctx context.Context, exchangeID, reviewer string, v exchange.Verdict, justification string) (exchange.Review, bool, error) {
	if v != exchange.Accepted && v != exchange.Flagged {
		return exchange.Review{}, false, fmt.Errorf("%w: verdict %q (want accepted or flagged)", exchange.ErrInvalid, v)
	}
	if err := exchange.CheckText("reviewer", reviewer, exchange.MaxText, true); err != nil {
		return exchange.Review{}, false, err
	}
	if len(justification) > 4000 || !utf8.ValidString(justification) {
		return exchange.Review{}, false, fmt.Errorf("%w: justification must be UTF-8 of at most 4000 bytes", exchange.ErrInvalid)
	}
	var (
		out  exchange.Review
		done bool
	)
	err := s.write(ctx, func(tx *sqlitedb.Tx) error {
		get := func() (err error) {
			out, err = scanReview(tx.QueryRowContext(ctx, "SELECT "+reviewColumns+" FROM reviews WHERE exchange_id = ?", exchangeID))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("%w: no review for %s", exchange.ErrNotFound, exchangeID)
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
	err := s.write(ctx, func(tx *sqlitedb.Tx) error {
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
	err = s.read(ctx, func(tx *sqlitedb.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(due_at <= ?), 0) FROM reviews WHERE reviewed_at = 0`,
			now.UnixNano()).Scan(&open, &overdue)
	})
	return open, overdue, wrap(err)
}

// DueDeliveries returns up to limit undelivered envelopes due at now, in
// order; an exchange's later envelopes wait for its earlier ones.
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]exchange.Delivery, error) {
	var out []exchange.Delivery
	err := s.read(ctx, func(tx *sqlitedb.Tx) error {
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
				d    exchange.Delivery
				env  []byte
				next int64
			)
			if err := rows.Scan(&d.Seq, &d.ExchangeID, &d.URL, &env, &d.Attempts, &next, &d.LastError); err != nil {
				return err
			}
			d.Envelope, d.NextAttempt = env, rowutil.FromNanos(next)
			out = append(out, d)
		}
		return rows.Err()
	})
	return out, wrap(err)
}

// Delivered records a delivery as done.
func (s *Store) Delivered(ctx context.Context, seq int64) error {
	return wrap(s.write(ctx, func(tx *sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE deliveries SET delivered_at = ?, attempts = attempts + 1 WHERE seq = ?",
			s.now().UTC().UnixNano(), seq)
		return err
	}))
}

// DeliveryFailed records a failed attempt: the next one is due at next,
// or, when giveUp, none is.
func (s *Store) DeliveryFailed(ctx context.Context, seq int64, failure string, next time.Time, giveUp bool) error {
	if len(failure) > exchange.MaxText {
		failure = failure[:exchange.MaxText]
	}
	return wrap(s.write(ctx, func(tx *sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE deliveries SET attempts = attempts + 1, last_error = ?, next_attempt = ?,
			given_up = ? WHERE seq = ?`, failure, next.UnixNano(), map[bool]int{true: 1}[giveUp], seq)
		return err
	}))
}
