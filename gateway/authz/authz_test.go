package authz

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/auth/replaytest"
	"github.com/custos-runtime/custos/gateway"
)

const (
	testIssuer    = "https://as.example.com"
	testKID       = "as#key-1"
	testSender    = "agent:acme.advisor"
	testRecipient = "agent:acme.gateway"
	testURL       = "https://gw.example.com/v1/arsia/inbox"
)

var quiet = slog.New(slog.DiscardHandler)

var testNow = time.Date(2026, 4, 12, 12, 0, 0, 0, time.UTC)

func seededKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

var (
	asKey      = seededKey(1) // the trusted authorization server
	rogueKey   = seededKey(2) // an untrusted one
	agentKey   = seededKey(3) // the sender's DPoP key
	thiefKey   = seededKey(4) // somebody else's DPoP key
	agentJKT   = mustThumbprint(agentKey)
	trustedSet = auth.NewStaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: asKey.Public(), KeyID: testKID, Use: "sig"}}})
)

func mustThumbprint(k ed25519.PrivateKey) string {
	t, err := KeyThumbprint(k.Public())
	if err != nil {
		panic(err)
	}
	return t
}

func newTestAuthorizer(t *testing.T, mode Mode, mut func(*Config)) *Authorizer {
	t.Helper()
	cfg := Config{Mode: mode, Issuers: []Issuer{{Issuer: testIssuer, Keys: trustedSet}}, Logger: quiet}
	if mut != nil {
		mut(&cfg)
	}
	a, err := NewAuthorizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tokenFor mints a token for testSender → testRecipient with scope
// demo.echo demo.other, changed by mut.
func tokenFor(t *testing.T, mut func(*TokenRequest)) string {
	t.Helper()
	r := TokenRequest{Issuer: testIssuer, Subject: testSender, Audience: testRecipient,
		Scope: []string{"demo.echo", "demo.other"}, Now: testNow, TTL: 5 * time.Minute}
	if mut != nil {
		mut(&r)
	}
	tok, err := IssueToken(asKey, testKID, r)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func bound(r *TokenRequest) { r.JKT = agentJKT }

func proofFor(t *testing.T, key ed25519.PrivateKey, method, url, token string, iat time.Time) string {
	t.Helper()
	p, err := NewProof(key, method, url, token, iat)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signJWT signs arbitrary claims with asKey, for tokens IssueToken
// refuses to make.
func signJWT(t *testing.T, header, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	return in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(asKey, []byte(in)))
}

func query(authorization, dpop string) gateway.AuthzQuery {
	return gateway.AuthzQuery{Sender: testSender, Recipient: testRecipient, Capabilities: []string{"demo.echo", "demo.other"},
		Authorization: authorization, DPoP: dpop, Method: "POST", URL: testURL, Now: testNow}
}

type want struct {
	code   string // "" means granted
	reason string
	scope  []string
	bound  bool
	issuer string // testIssuer when empty
}

func check(t *testing.T, g *gateway.Grant, e *arsia.Error, w want) {
	t.Helper()
	if w.code == "" {
		if e != nil {
			t.Fatalf("refused: %v (details %v, err %v)", e, e.Details, e.Err)
		}
		if w.scope != nil && !slices.Equal(g.Scope, w.scope) {
			t.Errorf("scope %v, want %v", g.Scope, w.scope)
		}
		if w.issuer == "" {
			w.issuer = testIssuer
		}
		if g.Bound != w.bound || g.Issuer != w.issuer || g.TokenID == "" {
			t.Errorf("grant %+v, want bound %v", g, w.bound)
		}
		return
	}
	if e == nil {
		t.Fatalf("granted %+v, want %s/%s", g, w.code, w.reason)
	}
	if e.Code != w.code || e.Details["reason"] != w.reason {
		t.Fatalf("got %s/%v (%v), want %s/%s", e.Code, e.Details["reason"], e.Err, w.code, w.reason)
	}
	if e.Code == arsia.CodeUnauthorized {
		if len(e.Details) != 1 {
			t.Errorf("unauthorized details leak more than the reason: %v", e.Details)
		}
		if strings.Contains(e.Description, "'") || strings.Contains(e.Description, "agent:") {
			t.Errorf("description leaks: %q", e.Description)
		}
	}
	if e.HTTPStatus() != map[string]int{arsia.CodeUnauthorized: 401, arsia.CodeForbidden: 403, arsia.CodeServiceUnavailable: 503}[e.Code] {
		t.Errorf("HTTP status %d for %s", e.HTTPStatus(), e.Code)
	}
}

func TestAuthorize(t *testing.T) {
	s := time.Second
	unauth := func(reason string) want { return want{code: arsia.CodeUnauthorized, reason: reason} }
	ok := want{scope: []string{"demo.echo", "demo.other"}}
	okBound := want{scope: []string{"demo.echo", "demo.other"}, bound: true}
	dpop := func(t *testing.T, tok string) (string, string) {
		return "DPoP " + tok, proofFor(t, agentKey, "POST", testURL, tok, testNow)
	}
	cases := []struct {
		name  string
		mode  Mode
		cfg   func(*Config)
		build func(t *testing.T) gateway.AuthzQuery
		want  want
	}{
		// The header.
		{"no token", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery { return query("", "") }, unauth(ReasonTokenMissing)},
		{"blank header", ModeBearer, nil, func(t *testing.T) gateway.AuthzQuery { return query("   ", "") }, unauth(ReasonTokenMissing)},
		{"basic scheme", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery { return query("Basic dXNlcjpwYXNz", "") }, unauth(ReasonTokenMalformed)},
		{"scheme only", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery { return query("Bearer", "") }, unauth(ReasonTokenMalformed)},
		{"not a JWT", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery { return query("Bearer abc", "") }, unauth(ReasonTokenMalformed)},
		{"two tokens", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, nil)
			return query("Bearer "+tok+" "+tok, "")
		}, unauth(ReasonTokenMalformed)},

		// Bearer tokens.
		{"bearer", ModeBearer, nil, func(t *testing.T) gateway.AuthzQuery { return query("Bearer "+tokenFor(t, nil), "") }, ok},
		{"bearer lower-case scheme", ModeBearer, nil, func(t *testing.T) gateway.AuthzQuery { return query("bearer "+tokenFor(t, nil), "") }, ok},
		{"bearer in mode any", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery { return query("Bearer "+tokenFor(t, nil), "") }, ok},
		{"bearer in mode dpop", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery { return query("Bearer "+tokenFor(t, nil), "") }, unauth(ReasonSchemeNotAllowed)},
		{"dpop in mode bearer", ModeBearer, nil, func(t *testing.T) gateway.AuthzQuery {
			return query(dpop(t, tokenFor(t, bound)))
		}, unauth(ReasonSchemeNotAllowed)},
		{"bound token as bearer (any)", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, bound), "")
		}, unauth(ReasonDPoPRequired)},
		{"bound token as bearer with a proof", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, bound)
			return query("Bearer "+tok, proofFor(t, agentKey, "POST", testURL, tok, testNow))
		}, unauth(ReasonDPoPRequired)},
		{"bound token as bearer (bearer)", ModeBearer, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, bound), "")
		}, unauth(ReasonDPoPRequired)},

		// Issuer and signature.
		{"untrusted issuer", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Issuer = "https://evil.example" }), "")
		}, unauth(ReasonIssuerUntrusted)},
		{"forged signature", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			tok, err := IssueToken(rogueKey, testKID, TokenRequest{Issuer: testIssuer, Subject: testSender,
				Audience: testRecipient, Scope: []string{"demo.echo"}, Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			return query("Bearer "+tok, "")
		}, unauth(ReasonTokenSignature)},
		{"unknown kid", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			tok, _ := IssueToken(asKey, "as#key-9", TokenRequest{Issuer: testIssuer, Subject: testSender,
				Audience: testRecipient, Scope: []string{"demo.echo"}, Now: testNow})
			return query("Bearer "+tok, "")
		}, unauth(ReasonTokenSignature)},
		{"second issuer", ModeAny, func(c *Config) {
			c.Issuers = append(c.Issuers, Issuer{Issuer: "https://as2.example", Keys: auth.NewStaticKeys(jose.JSONWebKeySet{
				Keys: []jose.JSONWebKey{{Key: rogueKey.Public(), KeyID: "as2#1"}}})})
		}, func(t *testing.T) gateway.AuthzQuery {
			tok, _ := IssueToken(rogueKey, "as2#1", TokenRequest{Issuer: "https://as2.example", Subject: testSender,
				Audience: testRecipient, Scope: []string{"demo.echo"}, Now: testNow})
			return query("Bearer "+tok, "")
		}, want{scope: []string{"demo.echo"}, issuer: "https://as2.example"}},
		{"issuer's key used for another issuer", ModeAny, func(c *Config) {
			c.Issuers = append(c.Issuers, Issuer{Issuer: "https://as2.example", Keys: auth.NewStaticKeys(jose.JSONWebKeySet{
				Keys: []jose.JSONWebKey{{Key: rogueKey.Public(), KeyID: "as2#1"}}})})
		}, func(t *testing.T) gateway.AuthzQuery {
			// Signed by the second issuer's key, claiming to be the first.
			tok, _ := IssueToken(rogueKey, "as2#1", TokenRequest{Issuer: testIssuer, Subject: testSender,
				Audience: testRecipient, Scope: []string{"demo.echo"}, Now: testNow})
			return query("Bearer "+tok, "")
		}, unauth(ReasonTokenSignature)},

		// Claims.
		{"missing jti", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+signJWT(t, map[string]any{"alg": "EdDSA", "kid": testKID, "typ": "JWT"}, map[string]any{
				"iss": testIssuer, "sub": testSender, "aud": testRecipient, "iat": testNow.Unix(),
				"exp": testNow.Unix() + 60, "scope": "demo.echo"}), "")
		}, unauth(ReasonTokenClaims)},
		{"jti not a UUID", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+signJWT(t, map[string]any{"alg": "EdDSA", "kid": testKID, "typ": "JWT"}, map[string]any{
				"iss": testIssuer, "sub": testSender, "aud": testRecipient, "iat": testNow.Unix(), "jti": "tok-1",
				"exp": testNow.Unix() + 60, "scope": "demo.echo"}), "")
		}, unauth(ReasonTokenClaims)},
		{"jti not a UUID, any jti accepted", ModeAny, func(c *Config) { c.AcceptAnyJTI = true }, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+signJWT(t, map[string]any{"alg": "EdDSA", "kid": testKID, "typ": "JWT"}, map[string]any{
				"iss": testIssuer, "sub": testSender, "aud": testRecipient, "iat": testNow.Unix(), "jti": "tok-1",
				"exp": testNow.Unix() + 60, "scope": "demo.echo"}), "")
		}, want{scope: []string{"demo.echo"}}},
		{"a DPoP proof as the token", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+proofFor(t, agentKey, "POST", testURL, "x", testNow), "")
		}, unauth(ReasonTokenMalformed)}, // no iss
		{"sub is another agent", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Subject = "agent:acme.intruder" }), "")
		}, unauth(ReasonSubjectMismatch)},
		{"aud is another gateway", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Audience = "agent:acme.billing" }), "")
		}, unauth(ReasonAudienceMismatch)},

		// Time, with the 300 s skew.
		{"expired 300 s ago: within skew", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Now = testNow.Add(-600 * s) }), "") // exp = now-300
		}, ok},
		{"expired 301 s ago", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Now = testNow.Add(-601 * s) }), "")
		}, unauth(ReasonTokenExpired)},
		{"iat 300 s ahead: within skew", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Now = testNow.Add(300 * s) }), "")
		}, ok},
		{"iat 301 s ahead", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Now = testNow.Add(301 * s) }), "")
		}, unauth(ReasonTokenNotYetValid)},
		{"tighter skew", ModeAny, func(c *Config) { c.ClockSkew = 30 * s }, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Now = testNow.Add(-331 * s) }), "") // exp = now-31
		}, unauth(ReasonTokenExpired)},
		{"nbf in the future", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			tok, err := auth.IssueAccessToken(asKey, testKID, auth.Claims{Issuer: testIssuer, Subject: testSender,
				Audience: auth.Audience{testRecipient}, IssuedAt: testNow.Unix(), ExpiresAt: testNow.Unix() + 3600,
				NotBefore: testNow.Unix() + 301, ID: auth.NewJTI(), Scope: "demo.echo"})
			if err != nil {
				t.Fatal(err)
			}
			return query("Bearer "+tok, "")
		}, unauth(ReasonTokenNotYetValid)},
		{"lifetime above max_lifetime", ModeAny, func(c *Config) { c.MaxLifetime = 300 * s }, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.TTL = 301 * s }), "")
		}, unauth(ReasonTokenLifetime)},
		{"lifetime at max_lifetime", ModeAny, func(c *Config) { c.MaxLifetime = 300 * s }, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.TTL = 300 * s }), "")
		}, ok},

		// Scope.
		{"scope lacks the call", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Scope = []string{"demo.other"} }), "")
		}, want{code: arsia.CodeForbidden, reason: ReasonScopeInsufficient}},
		{"wildcard scope is no grant", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Scope = []string{"demo.*"} }), "")
		}, want{code: arsia.CodeForbidden, reason: ReasonScopeInsufficient}},
		{"scope lacks a later capability: downgrade", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Scope = []string{"demo.echo", "demo.extra"} }), "")
		}, want{scope: []string{"demo.echo", "demo.extra"}}},

		// DPoP.
		{"dpop", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery { return query(dpop(t, tokenFor(t, bound))) }, okBound},
		{"dpop in mode any", ModeAny, nil, func(t *testing.T) gateway.AuthzQuery { return query(dpop(t, tokenFor(t, bound))) }, okBound},
		{"dpop scheme upper-case", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			a, p := dpop(t, tokenFor(t, bound))
			return query("DPOP"+strings.TrimPrefix(a, "DPoP"), p)
		}, okBound},
		{"dpop without proof", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("DPoP "+tokenFor(t, bound), "")
		}, unauth(ReasonDPoPMissing)},
		{"dpop with an unbound token", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			return query(dpop(t, tokenFor(t, nil)))
		}, unauth(ReasonTokenNotBound)},
		{"proof by another key", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, bound)
			return query("DPoP "+tok, proofFor(t, thiefKey, "POST", testURL, tok, testNow))
		}, unauth(ReasonDPoPBinding)},
		{"proof not a JWT", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			return query("DPoP "+tokenFor(t, bound), "garbage")
		}, unauth(ReasonDPoPMalformed)},
		{"access token as proof", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, bound)
			return query("DPoP "+tok, tok)
		}, unauth(ReasonDPoPMalformed)},
		{"htm mismatch", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, bound)
			return query("DPoP "+tok, proofFor(t, agentKey, "GET", testURL, tok, testNow))
		}, unauth(ReasonDPoPMethod)},
		{"ath of another token", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, bound)
			return query("DPoP "+tok, proofFor(t, agentKey, "POST", testURL, tokenFor(t, bound), testNow))
		}, unauth(ReasonDPoPTokenHash)},
		{"proof iat 300 s old", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, bound)
			return query("DPoP "+tok, proofFor(t, agentKey, "POST", testURL, tok, testNow.Add(-300*s)))
		}, okBound},
		{"proof iat 301 s old", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, bound)
			return query("DPoP "+tok, proofFor(t, agentKey, "POST", testURL, tok, testNow.Add(-301*s)))
		}, unauth(ReasonDPoPTime)},
		{"proof iat 301 s ahead", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, bound)
			return query("DPoP "+tok, proofFor(t, agentKey, "POST", testURL, tok, testNow.Add(301*s)))
		}, unauth(ReasonDPoPTime)},
		{"proof iat outside a tighter replay window", ModeDPoP, func(c *Config) { c.ReplayWindow = 60 * s }, func(t *testing.T) gateway.AuthzQuery {
			tok := tokenFor(t, bound)
			return query("DPoP "+tok, proofFor(t, agentKey, "POST", testURL, tok, testNow.Add(-61*s)))
		}, unauth(ReasonDPoPTime)},
		{"invalid token with a proof", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			return query(dpop(t, tokenFor(t, func(r *TokenRequest) { bound(r); r.Subject = "agent:acme.intruder" })))
		}, unauth(ReasonSubjectMismatch)},
		{"no request URL: a gateway bug", ModeDPoP, nil, func(t *testing.T) gateway.AuthzQuery {
			q := query(dpop(t, tokenFor(t, bound)))
			q.URL = ""
			return q
		}, want{code: arsia.CodeInternalError}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAuthorizer(t, tc.mode, tc.cfg)
			g, e := a.Authorize(t.Context(), tc.build(t))
			if tc.want.code == arsia.CodeInternalError {
				if e == nil || e.Code != arsia.CodeInternalError {
					t.Fatalf("got %v, %v; want internal_error", g, e)
				}
				return
			}
			check(t, g, e, tc.want)
		})
	}
}

// The scope refusal is forbidden with the missing capability.
func TestScopeForbiddenDetails(t *testing.T) {
	a := newTestAuthorizer(t, ModeBearer, nil)
	_, e := a.Authorize(t.Context(), query("Bearer "+tokenFor(t, func(r *TokenRequest) { r.Scope = []string{"demo.other"} }), ""))
	if e == nil || e.Code != arsia.CodeForbidden || e.HTTPStatus() != 403 {
		t.Fatalf("got %v", e)
	}
	if m, _ := e.Details["missing"].([]any); len(m) != 1 || m[0] != "demo.echo" {
		t.Errorf("missing = %v", e.Details["missing"])
	}
	if err := arsia.CheckErrorDetails(e.Code, e.Details); err != nil {
		t.Error(err)
	}
	if !errors.Is(e, auth.ErrInsufficientScope) {
		t.Errorf("Err %v is not an insufficient scope", e.Err)
	}
}

// htu is compared as RFC 9449 says: query and fragment ignored, scheme
// and host case-insensitive, default ports dropped; path and scheme count.
func TestDPoPURLComparison(t *testing.T) {
	for _, tc := range []struct {
		name, request, proof string
		ok                   bool
	}{
		{"same", testURL, testURL, true},
		{"request query", testURL + "?trace=1", testURL, true},
		{"proof query and fragment", testURL, testURL + "?a=b#frag", true},
		{"host case", testURL, "https://GW.Example.COM/v1/arsia/inbox", true},
		{"default port", testURL, "https://gw.example.com:443/v1/arsia/inbox", true},
		{"percent-encoded unreserved", testURL, "https://gw.example.com/v1/arsia/%69nbox", true},
		{"other path", testURL, "https://gw.example.com/v1/arsia/outbox", false},
		{"trailing slash", testURL, testURL + "/", false},
		{"path case", testURL, "https://gw.example.com/v1/ARSIA/inbox", false},
		{"http", testURL, "http://gw.example.com/v1/arsia/inbox", false},
		{"other port", testURL, "https://gw.example.com:8443/v1/arsia/inbox", false},
		{"other host", testURL, "https://gw.example.org/v1/arsia/inbox", false},
		{"dot segments", testURL, "https://gw.example.com/v1/x/../arsia/inbox", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAuthorizer(t, ModeDPoP, nil)
			tok := tokenFor(t, bound)
			// NewProof strips query and fragment; sign the raw htu to test
			// what a peer might send.
			p, err := auth.NewDPoPProof(agentKey, auth.DPoPClaims{Method: "POST", URL: tc.proof,
				IssuedAt: testNow.Unix(), AccessTokenHash: auth.AccessTokenHash(tok)})
			if err != nil {
				t.Fatal(err)
			}
			q := query("DPoP "+tok, p)
			q.URL = tc.request
			g, e := a.Authorize(t.Context(), q)
			if tc.ok {
				check(t, g, e, want{bound: true})
			} else {
				check(t, g, e, want{code: arsia.CodeUnauthorized, reason: ReasonDPoPURL})
			}
		})
	}
}

// A proof is accepted once; the same proof again is a replay, within its
// window and after the gateway's clock moved on.
func TestDPoPReplay(t *testing.T) {
	a := newTestAuthorizer(t, ModeDPoP, nil)
	tok := tokenFor(t, bound)
	p := proofFor(t, agentKey, "POST", testURL, tok, testNow)
	mustBound(t)(a.Authorize(t.Context(), query("DPoP "+tok, p)))
	g, e := a.Authorize(t.Context(), query("DPoP "+tok, p))
	check(t, g, e, want{code: arsia.CodeUnauthorized, reason: ReasonDPoPReplay})
	q := query("DPoP "+tok, p)
	q.Now = testNow.Add(299 * time.Second)
	g, e = a.Authorize(t.Context(), q)
	check(t, g, e, want{code: arsia.CodeUnauthorized, reason: ReasonDPoPReplay})
	// Once the window is over the proof is too old, whatever the set
	// remembers.
	q.Now = testNow.Add(301 * time.Second)
	g, e = a.Authorize(t.Context(), q)
	check(t, g, e, want{code: arsia.CodeUnauthorized, reason: ReasonDPoPTime})
	// A new proof for the same token is fine.
	q = query("DPoP "+tok, proofFor(t, agentKey, "POST", testURL, tok, testNow.Add(time.Second)))
	q.Now = testNow.Add(time.Second)
	mustBound(t)(a.Authorize(t.Context(), q))
}

// mustBound returns a checker of a DPoP-bound grant.
func mustBound(t *testing.T) func(*gateway.Grant, *arsia.Error) {
	t.Helper()
	return func(g *gateway.Grant, e *arsia.Error) { t.Helper(); check(t, g, e, want{bound: true}) }
}

// Concurrent uses of one proof: exactly one is accepted.
func TestDPoPReplayConcurrent(t *testing.T) {
	a := newTestAuthorizer(t, ModeDPoP, nil)
	tok := tokenFor(t, bound)
	p := proofFor(t, agentKey, "POST", testURL, tok, testNow)
	const n = 16
	results := make(chan *arsia.Error, n)
	for range n {
		go func() {
			_, e := a.Authorize(context.Background(), query("DPoP "+tok, p))
			results <- e
		}()
	}
	accepted := 0
	for range n {
		if e := <-results; e == nil {
			accepted++
		} else if e.Details["reason"] != ReasonDPoPReplay {
			t.Errorf("refused with %v", e.Details)
		}
	}
	if accepted != 1 {
		t.Fatalf("%d of %d uses of one proof accepted", accepted, n)
	}
}

// A full replay set refuses (503) rather than forget.
func TestReplaySetFull(t *testing.T) {
	a := newTestAuthorizer(t, ModeDPoP, func(c *Config) {
		c.Replay = NewMemoryReplaySet(1, func() time.Time { return testNow })
	})
	tok := tokenFor(t, bound)
	mustBound(t)(a.Authorize(t.Context(), query("DPoP "+tok, proofFor(t, agentKey, "POST", testURL, tok, testNow))))
	g, e := a.Authorize(t.Context(), query("DPoP "+tok, proofFor(t, agentKey, "POST", testURL, tok, testNow)))
	check(t, g, e, want{code: arsia.CodeServiceUnavailable, reason: ReasonReplaySetUnavailable})
}

// The in-memory replay set keeps the auth.ReplayCache contract.
func TestMemoryReplaySetContract(t *testing.T) {
	replaytest.Run(t, func(t *testing.T, clock func() time.Time) auth.ReplayCache {
		return NewMemoryReplaySet(100, clock)
	})
}

func TestNew(t *testing.T) {
	a, err := New(Config{Mode: ModeOff})
	if err != nil || a != nil {
		t.Fatalf("New(off) = %v, %v; want a nil interface", a, err)
	}
	a, err = New(Config{})
	if err != nil || a != nil {
		t.Fatalf("New(zero) = %v, %v; want a nil interface", a, err)
	}
	keys := Issuer{Issuer: testIssuer, Keys: trustedSet}
	for name, cfg := range map[string]Config{
		"bad mode":        {Mode: "sometimes", Issuers: []Issuer{keys}},
		"no issuer":       {Mode: ModeBearer},
		"no iss":          {Mode: ModeBearer, Issuers: []Issuer{{Keys: trustedSet}}},
		"no keys":         {Mode: ModeBearer, Issuers: []Issuer{{Issuer: testIssuer}}},
		"duplicate":       {Mode: ModeBearer, Issuers: []Issuer{keys, keys}},
		"negative skew":   {Mode: ModeBearer, Issuers: []Issuer{keys}, ClockSkew: -time.Second},
		"negative window": {Mode: ModeDPoP, Issuers: []Issuer{keys}, ReplayWindow: -time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	a, err = New(Config{Mode: ModeAny, Issuers: []Issuer{keys}})
	if err != nil || a == nil || a.(*Authorizer).Mode() != ModeAny {
		t.Fatalf("New(any) = %v, %v", a, err)
	}
}

func TestParseAuthorization(t *testing.T) {
	for _, tc := range []struct {
		in, scheme, token string
	}{
		{"Bearer abc.def.ghi", SchemeBearer, "abc.def.ghi"},
		{"bearer abc", SchemeBearer, "abc"},
		{"BEARER   abc==", SchemeBearer, "abc=="},
		{" DPoP a-b_c.d~e+f/g ", SchemeDPoP, "a-b_c.d~e+f/g"},
		{"dpop x", SchemeDPoP, "x"},
		{"Bearer", "", ""},
		{"Bearer ", "", ""},
		{"Bearer a b", "", ""},
		{"Bearer a,b", "", ""},
		{"Bearer =abc", "", ""},
		{"Bearer ab=c", "", ""},
		{"Bearer\tabc", "", ""},
		{"Basic abc", "", ""},
		{"Bearerabc", "", ""},
		{"", "", ""},
	} {
		s, tok, err := ParseAuthorization(tc.in)
		if s != tc.scheme || tok != tc.token || (err == nil) != (tc.scheme != "") {
			t.Errorf("ParseAuthorization(%q) = %q, %q, %v", tc.in, s, tok, err)
		}
		if err != nil && !errors.Is(err, ErrAuthorization) {
			t.Errorf("%q: %v does not wrap ErrAuthorization", tc.in, err)
		}
	}
}

func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer abc.def.ghi", "DPoP x", "dpop  a==", "Basic x", "Bearer", " Bearer a b", "Bearer\x00a", "DPoP é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		scheme, token, err := ParseAuthorization(h)
		if err != nil {
			if scheme != "" || token != "" {
				t.Fatalf("error with results %q %q", scheme, token)
			}
			return
		}
		if scheme != SchemeBearer && scheme != SchemeDPoP {
			t.Fatalf("scheme %q", scheme)
		}
		if token == "" || !isToken68(token) || strings.ContainsAny(token, " \t,") {
			t.Fatalf("token %q", token)
		}
		s2, t2, err := ParseAuthorization(scheme + " " + token)
		if err != nil || s2 != scheme || t2 != token {
			t.Fatalf("round trip of %q: %q %q %v", h, s2, t2, err)
		}
		_, _ = PeekIssuer(token) // must not panic
	})
}

func TestPeekIssuer(t *testing.T) {
	if iss, err := PeekIssuer(tokenFor(t, nil)); err != nil || iss != testIssuer {
		t.Fatalf("PeekIssuer = %q, %v", iss, err)
	}
	for _, bad := range []string{"", "a.b", "a.!!.c", "a." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":1}`)) + ".c",
		"a." + base64.RawURLEncoding.EncodeToString([]byte(`[]`)) + ".c", "a." + base64.RawURLEncoding.EncodeToString([]byte(`{}`)) + ".c"} {
		if _, err := PeekIssuer(bad); !errors.Is(err, auth.ErrMalformed) {
			t.Errorf("PeekIssuer(%q) = %v", bad, err)
		}
	}
}

func TestIssueTokenAndProof(t *testing.T) {
	if _, err := IssueToken(asKey, testKID, TokenRequest{Issuer: testIssuer, Subject: testSender, Audience: testRecipient}); err == nil {
		t.Error("a token without scope was issued")
	}
	if _, err := IssueToken(asKey, testKID, TokenRequest{Issuer: testIssuer, Subject: testSender, Scope: []string{"a.b"}}); err == nil {
		t.Error("a token without audience was issued")
	}
	for _, u := range []string{"", "/v1/arsia/inbox", "ftp://x/y"} {
		if _, err := NewProof(agentKey, "POST", u, "tok", testNow); err == nil {
			t.Errorf("NewProof(%q) accepted", u)
		}
	}
	if _, err := NewProof(agentKey, "", testURL, "tok", testNow); err == nil {
		t.Error("NewProof without a method accepted")
	}
}

// failingLookup is a revocation list that cannot be read.
type failingLookup struct{}

func (failingLookup) Contains(context.Context, string) (bool, error) {
	return false, errors.New("database down")
}

// A revoked token is refused with token_revoked, Bearer or DPoP, and a
// revocation list that cannot be read refuses every token (fail closed).
func TestRevokedToken(t *testing.T) {
	revs := auth.NewMemoryReplayCache(&auth.MemoryReplayOptions{Now: func() time.Time { return testNow }})
	a := newTestAuthorizer(t, ModeAny, func(c *Config) { c.Revocations = revs })
	id := auth.NewJTI()
	tok := tokenFor(t, func(r *TokenRequest) { r.ID = id })
	g, e := a.Authorize(t.Context(), query("Bearer "+tok, ""))
	if e != nil || g == nil {
		t.Fatalf("before revocation: %v", e)
	}
	if _, err := revs.Seen(t.Context(), auth.RevokedTokenKey(id), testNow.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	g, e = a.Authorize(t.Context(), query("Bearer "+tok, ""))
	check(t, g, e, want{code: arsia.CodeUnauthorized, reason: ReasonTokenRevoked})
	// Another token is unaffected.
	if _, e := a.Authorize(t.Context(), query("Bearer "+tokenFor(t, nil), "")); e != nil {
		t.Fatalf("other token: %v", e)
	}
	btok := tokenFor(t, func(r *TokenRequest) { r.ID = id; bound(r) })
	g, e = a.Authorize(t.Context(), query("DPoP "+btok, proofFor(t, agentKey, "POST", testURL, btok, testNow)))
	check(t, g, e, want{code: arsia.CodeUnauthorized, reason: ReasonTokenRevoked})

	down := newTestAuthorizer(t, ModeAny, func(c *Config) { c.Revocations = failingLookup{} })
	g, e = down.Authorize(t.Context(), query("Bearer "+tokenFor(t, nil), ""))
	check(t, g, e, want{code: arsia.CodeServiceUnavailable, reason: ReasonRevocationsDown})
}
