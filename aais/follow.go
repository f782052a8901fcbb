package aais

import (
	"context"
	"time"
)

// Follower receives what Authority.Follow reads.
type Follower struct {
	// Message receives the snapshots and the events, in order (required).
	Message func(*Message) error
	// Gap, when set, is told that the position could not be continued
	// (the store was reset, or compacted past it), before the fresh
	// snapshot that follows.
	Gap func(EventPage) error
	// Idle, when set, is called each time Follow has delivered everything
	// recorded so far; wrote says whether anything was delivered since the
	// last call. Transports flush or send keep-alives there.
	Idle func(wrote bool) error
}

// ChangeNotifier is implemented by stores that can tell when something was
// recorded, by any process sharing them (pgstore's LISTEN/NOTIFY). Follow
// then reads the log as soon as a change is announced, instead of waiting
// for its next poll. A notification is a hint: the log is read from where
// the follower is, so lost notifications are caught up by the poll.
type ChangeNotifier interface {
	// Changes delivers a value after writes are recorded; it is closed
	// when ctx ends or the store closes.
	Changes(ctx context.Context) (<-chan struct{}, error)
}

// followPage is how many events Follow reads at a time.
const followPage = 500

// Follow delivers the approval stream the way AAIS prescribes for a
// presenter: an approval.snapshot (unless resume is set, in which case it
// continues after the sequence after), then every later event in order,
// polling the store every poll (250 ms when <= 0) and, when the store is a
// ChangeNotifier, as soon as it announces a change. When the position can
// no longer be continued it calls Gap and starts again from a fresh
// snapshot. It returns ctx's error when ctx ends, or the first error of the
// store or of a callback.
func (a *Authority) Follow(ctx context.Context, after uint64, resume bool, poll time.Duration, f Follower) error {
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	wrote := false
	send := func(m *Message) error {
		wrote = true
		return f.Message(m)
	}
	resync := func() error {
		snap, err := a.Snapshot(ctx)
		if err != nil {
			return err
		}
		after = snap.Snapshot.AsOfSequence
		return send(snap)
	}
	if !resume {
		if err := resync(); err != nil {
			return err
		}
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var changes <-chan struct{}
	if n, ok := a.store.(ChangeNotifier); ok {
		// Without notifications the poll still delivers everything.
		if c, err := n.Changes(ctx); err == nil {
			changes = c
		}
	}
	storeID := ""
	for {
		p, err := a.store.EventsAfter(ctx, after, followPage)
		if err != nil {
			return err
		}
		if p.Gap || (storeID != "" && p.StoreID != storeID) {
			storeID = p.StoreID
			if f.Gap != nil {
				if err := f.Gap(p); err != nil {
					return err
				}
			}
			if err := resync(); err != nil {
				return err
			}
			continue
		}
		storeID = p.StoreID
		for _, m := range p.Events {
			if err := send(m); err != nil {
				return err
			}
			after = m.Sequence
		}
		if len(p.Events) == followPage {
			continue
		}
		if f.Idle != nil {
			if err := f.Idle(wrote); err != nil {
				return err
			}
		}
		wrote = false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case _, open := <-changes:
			if !open {
				changes = nil // the poll goes on
			}
		}
	}
}
