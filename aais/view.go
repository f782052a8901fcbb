package aais

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrGap: an event does not follow the last one a View applied, so events
// were missed. Take a new snapshot and Restore from it.
var ErrGap = errors.New("aais: events missed; take a new snapshot")

// View is a presenter's copy of an authority's pending requests, rebuilt
// the way AAIS prescribes for a reconnecting presenter: Restore from an
// approval.snapshot, then Apply only the events with a greater sequence, in
// stream order. A presenter that keeps a View never shows a request that
// is resolved, and notices (ErrGap) when it has missed an event rather
// than showing a stale list. The zero View is empty, at sequence 0, and
// accepts any stream. A View is not safe for concurrent use.
type View struct {
	stream  string
	seq     uint64
	pending map[string]*Request
}

// Restore replaces the view's state with the snapshot's: its pending
// requests, its as_of_sequence and its stream.
func (v *View) Restore(snapshot *Message) error {
	if snapshot == nil || snapshot.Type != TypeSnapshot || snapshot.Snapshot == nil {
		return fmt.Errorf("%w: not an approval.snapshot message", ErrInvalid)
	}
	s := snapshot.Snapshot
	pending := make(map[string]*Request, len(s.Pending))
	for i := range s.Pending {
		r := s.Pending[i]
		if _, dup := pending[r.ID]; dup {
			return fmt.Errorf("%w: request %s twice in the snapshot", ErrInvalid, r.ID)
		}
		pending[r.ID] = &r
	}
	v.stream, v.seq, v.pending = snapshot.Stream, s.AsOfSequence, pending
	return nil
}

// Apply applies one event of the authority's stream:
//
//   - an event at or before the view's sequence was already applied (or is
//     covered by the snapshot) and changes nothing (applied false);
//   - an event more than one past it is ErrGap and changes nothing;
//   - approval.requested adds its request, approval.resolved removes its
//     request; approval.activity and approval.decided change nothing and
//     do not count as events of the stream (they are not in the log),
//     except the activity a partial vote of a quorum records (Partial: it
//     carries QuorumExtension), which is in the log: it changes no
//     request but advances the sequence like any event.
//
// An event of another stream, when the view's stream is known, is refused
// (ErrInvalid).
func (v *View) Apply(m *Message) (applied bool, err error) {
	if m == nil {
		return false, fmt.Errorf("%w: nil message", ErrInvalid)
	}
	if v.stream != "" && m.Stream != "" && m.Stream != v.stream {
		return false, fmt.Errorf("%w: event of stream %q in a view of %q", ErrInvalid, m.Stream, v.stream)
	}
	switch m.Type {
	case TypeRequested, TypeResolved:
	case TypeActivity:
		if !Partial(m) {
			return false, nil
		}
	case TypeDecided:
		return false, nil
	default:
		return false, fmt.Errorf("%w: a %s message is not an event", ErrInvalid, m.Type)
	}
	switch {
	case m.Sequence <= v.seq:
		return false, nil
	case m.Sequence > v.seq+1:
		return false, fmt.Errorf("%w: event %d after %d", ErrGap, m.Sequence, v.seq)
	}
	if v.pending == nil {
		v.pending = map[string]*Request{}
	}
	if m.Type == TypeActivity {
		// A recorded partial vote: nothing to change but the position.
	} else if m.Type == TypeRequested {
		if m.Request == nil {
			return false, fmt.Errorf("%w: approval.requested without a request", ErrInvalid)
		}
		r := *m.Request
		v.pending[r.ID] = &r
	} else {
		if m.Resolution == nil {
			return false, fmt.Errorf("%w: approval.resolved without a resolution", ErrInvalid)
		}
		delete(v.pending, m.Resolution.RequestID)
	}
	if v.stream == "" {
		v.stream = m.Stream
	}
	v.seq = m.Sequence
	return true, nil
}

// Sequence is the sequence of the last event applied (or the snapshot's
// as_of_sequence): resume with the events after it.
func (v *View) Sequence() uint64 { return v.seq }

// Get returns a pending request by id.
func (v *View) Get(id string) (Request, bool) {
	r, ok := v.pending[id]
	if !ok {
		return Request{}, false
	}
	return *r, true
}

// Pending returns the pending requests not expired at now (zero: none
// left out), oldest first (by created_at, then id).
func (v *View) Pending(now time.Time) []Request {
	out := make([]Request, 0, len(v.pending))
	for _, r := range v.pending {
		if !now.IsZero() && !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt.Time()) {
			continue
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Request) int {
		if c := a.CreatedAt.Time().Compare(b.CreatedAt.Time()); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}
