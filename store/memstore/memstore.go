// Package memstore is an in-memory aais.Store: requests, resolutions and
// the ordered event log kept in maps and slices behind one mutex. It is for
// tests, demos and single-process runtimes that accept losing pending
// approvals on restart; nothing survives the process.
//
// Every message is kept as the JSON aais.MarshalCopy wrote, and a pending
// request also as the validated copy MarshalCopy returned, which nothing
// ever changes. Reads hand out a deep copy of that (aais.Message.Clone)
// or parse the JSON, so callers always get private, validated copies and
// a stored message can never be changed through a pointer. Keeping bytes
// for everything that is no longer pending keeps the heap the garbage
// collector scans small.
package memstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

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
	rules    map[string][]byte // rule JSON by id
}

// entry is one request. Nothing in it changes once stored but pending,
// which is dropped when the request is resolved.
type entry struct {
	request []byte
	// pending is the request's validated copy while it is pending, handed
	// out only as clones; nil once resolved (request is parsed then).
	pending    *aais.Message
	requestFP  string
	owner      *aais.ProcessIdentity
	sequence   uint64 // of the approval.requested event
	resolution []byte // nil while pending
	decisionFP string
	// votes are a quorum request's votes, in order.
	votes []vote
}

// vote is a stored vote: its JSON, fingerprint and activity event (nil for
// the resolving vote).
type vote struct {
	json, event []byte
	fp          string
}

var _ aais.VoteStore = (*Store)(nil)

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
	s.rules = map[string][]byte{}
}

// append builds an event under the next sequence. The caller holds mu.
func (s *Store) append(m *aais.Message) (event, error) {
	if s.latest >= aais.MaxSequence {
		return event{}, aais.ErrSequenceExhausted
	}
	return s.appendAt(m, s.latest+1)
}

// event is a message built for the log: its JSON and a validated copy that
// shares nothing with the message given.
type event struct {
	json []byte
	msg  *aais.Message
	seq  uint64
}

// appendAt builds m's event under sequence seq.
func (s *Store) appendAt(m *aais.Message, seq uint64) (event, error) {
	c := *m
	c.Sequence = seq
	b, ev, err := aais.MarshalCopy(&c)
	if err != nil {
		return event{}, err
	}
	return event{json: b, msg: ev, seq: seq}, nil
}

// commit makes an event built by append part of the log. The caller holds
// mu and has already stored the state the event announces.
func (s *Store) commit(ev event) {
	s.events = append(s.events, ev.json)
	s.latest = ev.seq
}

// CreateRequestIfAbsent implements aais.Store.
func (s *Store) CreateRequestIfAbsent(ctx context.Context, rec aais.RequestRecord) (aais.RequestRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return aais.RequestRecord{}, false, err
	}
	if err := aais.CheckRequestRecord(rec); err != nil {
		return aais.RequestRecord{}, false, err
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
	ev, err := s.append(rec.Event)
	if err != nil {
		return aais.RequestRecord{}, false, err
	}
	e := &entry{request: ev.json, pending: ev.msg, requestFP: rec.Fingerprint, sequence: ev.seq, owner: cloneOwner(rec.Owner)}
	var resolution func() *aais.Message
	if rec.Resolution != nil {
		// Checked and built before anything changes, so a refusal
		// writes nothing.
		if resolution, err = s.resolve(e, *rec.Resolution, ev.seq); err != nil {
			return aais.RequestRecord{}, false, err
		}
	}
	s.requests[id] = e
	s.commit(ev)
	out := aais.RequestRecord{Event: ev.msg, Fingerprint: e.requestFP, Owner: cloneOwner(e.owner)}
	if resolution != nil {
		// The entry no longer keeps the copy: it can be handed out.
		resolution()
	} else {
		out.Event = ev.msg.Clone()
	}
	return out, true, nil
}

// resolve checks rec against the rules it names or creates and builds its
// event with the sequence after last; the returned func records it and
// returns the event's validated copy, which the store does not keep. The
// caller holds mu.
func (s *Store) resolve(e *entry, rec aais.ResolutionRecord, last uint64) (func() *aais.Message, error) {
	if err := s.checkRules(rec); err != nil {
		return nil, err
	}
	var rule []byte
	if rec.Rule != nil {
		b, err := rec.Rule.MarshalJSON()
		if err != nil {
			return nil, err
		}
		rule = b
	}
	if last >= aais.MaxSequence {
		return nil, aais.ErrSequenceExhausted
	}
	ev, err := s.appendAt(rec.Event, last+1)
	if err != nil {
		return nil, err
	}
	return func() *aais.Message {
		e.resolution, e.decisionFP = ev.json, rec.DecisionFingerprint
		e.pending = nil
		if rule != nil {
			s.rules[rec.Rule.ID] = rule
		}
		s.commit(ev)
		return ev.msg
	}, nil
}

// checkRules refuses a resolution whose ByRule rule is missing or revoked,
// or whose new Rule's id is taken. The caller holds mu.
func (s *Store) checkRules(rec aais.ResolutionRecord) error {
	if rec.ByRule != "" {
		b, ok := s.rules[rec.ByRule]
		if !ok {
			return fmt.Errorf("%w: %s", aais.ErrUnknownRule, rec.ByRule)
		}
		r, err := aais.StoredRule(b)
		if err != nil {
			return err
		}
		if r.Revoked() {
			return fmt.Errorf("%w: %s", aais.ErrRuleInactive, rec.ByRule)
		}
	}
	if rec.Rule != nil {
		if _, taken := s.rules[rec.Rule.ID]; taken {
			return fmt.Errorf("%w: rule id %s", aais.ErrConflict, rec.Rule.ID)
		}
	}
	return nil
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
	if err := aais.CheckResolutionRecord(rec); err != nil {
		return aais.ResolutionRecord{}, false, err
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
	record, err := s.resolve(e, rec, s.latest)
	if err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	return aais.ResolutionRecord{Event: record(), DecisionFingerprint: e.decisionFP}, true, nil
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
func (s *Store) EventsAfter(ctx context.Context, after uint64, limit int) (aais.EventPage, error) {
	if err := ctx.Err(); err != nil {
		return aais.EventPage{}, err
	}
	s.mu.Lock()
	page := aais.EventPage{Latest: s.latest, StoreID: s.id, Gap: after > s.latest}
	var raw [][]byte
	if after < s.latest {
		raw = s.events[after:]
		if limit > 0 && len(raw) > limit {
			raw = raw[:limit]
		}
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

// Rules implements aais.Store.
func (s *Store) Rules(ctx context.Context) (aais.RuleSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	raw := make([][]byte, 0, len(s.rules))
	for _, b := range s.rules {
		raw = append(raw, b)
	}
	s.mu.Unlock()
	out := make(aais.RuleSet, 0, len(raw))
	for _, b := range raw {
		r, err := aais.StoredRule(b)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out.Sorted(), nil
}

// RevokeRule implements aais.Store.
func (s *Store) RevokeRule(ctx context.Context, id string, at time.Time, by aais.Actor) (*aais.Rule, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.rules[id]
	if !ok {
		return nil, false, fmt.Errorf("%w: %s", aais.ErrUnknownRule, id)
	}
	c, nb, err := aais.RevokeStoredRule(b, at, by)
	if err != nil || nb == nil {
		return c, false, err
	}
	s.rules[id] = nb
	return c, true, nil
}

func cloneOwner(o *aais.ProcessIdentity) *aais.ProcessIdentity {
	if o == nil {
		return nil
	}
	c := *o
	return &c
}

// requestRecord and resolutionRecord work on a copy of the entry taken
// under mu, whose messages and bytes are never changed.
func (e *entry) requestRecord() (aais.RequestRecord, error) {
	m := e.pending.Clone()
	if m == nil {
		var err error
		if m, err = aais.Parse(e.request); err != nil {
			return aais.RequestRecord{}, err
		}
	}
	return aais.RequestRecord{Event: m, Fingerprint: e.requestFP, Owner: cloneOwner(e.owner)}, nil
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

// Votes implements aais.VoteStore.
func (s *Store) Votes(ctx context.Context, id string) ([]aais.StoredVote, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	e, ok := s.requests[id]
	var votes []vote
	if ok {
		votes = slices.Clone(e.votes)
	}
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
	}
	out := make([]aais.StoredVote, 0, len(votes))
	for _, v := range votes {
		sv, err := storedVote(v)
		if err != nil {
			return nil, err
		}
		out = append(out, sv)
	}
	return out, nil
}

func storedVote(v vote) (aais.StoredVote, error) { return aais.DecodeStoredVote(v.json, v.fp, v.event) }

// RecordVote implements aais.VoteStore.
func (s *Store) RecordVote(ctx context.Context, rec aais.VoteRecord) (aais.VoteResult, error) {
	if err := ctx.Err(); err != nil {
		return aais.VoteResult{}, err
	}
	if err := aais.CheckVoteRecord(rec); err != nil {
		return aais.VoteResult{}, err
	}
	vj, err := aais.MarshalVote(rec.Vote.Vote)
	if err != nil {
		return aais.VoteResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.requests[rec.RequestID]
	if !ok {
		return aais.VoteResult{}, fmt.Errorf("%w: %s", aais.ErrUnknownRequest, rec.RequestID)
	}
	if e.resolution != nil {
		out, err := e.resolutionRecord()
		return aais.VoteResult{Resolution: &out}, err
	}
	if len(e.votes) != rec.Seen {
		return aais.VoteResult{Changed: true}, nil
	}
	for _, v := range e.votes {
		if old, err := aais.UnmarshalVote(v.json); err == nil && old.Actor.ID == rec.Vote.Vote.Actor.ID {
			return aais.VoteResult{}, fmt.Errorf("%w: %s", aais.ErrAlreadyVoted, old.Actor.ID)
		}
	}
	nv := vote{json: vj, fp: rec.Vote.Fingerprint}
	if rec.Resolution != nil {
		record, err := s.resolve(e, *rec.Resolution, s.latest)
		if err != nil {
			return aais.VoteResult{}, err
		}
		e.votes = append(e.votes, nv)
		return aais.VoteResult{Recorded: true, Event: record()}, nil
	}
	ev, err := s.append(rec.Vote.Event)
	if err != nil {
		return aais.VoteResult{}, err
	}
	nv.event = ev.json
	e.votes = append(e.votes, nv)
	s.commit(ev)
	return aais.VoteResult{Recorded: true, Event: ev.msg}, nil
}
