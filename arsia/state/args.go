package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/schema"
	"github.com/custos-runtime/custos/jcs"
)

// OperationsSchema is the JSON Schema of state operation payloads; its
// $defs hold the per-operation args and results.
const OperationsSchema = "arsia-state-operations.schema.json"

// Query limits (ARSIA-State §3.1.4): a QUERY without limit returns at most
// DefaultQueryLimit entries; a larger limit than MaxQueryLimit is clamped,
// not refused.
const (
	DefaultQueryLimit = 100
	MaxQueryLimit     = 1000
)

// AccessLevel is what a grant lets the grantee do.
type AccessLevel string

// The two access levels.
const (
	// AccessRead permits GET and QUERY.
	AccessRead AccessLevel = "read"
	// AccessReadWrite also permits SET on existing entries.
	AccessReadWrite AccessLevel = "read_write"
)

// Valid reports whether l is read or read_write.
func (l AccessLevel) Valid() bool { return l == AccessRead || l == AccessReadWrite }

// GetArgs are the arguments of GET.
type GetArgs struct {
	Key string `json:"key"`
}

// DeleteArgs are the arguments of DELETE (a logical delete).
type DeleteArgs struct {
	Key string `json:"key"`
}

// SetArgs are the arguments of SET: flat, with no "entry" wrapper and none
// of the members the implementation sets (owner_agent_id, created_at,
// updated_at, version, deleted). Zero RetentionDays and ExpectedVersion
// mean absent.
type SetArgs struct {
	Key                  string   `json:"key"`
	Value                any      `json:"value"`
	Scope                Scope    `json:"scope"`
	PIIClassification    PII      `json:"pii_classification"`
	PIISpecialCategories []string `json:"pii_special_categories,omitempty"`
	ExpiresAt            string   `json:"expires_at,omitempty"`
	RetentionDays        int      `json:"retention_days,omitempty"`
	DataResidency        string   `json:"data_residency,omitempty"`
	// ExpectedVersion makes the SET conditional on the entry's current
	// version (optimistic concurrency); a mismatch is a conflict.
	ExpectedVersion int `json:"expected_version,omitempty"`
}

// QueryFilter holds the filters shared by QUERY and SNAPSHOT, combined with
// AND. Empty members are absent. Timestamps are in wire form.
type QueryFilter struct {
	Scope             Scope  `json:"scope,omitempty"`
	OwnerAgentID      string `json:"owner_agent_id,omitempty"`
	KeyPrefix         string `json:"key_prefix,omitempty"`
	PIIClassification PII    `json:"pii_classification,omitempty"`
	CreatedAfter      string `json:"created_after,omitempty"`
	CreatedBefore     string `json:"created_before,omitempty"`
}

// QueryArgs are the arguments of QUERY. Nil Limit and Offset are absent
// (defaults 100 and 0).
type QueryArgs struct {
	QueryFilter
	Limit  *int `json:"limit,omitempty"`
	Offset *int `json:"offset,omitempty"`
}

// SnapshotArgs are the arguments of SNAPSHOT.
type SnapshotArgs struct {
	AsOf   string       `json:"as_of"`
	Filter *QueryFilter `json:"filter,omitempty"`
}

// PurgeArgs are the arguments of PURGE (GDPR Art. 17 erasure). Reason is
// optional and ends up in the audit record.
//
// The operations schema's purge-args allows key only; Reason follows
// ARSIA-State §3.2.2 and the reference SDK, and is omitted when empty.
type PurgeArgs struct {
	Key    string `json:"key"`
	Reason string `json:"reason,omitempty"`
}

// GrantArgs are the arguments of GRANT. Empty ValidUntil means no expiry.
type GrantArgs struct {
	KeyPattern     string      `json:"key_pattern"`
	GranteeAgentID string      `json:"grantee_agent_id"`
	AccessLevel    AccessLevel `json:"access_level"`
	ValidUntil     string      `json:"valid_until,omitempty"`
}

// RevokeArgs are the arguments of REVOKE.
type RevokeArgs struct {
	GrantID string `json:"grant_id"`
}

// Map returns the args object.
func (a GetArgs) Map() map[string]any { return map[string]any{"key": a.Key} }

// Map returns the args object.
func (a DeleteArgs) Map() map[string]any { return map[string]any{"key": a.Key} }

// Map returns the flat args object; Value is shared, not copied.
func (a SetArgs) Map() map[string]any {
	m := map[string]any{
		"key":                a.Key,
		"value":              a.Value,
		"scope":              string(a.Scope),
		"pii_classification": string(a.PIIClassification),
	}
	if len(a.PIISpecialCategories) > 0 {
		cats := make([]any, len(a.PIISpecialCategories))
		for i, c := range a.PIISpecialCategories {
			cats[i] = c
		}
		m["pii_special_categories"] = cats
	}
	putString(m, "expires_at", a.ExpiresAt)
	putString(m, "data_residency", a.DataResidency)
	if a.RetentionDays != 0 {
		m["retention_days"] = a.RetentionDays
	}
	if a.ExpectedVersion != 0 {
		m["expected_version"] = a.ExpectedVersion
	}
	return m
}

// Map returns the filter object with the members that are set.
func (f QueryFilter) Map() map[string]any {
	m := map[string]any{}
	putString(m, "scope", string(f.Scope))
	putString(m, "owner_agent_id", f.OwnerAgentID)
	putString(m, "key_prefix", f.KeyPrefix)
	putString(m, "pii_classification", string(f.PIIClassification))
	putString(m, "created_after", f.CreatedAfter)
	putString(m, "created_before", f.CreatedBefore)
	return m
}

// Map returns the args object with the members that are set; no filter
// gives an empty object.
func (a QueryArgs) Map() map[string]any {
	m := a.QueryFilter.Map()
	if a.Limit != nil {
		m["limit"] = *a.Limit
	}
	if a.Offset != nil {
		m["offset"] = *a.Offset
	}
	return m
}

// Map returns the args object.
func (a SnapshotArgs) Map() map[string]any {
	m := map[string]any{"as_of": a.AsOf}
	if a.Filter != nil {
		m["filter"] = a.Filter.Map()
	}
	return m
}

// Map returns the args object.
func (a PurgeArgs) Map() map[string]any {
	m := map[string]any{"key": a.Key}
	putString(m, "reason", a.Reason)
	return m
}

// Map returns the args object.
func (a GrantArgs) Map() map[string]any {
	m := map[string]any{"key_pattern": a.KeyPattern, "grantee_agent_id": a.GranteeAgentID, "access_level": string(a.AccessLevel)}
	putString(m, "valid_until", a.ValidUntil)
	return m
}

// Map returns the args object.
func (a RevokeArgs) Map() map[string]any { return map[string]any{"grant_id": a.GrantID} }

func putString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// argsFail wraps ErrInvalidArgs.
func argsFail(op Operation, format string, args ...any) error {
	return fmt.Errorf("%w: %s: "+format, append([]any{ErrInvalidArgs, op}, args...)...)
}

// checkSchema validates m against the operations schema's $defs/def.
func checkSchema(op Operation, m map[string]any, def string) error {
	errs, err := schema.Validate(m, OperationsSchema+"#/$defs/"+def)
	if err != nil {
		return argsFail(op, "%v", err)
	}
	if len(errs) > 0 {
		return argsFail(op, "%s", schema.Join(errs))
	}
	return nil
}

func checkTimestamp(op Operation, name, s string) error {
	if s == "" {
		return nil
	}
	if _, err := arsia.ParseTimestamp(s); err != nil {
		return argsFail(op, "%s: %v", name, err)
	}
	return nil
}

// Validate checks a GET request's arguments.
func (a GetArgs) Validate() error {
	if _, err := ParseKey(a.Key); err != nil {
		return argsFail(OpGet, "%w", err)
	}
	return nil
}

// Validate checks a DELETE request's arguments.
func (a DeleteArgs) Validate() error {
	if _, err := ParseKey(a.Key); err != nil {
		return argsFail(OpDelete, "%w", err)
	}
	return nil
}

// Validate checks SET arguments on their own: the schema, the key (no
// reserved local key), the scope segment against scope, global scope
// (refused with ErrGlobalWrite: agents never write global state), the
// value (ErrInvalidValue, ErrValueTooLarge) and expires_at. Rules that need
// the request (owner, legal basis, residency) are in Check.
func (a SetArgs) Validate() error {
	if a.Scope == ScopeGlobal {
		return fmt.Errorf("%w: %w: SET with scope 'global'", ErrInvalidArgs, ErrGlobalWrite)
	}
	k, err := ParseKey(a.Key)
	if err != nil {
		return argsFail(OpSet, "%w", err)
	}
	if k.Scope == ScopeGlobal {
		return fmt.Errorf("%w: %w: SET of the global key %s", ErrInvalidArgs, ErrGlobalWrite, quote(a.Key))
	}
	if k.Scope != a.Scope {
		return argsFail(OpSet, "scope %s does not match the key's scope segment %s", quote(string(a.Scope)), quote(string(k.Scope)))
	}
	if err := CheckValue(a.Value); err != nil {
		return argsFail(OpSet, "value: %w", err)
	}
	if a.RetentionDays < 0 || a.ExpectedVersion < 0 {
		return argsFail(OpSet, "retention_days and expected_version must be at least 1")
	}
	if err := checkTimestamp(OpSet, "expires_at", a.ExpiresAt); err != nil {
		return err
	}
	return checkSchema(OpSet, a.Map(), "set-args")
}

// Check is Validate plus the rules that depend on the request: the sender
// (ctx.Sender, when set) owns the key, and the classification's legal
// basis and residency rules hold under ctx.Compliance (see ValidateEntry).
func (a SetArgs) Check(ctx EntryContext) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if ctx.Sender != "" {
		if _, err := (KeyPolicy{Owner: ctx.Sender}).Parse(a.Key); err != nil {
			return fmt.Errorf("%w: %w: SET: %v", ErrInvalidArgs, ErrForbidden, err)
		}
	}
	return checkPII(a.PIIClassification, a.PIISpecialCategories, a.DataResidency, ctx)
}

// NewSetArgs builds the SET arguments that write e: key, value, scope,
// pii_classification and the optional members e sets, plus
// expectedVersion when positive. It fails like SetArgs.Validate, notably
// for a global entry.
func NewSetArgs(e *Entry, expectedVersion int) (SetArgs, error) {
	if e == nil {
		return SetArgs{}, argsFail(OpSet, "no entry")
	}
	a := SetArgs{
		Key: e.Key, Value: e.Value, Scope: e.Scope, PIIClassification: e.PIIClassification,
		PIISpecialCategories: e.PIISpecialCategories, RetentionDays: e.RetentionDays,
		DataResidency: e.DataResidency, ExpectedVersion: expectedVersion,
	}
	if !e.ExpiresAt.IsZero() {
		a.ExpiresAt = arsia.FormatTimestamp(e.ExpiresAt)
	}
	if err := a.Validate(); err != nil {
		return SetArgs{}, err
	}
	return a, nil
}

func (f QueryFilter) validate(op Operation) error {
	if f.Scope != "" && !f.Scope.Valid() {
		return argsFail(op, "unknown scope %s", quote(string(f.Scope)))
	}
	if f.PIIClassification != "" && !f.PIIClassification.Valid() {
		return argsFail(op, "unknown pii_classification %s", quote(string(f.PIIClassification)))
	}
	if f.OwnerAgentID != "" && !arsia.ValidAgentID(f.OwnerAgentID) {
		return argsFail(op, "owner_agent_id %s is not a valid agent identifier", quote(f.OwnerAgentID))
	}
	return errors.Join(checkTimestamp(op, "created_after", f.CreatedAfter), checkTimestamp(op, "created_before", f.CreatedBefore))
}

// Validate checks QUERY arguments: known scope and classification, a valid
// owner, wire timestamps, limit ≥ 1 and offset ≥ 0. A limit above
// MaxQueryLimit is valid; stores clamp it.
func (a QueryArgs) Validate() error {
	if err := a.QueryFilter.validate(OpQuery); err != nil {
		return err
	}
	if a.Limit != nil && *a.Limit < 1 {
		return argsFail(OpQuery, "limit %d is below 1", *a.Limit)
	}
	if a.Offset != nil && *a.Offset < 0 {
		return argsFail(OpQuery, "offset %d is negative", *a.Offset)
	}
	return checkSchema(OpQuery, a.Map(), "query-args")
}

// Validate checks SNAPSHOT arguments: as_of is required and a wire
// timestamp; the filter is a valid QUERY filter. Whether as_of lies in the
// future or before the retained history is the store's check.
func (a SnapshotArgs) Validate() error {
	if a.AsOf == "" {
		return argsFail(OpSnapshot, "as_of is required")
	}
	if err := checkTimestamp(OpSnapshot, "as_of", a.AsOf); err != nil {
		return err
	}
	if a.Filter != nil {
		if err := a.Filter.validate(OpSnapshot); err != nil {
			return err
		}
	}
	return checkSchema(OpSnapshot, a.Map(), "snapshot-args")
}

// Validate checks PURGE arguments: a valid key and, if given, a reason of
// at most 1024 characters.
func (a PurgeArgs) Validate() error {
	if _, err := ParseKey(a.Key); err != nil {
		return argsFail(OpPurge, "%w", err)
	}
	if len(a.Reason) > 1024 {
		return argsFail(OpPurge, "reason is longer than 1024 bytes")
	}
	return nil
}

// Validate checks GRANT arguments without knowing the grantor: the key
// pattern's syntax (a key, or a prefix within an agent namespace ending in
// '*'), the grantee, the access level (read or read_write) and valid_until.
// Stores use Check.
func (a GrantArgs) Validate() error { return a.Check("") }

// Check is Validate for a request from grantor: the pattern must lie in
// grantor's namespace, and an agent cannot grant to itself.
func (a GrantArgs) Check(grantor string) error {
	if _, err := ParseKeyPattern(a.KeyPattern, grantor); err != nil {
		return err
	}
	if !arsia.ValidAgentID(a.GranteeAgentID) {
		return argsFail(OpGrant, "grantee_agent_id %s is not a valid agent identifier", quote(a.GranteeAgentID))
	}
	if grantor != "" && a.GranteeAgentID == grantor {
		return argsFail(OpGrant, "an agent cannot grant access to itself")
	}
	if !a.AccessLevel.Valid() {
		return argsFail(OpGrant, "access_level %s must be 'read' or 'read_write'", quote(string(a.AccessLevel)))
	}
	if err := checkTimestamp(OpGrant, "valid_until", a.ValidUntil); err != nil {
		return err
	}
	return checkSchema(OpGrant, a.Map(), "grant-args")
}

// Validate checks REVOKE arguments: grant_id is a UUID.
func (a RevokeArgs) Validate() error { return checkSchema(OpRevoke, a.Map(), "revoke-args") }

// decodeArgs converts a decoded args object into dst, refusing unknown
// members, non-JSON values and members of the wrong type.
func decodeArgs(op Operation, m map[string]any, dst any) error {
	if m == nil {
		return argsFail(op, "args is missing or not an object")
	}
	c, err := jcs.CanonicalizeValue(m)
	if err != nil {
		return argsFail(op, "%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(c))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return argsFail(op, "%v", err)
	}
	return nil
}

// ParseGetArgs converts and validates a GET payload.args object.
func ParseGetArgs(m map[string]any) (GetArgs, error) {
	var a GetArgs
	if err := decodeArgs(OpGet, m, &a); err != nil {
		return GetArgs{}, err
	}
	return validated(a)
}

// ParseDeleteArgs converts and validates a DELETE payload.args object.
func ParseDeleteArgs(m map[string]any) (DeleteArgs, error) {
	var a DeleteArgs
	if err := decodeArgs(OpDelete, m, &a); err != nil {
		return DeleteArgs{}, err
	}
	return validated(a)
}

// ParseSetArgs converts and validates (SetArgs.Validate) a SET
// payload.args object. Numbers in the value come back as json.Number.
func ParseSetArgs(m map[string]any) (SetArgs, error) {
	var a SetArgs
	if err := decodeArgs(OpSet, m, &a); err != nil {
		return SetArgs{}, err
	}
	if _, ok := m["value"]; !ok {
		return SetArgs{}, argsFail(OpSet, "value is required")
	}
	return validated(a)
}

// ParseQueryArgs converts and validates a QUERY payload.args object.
func ParseQueryArgs(m map[string]any) (QueryArgs, error) {
	var a QueryArgs
	if err := decodeArgs(OpQuery, m, &a); err != nil {
		return QueryArgs{}, err
	}
	return validated(a)
}

// ParseSnapshotArgs converts and validates a SNAPSHOT payload.args object.
func ParseSnapshotArgs(m map[string]any) (SnapshotArgs, error) {
	var a SnapshotArgs
	if err := decodeArgs(OpSnapshot, m, &a); err != nil {
		return SnapshotArgs{}, err
	}
	return validated(a)
}

// ParsePurgeArgs converts and validates a PURGE payload.args object.
func ParsePurgeArgs(m map[string]any) (PurgeArgs, error) {
	var a PurgeArgs
	if err := decodeArgs(OpPurge, m, &a); err != nil {
		return PurgeArgs{}, err
	}
	return validated(a)
}

// ParseGrantArgs converts and validates (GrantArgs.Validate) a GRANT
// payload.args object. A null valid_until means no expiry.
func ParseGrantArgs(m map[string]any) (GrantArgs, error) {
	var a GrantArgs
	if err := decodeArgs(OpGrant, m, &a); err != nil {
		return GrantArgs{}, err
	}
	return validated(a)
}

// ParseRevokeArgs converts and validates a REVOKE payload.args object.
func ParseRevokeArgs(m map[string]any) (RevokeArgs, error) {
	var a RevokeArgs
	if err := decodeArgs(OpRevoke, m, &a); err != nil {
		return RevokeArgs{}, err
	}
	return validated(a)
}

// validated returns a when it is valid and the zero value with the error
// otherwise, so that no caller uses arguments that failed.
func validated[T interface{ Validate() error }](a T) (T, error) {
	if err := a.Validate(); err != nil {
		var zero T
		return zero, err
	}
	return a, nil
}
