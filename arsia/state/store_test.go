package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

const (
	alice = "agent:acme.alpha"
	bob   = "agent:acme.beta"
	carol = "agent:acme.gamma"
)

var t0 = time.Date(2026, 4, 13, 12, 0, 0, 0, time.UTC)

func newTestStore() *MemoryStore {
	n := 0
	var mu sync.Mutex
	return NewMemoryStore(&MemoryStoreOptions{NewID: func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
	}})
}

func setArgs(key string, v any) SetArgs {
	k, _ := ParseKey(key)
	return SetArgs{Key: key, Value: v, Scope: k.Scope, PIIClassification: PIINone}
}

func wireCode(err error) string {
	var ae *arsia.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func TestStoreVersions(t *testing.T) {
	ctx := context.Background()
	s := newTestStore()
	key := alice + "/agent/counter"
	e, err := s.Set(ctx, alice, setArgs(key, 1), nil, t0)
	if err != nil || e.Version != 1 || !e.CreatedAt.Equal(t0) || e.OwnerAgentID != alice {
		t.Fatalf("first SET = %+v, %v", e, err)
	}
	a := setArgs(key, 2)
	a.ExpectedVersion = 1
	if e, err = s.Set(ctx, alice, a, nil, t0.Add(time.Second)); err != nil || e.Version != 2 || !e.CreatedAt.Equal(t0) || !e.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("conditional SET = %+v, %v", e, err)
	}
	_, err = s.Set(ctx, alice, a, nil, t0.Add(2*time.Second)) // stale: expects 1, is 2
	var ae *arsia.Error
	if !errors.As(err, &ae) || ae.Code != arsia.CodeConflict || !errors.Is(err, ErrConflict) ||
		ae.Details["current_version"] != 2 || ae.Details["expected_version"] != 1 {
		t.Fatalf("stale SET = %v (%+v)", err, ae)
	}
	got, err := s.Get(ctx, alice, GetArgs{Key: key}, t0.Add(3*time.Second))
	if err != nil || got == nil || got.Version != 2 || mustJSON(got.Value) != "2" {
		t.Fatalf("GET = %+v, %v", got, err)
	}
	// Logical delete keeps the version; GET hides it; recreation restarts at 1.
	d, err := s.Delete(ctx, alice, DeleteArgs{Key: key}, t0.Add(4*time.Second))
	if err != nil || d.Version != 2 || mustJSON(d.Map()) != `{"deleted":true,"key":"`+key+`"}` {
		t.Fatalf("DELETE = %+v, %v", d, err)
	}
	if got, err := s.Get(ctx, alice, GetArgs{Key: key}, t0.Add(5*time.Second)); got != nil || err != nil {
		t.Fatalf("GET after DELETE = %+v, %v", got, err)
	}
	if _, err := s.Delete(ctx, alice, DeleteArgs{Key: key}, t0.Add(5*time.Second)); wireCode(err) != arsia.CodeNotFound {
		t.Fatalf("second DELETE = %v", err)
	}
	a.ExpectedVersion = 2
	if _, err := s.Set(ctx, alice, a, nil, t0.Add(6*time.Second)); wireCode(err) != arsia.CodeConflict {
		t.Fatalf("SET expecting 2 on a deleted key = %v", err)
	}
	if e, err = s.Set(ctx, alice, setArgs(key, 3), nil, t0.Add(6*time.Second)); err != nil || e.Version != 1 || !e.CreatedAt.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("recreate = %+v, %v", e, err)
	}
	// Returned values are copies.
	m, _ := s.Set(ctx, alice, setArgs(alice+"/agent/obj", map[string]any{"a": 1}), nil, t0)
	m.Value.(map[string]any)["a"] = 99
	again, _ := s.Get(ctx, alice, GetArgs{Key: alice + "/agent/obj"}, t0)
	if mustJSON(again.Value) != `{"a":1}` {
		t.Errorf("store value aliased: %s", mustJSON(again.Value))
	}
}

func TestStoreRules(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(&MemoryStoreOptions{Zones: []string{"PT"}})
	personal := SetArgs{Key: alice + "/agent/p", Value: "x", Scope: ScopeAgent, PIIClassification: PIIPersonal, DataResidency: "PT"}
	tests := []struct {
		name  string
		actor string
		args  SetArgs
		comp  map[string]any
		now   time.Time
		code  string
	}{
		{"foreign namespace", bob, setArgs(alice+"/agent/x", 1), nil, t0, arsia.CodeForbidden},
		{"global", alice, setArgs(alice+"/global/x", 1), nil, t0, arsia.CodeForbidden},
		{"reserved", alice, setArgs(alice+"/agent/arsiaprotocol.grants/1", 1), nil, t0, arsia.CodeForbidden},
		{"too large", alice, setArgs(alice+"/agent/big", string(make([]byte, MaxValueBytes))), nil, t0, arsia.CodePayloadTooLarge},
		{"no legal basis", alice, personal, map[string]any{"profile": "GDPR-STANDARD"}, t0, arsia.CodeInvalidRequest},
		{"personal ok", alice, personal, map[string]any{"legal_basis": "consent"}, t0, ""},
		{"zone", alice, SetArgs{Key: alice + "/agent/z", Value: 1, Scope: ScopeAgent, PIIClassification: PIINone, DataResidency: "US"}, nil, t0, arsia.CodeInvalidRequest},
		{"expired", alice, SetArgs{Key: alice + "/agent/e", Value: 1, Scope: ScopeAgent, PIIClassification: PIINone, ExpiresAt: "2026-04-13T11:00:00.000Z"}, nil, t0, arsia.CodeInvalidRequest},
		{"session 25h", alice, SetArgs{Key: alice + "/session/s", Value: 1, Scope: ScopeSession, PIIClassification: PIINone, ExpiresAt: "2026-04-14T13:00:00.000Z"}, nil, t0, arsia.CodeInvalidRequest},
		{"bad actor", "bob", setArgs(alice+"/agent/x", 1), nil, t0, arsia.CodeInvalidRequest},
		{"no clock", alice, setArgs(alice+"/agent/x", 1), nil, time.Time{}, arsia.CodeInvalidRequest},
	}
	for _, tt := range tests {
		_, err := s.Set(ctx, tt.actor, tt.args, tt.comp, tt.now)
		if got := wireCode(err); got != tt.code {
			t.Errorf("%s: code %q (%v), want %q", tt.name, got, err, tt.code)
		}
	}
	// MIFID-II's residency EU is inherited; storage in PT lies inside it,
	// storage in the US does not.
	if e, err := s.Set(ctx, alice, setArgs(alice+"/agent/inherit", 1), map[string]any{"profile": "MIFID-II"}, t0); err != nil || e.DataResidency != "EU" {
		t.Errorf("inherited residency = %+v, %v", e, err)
	}
	us := NewMemoryStore(&MemoryStoreOptions{Zones: []string{"US"}})
	_, err := us.Set(ctx, alice, setArgs(alice+"/agent/inherit", 1), map[string]any{"profile": "MIFID-II"}, t0)
	var ae *arsia.Error
	if !errors.As(err, &ae) || ae.Details["data_residency_violation"] != true || ae.Details["required_zone"] != "EU" {
		t.Errorf("EU data in a US store: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Get(cancelled, alice, GetArgs{Key: alice + "/agent/x"}, t0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled GET = %v", err)
	}
}

func TestStoreExpiry(t *testing.T) {
	ctx := context.Background()
	s := newTestStore()
	a := setArgs(alice+"/session/tmp", "x")
	a.ExpiresAt = "2026-04-13T13:00:00.000Z"
	if _, err := s.Set(ctx, alice, a, nil, t0); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, alice, GetArgs{Key: a.Key}, t0.Add(59*time.Minute)); got == nil {
		t.Error("entry gone before expiry")
	}
	if got, _ := s.Get(ctx, alice, GetArgs{Key: a.Key}, t0.Add(time.Hour)); got != nil {
		t.Error("expired entry returned")
	}
	if res, _ := s.Query(ctx, alice, QueryArgs{}, t0.Add(2*time.Hour)); res.Total != 0 {
		t.Error("expired entry queried")
	}
}

func TestStoreQuery(t *testing.T) {
	ctx := context.Background()
	s := newTestStore()
	for i, k := range []string{"agent/b", "agent/a", "shared/c", "agent/d"} {
		a := setArgs(alice+"/"+k, i)
		if k == "agent/d" {
			a.PIIClassification, a.DataResidency = PIIPersonal, "PT"
		}
		if _, err := s.Set(ctx, alice, a, map[string]any{"legal_basis": "consent"}, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Set(ctx, bob, setArgs(bob+"/agent/secret", 1), nil, t0); err != nil {
		t.Fatal(err)
	}
	keys := func(r *QueryResult) string {
		var out string
		for _, e := range r.Entries {
			out += e.Key[len(alice)+1:] + " "
		}
		return out
	}
	two, one, big := 2, 1, 5000
	tests := []struct {
		args  QueryArgs
		want  string
		total int
	}{
		{QueryArgs{}, "agent/b agent/a shared/c agent/d ", 4},
		{QueryArgs{QueryFilter: QueryFilter{Scope: ScopeAgent, KeyPrefix: alice + "/agent/"}}, "agent/b agent/a agent/d ", 3},
		{QueryArgs{QueryFilter: QueryFilter{PIIClassification: PIIPersonal}}, "agent/d ", 1},
		{QueryArgs{QueryFilter: QueryFilter{OwnerAgentID: bob}}, "", 0},
		{QueryArgs{QueryFilter: QueryFilter{CreatedAfter: "2026-04-13T12:00:00.000Z", CreatedBefore: "2026-04-13T12:00:03.000Z"}}, "agent/a shared/c ", 2},
		{QueryArgs{Limit: &two, Offset: &one}, "agent/a shared/c ", 4},
		{QueryArgs{Limit: &big}, "agent/b agent/a shared/c agent/d ", 4},
	}
	for i, tt := range tests {
		res, err := s.Query(ctx, alice, tt.args, t0.Add(time.Minute))
		if err != nil || keys(res) != tt.want || res.Total != tt.total {
			t.Errorf("%d: got %q total %d (%v), want %q total %d", i, keys(res), res.Total, err, tt.want, tt.total)
		}
	}
	res, _ := s.Query(ctx, alice, QueryArgs{Limit: &big}, t0)
	if res.Limit != MaxQueryLimit {
		t.Errorf("limit not clamped: %d", res.Limit)
	}
	if _, ok := res.Map()["entries"]; !ok {
		t.Error("query result map")
	}
}

func TestStoreSnapshot(t *testing.T) {
	ctx := context.Background()
	s := newTestStore()
	key := alice + "/agent/snap"
	for i, v := range []string{"v1", "v2"} {
		if _, err := s.Set(ctx, alice, setArgs(key, v), nil, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Delete(ctx, alice, DeleteArgs{Key: key}, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(3 * time.Hour)
	at := func(d time.Duration) string { return arsia.FormatTimestamp(t0.Add(d)) }
	tests := []struct {
		asOf    string
		value   string
		deleted bool
	}{
		{at(0), `"v1"`, false},
		{at(30 * time.Minute), `"v1"`, false},
		{at(time.Hour), `"v2"`, false},
		{at(150 * time.Minute), `"v2"`, true},
	}
	for _, tt := range tests {
		res, err := s.Snapshot(ctx, alice, SnapshotArgs{AsOf: tt.asOf}, now)
		if err != nil || len(res.Entries) != 1 || mustJSON(res.Entries[0].Value) != tt.value || res.Entries[0].Deleted != tt.deleted {
			t.Errorf("as_of %s: %+v, %v", tt.asOf, res, err)
			continue
		}
		if res.Hash == "" || res.Timestamp != arsia.FormatTimestamp(now) {
			t.Errorf("as_of %s: hash %q timestamp %q", tt.asOf, res.Hash, res.Timestamp)
		}
	}
	_, err := s.Snapshot(ctx, alice, SnapshotArgs{AsOf: at(-time.Minute)}, now)
	var ae *arsia.Error
	if !errors.As(err, &ae) || ae.Details["snapshot_unavailable"] != true || ae.Details["oldest_available"] != at(0) {
		t.Errorf("too old: %v", err)
	}
	if _, err := s.Snapshot(ctx, alice, SnapshotArgs{AsOf: arsia.FormatTimestamp(now.Add(6 * time.Minute))}, now); wireCode(err) != arsia.CodeInvalidRequest {
		t.Errorf("future: %v", err)
	}
	if res, err := s.Snapshot(ctx, bob, SnapshotArgs{AsOf: at(time.Hour)}, now); err != nil || len(res.Entries) != 0 {
		t.Errorf("bob sees alice's history: %+v, %v", res, err)
	}
	if res, _ := s.Snapshot(ctx, alice, SnapshotArgs{AsOf: at(time.Hour), Filter: &QueryFilter{Scope: ScopeShared}}, now); len(res.Entries) != 0 {
		t.Error("filter ignored")
	}
}

func TestStorePurge(t *testing.T) {
	ctx := context.Background()
	s := newTestStore()
	key := alice + "/shared/personal"
	for i := range 2 {
		if _, err := s.Set(ctx, alice, setArgs(key, fmt.Sprint("secret", i)), nil, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	g, err := s.Grant(ctx, alice, GrantArgs{KeyPattern: alice + "/shared/*", GranteeAgentID: bob, AccessLevel: AccessRead}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx, bob, PurgeArgs{Key: key}, t0.Add(time.Hour)); wireCode(err) != arsia.CodeForbidden {
		t.Errorf("grantee purge = %v", err)
	}
	if _, err := s.Purge(ctx, alice, PurgeArgs{Key: alice + "/agent/none"}, t0.Add(time.Hour)); wireCode(err) != arsia.CodeNotFound {
		t.Errorf("purge of unknown key = %v", err)
	}
	res, err := s.Purge(ctx, alice, PurgeArgs{Key: key, Reason: "gdpr_erasure"}, t0.Add(time.Hour))
	if err != nil || res.AlreadyPurged || res.PurgedAt != "2026-04-13T13:00:00.000Z" || len(res.RevokedGrants) != 1 || res.RevokedGrants[0] != g.ID {
		t.Fatalf("purge = %+v, %v", res, err)
	}
	again, err := s.Purge(ctx, alice, PurgeArgs{Key: key}, t0.Add(2*time.Hour))
	if err != nil || !again.AlreadyPurged || again.PurgedAt != res.PurgedAt {
		t.Fatalf("second purge = %+v, %v", again, err)
	}
	if got, _ := s.Get(ctx, alice, GetArgs{Key: key}, t0.Add(2*time.Hour)); got != nil {
		t.Error("purged entry returned")
	}
	snap, err := s.Snapshot(ctx, alice, SnapshotArgs{AsOf: "2026-04-13T12:00:30.000Z"}, t0.Add(2*time.Hour))
	if err != nil || len(snap.Entries) != 1 || snap.Entries[0].Value != nil {
		t.Errorf("snapshot after purge: %s, %v", mustJSON(snap.Map()), err)
	}
	if _, err := s.Get(ctx, bob, GetArgs{Key: key}, t0.Add(2*time.Hour)); wireCode(err) != arsia.CodeForbidden {
		t.Errorf("grant survived the purge: %v", err)
	}
	if e, err := s.Set(ctx, alice, setArgs(key, "fresh"), nil, t0.Add(3*time.Hour)); err != nil || e.Version != 1 {
		t.Errorf("recreate after purge = %+v, %v", e, err)
	}
}

func TestStoreGrants(t *testing.T) {
	ctx := context.Background()
	s := newTestStore()
	shared := alice + "/shared/report-1"
	private := alice + "/agent/private"
	for _, k := range []string{shared, private} {
		if _, err := s.Set(ctx, alice, setArgs(k, k), nil, t0); err != nil {
			t.Fatal(err)
		}
	}
	get := func(actor, key string, at time.Time) error {
		_, err := s.Get(ctx, actor, GetArgs{Key: key}, at)
		return err
	}
	if wireCode(get(bob, shared, t0)) != arsia.CodeForbidden {
		t.Fatal("read without grant")
	}
	if wireCode(get(bob, alice+"/shared/absent", t0)) != arsia.CodeForbidden {
		t.Fatal("existence leaks without grant")
	}
	badGrants := []GrantArgs{
		{KeyPattern: bob + "/shared/*", GranteeAgentID: carol, AccessLevel: AccessRead},
		{KeyPattern: "agent:acme.alph*", GranteeAgentID: bob, AccessLevel: AccessRead},
		{KeyPattern: alice + "/shared/*", GranteeAgentID: bob, AccessLevel: "admin"},
		{KeyPattern: alice + "/shared/*", GranteeAgentID: bob, AccessLevel: AccessRead, ValidUntil: "2026-04-13T11:00:00.000Z"},
	}
	for i, a := range badGrants {
		if _, err := s.Grant(ctx, alice, a, t0); err == nil {
			t.Errorf("bad grant %d accepted", i)
		}
	}
	g, err := s.Grant(ctx, alice, GrantArgs{KeyPattern: alice + "/shared/report-*", GranteeAgentID: bob, AccessLevel: AccessRead,
		ValidUntil: "2026-04-13T13:00:00.000Z"}, t0)
	if err != nil || g.ID == "" || g.Map()["valid_until"] != "2026-04-13T13:00:00.000Z" {
		t.Fatalf("grant = %+v, %v", g, err)
	}
	if err := get(bob, shared, t0); err != nil {
		t.Errorf("granted read: %v", err)
	}
	if wireCode(get(bob, private, t0)) != arsia.CodeForbidden || wireCode(get(carol, shared, t0)) != arsia.CodeForbidden {
		t.Error("grant too wide")
	}
	if res, _ := s.Query(ctx, bob, QueryArgs{}, t0); res.Total != 1 || res.Entries[0].Key != shared {
		t.Errorf("grantee query = %+v", res)
	}
	if _, err := s.Set(ctx, bob, setArgs(shared, "edit"), nil, t0); wireCode(err) != arsia.CodeForbidden {
		t.Errorf("read grant allowed a write: %v", err)
	}
	if wireCode(get(bob, shared, t0.Add(time.Hour))) != arsia.CodeForbidden {
		t.Error("expired grant still works")
	}
	rw, err := s.Grant(ctx, alice, GrantArgs{KeyPattern: shared, GranteeAgentID: bob, AccessLevel: AccessReadWrite}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Set(ctx, bob, setArgs(shared, "edit"), nil, t0.Add(time.Minute)); err != nil || e.OwnerAgentID != alice || e.Version != 2 {
		t.Errorf("read_write update = %+v, %v", e, err)
	}
	if _, err := s.Set(ctx, bob, setArgs(alice+"/shared/report-new", 1), nil, t0); wireCode(err) != arsia.CodeForbidden {
		t.Errorf("grantee created an entry: %v", err)
	}
	if _, err := s.Delete(ctx, bob, DeleteArgs{Key: shared}, t0); wireCode(err) != arsia.CodeForbidden {
		t.Errorf("grantee deleted: %v", err)
	}
	if _, err := s.Revoke(ctx, bob, RevokeArgs{GrantID: rw.ID}, t0); wireCode(err) != arsia.CodeForbidden {
		t.Errorf("grantee revoked: %v", err)
	}
	r, err := s.Revoke(ctx, alice, RevokeArgs{GrantID: rw.ID}, t0.Add(2*time.Minute))
	if err != nil || r.AlreadyRevoked || r.GranteeAgentID != bob || mustJSON(r.Map()) != `{"grant_id":"`+rw.ID+`","revoked":true}` {
		t.Errorf("revoke = %+v, %v", r, err)
	}
	if r, err := s.Revoke(ctx, alice, RevokeArgs{GrantID: rw.ID}, t0.Add(3*time.Minute)); err != nil || !r.AlreadyRevoked {
		t.Errorf("second revoke = %+v, %v", r, err)
	}
	if r, err := s.Revoke(ctx, carol, RevokeArgs{GrantID: "99999999-9999-4999-9999-999999999999"}, t0); err != nil || !r.AlreadyRevoked {
		t.Errorf("revoke unknown = %+v, %v", r, err)
	}
	if _, err := s.Set(ctx, bob, setArgs(shared, "again"), nil, t0.Add(4*time.Minute)); wireCode(err) != arsia.CodeForbidden {
		t.Errorf("write after revoke: %v", err)
	}
	if n := len(s.Grants(bob)); n != 2 {
		t.Errorf("Grants(bob) = %d", n)
	}
}

func TestStoreGlobal(t *testing.T) {
	ctx := context.Background()
	s := newTestStore()
	op := "agent:platform.operator"
	m := baseEntry()
	m["key"], m["owner_agent_id"], m["scope"], m["value"] = op+"/global/rates/EUR-USD", op, "global", 1.08
	e, err := EntryFromMap(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutGlobal(e, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.PutGlobal(&Entry{Scope: ScopeAgent}, t0); err == nil {
		t.Error("PutGlobal took an agent entry")
	}
	got, err := s.Get(ctx, bob, GetArgs{Key: e.Key}, t0)
	if err != nil || got == nil || mustJSON(got.Value) != "1.08" {
		t.Errorf("global read = %+v, %v", got, err)
	}
	if _, err := s.Delete(ctx, op, DeleteArgs{Key: e.Key}, t0); wireCode(err) != arsia.CodeForbidden {
		t.Errorf("global delete = %v", err)
	}
	if _, err := s.Purge(ctx, op, PurgeArgs{Key: e.Key}, t0); wireCode(err) != arsia.CodeForbidden {
		t.Errorf("global purge = %v", err)
	}
}

func TestStoreLimits(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(&MemoryStoreOptions{MaxEntries: 1})
	if _, err := s.Set(ctx, alice, setArgs(alice+"/agent/a", 1), nil, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, alice, setArgs(alice+"/agent/b", 1), nil, t0); wireCode(err) != arsia.CodeServiceUnavailable {
		t.Errorf("full store = %v", err)
	}
	if _, err := s.Set(ctx, alice, setArgs(alice+"/agent/a", 2), nil, t0); err != nil {
		t.Errorf("update in a full store: %v", err)
	}
	// A clock stepping back keeps the history ordered.
	if _, err := s.Set(ctx, alice, setArgs(alice+"/agent/a", 3), nil, t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	res, err := s.Snapshot(ctx, alice, SnapshotArgs{AsOf: arsia.FormatTimestamp(t0)}, t0)
	if err != nil || len(res.Entries) != 1 || mustJSON(res.Entries[0].Value) != "3" {
		t.Errorf("snapshot after clock step = %+v, %v", res, err)
	}
}

// TestStoreConcurrent runs writers, readers and grant churn at once; run it
// with -race. Conditional SETs must never lose an update.
func TestStoreConcurrent(t *testing.T) {
	ctx := context.Background()
	s := newTestStore()
	key := alice + "/shared/counter"
	if _, err := s.Set(ctx, alice, setArgs(key, 0), nil, t0); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 8, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				now := t0.Add(time.Duration(i+1) * time.Millisecond)
				e, err := s.Get(ctx, alice, GetArgs{Key: key}, now)
				if err != nil || e == nil {
					t.Error(err)
					return
				}
				a := setArgs(key, w)
				a.ExpectedVersion = e.Version
				if _, err := s.Set(ctx, alice, a, nil, now); err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if wireCode(err) != arsia.CodeConflict {
					t.Error(err)
				}
				_, _ = s.Query(ctx, bob, QueryArgs{}, now)
				_, _ = s.Snapshot(ctx, alice, SnapshotArgs{AsOf: arsia.FormatTimestamp(now)}, now)
				if g, err := s.Grant(ctx, alice, GrantArgs{KeyPattern: key, GranteeAgentID: bob, AccessLevel: AccessRead}, now); err == nil {
					_, _ = s.Get(ctx, bob, GetArgs{Key: key}, now)
					_, _ = s.Revoke(ctx, alice, RevokeArgs{GrantID: g.ID}, now)
				}
			}
		}()
	}
	wg.Wait()
	e, _ := s.Get(ctx, alice, GetArgs{Key: key}, t0.Add(time.Second))
	if e.Version != wins+1 {
		t.Errorf("version %d after %d successful conditional SETs", e.Version, wins)
	}
}
