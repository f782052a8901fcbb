package sqliteexchange

import (
	"context"
	"time"

	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/internal/sqlitedb"
)

// ClaimStep claims a step (exchange.Steps): the write lock makes one of
// several callers, in every process on the file, the winner.
func (s *Store) ClaimStep(ctx context.Context, key string, now time.Time, lease time.Duration) (bool, error) {
	if err := exchange.CheckText("step key", key, exchange.MaxStepKey, true); err != nil {
		return false, err
	}
	var ok bool
	err := s.write(ctx, func(tx *sqlitedb.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO steps (key, claimed_by, claimed_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET claimed_by = excluded.claimed_by, claimed_at = excluded.claimed_at
			WHERE steps.done_at = 0 AND steps.claimed_at <= ?`,
			key, s.instance, now.UnixNano(), now.Add(-lease).UnixNano())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return err
	})
	return ok, wrap(err)
}

// StepDone records a step as taken.
func (s *Store) StepDone(ctx context.Context, key string, now time.Time) error {
	if err := exchange.CheckText("step key", key, exchange.MaxStepKey, true); err != nil {
		return err
	}
	return wrap(s.write(ctx, func(tx *sqlitedb.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE steps SET done_at = ? WHERE key = ? AND done_at = 0", max(now.UnixNano(), 1), key)
		return err
	}))
}

// PurgeSteps deletes the steps claimed before before.
func (s *Store) PurgeSteps(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sqlitedb.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM steps WHERE claimed_at < ?", before.UnixNano())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), wrap(err)
}
