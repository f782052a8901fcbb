package arsia_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

var idemNow = time.Date(2026, 4, 14, 12, 0, 0, 0, time.UTC)

// idemEnvelope is a decoded request envelope with an idempotency member.
func idemEnvelope() map[string]any {
	return map[string]any{
		"v": "1.0", "id": "11111111-1111-4111-9111-111111111111", "ts": "2026-04-14T12:00:00.000Z",
		"from": "agent:acme.alpha", "to": "agent:acme.beta", "intent": "request",
		"expires_at":   "2026-04-14T12:05:00.000Z",
		"capabilities": []any{"notes.write"},
		"payload":      map[string]any{"type": "arsiaprotocol.state/set", "args": map[string]any{"key": "a", "value": json.Number("1")}},
		"idempotency":  map[string]any{"key": "env-key", "expires_at": "2026-04-15T12:00:00.000Z"},
		"context":      map[string]any{"trace_id": strings.Repeat("a", 32), "priority": 5},
		"security":     map[string]any{"alg": "EdDSA", "kid": "agent:acme.alpha#key-1", "sig": "abc"},
	}
}

// idemErrorCode returns the *arsia.Error code and wire code of err.
func idemErrorCode(t *testing.T, err error) (code, wire string) {
	t.Helper()
	var ae *arsia.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *arsia.Error", err, err)
	}
	return ae.Code, ae.WireCode()
}

func TestValidateIdempotencyKey(t *testing.T) {
	tests := []struct {
		name, key string
		code      string // "" means valid
		contains  string
	}{
		{"letters digits underscore hyphen", "abc-123_XYZ", "", ""},
		{"one character", "a", "", ""},
		{"128 characters", strings.Repeat("a", 128), "", ""},
		{"space boundary", "a b", "", ""},
		{"only a space", " ", "", ""},
		{"tilde boundary", "a~b", "", ""},
		{"every printable", func() string {
			var b strings.Builder
			for c := byte(0x20); c <= 0x7e; c++ {
				b.WriteByte(c)
			}
			return b.String()
		}(), "", ""},
		{"empty", "", "idempotency_key_empty", "at least"},
		{"129 characters", strings.Repeat("a", 129), "idempotency_key_too_long", "at most"},
		{"control character", "ab\x01cd", arsia.IssueIdempotencyKeyInvalidChar, "U+0001 at position 2"},
		{"tab", "ab\tcd", arsia.IssueIdempotencyKeyInvalidChar, "printable-ASCII"},
		{"newline", "ab\ncd", arsia.IssueIdempotencyKeyInvalidChar, "printable-ASCII"},
		{"DEL", "ab\x7f", arsia.IssueIdempotencyKeyInvalidChar, "U+007F"},
		{"non-ASCII", "café", arsia.IssueIdempotencyKeyInvalidChar, "U+00E9 at position 3"},
		{"invalid UTF-8", "ab\xff", arsia.IssueIdempotencyKeyInvalidChar, "byte 0xFF"},
		{"long and non-ASCII reports the character", strings.Repeat("é", 100), arsia.IssueIdempotencyKeyInvalidChar, "printable-ASCII"},
		{"NUL", "\x00", arsia.IssueIdempotencyKeyInvalidChar, "U+0000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := arsia.ValidateIdempotencyKey(tt.key)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, arsia.ErrInvalidIdempotencyKey) {
				t.Fatalf("got %v, want ErrInvalidIdempotencyKey", err)
			}
			code, wire := idemErrorCode(t, err)
			if code != tt.code || wire != arsia.CodeInvalidRequest {
				t.Errorf("code %s (wire %s), want %s (invalid_request)", code, wire, tt.code)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q does not contain %q", err, tt.contains)
			}
		})
	}
}

func TestResolveIdempotencyKey(t *testing.T) {
	withKey := idemEnvelope()
	noKey := idemEnvelope()
	delete(noKey, "idempotency")
	tests := []struct {
		name   string
		env    map[string]any
		header string
		key    string
		src    arsia.IdempotencyKeySource
	}{
		{"header wins over envelope", withKey, "hdr-key", "hdr-key", arsia.IdempotencyKeyFromHeader},
		{"envelope without header", withKey, "", "env-key", arsia.IdempotencyKeyFromEnvelope},
		{"header without envelope key", noKey, "hdr-key", "hdr-key", arsia.IdempotencyKeyFromHeader},
		{"neither", noKey, "", "", arsia.IdempotencyKeyNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, src, err := arsia.ResolveIdempotencyKey(tt.env, tt.header)
			if err != nil || key != tt.key || src != tt.src {
				t.Errorf("got (%q, %v, %v), want (%q, %v)", key, src, err, tt.key, tt.src)
			}
		})
	}
	for name, bad := range map[string]any{
		"not an object":         "env-key",
		"key not a string":      map[string]any{"key": 7, "expires_at": "2026-04-15T12:00:00.000Z"},
		"key missing":           map[string]any{"expires_at": "2026-04-15T12:00:00.000Z"},
		"expires_at not string": map[string]any{"key": "k", "expires_at": 1},
	} {
		t.Run("malformed "+name, func(t *testing.T) {
			env := idemEnvelope()
			env["idempotency"] = bad
			// A malformed member is refused even when the header would win.
			for _, header := range []string{"", "hdr-key"} {
				if _, _, err := arsia.ResolveIdempotencyKey(env, header); !errors.Is(err, arsia.ErrInvalidEnvelope) {
					t.Errorf("header %q: got %v, want ErrInvalidEnvelope", header, err)
				}
			}
		})
	}
	if got := arsia.IdempotencyKeyFromEnvelope.String() + arsia.IdempotencyKeyFromHeader.String() + arsia.IdempotencyKeyNone.String(); got != "envelopeheadernone" {
		t.Errorf("source names %q", got)
	}
}

func TestIdempotencyScopeOf(t *testing.T) {
	s, err := arsia.IdempotencyScopeOf(idemEnvelope())
	want := arsia.IdempotencyScope{From: "agent:acme.alpha", To: "agent:acme.beta", PayloadType: "arsiaprotocol.state/set"}
	if err != nil || s != want {
		t.Fatalf("got %+v, %v; want %+v", s, err, want)
	}
	bad := map[string]func(m map[string]any){
		"missing from":         func(m map[string]any) { delete(m, "from") },
		"missing to":           func(m map[string]any) { delete(m, "to") },
		"from not a string":    func(m map[string]any) { m["from"] = 1 },
		"invalid to":           func(m map[string]any) { m["to"] = "acme.beta" },
		"empty from":           func(m map[string]any) { m["from"] = "" },
		"missing payload":      func(m map[string]any) { delete(m, "payload") },
		"payload without type": func(m map[string]any) { m["payload"] = map[string]any{} },
		"type not a string":    func(m map[string]any) { m["payload"] = map[string]any{"type": 3} },
		"invalid payload type": func(m map[string]any) { m["payload"] = map[string]any{"type": "no spaces allowed"} },
		"overlong payload type": func(m map[string]any) {
			m["payload"] = map[string]any{"type": "a." + strings.Repeat("b", 300)}
		},
		"encrypted payload": func(m map[string]any) { m["payload"] = "eyJhbGciOi.x.y.z.w" },
	}
	for name, mutate := range bad {
		t.Run(name, func(t *testing.T) {
			env := idemEnvelope()
			mutate(env)
			_, err := arsia.IdempotencyScopeOf(env)
			if !errors.Is(err, arsia.ErrIdempotencyScope) {
				t.Fatalf("got %v, want ErrIdempotencyScope", err)
			}
			if _, wire := idemErrorCode(t, err); wire != arsia.CodeInvalidRequest {
				t.Errorf("wire code %s", wire)
			}
		})
	}
	t.Run("exact comparison", func(t *testing.T) {
		env := idemEnvelope()
		env["from"] = "agent:Acme.alpha"
		other, err := arsia.IdempotencyScopeOf(env)
		if err != nil || other == s {
			t.Errorf("agent:Acme.alpha and agent:acme.alpha share a scope (%v)", err)
		}
	})
	t.Run("validate needs a key", func(t *testing.T) {
		if err := s.Validate(); !errors.Is(err, arsia.ErrInvalidIdempotencyKey) {
			t.Errorf("scope without key: %v", err)
		}
		s.Key = "k"
		if err := s.Validate(); err != nil {
			t.Errorf("complete scope: %v", err)
		}
	})
}

func TestIdempotencyFingerprint(t *testing.T) {
	base := idemEnvelope()
	fp, err := arsia.IdempotencyFingerprint(base)
	if err != nil || !strings.HasPrefix(fp, "sha256:") {
		t.Fatalf("fingerprint %q, %v", fp, err)
	}
	if _, ok := base["security"]; !ok {
		t.Fatal("fingerprint mutated its input")
	}
	same := map[string]func(m map[string]any){
		"new id":              func(m map[string]any) { m["id"] = "22222222-2222-4222-a222-222222222222" },
		"new ts":              func(m map[string]any) { m["ts"] = "2026-04-14T12:00:09.000Z" },
		"new expires_at":      func(m map[string]any) { m["expires_at"] = "2026-04-14T12:09:00.000Z" },
		"new signature":       func(m map[string]any) { m["security"] = map[string]any{"sig": "other"} },
		"no signature":        func(m map[string]any) { delete(m, "security") },
		"new span":            func(m map[string]any) { m["context"] = map[string]any{"span_id": strings.Repeat("b", 16)} },
		"key moved to header": func(m map[string]any) { delete(m, "idempotency") },
	}
	for name, mutate := range same {
		env := maps.Clone(base)
		mutate(env)
		if got, err := arsia.IdempotencyFingerprint(env); err != nil || got != fp {
			t.Errorf("%s: fingerprint changed (%v)", name, err)
		}
	}
	different := map[string]func(m map[string]any){
		"other args": func(m map[string]any) {
			m["payload"] = map[string]any{"type": "arsiaprotocol.state/set", "args": map[string]any{"key": "b"}}
		},
		"other capabilities": func(m map[string]any) { m["capabilities"] = []any{"notes.read"} },
		"other intent":       func(m map[string]any) { m["intent"] = "event" },
		"other receiver":     func(m map[string]any) { m["to"] = "agent:acme.gamma" },
		"compliance added":   func(m map[string]any) { m["compliance"] = map[string]any{"data_residency": "EU"} },
	}
	for name, mutate := range different {
		env := maps.Clone(base)
		mutate(env)
		if got, err := arsia.IdempotencyFingerprint(env); err != nil || got == fp {
			t.Errorf("%s: fingerprint unchanged (%v)", name, err)
		}
	}
	enc := maps.Clone(base)
	enc["payload"] = "a.b.c.d.e"
	if _, err := arsia.IdempotencyFingerprint(enc); !errors.Is(err, arsia.ErrIdempotencyRecord) {
		t.Errorf("encrypted payload: %v", err)
	}
	bad := maps.Clone(base)
	bad["payload"] = map[string]any{"type": "x.y", "args": struct{}{}}
	if _, err := arsia.IdempotencyFingerprint(bad); !errors.Is(err, arsia.ErrInvalidEnvelope) {
		t.Errorf("uncanonicalizable payload: %v", err)
	}
}

func TestComputeIdempotencyExpiry(t *testing.T) {
	floor := idemNow.Add(24 * time.Hour)
	tests := []struct {
		name       string
		declared   string
		headerOnly bool
		want       time.Time
		wantErr    error
	}{
		{"header-only floor", "", true, floor, nil},
		{"header-only later declared", "2026-04-20T00:00:00.000Z", true, time.Date(2026, 4, 20, 0, 0, 0, 0, time.UTC), nil},
		{"header-only earlier declared keeps the floor", "2026-04-14T13:00:00.000Z", true, floor, nil},
		{"header-only malformed declared", "tomorrow", true, time.Time{}, arsia.ErrIdempotencyExpiry},
		{"envelope key", "2026-04-14T12:00:01.000Z", false, idemNow.Add(time.Second), nil},
		{"envelope key without expiry", "", false, time.Time{}, arsia.ErrIdempotencyExpiry},
		{"envelope key already expired", "2026-04-14T11:59:59.000Z", false, time.Time{}, arsia.ErrIdempotencyExpiry},
		{"envelope key expiring now", "2026-04-14T12:00:00.000Z", false, time.Time{}, arsia.ErrIdempotencyExpiry},
		{"envelope key malformed", "2026-04-14T12:00:01Z", false, time.Time{}, arsia.ErrIdempotencyExpiry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := arsia.ComputeIdempotencyExpiry(tt.declared, tt.headerOnly, idemNow)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %v, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !got.Equal(tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := arsia.ComputeIdempotencyExpiry("", true, time.Time{}); !errors.Is(err, arsia.ErrNoClock) {
		t.Errorf("zero now: %v", err)
	}
}

func TestIsIdempotencyRecordExpired(t *testing.T) {
	tests := []struct {
		expiresAt string
		now       time.Time
		want      bool
	}{
		{"2026-04-14T12:00:01.000Z", idemNow, false},
		{"2026-04-14T12:00:00.000Z", idemNow, false}, // expired only once now > expires_at
		{"2026-04-14T12:00:00.000Z", idemNow.Add(time.Millisecond), true},
		{"2026-04-14T11:59:59.000Z", idemNow, true},
		{"not-a-timestamp", idemNow, true},
		{"", idemNow, true},
		{"2099-01-01T00:00:00.000Z", time.Time{}, true},
	}
	for _, tt := range tests {
		if got := arsia.IsIdempotencyRecordExpired(tt.expiresAt, tt.now); got != tt.want {
			t.Errorf("IsIdempotencyRecordExpired(%q, %v) = %v, want %v", tt.expiresAt, tt.now, got, tt.want)
		}
	}
	var nilRecord *arsia.IdempotencyRecord
	if !nilRecord.Expired(idemNow) || !(&arsia.IdempotencyRecord{}).Expired(idemNow) {
		t.Error("a nil record or one without expiry must count as expired")
	}
}

func TestPrepareIdempotency(t *testing.T) {
	req, err := arsia.PrepareIdempotency(idemEnvelope(), "", idemNow)
	if err != nil {
		t.Fatal(err)
	}
	if req.Scope.Key != "env-key" || req.Source != arsia.IdempotencyKeyFromEnvelope ||
		!req.ExpiresAt.Equal(idemNow.Add(24*time.Hour)) || req.Scope.From != "agent:acme.alpha" {
		t.Errorf("envelope key: %+v", req)
	}
	env := idemEnvelope()
	delete(env, "idempotency")
	req, err = arsia.PrepareIdempotency(env, "hdr-key", idemNow)
	if err != nil || req.Scope.Key != "hdr-key" || req.Source != arsia.IdempotencyKeyFromHeader ||
		!req.ExpiresAt.Equal(idemNow.Add(arsia.HeaderKeyRetention)) {
		t.Errorf("header key: %+v, %v", req, err)
	}
	if req, err := arsia.PrepareIdempotency(env, "", idemNow); req != nil || err != nil {
		t.Errorf("no key: %+v, %v", req, err)
	}
	if _, err := arsia.PrepareIdempotency(env, "bad\tkey", idemNow); !errors.Is(err, arsia.ErrInvalidIdempotencyKey) {
		t.Errorf("bad header key: %v", err)
	}
	env = idemEnvelope()
	env["idempotency"] = map[string]any{"key": "", "expires_at": "2026-04-15T12:00:00.000Z"}
	if _, err := arsia.PrepareIdempotency(env, "", idemNow); !errors.Is(err, arsia.ErrInvalidIdempotencyKey) {
		t.Errorf("empty envelope key must be refused, not ignored: %v", err)
	}
	env = idemEnvelope()
	delete(env, "from")
	if _, err := arsia.PrepareIdempotency(env, "", idemNow); !errors.Is(err, arsia.ErrIdempotencyScope) {
		t.Errorf("no sender: %v", err)
	}
	env = idemEnvelope()
	env["idempotency"] = map[string]any{"key": "k", "expires_at": "2026-04-14T11:00:00.000Z"}
	if _, err := arsia.PrepareIdempotency(env, "", idemNow); !errors.Is(err, arsia.ErrIdempotencyExpiry) {
		t.Errorf("expired envelope key: %v", err)
	}
}

// idemClock is a settable clock for stores.
type idemClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *idemClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *idemClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func idemScope(key string) arsia.IdempotencyScope {
	return arsia.IdempotencyScope{From: "agent:acme.alpha", To: "agent:acme.beta", PayloadType: "arsiaprotocol.state/set", Key: key}
}

func newIdemStore(opts arsia.MemoryIdempotencyStoreOptions) (*arsia.MemoryIdempotencyStore, *idemClock) {
	clock := &idemClock{now: idemNow}
	opts.Now = clock.Now
	return arsia.NewMemoryIdempotencyStore(&opts), clock
}

func TestMemoryIdempotencyStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	s, _ := newIdemStore(arsia.MemoryIdempotencyStoreOptions{})
	scope := idemScope("k1")
	exp := idemNow.Add(time.Hour)

	if st, _ := s.Status(ctx, scope); st != arsia.IdempotencyNew {
		t.Fatalf("status before Begin: %s", st)
	}
	existing, started, err := s.Begin(ctx, scope, "fp1", exp)
	if err != nil || !started || existing != nil {
		t.Fatalf("first Begin: %v %v %v", existing, started, err)
	}
	if st, _ := s.Status(ctx, scope); st != arsia.IdempotencyPending {
		t.Fatalf("status after Begin: %s", st)
	}

	existing, started, err = s.Begin(ctx, scope, "fp1", exp)
	if started || !errors.Is(err, arsia.ErrIdempotencyInProgress) || existing == nil || existing.Status != arsia.IdempotencyPending {
		t.Fatalf("duplicate in progress: %v %v %v", existing, started, err)
	}
	if _, wire := idemErrorCode(t, err); wire != arsia.CodeConflict {
		t.Errorf("in-progress wire code %s", wire)
	}

	resp := json.RawMessage(`{"intent":"response"}`)
	if err := s.Complete(ctx, scope, resp); err != nil {
		t.Fatal(err)
	}
	existing, started, err = s.Begin(ctx, scope, "fp1", exp)
	if err != nil || started || existing == nil || existing.Status != arsia.IdempotencyCompleted || string(existing.Response) != string(resp) {
		t.Fatalf("replay: %+v %v %v", existing, started, err)
	}
	if existing.CompletedAt != idemNow || existing.CreatedAt != idemNow || existing.Fingerprint != "fp1" {
		t.Errorf("record times or fingerprint: %+v", existing)
	}
	existing.Response[0] = 'X' // a copy: the store must not change
	if again, _, _ := s.Begin(ctx, scope, "fp1", exp); string(again.Response) != string(resp) {
		t.Error("Begin returned the store's own buffer")
	}

	existing, started, err = s.Begin(ctx, scope, "fp2", exp)
	if started || !errors.Is(err, arsia.ErrIdempotencyKeyReused) || existing == nil {
		t.Fatalf("key reused: %v %v %v", existing, started, err)
	}
	if _, wire := idemErrorCode(t, err); wire != arsia.CodeConflict {
		t.Errorf("key-reuse wire code %s", wire)
	}

	if err := s.Complete(ctx, scope, resp); !errors.Is(err, arsia.ErrIdempotencyNoPending) {
		t.Errorf("second Complete: %v", err)
	}
	if err := s.Forget(ctx, scope); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, scope); err != nil {
		t.Errorf("Forget of an absent record: %v", err)
	}
	if _, started, err := s.Begin(ctx, scope, "fp2", exp); !started || err != nil {
		t.Errorf("Begin after Forget: %v %v", started, err)
	}
	if err := s.Complete(ctx, idemScope("never"), resp); !errors.Is(err, arsia.ErrIdempotencyNoPending) {
		t.Errorf("Complete without Begin: %v", err)
	}
}

func TestMemoryIdempotencyStoreKeyReusedWhilePending(t *testing.T) {
	s, _ := newIdemStore(arsia.MemoryIdempotencyStoreOptions{})
	ctx := context.Background()
	scope := idemScope("k")
	if _, ok, err := s.Begin(ctx, scope, "fp1", idemNow.Add(time.Hour)); !ok || err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Begin(ctx, scope, "fp2", idemNow.Add(time.Hour)); !errors.Is(err, arsia.ErrIdempotencyKeyReused) {
		t.Errorf("different request while pending: %v", err)
	}
}

func TestMemoryIdempotencyStoreExpiry(t *testing.T) {
	ctx := context.Background()
	s, clock := newIdemStore(arsia.MemoryIdempotencyStoreOptions{})
	scope := idemScope("k")
	if _, ok, err := s.Begin(ctx, scope, "fp", idemNow.Add(time.Minute)); !ok || err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, scope, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute) // now == expires_at: still kept
	if _, started, err := s.Begin(ctx, scope, "fp", clock.Now().Add(time.Minute)); started || err != nil {
		t.Fatalf("at expiry: started %v, %v", started, err)
	}
	clock.Advance(time.Millisecond)
	if rec, _ := s.Get(ctx, scope); rec != nil {
		t.Fatalf("expired record still visible: %+v", rec)
	}
	if _, started, err := s.Begin(ctx, scope, "other", clock.Now().Add(time.Minute)); !started || err != nil {
		t.Fatalf("after expiry the key is new again: %v %v", started, err)
	}
	clock.Advance(2 * time.Minute)
	if err := s.Complete(ctx, scope, json.RawMessage(`{}`)); !errors.Is(err, arsia.ErrIdempotencyNoPending) {
		t.Errorf("Complete after the pending record expired: %v", err)
	}
	if s.Len() != 0 {
		t.Errorf("Len %d after expiry", s.Len())
	}
	for _, exp := range []time.Time{clock.Now(), clock.Now().Add(-time.Second), {}} {
		if _, _, err := s.Begin(ctx, scope, "fp", exp); !errors.Is(err, arsia.ErrIdempotencyExpiry) {
			t.Errorf("expiresAt %v: %v", exp, err)
		}
	}
}

func TestMemoryIdempotencyStoreCapacity(t *testing.T) {
	ctx := context.Background()
	s, clock := newIdemStore(arsia.MemoryIdempotencyStoreOptions{MaxRecords: 3, MaxBytes: 16})
	for i := range 3 {
		exp := idemNow.Add(time.Duration(i+1) * time.Minute)
		if _, ok, err := s.Begin(ctx, idemScope(fmt.Sprint(i)), "fp", exp); !ok || err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	_, started, err := s.Begin(ctx, idemScope("3"), "fp", idemNow.Add(time.Hour))
	if started || !errors.Is(err, arsia.ErrIdempotencyStoreFull) {
		t.Fatalf("full store: %v %v", started, err)
	}
	if _, wire := idemErrorCode(t, err); wire != arsia.CodeServiceUnavailable {
		t.Errorf("full-store wire code %s", wire)
	}
	// A live record is never evicted to make room.
	if rec, _ := s.Get(ctx, idemScope("0")); rec == nil {
		t.Fatal("live record evicted")
	}
	clock.Advance(time.Minute + time.Millisecond) // record 0 expires
	if _, ok, err := s.Begin(ctx, idemScope("3"), "fp", idemNow.Add(time.Hour)); !ok || err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if err := s.Forget(ctx, idemScope("1")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Begin(ctx, idemScope("4"), "fp", idemNow.Add(time.Hour)); !ok || err != nil {
		t.Fatalf("after Forget: %v", err)
	}

	// Byte budget: 16 bytes of responses.
	if err := s.Complete(ctx, idemScope("3"), json.RawMessage(`"0123456789"`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, idemScope("4"), json.RawMessage(`"0123456789"`)); !errors.Is(err, arsia.ErrIdempotencyStoreFull) {
		t.Fatalf("over the byte budget: %v", err)
	}
	if st, _ := s.Status(ctx, idemScope("4")); st != arsia.IdempotencyPending {
		t.Errorf("a record that could not complete must stay pending, got %s", st)
	}
	if err := s.Forget(ctx, idemScope("3")); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, idemScope("4"), json.RawMessage(`"0123456789"`)); err != nil {
		t.Errorf("budget freed by Forget: %v", err)
	}
}

func TestMemoryIdempotencyStoreRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := newIdemStore(arsia.MemoryIdempotencyStoreOptions{})
	exp := idemNow.Add(time.Hour)
	for name, scope := range map[string]arsia.IdempotencyScope{
		"no key":       idemScope(""),
		"bad key":      idemScope("a\x00"),
		"bad sender":   {From: "x", To: "agent:a.b", PayloadType: "a.b", Key: "k"},
		"no type":      {From: "agent:a.b", To: "agent:a.b", Key: "k"},
		"zero":         {},
		"long key":     idemScope(strings.Repeat("k", 129)),
		"bad receiver": {From: "agent:a.b", To: "", PayloadType: "a.b", Key: "k"},
	} {
		if _, started, err := s.Begin(ctx, scope, "fp", exp); started || err == nil {
			t.Errorf("%s: started %v, %v", name, started, err)
		}
	}
	if _, _, err := s.Begin(ctx, idemScope("k"), "", exp); !errors.Is(err, arsia.ErrIdempotencyRecord) {
		t.Errorf("empty fingerprint: %v", err)
	}
	if _, ok, err := s.Begin(ctx, idemScope("k"), "fp", exp); !ok || err != nil {
		t.Fatal(err)
	}
	for _, resp := range []json.RawMessage{nil, json.RawMessage(`{`), json.RawMessage(strings.Repeat(" ", arsia.DefaultMaxMessageBytes+1))} {
		if err := s.Complete(ctx, idemScope("k"), resp); !errors.Is(err, arsia.ErrIdempotencyRecord) {
			t.Errorf("response %.10q: %v", resp, err)
		}
	}
	if s.Len() != 1 {
		t.Errorf("Len %d, want 1", s.Len())
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Begin(canceled, idemScope("c"), "fp", exp); !errors.Is(err, context.Canceled) {
		t.Errorf("Begin: %v", err)
	}
	if err := s.Complete(canceled, idemScope("k"), json.RawMessage(`{}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("Complete: %v", err)
	}
	if err := s.Forget(canceled, idemScope("k")); !errors.Is(err, context.Canceled) {
		t.Errorf("Forget: %v", err)
	}
	if _, err := s.Get(canceled, idemScope("k")); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v", err)
	}
	if st, _ := s.Status(ctx, idemScope("k")); st != arsia.IdempotencyPending {
		t.Errorf("canceled calls changed the store: %s", st)
	}
}

func TestMemoryIdempotencyStoreDefaults(t *testing.T) {
	s := arsia.NewMemoryIdempotencyStore(nil)
	_, ok, err := s.Begin(context.Background(), idemScope("k"), "fp", time.Now().Add(time.Hour))
	if !ok || err != nil {
		t.Fatalf("default store: %v", err)
	}
}

// TestMemoryIdempotencyStoreRace races many Begin calls on one key:
// exactly one starts, every other one is refused as in progress.
func TestMemoryIdempotencyStoreRace(t *testing.T) {
	ctx := context.Background()
	s, _ := newIdemStore(arsia.MemoryIdempotencyStoreOptions{})
	const n = 64
	var started, inProgress atomic.Int32
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-gate
			_, ok, err := s.Begin(ctx, idemScope("race"), "fp", idemNow.Add(time.Hour))
			switch {
			case ok && err == nil:
				started.Add(1)
			case errors.Is(err, arsia.ErrIdempotencyInProgress):
				inProgress.Add(1)
			default:
				t.Errorf("unexpected outcome %v %v", ok, err)
			}
		})
	}
	close(gate)
	wg.Wait()
	if started.Load() != 1 || inProgress.Load() != n-1 {
		t.Errorf("started %d, in progress %d; want 1 and %d", started.Load(), inProgress.Load(), n-1)
	}
}

// TestMemoryIdempotencyStoreConcurrentUse mixes every method over many
// keys for the race detector; each key executes at most once.
func TestMemoryIdempotencyStoreConcurrentUse(t *testing.T) {
	ctx := context.Background()
	s, clock := newIdemStore(arsia.MemoryIdempotencyStoreOptions{MaxRecords: 50})
	var executed [10]atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				k := (g + i) % len(executed)
				scope := idemScope(fmt.Sprint("key-", k))
				_, ok, err := s.Begin(ctx, scope, "fp", idemNow.Add(time.Hour))
				if ok {
					executed[k].Add(1)
					if err := s.Complete(ctx, scope, json.RawMessage(`{"ok":true}`)); err != nil {
						t.Errorf("Complete: %v", err)
					}
				} else if err != nil && !errors.Is(err, arsia.ErrIdempotencyInProgress) {
					t.Errorf("Begin: %v", err)
				}
				if i%50 == 0 {
					_, _ = s.Get(ctx, scope)
					_ = s.Len()
					clock.Advance(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	for k := range executed {
		if got := executed[k].Load(); got != 1 {
			t.Errorf("key-%d executed %d times", k, got)
		}
	}
}

func FuzzValidateIdempotencyKey(f *testing.F) {
	for _, s := range []string{"", "a", "abc-123_XYZ", "a b", "a~b", "ab\x01cd", "café", "\xff", strings.Repeat("a", 128), strings.Repeat("a", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := arsia.ValidateIdempotencyKey(key)
		want := len(key) >= 1 && len(key) <= 128
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				want = false
			}
		}
		if (err == nil) != want {
			t.Fatalf("ValidateIdempotencyKey(%q) = %v, want valid=%v", key, err, want)
		}
		if err != nil && !errors.Is(err, arsia.ErrInvalidIdempotencyKey) {
			t.Fatalf("error %v does not wrap ErrInvalidIdempotencyKey", err)
		}
		if err != nil && len(key) > 0 && strings.Contains(err.Error(), key) && len(key) > 8 {
			t.Fatalf("error quotes the key: %v", err)
		}
	})
}

func ExampleValidateIdempotencyKey() {
	fmt.Println(arsia.ValidateIdempotencyKey("order-2026-0042"))
	fmt.Println(arsia.ValidateIdempotencyKey(""))
	fmt.Println(arsia.ValidateIdempotencyKey("caf\u00e9"))
	// Output:
	// <nil>
	// arsia: idempotency_key_empty: idempotency key must be at least 1 character long
	// arsia: idempotency_key_invalid_char: idempotency key must contain only printable-ASCII characters (U+0020-U+007E); found U+00E9 at position 3
}

func ExampleMemoryIdempotencyStore() {
	ctx := context.Background()
	now := time.Date(2026, 4, 14, 12, 0, 0, 0, time.UTC)
	store := arsia.NewMemoryIdempotencyStore(&arsia.MemoryIdempotencyStoreOptions{Now: func() time.Time { return now }})

	request := map[string]any{
		"v": "1.0", "id": "11111111-1111-4111-9111-111111111111", "ts": "2026-04-14T12:00:00.000Z",
		"from": "agent:acme.alpha", "to": "agent:acme.beta", "intent": "request",
		"payload": map[string]any{"type": "arsiaprotocol.state/set", "args": map[string]any{"key": "a"}},
	}
	idem, err := arsia.PrepareIdempotency(request, "order-42", now) // Idempotency-Key: order-42
	if err != nil {
		panic(err)
	}
	handle := func() {
		existing, started, err := store.Begin(ctx, idem.Scope, idem.Fingerprint, idem.ExpiresAt)
		switch {
		case started:
			fmt.Println("execute, then store the response")
			_ = store.Complete(ctx, idem.Scope, json.RawMessage(`{"intent":"response"}`))
		case err != nil:
			fmt.Println("refuse:", err)
		default:
			fmt.Println("replay", string(existing.Response))
		}
	}
	handle()
	handle()
	fmt.Println(idem.ExpiresAt.Format(time.RFC3339))
	// Output:
	// execute, then store the response
	// replay {"intent":"response"}
	// 2026-04-15T12:00:00Z
}
