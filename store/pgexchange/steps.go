package pgexchange

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custos-runtime/custos/gateway/exchange"
)

// ClaimStep claims a step (exchange.Steps). INSERT … ON CONFLICT makes one
// caller, in every replica, the winner: a racing insert waits for the
// first to commit, then re-checks the row and changes nothing.
func (s *Store) ClaimStep(ctx context.Context, key string, now time.Time, lease time.Duration) (bool, error) {
	if err := exchange.CheckText("step key", key, exchange.MaxStepKey, true); err != nil {
		return false, err
	}
	var ok bool
	err := s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO steps (key, claimed_by, claimed_at) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO UPDATE SET claimed_by = excluded.claimed_by, claimed_at = excluded.claimed_at
			WHERE steps.done_at = 0 AND steps.claimed_at <= $4`,
			key, s.instance, now.UnixNano(), now.Add(-lease).UnixNano())
		ok = tag.RowsAffected() == 1
		return err
	})
	return ok, wrap(err)
}

// StepDone records a step as taken.
func (s *Store) StepDone(ctx context.Context, key string, now time.Time) error {
	if err := exchange.CheckText("step key", key, exchange.MaxStepKey, true); err != nil {
		return err
	}
	return wrap(s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE steps SET done_at = $1 WHERE key = $2 AND done_at = 0", max(now.UnixNano(), 1), key)
		return err
	}))
}

// PurgeSteps deletes the steps claimed before before.
func (s *Store) PurgeSteps(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.runner.Write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM steps WHERE claimed_at < $1", before.UnixNano())
		n = tag.RowsAffected()
		return err
	})
	return int(n), wrap(err)
}
