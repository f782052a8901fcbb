package audit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Memory is an in-memory Backend, for tests and tools. It keeps the
// records' JSON, as a database would.
type Memory struct {
	mu     sync.Mutex
	rows   []memRow
	closed bool
}

type memRow struct {
	seq  uint64
	data []byte
}

var _ SealedBackend = (*Memory)(nil)

// NewMemory returns an empty in-memory backend.
func NewMemory() *Memory { return &Memory{} }

var errMemClosed = errors.New("audit: memory backend closed")

// Append implements Backend.
func (m *Memory) Append(ctx context.Context, build func(last *Record) (Record, error)) (Record, error) {
	return m.AppendSealed(ctx, Sealing(build))
}

// AppendSealed implements SealedBackend.
func (m *Memory) AppendSealed(ctx context.Context, build func(last *Record) (Sealed, error)) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Record{}, errMemClosed
	}
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	s, err := m.build(build)
	if err != nil {
		return Record{}, err
	}
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.insert(s.Record.Seq, s.JSON)
	return s.Record, nil
}

func (m *Memory) build(build func(last *Record) (Sealed, error)) (Sealed, error) {
	var last *Record
	if n := len(m.rows); n > 0 {
		r, err := ParseRecord(m.rows[n-1].data)
		if err != nil {
			return Sealed{}, err
		}
		last = &r
	}
	s, err := build(last)
	if err != nil {
		return Sealed{}, err
	}
	if n := len(m.rows); n > 0 && m.rows[n-1].seq >= s.Record.Seq {
		return Sealed{}, errors.New("audit: memory backend: seq not after the last one")
	}
	return s, nil
}

func (m *Memory) insert(seq uint64, data []byte) {
	i, _ := slices.BinarySearchFunc(m.rows, seq, func(r memRow, s uint64) int {
		switch {
		case r.seq < s:
			return -1
		case r.seq > s:
			return 1
		}
		return 0
	})
	m.rows = slices.Insert(m.rows, i, memRow{seq: seq, data: data})
}

// Range implements Backend.
func (m *Memory) Range(ctx context.Context, from uint64, fn func(seq uint64, data []byte) error) error {
	m.mu.Lock()
	rows := slices.Clone(m.rows)
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return errMemClosed
	}
	for _, r := range rows {
		if r.seq < from {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r.seq, slices.Clone(r.data)); err != nil {
			return err
		}
	}
	return nil
}

// Redact implements Backend.
func (m *Memory) Redact(ctx context.Context, now time.Time, build func(last *Record, redacted []uint64) (Record, error)) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, errMemClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	next := slices.Clone(m.rows)
	var seqs []uint64
	for i, r := range next {
		rec, err := ParseRecord(r.data)
		if err != nil {
			continue // Verify reports it; redaction leaves it alone
		}
		if rec.Redacted || rec.RetainUntil.IsZero() || !rec.RetainUntil.Before(now) {
			continue
		}
		data, err := rec.Redact().MarshalJSON()
		if err != nil {
			return 0, err
		}
		next[i].data = data
		seqs = append(seqs, r.seq)
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	old := m.rows
	m.rows = next
	s, err := m.build(func(last *Record) (Sealed, error) {
		rec, err := build(last, seqs)
		if err != nil {
			return Sealed{}, err
		}
		data, err := rec.MarshalJSON()
		return Sealed{Record: rec, JSON: data}, err
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		m.rows = old
		return 0, err
	}
	m.insert(s.Record.Seq, s.JSON)
	return len(seqs), nil
}

// Close implements Backend.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// Rows returns a copy of the stored (seq, JSON) rows, for tests.
func (m *Memory) Rows() (seqs []uint64, data [][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.rows {
		seqs = append(seqs, r.seq)
		data = append(data, slices.Clone(r.data))
	}
	return seqs, data
}

// SetRows replaces the stored rows, for tampering tests. seqs and data
// must have the same length; rows are kept in the order given.
func (m *Memory) SetRows(seqs []uint64, data [][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows = m.rows[:0]
	for i := range seqs {
		m.rows = append(m.rows, memRow{seq: seqs[i], data: slices.Clone(data[i])})
	}
}
