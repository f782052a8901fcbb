package pgutil

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Batcher is group commit in two phases. A write is a Prepare function
// that reads, locks the rows it decides on and returns what it will write
// without writing it; the writes that arrive together are prepared one
// after another in one transaction, and then Finish writes everything
// they prepared and commits, in one round trip. A store whose every write
// takes one lock (pgstore's sequence row) takes it in Finish only: the
// lock is held for one statement and the commit, once per batch, and
// batches of several Batchers (several replicas) prepare concurrently.
//
// Batches are an optimisation, never a change of meaning: a write whose
// Prepare fails inside a batch (any error but ErrNoChange), or whose
// Prepare leaves the transaction aborted, is run again alone, with the
// Runner's retries, so it gets exactly the error it would have got alone;
// when the batch itself fails (a statement error, the connection, a
// definite COMMIT failure), every write in it is run again alone. A write
// whose context ends before the commit writes nothing: the batch is rolled
// back and the others run alone. Only a COMMIT whose outcome is unknown is
// reported as such to every write in the batch (ErrCommitUnknown).
//
// Prepare functions must be safe to run more than once, must not write
// (everything is written by Finish) and share the batch's transaction
// with the writes prepared before them: a write that depends on another
// write of the same batch (the same request, the same rule) must see it
// in Batch.Claim and give up (return any error), and is then run alone
// after the batch committed.
type Batcher struct {
	R *Runner
	// Max is the most writes in one batch (32 when zero; 1: every write
	// alone).
	Max int
	// Conns is the most batches run at once, each on its own connection
	// (1 when zero): with more, one prepares while another commits, but
	// the writes are spread over smaller batches.
	Conns int
	// Txs, when positive, is the most transactions the Batcher has open
	// at once, batches and writes run alone together (a failed batch runs
	// each of its writes alone): writes that hold their connection while
	// they wait for one lock (units of work, on the audit chain's head)
	// then leave the rest of the pool to everything else.
	Txs int
	// Finish writes the values the batch's Prepare functions returned (in
	// order, none nil) and commits tx, through SendCommit, in one round
	// trip. It may set results inside the values.
	Finish func(ctx context.Context, tx pgx.Tx, prepared []any) error
	// Append, when not nil, writes the one value a Prepare returned
	// without committing: a write made with the context of a unit of work
	// on the same pool (Joined) is prepared and appended at once in the
	// unit's transaction, where the writes before it are visible, so it
	// claims nothing. When nil, writes never join a unit.
	Append func(ctx context.Context, tx pgx.Tx, prepared any) error

	mu      sync.Mutex
	queue   []*batchJob
	leaders int
	// slots holds a token per open transaction when Txs is positive.
	slotsOnce sync.Once
	slots     chan struct{}
}

// take waits for a transaction slot (see Txs) and returns its release.
func (b *Batcher) take(ctx context.Context) (func(), error) {
	if b.Txs <= 0 {
		return func() {}, nil
	}
	b.slotsOnce.Do(func() { b.slots = make(chan struct{}, b.Txs) })
	select {
	case b.slots <- struct{}{}:
		return func() { <-b.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Batch is the state the Prepare functions of one transaction share.
type Batch struct {
	claims map[string]struct{}
	// locals and final are the units of work's (Unit.Local, Unit.Defer).
	locals map[any]any
	before []func(context.Context, pgx.Tx) error
	final  []func(*pgx.Batch)
}

// Claim reports whether key was not yet claimed in this batch, and claims
// it. A write that finds a key claimed depends on an earlier write of the
// batch and must give up (it is then run alone).
func (b *Batch) Claim(key string) bool {
	if _, ok := b.claims[key]; ok {
		return false
	}
	if b.claims == nil {
		b.claims = make(map[string]struct{})
	}
	b.claims[key] = struct{}{}
	return true
}

// Prepare is one write for a Batcher: it reads and locks in tx, and
// returns what Finish must write, or ErrNoChange when there is nothing to
// write (it then set its results itself).
type Prepare func(ctx context.Context, tx pgx.Tx, b *Batch) (any, error)

type batchJob struct {
	ctx   context.Context
	queue func(*pgx.Batch)
	fn    Prepare
	done  chan error
}

// errAlone tells a waiting Write to run its job alone.
var errAlone = errors.New("run alone")

// Write runs fn, alone or in a batch with concurrent writes, and returns
// when what it prepared is committed (or failed), with the semantics of
// Runner.Write.
func (b *Batcher) Write(ctx context.Context, fn Prepare) error {
	return b.WriteQueued(ctx, nil, fn)
}

// WriteQueued is Write for a write that reads first with statements it
// queues (queue adds them, with the callbacks that keep their results):
// the statements of every write in a batch are sent together, in one
// round trip, before the Prepare functions run, in order. queue must
// reset what its callbacks set, and the callbacks must fail only on
// errors of the statements; a failing statement aborts the batch, which
// is then run again write by write.
func (b *Batcher) WriteQueued(ctx context.Context, queue func(*pgx.Batch), fn Prepare) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.R.closed(); err != nil {
		return err
	}
	if u := Joined(ctx, b.R.Pool); u != nil && b.Append != nil {
		return u.Join(ctx, func(ctx context.Context, tx pgx.Tx) error {
			j := &batchJob{ctx: ctx, queue: queue}
			if err := sendQueued(ctx, tx, []*batchJob{j}); err != nil {
				return err
			}
			p, err := fn(ctx, tx, &Batch{})
			if err != nil {
				return err
			}
			return b.Append(ctx, tx, p)
		})
	}
	j := &batchJob{ctx: ctx, queue: queue, fn: fn, done: make(chan error, 1)}
	if b.Max == 1 {
		return b.alone(j)
	}
	conns := b.Conns
	if conns <= 0 {
		conns = 1
	}
	b.mu.Lock()
	b.queue = append(b.queue, j)
	if b.leaders < conns {
		b.leaders++
		go b.lead()
	}
	b.mu.Unlock()
	err := <-j.done
	if errors.Is(err, errAlone) {
		return b.alone(j)
	}
	return err
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
			b.leaders--
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = append([]*batchJob(nil), b.queue[n:]...)
		b.mu.Unlock()
		b.run(batch)
	}
}

// alone runs j in a transaction of its own, retrying on transient
// failures as Runner.Write does.
func (b *Batcher) alone(j *batchJob) error {
	return b.R.retry(j.ctx, func() (error, bool) { return b.once(j) })
}

// once is one attempt of alone; retry tells whether the failure left
// nothing written and may be retried.
func (b *Batcher) once(j *batchJob) (err error, retry bool) {
	ctx := j.ctx
	release, err := b.take(ctx)
	if err != nil {
		return err, false
	}
	defer release()
	c, err := b.R.Pool.Acquire(ctx)
	if err != nil {
		return err, ctx.Err() == nil
	}
	// Release destroys a connection left broken or in a transaction.
	defer c.Release()
	tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite})
	if err != nil {
		return err, ctx.Err() == nil
	}
	bg := context.WithoutCancel(ctx)
	err = sendQueued(ctx, tx, []*batchJob{j})
	var p any
	if err == nil {
		p, err = j.fn(ctx, tx, &Batch{})
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		_ = tx.Rollback(bg)
		if errors.Is(err, ErrNoChange) {
			return nil, false
		}
		if ctx.Err() != nil {
			return ctx.Err(), false
		}
		return err, Transient(err) || c.Conn().IsClosed()
	}
	if err := b.Finish(bg, tx, []any{p}); err != nil {
		if errors.Is(err, ErrCommitUnknown) {
			return err, false
		}
		_ = tx.Rollback(bg)
		return err, Transient(err)
	}
	return nil, false
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
		// Run by the leader, so that the writes arriving meanwhile
		// queue for the next batch.
		for _, j := range live {
			j.done <- b.alone(j)
		}
		return
	}
	if err := b.R.closed(); err != nil {
		for _, j := range live {
			j.done <- err
		}
		return
	}
	allAlone := func(jobs []*batchJob) {
		for _, j := range jobs {
			j.done <- errAlone
		}
	}
	// The batch's statements are not cancelled by any one caller: a
	// cancelled query would break the connection for all of them.
	ctx := context.WithoutCancel(live[0].ctx)
	release, _ := b.take(ctx)
	defer release()
	c, err := b.R.Pool.Acquire(ctx)
	if err != nil {
		allAlone(live)
		return
	}
	defer c.Release()
	tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite})
	if err != nil {
		allAlone(live)
		return
	}
	if err := sendQueued(ctx, tx, live); err != nil {
		_ = tx.Rollback(ctx)
		allAlone(live)
		return
	}
	var (
		in       []*batchJob
		prepared []any
		pending  = live[:0:0] // prepared or ErrNoChange, not yet answered
		st       Batch
	)
	for _, j := range live {
		p, err := j.fn(context.WithoutCancel(j.ctx), tx, &st)
		if c.Conn().IsClosed() || c.Conn().PgConn().TxStatus() != 'T' {
			// A statement failed: the transaction is aborted, and
			// nothing of the batch can commit.
			_ = tx.Rollback(ctx)
			allAlone(live)
			return
		}
		var uf unitFailed
		switch {
		case errors.As(err, &uf):
			// A unit of work wrote before it failed: nothing of the
			// batch can commit.
			_ = tx.Rollback(ctx)
			allAlone(live)
			return
		case err == nil:
			in = append(in, j)
			prepared = append(prepared, p)
		case errors.Is(err, ErrNoChange):
			// Nothing to write, and its answer was read from
			// committed rows: it is final now.
			j.done <- nil
		default:
			pending = append(pending, j)
		}
	}
	for _, j := range in {
		if j.ctx.Err() != nil {
			// Someone gave up before the commit: nothing of theirs may
			// be written. Start again without them.
			_ = tx.Rollback(ctx)
			var rest []*batchJob
			for _, k := range in {
				if k.ctx.Err() != nil {
					k.done <- k.ctx.Err()
				} else {
					rest = append(rest, k)
				}
			}
			allAlone(rest)
			allAlone(pending)
			return
		}
	}
	if len(in) == 0 {
		_ = tx.Rollback(ctx) // releases the rows the batch locked
		allAlone(pending)
		return
	}
	if err := b.Finish(ctx, tx, prepared); err != nil {
		if errors.Is(err, ErrCommitUnknown) {
			for _, j := range in {
				j.done <- err
			}
		} else {
			_ = tx.Rollback(ctx)
			allAlone(in)
		}
		allAlone(pending)
		return
	}
	for _, j := range in {
		j.done <- nil
	}
	allAlone(pending)
}

// sendQueued sends the statements the jobs queue, in one round trip, and
// runs their callbacks.
func sendQueued(ctx context.Context, tx pgx.Tx, jobs []*batchJob) error {
	var b pgx.Batch
	for _, j := range jobs {
		if j.queue != nil {
			j.queue(&b)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, &b).Close()
}

// SendCommit sends the statements queued in batch and COMMIT in one round
// trip on tx, calls read with the results of the statements (before
// COMMIT's), and reports the outcome: nil once committed; read's error
// when it returns one that is not a PostgreSQL error (the statements
// succeeded and COMMIT ran: read must only fail so when they wrote
// nothing); a PostgreSQL error when the transaction was rolled back (a
// statement failed and the server skipped the rest, COMMIT included); and
// an error wrapping ErrCommitUnknown when the connection failed once
// COMMIT may have been sent. tx must not be used after it, except to roll
// back after a PostgreSQL error.
func SendCommit(ctx context.Context, tx pgx.Tx, batch *pgx.Batch, read func(pgx.BatchResults) error) error {
	batch.Queue("COMMIT")
	br := tx.SendBatch(ctx, batch)
	rerr := read(br)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	var pe *pgconn.PgError
	if rerr != nil && (errors.As(rerr, &pe) || err == nil) {
		return rerr
	}
	switch {
	case err == nil && tag.String() == "COMMIT":
		return nil
	case err == nil:
		return fmt.Errorf("COMMIT answered %q", tag.String())
	case errors.As(err, &pe) || pgconn.SafeToRetry(err):
		return err
	}
	return errors.Join(ErrCommitUnknown, err)
}
