package aais_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/aais/aaistest"
	"github.com/custos-runtime/custos/store/memstore"
)

// notifyingStore is a memstore that announces its writes (as sqlitestore
// does for its process) and counts the reads of its event log.
type notifyingStore struct {
	*memstore.Store
	reads atomic.Int64
	mu    sync.Mutex
	subs  map[chan struct{}]struct{}
}

func newNotifyingStore() *notifyingStore {
	return &notifyingStore{Store: memstore.New(), subs: map[chan struct{}]struct{}{}}
}

func (s *notifyingStore) EventsAfter(ctx context.Context, after uint64, limit int) (aais.EventPage, error) {
	s.reads.Add(1)
	return s.Store.EventsAfter(ctx, after, limit)
}

func (s *notifyingStore) Changes(ctx context.Context) (<-chan struct{}, error) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[c] = struct{}{}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(s.subs, c)
		s.mu.Unlock()
		close(c)
	})
	return c, nil
}

func (s *notifyingStore) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (s *notifyingStore) CreateRequestIfAbsent(ctx context.Context, rec aais.RequestRecord) (aais.RequestRecord, bool, error) {
	defer s.wake()
	return s.Store.CreateRequestIfAbsent(ctx, rec)
}

// follower records what one Follow call delivered.
type follower struct {
	mu    sync.Mutex
	seqs  []uint64
	snaps int
	got   chan uint64 // every event's sequence, when not nil
}

func (f *follower) message(m *aais.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.Type == aais.TypeSnapshot {
		f.snaps++
		return nil
	}
	if n := len(f.seqs); n > 0 && m.Sequence != f.seqs[n-1]+1 {
		return fmt.Errorf("sequence %d after %d", m.Sequence, f.seqs[n-1])
	}
	f.seqs = append(f.seqs, m.Sequence)
	if f.got != nil {
		f.got <- m.Sequence
	}
	return nil
}

func (f *follower) last() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seqs) == 0 {
		return 0
	}
	return f.seqs[len(f.seqs)-1]
}

// create records n new requests, from id number from on.
func create(t *testing.T, a *aais.Authority, c *aaistest.Clock, from, n int) {
	t.Helper()
	for i := range n {
		if _, _, err := a.Create(t.Context(), aaistest.Request(t, c.Now(), fmt.Sprint(from+i))); err != nil {
			t.Fatal(err)
		}
	}
}

// Many followers of one store share one reader: each new event is read
// from the store once, not once per follower, and every follower gets
// every event, in order.
func TestFollowersShareOneReader(t *testing.T) {
	const followers, events = 300, 40
	s := newNotifyingStore()
	c := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, c)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var ready sync.WaitGroup
	fs := make([]*follower, followers)
	done := make(chan error, followers)
	for i := range fs {
		fs[i] = &follower{}
		ready.Add(1)
		var once sync.Once
		go func() {
			// An hour's poll: only the store's announcements wake the
			// reader.
			done <- a.Follow(ctx, 0, false, time.Hour, aais.Follower{
				Message: fs[i].message,
				Idle:    func(bool) error { once.Do(ready.Done); return nil },
			})
		}()
	}
	ready.Wait() // every follower has its snapshot and is waiting
	before := s.reads.Load()
	create(t, a, c, 1, events)
	deadline := time.Now().Add(30 * time.Second)
	for _, f := range fs {
		for f.last() < events {
			if time.Now().After(deadline) {
				t.Fatalf("a follower has %d of %d events", f.last(), events)
			}
			time.Sleep(time.Millisecond)
		}
	}
	reads := s.reads.Load() - before
	// One read per announced write at most (announcements coalesce),
	// and one more per follower at most would be 300+.
	if reads > events+1 {
		t.Fatalf("%d followers made %d reads of the log for %d events", followers, reads, events)
	}
	cancel()
	for range fs {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Follow returned %v", err)
		}
	}
	for _, f := range fs {
		if f.snaps != 1 || len(f.seqs) != events || f.seqs[0] != 1 {
			t.Fatalf("follower got %d snapshots and %d events", f.snaps, len(f.seqs))
		}
	}
}

// A follower that stops reading is cut off with ErrSlowFollower once it is
// let an event wait longer than MaxDelay, without holding up the others, and
// resumes after the last sequence it got without losing one.
func TestSlowFollowerCutOff(t *testing.T) {
	const maxDelay, events = 200 * time.Millisecond, 60
	s := newNotifyingStore()
	c := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, c)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	slow := &follower{}
	release := make(chan struct{})
	slowReady := make(chan struct{})
	slowDone := make(chan error, 1)
	var once sync.Once
	go func() {
		slowDone <- a.Follow(ctx, 0, false, time.Hour, aais.Follower{
			MaxDelay: maxDelay,
			Message: func(m *aais.Message) error {
				if m.Type != aais.TypeSnapshot {
					<-release // stuck, as a client that stopped reading
				}
				return slow.message(m)
			},
			Idle: func(bool) error { once.Do(func() { close(slowReady) }); return nil },
		})
	}()
	<-slowReady
	fast := &follower{got: make(chan uint64, events)}
	fastDone := make(chan error, 1)
	go func() {
		fastDone <- a.Follow(ctx, 0, false, time.Hour, aais.Follower{MaxDelay: maxDelay, Message: fast.message})
	}()
	for fast.snapshots() == 0 {
		time.Sleep(time.Millisecond)
	}
	create(t, a, c, 1, events)
	// The fast follower gets everything while the slow one is stuck.
	for i := uint64(1); i <= events; i++ {
		select {
		case got := <-fast.got:
			if got != i {
				t.Fatalf("fast follower: %d, want %d", got, i)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the fast follower is held up at %d (the slow one blocks it)", i)
		}
	}
	time.Sleep(2 * maxDelay) // the slow follower's next event waits too long
	close(release)
	err := <-slowDone
	if !errors.Is(err, aais.ErrSlowFollower) {
		t.Fatalf("slow follower: %v, want ErrSlowFollower", err)
	}
	last := slow.last()
	if last >= events {
		t.Fatalf("slow follower got all %d events and was still cut off: %v", last, err)
	}
	// Resuming where it stopped delivers the rest, in order.
	rest := &follower{seqs: []uint64{last}, got: make(chan uint64, events)}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go func() {
		_ = a.Follow(rctx, last, true, time.Hour, aais.Follower{MaxDelay: maxDelay, Message: rest.message})
	}()
	for i := last + 1; i <= events; i++ {
		select {
		case got := <-rest.got:
			if got != i {
				t.Fatalf("resumed: %d, want %d", got, i)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("resumed follower stuck before %d", i)
		}
	}
	cancel()
	if err := <-fastDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("fast follower: %v", err)
	}
}

func (f *follower) snapshots() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snaps
}

// A follower without MaxDelay that falls out of the shared buffer (more
// than a thousand events behind) reads the store itself and loses
// nothing.
func TestFollowerCatchesUpFromStore(t *testing.T) {
	const events = 1500
	s := newNotifyingStore()
	c := aaistest.NewClock(aaistest.Start)
	a := aaistest.NewAuthority(t, s, c)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	release := make(chan struct{})
	f := &follower{}
	ready := make(chan struct{})
	done := make(chan error, 1)
	var once sync.Once
	go func() {
		done <- a.Follow(ctx, 0, false, time.Millisecond, aais.Follower{
			Message: func(m *aais.Message) error {
				if m.Type != aais.TypeSnapshot && m.Sequence == 1 {
					<-release
				}
				return f.message(m)
			},
			Idle: func(bool) error { once.Do(func() { close(ready) }); return nil },
		})
	}()
	<-ready
	// Another follower keeps the shared reader moving meanwhile.
	other := &follower{}
	go func() { _ = a.Follow(ctx, 0, false, time.Millisecond, aais.Follower{Message: other.message}) }()
	create(t, a, c, 1, events)
	for other.last() < events {
		time.Sleep(time.Millisecond)
	}
	close(release)
	deadline := time.Now().Add(30 * time.Second)
	for f.last() < events {
		if time.Now().After(deadline) {
			t.Fatalf("follower stuck at %d", f.last())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow: %v", err)
	}
	if len(f.seqs) != events {
		t.Fatalf("%d events, want %d", len(f.seqs), events)
	}
}
