package pgutil

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Pruner deletes a table's stale rows in bounded batches, on demand
// (Prune) and in the background after use (Maybe), for the tables that
// only grow otherwise (the DPoP replay set, rate-limit buckets). It also
// says whether its owner is closed: Close stops it.
type Pruner struct {
	Pool *pgxpool.Pool
	// SQL deletes at most $2 rows stale as of $1 (the cutoff).
	SQL string
	// Every is the least time between two background runs; negative
	// means none.
	Every time.Duration
	// Batch is the most rows one statement deletes; MaxBatches bounds
	// the statements of one run.
	Batch, MaxBatches int
	// Log receives background failures, as What.
	Log  *slog.Logger
	What string

	once    sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex // guards the fields below
	closed  bool
	running bool
	last    time.Time // real (monotonic) time of the last run's start
}

// pruneTimeout bounds one background run.
const pruneTimeout = time.Minute

func (p *Pruner) init() {
	p.once.Do(func() { p.ctx, p.cancel = context.WithCancel(context.Background()) })
}

// Prune deletes the rows stale as of cutoff, batch after batch, until a
// batch is not full or MaxBatches ran, and returns how many it deleted.
func (p *Pruner) Prune(ctx context.Context, cutoff any) (int64, error) {
	var total int64
	for range p.MaxBatches {
		tag, err := p.Pool.Exec(ctx, p.SQL, cutoff, p.Batch)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(p.Batch) {
			break
		}
	}
	return total, nil
}

// Maybe starts a background run with the cutoff cutoff returns, unless one
// is running, the last started less than Every ago, or p is closed.
func (p *Pruner) Maybe(cutoff func() any) {
	if p.Every < 0 {
		return
	}
	p.init()
	p.mu.Lock()
	if p.closed || p.running || (!p.last.IsZero() && time.Since(p.last) < p.Every) {
		p.mu.Unlock()
		return
	}
	p.running = true
	p.last = time.Now()
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.ctx, pruneTimeout)
		defer cancel()
		if _, err := p.Prune(ctx, cutoff()); err != nil && p.ctx.Err() == nil {
			p.Log.Warn("pruning "+p.What+" failed", "err", err)
		}
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
	}()
}

// Closed reports whether Close was called.
func (p *Pruner) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close stops a background run and waits for it; it reports whether this
// call closed p (false when it was closed already).
func (p *Pruner) Close() bool {
	p.init()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return true
}
