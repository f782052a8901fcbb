package state

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/jcs"
)

// StoreOptions configures the stores of this package (MemoryStore and
// TxStore); zero fields mean defaults.
type StoreOptions = MemoryStoreOptions

// Version is one stored version of an entry: its metadata (Entry.Value
// nil), its value in canonical JSON (nil once purged) and the history
// instant SNAPSHOT sees it from.
type Version struct {
	Entry Entry
	Value []byte
	At    time.Time
}

// Head is a key's newest version and whether the key was purged.
type Head struct {
	Version
	Purged   bool
	PurgedAt time.Time
}

// Tx is one transaction of a Backend. Times are UTC, at millisecond
// precision or finer; a backend must give them back as it got them
// (to the nanosecond it stores, at least the millisecond).
type Tx interface {
	// Head returns key's newest version, or nil when the key is unknown.
	Head(key string) (*Head, error)
	// Heads calls fn with the newest version of every key starting with
	// prefix ("" for all), in any order.
	Heads(prefix string, fn func(*Head) error) error
	// AsOf calls fn with the newest version of every key starting with
	// prefix whose At is not after t (the highest-numbered one among equal
	// At), in any order.
	AsOf(t time.Time, prefix string, fn func(*Version) error) error
	// Oldest returns the earliest At of any version, zero when none.
	Oldest() (time.Time, error)
	// Keys counts the keys, purged ones included.
	Keys() (int, error)
	// Append stores v as the newest version of v.Entry.Key (creating the
	// key) and clears the key's purged mark.
	Append(v *Version) error
	// Purge erases the value of every version of key and marks it purged
	// at at.
	Purge(key string, at time.Time) error
	// Grants returns the grants of grantor to grantee ("" matches any),
	// revoked ones included, in creation order.
	Grants(grantor, grantee string) ([]*Grant, error)
	// Grant returns the grant id, or nil when unknown.
	Grant(id string) (*Grant, error)
	// CountGrants counts every grant, revoked ones included.
	CountGrants() (int, error)
	// AddGrant stores a new grant; an id already used is an error.
	AddGrant(g *Grant) error
	// RevokeGrant sets the grant's RevokedAt.
	RevokeGrant(id string, at time.Time) error
}

// Backend is the durable storage under a TxStore: transactions over
// keys, versions and grants. Read transactions see one consistent
// snapshot. Write transactions are serialized with each other (across
// processes sharing the storage too): what fn reads stays true until it
// commits. fn may run more than once (a retried transaction); it must
// not keep side effects of a run that did not commit. An error from fn
// rolls the transaction back and is returned.
type Backend interface {
	Read(ctx context.Context, fn func(Tx) error) error
	Write(ctx context.Context, fn func(Tx) error) error
}

// TxStore is a Store on a Backend, with the semantics of MemoryStore
// (the conformance kit statetest holds both to one behaviour): full
// version history, logical deletes, snapshots, purges and grants.
type TxStore struct {
	b    Backend
	opts StoreOptions
}

var _ Store = (*TxStore)(nil)

// NewTxStore returns the Store on b. opts may be nil.
func NewTxStore(b Backend, opts *StoreOptions) *TxStore {
	s := &TxStore{b: b}
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

// write runs op in a write transaction. op returns the operation's own
// failure (a rule broken: nothing written) apart from the storage's, so
// that the transaction commits nothing and is not reported as failed.
func (s *TxStore) write(ctx context.Context, op func(Tx) (opErr, err error)) error {
	var opErr error
	err := s.b.Write(ctx, func(tx Tx) error {
		var err error
		opErr, err = op(tx)
		return err
	})
	if err != nil {
		return err
	}
	return opErr
}

// liveHead reports whether h is visible to GET and QUERY at now.
func liveHead(h *Head, now time.Time) bool {
	if h == nil || h.Purged {
		return false
	}
	e := &h.Entry
	return !e.Deleted && (e.ExpiresAt.IsZero() || now.Before(e.ExpiresAt))
}

// materializeVersion returns a caller-owned entry of v.
func materializeVersion(v *Version) *Entry {
	e := v.Entry.Clone()
	e.Value = nil
	if v.Value != nil {
		if val, err := jcs.Decode(v.Value); err == nil {
			e.Value = val
		}
	}
	return e
}

// access decides reads and writes with the grants it was given.
type access struct {
	grants []*Grant
}

func (a access) may(actor string, key Key, level AccessLevel, now time.Time) bool {
	if actor == key.Owner {
		return key.Scope != ScopeGlobal || level == AccessRead
	}
	if key.Scope == ScopeGlobal {
		return level == AccessRead
	}
	for _, g := range a.grants {
		if g.Covers(actor, key, level, now) {
			return true
		}
	}
	return false
}

// grantsTo loads the grants actor received from owner ("" for any).
func grantsTo(tx Tx, owner, actor string) (access, error) {
	gs, err := tx.Grants(owner, actor)
	return access{gs}, err
}

// Get implements Store.
func (s *TxStore) Get(ctx context.Context, actor string, args GetArgs, now time.Time) (*Entry, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, storeErr(err)
	}
	if err := args.Validate(); err != nil {
		return nil, storeErr(err)
	}
	k, _ := ParseKey(args.Key)
	var out *Entry
	var opErr error
	err := s.b.Read(ctx, func(tx Tx) error {
		out, opErr = nil, nil
		acc, err := grantsTo(tx, k.Owner, actor)
		if err != nil {
			return err
		}
		if !acc.may(actor, k, AccessRead, now) {
			opErr = forbidden("%s may not read %s", quote(actor), quote(args.Key))
			return nil
		}
		h, err := tx.Head(args.Key)
		if err != nil {
			return err
		}
		if liveHead(h, now) {
			out = materializeVersion(&h.Version)
		}
		return nil
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}

// Set implements Store, as MemoryStore.Set does.
func (s *TxStore) Set(ctx context.Context, actor string, args SetArgs, comp map[string]any, now time.Time) (*Entry, error) {
	e, err := s.set(ctx, actor, args, comp, now)
	return e, storeErr(err)
}

// prepareSet applies the rules of SET that need no stored state: it
// returns the canonical value, expiry and residency of the new version.
func prepareSet(opts *StoreOptions, actor string, args SetArgs, comp map[string]any, now time.Time) (canon []byte, expires time.Time, residency string, err error) {
	ectx := EntryContext{Compliance: comp, Registry: opts.Registry}
	if err := args.Check(ectx); err != nil {
		return nil, time.Time{}, "", err
	}
	canon, err = CanonicalValue(args.Value)
	if err != nil {
		return nil, time.Time{}, "", err
	}
	k, _ := ParseKey(args.Key)
	if args.ExpiresAt != "" {
		expires, _ = arsia.ParseTimestamp(args.ExpiresAt)
		if !expires.After(now) {
			return nil, time.Time{}, "", fmt.Errorf("%w: expires_at %s is not in the future", ErrInvalidArgs, args.ExpiresAt)
		}
	}
	residency = args.DataResidency
	if residency == "" && k.Scope != ScopeSession {
		eff, err := ectx.effectiveCompliance()
		if err != nil {
			return nil, time.Time{}, "", err
		}
		residency, _ = eff["data_residency"].(string)
		if !validZone(residency) {
			residency = ""
		}
	}
	if residency != "" && len(opts.Zones) > 0 &&
		!slices.ContainsFunc(opts.Zones, func(z string) bool { return WithinZone(z, residency) }) {
		return nil, time.Time{}, "", wireError(arsia.CodeInvalidRequest,
			fmt.Errorf("%w: this store cannot keep data in %s", ErrResidency, residency),
			map[string]any{"data_residency_violation": true, "required_zone": residency})
	}
	return canon, expires, residency, nil
}

func (s *TxStore) set(ctx context.Context, actor string, args SetArgs, comp map[string]any, now time.Time) (*Entry, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, err
	}
	now = now0(now)
	canon, expires, residency, err := prepareSet(&s.opts, actor, args, comp, now)
	if err != nil {
		return nil, err
	}
	k, _ := ParseKey(args.Key)
	var out *Entry
	err = s.write(ctx, func(tx Tx) (error, error) {
		out = nil
		h, err := tx.Head(args.Key)
		if err != nil {
			return nil, err
		}
		isLive := liveHead(h, now)
		if actor != k.Owner {
			acc, err := grantsTo(tx, k.Owner, actor)
			if err != nil {
				return nil, err
			}
			if !isLive || !acc.may(actor, k, AccessReadWrite, now) {
				return forbidden("%s may not write %s", quote(actor), quote(args.Key)), nil
			}
		}
		current := 0
		if isLive {
			current = h.Entry.Version
		}
		if args.ExpectedVersion != 0 && args.ExpectedVersion != current {
			return wireError(arsia.CodeConflict,
				fmt.Errorf("%w: %s is at version %d, not %d", ErrConflict, args.Key, current, args.ExpectedVersion),
				map[string]any{"current_version": current, "expected_version": args.ExpectedVersion}), nil
		}
		if h == nil {
			n, err := tx.Keys()
			if err != nil {
				return nil, err
			}
			if n >= s.opts.MaxEntries {
				return fmt.Errorf("%w: %d keys", ErrStoreFull, n), nil
			}
		}
		e := Entry{
			Key: args.Key, OwnerAgentID: k.Owner, Scope: k.Scope, CreatedAt: now, UpdatedAt: now, Version: 1,
			ExpiresAt: expires, RetentionDays: args.RetentionDays, DataResidency: residency,
			PIIClassification: args.PIIClassification, PIISpecialCategories: slices.Clone(args.PIISpecialCategories),
		}
		if isLive {
			e.CreatedAt, e.Version = h.Entry.CreatedAt, h.Entry.Version+1
		}
		if k.Scope == ScopeSession && !e.ExpiresAt.IsZero() && e.ExpiresAt.Sub(e.CreatedAt) > SessionMaxLifetime {
			return fmt.Errorf("%w: session entry expires_at exceeds created_at + 24h", ErrInvalidArgs), nil
		}
		v := &Version{Entry: e, Value: canon, At: now}
		if h != nil && now.Before(h.At) {
			v.At = h.At
		}
		if err := tx.Append(v); err != nil {
			return nil, err
		}
		out = materializeVersion(v)
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Delete implements Store. Deleting a key with no live entry is
// not_found.
func (s *TxStore) Delete(ctx context.Context, actor string, args DeleteArgs, now time.Time) (*DeleteResult, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, storeErr(err)
	}
	if err := args.Validate(); err != nil {
		return nil, storeErr(err)
	}
	k, _ := ParseKey(args.Key)
	if actor != k.Owner || k.Scope == ScopeGlobal {
		return nil, storeErr(forbidden("only the owner may delete %s", quote(args.Key)))
	}
	now = now0(now)
	var out *DeleteResult
	err := s.write(ctx, func(tx Tx) (error, error) {
		out = nil
		h, err := tx.Head(args.Key)
		if err != nil {
			return nil, err
		}
		if !liveHead(h, now) {
			return fmt.Errorf("%w: no entry %s", ErrNotFound, args.Key), nil
		}
		v := Version{Entry: *h.Entry.Clone(), Value: h.Value, At: now}
		if now.Before(h.At) {
			v.At = h.At
		}
		v.Entry.Deleted, v.Entry.UpdatedAt = true, now
		if err := tx.Append(&v); err != nil {
			return nil, err
		}
		out = &DeleteResult{Key: args.Key, Version: v.Entry.Version}
		return nil, nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}

// scanPrefix is the key prefix a filter lets a backend narrow its scan
// to.
func scanPrefix(f QueryFilter) string {
	if f.KeyPrefix != "" {
		return f.KeyPrefix
	}
	if f.OwnerAgentID != "" {
		return f.OwnerAgentID + "/"
	}
	return ""
}

// Query implements Store. A limit above MaxQueryLimit is clamped.
func (s *TxStore) Query(ctx context.Context, actor string, args QueryArgs, now time.Time) (*QueryResult, error) {
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
	var entries []*Entry
	err := s.b.Read(ctx, func(tx Tx) error {
		entries = nil
		acc, err := grantsTo(tx, "", actor)
		if err != nil {
			return err
		}
		return tx.Heads(scanPrefix(args.QueryFilter), func(h *Head) error {
			k, err := ParseKey(h.Entry.Key)
			if err != nil {
				return nil
			}
			if liveHead(h, now) && args.QueryFilter.matches(&h.Entry) && acc.may(actor, k, AccessRead, now) {
				entries = append(entries, materializeVersion(&h.Version))
			}
			return nil
		})
	})
	if err != nil {
		return nil, storeErr(err)
	}
	sortEntries(entries)
	res := &QueryResult{Total: len(entries), Limit: limit, Offset: offset, Entries: []*Entry{}}
	if offset < len(entries) {
		res.Entries = entries[offset:min(len(entries), offset+limit)]
	}
	return res, nil
}

// Snapshot implements Store, as MemoryStore.Snapshot does.
func (s *TxStore) Snapshot(ctx context.Context, actor string, args SnapshotArgs, now time.Time) (*SnapshotResult, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, storeErr(err)
	}
	if err := args.Validate(); err != nil {
		return nil, storeErr(err)
	}
	asOf, _ := arsia.ParseTimestamp(args.AsOf)
	if asOf.After(now.Add(SnapshotClockSkew)) {
		return nil, storeErr(fmt.Errorf("%w: as_of %s is in the future", ErrInvalidArgs, args.AsOf))
	}
	var filter QueryFilter
	if args.Filter != nil {
		filter = *args.Filter
	}
	var entries []*Entry
	var oldest time.Time
	err := s.b.Read(ctx, func(tx Tx) error {
		entries = nil
		var err error
		if oldest, err = tx.Oldest(); err != nil {
			return err
		}
		acc, err := grantsTo(tx, "", actor)
		if err != nil {
			return err
		}
		return tx.AsOf(asOf, scanPrefix(filter), func(v *Version) error {
			k, err := ParseKey(v.Entry.Key)
			if err != nil {
				return nil
			}
			if filter.matches(&v.Entry) && acc.may(actor, k, AccessRead, now) {
				entries = append(entries, materializeVersion(v))
			}
			return nil
		})
	})
	if err != nil {
		return nil, storeErr(err)
	}
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
		return nil, storeErr(fmt.Errorf("%w: hashing the snapshot: %v", ErrSnapshot, err))
	}
	res.Hash = h
	return res, nil
}

// Purge implements Store, as MemoryStore.Purge does.
func (s *TxStore) Purge(ctx context.Context, actor string, args PurgeArgs, now time.Time) (*PurgeResult, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, storeErr(err)
	}
	if err := args.Validate(); err != nil {
		return nil, storeErr(err)
	}
	k, _ := ParseKey(args.Key)
	if actor != k.Owner || k.Scope == ScopeGlobal {
		return nil, storeErr(forbidden("only the owner may purge %s", quote(args.Key)))
	}
	now = now0(now)
	var res *PurgeResult
	err := s.write(ctx, func(tx Tx) (error, error) {
		res = nil
		h, err := tx.Head(args.Key)
		if err != nil {
			return nil, err
		}
		if h == nil {
			return fmt.Errorf("%w: no entry %s", ErrNotFound, args.Key), nil
		}
		r := &PurgeResult{Key: args.Key, OwnerAgentID: k.Owner, PIIClassification: h.Entry.PIIClassification}
		if h.Purged {
			r.PurgedAt, r.AlreadyPurged = arsia.FormatTimestamp(h.PurgedAt), true
			res = r
			return nil, nil
		}
		if err := tx.Purge(args.Key, now); err != nil {
			return nil, err
		}
		gs, err := tx.Grants(k.Owner, "")
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			if g.Active(now) && g.KeyPattern.Matches(args.Key) {
				if err := tx.RevokeGrant(g.ID, now); err != nil {
					return nil, err
				}
				r.RevokedGrants = append(r.RevokedGrants, g.ID)
			}
		}
		r.PurgedAt = arsia.FormatTimestamp(now)
		res = r
		return nil, nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return res, nil
}

// Grant implements Store, as MemoryStore.Grant does.
func (s *TxStore) Grant(ctx context.Context, actor string, args GrantArgs, now time.Time) (*Grant, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, storeErr(err)
	}
	if !strings.HasPrefix(args.KeyPattern, actor+"/") {
		return nil, storeErr(forbidden("%s may grant access only to keys in its own namespace, not %s", quote(actor), quote(args.KeyPattern)))
	}
	if err := args.Check(actor); err != nil {
		return nil, storeErr(err)
	}
	pattern, _ := ParseKeyPattern(args.KeyPattern, actor)
	now = now0(now)
	base := Grant{GrantorAgentID: actor, KeyPattern: pattern, GranteeAgentID: args.GranteeAgentID,
		AccessLevel: args.AccessLevel, CreatedAt: now}
	if args.ValidUntil != "" {
		base.ValidUntil, _ = arsia.ParseTimestamp(args.ValidUntil)
		if !base.ValidUntil.After(now) {
			return nil, storeErr(fmt.Errorf("%w: valid_until %s is not in the future", ErrInvalidArgs, args.ValidUntil))
		}
	}
	var out *Grant
	err := s.write(ctx, func(tx Tx) (error, error) {
		out = nil
		n, err := tx.CountGrants()
		if err != nil {
			return nil, err
		}
		if n >= s.opts.MaxEntries {
			return fmt.Errorf("%w: %d grants", ErrStoreFull, n), nil
		}
		g := base
		g.ID = s.opts.NewID()
		if g.ID == "" {
			return nil, fmt.Errorf("grant id generator returned an empty id")
		}
		if err := tx.AddGrant(&g); err != nil {
			return nil, err
		}
		out = &g
		return nil, nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}

// Revoke implements Store, as MemoryStore.Revoke does.
func (s *TxStore) Revoke(ctx context.Context, actor string, args RevokeArgs, now time.Time) (*RevokeResult, error) {
	if err := checkCall(ctx, actor, now); err != nil {
		return nil, storeErr(err)
	}
	if err := args.Validate(); err != nil {
		return nil, storeErr(err)
	}
	now = now0(now)
	var res *RevokeResult
	err := s.write(ctx, func(tx Tx) (error, error) {
		res = &RevokeResult{GrantID: args.GrantID}
		g, err := tx.Grant(args.GrantID)
		if err != nil {
			return nil, err
		}
		if g == nil {
			res.AlreadyRevoked = true
			return nil, nil
		}
		if g.GrantorAgentID != actor {
			res = nil
			return forbidden("only the grantor may revoke grant %s", args.GrantID), nil
		}
		res.GranteeAgentID = g.GranteeAgentID
		if !g.RevokedAt.IsZero() {
			res.AlreadyRevoked = true
			return nil, nil
		}
		return nil, tx.RevokeGrant(g.ID, now)
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return res, nil
}

// PutGlobal stores a global-scope entry on behalf of the platform
// operator, as MemoryStore.PutGlobal does.
func (s *TxStore) PutGlobal(ctx context.Context, e *Entry, now time.Time) error {
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
	c := e.Clone()
	c.Value = nil
	now = now0(now)
	return s.write(ctx, func(tx Tx) (error, error) {
		h, err := tx.Head(e.Key)
		if err != nil {
			return nil, err
		}
		if h == nil {
			n, err := tx.Keys()
			if err != nil {
				return nil, err
			}
			if n >= s.opts.MaxEntries {
				return fmt.Errorf("%w: %d keys", ErrStoreFull, n), nil
			}
		}
		v := &Version{Entry: *c, Value: canon, At: now}
		if h != nil && now.Before(h.At) {
			v.At = h.At
		}
		return nil, tx.Append(v)
	})
}
