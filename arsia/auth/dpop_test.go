package auth

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

const testAccessToken = "test-access-token"

var clientKey = seededEd25519(20)

func goodProofClaims() DPoPClaims {
	return DPoPClaims{
		ID:              NewJTI(),
		Method:          "POST",
		URL:             testURL,
		IssuedAt:        testNow.Unix(),
		AccessTokenHash: AccessTokenHash(testAccessToken),
	}
}

func dpopOptions(cache ReplayCache) DPoPOptions {
	if cache == nil {
		cache = NewMemoryReplayCache(&MemoryReplayOptions{Now: func() time.Time { return testNow }})
	}
	return DPoPOptions{Method: "POST", URL: testURL, AccessToken: testAccessToken, Now: testNow, Replay: cache}
}

func mustProof(t testing.TB, signer crypto.Signer, c DPoPClaims) string {
	t.Helper()
	p, err := NewDPoPProof(signer, c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rawProof signs arbitrary header and claims as a DPoP proof.
func rawProof(t testing.TB, signer crypto.Signer, header, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	p, err := signCompact(signer, header, payload, dpopAlgorithms)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func proofClaimsMap(t testing.TB) map[string]any {
	b, _ := json.Marshal(goodProofClaims())
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func clientHeader(t testing.TB, signer crypto.Signer) map[string]any {
	jwk, err := PublicJWK(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"typ": "dpop+jwt", "jwk": jwk}
}

func TestValidateDPoPValid(t *testing.T) {
	ctx := context.Background()
	claims := goodProofClaims()
	proof, errs := ValidateDPoP(ctx, mustProof(t, clientKey, claims), dpopOptions(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if proof.Claims != claims || proof.Algorithm != EdDSA {
		t.Errorf("proof %+v", proof)
	}
	want, _ := PublicJWK(clientKey.Public())
	if proof.JWK != want {
		t.Errorf("jwk %+v, want %+v", proof.JWK, want)
	}

	es := seededP256(t, 21)
	opts := dpopOptions(nil)
	if _, errs := ValidateDPoP(ctx, mustProof(t, es, goodProofClaims()), opts); len(errs) != 1 || !errors.Is(errs[0], ErrAlgorithmNotAllowed) {
		t.Errorf("ES256 under the default allow-list: %v", errs)
	}
	opts.Algorithms = []string{EdDSA, ES256}
	if _, errs := ValidateDPoP(ctx, mustProof(t, es, goodProofClaims()), opts); len(errs) > 0 {
		t.Errorf("ES256 allowed: %v", errs)
	}
	opts.Algorithms = []string{RS256}
	if _, errs := ValidateDPoP(ctx, mustProof(t, clientKey, goodProofClaims()), opts); len(errs) != 1 || !errors.Is(errs[0], ErrInvalidOptions) {
		t.Errorf("RS256 DPoP allow-list: %v", errs)
	}
	if _, err := NewDPoPProof(testRSA(t), goodProofClaims()); !errors.Is(err, ErrIssue) {
		t.Errorf("RSA proof made: %v", err)
	}
}

func TestValidateDPoPRules(t *testing.T) {
	now := testNow.Unix()
	tests := []struct {
		name   string
		edit   func(c *DPoPClaims)
		opts   func(o *DPoPOptions)
		want   error
		substr string
	}{
		{"wrong htm", func(c *DPoPClaims) { c.Method = "GET" }, nil, ErrDPoPMethod, "htm 'GET'"},
		{"lowercase htm", func(c *DPoPClaims) { c.Method = "post" }, nil, ErrDPoPMethod, "htm"},
		{"wrong host", func(c *DPoPClaims) { c.URL = "https://other.example/inbox" }, nil, ErrDPoPURL, "htu"},
		{"wrong path", func(c *DPoPClaims) { c.URL = "https://contoso.crm/arsia/inbox2" }, nil, ErrDPoPURL, "htu"},
		{"wrong scheme", func(c *DPoPClaims) { c.URL = "http://contoso.crm/arsia/inbox" }, nil, ErrDPoPURL, "htu"},
		{"other port", func(c *DPoPClaims) { c.URL = "https://contoso.crm:8443/arsia/inbox" }, nil, ErrDPoPURL, "htu"},
		{"dot segments", func(c *DPoPClaims) { c.URL = "https://contoso.crm/x/../arsia/inbox" }, nil, ErrDPoPURL, "htu"},
		{"not a URL", func(c *DPoPClaims) { c.URL = "::" }, nil, ErrDPoPURL, "htu"},
		{"user info", func(c *DPoPClaims) { c.URL = "https://u@contoso.crm/arsia/inbox" }, nil, ErrDPoPURL, "htu"},
		{"too old", func(c *DPoPClaims) { c.IssuedAt = now - 1200 }, nil, ErrDPoPTime, "DPoP iat is too old"},
		{"old by one", func(c *DPoPClaims) { c.IssuedAt = now - 301 }, nil, ErrDPoPTime, "too old"},
		{"future", func(c *DPoPClaims) { c.IssuedAt = now + 301 }, nil, ErrDPoPTime, "DPoP iat is in the future"},
		{"tight skew", func(c *DPoPClaims) { c.IssuedAt = now - 11 }, func(o *DPoPOptions) { o.Skew = 10 * time.Second }, ErrDPoPTime, "too old"},
		{"ath other token", func(c *DPoPClaims) { c.AccessTokenHash = AccessTokenHash("other-token") }, nil, ErrDPoPTokenHash, "ath"},
		{"ath empty", func(c *DPoPClaims) { c.AccessTokenHash = "" }, nil, ErrDPoPTokenHash, "ath"},
		{"jti too long", func(c *DPoPClaims) { c.ID = strings.Repeat("j", 257) }, nil, ErrInvalidClaim, "jti"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := goodProofClaims()
			tc.edit(&c)
			cache := NewMemoryReplayCache(&MemoryReplayOptions{Now: func() time.Time { return testNow }})
			opts := dpopOptions(cache)
			if tc.opts != nil {
				tc.opts(&opts)
			}
			proof, errs := ValidateDPoP(context.Background(), mustProof(t, clientKey, c), opts)
			if proof != nil {
				t.Error("proof returned with errors")
			}
			expectOnly(t, errs, tc.want, tc.substr)
			if cache.Len() != 0 {
				t.Error("an invalid proof was recorded in the replay cache")
			}
		})
	}
}

func TestValidateDPoPAccepts(t *testing.T) {
	now := testNow.Unix()
	for name, edit := range map[string]func(c *DPoPClaims){
		"iat at -skew":        func(c *DPoPClaims) { c.IssuedAt = now - 300 },
		"iat at +skew":        func(c *DPoPClaims) { c.IssuedAt = now + 300 },
		"case of scheme/host": func(c *DPoPClaims) { c.URL = "HTTPS://Contoso.CRM/arsia/inbox" },
		"default port":        func(c *DPoPClaims) { c.URL = "https://contoso.crm:443/arsia/inbox" },
		"query and fragment":  func(c *DPoPClaims) { c.URL = testURL + "?a=1#frag" },
		"percent-encoded":     func(c *DPoPClaims) { c.URL = "https://contoso.crm/%61rsia/inbox" },
	} {
		c := goodProofClaims()
		edit(&c)
		if _, errs := ValidateDPoP(context.Background(), mustProof(t, clientKey, c), dpopOptions(nil)); len(errs) > 0 {
			t.Errorf("%s: %v", name, errs)
		}
	}
	// The request URL is normalized too.
	opts := dpopOptions(nil)
	opts.URL = "https://CONTOSO.crm:443/arsia/inbox?x=y"
	if _, errs := ValidateDPoP(context.Background(), mustProof(t, clientKey, goodProofClaims()), opts); len(errs) > 0 {
		t.Errorf("normalized request URL: %v", errs)
	}
	for raw, want := range map[string]string{
		"https://contoso.crm":              "https://contoso.crm/",
		"http://h:80/a%2fb":                "http://h/a%2Fb",
		"https://[::1]:443/x":              "https://[::1]/x",
		"https://[::1]:8443/x":             "https://[::1]:8443/x",
		"https://h/%7e%41%25":              "https://h/~A%25",
		"https://h/a%20b?q#f":              "https://h/a%20b",
		"https://Example.COM:8080/In%2Fbx": "https://example.com:8080/In%2Fbx",
	} {
		if got, err := normalizeHTU(raw); err != nil || got != want {
			t.Errorf("normalizeHTU(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

func TestDPoPReplay(t *testing.T) {
	ctx := context.Background()
	cache := NewMemoryReplayCache(&MemoryReplayOptions{Now: func() time.Time { return testNow }})
	proof := mustProof(t, clientKey, goodProofClaims())
	if _, errs := ValidateDPoP(ctx, proof, dpopOptions(cache)); len(errs) > 0 {
		t.Fatal(errs)
	}
	_, errs := ValidateDPoP(ctx, proof, dpopOptions(cache))
	expectOnly(t, errs, ErrReplay, "replay")
	if e := ArsiaError(errs...); e.Code != arsia.CodeUnauthorized {
		t.Errorf("replay maps to %s", e.Code)
	}
	// Same jti from another key is a replay too: jtis are global.
	c := goodProofClaims()
	if _, errs := ValidateDPoP(ctx, mustProof(t, clientKey, c), dpopOptions(cache)); len(errs) > 0 {
		t.Fatal(errs)
	}
	_, errs = ValidateDPoP(ctx, mustProof(t, seededEd25519(33), c), dpopOptions(cache))
	expectOnly(t, errs, ErrReplay, "")
}

func TestDPoPReplayCacheFailure(t *testing.T) {
	ctx := context.Background()
	cache := NewMemoryReplayCache(&MemoryReplayOptions{Capacity: 1, Now: func() time.Time { return testNow }})
	if _, errs := ValidateDPoP(ctx, mustProof(t, clientKey, goodProofClaims()), dpopOptions(cache)); len(errs) > 0 {
		t.Fatal(errs)
	}
	_, errs := ValidateDPoP(ctx, mustProof(t, clientKey, goodProofClaims()), dpopOptions(cache))
	expectOnly(t, errs, ErrReplayCache, "")
	if !errors.Is(errs[0], ErrReplayCacheFull) {
		t.Errorf("%v does not wrap ErrReplayCacheFull", errs[0])
	}
	if e := ArsiaError(errs...); e.Code != arsia.CodeServiceUnavailable {
		t.Errorf("full cache maps to %s", e.Code)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, errs = ValidateDPoP(cctx, mustProof(t, clientKey, goodProofClaims()), dpopOptions(nil))
	expectOnly(t, errs, ErrReplayCache, "")
}

func TestDPoPHeaderAndKey(t *testing.T) {
	ctx := context.Background()
	run := func(proof string) []error {
		_, errs := ValidateDPoP(ctx, proof, dpopOptions(nil))
		return errs
	}
	pub, _ := PublicJWK(clientKey.Public())
	withPrivate := map[string]any{"kty": "OKP", "crv": "Ed25519", "x": pub.X,
		"d": b64.EncodeToString(clientKey.Seed())}

	t.Run("private key in jwk", func(t *testing.T) {
		h := map[string]any{"typ": "dpop+jwt", "jwk": withPrivate}
		expectOnly(t, run(rawProof(t, clientKey, h, proofClaimsMap(t))), ErrInvalidJWK, "private key material")
	})
	t.Run("no jwk", func(t *testing.T) {
		h := map[string]any{"typ": "dpop+jwt"}
		expectOnly(t, run(rawProof(t, clientKey, h, proofClaimsMap(t))), ErrInvalidJWK, "no 'jwk'")
	})
	t.Run("jwk not an object", func(t *testing.T) {
		h := map[string]any{"typ": "dpop+jwt", "jwk": "x"}
		expectOnly(t, run(rawProof(t, clientKey, h, proofClaimsMap(t))), ErrInvalidJWK, "")
	})
	t.Run("jwk of another key", func(t *testing.T) {
		h := clientHeader(t, seededEd25519(40))
		expectOnly(t, run(rawProof(t, clientKey, h, proofClaimsMap(t))), ErrBadSignature, "")
	})
	t.Run("jwk type differs from alg", func(t *testing.T) {
		h := clientHeader(t, seededP256(t, 41)) // EC key, EdDSA signature
		opts := dpopOptions(nil)
		opts.Algorithms = []string{EdDSA, ES256}
		_, errs := ValidateDPoP(ctx, rawProof(t, clientKey, h, proofClaimsMap(t)), opts)
		expectOnly(t, errs, ErrKeyMismatch, "")
	})
	t.Run("typ", func(t *testing.T) {
		for _, typ := range []any{"JWT", "at+jwt", nil, 5} {
			h := clientHeader(t, clientKey)
			h["typ"] = typ
			if typ == nil {
				delete(h, "typ")
			}
			expectOnly(t, run(rawProof(t, clientKey, h, proofClaimsMap(t))), ErrTokenType, "typ")
		}
	})
	t.Run("access token is not a proof", func(t *testing.T) {
		// An access token signed by the client key, embedded jwk and all,
		// still has the wrong typ and claims.
		h := clientHeader(t, clientKey)
		h["typ"] = "JWT"
		errs := run(rawProof(t, clientKey, h, claimsMap(t)))
		if len(errs) < 2 || !errors.Is(errs[0], ErrTokenType) {
			t.Errorf("errors %v", errs)
		}
	})
	t.Run("alg none and HS256", func(t *testing.T) {
		hdr, _ := json.Marshal(clientHeader(t, clientKey))
		claims, _ := json.Marshal(proofClaimsMap(t))
		for _, alg := range []string{"none", "HS256"} {
			h := strings.Replace(string(hdr), "{", `{"alg":"`+alg+`",`, 1)
			p := hs256(h, string(claims), ed25519.PublicKey(clientKey.Public().(ed25519.PublicKey)))
			expectOnly(t, run(p), ErrAlgorithmNotAllowed, alg)
		}
	})
	t.Run("missing claims", func(t *testing.T) {
		for _, name := range dpopClaims {
			m := proofClaimsMap(t)
			delete(m, name)
			errs := run(rawProof(t, clientKey, clientHeader(t, clientKey), m))
			if len(errs) == 0 || !errors.Is(errs[0], ErrMissingClaim) ||
				!strings.Contains(errs[0].Error(), "DPoP proof is missing required claim '"+name+"'") {
				t.Errorf("without %s: %v", name, errs)
			}
		}
	})
	t.Run("ill-typed claims", func(t *testing.T) {
		for name, v := range map[string]any{"jti": 1, "htm": true, "htu": []any{}, "iat": "now", "ath": 3} {
			m := proofClaimsMap(t)
			m[name] = v
			errs := run(rawProof(t, clientKey, clientHeader(t, clientKey), m))
			if len(errs) != 1 || !errors.Is(errs[0], ErrInvalidClaim) {
				t.Errorf("%s = %v: %v", name, v, errs)
			}
		}
	})
}

func TestDPoPOptions(t *testing.T) {
	proof := mustProof(t, clientKey, goodProofClaims())
	for name, edit := range map[string]func(o *DPoPOptions){
		"no Now":          func(o *DPoPOptions) { o.Now = time.Time{} },
		"no method":       func(o *DPoPOptions) { o.Method = "" },
		"no token":        func(o *DPoPOptions) { o.AccessToken = "" },
		"no replay cache": func(o *DPoPOptions) { o.Replay = nil },
		"relative URL":    func(o *DPoPOptions) { o.URL = "/arsia/inbox" },
		"ftp URL":         func(o *DPoPOptions) { o.URL = "ftp://contoso.crm/arsia/inbox" },
		"negative skew":   func(o *DPoPOptions) { o.Skew = -1 },
		"HS256":           func(o *DPoPOptions) { o.Algorithms = []string{"HS256"} },
	} {
		opts := dpopOptions(nil)
		edit(&opts)
		if _, errs := ValidateDPoP(context.Background(), proof, opts); len(errs) != 1 || !errors.Is(errs[0], ErrInvalidOptions) {
			t.Errorf("%s: %v", name, errs)
		}
	}
}

func TestVerifyDPoPBinding(t *testing.T) {
	ctx := context.Background()
	proof, errs := ValidateDPoP(ctx, mustProof(t, clientKey, goodProofClaims()), dpopOptions(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	jkt, err := Thumbprint(proof.JWK)
	if err != nil {
		t.Fatal(err)
	}
	bound := &Claims{Confirmation: &Confirmation{JKT: jkt}}
	if err := VerifyDPoPBinding(bound, proof); err != nil {
		t.Fatalf("bound: %v", err)
	}
	other, _ := PublicJWK(seededEd25519(50).Public())
	otherJKT, _ := Thumbprint(other)
	expectErr(t, VerifyDPoPBinding(&Claims{Confirmation: &Confirmation{JKT: otherJKT}}, proof), ErrDPoPBinding, "does not match")
	expectErr(t, VerifyDPoPBinding(&Claims{}, proof), ErrDPoPBinding, "cnf.jkt")
	expectErr(t, VerifyDPoPBinding(nil, proof), ErrDPoPBinding, "")
	expectErr(t, VerifyDPoPBinding(bound, nil), ErrDPoPBinding, "")
	expectErr(t, VerifyDPoPBinding(bound, &DPoPProof{}), ErrDPoPBinding, "")
	if e := ArsiaError(VerifyDPoPBinding(&Claims{}, proof)); e.Code != arsia.CodeUnauthorized {
		t.Errorf("binding failure maps to %s", e.Code)
	}
}

// TestDPoPFlow is the whole DPoP path: a token bound to the client's key,
// a proof for a request, and the three checks a receiver makes.
func TestDPoPFlow(t *testing.T) {
	ctx := context.Background()
	cjwk, _ := PublicJWK(clientKey.Public())
	jkt, _ := Thumbprint(cjwk)
	c := goodClaims()
	c.Confirmation = &Confirmation{JKT: jkt}
	token := mustIssue(t, issuerKey, testKid, c)

	pc := goodProofClaims()
	pc.AccessTokenHash = AccessTokenHash(token)
	proofText := mustProof(t, clientKey, pc)

	claims, errs := validate(t, token, goodOptions())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	opts := dpopOptions(nil)
	opts.AccessToken = token
	proof, errs := ValidateDPoP(ctx, proofText, opts)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := VerifyDPoPBinding(claims, proof); err != nil {
		t.Fatal(err)
	}
	if err := CheckBearer(claims); !errors.Is(err, ErrDPoPRequired) {
		t.Errorf("bound token accepted as bearer: %v", err)
	}
	// A thief with the token but not the key makes a proof with its own key.
	thief := seededEd25519(60)
	pc.ID = NewJTI()
	stolen, errs := ValidateDPoP(ctx, mustProof(t, thief, pc), opts)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	expectErr(t, VerifyDPoPBinding(claims, stolen), ErrDPoPBinding, "")
}

func TestNewJTI(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		j := NewJTI()
		if !isUUIDv4(j) || strings.ToLower(j) != j || seen[j] {
			t.Fatalf("NewJTI %q", j)
		}
		seen[j] = true
	}
	c := goodProofClaims()
	c.ID = ""
	p, errs := ValidateDPoP(context.Background(), mustProof(t, clientKey, c), dpopOptions(nil))
	if len(errs) > 0 || !isUUIDv4(p.Claims.ID) {
		t.Errorf("empty jti not filled: %v %v", p, errs)
	}
}
