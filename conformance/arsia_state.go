package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/state"
	"github.com/custos-runtime/custos/jcs"
)

// stateAuditRecordID is the record id of build_audit_record records: the
// suite fixes none and the record must be reproducible.
const stateAuditRecordID = "00000000-0000-4000-8000-000000000001"

// stateStorageNow is the clock of the storage cases, which fix none.
var stateStorageNow = time.Date(2026, 4, 13, 12, 0, 0, 0, time.UTC)

// execState runs the state category: key grammar, value limits, entry
// validation, retention, capabilities, payload hashes, audit records, the
// request-argument builders and (for the skip-gated storage cases) a
// MemoryStore round trip.
func execState(_ *arsiaEnv, c *arsiaCase) error {
	in := c.Input
	str := func(k string) string { s, _ := in[k].(string); return s }
	switch op := c.operation(""); op {
	case "validate_state_key":
		k, err := state.KeyPolicy{Owner: str("expected_owner")}.Parse(str("key"))
		if err == nil {
			if want := str("expected_scope"); want != "" && string(k.Scope) != want {
				err = fmt.Errorf("scope %q, want %q", k.Scope, want)
			}
		}
		return expectValidity(c, stateErrs(err))

	case "enforce_value_size":
		return expectValidity(c, stateErrs(state.CheckValue(in["value"])))

	case "effective_retention":
		var days *int
		if v, present := in["entry_retention_days"]; present && v != nil {
			n, ok := v.(int)
			if !ok {
				return fmt.Errorf("entry_retention_days %v is not an integer", v)
			}
			days = &n
		}
		got, err := state.EffectiveRetention(compliance.Default(), str("profile_name"), days)
		if done, res := expectRaises(c, err); done {
			return res
		}
		var out any
		if got != nil {
			out = *got
		}
		return expectEqual(c, "retention_days", out)

	case "required_capability":
		o, err := state.ParseOperation(str("operation_name"))
		if err != nil {
			return err
		}
		capability, err := state.RequiredCapability(o)
		if err != nil {
			return err
		}
		return expectEqual(c, "capability", capability)

	case "wildcard_covers":
		return expectEqual(c, "covered", state.Covers(str("wildcard"), str("capability")))

	case "compute_payload_hash":
		payload, ok := in["payload"].(map[string]any)
		if !ok {
			return errors.New("input.payload is missing or not an object")
		}
		got, err := state.PayloadHash(payload)
		if err != nil {
			return err
		}
		want, _ := c.Expected["sha256_hex"].(string)
		if want == "" {
			// Null in the suite: compute SHA-256(JCS(payload)) independently.
			canon, err := jcs.CanonicalizeValue(payload)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(canon)
			want = hex.EncodeToString(sum[:])
		}
		if got != want {
			return fmt.Errorf("sha256_hex: got %s, want %s", got, want)
		}
		return nil

	case "build_audit_record":
		env, err := caseEnvelope(c)
		if err != nil {
			return err
		}
		processed, err := arsia.ParseTimestamp(str("processed_at"))
		if err != nil {
			if processed, err = arsia.ParseTimestamp(fmt.Sprint(env["ts"])); err != nil {
				return fmt.Errorf("envelope ts: %v", err)
			}
		}
		ain := state.AuditInput{RecordID: stateAuditRecordID, EventType: str("event_type"), OperatorID: str("operator_id"),
			ProcessedAt: processed, Partial: true}
		if n, ok := in["effective_retention_days"].(int); ok {
			ain.RetentionDays = n
		}
		rec, err := state.NewAuditRecord(env, compliance.Default(), ain)
		if done, res := expectRaises(c, err); done {
			return res
		}
		m := rec.Map()
		return firstErr(expectEqual(c, "event_type", m["event_type"]),
			expectEqual(c, "compliance_profile", m["compliance_profile"]),
			stateExpectKeys(c, m))

	case "set_args_shape":
		entryMap, _ := in["entry"].(map[string]any)
		e, err := state.EntryFromMap(entryMap)
		var args state.SetArgs
		if err == nil {
			expected := 0
			if v, present := in["expected_version"]; present {
				n, ok := v.(int)
				if !ok || n < 1 {
					return fmt.Errorf("expected_version %v is not a positive integer", v)
				}
				expected = n
			}
			args, err = state.NewSetArgs(e, expected)
		}
		return stateShape(c, err, args.Map)

	case "query_args_shape":
		args, err := stateQueryArgs(in)
		if err == nil {
			err = args.Validate()
		}
		return stateShape(c, err, args.Map)

	case "snapshot_args_shape":
		args := state.SnapshotArgs{AsOf: str("as_of")}
		var err error
		if f, ok := in["filter"].(map[string]any); ok {
			var q state.QueryArgs
			q, err = stateQueryArgs(f)
			args.Filter = &q.QueryFilter
		}
		if err == nil {
			err = args.Validate()
		}
		return stateShape(c, err, args.Map)

	case "purge_args_shape":
		args := state.PurgeArgs{Key: str("key"), Reason: str("reason")}
		return stateShape(c, args.Validate(), args.Map)

	case "grant_args_shape":
		args := state.GrantArgs{KeyPattern: str("key_pattern"), GranteeAgentID: str("grantee_agent_id"),
			AccessLevel: state.AccessLevel(str("access_level")), ValidUntil: str("valid_until")}
		return stateShape(c, args.Validate(), args.Map)

	case "revoke_args_shape":
		args := state.RevokeArgs{GrantID: str("grant_id")}
		return stateShape(c, args.Validate(), args.Map)

	case "validate_state_entry":
		entryMap, _ := in["entry"].(map[string]any)
		ctx := state.EntryContext{Sender: str("sender_agent_id"), Registry: compliance.Default()}
		if comp, ok := in["envelope_compliance"].(map[string]any); ok {
			ctx.Compliance = comp
		}
		return expectValidity(c, stateErrs(state.ValidateEntry(entryMap, ctx)))

	case "set_then_get", "version_conflict", "query", "snapshot", "delete_missing":
		return execStateStorage(c, op)
	}
	return fmt.Errorf("%w: state operation %q", errUnsupported, c.operation(""))
}

// execStateStorage runs the storage cases against a fresh MemoryStore, as
// the owner of the case's key.
func execStateStorage(c *arsiaCase, op string) error {
	ctx := context.Background()
	s := state.NewMemoryStore(nil)
	now := stateStorageNow
	key, _ := c.Input["key"].(string)
	owner := "agent:external.demo"
	if k, err := state.ParseKey(key); err == nil {
		owner = k.Owner
	}
	set := func(key string, v any, expected int, at time.Time) (*state.Entry, error) {
		k, err := state.ParseKey(key)
		if err != nil {
			return nil, err
		}
		return s.Set(ctx, owner, state.SetArgs{Key: key, Value: v, Scope: k.Scope, PIIClassification: state.PIINone,
			ExpectedVersion: expected}, nil, at)
	}
	switch op {
	case "set_then_get":
		if _, err := set(key, map[string]any{"n": 1}, 0, now); err != nil {
			return expectValidity(c, stateErrs(err))
		}
		got, err := s.Get(ctx, owner, state.GetArgs{Key: key}, now)
		if err == nil && (got == nil || !sameJSON(got.Value, map[string]any{"n": 1})) {
			err = fmt.Errorf("GET returned %v", got)
		}
		return expectValidity(c, stateErrs(err))

	case "version_conflict":
		var err error
		for i := 0; i < 2 && err == nil; i++ {
			_, err = set(key, i, 0, now)
		}
		if err != nil {
			return err
		}
		_, err = set(key, "stale", 1, now)
		var ae *arsia.Error
		if !errors.As(err, &ae) {
			return fmt.Errorf("stale SET: got %v, want a wire error", err)
		}
		return expectEqual(c, "error_code", ae.Code)

	case "query":
		prefix, _ := c.Input["key_prefix"].(string)
		scope, _ := c.Input["scope"].(string)
		if k, err := state.ParseKey(prefix + "probe"); err == nil {
			owner = k.Owner
		}
		for _, k := range []string{prefix + "a", prefix + "b", owner + "/shared/c", owner + "/session/d"} {
			if _, err := set(k, k, 0, now); err != nil {
				return err
			}
		}
		res, err := s.Query(ctx, owner, state.QueryArgs{QueryFilter: state.QueryFilter{KeyPrefix: prefix, Scope: state.Scope(scope)}}, now)
		if err == nil && res.Total != 2 {
			err = fmt.Errorf("QUERY matched %d entries, want 2", res.Total)
		}
		return expectValidity(c, stateErrs(err))

	case "snapshot":
		asOfStr, _ := c.Input["as_of"].(string)
		asOf, err := arsia.ParseTimestamp(asOfStr)
		if err != nil {
			return err
		}
		k := owner + "/agent/snap"
		if _, err := set(k, "before", 0, asOf.Add(-time.Hour)); err != nil {
			return err
		}
		if _, err := set(k, "after", 0, asOf.Add(time.Hour)); err != nil {
			return err
		}
		res, err := s.Snapshot(ctx, owner, state.SnapshotArgs{AsOf: asOfStr}, asOf.Add(2*time.Hour))
		if err == nil && (len(res.Entries) != 1 || !sameJSON(res.Entries[0].Value, "before")) {
			err = fmt.Errorf("SNAPSHOT returned %s", compactJSON(res.Map()))
		}
		return expectValidity(c, stateErrs(err))

	case "delete_missing":
		_, _ = s.Delete(ctx, owner, state.DeleteArgs{Key: key}, now) // nothing to delete: not_found
		got, err := s.Get(ctx, owner, state.GetArgs{Key: key}, now)
		if err != nil {
			return err
		}
		var result any
		if got != nil {
			result = got.Map()
		}
		return expectEqual(c, "result", result)
	}
	return fmt.Errorf("%w: state operation %q", errUnsupported, op)
}

// stateQueryArgs builds QueryArgs from a case's generic filter members.
func stateQueryArgs(m map[string]any) (state.QueryArgs, error) {
	str := func(k string) string { s, _ := m[k].(string); return s }
	a := state.QueryArgs{QueryFilter: state.QueryFilter{
		Scope: state.Scope(str("scope")), OwnerAgentID: str("owner_agent_id"), KeyPrefix: str("key_prefix"),
		PIIClassification: state.PII(str("pii_classification")), CreatedAfter: str("created_after"),
		CreatedBefore: str("created_before"),
	}}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"limit", &a.Limit}, {"offset", &a.Offset}} {
		if v, present := m[f.name]; present {
			n, ok := v.(int)
			if !ok {
				return a, fmt.Errorf("%s %v is not an integer", f.name, v)
			}
			*f.dst = &n
		}
	}
	return a, nil
}

// stateShape applies expected.valid to err and, when the args are valid,
// expected.required_keys and expected.absent_keys to the args object.
func stateShape(c *arsiaCase, err error, argsMap func() map[string]any) error {
	if res := expectValidity(c, stateErrs(err)); res != nil || err != nil {
		return res
	}
	return stateExpectKeys(c, argsMap())
}

// stateExpectKeys applies expected.required_keys and expected.absent_keys to m.
func stateExpectKeys(c *arsiaCase, m map[string]any) error {
	list := func(key string) []string {
		var out []string
		items, _ := c.Expected[key].([]any)
		for _, it := range items {
			if s, ok := it.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	for _, k := range list("required_keys") {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("required key %q missing from %s", k, compactJSON(m))
		}
	}
	for _, k := range list("absent_keys") {
		if _, ok := m[k]; ok {
			return fmt.Errorf("key %q must be absent from %s", k, compactJSON(m))
		}
	}
	return nil
}

// stateErrs returns err's text as a one-element list, or nil.
func stateErrs(err error) []string {
	if err == nil {
		return nil
	}
	return []string{err.Error()}
}
