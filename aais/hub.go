package aais

import (
	"context"
	"reflect"
	"sync"
	"time"
)

// hubRing is how many of the latest events a hub keeps for its followers.
// A follower that falls further behind reads the store itself (or is cut
// off, see Follower.MaxDelay).
const hubRing = 1024

// A hub is the one reader of a store's event log in this process: it reads
// each new event once, keeps the latest hubRing of them with their encoding,
// and wakes every follower of the store, which copies what it has not
// delivered yet out of the ring. Followers never block the hub nor each
// other: the hub does not wait for anyone, and a follower that cannot keep
// up finds that the ring has moved on without it.
//
// The hub reads the store when the store announces a change
// (ChangeNotifier), and every poll in any case, for writers that announce
// nothing (other processes on a SQLite or filestore file, memstore).
type hub struct {
	store  Store
	shared bool // registered in hubs
	refs   int  // guarded by hubs' lock
	cancel context.CancelFunc
	kick   chan struct{} // wakes the reader (capacity 1)

	pollMu sync.Mutex
	poll   time.Duration

	mu sync.RWMutex
	// known is false until the hub has read the store once.
	known   bool
	storeID string
	// epoch changes each time the hub's position could not be continued
	// (reset, compaction): the ring then starts again, and followers
	// check their position against the store.
	epoch uint64
	// ring holds the events first, first+1, ..., latest.
	first, latest uint64
	ring          []hubEntry
	// err is the last read's error, nil once a read succeeds.
	err error
	// changed is closed, and replaced, whenever any of the above changes.
	changed chan struct{}

	// snap is the last Pending read a follower made for its snapshot,
	// shared with the followers that start after it until the hub reads
	// a newer event (snapMu is held while it is refreshed, so that
	// followers starting together make one read).
	snapMu sync.Mutex
	snap   *hubPending
}

// hubPending is a Pending read and the hub's state it goes with.
type hubPending struct {
	pending []RequestRecord
	asOf    uint64
	epoch   uint64
	storeID string
}

// hubEntry is one event and its encoding (nil when Marshal failed: the
// follower then encodes it itself and reports the error).
type hubEntry struct {
	msg  *Message
	wire []byte
	at   time.Time // when the hub read it
}

// hubView is what a follower sees of a hub at one moment.
type hubView struct {
	known         bool
	storeID       string
	epoch         uint64
	first, latest uint64
	oldest        time.Time // when ring[0] was read; zero when empty
	err           error
	changed       <-chan struct{}
}

// hubs are the running hubs, one per store. Only stores that are pointers
// are shared (the rest cannot safely be map keys); every store this module
// has is one.
var hubs = struct {
	sync.Mutex
	m map[Store]*hub
}{m: map[Store]*hub{}}

// acquireHub returns the hub of s, starting it when it has no follower
// yet. poll is the caller's poll interval: the hub polls at the shortest
// of its followers'. Each call must be paired with release.
func acquireHub(s Store, poll time.Duration) *hub {
	shared := reflect.ValueOf(s).Kind() == reflect.Pointer
	hubs.Lock()
	defer hubs.Unlock()
	if shared {
		if h := hubs.m[s]; h != nil {
			h.refs++
			h.setPoll(poll)
			return h
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &hub{store: s, shared: shared, refs: 1, cancel: cancel, kick: make(chan struct{}, 1),
		poll: poll, changed: make(chan struct{})}
	if shared {
		hubs.m[s] = h
	}
	go h.run(ctx)
	return h
}

// release ends the caller's use of h; the last one stops it.
func (h *hub) release() {
	hubs.Lock()
	defer hubs.Unlock()
	h.refs--
	if h.refs > 0 {
		return
	}
	if h.shared && hubs.m[h.store] == h {
		delete(hubs.m, h.store)
	}
	h.cancel()
}

func (h *hub) setPoll(d time.Duration) {
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	if d < h.poll {
		h.poll = d
		h.wake()
	}
}

func (h *hub) pollEvery() time.Duration {
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	return h.poll
}

// wake makes the reader read the store now.
func (h *hub) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// run reads the store until ctx ends.
func (h *hub) run(ctx context.Context) {
	// Subscribe before the first read, so that nothing written after that
	// read goes unannounced.
	var changes <-chan struct{}
	if n, ok := h.store.(ChangeNotifier); ok {
		if c, err := n.Changes(ctx); err == nil {
			changes = c
		}
	}
	t := time.NewTimer(0)
	defer t.Stop()
	pos := uint64(0)
	for {
		pos = h.readAll(ctx, pos)
		t.Reset(h.pollEvery())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.kick:
		case _, open := <-changes:
			if !open {
				changes = nil // the poll goes on
			}
		}
	}
}

// readAll reads the events after pos until it has everything recorded,
// and returns the new position.
func (h *hub) readAll(ctx context.Context, pos uint64) uint64 {
	for {
		h.mu.RLock()
		known, storeID, failed := h.known, h.storeID, h.err != nil
		h.mu.RUnlock()
		var p EventPage
		var err error
		if !known {
			// Where the log ends: the ring starts there.
			p, err = h.store.EventsAfter(ctx, MaxSequence, 1)
		} else {
			p, err = h.store.EventsAfter(ctx, pos, followPage)
		}
		if err != nil {
			if ctx.Err() == nil {
				h.update(func() { h.err = err })
			}
			return pos
		}
		if !known || p.Gap || (storeID != "" && p.StoreID != storeID) || !contiguous(p.Events, pos) {
			// Start again from the end of the log, in a new epoch:
			// followers notice and read the store themselves.
			h.update(func() {
				h.known, h.storeID, h.err = true, p.StoreID, nil
				h.epoch++
				h.first, h.latest, h.ring = p.Latest+1, p.Latest, nil
			})
			return p.Latest
		}
		if len(p.Events) == 0 {
			if failed || (storeID == "" && p.StoreID != "") {
				h.update(func() { h.err, h.storeID = nil, p.StoreID })
			}
			return pos
		}
		add := make([]hubEntry, len(p.Events))
		now := time.Now()
		for i, m := range p.Events {
			add[i].msg, add[i].at = m, now
			add[i].wire, _ = Marshal(m)
		}
		pos = p.Events[len(p.Events)-1].Sequence
		h.update(func() {
			h.err, h.storeID = nil, p.StoreID
			if n := len(h.ring) + len(add); n > hubRing {
				// Drop the oldest, copying into a fresh array now and
				// then so the dropped events can be collected.
				drop := n - hubRing
				if drop >= len(h.ring) {
					add = add[drop-len(h.ring):]
					h.ring = nil
				} else {
					h.ring = append(make([]hubEntry, 0, hubRing), h.ring[drop:]...)
				}
				h.first += uint64(drop)
			}
			h.ring = append(h.ring, add...)
			h.latest = pos
		})
		if len(p.Events) < followPage {
			return pos
		}
	}
}

// contiguous reports whether events continue pos without a hole.
func contiguous(events []*Message, pos uint64) bool {
	for i, m := range events {
		if m == nil || m.Sequence != pos+1+uint64(i) {
			return false
		}
	}
	return true
}

// update changes the hub's state under its lock and wakes its followers.
func (h *hub) update(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn()
	close(h.changed)
	h.changed = make(chan struct{})
}

// view returns the hub's state.
func (h *hub) view() hubView {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.viewLocked()
}

func (h *hub) viewLocked() hubView {
	v := hubView{known: h.known, storeID: h.storeID, epoch: h.epoch, first: h.first, latest: h.latest,
		err: h.err, changed: h.changed}
	if len(h.ring) > 0 {
		v.oldest = h.ring[0].at
	}
	return v
}

// read appends to buf the events after after that the ring holds, at most
// limit of them; covered is false when the ring does not continue after
// (it is behind the ring, or ahead of the hub).
func (h *hub) read(after uint64, limit int, buf []hubEntry) (out []hubEntry, v hubView, covered bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	v = h.viewLocked()
	if !h.known || after+1 < h.first || after > h.latest {
		return buf, v, false
	}
	i := int(after + 1 - h.first)
	j := min(len(h.ring), i+limit)
	return append(buf, h.ring[i:j]...), v, true
}

// pending returns the pending requests as of a recent sequence, read from
// the store or shared with the followers that started since the hub last
// read an event, with the hub's epoch and store id it goes with. ok is
// false when the hub has not read the store yet, or moved to another
// epoch during the read: the caller then does not know which history the
// read belongs to.
func (h *hub) pending(ctx context.Context) (p *hubPending, ok bool, err error) {
	h.snapMu.Lock()
	defer h.snapMu.Unlock()
	v := h.view()
	if !v.known {
		return nil, false, nil
	}
	// A snapshot as of an older sequence is just as true, but the
	// follower would have the events since to replay.
	if c := h.snap; c != nil && c.epoch == v.epoch && c.storeID == v.storeID && c.asOf >= v.latest {
		return c, true, nil
	}
	pending, asOf, err := h.store.Pending(ctx)
	if err != nil {
		return nil, false, err
	}
	c := &hubPending{pending: pending, asOf: asOf, epoch: v.epoch, storeID: v.storeID}
	if w := h.view(); w.epoch != v.epoch || w.storeID != v.storeID || !w.known {
		return c, false, nil
	}
	h.snap = c
	return c, true, nil
}
