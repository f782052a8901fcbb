package pgutil

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Batcher is group commit for a Runner: writes that arrive while another
// batch is running are run together, each in a savepoint of one
// transaction, and committed at once. A store whose every write takes one
// lock (pgstore's sequence row) then pays one lock hold, one commit and
// one WAL flush for the whole batch instead of one per write.
//
// Batches are an optimisation, never a change of meaning: a write whose
// function fails inside a batch is rolled back to its savepoint and run
// again alone, with the Runner's retries, so it gets exactly the error it
// would have got alone; when anything about the batch itself fails (a
// savepoint, the connection, a definite COMMIT failure), every write in it
// is run again alone. A write whose context ends before the commit writes
// nothing: the batch is rolled back and the others run alone. Only a
// COMMIT whose outcome is unknown is reported as such to every write in
// the batch (ErrCommitUnknown), as Runner.Write reports it for one.
//
// Write functions must be safe to run more than once (they already are:
// Runner.Write retries them) and receive a savepoint as their pgx.Tx.
type Batcher struct {
	R *Runner
	// Max is the most writes in one batch (32 when zero).
	Max int

	mu    sync.Mutex
	queue []*batchJob
	busy  bool
}

type batchJob struct {
	ctx  context.Context
	fn   func(context.Context, pgx.Tx) error
	done chan error
}

// Write runs fn in a transaction, alone or in a batch with concurrent
// writes, and returns when it is committed (or failed), with the
// semantics of Runner.Write.
func (b *Batcher) Write(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.R.closed(); err != nil {
		return err
	}
	j := &batchJob{ctx: ctx, fn: fn, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, j)
	if !b.busy {
		b.busy = true
		go b.lead()
	}
	b.mu.Unlock()
	return <-j.done
}

// lead runs batches until the queue is empty.
func (b *Batcher) lead() {
	max := b.Max
	if max <= 0 {
		max = 32
	}
	for {
		b.mu.Lock()
		n := min(len(b.queue), max)
		if n == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = append([]*batchJob(nil), b.queue[n:]...)
		b.mu.Unlock()
		b.run(batch)
	}
}

// alone runs jobs one after another through the Runner.
func (b *Batcher) alone(jobs []*batchJob) {
	for _, j := range jobs {
		j.done <- b.R.Write(j.ctx, j.fn)
	}
}

func (b *Batcher) run(batch []*batchJob) {
	live := batch[:0:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.done <- err
			continue
		}
		live = append(live, j)
	}
	if len(live) <= 1 {
		b.alone(live)
		return
	}
	if err := b.R.closed(); err != nil {
		for _, j := range live {
			j.done <- err
		}
		return
	}
	// The batch's statements are not cancelled by any one caller: a
	// cancelled query would break the connection for all of them.
	ctx := context.WithoutCancel(live[0].ctx)
	tx, err := b.R.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite})
	if err != nil {
		b.alone(live)
		return
	}
	var in, retry []*batchJob
	for _, j := range live {
		sp, err := tx.Begin(ctx) // SAVEPOINT
		if err != nil {
			_ = tx.Rollback(ctx)
			b.alone(live)
			return
		}
		err = j.fn(context.WithoutCancel(j.ctx), sp)
		if err == nil {
			err = sp.Commit(ctx) // RELEASE SAVEPOINT
			if err != nil {
				_ = tx.Rollback(ctx)
				b.alone(live)
				return
			}
			in = append(in, j)
			continue
		}
		if rerr := sp.Rollback(ctx); rerr != nil { // ROLLBACK TO SAVEPOINT
			_ = tx.Rollback(ctx)
			b.alone(live)
			return
		}
		if errors.Is(err, ErrNoChange) {
			in = append(in, j) // nothing to write; it succeeded
			continue
		}
		retry = append(retry, j)
	}
	for _, j := range in {
		if j.ctx.Err() != nil {
			// Someone gave up before the commit: nothing of theirs may
			// be written. Start again without them.
			_ = tx.Rollback(ctx)
			var rest []*batchJob
			for _, k := range live {
				if k.ctx.Err() != nil {
					k.done <- k.ctx.Err()
				} else {
					rest = append(rest, k)
				}
			}
			b.alone(rest)
			return
		}
	}
	if err := tx.Commit(ctx); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			b.alone(live) // rolled back: nothing was written
			return
		}
		for _, j := range in {
			j.done <- errors.Join(ErrCommitUnknown, err)
		}
		b.alone(retry)
		return
	}
	for _, j := range in {
		j.done <- nil
	}
	b.alone(retry)
}
