package aais

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Follower receives what Authority.Follow reads.
type Follower struct {
	// Message receives the snapshots and the events, in order. One of
	// Message and Wire is required. Events are shared by every follower
	// of the store: Message must not modify them.
	Message func(*Message) error
	// Wire, when set, is called instead of Message with the message's
	// encoding (Marshal) too. An event is encoded once for all the
	// followers of the store, so a transport that writes the encoding
	// saves encoding it per follower. Neither m nor wire may be modified.
	Wire func(m *Message, wire []byte) error
	// Gap, when set, is told that the position could not be continued
	// (the store was reset, or compacted past it), before the fresh
	// snapshot that follows.
	Gap func(EventPage) error
	// Idle, when set, is called each time Follow has delivered everything
	// recorded so far, and every IdleEvery while nothing happens; wrote
	// says whether anything was delivered since the last call. Transports
	// flush or send keep-alives there.
	Idle func(wrote bool) error
	// IdleEvery is how often Idle is called when nothing is delivered;
	// Follow's poll interval when zero.
	IdleEvery time.Duration
	// MaxDelay, when > 0, is how long the follower's next event may wait
	// for it while the follower is busy in its callbacks (writing to a
	// client that does not read): once an event this process read has
	// waited longer, and the follower spent at least half that time in
	// Message, Wire or Idle since it was last caught up, Follow gives up
	// on it and returns an error wrapping ErrSlowFollower. A client that
	// cannot keep up is cut off, and resumes later after the last
	// sequence it received, instead of being buffered for; a follower
	// that was only waiting for a CPU is not. The others are never held
	// up either way. Zero: never cut off; a follower that falls out of
	// the shared buffer (more than a thousand events behind) reads the
	// store itself until it has caught up.
	MaxDelay time.Duration
}

// ErrSlowFollower is what Follow returns (wrapped, with the figures) when
// a follower let its next event wait longer than Follower.MaxDelay. Nothing was
// skipped: the follower resumes after the last sequence it received.
var ErrSlowFollower = errors.New("aais: the follower fell too far behind the event stream")

// ChangeNotifier is implemented by stores that can tell when something was
// recorded: pgstore by LISTEN/NOTIFY, for every process sharing the
// database; sqlitestore for the writes of this process. Follow then reads
// the log as soon as a change is announced, instead of waiting for its
// next poll. A notification is a hint: the log is read from where the
// follower is, so lost notifications are caught up by the poll.
type ChangeNotifier interface {
	// Changes delivers a value after writes are recorded; it is closed
	// when ctx ends or the store closes.
	Changes(ctx context.Context) (<-chan struct{}, error)
}

// followPage is how many events Follow reads at a time.
const followPage = 500

// Follow delivers the approval stream the way AAIS prescribes for a
// presenter: an approval.snapshot (unless resume is set, in which case it
// continues after the sequence after), then every later event in order.
// When the position can no longer be continued it calls Gap and starts
// again from a fresh snapshot. It returns ctx's error when ctx ends, the
// first error of the store or of a callback, or one wrapping
// ErrSlowFollower (see Follower.MaxDelay).
//
// All the Follow calls on one store in a process share one reader of the
// store: it reads each new event once, as soon as the store announces a
// change (ChangeNotifier: pgstore's LISTEN, sqlitestore's in-process
// writes) and every poll in any case (250 ms when <= 0; the shortest of
// the callers'), and hands it to every follower from memory. A follower
// reads the store itself only to start (the snapshot, a resumed position)
// and to catch up after it fell out of the shared buffer.
func (a *Authority) Follow(ctx context.Context, after uint64, resume bool, poll time.Duration, f Follower) error {
	if f.Message == nil && f.Wire == nil {
		return fmt.Errorf("%w: a follower without Message or Wire", ErrBuild)
	}
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	every := f.IdleEvery
	if every <= 0 {
		every = poll
	}
	h := acquireHub(a.store, poll)
	defer h.release()
	fl := &following{a: a, f: f, h: h, after: after}
	if !resume {
		if err := fl.resync(ctx, true); err != nil {
			return err
		}
	}
	// With MaxDelay, copy a few events at a time, so that the delay is
	// checked as often.
	limit := followPage
	if f.MaxDelay > 0 {
		limit = 16
	}
	idle := time.NewTicker(every)
	defer idle.Stop()
	var (
		storeID string
		epoch   uint64
		inRing  bool // caught up with the store; reading the hub
		live    bool // has read from the hub (MaxDelay applies)
		buf     []hubEntry
		waitOn  <-chan struct{}
	)
	if fl.shared != nil {
		// The snapshot goes with the hub's history: continue from the
		// hub (which reads the store if it does not reach that far).
		storeID, epoch, inRing = fl.shared.storeID, fl.shared.epoch, true
	}
	for {
		if !inRing {
			v := h.view() // before the read: a later change shows as one
			var p EventPage
			var err error
			aside(func() { p, err = a.store.EventsAfter(ctx, fl.after, followPage) })
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
				if err := fl.resync(ctx, false); err != nil {
					return err
				}
				continue
			}
			storeID = p.StoreID
			for _, m := range p.Events {
				if err := fl.send(m, nil); err != nil {
					return err
				}
			}
			if len(p.Events) == followPage {
				continue
			}
			inRing, live, epoch = true, false, v.epoch
			if !v.known || v.storeID != storeID || fl.after > v.latest {
				// The hub has not read this far yet (or it is on
				// another history): what there is was delivered;
				// wait for the hub to move.
				waitOn = v.changed
			} else {
				continue
			}
		} else {
			var v hubView
			var covered bool
			buf, v, covered = h.read(fl.after, limit, buf[:0])
			switch {
			case v.err != nil:
				return v.err
			case !v.known || v.epoch != epoch || v.storeID != storeID:
				// The hub started again: check the position with the
				// store itself.
				inRing = false
				continue
			case !covered && fl.after > v.latest:
				// Ahead of the hub: it will catch up.
				waitOn = v.changed
			case !covered:
				// Out of the ring: its next event is older than the
				// ring's oldest.
				if err := fl.slow(v.oldest, live); err != nil {
					return err
				}
				inRing = false // catch up from the store
				continue
			case len(buf) > 0 && fl.slow(buf[0].at, live) != nil:
				return fl.slow(buf[0].at, live)
			default:
				live = true
				for i := range buf {
					e := &buf[i]
					if err := fl.send(e.msg, e.wire); err != nil {
						return err
					}
					buf[i] = hubEntry{} // do not keep it alive
				}
				if len(buf) > 0 {
					// Read again: caught up is what the hub has now,
					// not what it had before these were sent.
					continue
				}
				waitOn = v.changed
			}
		}
		// Everything recorded so far is delivered: wait for more.
		fl.busy = 0
		if err := fl.idle(); err != nil {
			return err
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-waitOn:
				waiting = false
			case <-idle.C:
				if err := fl.idle(); err != nil {
					return err
				}
			}
		}
	}
}

// following is one Follow call's position.
type following struct {
	a     *Authority
	f     Follower
	h     *hub
	after uint64
	wrote bool
	// shared is the hub's Pending read the last snapshot came from; nil
	// when it came from the store directly.
	shared *hubPending
	// busy is the time spent in callbacks since the follower was last
	// caught up (measured only with MaxDelay).
	busy time.Duration
}

// slow returns an ErrSlowFollower error when the follower is live and
// MaxDelay is set, its next event was read before MaxDelay ago and it
// spent at least half of MaxDelay in its callbacks since it was last
// caught up.
func (fl *following) slow(at time.Time, live bool) error {
	if fl.f.MaxDelay <= 0 || !live || at.IsZero() || fl.busy < fl.f.MaxDelay/2 {
		return nil
	}
	if d := time.Since(at); d > fl.f.MaxDelay {
		return fmt.Errorf("%w: the event after sequence %d waited %v for it (at most %v) while the client was written to for %v",
			ErrSlowFollower, fl.after, d.Round(time.Millisecond), fl.f.MaxDelay, fl.busy.Round(time.Millisecond))
	}
	return nil
}

// timed adds the time fn takes to busy, when MaxDelay is set.
func (fl *following) timed(fn func() error) error {
	if fl.f.MaxDelay <= 0 {
		return fn()
	}
	start := time.Now()
	err := fn()
	fl.busy += time.Since(start)
	return err
}

// idle calls Idle.
func (fl *following) idle() error {
	if fl.f.Idle == nil {
		return nil
	}
	err := fl.timed(func() error { return fl.f.Idle(fl.wrote) })
	fl.wrote = false
	return err
}

// send delivers m (its encoding when wire is not nil) and moves the
// position past it.
func (fl *following) send(m *Message, wire []byte) error {
	fl.wrote = true
	if fl.f.Wire != nil {
		if wire == nil {
			b, err := Marshal(m)
			if err != nil {
				return err
			}
			wire = b
		}
		if err := fl.timed(func() error { return fl.f.Wire(m, wire) }); err != nil {
			return err
		}
	} else if err := fl.timed(func() error { return fl.f.Message(m) }); err != nil {
		return err
	}
	if m.Type != TypeSnapshot {
		fl.after = m.Sequence
	}
	return nil
}

// resync delivers a fresh snapshot and continues after it. With share,
// the snapshot may come from a Pending read other followers share (not
// after a gap: the hub may not have seen the reset yet).
func (fl *following) resync(ctx context.Context, share bool) error {
	var (
		snap *Message
		wire []byte
		err  error
	)
	fl.shared = nil
	aside(func() {
		if share {
			var p *hubPending
			var ok bool
			if p, ok, err = fl.h.pending(ctx); err == nil && p != nil {
				if ok {
					fl.shared = p
				}
				snap, err = fl.a.snapshotOf(ctx, p.pending, p.asOf)
			}
		}
		if snap == nil && err == nil {
			snap, err = fl.a.Snapshot(ctx)
		}
		if err == nil && fl.f.Wire != nil {
			wire, err = Marshal(snap)
		}
	})
	if err != nil {
		fl.shared = nil
		return err
	}
	if err := fl.send(snap, wire); err != nil {
		return err
	}
	fl.after = snap.Snapshot.AsOfSequence
	return nil
}

// aside runs fn on a goroutine of its own and waits for it. Reading the
// store (a SQLite driver's calls nest deeply) would grow the follower's
// stack, and a goroutine parked for hours between events keeps the stack
// it grew: with thousands of followers that is most of their memory.
// A panic in fn is raised again on the caller's goroutine, where the
// caller (an HTTP server) may recover it.
func aside(fn func()) {
	done := make(chan struct{})
	var p any
	go func() {
		defer close(done)
		defer func() { p = recover() }()
		fn()
	}()
	<-done
	if p != nil {
		panic(p)
	}
}
