package state

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/jcs"
)

// SnapshotClockSkew is how far in the future a SNAPSHOT as_of may lie
// (ARSIA-Core §8.3).
const SnapshotClockSkew = 300 * time.Second

// Store executes the eight state operations for an authenticated actor
// (the request's from). Capability checks (Authorize) happen before; the
// store enforces ownership, grants and the protocol's state rules. now is
// the operation's time: stores never read the clock.
//
// Failures are *arsia.Error values with the wire code to answer with
// (forbidden, not_found, conflict with details {current_version,
// expected_version}, invalid_request, payload_too_large...), wrapping this
// package's sentinels.
type Store interface {
	// Get returns the live entry under args.Key, or nil when it does not
	// exist, is deleted, purged or expired. An actor that may not read
	// the key gets forbidden, whether or not it exists.
	Get(ctx context.Context, actor string, args GetArgs, now time.Time) (*Entry, error)
	// Set creates or updates an entry under the compliance object of the
	// request (nil when it has none).
	Set(ctx context.Context, actor string, args SetArgs, comp map[string]any, now time.Time) (*Entry, error)
	// Delete marks the live entry deleted (owner only); its history stays
	// for SNAPSHOT.
	Delete(ctx context.Context, actor string, args DeleteArgs, now time.Time) (*DeleteResult, error)
	// Query lists the live entries the actor may read that match args,
	// oldest first.
	Query(ctx context.Context, actor string, args QueryArgs, now time.Time) (*QueryResult, error)
	// Snapshot lists the entries the actor may read as they were at
	// args.AsOf, deleted ones included.
	Snapshot(ctx context.Context, actor string, args SnapshotArgs, now time.Time) (*SnapshotResult, error)
	// Purge erases the entry's value and all its history (owner only) and
	// revokes the grants covering it. It is idempotent.
	Purge(ctx context.Context, actor string, args PurgeArgs, now time.Time) (*PurgeResult, error)
	// Grant lets another agent read (or read and update) the actor's
	// entries matching a key pattern.
	Grant(ctx context.Context, actor string, args GrantArgs, now time.Time) (*Grant, error)
	// Revoke ends a grant (grantor only). It is idempotent.
	Revoke(ctx context.Context, actor string, args RevokeArgs, now time.Time) (*RevokeResult, error)
}

// DeleteResult is the outcome of DELETE.
type DeleteResult struct {
	Key string
	// Version is the entry's version at deletion, for the audit record.
	Version int
}

// Map returns the DELETE payload.result {deleted: true, key}.
func (r *DeleteResult) Map() map[string]any { return map[string]any{"deleted": true, "key": r.Key} }

// QueryResult is the outcome of QUERY.
type QueryResult struct {
	Entries []*Entry
	// Total counts the matching entries before pagination.
	Total, Limit, Offset int
}

// Map returns the QUERY payload.result.
func (r *QueryResult) Map() map[string]any {
	return map[string]any{"entries": entryMaps(r.Entries), "total": r.Total, "limit": r.Limit, "offset": r.Offset}
}

// SnapshotResult is the outcome of SNAPSHOT.
type SnapshotResult struct {
	AsOf    string
	Entries []*Entry
	// Timestamp is when the snapshot was taken.
	Timestamp string
	// Hash is jcs.DigestValue of the entries array ("sha256:<hex>"), for
	// integrity checks.
	Hash string
}

// Map returns the SNAPSHOT payload.result.
func (r *SnapshotResult) Map() map[string]any {
	return map[string]any{"as_of": r.AsOf, "entries": entryMaps(r.Entries), "timestamp": r.Timestamp, "hash": r.Hash}
}

// PurgeResult is the outcome of PURGE.
type PurgeResult struct {
	Key          string
	PurgedAt     string
	OwnerAgentID string
	// PIIClassification is the purged entry's, for the audit record.
	PIIClassification PII
	// AlreadyPurged is true when the key had been purged before: the
	// result repeats the first purge and no second audit event is due.
	AlreadyPurged bool
	// RevokedGrants are the grants the purge revoked; each needs a
	// state_revoke audit event.
	RevokedGrants []string
}

// Map returns the PURGE payload.result.
func (r *PurgeResult) Map() map[string]any {
	return map[string]any{"purged": true, "key": r.Key, "purged_at": r.PurgedAt}
}

// Grant is an access grant (ARSIA-State §3.3).
type Grant struct {
	ID             string
	GrantorAgentID string
	KeyPattern     KeyPattern
	GranteeAgentID string
	AccessLevel    AccessLevel
	// ValidUntil is the expiry; zero means none.
	ValidUntil time.Time
	CreatedAt  time.Time
	// RevokedAt is zero while the grant has not been revoked.
	RevokedAt time.Time
}

// Active reports whether the grant is in force at now.
func (g *Grant) Active(now time.Time) bool {
	return g.RevokedAt.IsZero() && (g.ValidUntil.IsZero() || now.Before(g.ValidUntil))
}

// Covers reports whether g, at now, lets actor access key at level.
func (g *Grant) Covers(actor string, key Key, level AccessLevel, now time.Time) bool {
	return g.Active(now) && g.GranteeAgentID == actor && g.GrantorAgentID == key.Owner &&
		g.KeyPattern.Matches(key.String()) && (level == AccessRead || g.AccessLevel == AccessReadWrite)
}

// Map returns the GRANT payload.result.
func (g *Grant) Map() map[string]any {
	var until any
	if !g.ValidUntil.IsZero() {
		until = arsia.FormatTimestamp(g.ValidUntil)
	}
	return map[string]any{
		"grant_id": g.ID, "key_pattern": g.KeyPattern.String(), "grantee_agent_id": g.GranteeAgentID,
		"access_level": string(g.AccessLevel), "valid_until": until, "created_at": arsia.FormatTimestamp(g.CreatedAt),
	}
}

// RevokeResult is the outcome of REVOKE.
type RevokeResult struct {
	GrantID string
	// GranteeAgentID is the revoked grant's grantee ("" for an unknown
	// grant), for the audit record.
	GranteeAgentID string
	// AlreadyRevoked is true for an unknown or already revoked grant: no
	// audit event is due.
	AlreadyRevoked bool
}

// Map returns the REVOKE payload.result.
func (r *RevokeResult) Map() map[string]any {
	return map[string]any{"revoked": true, "grant_id": r.GrantID}
}

func entryMaps(es []*Entry) []any {
	out := make([]any, len(es))
	for i, e := range es {
		out[i] = e.Map()
	}
	return out
}

// DefaultMaxEntries bounds a MemoryStore's keys unless configured.
const DefaultMaxEntries = 100_000

// MemoryStoreOptions configures NewMemoryStore; zero fields mean defaults.
type MemoryStoreOptions struct {
	// NewID returns grant ids (lower-case UUID v4); default arsia.NewID.
	NewID func() string
	// Zones are the residency zones the store's storage lies in. When
	// set, an entry whose data_residency none of them satisfies is refused
	// (invalid_request, data_residency_violation). Default: no check.
	Zones []string
	// MaxEntries caps the number of keys (purged keys included); default
	// DefaultMaxEntries. A new key beyond it is service_unavailable.
	MaxEntries int
	// Registry holds the compliance profiles; nil means
	// compliance.Default().
	Registry *compliance.Registry
}

// MemoryStore is a Store in process memory with full version history,
// safe for concurrent use: for tests, conformance and single-instance
// deployments. Values are kept in canonical JSON and handed out freshly
// decoded (numbers as json.Number), so callers never share them.
//
// Session entries are treated like agent entries (owner and grantees
// only): the store does not know correlation chains.
type MemoryStore struct {
	mu      sync.RWMutex
	opts    MemoryStoreOptions
	records map[string]*record
	grants  map[string]*Grant
	order   []string // grant ids in creation order
}

var _ Store = (*MemoryStore)(nil)

type record struct {
	key      Key
	versions []version // oldest first
	purged   bool
	purgedAt time.Time
}

type version struct {
	entry Entry  // Value nil
	value []byte // canonical JSON; nil once purged
	at    time.Time
}

// NewMemoryStore returns an empty store. opts may be nil.
func NewMemoryStore(opts *MemoryStoreOptions) *MemoryStore {
	s := &MemoryStore{records: map[string]*record{}, grants: map[string]*Grant{}}
	if opts != nil {
		s.opts = *opts
		s.opts.Zones = slices.Clone(opts.Zones)
	}
	if s.opts.NewID == nil {
		s.opts.NewID = arsia.NewID
	}
	if s.opts.MaxEntries <= 0 {
		s.opts.MaxEntries = DefaultMaxEntries
	}
	return s
}

func now0(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// storeErr converts err for the Store API, keeping nil an untyped nil.
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	return WireError(err)
}

func checkCall(ctx context.Context, actor string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !arsia.ValidAgentID(actor) {
		return fmt.Errorf("%w: actor %s is not a valid agent identifier", ErrInvalidArgs, quote(actor))
	}
	if now.IsZero() {
		return fmt.Errorf("%w: operation time not set", ErrInvalidArgs)
	}
	return nil
}

func forbidden(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrForbidden}, args...)...)
}

// mayAccess reports whether actor may access key at level at now. The
// caller holds s.mu.
func (s *MemoryStore) mayAccess(actor string, key Key, level AccessLevel, now time.Time) bool {
	if actor == key.Owner {
		return key.Scope != ScopeGlobal || level == AccessRead
	}
	if key.Scope == ScopeGlobal {
		return level == AccessRead
	}
	for _, id := range s.order {
		if s.grants[id].Covers(actor, key, level, now) {
			return true
		}
	}
	return false
}

// nextAt is the history time of a new version written at now: never
// before the previous version's, so that the history stays ordered even
// if callers' clocks step back.
func (r *record) nextAt(now time.Time) time.Time {
	if n := len(r.versions); n > 0 && now.Before(r.versions[n-1].at) {
		return r.versions[n-1].at
	}
	return now
}

// live returns the record's current version if it is visible to GET and
// QUERY at now.
func (r *record) live(now time.Time) (*version, bool) {
	if r == nil || r.purged || len(r.versions) == 0 {
		return nil, false
	}
	v := &r.versions[len(r.versions)-1]
	if v.entry.Deleted || (!v.entry.ExpiresAt.IsZero() && !now.Before(v.entry.ExpiresAt)) {
		return nil, false
	}
	return v, true
}

// materialize returns a caller-owned entry of v.
func (v *version) materialize() *Entry {
	e := v.entry.Clone()
	if v.value != nil {
		if val, err := jcs.Decode(v.value); err == nil {
			e.Value = val
		}
	}
	return e
}

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, actor string, args GetArgs, now time.Time) (*Entry, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, storeErr(err)
	}
	if err := args.Validate(); err != nil {
		return nil, storeErr(err)
	}
	k, _ := ParseKey(args.Key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.mayAccess(actor, k, AccessRead, now) {
		return nil, storeErr(forbidden("%s may not read %s", quote(actor), quote(args.Key)))
	}
	if v, ok := s.records[args.Key].live(now); ok {
		return v.materialize(), nil
	}
	return nil, nil
}

// Set implements Store. The owner creates and updates its entries; a
// read_write grantee may update a live entry but never create one. A
// deleted or purged key starts again at version 1. data_residency, when
// absent, is inherited from the request's effective compliance.
func (s *MemoryStore) Set(ctx context.Context, actor string, args SetArgs, comp map[string]any, now time.Time) (*Entry, error) {
	e, err := s.set(ctx, actor, args, comp, now)
	return e, storeErr(err)
}

func (s *MemoryStore) set(ctx context.Context, actor string, args SetArgs, comp map[string]any, now time.Time) (*Entry, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, err
	}
	ectx := EntryContext{Compliance: comp, Registry: s.opts.Registry}
	if err := args.Check(ectx); err != nil {
		return nil, err
	}
	canon, err := CanonicalValue(args.Value)
	if err != nil {
		return nil, err
	}
	k, _ := ParseKey(args.Key)
	now = now0(now)
	var expires time.Time
	if args.ExpiresAt != "" {
		expires, _ = arsia.ParseTimestamp(args.ExpiresAt)
		if !expires.After(now) {
			return nil, fmt.Errorf("%w: expires_at %s is not in the future", ErrInvalidArgs, args.ExpiresAt)
		}
	}
	residency := args.DataResidency
	if residency == "" && k.Scope != ScopeSession {
		eff, err := ectx.effectiveCompliance()
		if err != nil {
			return nil, err
		}
		residency, _ = eff["data_residency"].(string)
		if !validZone(residency) {
			residency = ""
		}
	}
	if residency != "" && len(s.opts.Zones) > 0 &&
		!slices.ContainsFunc(s.opts.Zones, func(z string) bool { return WithinZone(z, residency) }) {
		return nil, wireError(arsia.CodeInvalidRequest,
			fmt.Errorf("%w: this store cannot keep data in %s", ErrResidency, residency),
			map[string]any{"data_residency_violation": true, "required_zone": residency})
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec := s.records[args.Key]
	cur, isLive := rec.live(now)
	if actor != k.Owner && !(isLive && s.mayAccess(actor, k, AccessReadWrite, now)) {
		return nil, forbidden("%s may not write %s", quote(actor), quote(args.Key))
	}
	current := 0
	if isLive {
		current = cur.entry.Version
	}
	if args.ExpectedVersion != 0 && args.ExpectedVersion != current {
		return nil, wireError(arsia.CodeConflict,
			fmt.Errorf("%w: %s is at version %d, not %d", ErrConflict, args.Key, current, args.ExpectedVersion),
			map[string]any{"current_version": current, "expected_version": args.ExpectedVersion})
	}
	if rec == nil && len(s.records) >= s.opts.MaxEntries {
		return nil, fmt.Errorf("%w: %d keys", ErrStoreFull, len(s.records))
	}
	e := Entry{
		Key: args.Key, OwnerAgentID: k.Owner, Scope: k.Scope, CreatedAt: now, UpdatedAt: now, Version: 1,
		ExpiresAt: expires, RetentionDays: args.RetentionDays, DataResidency: residency,
		PIIClassification: args.PIIClassification, PIISpecialCategories: slices.Clone(args.PIISpecialCategories),
	}
	if isLive {
		e.CreatedAt, e.Version = cur.entry.CreatedAt, cur.entry.Version+1
	}
	if k.Scope == ScopeSession && !e.ExpiresAt.IsZero() && e.ExpiresAt.Sub(e.CreatedAt) > SessionMaxLifetime {
		return nil, fmt.Errorf("%w: session entry expires_at exceeds created_at + 24h", ErrInvalidArgs)
	}
	if rec == nil {
		rec = &record{key: k}
		s.records[args.Key] = rec
	}
	rec.purged, rec.purgedAt = false, time.Time{}
	rec.versions = append(rec.versions, version{entry: e, value: canon, at: rec.nextAt(now)})
	return rec.versions[len(rec.versions)-1].materialize(), nil
}

// Delete implements Store. Deleting a key with no live entry is
// not_found.
func (s *MemoryStore) Delete(ctx context.Context, actor string, args DeleteArgs, now time.Time) (*DeleteResult, error) {
	r, err := s.delete(ctx, actor, args, now)
	return r, storeErr(err)
}

func (s *MemoryStore) delete(ctx context.Context, actor string, args DeleteArgs, now time.Time) (*DeleteResult, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, err
	}
	if err := args.Validate(); err != nil {
		return nil, err
	}
	k, _ := ParseKey(args.Key)
	if actor != k.Owner || k.Scope == ScopeGlobal {
		return nil, forbidden("only the owner may delete %s", quote(args.Key))
	}
	now = now0(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.records[args.Key]
	cur, ok := rec.live(now)
	if !ok {
		return nil, fmt.Errorf("%w: no entry %s", ErrNotFound, args.Key)
	}
	v := *cur
	v.entry = *cur.entry.Clone()
	v.entry.Deleted, v.entry.UpdatedAt, v.at = true, now, rec.nextAt(now)
	rec.versions = append(rec.versions, v)
	return &DeleteResult{Key: args.Key, Version: v.entry.Version}, nil
}

// matches applies a QUERY filter to e.
func (f QueryFilter) matches(e *Entry) bool {
	if f.Scope != "" && e.Scope != f.Scope ||
		f.OwnerAgentID != "" && e.OwnerAgentID != f.OwnerAgentID ||
		f.KeyPrefix != "" && !strings.HasPrefix(e.Key, f.KeyPrefix) ||
		f.PIIClassification != "" && e.PIIClassification != f.PIIClassification {
		return false
	}
	if t, err := arsia.ParseTimestamp(f.CreatedAfter); err == nil && !e.CreatedAt.After(t) {
		return false
	}
	if t, err := arsia.ParseTimestamp(f.CreatedBefore); err == nil && !e.CreatedAt.Before(t) {
		return false
	}
	return true
}

func sortEntries(es []*Entry) {
	slices.SortFunc(es, func(a, b *Entry) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}

// Query implements Store. A limit above MaxQueryLimit is clamped.
func (s *MemoryStore) Query(ctx context.Context, actor string, args QueryArgs, now time.Time) (*QueryResult, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, storeErr(err)
	}
	if err := args.Validate(); err != nil {
		return nil, storeErr(err)
	}
	limit, offset := DefaultQueryLimit, 0
	if args.Limit != nil {
		limit = min(*args.Limit, MaxQueryLimit)
	}
	if args.Offset != nil {
		offset = *args.Offset
	}
	var found []*version
	s.mu.RLock()
	for _, rec := range s.records {
		v, ok := rec.live(now)
		if ok && args.QueryFilter.matches(&v.entry) && s.mayAccess(actor, rec.key, AccessRead, now) {
			found = append(found, v)
		}
	}
	entries := make([]*Entry, len(found))
	for i, v := range found {
		entries[i] = v.materialize()
	}
	s.mu.RUnlock()
	sortEntries(entries)
	res := &QueryResult{Total: len(entries), Limit: limit, Offset: offset, Entries: []*Entry{}}
	if offset < len(entries) {
		res.Entries = entries[offset:min(len(entries), offset+limit)]
	}
	return res, nil
}

// Snapshot implements Store. as_of may not lie more than
// SnapshotClockSkew after now, nor before the oldest version the store
// holds (invalid_request with {snapshot_unavailable, oldest_available}).
// Deleted entries come with deleted: true and purged ones with a null
// value.
func (s *MemoryStore) Snapshot(ctx context.Context, actor string, args SnapshotArgs, now time.Time) (*SnapshotResult, error) {
	r, err := s.snapshot(ctx, actor, args, now)
	return r, storeErr(err)
}

func (s *MemoryStore) snapshot(ctx context.Context, actor string, args SnapshotArgs, now time.Time) (*SnapshotResult, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, err
	}
	if err := args.Validate(); err != nil {
		return nil, err
	}
	asOf, _ := arsia.ParseTimestamp(args.AsOf)
	if asOf.After(now.Add(SnapshotClockSkew)) {
		return nil, fmt.Errorf("%w: as_of %s is in the future", ErrInvalidArgs, args.AsOf)
	}
	var filter QueryFilter
	if args.Filter != nil {
		filter = *args.Filter
	}
	var entries []*Entry
	var oldest time.Time
	s.mu.RLock()
	for _, rec := range s.records {
		if len(rec.versions) > 0 && (oldest.IsZero() || rec.versions[0].at.Before(oldest)) {
			oldest = rec.versions[0].at
		}
		i, _ := slices.BinarySearchFunc(rec.versions, asOf, func(v version, t time.Time) int {
			if v.at.After(t) {
				return 1
			}
			return -1
		})
		if i == 0 {
			continue
		}
		v := &rec.versions[i-1]
		if filter.matches(&v.entry) && s.mayAccess(actor, rec.key, AccessRead, now) {
			entries = append(entries, v.materialize())
		}
	}
	s.mu.RUnlock()
	if !oldest.IsZero() && asOf.Before(oldest) {
		return nil, wireError(arsia.CodeInvalidRequest,
			fmt.Errorf("%w: as_of %s predates the oldest retained version", ErrSnapshot, args.AsOf),
			map[string]any{"snapshot_unavailable": true, "oldest_available": arsia.FormatTimestamp(oldest)})
	}
	sortEntries(entries)
	if entries == nil {
		entries = []*Entry{}
	}
	res := &SnapshotResult{AsOf: args.AsOf, Entries: entries, Timestamp: arsia.FormatTimestamp(now)}
	h, err := jcs.DigestValue(entryMaps(entries))
	if err != nil {
		return nil, fmt.Errorf("%w: hashing the snapshot: %v", ErrSnapshot, err)
	}
	res.Hash = h
	return res, nil
}

// Purge implements Store: owner only; the value of every version is
// erased, the key and metadata remain (SNAPSHOT shows a null value), and
// active grants of the owner whose pattern covers the key are revoked.
// Purging a purged key returns the first purge's result with
// AlreadyPurged set; purging an unknown key is not_found.
func (s *MemoryStore) Purge(ctx context.Context, actor string, args PurgeArgs, now time.Time) (*PurgeResult, error) {
	r, err := s.purge(ctx, actor, args, now)
	return r, storeErr(err)
}

func (s *MemoryStore) purge(ctx context.Context, actor string, args PurgeArgs, now time.Time) (*PurgeResult, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, err
	}
	if err := args.Validate(); err != nil {
		return nil, err
	}
	k, _ := ParseKey(args.Key)
	if actor != k.Owner || k.Scope == ScopeGlobal {
		return nil, forbidden("only the owner may purge %s", quote(args.Key))
	}
	now = now0(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.records[args.Key]
	if rec == nil || len(rec.versions) == 0 {
		return nil, fmt.Errorf("%w: no entry %s", ErrNotFound, args.Key)
	}
	last := rec.versions[len(rec.versions)-1].entry
	res := &PurgeResult{Key: args.Key, OwnerAgentID: k.Owner, PIIClassification: last.PIIClassification}
	if rec.purged {
		res.PurgedAt, res.AlreadyPurged = arsia.FormatTimestamp(rec.purgedAt), true
		return res, nil
	}
	for i := range rec.versions {
		rec.versions[i].value = nil
	}
	rec.purged, rec.purgedAt = true, now
	for _, id := range s.order {
		g := s.grants[id]
		if g.Active(now) && g.GrantorAgentID == k.Owner && g.KeyPattern.Matches(args.Key) {
			g.RevokedAt = now
			res.RevokedGrants = append(res.RevokedGrants, id)
		}
	}
	res.PurgedAt = arsia.FormatTimestamp(now)
	return res, nil
}

// Grant implements Store. The pattern must lie in the actor's namespace
// and valid_until, when set, in the future.
func (s *MemoryStore) Grant(ctx context.Context, actor string, args GrantArgs, now time.Time) (*Grant, error) {
	g, err := s.grant(ctx, actor, args, now)
	return g, storeErr(err)
}

func (s *MemoryStore) grant(ctx context.Context, actor string, args GrantArgs, now time.Time) (*Grant, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(args.KeyPattern, actor+"/") {
		return nil, forbidden("%s may grant access only to keys in its own namespace, not %s", quote(actor), quote(args.KeyPattern))
	}
	if err := args.Check(actor); err != nil {
		return nil, err
	}
	pattern, _ := ParseKeyPattern(args.KeyPattern, actor)
	now = now0(now)
	g := &Grant{GrantorAgentID: actor, KeyPattern: pattern, GranteeAgentID: args.GranteeAgentID,
		AccessLevel: args.AccessLevel, CreatedAt: now}
	if args.ValidUntil != "" {
		g.ValidUntil, _ = arsia.ParseTimestamp(args.ValidUntil)
		if !g.ValidUntil.After(now) {
			return nil, fmt.Errorf("%w: valid_until %s is not in the future", ErrInvalidArgs, args.ValidUntil)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.grants) >= s.opts.MaxEntries {
		return nil, fmt.Errorf("%w: %d grants", ErrStoreFull, len(s.grants))
	}
	g.ID = s.opts.NewID()
	if _, dup := s.grants[g.ID]; dup || g.ID == "" {
		return nil, fmt.Errorf("grant id generator returned %s twice or empty", quote(g.ID))
	}
	s.grants[g.ID] = g
	s.order = append(s.order, g.ID)
	c := *g
	return &c, nil
}

// Revoke implements Store. Unknown and already revoked grants succeed with
// AlreadyRevoked set; another agent's grant is forbidden.
func (s *MemoryStore) Revoke(ctx context.Context, actor string, args RevokeArgs, now time.Time) (*RevokeResult, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, storeErr(err)
	}
	if err := args.Validate(); err != nil {
		return nil, storeErr(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &RevokeResult{GrantID: args.GrantID}
	g, ok := s.grants[args.GrantID]
	if !ok {
		res.AlreadyRevoked = true
		return res, nil
	}
	if g.GrantorAgentID != actor {
		return nil, storeErr(forbidden("only the grantor may revoke grant %s", args.GrantID))
	}
	res.GranteeAgentID = g.GranteeAgentID
	if !g.RevokedAt.IsZero() {
		res.AlreadyRevoked = true
		return res, nil
	}
	g.RevokedAt = now0(now)
	return res, nil
}

// Grants returns copies of the grants actor issued or received, in
// creation order, revoked ones included.
func (s *MemoryStore) Grants(actor string) []*Grant {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*Grant
	for _, id := range s.order {
		if g := s.grants[id]; g.GrantorAgentID == actor || g.GranteeAgentID == actor {
			c := *g
			out = append(out, &c)
		}
	}
	return out
}

// PutGlobal stores a global-scope entry on behalf of the platform
// operator, which manages global state outside the protocol. The entry
// must be valid (Entry.Validate, without a sender).
func (s *MemoryStore) PutGlobal(e *Entry, now time.Time) error {
	if e == nil || e.Scope != ScopeGlobal {
		return fmt.Errorf("%w: PutGlobal takes global entries only", ErrInvalidEntry)
	}
	if err := e.Validate(EntryContext{Registry: s.opts.Registry}); err != nil {
		return err
	}
	canon, err := CanonicalValue(e.Value)
	if err != nil {
		return err
	}
	k, _ := (KeyPolicy{Owner: e.OwnerAgentID}).Parse(e.Key)
	c := e.Clone()
	c.Value = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.records[e.Key]
	if rec == nil {
		if len(s.records) >= s.opts.MaxEntries {
			return fmt.Errorf("%w: %d keys", ErrStoreFull, len(s.records))
		}
		rec = &record{key: k}
		s.records[e.Key] = rec
	}
	rec.purged = false
	rec.versions = append(rec.versions, version{entry: *c, value: canon, at: rec.nextAt(now0(now))})
	return nil
}
