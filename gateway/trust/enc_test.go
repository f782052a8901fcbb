package trust_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway/trust"
)

// The store finds a sender's encryption key where it finds its signing
// keys, and not one the receiver revoked, nor one a JWKS file lists for a
// configured peer.
func TestEncryptionKey(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	enc := jose.JSONWebKey{Key: &priv.PublicKey, KeyID: advisor + "#enc-1", Use: "enc"}
	peerEnc := jose.JSONWebKey{Key: &priv.PublicKey, KeyID: billing + "#enc-1", Use: "enc"}
	file := filepath.Join(t.TempDir(), "jwks.json")
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{newAgentKey(t, advisor+"#key-1").jwk(), enc, peerEnc}})
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := newFakePeer(t, billing, newAgentKey(t, billing+"#key-1"))
	c := newClock()
	s := newStore(t, trust.Config{JWKSFiles: []string{file}, Peers: []trust.Peer{{Agent: billing, URL: p.srv.URL}}}, c)
	k, err := s.EncryptionKey(t.Context(), advisor)
	if err != nil || k.KeyID != enc.KeyID {
		t.Fatalf("EncryptionKey(advisor) = %+v, %v", k, err)
	}
	// The peer's own JWKS lists none; the file cannot vouch for it.
	if _, err := s.EncryptionKey(t.Context(), billing); !errors.Is(err, sig.ErrNoEncryptionKey) {
		t.Errorf("EncryptionKey(peer) = %v, want ErrNoEncryptionKey", err)
	}
	if _, err := s.EncryptionKey(t.Context(), "not an agent"); !errors.Is(err, sig.ErrNoEncryptionKey) {
		t.Errorf("EncryptionKey(bad id) = %v", err)
	}
	tp, err := enc.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	revoked := newStore(t, trust.Config{JWKSFiles: []string{file}, RevokedThumbprints: []string{base64.RawURLEncoding.EncodeToString(tp)}}, c)
	if _, err := revoked.EncryptionKey(t.Context(), advisor); !errors.Is(err, sig.ErrRevokedKey) {
		t.Errorf("revoked encryption key: %v, want ErrRevokedKey", err)
	}
}
