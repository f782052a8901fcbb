// Package statetest is the conformance kit of state.Store: Run holds a
// store implementation to the behaviour of ARSIA-State (and of
// state.MemoryStore, the reference): versions and expected_version
// conflicts, logical deletes, queries, snapshots as of a past instant,
// purges, grants and revocations, the protocol's refusals and limits.
//
//	func TestConformance(t *testing.T) {
//		statetest.Run(t, func(t *testing.T, o *state.StoreOptions) state.Store { return open(t, o) })
//	}
//
// Every subtest gets a fresh, empty store from the factory, with the
// options it needs (nil for the defaults).
package statetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/state"
)

// Factory returns a new, empty store configured by o (nil: defaults).
// It registers its own cleanup with t.
type Factory func(t *testing.T, o *state.StoreOptions) state.Store

// The agents of the kit.
const (
	Alice = "agent:acme.alpha"
	Bob   = "agent:acme.beta"
	Carol = "agent:acme.gamma"
)

// T0 is the kit's start time.
var T0 = time.Date(2026, 4, 13, 12, 0, 0, 0, time.UTC)

// SeqIDs returns a NewID of predictable grant ids.
func SeqIDs() func() string {
	var n atomic.Int64
	return func() string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n.Add(1)) }
}

// Run runs every case of the kit against stores from f.
func Run(t *testing.T, f Factory) {
	t.Run("Versions", func(t *testing.T) { testVersions(t, f) })
	t.Run("Rules", func(t *testing.T) { testRules(t, f) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, f) })
	t.Run("Query", func(t *testing.T) { testQuery(t, f) })
	t.Run("Snapshot", func(t *testing.T) { testSnapshot(t, f) })
	t.Run("Purge", func(t *testing.T) { testPurge(t, f) })
	t.Run("Grants", func(t *testing.T) { testGrants(t, f) })
	t.Run("Limits", func(t *testing.T) { testLimits(t, f) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, f) })
}

// SetArgs returns the SET of v under key, unclassified.
func SetArgs(key string, v any) state.SetArgs {
	k, _ := state.ParseKey(key)
	return state.SetArgs{Key: key, Value: v, Scope: k.Scope, PIIClassification: state.PIINone}
}

// Code returns err's wire code, "" when it is none.
func Code(err error) string {
	var ae *arsia.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "!" + err.Error()
	}
	return string(b)
}

func details(err error) map[string]any {
	var ae *arsia.Error
	if errors.As(err, &ae) {
		return ae.Details
	}
	return nil
}

// num compares a detail number whatever its Go type.
func num(v any) string { return fmt.Sprint(v) }

func testVersions(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f(t, &state.StoreOptions{NewID: SeqIDs()})
	key := Alice + "/agent/counter"
	e, err := s.Set(ctx, Alice, SetArgs(key, 1), nil, T0)
	if err != nil || e.Version != 1 || !e.CreatedAt.Equal(T0) || e.OwnerAgentID != Alice || e.Scope != state.ScopeAgent {
		t.Fatalf("first SET = %+v, %v", e, err)
	}
	a := SetArgs(key, 2)
	a.ExpectedVersion = 1
	if e, err = s.Set(ctx, Alice, a, nil, T0.Add(time.Second)); err != nil || e.Version != 2 || !e.CreatedAt.Equal(T0) || !e.UpdatedAt.Equal(T0.Add(time.Second)) {
		t.Fatalf("conditional SET = %+v, %v", e, err)
	}
	_, err = s.Set(ctx, Alice, a, nil, T0.Add(2*time.Second)) // stale: expects 1, is 2
	if d := details(err); Code(err) != arsia.CodeConflict || !errors.Is(err, state.ErrConflict) ||
		num(d["current_version"]) != "2" || num(d["expected_version"]) != "1" {
		t.Fatalf("stale SET = %v (%v)", err, d)
	}
	got, err := s.Get(ctx, Alice, state.GetArgs{Key: key}, T0.Add(3*time.Second))
	if err != nil || got == nil || got.Version != 2 || js(got.Value) != "2" {
		t.Fatalf("GET = %+v, %v", got, err)
	}
	if got, err := s.Get(ctx, Alice, state.GetArgs{Key: Alice + "/agent/never"}, T0); got != nil || err != nil {
		t.Fatalf("GET of a missing key = %+v, %v (want nil, nil)", got, err)
	}
	d, err := s.Delete(ctx, Alice, state.DeleteArgs{Key: key}, T0.Add(4*time.Second))
	if err != nil || d.Version != 2 || js(d.Map()) != `{"deleted":true,"key":"`+key+`"}` {
		t.Fatalf("DELETE = %+v, %v", d, err)
	}
	if got, err := s.Get(ctx, Alice, state.GetArgs{Key: key}, T0.Add(5*time.Second)); got != nil || err != nil {
		t.Fatalf("GET after DELETE = %+v, %v", got, err)
	}
	if _, err := s.Delete(ctx, Alice, state.DeleteArgs{Key: key}, T0.Add(5*time.Second)); Code(err) != arsia.CodeNotFound {
		t.Fatalf("second DELETE = %v", err)
	}
	if _, err := s.Delete(ctx, Alice, state.DeleteArgs{Key: Alice + "/agent/ghost"}, T0); Code(err) != arsia.CodeNotFound || !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("DELETE of a missing key = %v", err)
	}
	a.ExpectedVersion = 2
	if _, err := s.Set(ctx, Alice, a, nil, T0.Add(6*time.Second)); Code(err) != arsia.CodeConflict {
		t.Fatalf("SET expecting 2 on a deleted key = %v", err)
	}
	if e, err = s.Set(ctx, Alice, SetArgs(key, 3), nil, T0.Add(6*time.Second)); err != nil || e.Version != 1 || !e.CreatedAt.Equal(T0.Add(6*time.Second)) {
		t.Fatalf("recreate = %+v, %v", e, err)
	}
	// Values keep their JSON exactly and are handed out as copies.
	obj := map[string]any{"a": 1, "b": []any{"x", true, nil}, "c": 1.5}
	m, err := s.Set(ctx, Alice, SetArgs(Alice+"/agent/obj", obj), nil, T0)
	if err != nil {
		t.Fatal(err)
	}
	m.Value.(map[string]any)["a"] = 99
	again, _ := s.Get(ctx, Alice, state.GetArgs{Key: Alice + "/agent/obj"}, T0)
	if again == nil || js(again.Value) != `{"a":1,"b":["x",true,null],"c":1.5}` {
		t.Errorf("value after round trip: %+v", again)
	}
	// Every member of the entry survives.
	full := state.SetArgs{Key: Alice + "/agent/full", Value: "v", Scope: state.ScopeAgent, PIIClassification: state.PIISensitive,
		PIISpecialCategories: []string{"health"}, ExpiresAt: "2026-05-01T00:00:00.000Z", RetentionDays: 30, DataResidency: "PT"}
	if _, err := s.Set(ctx, Alice, full, map[string]any{"legal_basis": "explicit_consent", "data_residency": "PT"}, T0); err != nil {
		t.Fatal(err)
	}
	fe, err := s.Get(ctx, Alice, state.GetArgs{Key: full.Key}, T0)
	if err != nil || fe == nil {
		t.Fatalf("GET full = %v", err)
	}
	if want := `{"created_at":"2026-04-13T12:00:00.000Z","data_residency":"PT","expires_at":"2026-05-01T00:00:00.000Z","key":"` + full.Key +
		`","owner_agent_id":"` + Alice + `","pii_classification":"sensitive","pii_special_categories":["health"],"retention_days":30,"scope":"agent","updated_at":"2026-04-13T12:00:00.000Z","value":"v","version":1}`; js(fe.Map()) != want {
		t.Errorf("full entry\n got %s\nwant %s", js(fe.Map()), want)
	}
}

func testRules(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f(t, &state.StoreOptions{Zones: []string{"PT"}})
	personal := state.SetArgs{Key: Alice + "/agent/p", Value: "x", Scope: state.ScopeAgent, PIIClassification: state.PIIPersonal, DataResidency: "PT"}
	tests := []struct {
		name  string
		actor string
		args  state.SetArgs
		comp  map[string]any
		now   time.Time
		code  string
	}{
		{"foreign namespace", Bob, SetArgs(Alice+"/agent/x", 1), nil, T0, arsia.CodeForbidden},
		{"global", Alice, SetArgs(Alice+"/global/x", 1), nil, T0, arsia.CodeForbidden},
		{"reserved", Alice, SetArgs(Alice+"/agent/arsiaprotocol.grants/1", 1), nil, T0, arsia.CodeForbidden},
		{"too large", Alice, SetArgs(Alice+"/agent/big", string(make([]byte, state.MaxValueBytes))), nil, T0, arsia.CodePayloadTooLarge},
		{"no legal basis", Alice, personal, map[string]any{"profile": "GDPR-STANDARD"}, T0, arsia.CodeInvalidRequest},
		{"personal ok", Alice, personal, map[string]any{"legal_basis": "consent"}, T0, ""},
		{"zone", Alice, state.SetArgs{Key: Alice + "/agent/z", Value: 1, Scope: state.ScopeAgent, PIIClassification: state.PIINone, DataResidency: "US"}, nil, T0, arsia.CodeInvalidRequest},
		{"expired", Alice, state.SetArgs{Key: Alice + "/agent/e", Value: 1, Scope: state.ScopeAgent, PIIClassification: state.PIINone, ExpiresAt: "2026-04-13T11:00:00.000Z"}, nil, T0, arsia.CodeInvalidRequest},
		{"session 25h", Alice, state.SetArgs{Key: Alice + "/session/s", Value: 1, Scope: state.ScopeSession, PIIClassification: state.PIINone, ExpiresAt: "2026-04-14T13:00:00.000Z"}, nil, T0, arsia.CodeInvalidRequest},
		{"scope mismatch", Alice, state.SetArgs{Key: Alice + "/agent/m", Value: 1, Scope: state.ScopeShared, PIIClassification: state.PIINone}, nil, T0, arsia.CodeInvalidRequest},
		{"bad key", Alice, state.SetArgs{Key: "not a key", Value: 1, Scope: state.ScopeAgent, PIIClassification: state.PIINone}, nil, T0, arsia.CodeInvalidRequest},
		{"bad actor", "bob", SetArgs(Alice+"/agent/x", 1), nil, T0, arsia.CodeInvalidRequest},
		{"no clock", Alice, SetArgs(Alice+"/agent/x", 1), nil, time.Time{}, arsia.CodeInvalidRequest},
	}
	for _, tt := range tests {
		_, err := s.Set(ctx, tt.actor, tt.args, tt.comp, tt.now)
		if got := Code(err); got != tt.code {
			t.Errorf("%s: code %q (%v), want %q", tt.name, got, err, tt.code)
		}
	}
	// Refused writes left nothing behind.
	if res, err := s.Query(ctx, Alice, state.QueryArgs{}, T0); err != nil || res.Total != 1 || res.Entries[0].Key != personal.Key {
		t.Errorf("after the refusals: %+v, %v", res, err)
	}
	if e, err := s.Set(ctx, Alice, SetArgs(Alice+"/agent/inherit", 1), map[string]any{"profile": "MIFID-II"}, T0); err != nil || e.DataResidency != "EU" {
		t.Errorf("inherited residency = %+v, %v", e, err)
	}
	us := f(t, &state.StoreOptions{Zones: []string{"US"}})
	_, err := us.Set(ctx, Alice, SetArgs(Alice+"/agent/inherit", 1), map[string]any{"profile": "MIFID-II"}, T0)
	if d := details(err); d["data_residency_violation"] != true || d["required_zone"] != "EU" {
		t.Errorf("EU data in a US store: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Get(cancelled, Alice, state.GetArgs{Key: Alice + "/agent/x"}, T0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled GET = %v", err)
	}
	if _, err := s.Set(cancelled, Alice, SetArgs(Alice+"/agent/x", 1), nil, T0); err == nil {
		t.Error("cancelled SET succeeded")
	}
	if got, _ := s.Get(ctx, Alice, state.GetArgs{Key: Alice + "/agent/x"}, T0); got != nil {
		t.Error("cancelled SET wrote")
	}
	for _, bad := range []string{"", "agent:acme.alpha", "agent:acme.alpha/nowhere/x", Alice + "/agent/arsiaprotocol.x"} {
		if _, err := s.Get(ctx, Alice, state.GetArgs{Key: bad}, T0); Code(err) == "" {
			t.Errorf("GET %q accepted", bad)
		}
		if _, err := s.Delete(ctx, Alice, state.DeleteArgs{Key: bad}, T0); Code(err) == "" {
			t.Errorf("DELETE %q accepted", bad)
		}
	}
}

func testExpiry(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f(t, nil)
	a := SetArgs(Alice+"/session/tmp", "x")
	a.ExpiresAt = "2026-04-13T13:00:00.000Z"
	if _, err := s.Set(ctx, Alice, a, nil, T0); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, Alice, state.GetArgs{Key: a.Key}, T0.Add(59*time.Minute)); got == nil {
		t.Error("entry gone before expiry")
	}
	if got, _ := s.Get(ctx, Alice, state.GetArgs{Key: a.Key}, T0.Add(time.Hour)); got != nil {
		t.Error("expired entry returned")
	}
	if res, _ := s.Query(ctx, Alice, state.QueryArgs{}, T0.Add(2*time.Hour)); res.Total != 0 {
		t.Error("expired entry queried")
	}
	if _, err := s.Delete(ctx, Alice, state.DeleteArgs{Key: a.Key}, T0.Add(2*time.Hour)); Code(err) != arsia.CodeNotFound {
		t.Errorf("DELETE of an expired entry = %v", err)
	}
}

func testQuery(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f(t, nil)
	for i, k := range []string{"agent/b", "agent/a", "shared/c", "agent/d"} {
		a := SetArgs(Alice+"/"+k, i)
		if k == "agent/d" {
			a.PIIClassification, a.DataResidency = state.PIIPersonal, "PT"
		}
		if _, err := s.Set(ctx, Alice, a, map[string]any{"legal_basis": "consent"}, T0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Set(ctx, Bob, SetArgs(Bob+"/agent/secret", 1), nil, T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, Alice, SetArgs(Alice+"/agent/gone", 1), nil, T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, Alice, state.DeleteArgs{Key: Alice + "/agent/gone"}, T0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	keys := func(r *state.QueryResult) string {
		var out string
		for _, e := range r.Entries {
			out += e.Key[len(Alice)+1:] + " "
		}
		return out
	}
	two, one, big := 2, 1, 5000
	tests := []struct {
		args  state.QueryArgs
		want  string
		total int
	}{
		{state.QueryArgs{}, "agent/b agent/a shared/c agent/d ", 4},
		{state.QueryArgs{QueryFilter: state.QueryFilter{Scope: state.ScopeAgent, KeyPrefix: Alice + "/agent/"}}, "agent/b agent/a agent/d ", 3},
		{state.QueryArgs{QueryFilter: state.QueryFilter{Scope: state.ScopeShared}}, "shared/c ", 1},
		{state.QueryArgs{QueryFilter: state.QueryFilter{PIIClassification: state.PIIPersonal}}, "agent/d ", 1},
		{state.QueryArgs{QueryFilter: state.QueryFilter{OwnerAgentID: Bob}}, "", 0},
		{state.QueryArgs{QueryFilter: state.QueryFilter{OwnerAgentID: Alice}}, "agent/b agent/a shared/c agent/d ", 4},
		{state.QueryArgs{QueryFilter: state.QueryFilter{KeyPrefix: Alice + "/agent/%"}}, "", 0},
		{state.QueryArgs{QueryFilter: state.QueryFilter{KeyPrefix: Alice + "/agent/_"}}, "", 0},
		{state.QueryArgs{QueryFilter: state.QueryFilter{CreatedAfter: "2026-04-13T12:00:00.000Z", CreatedBefore: "2026-04-13T12:00:03.000Z"}}, "agent/a shared/c ", 2},
		{state.QueryArgs{Limit: &two, Offset: &one}, "agent/a shared/c ", 4},
		{state.QueryArgs{Limit: &big}, "agent/b agent/a shared/c agent/d ", 4},
	}
	for i, tt := range tests {
		res, err := s.Query(ctx, Alice, tt.args, T0.Add(time.Minute))
		if err != nil || keys(res) != tt.want || res.Total != tt.total {
			t.Errorf("%d: got %q (%v), want %q total %d", i, keys(res), err, tt.want, tt.total)
		}
	}
	res, _ := s.Query(ctx, Alice, state.QueryArgs{Limit: &big}, T0)
	if res.Limit != state.MaxQueryLimit {
		t.Errorf("limit not clamped: %d", res.Limit)
	}
	if res, _ := s.Query(ctx, Alice, state.QueryArgs{}, T0); res.Limit != state.DefaultQueryLimit || res.Offset != 0 {
		t.Errorf("default paging %d/%d", res.Limit, res.Offset)
	}
	neg := -1
	if _, err := s.Query(ctx, Alice, state.QueryArgs{Limit: &neg}, T0); Code(err) != arsia.CodeInvalidRequest {
		t.Errorf("negative limit = %v", err)
	}
	if res, _ := s.Query(ctx, Carol, state.QueryArgs{}, T0.Add(time.Minute)); res.Total != 0 || res.Entries == nil {
		t.Errorf("carol sees %+v", res)
	}
}

func testSnapshot(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f(t, nil)
	key := Alice + "/agent/snap"
	if res, err := s.Snapshot(ctx, Alice, state.SnapshotArgs{AsOf: arsia.FormatTimestamp(T0)}, T0); err != nil || len(res.Entries) != 0 || res.Hash == "" {
		t.Errorf("snapshot of an empty store = %+v, %v", res, err)
	}
	for i, v := range []string{"v1", "v2"} {
		if _, err := s.Set(ctx, Alice, SetArgs(key, v), nil, T0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Delete(ctx, Alice, state.DeleteArgs{Key: key}, T0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	now := T0.Add(3 * time.Hour)
	at := func(d time.Duration) string { return arsia.FormatTimestamp(T0.Add(d)) }
	tests := []struct {
		asOf    string
		value   string
		version int
		deleted bool
	}{
		{at(0), `"v1"`, 1, false},
		{at(30 * time.Minute), `"v1"`, 1, false},
		{at(time.Hour - time.Millisecond), `"v1"`, 1, false},
		{at(time.Hour), `"v2"`, 2, false},
		{at(150 * time.Minute), `"v2"`, 2, true},
	}
	hashes := map[string]string{}
	for _, tt := range tests {
		res, err := s.Snapshot(ctx, Alice, state.SnapshotArgs{AsOf: tt.asOf}, now)
		if err != nil || len(res.Entries) != 1 || js(res.Entries[0].Value) != tt.value || res.Entries[0].Deleted != tt.deleted || res.Entries[0].Version != tt.version {
			t.Errorf("as_of %s: %s, %v", tt.asOf, js(res), err)
			continue
		}
		if res.Hash == "" || res.Timestamp != arsia.FormatTimestamp(now) || res.AsOf != tt.asOf {
			t.Errorf("as_of %s: hash %q timestamp %q", tt.asOf, res.Hash, res.Timestamp)
		}
		hashes[res.Hash] = tt.asOf
	}
	if len(hashes) != 3 {
		t.Errorf("hashes of 3 different states: %v", hashes)
	}
	_, err := s.Snapshot(ctx, Alice, state.SnapshotArgs{AsOf: at(-time.Minute)}, now)
	if d := details(err); Code(err) != arsia.CodeInvalidRequest || d["snapshot_unavailable"] != true || d["oldest_available"] != at(0) {
		t.Errorf("too old: %v", err)
	}
	if _, err := s.Snapshot(ctx, Alice, state.SnapshotArgs{AsOf: arsia.FormatTimestamp(now.Add(6 * time.Minute))}, now); Code(err) != arsia.CodeInvalidRequest {
		t.Errorf("future: %v", err)
	}
	if _, err := s.Snapshot(ctx, Alice, state.SnapshotArgs{AsOf: "yesterday"}, now); Code(err) != arsia.CodeInvalidRequest {
		t.Errorf("bad as_of: %v", err)
	}
	if res, err := s.Snapshot(ctx, Bob, state.SnapshotArgs{AsOf: at(time.Hour)}, now); err != nil || len(res.Entries) != 0 {
		t.Errorf("bob sees alice's history: %+v, %v", res, err)
	}
	if res, _ := s.Snapshot(ctx, Alice, state.SnapshotArgs{AsOf: at(time.Hour), Filter: &state.QueryFilter{Scope: state.ScopeShared}}, now); len(res.Entries) != 0 {
		t.Error("filter ignored")
	}
	if res, _ := s.Snapshot(ctx, Alice, state.SnapshotArgs{AsOf: at(time.Hour), Filter: &state.QueryFilter{KeyPrefix: Alice + "/agent/sn"}}, now); len(res.Entries) != 1 {
		t.Error("key_prefix filter lost the entry")
	}
}

func testPurge(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f(t, &state.StoreOptions{NewID: SeqIDs()})
	key := Alice + "/shared/personal"
	for i := range 2 {
		if _, err := s.Set(ctx, Alice, SetArgs(key, fmt.Sprint("secret", i)), nil, T0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	g, err := s.Grant(ctx, Alice, state.GrantArgs{KeyPattern: Alice + "/shared/*", GranteeAgentID: Bob, AccessLevel: state.AccessRead}, T0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Grant(ctx, Alice, state.GrantArgs{KeyPattern: Alice + "/agent/*", GranteeAgentID: Bob, AccessLevel: state.AccessRead}, T0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx, Bob, state.PurgeArgs{Key: key}, T0.Add(time.Hour)); Code(err) != arsia.CodeForbidden {
		t.Errorf("grantee purge = %v", err)
	}
	if _, err := s.Purge(ctx, Alice, state.PurgeArgs{Key: Alice + "/agent/none"}, T0.Add(time.Hour)); Code(err) != arsia.CodeNotFound {
		t.Errorf("purge of unknown key = %v", err)
	}
	res, err := s.Purge(ctx, Alice, state.PurgeArgs{Key: key, Reason: "gdpr_erasure"}, T0.Add(time.Hour))
	if err != nil || res.AlreadyPurged || res.PurgedAt != "2026-04-13T13:00:00.000Z" || len(res.RevokedGrants) != 1 || res.RevokedGrants[0] != g.ID || res.OwnerAgentID != Alice {
		t.Fatalf("purge = %+v, %v", res, err)
	}
	again, err := s.Purge(ctx, Alice, state.PurgeArgs{Key: key}, T0.Add(2*time.Hour))
	if err != nil || !again.AlreadyPurged || again.PurgedAt != res.PurgedAt || len(again.RevokedGrants) != 0 {
		t.Fatalf("second purge = %+v, %v", again, err)
	}
	if got, _ := s.Get(ctx, Alice, state.GetArgs{Key: key}, T0.Add(2*time.Hour)); got != nil {
		t.Error("purged entry returned")
	}
	for _, asOf := range []string{"2026-04-13T12:00:30.000Z", "2026-04-13T12:01:30.000Z"} {
		snap, err := s.Snapshot(ctx, Alice, state.SnapshotArgs{AsOf: asOf}, T0.Add(2*time.Hour))
		if err != nil || len(snap.Entries) != 1 || snap.Entries[0].Value != nil {
			t.Errorf("snapshot %s after purge: %s, %v", asOf, js(snap.Map()), err)
		}
	}
	if _, err := s.Get(ctx, Bob, state.GetArgs{Key: key}, T0.Add(2*time.Hour)); Code(err) != arsia.CodeForbidden {
		t.Errorf("grant survived the purge: %v", err)
	}
	if r, err := s.Revoke(ctx, Alice, state.RevokeArgs{GrantID: other.ID}, T0.Add(2*time.Hour)); err != nil || r.AlreadyRevoked {
		t.Errorf("the purge revoked a grant not covering the key: %+v, %v", r, err)
	}
	if e, err := s.Set(ctx, Alice, SetArgs(key, "fresh"), nil, T0.Add(3*time.Hour)); err != nil || e.Version != 1 {
		t.Errorf("recreate after purge = %+v, %v", e, err)
	}
	if got, _ := s.Get(ctx, Alice, state.GetArgs{Key: key}, T0.Add(3*time.Hour)); got == nil || js(got.Value) != `"fresh"` {
		t.Errorf("GET after recreate = %+v", got)
	}
}

func testGrants(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f(t, &state.StoreOptions{NewID: SeqIDs()})
	shared := Alice + "/shared/report-1"
	private := Alice + "/agent/private"
	for _, k := range []string{shared, private} {
		if _, err := s.Set(ctx, Alice, SetArgs(k, k), nil, T0); err != nil {
			t.Fatal(err)
		}
	}
	get := func(actor, key string, at time.Time) error {
		_, err := s.Get(ctx, actor, state.GetArgs{Key: key}, at)
		return err
	}
	if Code(get(Bob, shared, T0)) != arsia.CodeForbidden {
		t.Fatal("read without grant")
	}
	if Code(get(Bob, Alice+"/shared/absent", T0)) != arsia.CodeForbidden {
		t.Fatal("existence leaks without grant")
	}
	badGrants := []state.GrantArgs{
		{KeyPattern: Bob + "/shared/*", GranteeAgentID: Carol, AccessLevel: state.AccessRead},
		{KeyPattern: "agent:acme.alph*", GranteeAgentID: Bob, AccessLevel: state.AccessRead},
		{KeyPattern: Alice + "/shared/*", GranteeAgentID: Bob, AccessLevel: "admin"},
		{KeyPattern: Alice + "/shared/*", GranteeAgentID: Bob, AccessLevel: state.AccessRead, ValidUntil: "2026-04-13T11:00:00.000Z"},
		{KeyPattern: Alice + "/shared/*", GranteeAgentID: "bob", AccessLevel: state.AccessRead},
	}
	for i, a := range badGrants {
		if _, err := s.Grant(ctx, Alice, a, T0); Code(err) == "" {
			t.Errorf("bad grant %d: %v", i, err)
		}
	}
	g, err := s.Grant(ctx, Alice, state.GrantArgs{KeyPattern: Alice + "/shared/report-*", GranteeAgentID: Bob, AccessLevel: state.AccessRead,
		ValidUntil: "2026-04-13T13:00:00.000Z"}, T0)
	if err != nil || g.ID == "" || g.Map()["valid_until"] != "2026-04-13T13:00:00.000Z" || g.GrantorAgentID != Alice {
		t.Fatalf("grant = %+v, %v", g, err)
	}
	if err := get(Bob, shared, T0); err != nil {
		t.Errorf("granted read: %v", err)
	}
	if Code(get(Bob, private, T0)) != arsia.CodeForbidden || Code(get(Carol, shared, T0)) != arsia.CodeForbidden {
		t.Error("grant too wide")
	}
	if res, _ := s.Query(ctx, Bob, state.QueryArgs{}, T0); res.Total != 1 || res.Entries[0].Key != shared {
		t.Errorf("grantee query = %+v", res)
	}
	if res, _ := s.Snapshot(ctx, Bob, state.SnapshotArgs{AsOf: arsia.FormatTimestamp(T0)}, T0); len(res.Entries) != 1 {
		t.Errorf("grantee snapshot = %+v", res)
	}
	if _, err := s.Set(ctx, Bob, SetArgs(shared, "edit"), nil, T0); Code(err) != arsia.CodeForbidden {
		t.Errorf("read grant allowed a write: %v", err)
	}
	if Code(get(Bob, shared, T0.Add(time.Hour))) != arsia.CodeForbidden {
		t.Error("expired grant still works")
	}
	rw, err := s.Grant(ctx, Alice, state.GrantArgs{KeyPattern: shared, GranteeAgentID: Bob, AccessLevel: state.AccessReadWrite}, T0)
	if err != nil {
		t.Fatal(err)
	}
	if rw.ID == g.ID {
		t.Fatal("two grants, one id")
	}
	if e, err := s.Set(ctx, Bob, SetArgs(shared, "edit"), nil, T0.Add(time.Minute)); err != nil || e.OwnerAgentID != Alice || e.Version != 2 {
		t.Errorf("read_write update = %+v, %v", e, err)
	}
	if _, err := s.Set(ctx, Bob, SetArgs(Alice+"/shared/report-new", 1), nil, T0); Code(err) != arsia.CodeForbidden {
		t.Errorf("grantee created an entry: %v", err)
	}
	if _, err := s.Delete(ctx, Bob, state.DeleteArgs{Key: shared}, T0); Code(err) != arsia.CodeForbidden {
		t.Errorf("grantee deleted: %v", err)
	}
	if _, err := s.Revoke(ctx, Bob, state.RevokeArgs{GrantID: rw.ID}, T0); Code(err) != arsia.CodeForbidden {
		t.Errorf("grantee revoked: %v", err)
	}
	r, err := s.Revoke(ctx, Alice, state.RevokeArgs{GrantID: rw.ID}, T0.Add(2*time.Minute))
	if err != nil || r.AlreadyRevoked || r.GranteeAgentID != Bob || js(r.Map()) != `{"grant_id":"`+rw.ID+`","revoked":true}` {
		t.Errorf("revoke = %+v, %v", r, err)
	}
	if r, err := s.Revoke(ctx, Alice, state.RevokeArgs{GrantID: rw.ID}, T0.Add(3*time.Minute)); err != nil || !r.AlreadyRevoked {
		t.Errorf("second revoke = %+v, %v", r, err)
	}
	if r, err := s.Revoke(ctx, Carol, state.RevokeArgs{GrantID: "99999999-9999-4999-9999-999999999999"}, T0); err != nil || !r.AlreadyRevoked {
		t.Errorf("revoke unknown = %+v, %v", r, err)
	}
	if _, err := s.Revoke(ctx, Alice, state.RevokeArgs{GrantID: "not-a-uuid"}, T0); Code(err) != arsia.CodeInvalidRequest {
		t.Errorf("revoke of a malformed id = %v", err)
	}
	if _, err := s.Set(ctx, Bob, SetArgs(shared, "again"), nil, T0.Add(4*time.Minute)); Code(err) != arsia.CodeForbidden {
		t.Errorf("write after revoke: %v", err)
	}
}

func testLimits(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f(t, &state.StoreOptions{MaxEntries: 1})
	if _, err := s.Set(ctx, Alice, SetArgs(Alice+"/agent/a", 1), nil, T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, Alice, SetArgs(Alice+"/agent/b", 1), nil, T0); Code(err) != arsia.CodeServiceUnavailable {
		t.Errorf("full store = %v", err)
	}
	if _, err := s.Set(ctx, Alice, SetArgs(Alice+"/agent/a", 2), nil, T0); err != nil {
		t.Errorf("update in a full store: %v", err)
	}
	// A clock stepping back keeps the history ordered.
	if _, err := s.Set(ctx, Alice, SetArgs(Alice+"/agent/a", 3), nil, T0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	res, err := s.Snapshot(ctx, Alice, state.SnapshotArgs{AsOf: arsia.FormatTimestamp(T0)}, T0)
	if err != nil || len(res.Entries) != 1 || js(res.Entries[0].Value) != "3" {
		t.Errorf("snapshot after clock step = %+v, %v", res, err)
	}
	if _, err := s.Grant(ctx, Alice, state.GrantArgs{KeyPattern: Alice + "/shared/*", GranteeAgentID: Bob, AccessLevel: state.AccessRead}, T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grant(ctx, Alice, state.GrantArgs{KeyPattern: Alice + "/agent/*", GranteeAgentID: Bob, AccessLevel: state.AccessRead}, T0); Code(err) != arsia.CodeServiceUnavailable {
		t.Errorf("grant beyond the limit = %v", err)
	}
	long := Alice + "/agent/"
	for len(long) < state.MaxKeyLength {
		long += "x"
	}
	lim := f(t, nil)
	if _, err := lim.Set(ctx, Alice, SetArgs(long, 1), nil, T0); err != nil {
		t.Errorf("key of exactly %d characters refused: %v", state.MaxKeyLength, err)
	}
	if _, err := lim.Set(ctx, Alice, SetArgs(long+"x", 1), nil, T0); Code(err) != arsia.CodeInvalidRequest {
		t.Errorf("key of %d characters = %v", state.MaxKeyLength+1, err)
	}
}

// testConcurrent races conditional SETs; run it with -race. No update is
// lost: the final version counts the SETs that succeeded.
func testConcurrent(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f(t, nil)
	key := Alice + "/shared/counter"
	if _, err := s.Set(ctx, Alice, SetArgs(key, 0), nil, T0); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 4, 15
	var wg sync.WaitGroup
	var wins atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				now := T0.Add(time.Duration(i+1) * time.Millisecond)
				e, err := s.Get(ctx, Alice, state.GetArgs{Key: key}, now)
				if err != nil || e == nil {
					t.Error(err)
					return
				}
				a := SetArgs(key, w)
				a.ExpectedVersion = e.Version
				if _, err := s.Set(ctx, Alice, a, nil, now); err == nil {
					wins.Add(1)
				} else if Code(err) != arsia.CodeConflict {
					t.Error(err)
				}
				if g, err := s.Grant(ctx, Alice, state.GrantArgs{KeyPattern: key, GranteeAgentID: Bob, AccessLevel: state.AccessRead}, now); err == nil {
					_, _ = s.Get(ctx, Bob, state.GetArgs{Key: key}, now)
					_, _ = s.Revoke(ctx, Alice, state.RevokeArgs{GrantID: g.ID}, now)
				}
			}
		}()
	}
	wg.Wait()
	e, _ := s.Get(ctx, Alice, state.GetArgs{Key: key}, T0.Add(time.Second))
	if e == nil || int64(e.Version) != wins.Load()+1 {
		t.Errorf("entry %+v after %d successful conditional SETs", e, wins.Load())
	}
}
