// # Idempotency
//
// Core §10 makes a request that carries an idempotency key execute at most
// once. ValidateIdempotencyKey checks the key grammar (1-128 printable ASCII
// characters); ResolveIdempotencyKey prefers the Idempotency-Key header to
// the envelope's idempotency.key; IdempotencyScopeOf extracts the scope
// tuple (from, to, payload.type) within which a key must be unique;
// IdempotencyFingerprint identifies the request itself; and
// ComputeIdempotencyExpiry says how long the record is kept (the sender's
// idempotency.expires_at, or at least 24 hours for a header-only key).
// PrepareIdempotency does all of that for one incoming request.
//
// An IdempotencyStore keeps one IdempotencyRecord per scope and key. Begin
// creates the record, pending, before the request executes; Complete stores
// the response once it has. A duplicate of a completed request gets the
// stored response to replay; a duplicate that arrives while the first is
// still pending, or a reused key carrying a different request, is refused
// with conflict. MemoryIdempotencyStore is a bounded in-memory store.
package arsia

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/custos-runtime/custos/jcs"
)

// Idempotency limits and names (Core §10).
const (
	// MinIdempotencyKeyLength and MaxIdempotencyKeyLength bound a key, in
	// characters (every valid character is one byte).
	MinIdempotencyKeyLength = 1
	MaxIdempotencyKeyLength = 128
	// IdempotencyKeyHeader is the HTTP header that carries a key outside
	// the envelope.
	IdempotencyKeyHeader = "Idempotency-Key"
	// HeaderKeyRetention is the shortest time a receiver keeps the record
	// of a key that came only in the header, which has no expires_at of
	// its own (Core §10.2(2)).
	HeaderKeyRetention = 24 * time.Hour
)

// Sentinel errors of the idempotency primitive. The *Error that carries
// them says what to answer: invalid_request for a bad key or scope,
// conflict (ErrIdempotencyInProgress, ErrIdempotencyKeyReused) for a
// duplicate that must not be replayed, service_unavailable for a full
// store.
var (
	ErrInvalidIdempotencyKey = errors.New("arsia: invalid idempotency key")
	ErrIdempotencyScope      = errors.New("arsia: incomplete idempotency scope")
	ErrIdempotencyExpiry     = errors.New("arsia: invalid idempotency expiry")
	ErrIdempotencyInProgress = errors.New("arsia: idempotent request still in progress")
	ErrIdempotencyKeyReused  = errors.New("arsia: idempotency key reused for a different request")
	ErrIdempotencyNoPending  = errors.New("arsia: no pending idempotency record")
	ErrIdempotencyRecord     = errors.New("arsia: invalid idempotency record")
	ErrIdempotencyStoreFull  = errors.New("arsia: idempotency store full")
)

// ValidateIdempotencyKey checks the key grammar of Core §10.2: 1 to 128
// characters, each printable ASCII (U+0020 space to U+007E tilde). The
// error is an *Error wrapping ErrInvalidIdempotencyKey whose Code is
// idempotency_key_empty ("at least"), idempotency_key_invalid_char
// ("printable-ASCII") or idempotency_key_too_long ("at most"). The key
// itself is never quoted in the message.
func ValidateIdempotencyKey(key string) error {
	if len(key) < MinIdempotencyKeyLength {
		return newError("idempotency_key_empty", ErrInvalidIdempotencyKey,
			"idempotency key must be at least %d character long", MinIdempotencyKeyLength)
	}
	// Characters before length, so that a long non-ASCII key is reported
	// for what is really wrong with it, not for its byte count.
	pos := 0
	for i := 0; i < len(key); pos++ {
		r, size := utf8.DecodeRuneInString(key[i:])
		if r < 0x20 || r > 0x7e {
			what := fmt.Sprintf("U+%04X", r)
			if r == utf8.RuneError && size == 1 {
				what = fmt.Sprintf("byte 0x%02X", key[i])
			}
			return newError(IssueIdempotencyKeyInvalidChar, ErrInvalidIdempotencyKey,
				"idempotency key must contain only printable-ASCII characters (U+0020-U+007E); found %s at position %d", what, pos)
		}
		i += size
	}
	if len(key) > MaxIdempotencyKeyLength {
		return newError("idempotency_key_too_long", ErrInvalidIdempotencyKey,
			"idempotency key must be at most %d characters long, got %d", MaxIdempotencyKeyLength, len(key))
	}
	return nil
}

// IdempotencyKeySource says where a resolved key came from.
type IdempotencyKeySource int

// Key sources.
const (
	IdempotencyKeyNone IdempotencyKeySource = iota
	IdempotencyKeyFromHeader
	IdempotencyKeyFromEnvelope
)

// String returns "none", "header" or "envelope".
func (s IdempotencyKeySource) String() string {
	switch s {
	case IdempotencyKeyFromHeader:
		return "header"
	case IdempotencyKeyFromEnvelope:
		return "envelope"
	}
	return "none"
}

// envelopeIdempotency returns the idempotency member of env, or nil when
// absent. A member that is present but not an object with a string key
// (and, when present, a string expires_at) is an error: it must not be
// mistaken for "no key", which would execute the request without
// protection.
func envelopeIdempotency(env map[string]any) (key, expiresAt string, present bool, err error) {
	v, present := env["idempotency"]
	if !present {
		return "", "", false, nil
	}
	obj, ok := objectOf(v)
	if !ok {
		return "", "", true, newError("idempotency_invalid", ErrInvalidEnvelope, "idempotency must be an object, got %s", pyRepr(truncateAny(v)))
	}
	key, ok = obj["key"].(string)
	if !ok {
		return "", "", true, newError("idempotency_invalid", ErrInvalidEnvelope, "idempotency.key must be a string, got %s", pyRepr(truncateAny(obj["key"])))
	}
	if e, has := obj["expires_at"]; has {
		if expiresAt, ok = e.(string); !ok {
			return "", "", true, newError("idempotency_invalid", ErrInvalidEnvelope, "idempotency.expires_at must be a string, got %s", pyRepr(truncateAny(e)))
		}
	}
	return key, expiresAt, true, nil
}

// ResolveIdempotencyKey returns the key that governs env (Core §10.4): the
// Idempotency-Key header value when it is not empty, otherwise
// idempotency.key, otherwise none (source IdempotencyKeyNone, key ""). The
// header wins even when the envelope names another key. The key is not
// validated here (PrepareIdempotency does); a malformed idempotency member
// is an error whichever source wins.
func ResolveIdempotencyKey(env map[string]any, headerKey string) (string, IdempotencyKeySource, error) {
	envKey, _, present, err := envelopeIdempotency(env)
	if err != nil {
		return "", IdempotencyKeyNone, err
	}
	switch {
	case headerKey != "":
		return headerKey, IdempotencyKeyFromHeader, nil
	case present:
		return envKey, IdempotencyKeyFromEnvelope, nil
	}
	return "", IdempotencyKeyNone, nil
}

// maxScopePayloadType caps payload.type in a scope: scopes are store keys.
const maxScopePayloadType = 256

// IdempotencyScope identifies one idempotency record: the key, unique
// within the scope tuple (from, to, payload.type) of Core §10.1. Agent
// identifiers and payload types are compared exactly, as everywhere in
// ARSIA: no case folding, no normalisation. The zero Key is the tuple
// alone, as IdempotencyScopeOf returns it.
type IdempotencyScope struct {
	From        string
	To          string
	PayloadType string
	Key         string
}

func scopeError(format string, args ...any) error {
	return newError("idempotency_scope_incomplete", ErrIdempotencyScope, format, args...)
}

// IdempotencyScopeOf extracts the scope tuple of env (Key is left empty).
// from and to must be valid agent identifiers and payload must be an
// object whose type is a valid payload type; anything missing or malformed
// is an *Error wrapping ErrIdempotencyScope. An encrypted payload has no
// readable type: decrypt before computing the scope.
func IdempotencyScopeOf(env map[string]any) (IdempotencyScope, error) {
	var s IdempotencyScope
	for _, f := range []struct {
		name string
		dst  *string
	}{{"from", &s.From}, {"to", &s.To}} {
		v, ok := env[f.name]
		if !ok {
			return IdempotencyScope{}, scopeError("idempotency scope needs %s: the envelope has none", pyRepr(f.name))
		}
		id, isStr := v.(string)
		if !isStr || !ValidAgentID(id) {
			return IdempotencyScope{}, scopeError("idempotency scope needs %s to be a valid agent identifier, got %s", pyRepr(f.name), pyRepr(truncateAny(v)))
		}
		*f.dst = id
	}
	switch p := env["payload"].(type) {
	case map[string]any:
		t, _ := p["type"].(string)
		if t == "" {
			return IdempotencyScope{}, scopeError("idempotency scope needs 'payload.type': the payload has none")
		}
		s.PayloadType = t
	case string:
		return IdempotencyScope{}, scopeError("idempotency scope needs 'payload.type': the payload is encrypted; decrypt it first")
	default:
		return IdempotencyScope{}, scopeError("idempotency scope needs 'payload.type': the envelope has no payload object")
	}
	if err := s.validTuple(); err != nil {
		return IdempotencyScope{}, err
	}
	return s, nil
}

func (s IdempotencyScope) validTuple() error {
	switch {
	case !ValidAgentID(s.From):
		return scopeError("idempotency scope 'from' %s is not a valid agent identifier", pyRepr(truncateForMessage(s.From)))
	case !ValidAgentID(s.To):
		return scopeError("idempotency scope 'to' %s is not a valid agent identifier", pyRepr(truncateForMessage(s.To)))
	case len(s.PayloadType) > maxScopePayloadType || !ValidPayloadType(s.PayloadType):
		return scopeError("idempotency scope 'payload.type' %s is not a valid payload type", pyRepr(truncateForMessage(s.PayloadType)))
	}
	return nil
}

// Validate checks the whole scope: the tuple as IdempotencyScopeOf does,
// and the key with ValidateIdempotencyKey. Stores refuse an invalid scope.
func (s IdempotencyScope) Validate() error {
	if err := s.validTuple(); err != nil {
		return err
	}
	return ValidateIdempotencyKey(s.Key)
}

// fingerprintExcluded are the members left out of a request fingerprint:
// what a sender legitimately changes when it rebuilds the same request for
// a retry (a new id, ts, expires_at and signature; a new span; a fresh
// idempotency.expires_at), and the key itself, which is already the scope.
var fingerprintExcluded = []string{"security", "id", "ts", "expires_at", "context", "idempotency"}

// IdempotencyFingerprint identifies the request a key was used for: the
// "sha256:" digest (package jcs) of env without security, id, ts,
// expires_at, context and idempotency. Everything that says what is asked
// (v, min_v, from, to, intent, correlation_id, capabilities, payload,
// compliance and any other member) is covered, so a key reused for a
// different request yields a different fingerprint, and Begin refuses it
// with conflict instead of replaying another request's response. A
// retried request, same bytes or rebuilt, yields the same fingerprint.
//
// The payload must be decrypted first: a JWE differs at every encryption.
func IdempotencyFingerprint(env map[string]any) (string, error) {
	if _, encrypted := env["payload"].(string); encrypted {
		return "", newError("idempotency_fingerprint_encrypted", ErrIdempotencyRecord,
			"the payload is encrypted: decrypt it before computing the idempotency fingerprint")
	}
	m := make(map[string]any, len(env))
	for k, v := range env {
		if !slices.Contains(fingerprintExcluded, k) {
			m[k] = v
		}
	}
	d, err := jcs.DigestValue(m)
	if err != nil {
		return "", &Error{Code: CodeInvalidRequest, Description: "The request cannot be canonicalized.",
			Err: fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)}
	}
	return d, nil
}

// ComputeIdempotencyExpiry returns how long the record of a key must be
// kept (Core §10.2, §10.3). For a key that came only in the header
// (headerOnly), the record is kept HeaderKeyRetention after now, or until
// envelopeExpiresAt when that is later. Otherwise envelopeExpiresAt, the
// envelope's idempotency.expires_at, is required, must be a wire timestamp
// and must be after now. Errors wrap ErrIdempotencyExpiry (ErrNoClock for
// a zero now).
func ComputeIdempotencyExpiry(envelopeExpiresAt string, headerOnly bool, now time.Time) (time.Time, error) {
	if now.IsZero() {
		return time.Time{}, fmt.Errorf("%w: now is required", ErrNoClock)
	}
	var declared time.Time
	if envelopeExpiresAt != "" {
		t, err := ParseTimestamp(envelopeExpiresAt)
		if err != nil {
			return time.Time{}, newError("idempotency_expires_at_invalid", ErrIdempotencyExpiry,
				"idempotency.expires_at %s is not a valid timestamp", pyRepr(truncateForMessage(envelopeExpiresAt)))
		}
		declared = t
	}
	if headerOnly {
		floor := now.Add(HeaderKeyRetention)
		if declared.After(floor) {
			return declared, nil
		}
		return floor, nil
	}
	switch {
	case envelopeExpiresAt == "":
		return time.Time{}, newError("idempotency_expires_at_missing", ErrIdempotencyExpiry,
			"idempotency.expires_at is required with idempotency.key")
	case !declared.After(now):
		return time.Time{}, newError("idempotency_expired", ErrIdempotencyExpiry,
			"idempotency.expires_at %s is not after now %s", pyRepr(envelopeExpiresAt), pyRepr(FormatTimestamp(now)))
	}
	return declared, nil
}

// IsIdempotencyRecordExpired reports whether a record that expires at the
// wire timestamp expiresAt is expired at now (now > expires_at). A
// timestamp that does not parse, or a zero now, counts as expired: the
// caller then treats the key as unknown rather than trusting a record it
// cannot date.
func IsIdempotencyRecordExpired(expiresAt string, now time.Time) bool {
	t, err := ParseTimestamp(expiresAt)
	return err != nil || now.IsZero() || now.After(t)
}

// IdempotencyRequest is what a receiver needs to apply Core §10 to one
// request: the record's scope (key included), the fingerprint of the
// request and the time until which the record is kept.
type IdempotencyRequest struct {
	Scope       IdempotencyScope
	Source      IdempotencyKeySource
	Fingerprint string
	ExpiresAt   time.Time
}

// PrepareIdempotency resolves, validates and scopes the idempotency key of
// a decoded, verified and decrypted envelope. It returns nil and no error
// when the request carries no key; the caller then executes it without
// idempotency. Any error refuses the request (invalid_request, see the
// *Error's code); nothing is half-applied.
func PrepareIdempotency(env map[string]any, headerKey string, now time.Time) (*IdempotencyRequest, error) {
	key, src, err := ResolveIdempotencyKey(env, headerKey)
	if err != nil || src == IdempotencyKeyNone {
		return nil, err
	}
	if err := ValidateIdempotencyKey(key); err != nil {
		return nil, err
	}
	scope, err := IdempotencyScopeOf(env)
	if err != nil {
		return nil, err
	}
	scope.Key = key
	fp, err := IdempotencyFingerprint(env)
	if err != nil {
		return nil, err
	}
	_, envExpires, present, _ := envelopeIdempotency(env) // already checked by ResolveIdempotencyKey
	exp, err := ComputeIdempotencyExpiry(envExpires, !present, now)
	if err != nil {
		return nil, err
	}
	return &IdempotencyRequest{Scope: scope, Source: src, Fingerprint: fp, ExpiresAt: exp}, nil
}

// IdempotencyStatus is the state of a key within its scope.
type IdempotencyStatus string

// Statuses. New is the status of a key that has no (unexpired) record.
const (
	IdempotencyNew       IdempotencyStatus = "new"
	IdempotencyPending   IdempotencyStatus = "pending"
	IdempotencyCompleted IdempotencyStatus = "completed"
)

// IdempotencyRecord is what a store keeps for one scope and key.
type IdempotencyRecord struct {
	Scope  IdempotencyScope
	Status IdempotencyStatus
	// Fingerprint identifies the request that created the record
	// (IdempotencyFingerprint).
	Fingerprint string
	// Response is the wire JSON to replay; nil while pending.
	Response    json.RawMessage
	CreatedAt   time.Time
	CompletedAt time.Time // zero while pending
	ExpiresAt   time.Time
}

// Expired reports whether the record is expired at now (now > ExpiresAt).
// A nil record or one without an expiry counts as expired.
func (r *IdempotencyRecord) Expired(now time.Time) bool {
	return r == nil || r.ExpiresAt.IsZero() || now.After(r.ExpiresAt)
}

// clone returns a copy that shares nothing with r.
func (r *IdempotencyRecord) clone() *IdempotencyRecord {
	c := *r
	c.Response = slices.Clone(r.Response)
	return &c
}

// IdempotencyStore keeps idempotency records. Implementations must make
// Begin atomic: of any number of concurrent Begin calls for one scope, at
// most one starts. Expired records count as absent.
type IdempotencyStore interface {
	// Begin claims scope for a request about to execute. When the scope
	// has no unexpired record, it creates one, pending, with fingerprint
	// and expiresAt, and returns started true: the caller executes the
	// request, then calls Complete (or Forget). Otherwise it returns the
	// existing record and started false, and the caller must not execute:
	//
	//   - err nil: the record is completed for the same request; replay
	//     existing.Response;
	//   - err wraps ErrIdempotencyKeyReused (wire conflict): the key was
	//     used for a request with another fingerprint;
	//   - err wraps ErrIdempotencyInProgress (wire conflict): the same
	//     request is still executing.
	//
	// Any other error (invalid scope, expiresAt not in the future, full
	// store, ctx done) leaves the store unchanged; existing is nil.
	//
	// A pending record that expires frees the key, so expiresAt should
	// lie well beyond the request's execution deadline.
	Begin(ctx context.Context, scope IdempotencyScope, fingerprint string, expiresAt time.Time) (existing *IdempotencyRecord, started bool, err error)
	// Complete stores the response of the pending record of scope, which
	// becomes completed. It fails (ErrIdempotencyNoPending) when there is
	// no unexpired pending record, (ErrIdempotencyRecord) when response
	// is not valid JSON or too large, and (ErrIdempotencyStoreFull) when
	// the store has no room for it; the record then stays
	// pending until it expires, so that a duplicate is refused rather
	// than executed again.
	Complete(ctx context.Context, scope IdempotencyScope, response json.RawMessage) error
	// Forget deletes the record of scope, whatever its state, so that
	// the next request with the key executes. Use it when execution
	// failed in a way the sender may retry (internal_error,
	// service_unavailable). Forgetting an absent record is not an error.
	Forget(ctx context.Context, scope IdempotencyScope) error
}

// Defaults of MemoryIdempotencyStore.
const (
	DefaultMaxIdempotencyRecords       = 10_000
	DefaultMaxIdempotencyBytes   int64 = 64 << 20
)

// MemoryIdempotencyStoreOptions configures NewMemoryIdempotencyStore; nil
// or zero fields mean the defaults.
type MemoryIdempotencyStoreOptions struct {
	// MaxRecords caps the number of records (pending and completed);
	// default DefaultMaxIdempotencyRecords.
	MaxRecords int
	// MaxBytes caps the total size of the stored responses; default
	// DefaultMaxIdempotencyBytes. One response is at most
	// DefaultMaxMessageBytes.
	MaxBytes int64
	// Now is the store's clock; default time.Now.
	Now func() time.Time
}

// MemoryIdempotencyStore is an IdempotencyStore in process memory, safe
// for concurrent use, for tests and single-instance deployments.
//
// It is bounded: expired records are dropped first (cheaply, in expiry
// order), and when the store is still full Begin refuses the new key with
// ErrIdempotencyStoreFull (service_unavailable, retryable) rather than
// evict a live record, which would let a duplicate execute twice.
type MemoryIdempotencyStore struct {
	mu         sync.Mutex
	now        func() time.Time
	maxRecords int
	maxBytes   int64
	bytes      int64
	records    map[IdempotencyScope]*memoryRecord
	byExpiry   expiryHeap
}

var _ IdempotencyStore = (*MemoryIdempotencyStore)(nil)

type memoryRecord struct {
	rec   IdempotencyRecord
	index int // position in byExpiry
}

// expiryHeap orders records by ExpiresAt, soonest first (container/heap).
type expiryHeap []*memoryRecord

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].rec.ExpiresAt.Before(h[j].rec.ExpiresAt) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	r := x.(*memoryRecord)
	r.index = len(*h)
	*h = append(*h, r)
}
func (h *expiryHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	r.index = -1
	return r
}

// NewMemoryIdempotencyStore returns an empty store; opts may be nil.
func NewMemoryIdempotencyStore(opts *MemoryIdempotencyStoreOptions) *MemoryIdempotencyStore {
	s := &MemoryIdempotencyStore{
		now:        time.Now,
		maxRecords: DefaultMaxIdempotencyRecords,
		maxBytes:   DefaultMaxIdempotencyBytes,
		records:    map[IdempotencyScope]*memoryRecord{},
	}
	if opts != nil {
		if opts.MaxRecords > 0 {
			s.maxRecords = opts.MaxRecords
		}
		if opts.MaxBytes > 0 {
			s.maxBytes = opts.MaxBytes
		}
		if opts.Now != nil {
			s.now = opts.Now
		}
	}
	return s
}

// Begin implements IdempotencyStore.
func (s *MemoryIdempotencyStore) Begin(ctx context.Context, scope IdempotencyScope, fingerprint string, expiresAt time.Time) (*IdempotencyRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := scope.Validate(); err != nil {
		return nil, false, err
	}
	if fingerprint == "" {
		return nil, false, &Error{Code: CodeInternalError, Description: "The idempotency record has no request fingerprint.", Err: ErrIdempotencyRecord}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !expiresAt.After(now) {
		return nil, false, newError("idempotency_expired", ErrIdempotencyExpiry,
			"idempotency record would expire at %s, not after now %s", FormatTimestamp(expiresAt), FormatTimestamp(now))
	}
	s.dropExpired(now)
	if m, ok := s.records[scope]; ok {
		existing := m.rec.clone()
		switch {
		case m.rec.Fingerprint != fingerprint:
			return existing, false, &Error{Code: CodeConflict,
				Description: "The idempotency key was already used for a different request.", Err: ErrIdempotencyKeyReused}
		case m.rec.Status != IdempotencyCompleted:
			return existing, false, &Error{Code: "idempotency_in_progress",
				Description: "A request with this idempotency key is still being processed.", Err: ErrIdempotencyInProgress}
		}
		return existing, false, nil
	}
	if len(s.records) >= s.maxRecords || s.bytes >= s.maxBytes {
		return nil, false, &Error{Code: CodeServiceUnavailable,
			Description: "The idempotency store is full; retry later.", Err: ErrIdempotencyStoreFull}
	}
	m := &memoryRecord{rec: IdempotencyRecord{Scope: scope, Status: IdempotencyPending, Fingerprint: fingerprint,
		CreatedAt: now, ExpiresAt: expiresAt}}
	s.records[scope] = m
	heap.Push(&s.byExpiry, m)
	return nil, true, nil
}

// Complete implements IdempotencyStore.
func (s *MemoryIdempotencyStore) Complete(ctx context.Context, scope IdempotencyScope, response json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(response) > DefaultMaxMessageBytes || !json.Valid(response) {
		return &Error{Code: CodeInternalError, Description: "The response to store is not valid JSON or is too large.", Err: ErrIdempotencyRecord}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.dropExpired(now)
	m, ok := s.records[scope]
	if !ok || m.rec.Status != IdempotencyPending {
		return &Error{Code: CodeInternalError, Description: "No pending idempotency record to complete.", Err: ErrIdempotencyNoPending}
	}
	if s.bytes+int64(len(response)) > s.maxBytes {
		return &Error{Code: CodeServiceUnavailable, Description: "The idempotency store is full.", Err: ErrIdempotencyStoreFull}
	}
	m.rec.Status = IdempotencyCompleted
	m.rec.Response = slices.Clone(response)
	m.rec.CompletedAt = now
	s.bytes += int64(len(response))
	return nil
}

// Forget implements IdempotencyStore.
func (s *MemoryIdempotencyStore) Forget(ctx context.Context, scope IdempotencyScope) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.records[scope]; ok {
		s.remove(m)
	}
	return nil
}

// Get returns a copy of the unexpired record of scope, or nil.
func (s *MemoryIdempotencyStore) Get(ctx context.Context, scope IdempotencyScope) (*IdempotencyRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropExpired(s.now())
	if m, ok := s.records[scope]; ok {
		return m.rec.clone(), nil
	}
	return nil, nil
}

// Status returns the status of scope: new when it has no unexpired record.
func (s *MemoryIdempotencyStore) Status(ctx context.Context, scope IdempotencyScope) (IdempotencyStatus, error) {
	rec, err := s.Get(ctx, scope)
	if err != nil || rec == nil {
		return IdempotencyNew, err
	}
	return rec.Status, nil
}

// Len returns the number of records held, expired ones included until
// the next call that drops them.
func (s *MemoryIdempotencyStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

func (s *MemoryIdempotencyStore) dropExpired(now time.Time) {
	for len(s.byExpiry) > 0 && s.byExpiry[0].rec.Expired(now) {
		s.remove(s.byExpiry[0])
	}
}

func (s *MemoryIdempotencyStore) remove(m *memoryRecord) {
	heap.Remove(&s.byExpiry, m.index)
	delete(s.records, m.rec.Scope)
	s.bytes -= int64(len(m.rec.Response))
}
