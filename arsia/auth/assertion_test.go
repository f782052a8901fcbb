package auth

import (
	"context"
	"crypto"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	testClient      = "agent:acme.echo-client"
	testClientKid   = testClient + "#key-1"
	testTokenURL    = "https://gw.example.com/oauth/token"
	testASIssuer    = "https://gw.example.com"
	otherClient     = "agent:evil.client"
	otherClientKid  = otherClient + "#key-1"
	assertionSecond = time.Second
)

var (
	agentKey = seededEd25519(41)
	evilKey  = seededEd25519(42)
)

func assertionKeys() *StaticKeys {
	return keysFor(map[string]crypto.Signer{testClientKid: agentKey, otherClientKid: evilKey})
}

func assertionOptions(cache ReplayCache) AssertionOptions {
	if cache == nil {
		cache = NewMemoryReplayCache(&MemoryReplayOptions{Now: func() time.Time { return testNow }})
	}
	return AssertionOptions{Now: testNow, Audiences: []string{testTokenURL, testASIssuer}, Keys: assertionKeys(), Replay: cache}
}

func mustAssertion(t testing.TB, signer crypto.Signer, kid string, o ClientAssertionOptions) string {
	t.Helper()
	a, err := NewClientAssertion(signer, kid, o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func goodAssertionOptions() ClientAssertionOptions {
	return ClientAssertionOptions{ClientID: testClient, Audience: testTokenURL, Now: testNow}
}

func TestClientAssertionRoundTrip(t *testing.T) {
	cache := NewMemoryReplayCache(&MemoryReplayOptions{Now: func() time.Time { return testNow }})
	a := mustAssertion(t, agentKey, testClientKid, goodAssertionOptions())
	got, errs := ValidateClientAssertion(context.Background(), a, assertionOptions(cache))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got.ClientID != testClient || got.KeyID != testClientKid || got.Algorithm != EdDSA || got.ID == "" ||
		got.ExpiresAt != testNow.Add(DefaultAssertionLifetime).Unix() {
		t.Fatalf("got %+v", got)
	}
	// One assertion authenticates one request.
	_, errs = ValidateClientAssertion(context.Background(), a, assertionOptions(cache))
	expectOnly(t, errs, ErrReplay, "already used")
	// The issuer identifier is an accepted audience too.
	o := goodAssertionOptions()
	o.Audience = testASIssuer
	if _, errs := ValidateClientAssertion(context.Background(), mustAssertion(t, agentKey, testClientKid, o), assertionOptions(cache)); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// The refusals a strict authorization server owes: each case must fail
// with its sentinel and leave the replay set untouched.
func TestClientAssertionRefusals(t *testing.T) {
	claims := func(edit func(m map[string]any)) map[string]any {
		m := map[string]any{"iss": testClient, "sub": testClient, "aud": testTokenURL,
			"iat": testNow.Unix(), "exp": testNow.Unix() + 60, "jti": NewJTI()}
		edit(m)
		return m
	}
	hdr := func(edit func(h map[string]any)) map[string]any {
		h := map[string]any{"kid": testClientKid, "typ": "JWT"}
		edit(h)
		return h
	}
	none := func(map[string]any) {}
	cases := []struct {
		name   string
		signer crypto.Signer
		header map[string]any
		claims map[string]any
		want   error
		text   string
	}{
		{"wrong key for kid", evilKey, hdr(none), claims(none), ErrBadSignature, "does not verify"},
		{"unknown kid", agentKey, hdr(func(h map[string]any) { h["kid"] = testClient + "#nope" }), claims(none), ErrUnknownKey, ""},
		{"no kid", agentKey, hdr(func(h map[string]any) { delete(h, "kid") }), claims(none), ErrUnknownKey, "no 'kid'"},
		// Another agent's key, under its own kid, cannot speak for the client.
		{"kid of another agent", evilKey, hdr(func(h map[string]any) { h["kid"] = otherClientKid }), claims(none), ErrKeyMismatch, "is not a key of"},
		{"sub differs", agentKey, hdr(none), claims(func(m map[string]any) { m["sub"] = otherClient }), ErrSubject, "must both name"},
		{"wrong audience", agentKey, hdr(none), claims(func(m map[string]any) { m["aud"] = "https://other.example/oauth/token" }), ErrAudience, "does not name"},
		{"audience array without us", agentKey, hdr(none), claims(func(m map[string]any) { m["aud"] = []any{"a", "b"} }), ErrAudience, ""},
		{"expired", agentKey, hdr(none), claims(func(m map[string]any) {
			m["iat"], m["exp"] = testNow.Unix()-900, testNow.Unix()-301
		}), ErrExpired, "expired"},
		{"exp too far", agentKey, hdr(none), claims(func(m map[string]any) {
			delete(m, "iat")
			m["exp"] = testNow.Unix() + 3600
		}), ErrInvalidClaim, "after now"},
		{"lifetime too long", agentKey, hdr(none), claims(func(m map[string]any) {
			m["iat"], m["exp"] = testNow.Unix()-290, testNow.Unix()+290
		}), ErrInvalidClaim, "lifetime"},
		{"iat in the future", agentKey, hdr(none), claims(func(m map[string]any) {
			m["iat"], m["exp"] = testNow.Unix()+400, testNow.Unix()+420
		}), ErrNotYetValid, "future"},
		{"no jti", agentKey, hdr(none), claims(func(m map[string]any) { delete(m, "jti") }), ErrMissingClaim, "'jti'"},
		{"no exp", agentKey, hdr(none), claims(func(m map[string]any) { delete(m, "exp") }), ErrMissingClaim, "'exp'"},
		{"numeric iss", agentKey, hdr(none), claims(func(m map[string]any) { m["iss"] = 7 }), ErrInvalidClaim, "must be a string"},
		{"typ dpop+jwt", agentKey, hdr(func(h map[string]any) { h["typ"] = "dpop+jwt" }), claims(none), ErrTokenType, ""},
		{"crit", agentKey, hdr(func(h map[string]any) { h["crit"] = []any{"exp"} }), claims(none), ErrMalformed, "crit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache := NewMemoryReplayCache(&MemoryReplayOptions{Now: func() time.Time { return testNow }})
			tok := rawToken(t, c.signer, c.header, c.claims)
			got, errs := ValidateClientAssertion(context.Background(), tok, assertionOptions(cache))
			if got != nil || len(errs) == 0 {
				t.Fatal("accepted")
			}
			found := false
			for _, err := range errs {
				if errors.Is(err, c.want) && (c.text == "" || containsFold(err.Error(), c.text)) {
					found = true
				}
				if !inTaxonomy(err) {
					t.Fatalf("error outside the taxonomy: %v", err)
				}
			}
			if !found {
				t.Fatalf("errors %v do not include %v %q", errs, c.want, c.text)
			}
			if cache.Len() != 0 {
				t.Fatal("a refused assertion was recorded")
			}
		})
	}
}

func TestClientAssertionOptions(t *testing.T) {
	a := mustAssertion(t, agentKey, testClientKid, goodAssertionOptions())
	o := assertionOptions(nil)
	o.ClientID = otherClient
	_, errs := ValidateClientAssertion(context.Background(), a, o)
	expectOnly(t, errs, ErrIssuer, "client_id")

	for name, edit := range map[string]func(*AssertionOptions){
		"no now":       func(o *AssertionOptions) { o.Now = time.Time{} },
		"no audiences": func(o *AssertionOptions) { o.Audiences = nil },
		"no keys":      func(o *AssertionOptions) { o.Keys = nil },
		"no replay":    func(o *AssertionOptions) { o.Replay = nil },
		"HS256":        func(o *AssertionOptions) { o.Algorithms = []string{"HS256"} },
		"RS256":        func(o *AssertionOptions) { o.Algorithms = []string{RS256} },
	} {
		o := assertionOptions(nil)
		edit(&o)
		_, errs := ValidateClientAssertion(context.Background(), a, o)
		if len(errs) != 1 || !errors.Is(errs[0], ErrInvalidOptions) {
			t.Errorf("%s: %v", name, errs)
		}
	}
	// ES256 only when allowed.
	ec := seededP256(t, 43)
	keys := keysFor(map[string]crypto.Signer{testClientKid: ec})
	tok := mustAssertion(t, ec, testClientKid, goodAssertionOptions())
	o = assertionOptions(nil)
	o.Keys = keys
	_, errs = ValidateClientAssertion(context.Background(), tok, o)
	expectOnly(t, errs, ErrAlgorithmNotAllowed, "ES256")
	o.Algorithms = []string{EdDSA, ES256}
	if _, errs := ValidateClientAssertion(context.Background(), tok, o); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestNewClientAssertionRefuses(t *testing.T) {
	good := goodAssertionOptions()
	for name, edit := range map[string]func(*ClientAssertionOptions){
		"no client":       func(o *ClientAssertionOptions) { o.ClientID = "" },
		"no audience":     func(o *ClientAssertionOptions) { o.Audience = "" },
		"no now":          func(o *ClientAssertionOptions) { o.Now = time.Time{} },
		"sub-second life": func(o *ClientAssertionOptions) { o.Lifetime = time.Millisecond },
		"long jti":        func(o *ClientAssertionOptions) { o.ID = strings.Repeat("j", 300) },
	} {
		o := good
		edit(&o)
		if _, err := NewClientAssertion(agentKey, testClientKid, o); !errors.Is(err, ErrIssue) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewClientAssertion(agentKey, "", good); !errors.Is(err, ErrIssue) {
		t.Error("no kid accepted")
	}
	if _, err := NewClientAssertion(testRSA(t), testClientKid, good); !errors.Is(err, ErrIssue) {
		t.Error("RSA key accepted")
	}
}

// A replay set that cannot record the jti refuses the assertion.
func TestClientAssertionReplaySetDown(t *testing.T) {
	a := mustAssertion(t, agentKey, testClientKid, goodAssertionOptions())
	full := NewMemoryReplayCache(&MemoryReplayOptions{Capacity: 1, Now: func() time.Time { return testNow }})
	if _, err := full.Seen(context.Background(), "x", testNow.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, errs := ValidateClientAssertion(context.Background(), a, assertionOptions(full))
	expectOnly(t, errs, ErrReplayCache, "cannot record")
}

func TestTokenRequestProof(t *testing.T) {
	cache := NewMemoryReplayCache(&MemoryReplayOptions{Now: func() time.Time { return testNow }})
	p, err := NewTokenRequestProof(agentKey, "POST", testTokenURL+"?x=1", testNow)
	if err != nil {
		t.Fatal(err)
	}
	o := DPoPOptions{Method: "POST", URL: testTokenURL, Now: testNow, Replay: cache, TokenRequest: true}
	got, errs := ValidateDPoP(context.Background(), p, o)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got.Claims.AccessTokenHash != "" || got.Claims.URL != testTokenURL {
		t.Fatalf("claims %+v", got.Claims)
	}
	_, errs = ValidateDPoP(context.Background(), p, o)
	expectOnly(t, errs, ErrReplay, "")

	// A proof made for a resource request (with ath) is not a token
	// request proof, and a token request proof is no resource proof.
	withATH := mustProof(t, agentKey, DPoPClaims{Method: "POST", URL: testTokenURL, IssuedAt: testNow.Unix(), AccessTokenHash: AccessTokenHash("t")})
	_, errs = ValidateDPoP(context.Background(), withATH, o)
	expectOnly(t, errs, ErrInvalidClaim, "ath")
	p2, _ := NewTokenRequestProof(agentKey, "POST", testTokenURL, testNow)
	_, errs = ValidateDPoP(context.Background(), p2, DPoPOptions{Method: "POST", URL: testTokenURL, Now: testNow, Replay: cache, AccessToken: "t"})
	expectOnly(t, errs, ErrMissingClaim, "'ath'")

	bad := o
	bad.AccessToken = "t"
	if _, errs := ValidateDPoP(context.Background(), p2, bad); len(errs) != 1 || !errors.Is(errs[0], ErrInvalidOptions) {
		t.Fatalf("AccessToken with TokenRequest: %v", errs)
	}
	if _, err := NewTokenRequestProof(agentKey, "POST", "ftp://x/y", testNow); !errors.Is(err, ErrIssue) {
		t.Fatal("ftp URL accepted")
	}
}

// A DPoP proof whose jti names a revocation or an assertion record is
// refused before anything is recorded: otherwise any token holder could
// revoke another's token by choosing its proof's jti.
func TestDPoPReservedJTI(t *testing.T) {
	for _, jti := range []string{RevokedTokenKey(testJTI), ClientAssertionPrefix + "00"} {
		cache := NewMemoryReplayCache(&MemoryReplayOptions{Now: func() time.Time { return testNow }})
		c := goodProofClaims()
		c.ID = jti
		_, errs := ValidateDPoP(context.Background(), mustProof(t, agentKey, c), dpopOptions(cache))
		expectOnly(t, errs, ErrInvalidClaim, "reserved prefix")
		if cache.Len() != 0 {
			t.Fatal("recorded")
		}
	}
}

func TestMemoryReplayContains(t *testing.T) {
	now := testNow
	cache := NewMemoryReplayCache(&MemoryReplayOptions{Now: func() time.Time { return now }})
	ctx := context.Background()
	if ok, err := cache.Contains(ctx, "k"); ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := cache.Seen(ctx, "k", now.Add(assertionSecond)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := cache.Contains(ctx, "k"); !ok {
		t.Fatal("not contained")
	}
	now = now.Add(2 * assertionSecond)
	if ok, _ := cache.Contains(ctx, "k"); ok {
		t.Fatal("expired key contained")
	}
}

// FuzzValidateClientAssertion: arbitrary text never validates, never
// panics, errs inside the taxonomy, and never writes to the replay set.
// Seeds are well-formed assertions by a key the set does not trust under
// the client's kid.
func FuzzValidateClientAssertion(f *testing.F) {
	impostor := seededEd25519(77)
	f.Add(mustAssertion(f, impostor, testClientKid, goodAssertionOptions()))
	f.Add(mustAssertion(f, seededP256(f, 78), testClientKid, goodAssertionOptions()))
	f.Add(unsignedParts(`{"alg":"none","typ":"JWT","kid":"`+testClientKid+`"}`, `{"iss":"x"}`) + ".")
	f.Add(hs256(`{"alg":"HS256","kid":"`+testClientKid+`"}`, `{"iss":"x"}`, []byte("k")))
	f.Add("a.b.c")
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, a string) {
		cache := NewMemoryReplayCache(&MemoryReplayOptions{Capacity: 4, Now: func() time.Time { return testNow }})
		o := assertionOptions(cache)
		o.Algorithms = []string{EdDSA, ES256}
		got, errs := ValidateClientAssertion(ctx, a, o)
		if len(errs) == 0 || got != nil {
			t.Fatalf("random input validated: %q", a)
		}
		for _, err := range errs {
			if !inTaxonomy(err) {
				t.Fatalf("error outside the taxonomy: %v", err)
			}
		}
		if cache.Len() != 0 {
			t.Fatal("an invalid assertion was recorded")
		}
	})
}
