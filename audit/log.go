package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Backend stores the chain. The chain logic (sequence numbers, links,
// hashes, verification) lives in Log; a backend only has to run a
// function under its write lock and keep what it returns. Backends must be
// safe for concurrent use, and several backends over the same storage
// (processes, replicas) must serialise their appends so that the chain
// has one order.
type Backend interface {
	// Append runs build under the backend's exclusive write lock (a
	// transaction that serialises with every other writer of the same
	// storage), passing the record with the highest seq (nil when there is
	// none), and stores the record build returns, under its Seq, in the
	// same transaction. It returns the stored record only once it is
	// durable. When build fails, or ctx is done before the commit, nothing
	// is stored and the error is returned. build may be called again
	// when the backend retries a transaction; it must not have side
	// effects. Inside a unit of work (a context that carries one of the
	// backend's database: store.State.Unit) the record is durable when
	// the unit commits, and a backend may give it its place in the chain
	// only then (pgaudit does, to hold the chain's lock for the commit
	// alone): it returns the zero Record, and a build that fails then
	// fails the unit.
	Append(ctx context.Context, build func(last *Record) (Record, error)) (Record, error)

	// Range calls fn with the stored JSON of every record whose storage
	// key is at least from, in ascending key order, until fn returns an
	// error (which Range returns). The data passed to fn is fn's to keep.
	// Range does not parse or check the records: Verify does.
	Range(ctx context.Context, from uint64, fn func(seq uint64, data []byte) error) error

	// Redact, in one write transaction, replaces records that are not
	// redacted and whose RetainUntil is set and before now with
	// rec.Redact(), then calls build with the last record (after the
	// redactions) and the seqs redacted, ascending, and appends the record
	// build returns, as Append does, and returns how many it redacted. A
	// backend may redact only a batch of the expired records per call
	// (Purge calls it until it returns 0). With nothing to redact it writes
	// nothing, does not call build, and returns 0.
	Redact(ctx context.Context, now time.Time, build func(last *Record, redacted []uint64) (Record, error)) (int, error)

	// Close releases the backend.
	Close() error
}

// Options tunes a Log. A nil *Options means the defaults.
type Options struct {
	// Now is the clock used for records appended without a time. Nil
	// means time.Now.
	Now func() time.Time
	// Retention gives the RetainUntil of a record appended without one
	// (after its Time is set); a zero result keeps the record forever.
	// Nil keeps every such record forever. See ProfileRetention.
	Retention func(Record) time.Time
	// CheckpointEvery is the promise the Log's checkpoints carry (see
	// Checkpoint.Every): how often the writer signs one while it runs.
	// Zero makes none (a command-line tool).
	CheckpointEvery time.Duration
	// OnCheckpoint, when set, is called with every checkpoint record the
	// Log wrote, once it is durable (custos serve copies it to a head
	// file outside the log).
	OnCheckpoint func(Record)
	// Signer, when set, signs a purge checkpoint (EventPurge) right after
	// the purge records of every Purge that redacted something.
	Signer CheckpointSigner
}

// Log is a hash-chained audit log over a Backend. It is safe for
// concurrent use; several Logs (in several processes) may share one
// storage when the backend allows it.
type Log struct {
	b    Backend
	opts Options
}

// New returns a Log over b. o may be nil.
func New(b Backend, o *Options) *Log {
	l := &Log{b: b}
	if o != nil {
		l.opts = *o
	}
	if l.opts.Now == nil {
		l.opts.Now = time.Now
	}
	return l
}

// Backend returns the Log's backend.
func (l *Log) Backend() Backend { return l.b }

// Close closes the backend.
func (l *Log) Close() error { return l.b.Close() }

// ErrAppend is wrapped by every Append and Purge failure: the event was
// not recorded, and the operation it describes must not go ahead (fail
// closed).
var ErrAppend = errors.New("audit: record not written")

// Append adds rec to the end of the chain and returns it as stored: Seq,
// Prev and Hash assigned, Time set to now when zero, RetainUntil from
// Options.Retention when zero. It returns only once the backend reports
// the record durable. Any error, including an invalid record, a done ctx
// or a backend failure, wraps ErrAppend: the caller must then treat the
// request as failed. A ctx done before the commit writes nothing. (An
// error from the commit itself may, as with any database, leave the
// record written; the chain then holds one record more than was
// acknowledged, never one less.)
//
// rec's Seq, Prev, Hash and Redacted must be zero.
func (l *Log) Append(ctx context.Context, rec Record) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrAppend, err)
	}
	// Everything that does not depend on the previous record (time,
	// retention, checks, the canonical form, the normalised record) is
	// done here, outside the backend's lock and concurrently with other
	// appends; under the lock only the link to the previous record and the
	// hash are computed (see prepared.seal). A malformed record never
	// takes the lock.
	p, err := l.Prepare(rec)
	if err != nil {
		return Record{}, err
	}
	return l.AppendPrepared(ctx, p)
}

// Prepared is a record Prepare checked and encoded: the part of an append
// that does not depend on the previous record, done ahead of time (before
// a unit of work, whose function runs on the store's writer).
type Prepared struct{ p *prepared }

// Prepare does what Append does before it takes the backend's lock: the
// time and retention, the checks, the canonical form. Its errors are
// Append's. The result may be appended once or, when a unit of work is
// retried, again: each AppendPrepared links it to the chain as it is then.
func (l *Log) Prepare(rec Record) (Prepared, error) {
	if rec.Seq != 0 || rec.Prev != "" || rec.Hash != "" || rec.Redacted {
		return Prepared{}, fmt.Errorf("%w: %w: seq, prev, hash and redacted are assigned by the log", ErrAppend, ErrRecord)
	}
	if rec.Kind == "" {
		return Prepared{}, fmt.Errorf("%w: %w: kind is missing", ErrAppend, ErrRecord)
	}
	p, err := l.prepare(rec, true)
	if err != nil {
		return Prepared{}, fmt.Errorf("%w: %w", ErrAppend, err)
	}
	return Prepared{p}, nil
}

// AppendPrepared appends a record Prepare returned, as Append does.
func (l *Log) AppendPrepared(ctx context.Context, p Prepared) (Record, error) {
	if p.p == nil {
		return Record{}, fmt.Errorf("%w: %w: not prepared", ErrAppend, ErrRecord)
	}
	if err := ctx.Err(); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrAppend, err)
	}
	out, err := l.appendPrepared(ctx, p.p)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrAppend, err)
	}
	return out, nil
}

// Purge redacts every record whose RetainUntil is before now (see
// Record.Redact) and, in the same transaction, appends a KindPurge record
// saying what it redacted (one purge record per backend batch). Records
// keep their seq, time, kind, prev and hash, so the chain still verifies.
// With Options.Signer, a purge checkpoint (EventPurge) follows the last
// purge record, so the purge is vouched for at once; if it cannot be
// signed, the records stay redacted and the error says so. It returns
// how many records it redacted; with none, it writes nothing.
func (l *Log) Purge(ctx context.Context, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrAppend, err)
	}
	now = now.UTC().Round(0)
	total := 0
	for {
		n, err := l.redact(ctx, now)
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			break
		}
	}
	if total > 0 && l.opts.Signer != nil {
		if _, _, err := l.CheckpointEvent(ctx, l.opts.Signer, EventPurge); err != nil {
			return total, fmt.Errorf("%d records redacted, but the purge checkpoint was not written: %w", total, err)
		}
	}
	return total, nil
}

func (l *Log) redact(ctx context.Context, now time.Time) (int, error) {
	n, err := l.b.Redact(ctx, now, func(last *Record, seqs []uint64) (Record, error) {
		if len(seqs) == 0 {
			return Record{}, errors.New("purge: nothing redacted")
		}
		rec := Record{
			Kind:    KindPurge,
			Outcome: OutcomeRedacted,
			Actor:   Actor{ID: "custos.audit", Type: ActorPolicy},
			Details: map[string]any{
				"redacted":  len(seqs),
				"first_seq": seqs[0],
				"last_seq":  seqs[len(seqs)-1],
				"before":    FormatTime(now),
			},
		}
		s, err := l.sealOnce(rec, last, false)
		return s.Record, err
	})
	if err != nil {
		return 0, fmt.Errorf("%w: purge: %w", ErrAppend, err)
	}
	return n, nil
}

// Export writes the records with from <= seq <= to (to 0: up to the last)
// to w as JSON lines: each line is one record's stored RFC 8785 form,
// hash included, in seq order. It returns the number of records written.
// Export does not verify the chain (Verify, or VerifyJSONL on the output,
// does); it refuses a stored record that is not valid record JSON.
func (l *Log) Export(ctx context.Context, w io.Writer, from, to uint64) (int, error) {
	n := 0
	errStop := errors.New("stop")
	err := l.b.Range(ctx, max(from, 1), func(seq uint64, data []byte) error {
		if to != 0 && seq > to {
			return errStop
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := ParseRecord(data); err != nil {
			return fmt.Errorf("audit: export: record at seq %d: %w", seq, err)
		}
		line := make([]byte, 0, len(data)+1)
		line = append(append(line, data...), '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return n, err
	}
	return n, nil
}

// Verify walks the whole chain in storage order and checks every record:
// its hash (recomputed; for a redacted record, that its hash is the prev
// of the next record), its link to the previous record and its seq. The
// Report says how many records were read and, when the chain is broken,
// the first problem; the error is reserved for failures to read the
// backend.
func (l *Log) Verify(ctx context.Context) (Report, error) {
	return l.VerifyWith(ctx, VerifyOptions{})
}

// VerifyWith is Verify with options.
func (l *Log) VerifyWith(ctx context.Context, o VerifyOptions) (Report, error) {
	v := NewVerifier(o)
	err := l.b.Range(ctx, 1, func(seq uint64, data []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		v.Add(seq, data)
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("audit: verify: %w", err)
	}
	return v.Report(), nil
}
