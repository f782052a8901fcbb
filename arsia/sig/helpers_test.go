package sig

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

const testFrom = "agent:acme.billing"

// testEnvelope is a small request envelope in decoded form.
func testEnvelope() map[string]any {
	env, err := DecodeEnvelope([]byte(`{
		"v": "1.0",
		"id": "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
		"ts": "2026-03-24T10:00:00.000Z",
		"from": "agent:acme.billing",
		"to": "agent:acme.ledger",
		"intent": "request",
		"expires_at": "2026-03-24T10:00:30.000Z",
		"capabilities": ["ledger.post"],
		"payload": {"type": "com.acme.ledger/post", "args": {"amount": 8542.0, "note": "<&>"}}
	}`))
	if err != nil {
		panic(err)
	}
	return env
}

func edKey(t testing.TB, seedByte byte) (Signer, ed25519.PrivateKey) {
	t.Helper()
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = seedByte
	}
	s, err := NewEd25519Signer(seed)
	if err != nil {
		t.Fatal(err)
	}
	return s, ed25519.NewKeyFromSeed(seed)
}

func ecKey(t testing.TB) (Signer, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

// testRSAKey is generated once: RSA key generation is slow under -race.
func testRSAKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	rsaOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		rsaKey = k
	})
	return rsaKey
}

// pubJWK is the public JWK of s under kid, use sig.
func pubJWK(s Signer, kid string) jose.JSONWebKey {
	return jose.JSONWebKey{Key: s.Public(), KeyID: kid, Use: "sig"}
}

func static(keys ...jose.JSONWebKey) *StaticJWKS {
	return NewStaticJWKS(jose.JSONWebKeySet{Keys: keys})
}

func jwksJSON(t testing.TB, keys ...jose.JSONWebKey) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSign(t testing.TB, env map[string]any, s Signer, kid string) map[string]any {
	t.Helper()
	out, err := Sign(env, s, kid)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func secOf(env map[string]any) map[string]any {
	return env["security"].(map[string]any)
}

// wantErr fails unless err wraps want (and, as every error must,
// ErrUnauthorized).
func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("error %v does not match ErrUnauthorized", err)
	}
}

var allAlgs = []string{EdDSA, ES256, RS256}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.Date(2026, 3, 24, 10, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func ed25519Private(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, priv := edKey(t, 7)
	return priv
}
