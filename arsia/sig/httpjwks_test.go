package sig

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// jwksServer serves a mutable JWKS and records requests.
type jwksServer struct {
	t *testing.T
	*httptest.Server

	mu           sync.Mutex
	body         []byte
	etag         string
	cacheControl string
	status       int
	requests     int
	conditional  int // requests that carried If-None-Match
}

func newJWKSServer(t *testing.T, keys ...jose.JSONWebKey) *jwksServer {
	s := &jwksServer{t: t, status: http.StatusOK}
	s.setKeys(keys...)
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setKeys(keys ...jose.JSONWebKey) {
	s.setBody(jwksJSON(s.t, keys...))
}

func (s *jwksServer) setBody(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = b
	s.etag = `"v` + string(rune('0'+len(b)%10)) + time.Now().Format("150405.000000000") + `"`
}

func (s *jwksServer) set(f func(*jwksServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *jwksServer) counts() (requests, conditional int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.conditional
}

func (s *jwksServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if r.Header.Get("If-None-Match") != "" {
		s.conditional++
	}
	if s.cacheControl != "" {
		w.Header().Set("Cache-Control", s.cacheControl)
	}
	if s.status != http.StatusOK {
		w.WriteHeader(s.status)
		return
	}
	if s.etag != "" {
		w.Header().Set("ETag", s.etag)
		if r.Header.Get("If-None-Match") == s.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	_, _ = w.Write(s.body)
}

func (s *jwksServer) source(t *testing.T, clock *fakeClock, mod func(*HTTPJWKSOptions)) *HTTPJWKS {
	t.Helper()
	opts := &HTTPJWKSOptions{Client: s.Client(), Now: clock.Now}
	if mod != nil {
		mod(opts)
	}
	h, err := NewHTTPJWKS(s.URL+"/.well-known/arsia/jwks.json", opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func wantRequests(t *testing.T, s *jwksServer, want int) {
	t.Helper()
	if got, _ := s.counts(); got != want {
		t.Fatalf("%d requests, want %d", got, want)
	}
}

func TestHTTPJWKSCaching(t *testing.T) {
	ed, _ := edKey(t, 1)
	k1 := testFrom + "#key-1"
	srv := newJWKSServer(t, pubJWK(ed, k1))
	clock := newClock()
	h := srv.source(t, clock, nil)
	ctx := context.Background()

	for range 3 {
		if _, err := h.Key(ctx, k1); err != nil {
			t.Fatal(err)
		}
	}
	wantRequests(t, srv, 1)

	// No Cache-Control: fresh for the default hour.
	clock.Advance(59 * time.Minute)
	if _, err := h.Key(ctx, k1); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, srv, 1)

	// Stale: revalidated with the ETag, answered 304, keys kept.
	clock.Advance(2 * time.Minute)
	if _, err := h.Key(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if req, cond := srv.counts(); req != 2 || cond != 1 {
		t.Fatalf("requests %d, conditional %d", req, cond)
	}

	// The server's max-age is honoured.
	srv.set(func(s *jwksServer) { s.cacheControl = "public, max-age=120" })
	clock.Advance(61 * time.Minute)
	if _, err := h.Key(ctx, k1); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, srv, 3)
	clock.Advance(119 * time.Second)
	_, _ = h.Key(ctx, k1)
	wantRequests(t, srv, 3)
	clock.Advance(time.Second)
	_, _ = h.Key(ctx, k1)
	wantRequests(t, srv, 4)

	// A huge max-age is capped at MaxMaxAge (24 h).
	srv.set(func(s *jwksServer) { s.cacheControl = "max-age=31536000" })
	clock.Advance(2 * time.Minute)
	_, _ = h.Key(ctx, k1)
	wantRequests(t, srv, 5)
	clock.Advance(24 * time.Hour)
	_, _ = h.Key(ctx, k1)
	wantRequests(t, srv, 6)
}

func TestHTTPJWKSUnknownKidIsRateLimited(t *testing.T) {
	ed, _ := edKey(t, 1)
	k1 := testFrom + "#key-1"
	srv := newJWKSServer(t, pubJWK(ed, k1))
	clock := newClock()
	h := srv.source(t, clock, nil)
	ctx := context.Background()

	if _, err := h.Key(ctx, k1); err != nil {
		t.Fatal(err)
	}
	// The first unknown kid after the interval refetches; the flood that
	// follows does not.
	clock.Advance(DefaultMinRefreshInterval)
	for i := range 50 {
		_, err := h.Key(ctx, testFrom+"#made-up-"+string(rune('a'+i%26)))
		wantErr(t, err, ErrUnknownKid)
	}
	wantRequests(t, srv, 2)
	clock.Advance(DefaultMinRefreshInterval - time.Second)
	_, _ = h.Key(ctx, testFrom+"#made-up")
	wantRequests(t, srv, 2)
	clock.Advance(time.Second)
	_, _ = h.Key(ctx, testFrom+"#made-up")
	wantRequests(t, srv, 3)
}

func TestHTTPJWKSRotationAndRevocation(t *testing.T) {
	old, _ := edKey(t, 1)
	next, _ := ecKey(t)
	kOld, kNext := testFrom+"#2026-01", testFrom+"#2026-04"
	srv := newJWKSServer(t, pubJWK(old, kOld))
	clock := newClock()
	h := srv.source(t, clock, nil)
	ctx := context.Background()
	opts := VerifyOptions{Algorithms: allAlgs, Now: clock.Now}

	byOld := mustSign(t, testEnvelope(), old, kOld)
	byNext := mustSign(t, testEnvelope(), next, kNext)
	if _, err := Verify(ctx, byOld, h, opts); err != nil {
		t.Fatal(err)
	}
	// The new key is published next to the old one; a message signed with
	// it makes the verifier refetch at once (the interval has passed).
	srv.setKeys(pubJWK(old, kOld), pubJWK(next, kNext))
	clock.Advance(DefaultMinRefreshInterval)
	if _, err := Verify(ctx, byNext, h, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, byOld, h, opts); err != nil {
		t.Fatalf("old key during overlap: %v", err)
	}
	// The old key is withdrawn: once the set is refetched, it is revoked,
	// even though it verified before.
	srv.setKeys(pubJWK(next, kNext))
	clock.Advance(2 * time.Hour)
	if _, err := Verify(ctx, byNext, h, opts); err != nil {
		t.Fatal(err)
	}
	_, err := Verify(ctx, byOld, h, opts)
	wantErr(t, err, ErrRevokedKey)
	// Revocation is sticky: the key coming back does not undo it.
	srv.setKeys(pubJWK(old, kOld), pubJWK(next, kNext))
	clock.Advance(2 * time.Hour)
	_, err = Verify(ctx, byOld, h, opts)
	wantErr(t, err, ErrRevokedKey)
	// Refresh forces a fetch regardless of the interval.
	before, _ := srv.counts()
	if err := h.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, srv, before+1)
}

func TestHTTPJWKSFailsClosed(t *testing.T) {
	ed, _ := edKey(t, 1)
	k1 := testFrom + "#key-1"
	ctx := context.Background()

	t.Run("non-200", func(t *testing.T) {
		for _, status := range []int{http.StatusNotFound, http.StatusInternalServerError, http.StatusNoContent, http.StatusMovedPermanently, http.StatusNotModified} {
			srv := newJWKSServer(t, pubJWK(ed, k1))
			srv.set(func(s *jwksServer) { s.status = status })
			_, err := srv.source(t, newClock(), nil).Key(ctx, k1)
			wantErr(t, err, ErrKeySource)
		}
	})
	t.Run("stale set and failing server", func(t *testing.T) {
		srv := newJWKSServer(t, pubJWK(ed, k1))
		clock := newClock()
		h := srv.source(t, clock, nil)
		if _, err := h.Key(ctx, k1); err != nil {
			t.Fatal(err)
		}
		srv.set(func(s *jwksServer) { s.status = http.StatusServiceUnavailable })
		clock.Advance(2 * time.Hour)
		_, err := h.Key(ctx, k1)
		wantErr(t, err, ErrKeySource)
		// Within the interval the failure is remembered, not retried.
		_, err = h.Key(ctx, k1)
		wantErr(t, err, ErrKeySource)
		wantRequests(t, srv, 2)
		// The server recovers; the next attempt after the interval works.
		srv.set(func(s *jwksServer) { s.status = http.StatusOK })
		clock.Advance(DefaultMinRefreshInterval)
		if _, err := h.Key(ctx, k1); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("oversized body", func(t *testing.T) {
		srv := newJWKSServer(t)
		srv.setBody([]byte(`{"keys":[],"pad":"` + strings.Repeat("x", MaxJWKSBytes) + `"}`))
		_, err := srv.source(t, newClock(), nil).Key(ctx, k1)
		wantErr(t, err, ErrKeySource)
	})
	t.Run("invalid documents", func(t *testing.T) {
		priv := jose.JSONWebKey{Key: ed25519Private(t), KeyID: k1}
		privJSON, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{priv}})
		for name, body := range map[string]string{
			"not JSON":       `<html>`,
			"array":          `[]`,
			"no keys":        `{}`,
			"duplicate keys": `{"keys":[],"keys":[]}`,
			"key not object": `{"keys":[1]}`,
			"private key":    string(privJSON),
			"symmetric key":  `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"` + k1 + `"}]}`,
		} {
			srv := newJWKSServer(t)
			srv.setBody([]byte(body))
			_, err := srv.source(t, newClock(), nil).Key(ctx, k1)
			if !errors.Is(err, ErrKeySource) {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
	t.Run("plain http refused", func(t *testing.T) {
		if _, err := NewHTTPJWKS("http://example.test/jwks.json", nil); !errors.Is(err, ErrKeySource) {
			t.Fatal(err)
		}
		for _, u := range []string{"", "/jwks.json", "https://user:pw@example.test/", "ftp://example.test/"} {
			if _, err := NewHTTPJWKS(u, nil); err == nil {
				t.Errorf("%q accepted", u)
			}
		}
		if _, err := NewHTTPJWKS("http://127.0.0.1/jwks.json", &HTTPJWKSOptions{AllowHTTPInsecure: true}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		srv := newJWKSServer(t, pubJWK(ed, k1))
		clock := newClock()
		h := srv.source(t, clock, nil)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := h.Key(cctx, k1)
		wantErr(t, err, ErrKeySource)
		// One caller's cancellation does not lock others out.
		if _, err := h.Key(ctx, k1); err != nil {
			t.Fatal(err)
		}
	})
}

func TestHTTPJWKSKeyFiltering(t *testing.T) {
	ed, _ := edKey(t, 1)
	ec, _ := ecKey(t)
	encKey := jose.JSONWebKey{Key: ec.Public(), KeyID: testFrom + "#enc", Use: "enc"}
	set := jwksJSON(t, pubJWK(ed, testFrom+"#sig"), encKey,
		jose.JSONWebKey{Key: ed.Public(), KeyID: "agent:acme.other#k"},
		jose.JSONWebKey{Key: ed.Public()}, // no kid
		pubJWK(ec, testFrom+"#dup"), pubJWK(ed, testFrom+"#dup"))
	// An X25519 key, which go-jose cannot parse, must not spoil the set.
	var doc map[string][]any
	_ = json.Unmarshal(set, &doc)
	doc["keys"] = append(doc["keys"],
		map[string]any{"kty": "OKP", "crv": "X25519", "x": "hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo", "kid": testFrom + "#x25519", "use": "enc"},
		map[string]any{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": testFrom + "#verify-only", "key_ops": []any{"verify"}},
		map[string]any{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": testFrom + "#wrap-only", "key_ops": []any{"wrapKey"}})
	body, _ := json.Marshal(doc)
	srv := newJWKSServer(t)
	srv.setBody(body)
	h := srv.source(t, newClock(), func(o *HTTPJWKSOptions) { o.KidPrefix = testFrom + "#" })
	ctx := context.Background()
	for kid, want := range map[string]error{
		testFrom + "#sig":         nil,
		testFrom + "#verify-only": nil,
		testFrom + "#enc":         ErrUnknownKid,
		testFrom + "#x25519":      ErrUnknownKid,
		testFrom + "#wrap-only":   ErrUnknownKid,
		"agent:acme.other#k":      ErrUnknownKid,
		"":                        ErrUnknownKid,
		testFrom + "#dup":         ErrUnknownKid,
	} {
		_, err := h.Key(ctx, kid)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", kid, err, want)
		}
	}
}

func TestHTTPJWKSConcurrent(t *testing.T) {
	ed, _ := edKey(t, 1)
	k1 := testFrom + "#key-1"
	srv := newJWKSServer(t, pubJWK(ed, k1))
	h := srv.source(t, newClock(), nil)
	env := mustSign(t, testEnvelope(), ed, k1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := Verify(context.Background(), env, h, VerifyOptions{Algorithms: allAlgs}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	wantRequests(t, srv, 1)
}

func TestParseMaxAge(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"max-age=60":             time.Minute,
		"public, Max-Age=\"30\"": 30 * time.Second,
		"no-cache":               0,
		"no-store, max-age=600":  0,
		"max-age=-1":             -1,
		"max-age=abc":            -1,
		"private":                -1,
	} {
		got, ok := parseMaxAge([]string{in})
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

func TestHTTPJWKSRefusesDowngradeRedirect(t *testing.T) {
	ed, _ := edKey(t, 1)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(jwksJSON(t, pubJWK(ed, testFrom+"#k")))
	}))
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.RedirectHandler(plain.URL+"/jwks.json", http.StatusFound))
	defer tlsSrv.Close()
	h, err := NewHTTPJWKS(tlsSrv.URL+"/jwks.json", &HTTPJWKSOptions{Client: tlsSrv.Client(), Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Key(context.Background(), testFrom+"#k")
	wantErr(t, err, ErrKeySource)
	if !strings.Contains(err.Error(), "redirect") {
		t.Fatal(err)
	}
}
