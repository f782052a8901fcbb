package sig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

func encPub(t testing.TB, kid string) jose.JSONWebKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Use: "enc"}
}

// The encryption key of an agent is the first "use": "enc" EC P-256 key
// its JWKS lists under one of its kids; signing keys, other agents' keys,
// X25519 keys and keys whose key_ops exclude key agreement are not.
func TestParseEncryptionKeys(t *testing.T) {
	sigKey, _ := ecKey(t)
	enc1, enc2, other := encPub(t, testFrom+"#enc-1"), encPub(t, testFrom+"#enc-2"), encPub(t, "agent:acme.other#enc-1")
	doc := string(jwksJSON(t, pubJWK(sigKey, testFrom+"#sig"), other, enc1, enc2))
	s, err := ParseStaticJWKS([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.EncryptionKey(t.Context(), testFrom)
	if err != nil || k.KeyID != enc1.KeyID || !k.IsPublic() {
		t.Fatalf("EncryptionKey = %+v, %v; want %s", k, err, enc1.KeyID)
	}
	// The encryption keys are not verification keys.
	if _, err := s.Key(t.Context(), enc1.KeyID); !errors.Is(err, ErrUnknownKid) {
		t.Errorf("Key(%s) = %v, want ErrUnknownKid", enc1.KeyID, err)
	}
	if k, err := s.EncryptionKey(t.Context(), "agent:acme.other"); err != nil || k.KeyID != other.KeyID {
		t.Errorf("other agent: %+v, %v", k, err)
	}
	// "agent:acme.bill" is a prefix of testFrom's id but not its kid.
	for _, agent := range []string{"agent:acme.nobody", "agent:acme.bill", testFrom + "#enc-1"} {
		if _, err := s.EncryptionKey(t.Context(), agent); !errors.Is(err, ErrNoEncryptionKey) || !errors.Is(err, ErrUnauthorized) {
			t.Errorf("EncryptionKey(%s) = %v, want ErrNoEncryptionKey", agent, err)
		}
	}
	for name, doc := range map[string]string{
		"X25519":         `{"keys":[{"kty":"OKP","crv":"X25519","x":"hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo","use":"enc","kid":"` + testFrom + `#x"}]}`,
		"key_ops verify": strings.Replace(string(jwksJSON(t, enc1)), `"use":"enc"`, `"use":"enc","key_ops":["verify"]`, 1),
		"no kid":         strings.Replace(string(jwksJSON(t, enc1)), `"kid":"`+enc1.KeyID+`",`, ``, 1),
		"use sig":        string(jwksJSON(t, jose.JSONWebKey{Key: enc1.Key, KeyID: enc1.KeyID, Use: "sig"})),
		"label absent":   string(jwksJSON(t, jose.JSONWebKey{Key: enc1.Key, KeyID: testFrom + "#", Use: "enc"})),
	} {
		s, err := ParseStaticJWKS([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if k, err := s.EncryptionKey(t.Context(), testFrom); !errors.Is(err, ErrNoEncryptionKey) {
			t.Errorf("%s: EncryptionKey = %+v, %v; want none", name, k, err)
		}
	}
	ok := strings.Replace(string(jwksJSON(t, enc1)), `"use":"enc"`, `"use":"enc","key_ops":["deriveKey"]`, 1)
	if s, _ := ParseStaticJWKS([]byte(ok)); s == nil {
		t.Fatal("key_ops deriveKey refused")
	} else if _, err := s.EncryptionKey(t.Context(), testFrom); err != nil {
		t.Errorf("key_ops deriveKey: %v", err)
	}
	// A private encryption key published refuses the whole document.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseStaticJWKS(jwksJSON(t, jose.JSONWebKey{Key: priv, KeyID: testFrom + "#enc-p", Use: "enc"})); !errors.Is(err, ErrKeySource) {
		t.Errorf("private enc key: %v", err)
	}
	// NewStaticJWKS keeps the public half of a private encryption key.
	ns := NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: priv, KeyID: testFrom + "#enc-p", Use: "enc"}}})
	if k, err := ns.EncryptionKey(t.Context(), testFrom); err != nil || !k.IsPublic() {
		t.Errorf("NewStaticJWKS: %+v, %v", k, err)
	}
}

func TestEncryptionKeySources(t *testing.T) {
	enc := encPub(t, testFrom+"#enc-1")
	dir := t.TempDir()
	path := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(path, jwksJSON(t, enc), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newJWKSServer(t, enc)
	clock := newClock()
	for name, src := range map[string]EncryptionKeySource{
		"file":    NewJWKSFile(path),
		"http":    srv.source(t, clock, nil),
		"sources": KeySources{static(), NewJWKSFile(path)},
	} {
		k, err := src.EncryptionKey(t.Context(), testFrom)
		if err != nil || k.KeyID != enc.KeyID {
			t.Errorf("%s: %+v, %v", name, k, err)
		}
		if _, err := src.EncryptionKey(t.Context(), "agent:acme.nobody"); !errors.Is(err, ErrNoEncryptionKey) {
			t.Errorf("%s: unknown agent: %v", name, err)
		}
	}
	if _, err := NewJWKSFile(filepath.Join(dir, "missing.json")).EncryptionKey(t.Context(), testFrom); !errors.Is(err, ErrKeySource) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := (KeySources{}).EncryptionKey(t.Context(), testFrom); !errors.Is(err, ErrNoEncryptionKey) {
		t.Errorf("no sources: %v", err)
	}
	srv.set(func(s *jwksServer) { s.status = 500 })
	down := srv.source(t, clock, nil)
	if _, err := down.EncryptionKey(t.Context(), testFrom); !errors.Is(err, ErrKeySource) {
		t.Errorf("server down: %v", err)
	}
}

// With RequireKeyID, a JWE whose header names no kid is refused as for
// another key; without it, it is tried with the key.
func TestDecryptRequireKeyID(t *testing.T) {
	key := fuzzKey(t)
	v := &Verified{Envelope: map[string]any{"payload": fuzzJWE(t, &jose.JSONWebKey{Key: key.Key}, ECDHES, []byte(`{"type":"a"}`))},
		Encrypted: true, EncAlg: ECDHES, EncMethod: A256GCM}
	if _, err := Decrypt(v, DecryptOptions{Key: key, Algorithms: []string{ECDHES}}); err != nil {
		t.Errorf("without RequireKeyID: %v", err)
	}
	_, err := Decrypt(v, DecryptOptions{Key: key, Algorithms: []string{ECDHES}, RequireKeyID: true})
	if !errors.Is(err, ErrWrongRecipient) || !errors.Is(err, ErrDecrypt) {
		t.Errorf("with RequireKeyID: %v, want ErrWrongRecipient", err)
	}
	v.Envelope["payload"] = fuzzJWE(t, &jose.JSONWebKey{Key: key.Key, KeyID: "agent:acme.gateway#enc-2"}, ECDHES, []byte(`{"type":"a"}`))
	if _, err := Decrypt(v, DecryptOptions{Key: key, Algorithms: []string{ECDHES}}); !errors.Is(err, ErrWrongRecipient) {
		t.Errorf("another kid: %v, want ErrWrongRecipient", err)
	}
}
