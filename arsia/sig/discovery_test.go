package sig

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// agentServer serves /.well-known/arsia and a JWKS, like an ARSIA agent.
func agentServer(t *testing.T, agentID, jwksRef string, jwks []byte) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var metaHits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/arsia", func(w http.ResponseWriter, r *http.Request) {
		metaHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"agent_id":"` + agentID + `","name":"Billing","version":"1.2.0","protocol_version":"1.0",
			"inbox":"/v1/arsia/inbox","jwks":"` + jwksRef + `","capabilities_supported":["ledger.post"],
			"max_message_bytes":1048576,"request_timeout_ms":30000,"server_min":"1.0","server_max":"1.0",
			"features":{"encryption":true}}`))
	})
	mux.HandleFunc("GET /.well-known/arsia/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(jwks)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv, &metaHits
}

func TestDiscovery(t *testing.T) {
	ed, _ := edKey(t, 1)
	intruder, _ := edKey(t, 2)
	kid := testFrom + "#key-1"
	jwks := jwksJSON(t, pubJWK(ed, kid), pubJWK(intruder, "agent:acme.ledger#key-1"))
	srv, hits := agentServer(t, testFrom, "/.well-known/arsia/jwks.json", jwks)
	clock := newClock()
	d, err := NewDiscovery(srv.URL, testFrom, &HTTPJWKSOptions{Client: srv.Client(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env := mustSign(t, testEnvelope(), ed, kid)
	v, err := Verify(ctx, env, d, VerifyOptions{Algorithms: []string{EdDSA}})
	if err != nil {
		t.Fatal(err)
	}
	if v.KeyID != kid {
		t.Fatal(v.KeyID)
	}
	meta, err := d.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if meta.AgentID != testFrom || meta.JWKS != srv.URL+"/.well-known/arsia/jwks.json" || meta.MaxMessageBytes != 1048576 || meta.Raw["features"] == nil {
		t.Fatalf("metadata %+v", meta)
	}
	// The agent's JWKS lists a key for another agent: it is not used.
	other := testEnvelope()
	other["from"] = "agent:acme.ledger"
	other = mustSign(t, other, intruder, "agent:acme.ledger#key-1")
	_, err = Verify(ctx, other, d, VerifyOptions{Algorithms: []string{EdDSA}})
	wantErr(t, err, ErrUnknownKid)
	if hits.Load() != 1 {
		t.Fatalf("metadata fetched %d times", hits.Load())
	}
}

func TestDiscoveryRefusesOtherAgent(t *testing.T) {
	ed, _ := edKey(t, 1)
	srv, hits := agentServer(t, "agent:acme.impostor", "/.well-known/arsia/jwks.json", jwksJSON(t, pubJWK(ed, testFrom+"#k")))
	clock := newClock()
	d, err := NewDiscovery(srv.URL, testFrom, &HTTPJWKSOptions{Client: srv.Client(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = d.Key(ctx, testFrom+"#k")
	wantErr(t, err, ErrKeySource)
	_, err = d.Key(ctx, testFrom+"#k")
	wantErr(t, err, ErrKeySource)
	if hits.Load() != 1 {
		t.Fatalf("failed discovery retried within the interval: %d", hits.Load())
	}
	clock.Advance(DefaultMinRefreshInterval)
	_, _ = d.Key(ctx, testFrom+"#k")
	if hits.Load() != 2 {
		t.Fatalf("discovery not retried after the interval: %d", hits.Load())
	}
	// Kids of other agents never cause a request.
	_, err = d.Key(ctx, "agent:acme.other#k")
	wantErr(t, err, ErrUnknownKid)
	if hits.Load() != 2 {
		t.Fatal("foreign kid caused a fetch")
	}
}

func TestFetchAgentMetadataRefuses(t *testing.T) {
	ctx := context.Background()
	for name, ref := range map[string]string{
		"plain http jwks": "http://example.test/jwks.json",
		"no jwks":         "",
	} {
		srv, _ := agentServer(t, testFrom, ref, nil)
		if _, err := FetchAgentMetadata(ctx, srv.URL, testFrom, &HTTPJWKSOptions{Client: srv.Client()}); !errors.Is(err, ErrKeySource) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewDiscovery("https://example.test", "agent:a.b#k", nil); err == nil {
		t.Error("agent id with # accepted")
	}
	if _, err := NewDiscovery("http://example.test", testFrom, nil); err == nil {
		t.Error("http base URL accepted")
	}
	notFound := httptest.NewTLSServer(http.NotFoundHandler())
	defer notFound.Close()
	if _, err := FetchAgentMetadata(ctx, notFound.URL, testFrom, &HTTPJWKSOptions{Client: notFound.Client()}); !errors.Is(err, ErrKeySource) {
		t.Error(err)
	}
}

func TestJWKSFile(t *testing.T) {
	ed, _ := edKey(t, 1)
	ec, _ := ecKey(t)
	k1, k2 := testFrom+"#key-1", testFrom+"#key-2"
	path := filepath.Join(t.TempDir(), "jwks.json")
	write := func(b []byte) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	f := NewJWKSFile(path)
	_, err := f.Key(ctx, k1)
	wantErr(t, err, ErrKeySource) // no file yet

	write(jwksJSON(t, pubJWK(ed, k1)))
	if _, err := f.Key(ctx, k1); err != nil {
		t.Fatal(err)
	}
	_, err = f.Key(ctx, k2)
	wantErr(t, err, ErrUnknownKid)

	write(jwksJSON(t, pubJWK(ed, k1), pubJWK(ec, k2)))
	if _, err := f.Key(ctx, k2); err != nil {
		t.Fatal(err)
	}
	write(jwksJSON(t, pubJWK(ec, k2)))
	_, err = f.Key(ctx, k1)
	wantErr(t, err, ErrRevokedKey)

	write([]byte(`{"keys":`))
	_, err = f.Key(ctx, k2)
	wantErr(t, err, ErrKeySource)

	write(jwksJSON(t, pubJWK(ec, k2)))
	if _, err := f.Key(ctx, k2); err != nil {
		t.Fatal(err)
	}
	// An old, unchanged file is not read again.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Key(ctx, k2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Key(ctx, k2); err != nil {
		t.Fatal(err)
	}
}

func TestStaticJWKS(t *testing.T) {
	ed, priv := edKey(t, 1)
	ctx := context.Background()
	// Private keys handed over in process are reduced to public ones.
	s := NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: priv, KeyID: testFrom + "#k"},
		{Key: priv.Public(), KeyID: testFrom + "#enc", Use: "enc"},
		{Key: []byte("secret"), KeyID: testFrom + "#hmac"},
	}})
	k, err := s.Key(ctx, testFrom+"#k")
	if err != nil || !k.IsPublic() {
		t.Fatalf("%+v %v", k, err)
	}
	for _, kid := range []string{testFrom + "#enc", testFrom + "#hmac"} {
		_, err := s.Key(ctx, kid)
		wantErr(t, err, ErrUnknownKid)
	}
	parsed, err := ParseStaticJWKS(jwksJSON(t, pubJWK(ed, testFrom+"#k")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parsed.Key(ctx, testFrom+"#k"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseStaticJWKS(jwksJSON(t, jose.JSONWebKey{Key: priv, KeyID: "x"})); err == nil {
		t.Fatal("JWKS with a private key accepted")
	}
}
