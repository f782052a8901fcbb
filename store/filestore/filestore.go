package filestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/jcs"
)

// Defaults of Options and Retention.
const (
	DefaultLockTimeout    = 10 * time.Second
	DefaultMaxBytes       = 64 << 20
	DefaultMaxResolved    = 1000
	DefaultMaxResolvedAge = 30 * 24 * time.Hour
	DefaultMaxEvents      = 10000
	DefaultMaxEventAge    = 30 * 24 * time.Hour
)

// NoLimit disables a Retention limit (any negative value does).
const NoLimit = -1

// Options tunes a Store. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// LockTimeout bounds the wait for the store lock (in this process and
	// across processes); then the operation fails with ErrLockTimeout.
	// Default 10 s.
	LockTimeout time.Duration
	// MaxBytes is the largest state file the store reads or writes.
	// Default 64 MiB.
	MaxBytes int64
	// Retention bounds what is kept of resolved requests and of the
	// event log.
	Retention Retention
	// Now is the clock retention ages and quarantine names are measured
	// with. Default time.Now.
	Now func() time.Time
}

// Retention bounds what compaction keeps. Zero fields take the default;
// a negative value (NoLimit) disables that limit. Pending requests are
// never removed.
type Retention struct {
	// MaxResolved keeps the newest N resolved requests (by their
	// receipt's occurred_at, then sequence, then id). Default 1000.
	MaxResolved int
	// MaxResolvedAge removes resolved requests whose receipt is older.
	// Default 30 days.
	MaxResolvedAge time.Duration
	// MaxEvents keeps the newest N events of the log. Default 10000 (the
	// Python reference library defaults to 1000).
	MaxEvents int
	// MaxEventAge then removes the oldest events older than this,
	// stopping at the first newer one. Default 30 days.
	MaxEventAge time.Duration
}

func (r Retention) withDefaults() Retention {
	if r.MaxResolved == 0 {
		r.MaxResolved = DefaultMaxResolved
	}
	if r.MaxResolvedAge == 0 {
		r.MaxResolvedAge = DefaultMaxResolvedAge
	}
	if r.MaxEvents == 0 {
		r.MaxEvents = DefaultMaxEvents
	}
	if r.MaxEventAge == 0 {
		r.MaxEventAge = DefaultMaxEventAge
	}
	return r
}

// CompactionReport says what a compaction removed.
type CompactionReport struct {
	RemovedResolved  int
	RemovedEvents    int
	RemovedOwners    int
	CompactedThrough uint64
	// Changed is true when the state file was rewritten.
	Changed bool
}

// Store is an aais.Store kept in one JSON state file. It is safe for
// concurrent use, and any number of Stores, in this process or others,
// may be open on the same file.
type Store struct {
	path, dir, base      string
	lockPath, markerPath string
	opts                 Options
	ps                   *pathState
	closed               atomic.Bool
	closeOnce            sync.Once
	parses               atomic.Int64
}

var _ aais.Store = (*Store)(nil)

// Open opens the state file at path, creating it (and its directory, mode
// 0700) when it does not exist. A file found damaged is quarantined: Open
// still succeeds, so that AcknowledgeRecovery can be called, but every
// other operation fails with a *RecoveryRequiredError until then. A file
// in a newer format is refused with ErrUnsupportedVersion.
func Open(path string, o *Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("filestore: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	s := &Store{
		path:       abs,
		dir:        filepath.Dir(abs),
		base:       filepath.Base(abs),
		lockPath:   abs + ".lock",
		markerPath: abs + ".recovery-required",
	}
	if o != nil {
		s.opts = *o
	}
	switch {
	case s.opts.LockTimeout < 0:
		return nil, errors.New("filestore: negative LockTimeout")
	case s.opts.MaxBytes < 0:
		return nil, errors.New("filestore: negative MaxBytes")
	}
	if s.opts.LockTimeout == 0 {
		s.opts.LockTimeout = DefaultLockTimeout
	}
	if s.opts.MaxBytes == 0 {
		s.opts.MaxBytes = DefaultMaxBytes
	}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	s.opts.Retention = s.opts.Retention.withDefaults()
	s.ps = acquirePathState(abs)
	err = s.write(context.Background(), func(*document) (bool, error) { return false, nil })
	var rr *RecoveryRequiredError
	if err != nil && !errors.As(err, &rr) {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the Store. Operations on a closed Store fail with
// ErrClosed; other Stores on the same file are not affected.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		releasePathState(s.path, s.ps)
	})
	return nil
}

// Path returns the absolute path of the state file.
func (s *Store) Path() string { return s.path }

// ID returns the store's identity, the StoreID of every EventPage.
func (s *Store) ID(ctx context.Context) (string, error) {
	var id string
	err := s.read(ctx, func(d *document) error { id = d.storeID; return nil })
	return id, err
}

// Reset forgets every request, resolution, event and rule and takes a new
// identity, with sequences starting again at 1. Presenters notice through
// EventPage.Gap and StoreID. It is meant for tests and operators; every
// Store open on the file sees the reset.
func (s *Store) Reset(ctx context.Context) error {
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer t.end()
	if _, err := t.load(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.save(newDocument(newID(), 0))
}

// RecoveryStatus reports the recovery condition of the state file without
// taking the lock: nil when the store is usable.
func (s *Store) RecoveryStatus() (*RecoveryRequiredError, error) {
	return s.recoveryMarker()
}

// AcknowledgeRecovery ends a recovery condition once an operator has dealt
// with the quarantined file. Without a condition it does nothing. If a
// state file exists again (the operator restored one), it is checked and,
// when valid, used; when damaged it is quarantined in turn. Otherwise a
// new empty state is written with a new store id and its sequence, and
// compacted_through, set to *startSequence, or to the condition's
// SequenceHint when startSequence is nil: clients see a gap rather than
// sequence numbers used again.
func (s *Store) AcknowledgeRecovery(ctx context.Context, startSequence *uint64) error {
	if startSequence != nil && *startSequence > aais.MaxSequence {
		return fmt.Errorf("filestore: start sequence %d exceeds %d", *startSequence, uint64(aais.MaxSequence))
	}
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer t.end()
	m, err := s.recoveryMarker()
	if err != nil {
		return fmt.Errorf("filestore: recovery marker: %w", err)
	}
	if m == nil {
		return nil
	}
	if _, err := os.Lstat(s.path); err == nil {
		if _, err := t.loadFile(); err != nil {
			return err
		}
		if err := s.clearMarker(); err != nil {
			return fmt.Errorf("filestore: clearing the recovery marker: %w", err)
		}
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filestore: %w", err)
	}
	seq := m.SequenceHint
	if startSequence != nil {
		seq = *startSequence
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.save(newDocument(newID(), seq)); err != nil {
		return err
	}
	if err := s.clearMarker(); err != nil {
		return fmt.Errorf("filestore: clearing the recovery marker: %w", err)
	}
	return nil
}

// Compact applies the retention limits now and rewrites the file if that
// removed anything. Every write compacts too.
func (s *Store) Compact(ctx context.Context) (CompactionReport, error) {
	t, err := s.begin(ctx)
	if err != nil {
		return CompactionReport{}, err
	}
	defer t.end()
	d, err := t.load()
	if err != nil {
		return CompactionReport{}, err
	}
	if d == nil {
		return CompactionReport{}, nil
	}
	c := d.clone()
	rep := c.compact(s.opts.Now(), s.opts.Retention)
	if !rep.Changed {
		return rep, nil
	}
	if err := ctx.Err(); err != nil {
		return CompactionReport{}, err
	}
	if err := t.save(c); err != nil {
		return CompactionReport{}, err
	}
	return rep, nil
}

// read runs fn on the current document under the lock. fn must not
// modify it.
func (s *Store) read(ctx context.Context, fn func(*document) error) error {
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer t.end()
	d, err := t.load()
	if err != nil {
		return err
	}
	if d == nil {
		// The file disappeared: start a new store, so that its
		// identity is stable from now on.
		d = newDocument(newID(), 0)
		if err := t.save(d); err != nil {
			return err
		}
	}
	return fn(d)
}

// write runs fn on a copy of the current document under the lock and,
// when fn reports a change, compacts it and saves it, unless ctx is done.
func (s *Store) write(ctx context.Context, fn func(*document) (bool, error)) error {
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer t.end()
	d, err := t.load()
	if err != nil {
		return err
	}
	fresh := d == nil
	if fresh {
		d = newDocument(newID(), 0)
	}
	c := d.clone()
	changed, err := fn(c)
	if err != nil {
		return err
	}
	if !changed && !fresh {
		return nil
	}
	c.compact(s.opts.Now(), s.opts.Retention)
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.save(c)
}

func newID() string {
	var b [16]byte
	// crypto/rand.Read never returns an error since Go 1.24.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ---- aais.Store ----

// CreateRequestIfAbsent implements aais.Store.
func (s *Store) CreateRequestIfAbsent(ctx context.Context, rec aais.RequestRecord) (aais.RequestRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return aais.RequestRecord{}, false, err
	}
	if err := aais.CheckRequestRecord(rec); err != nil {
		return aais.RequestRecord{}, false, err
	}
	id := rec.Event.Request.ID
	var owner json.RawMessage
	if rec.Owner != nil {
		if rec.Owner.StartTime < 0 {
			return aais.RequestRecord{}, false, fmt.Errorf("%w: owner with a negative start time", aais.ErrInvalid)
		}
		var err error
		if owner, err = marshalOwner(rec.Owner); err != nil {
			return aais.RequestRecord{}, false, err
		}
	}
	var (
		out     aais.RequestRecord
		created bool
	)
	err := s.write(ctx, func(d *document) (bool, error) {
		if d.taken(id) {
			st, fp, err := d.requestOf(id)
			if err != nil {
				if errors.Is(err, aais.ErrUnknownRequest) {
					return false, fmt.Errorf("%w: %s (its record was compacted)", aais.ErrConflict, id)
				}
				return false, err
			}
			if fp != rec.Fingerprint {
				return false, fmt.Errorf("%w: %s", aais.ErrConflict, id)
			}
			out = st
			return false, nil
		}
		var rule *aais.Rule
		if rec.Resolution != nil {
			var err error
			if rule, err = d.checkRules(rec.Resolution); err != nil {
				return false, err
			}
		}
		seq, err := d.next()
		if err != nil {
			return false, err
		}
		raw, m, err := withSequence(rec.Event, seq)
		if err != nil {
			return false, err
		}
		env := newEnvelope(raw, m, id)
		d.fps[id] = rec.Fingerprint
		if owner != nil {
			d.owners[id] = owner
		}
		d.events = append(d.events, env)
		if rec.Resolution == nil {
			d.pending[id] = env
		} else {
			d.resolvedReqs[id] = env
			if _, err := d.recordResolution(id, rec.Resolution, rule); err != nil {
				return false, err
			}
		}
		out = aais.RequestRecord{Event: m, Fingerprint: rec.Fingerprint, Owner: cloneOwner(rec.Owner)}
		created = true
		return true, nil
	})
	if err != nil {
		return aais.RequestRecord{}, false, err
	}
	// Parse again, so the caller's record shares nothing with what was
	// written.
	m, err := reparse(out.Event)
	if err != nil {
		return aais.RequestRecord{}, false, err
	}
	out.Event = m
	return out, created, nil
}

// RequestState implements aais.Store.
func (s *Store) RequestState(ctx context.Context, id string) (aais.RequestState, error) {
	if err := ctx.Err(); err != nil {
		return aais.RequestState{}, err
	}
	var st aais.RequestState
	err := s.read(ctx, func(d *document) error {
		req, _, err := d.requestOf(id)
		if err != nil {
			return err
		}
		st.Request = req
		if _, ok := d.resolutions[id]; ok {
			res, err := d.resolutionOf(id)
			if err != nil {
				return err
			}
			st.Resolution = &res
		}
		return nil
	})
	return st, err
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
	var (
		out      aais.ResolutionRecord
		resolved bool
	)
	err := s.write(ctx, func(d *document) (bool, error) {
		if _, ok := d.resolutions[id]; ok {
			var err error
			out, err = d.resolutionOf(id)
			return false, err
		}
		if _, ok := d.pending[id]; !ok {
			return false, fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
		}
		rule, err := d.checkRules(&rec)
		if err != nil {
			return false, err
		}
		m, err := d.recordResolution(id, &rec, rule)
		if err != nil {
			return false, err
		}
		d.resolvedReqs[id] = d.pending[id]
		delete(d.pending, id)
		out = aais.ResolutionRecord{Event: m, DecisionFingerprint: rec.DecisionFingerprint, ByRule: rec.ByRule}
		resolved = true
		return true, nil
	})
	if err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	m, err := reparse(out.Event)
	if err != nil {
		return aais.ResolutionRecord{}, false, err
	}
	out.Event = m
	return out, resolved, nil
}

// Pending implements aais.Store.
func (s *Store) Pending(ctx context.Context) ([]aais.RequestRecord, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	var (
		out  []aais.RequestRecord
		asOf uint64
	)
	err := s.read(ctx, func(d *document) error {
		ids := make([]string, 0, len(d.pending))
		for id := range d.pending {
			if _, resolved := d.resolutions[id]; !resolved {
				ids = append(ids, id)
			}
		}
		sort.Slice(ids, func(i, j int) bool {
			a, b := d.pending[ids[i]], d.pending[ids[j]]
			if a.seq != b.seq {
				return a.seq < b.seq
			}
			return ids[i] < ids[j]
		})
		out = make([]aais.RequestRecord, 0, len(ids))
		for _, id := range ids {
			r, _, err := d.requestOf(id)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		asOf = d.seq
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, asOf, nil
}

// EventsAfter implements aais.Store. The page is cut at limit events
// (limit <= 0: all). Gap is reported for a sequence below CompactedThrough
// or beyond Latest; the events the store still holds after it are returned
// all the same.
func (s *Store) EventsAfter(ctx context.Context, after uint64, limit int) (aais.EventPage, error) {
	if err := ctx.Err(); err != nil {
		return aais.EventPage{}, err
	}
	var page aais.EventPage
	var raws []json.RawMessage
	err := s.read(ctx, func(d *document) error {
		page = aais.EventPage{
			Latest:           d.seq,
			CompactedThrough: d.compacted,
			StoreID:          d.storeID,
			Gap:              after < d.compacted || after > d.seq,
		}
		i := sort.Search(len(d.events), func(i int) bool { return d.events[i].seq > after })
		for _, e := range d.events[i:] {
			if limit > 0 && len(raws) == limit {
				break
			}
			raws = append(raws, e.raw)
		}
		return nil
	})
	if err != nil {
		return aais.EventPage{}, err
	}
	// Raw values are never modified, so they are parsed outside the lock.
	for _, b := range raws {
		m, err := aais.Parse(b)
		if err != nil {
			return aais.EventPage{}, fmt.Errorf("filestore: stored event: %w", err)
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
	var out aais.RuleSet
	err := s.read(ctx, func(d *document) error {
		for _, r := range d.rules {
			out = append(out, r.Clone())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out.Sorted(), nil
}

// RevokeRule implements aais.Store.
func (s *Store) RevokeRule(ctx context.Context, id string, at time.Time, by aais.Actor) (*aais.Rule, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	var (
		out     *aais.Rule
		revoked bool
	)
	err := s.write(ctx, func(d *document) (bool, error) {
		i := d.ruleIndex(id)
		if i < 0 {
			return false, fmt.Errorf("%w: %q", aais.ErrUnknownRule, id)
		}
		if d.rules[i].Revoked() {
			out = d.rules[i].Clone()
			return false, nil
		}
		r, err := d.rules[i].Revoke(at, by)
		if err != nil {
			return false, err
		}
		d.rules[i] = r
		out, revoked = r.Clone(), true
		return true, nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, revoked, nil
}

// ---- document operations ----

// taken reports whether a request id was ever used in the records the
// store still holds.
func (d *document) taken(id string) bool {
	_, p := d.pending[id]
	_, r := d.resolutions[id]
	return p || r
}

// next hands out the next sequence.
func (d *document) next() (uint64, error) {
	if d.seq >= aais.MaxSequence {
		return 0, aais.ErrSequenceExhausted
	}
	d.seq++
	return d.seq, nil
}

// withSequence returns m's JSON with the given sequence, and the message.
func withSequence(m *aais.Message, seq uint64) ([]byte, *aais.Message, error) {
	c := *m
	c.Sequence = seq
	b, err := aais.Marshal(&c)
	if err != nil {
		return nil, nil, err
	}
	return b, &c, nil
}

func reparse(m *aais.Message) (*aais.Message, error) {
	b, err := aais.Marshal(m)
	if err != nil {
		return nil, err
	}
	return aais.Parse(b)
}

func (d *document) ruleIndex(id string) int {
	for i, r := range d.rules {
		if r.ID == id {
			return i
		}
	}
	return -1
}

// checkRules applies the rule conditions of a resolution: the rule that
// approved it must be saved and not revoked, and a rule it creates must
// not exist yet. It returns the rule to save, as it will read back.
func (d *document) checkRules(rec *aais.ResolutionRecord) (*aais.Rule, error) {
	if rec.ByRule != "" {
		i := d.ruleIndex(rec.ByRule)
		if i < 0 {
			return nil, fmt.Errorf("%w: %q", aais.ErrUnknownRule, rec.ByRule)
		}
		if d.rules[i].Revoked() {
			return nil, fmt.Errorf("%w: %q", aais.ErrRuleInactive, rec.ByRule)
		}
	}
	if rec.Rule == nil {
		return nil, nil
	}
	if d.ruleIndex(rec.Rule.ID) >= 0 {
		return nil, fmt.Errorf("%w: rule %q already saved", aais.ErrConflict, rec.Rule.ID)
	}
	b, err := json.Marshal(rec.Rule)
	if err != nil {
		return nil, fmt.Errorf("%w: rule: %w", aais.ErrInvalid, err)
	}
	r := new(aais.Rule)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%w: rule: %w", aais.ErrInvalid, err)
	}
	return r, nil
}

// recordResolution appends the resolution of request id, and saves rule.
func (d *document) recordResolution(id string, rec *aais.ResolutionRecord, rule *aais.Rule) (*aais.Message, error) {
	seq, err := d.next()
	if err != nil {
		return nil, err
	}
	raw, m, err := withSequence(rec.Event, seq)
	if err != nil {
		return nil, err
	}
	env := newEnvelope(raw, m, id)
	d.resolutions[id] = env
	d.events = append(d.events, env)
	if rec.DecisionFingerprint != "" {
		d.decisionFPs[id] = rec.DecisionFingerprint
	}
	if rec.ByRule != "" {
		d.byRule[id] = rec.ByRule
	}
	if rule != nil {
		d.rules = append(d.rules, rule)
	}
	return m, nil
}

// requestEnvelope finds the approval.requested envelope of request id.
func (d *document) requestEnvelope(id string) *envelope {
	if _, resolved := d.resolutions[id]; !resolved {
		return d.pending[id]
	}
	if e, ok := d.resolvedReqs[id]; ok {
		return e
	}
	if e, ok := d.pending[id]; ok {
		return e
	}
	for i := len(d.events) - 1; i >= 0; i-- {
		if e := d.events[i]; e.typ == aais.TypeRequested && e.id == id {
			return e
		}
	}
	return nil
}

// requestOf returns the record of request id and its fingerprint. A
// request written without a fingerprint (by another library) gets the one
// the Authority computes: the JCS digest of its request payload.
func (d *document) requestOf(id string) (aais.RequestRecord, string, error) {
	e := d.requestEnvelope(id)
	if e == nil {
		return aais.RequestRecord{}, "", fmt.Errorf("%w: %s", aais.ErrUnknownRequest, id)
	}
	m, err := aais.Parse(e.raw)
	if err != nil {
		return aais.RequestRecord{}, "", fmt.Errorf("filestore: stored request %s: %w", id, err)
	}
	if m.Type != aais.TypeRequested || m.Request == nil || m.Request.ID != id {
		return aais.RequestRecord{}, "", fmt.Errorf("filestore: stored request %s is not its approval.requested event", id)
	}
	fp := d.fps[id]
	if fp == "" {
		b, err := m.Request.MarshalJSON()
		if err != nil {
			return aais.RequestRecord{}, "", err
		}
		if fp, err = jcs.Digest(b); err != nil {
			return aais.RequestRecord{}, "", err
		}
	}
	rec := aais.RequestRecord{Event: m, Fingerprint: fp}
	if raw, ok := d.owners[id]; ok {
		if rec.Owner, err = parseOwner(raw); err != nil {
			return aais.RequestRecord{}, "", fmt.Errorf("filestore: owner of %s: %w", id, err)
		}
	}
	return rec, fp, nil
}

// resolutionOf returns the resolution record of request id, which must be
// resolved.
func (d *document) resolutionOf(id string) (aais.ResolutionRecord, error) {
	m, err := aais.Parse(d.resolutions[id].raw)
	if err != nil {
		return aais.ResolutionRecord{}, fmt.Errorf("filestore: stored resolution of %s: %w", id, err)
	}
	if m.Type != aais.TypeResolved || m.Resolution == nil || m.Resolution.RequestID != id {
		return aais.ResolutionRecord{}, fmt.Errorf("filestore: stored resolution of %s is not its approval.resolved event", id)
	}
	fp, ok := d.decisionFPs[id]
	if !ok {
		fp = d.decisionFingerprintFromRecord(id, m)
	}
	return aais.ResolutionRecord{Event: m, DecisionFingerprint: fp, ByRule: d.byRule[id]}, nil
}

// decisionFingerprintFromRecord computes the fingerprint of a decision
// recorded by another library in "decisions", when it is the one the
// receipt names; "" otherwise (replays of it then get a conflict).
func (d *document) decisionFingerprintFromRecord(id string, receipt *aais.Message) string {
	raw, ok := d.decisions[id]
	if !ok || receipt.Resolution.DecisionID == "" {
		return ""
	}
	m, err := aais.Parse(raw)
	if err != nil || m.Type != aais.TypeDecided || m.Decision == nil || m.Decision.ID != receipt.Resolution.DecisionID {
		return ""
	}
	b, err := m.Decision.MarshalJSON()
	if err != nil {
		return ""
	}
	fp, err := jcs.Digest(b)
	if err != nil {
		return ""
	}
	return fp
}

func cloneOwner(p *aais.ProcessIdentity) *aais.ProcessIdentity {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
