package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
)

// custos serve publishes an encryption key in its JWKS, kept in the data
// directory across restarts; a request encrypted to it runs, and the reply
// comes back encrypted to the sender's published key.
func TestServeEncryptedRoundTrip(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	g := startGateway(t, data, nil)
	defer func() { g.stop() }()

	// The sender publishes an encryption key next to its signing key.
	senderEnc, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	encKID := sender + "#enc-1"
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: g.signer.Public(), KeyID: g.kid, Algorithm: "EdDSA", Use: "sig"},
		{Key: &senderEnc.PublicKey, KeyID: encKID, Use: "enc"}}}
	b, _ := json.Marshal(set)
	tmp := g.sendersJWKS + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, g.sendersJWKS); err != nil {
		t.Fatal(err)
	}

	gwEnc := g.encryptionKey(t)
	if gwEnc.KeyID != "agent:acme.gateway#enc-1" {
		t.Fatalf("gateway encryption kid %s", gwEnc.KeyID)
	}
	if fi, err := os.Stat(filepath.Join(data, "gateway.enc.jwk.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("encryption key file: %v %v", fi, err)
	}

	e, err := arsia.NewRequest(sender, "agent:acme.gateway", []string{"demo.echo"}, "com.acme/call", map[string]any{"text": "secret"},
		arsia.BuildOptions{Now: time.Now(), Compliance: map[string]any{"profile": "GDPR-STANDARD"}})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := e.Map()
	env, err = sig.EncryptPayload(env, gwEnc, sig.ECDHES)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := sig.Sign(env, g.signer, g.kid)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(signed)
	code, reply, _ := g.post(t, body, "application/arsia+json; v=1")
	if code != 200 {
		t.Fatalf("encrypted request: %d %v", code, reply)
	}
	g.verifyReply(t, reply)
	jwe, ok := reply["payload"].(string)
	if !ok || strings.Contains(jwe, "secret") {
		t.Fatalf("reply payload %v is not a JWE", reply["payload"])
	}
	obj, err := jose.ParseEncryptedCompact(jwe, []jose.KeyAlgorithm{jose.ECDH_ES}, []jose.ContentEncryption{jose.A256GCM})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := obj.Decrypt(senderEnc)
	if err != nil || obj.Header.KeyID != encKID {
		t.Fatalf("decrypting the reply (kid %s): %v", obj.Header.KeyID, err)
	}
	var payload map[string]any
	if err := json.Unmarshal(plain, &payload); err != nil || get(payload, "result", "echo", "text") != "secret" {
		t.Fatalf("decrypted reply %s: %v", plain, err)
	}

	// The key survives a restart: requests encrypted to it still work.
	g.stop()
	g = startGateway(t, data, g)
	if again := g.encryptionKey(t); again.KeyID != gwEnc.KeyID || !again.Key.(*ecdsa.PublicKey).Equal(gwEnc.Key) {
		t.Fatal("the gateway's encryption key changed across a restart")
	}
}

// encryptionKey fetches the gateway's JWKS and returns its "use": "enc"
// key.
func (g *gatewayUnderTest) encryptionKey(t *testing.T) *jose.JSONWebKey {
	t.Helper()
	resp, err := http.Get(g.url + "/.well-known/arsia/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	keys, err := sig.ParseStaticJWKS(b)
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.EncryptionKey(t.Context(), "agent:acme.gateway")
	if err != nil {
		t.Fatalf("the gateway's JWKS %s: %v", b, err)
	}
	return k
}

func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
