// Package memstore is an in-memory aais.Store: requests, resolutions and
// the ordered event log kept in maps and slices behind one mutex. It is for
// tests, demos and single-process runtimes that accept losing pending
// approvals on restart; nothing survives the process.
//
// Every message is kept as the JSON aais.Marshal produced and parsed again
// on every read, so callers always get private, validated copies and a
// stored message can never be changed through a pointer.
package memstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"

	"github.com/custos-runtime/custos/aais"
)

// Store is an in-memory aais.Store. The zero value is not usable; call New.
// It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	id       string
	latest   uint64
	events   [][]byte // events[i] has sequence i+1
	requests map[string]*entry
}

type entry struct {
	request    []byte
	requestFP  string
	sequence   uint64 // of the approval.requested event
	resolution []byte // nil while pending
	decisionFP string
}

var _ aais.Store = (*Store)(nil)

// New returns an empty store with a fresh random identity.
func New() *Store {
	s := &Store{}
	s.reset()
	return s
}

// ID returns the store's identity, the StoreID of every EventPage.
func (s *Store) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Reset forgets everything and takes a new identity, as a backend does when
// it recovers from lost state. Presenters notice through EventPage.Gap and
// StoreID.
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reset()
}

func (s *Store) reset() {
	var b [16]byte
	// crypto/rand.Read never returns an error since Go 1.24; it aborts
	// the program instead if the system source fails.
	_, _ = rand.Read(b[:])
	s.id = hex.EncodeToString(b[:])
	s.latest = 0
	s.events = nil
	s.requests = map[string]*entry{}
}

// append records an event under the next sequence. The caller holds mu.
func (s *Store) append(m *aais.Message) ([]byte, uint64, error) {
	if s.latest >= aais.MaxSequence {
		return nil, 0, aais.ErrSequenceExhausted
	}
	c := *m
	c.Sequence = s.latest + 1
	b, err := aais.Marshal(&c)
	if err != nil {
		return nil, 0, err
	}
	return b, c.Sequence, nil
}

// commit makes an event built by append part of the log. The caller holds
// mu and has already stored the state the event announces.
func (s *Store) commit(b []byte, seq uint64) {
	s.events = append(s.events, b)
	s.latest = seq
}

// CreateRequestIfAbsent implements aais.Store.
func (s *Store) CreateRequestIfAbsent(ctx context.Context, rec aais.RequestRecord) (aais.RequestRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return aais.RequestRecord{}, false, err
	}
	if rec.Event == nil || rec.Event.Type != aais.TypeRequested || rec.Event.Request == nil {
		return aais.RequestRecord{}, false, fmt.Errorf("%w: not an approval.requested event", aais.ErrInvalid)
	}
	if rec.Fingerprint == "" {
		return aais.RequestRecord{}, false, fmt.Errorf("%w: request record without a fingerprint", aais.ErrInvalid)
	}
	id := rec.Event.Request.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.requests[id]; ok {
		if e.requestFP != rec.Fingerprint {
			return aais.RequestRecord{}, false, fmt.Errorf("%w: %s", aais.ErrConflict, id)
		}
		out, err := e.requestRecord()
		return out, false, err
	}
	b, seq, err := s.append(rec.Event)
	if err != nil {
		return aais.RequestRecord{}, false, err
	}
	e := &entry{request: b, requestFP: rec.Fingerprint, sequence: seq}
	s.requests[id] = e
	s.commit(b, seq)
	out, err := e.requestRecord()
	return out, true, err
}

// RequestState implements aais.Store.
func (s *Store) RequestState(ctx context.Context, id string) (aais.RequestState, error) {
	if err := ctx.Err(); err != nil {
		return aais.RequestState{}, err
	}
	s.mu.Lock()
	e, ok := s.requests[id]
	var c entry
	if ok {
		c = *e
	}
	s.mu.Unlock()
	if !ok {
		return aais.RequestState{}, fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
	}
	return c.state()
}

// ResolveIfPending implements aais.Store.
func (s *Store) ResolveIfPending(ctx context.Context, rec aais.ResolutionRecord) (aais.ResolutionRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	if rec.Event == nil || rec.Event.Type != aais.TypeResolved || rec.Event.Resolution == nil {
		return aais.ResolutionRecord{}, false, fmt.Errorf("%w: not an approval.resolved event", aais.ErrInvalid)
	}
	if rec.Event.Resolution.Outcome == aais.OutcomeConflict {
		return aais.ResolutionRecord{}, false, fmt.Errorf("%w: a conflict receipt never resolves a request", aais.ErrInvalid)
	}
	id := rec.Event.Resolution.RequestID
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.requests[id]
	if !ok {
		return aais.ResolutionRecord{}, false, fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
	}
	if e.resolution != nil {
		out, err := e.resolutionRecord()
		return out, false, err
	}
	b, seq, err := s.append(rec.Event)
	if err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	e.resolution, e.decisionFP = b, rec.DecisionFingerprint
	s.commit(b, seq)
	out, err := e.resolutionRecord()
	return out, true, err
}

// Pending implements aais.Store.
func (s *Store) Pending(ctx context.Context) ([]aais.RequestRecord, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	var list []entry
	for _, e := range s.requests {
		if e.resolution == nil {
			list = append(list, *e)
		}
	}
	asOf := s.latest
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].sequence < list[j].sequence })
	out := make([]aais.RequestRecord, 0, len(list))
	for i := range list {
		r, err := list[i].requestRecord()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	return out, asOf, nil
}

// EventsAfter implements aais.Store. The store never compacts, so a gap is
// only reported for a sequence beyond the latest (the store was reset).
func (s *Store) EventsAfter(ctx context.Context, after uint64) (aais.EventPage, error) {
	if err := ctx.Err(); err != nil {
		return aais.EventPage{}, err
	}
	s.mu.Lock()
	page := aais.EventPage{Latest: s.latest, StoreID: s.id, Gap: after > s.latest}
	var raw [][]byte
	if after < s.latest {
		raw = s.events[after:]
	}
	s.mu.Unlock()
	// The stored byte slices are never modified, so they can be parsed
	// outside the lock.
	for _, b := range raw {
		m, err := aais.Parse(b)
		if err != nil {
			return aais.EventPage{}, err
		}
		page.Events = append(page.Events, m)
	}
	return page, nil
}

func (e *entry) requestRecord() (aais.RequestRecord, error) {
	m, err := aais.Parse(e.request)
	if err != nil {
		return aais.RequestRecord{}, err
	}
	return aais.RequestRecord{Event: m, Fingerprint: e.requestFP}, nil
}

func (e *entry) resolutionRecord() (aais.ResolutionRecord, error) {
	m, err := aais.Parse(e.resolution)
	if err != nil {
		return aais.ResolutionRecord{}, err
	}
	return aais.ResolutionRecord{Event: m, DecisionFingerprint: e.decisionFP}, nil
}

func (e *entry) state() (aais.RequestState, error) {
	req, err := e.requestRecord()
	if err != nil {
		return aais.RequestState{}, err
	}
	st := aais.RequestState{Request: req}
	if e.resolution != nil {
		res, err := e.resolutionRecord()
		if err != nil {
			return aais.RequestState{}, err
		}
		st.Resolution = &res
	}
	return st, nil
}
