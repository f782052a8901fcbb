package auth

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

func TestValidateAccessTokenValid(t *testing.T) {
	tok := mustIssue(t, issuerKey, testKid, goodClaims())
	c, errs := validate(t, tok, goodOptions())
	if len(errs) > 0 {
		t.Fatalf("valid token refused: %v", errs)
	}
	want := goodClaims()
	if c.Issuer != want.Issuer || c.Subject != want.Subject || !slices.Equal(c.Audience, want.Audience) ||
		c.ExpiresAt != want.ExpiresAt || c.IssuedAt != want.IssuedAt || c.ID != want.ID || c.Scope != want.Scope {
		t.Fatalf("claims %+v, want %+v", c, want)
	}
	if c.SenderConstrained() {
		t.Error("token without cnf reported as sender-constrained")
	}
	if err := CheckBearer(c); err != nil {
		t.Errorf("CheckBearer: %v", err)
	}
}

// TestClaimRules changes one claim or option at a time: each row must give
// exactly the one expected error.
func TestClaimRules(t *testing.T) {
	now := testNow.Unix()
	tests := []struct {
		name   string
		edit   func(m map[string]any)
		opts   func(o *TokenOptions)
		want   error
		substr string
	}{
		{"missing iss", func(m map[string]any) { delete(m, "iss") }, nil, ErrMissingClaim, "token is missing required claim 'iss'"},
		{"missing sub", func(m map[string]any) { delete(m, "sub") }, nil, ErrMissingClaim, "token is missing required claim 'sub'"},
		{"missing aud", func(m map[string]any) { delete(m, "aud") }, nil, ErrMissingClaim, "token is missing required claim 'aud'"},
		{"missing exp", func(m map[string]any) { delete(m, "exp") }, nil, ErrMissingClaim, "token is missing required claim 'exp'"},
		{"missing iat", func(m map[string]any) { delete(m, "iat") }, nil, ErrMissingClaim, "token is missing required claim 'iat'"},
		{"missing jti", func(m map[string]any) { delete(m, "jti") }, nil, ErrMissingClaim, "token is missing required claim 'jti'"},
		{"missing scope", func(m map[string]any) { delete(m, "scope") }, nil, ErrMissingClaim, "token is missing required claim 'scope'"},
		{"expired", func(m map[string]any) { m["exp"] = now - 301 }, nil, ErrExpired, "token expired: "},
		{"iat future", func(m map[string]any) { m["iat"] = now + 301 }, nil, ErrNotYetValid, "token iat is in the future: "},
		{"nbf future", func(m map[string]any) { m["nbf"] = now + 301 }, nil, ErrNotYetValid, "nbf"},
		{"wrong iss", func(m map[string]any) { m["iss"] = "https://evil.example" }, nil, ErrIssuer,
			"token iss 'https://evil.example' does not match expected 'https://as.example.com'"},
		{"wrong sub", func(m map[string]any) { m["sub"] = "agent:acme.imposter" }, nil, ErrSubject,
			"token sub 'agent:acme.imposter' does not match expected 'agent:acme.echo-client'"},
		{"wrong aud", func(m map[string]any) { m["aud"] = "agent:other.target" }, nil, ErrAudience,
			"token aud 'agent:other.target' does not match expected 'agent:contoso.crm'"},
		{"aud list without us", func(m map[string]any) { m["aud"] = []any{"agent:a.b", "agent:c.d"} }, nil, ErrAudience,
			"token aud ['agent:a.b', 'agent:c.d']"},
		{"aud empty list", func(m map[string]any) { m["aud"] = []any{} }, nil, ErrInvalidClaim, "'aud'"},
		{"aud number", func(m map[string]any) { m["aud"] = 7 }, nil, ErrInvalidClaim, "'aud'"},
		{"jti not v4", func(m map[string]any) { m["jti"] = "11111111-1111-1111-1111-111111111111" }, nil, ErrInvalidClaim, "UUID v4"},
		{"jti not uuid", func(m map[string]any) { m["jti"] = "abc" }, nil, ErrInvalidClaim, "UUID v4"},
		{"jti empty", func(m map[string]any) { m["jti"] = "" }, nil, ErrInvalidClaim, "jti"},
		{"jti too long", func(m map[string]any) { m["jti"] = strings.Repeat("a", 257) },
			func(o *TokenOptions) { o.AcceptAnyJTI = true }, ErrInvalidClaim, "jti"},
		{"exp string", func(m map[string]any) { m["exp"] = "tomorrow" }, nil, ErrInvalidClaim, "'exp' must be a number"},
		{"iat bool", func(m map[string]any) { m["iat"] = true }, nil, ErrInvalidClaim, "'iat' must be a number"},
		{"sub number", func(m map[string]any) { m["sub"] = 1 }, nil, ErrInvalidClaim, "'sub' must be a string"},
		{"scope empty", func(m map[string]any) { m["scope"] = "" }, nil, ErrInvalidClaim, "scope"},
		{"scope with tab", func(m map[string]any) { m["scope"] = "notes.read\tnotes.write" }, nil, ErrInvalidClaim, "scope"},
		{"scope list", func(m map[string]any) { m["scope"] = []any{"notes.read"} }, nil, ErrInvalidClaim, "'scope' must be a string"},
		{"insufficient scope", nil, func(o *TokenOptions) { o.RequiredScope = []string{"notes.read", "notes.delete"} },
			ErrInsufficientScope, "token scope does not cover required capabilities: missing=['notes.delete']"},
		{"wildcard scope", func(m map[string]any) { m["scope"] = "notes.*" }, nil,
			ErrInsufficientScope, "missing=['notes.read']"},
		{"cnf not object", func(m map[string]any) { m["cnf"] = "x" }, nil, ErrInvalidClaim, "'cnf'"},
		{"cnf without jkt", func(m map[string]any) { m["cnf"] = map[string]any{"x5t#S256": "abc"} }, nil, ErrInvalidClaim, "jkt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := claimsMap(t)
			if tc.edit != nil {
				tc.edit(m)
			}
			opts := goodOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			tok := rawToken(t, issuerKey, map[string]any{"kid": testKid, "typ": "JWT"}, m)
			c, errs := validate(t, tok, opts)
			if c != nil {
				t.Error("claims returned with errors")
			}
			expectOnly(t, errs, tc.want, tc.substr)
		})
	}
}

func TestClaimRulesPositive(t *testing.T) {
	now := testNow.Unix()
	tests := []struct {
		name string
		edit func(m map[string]any)
		opts func(o *TokenOptions)
	}{
		{"aud list with us", func(m map[string]any) { m["aud"] = []any{"agent:a.b", testTo} }, nil},
		{"nbf past", func(m map[string]any) { m["nbf"] = now - 10 }, nil},
		{"cnf jkt", func(m map[string]any) {
			m["cnf"] = map[string]any{"jkt": "EokVh4xzjb5Ynb7coQLVYCvcbkPySMsVzyAsBEE8DMM"}
		}, nil},
		{"extra claims", func(m map[string]any) { m["client_id"] = "x"; m["act"] = map[string]any{"sub": "y"} }, nil},
		{"lifetime over an hour", func(m map[string]any) { m["exp"] = now + 7200 }, nil},
		{"fractional times", func(m map[string]any) { m["exp"] = float64(now) + 0.5; m["iat"] = float64(now) - 0.5 }, nil},
		{"uppercase uuid", func(m map[string]any) { m["jti"] = strings.ToUpper(testJTI) }, nil},
		{"any jti when allowed", func(m map[string]any) { m["jti"] = "11111111-1111-1111-1111-111111111111" },
			func(o *TokenOptions) { o.AcceptAnyJTI = true }},
		{"no issuer expected", func(m map[string]any) { m["iss"] = "https://other.example" },
			func(o *TokenOptions) { o.Issuer = "" }},
		{"no scope required", nil, func(o *TokenOptions) { o.RequiredScope = nil }},
		{"skip sub insecure", func(m map[string]any) { m["sub"] = "agent:x.y" },
			func(o *TokenOptions) { o.ExpectedSubject = ""; o.SkipSubjectCheckInsecure = true }},
		{"skip aud insecure", func(m map[string]any) { m["aud"] = "agent:x.y" },
			func(o *TokenOptions) { o.ExpectedAudience = ""; o.SkipAudienceCheckInsecure = true }},
		{"typ at+jwt", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := claimsMap(t)
			if tc.edit != nil {
				tc.edit(m)
			}
			opts := goodOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			typ := "JWT"
			if tc.name == "typ at+jwt" {
				typ = "application/AT+JWT"
			}
			tok := rawToken(t, issuerKey, map[string]any{"kid": testKid, "typ": typ}, m)
			if _, errs := validate(t, tok, opts); len(errs) > 0 {
				t.Fatalf("refused: %v", errs)
			}
		})
	}
}

// TestSkewBoundaries: the skew is inclusive on every time claim.
func TestSkewBoundaries(t *testing.T) {
	now := testNow.Unix()
	for _, tc := range []struct {
		claim string
		value int64
		skew  time.Duration
		ok    bool
	}{
		{"exp", now - 300, 0, true},
		{"exp", now - 301, 0, false},
		{"exp", now - 60, time.Minute, true},
		{"exp", now - 61, time.Minute, false},
		{"iat", now + 300, 0, true},
		{"iat", now + 301, 0, false},
		{"nbf", now + 300, 0, true},
		{"nbf", now + 301, 0, false},
		{"nbf", now + 11, 10 * time.Second, false},
	} {
		m := claimsMap(t)
		m[tc.claim] = tc.value
		if tc.claim == "iat" || tc.claim == "nbf" {
			m["exp"] = tc.value + 600
		}
		opts := goodOptions()
		opts.Skew = tc.skew
		_, errs := validate(t, rawToken(t, issuerKey, map[string]any{"kid": testKid, "typ": "JWT"}, m), opts)
		if got := len(errs) == 0; got != tc.ok {
			t.Errorf("%s = now%+d, skew %v: valid %v, want %v (%v)", tc.claim, tc.value-now, tc.skew, got, tc.ok, errs)
		}
	}
	// Sub-second precision of Now counts: one nanosecond past the edge is
	// past it.
	m := claimsMap(t)
	m["exp"] = now - 300
	opts := goodOptions()
	opts.Now = testNow.Add(time.Nanosecond)
	if _, errs := validate(t, rawToken(t, issuerKey, map[string]any{"kid": testKid, "typ": "JWT"}, m), opts); len(errs) != 1 {
		t.Errorf("1 ns past exp+skew: %v", errs)
	}
}

func TestErrorsAccumulate(t *testing.T) {
	m := claimsMap(t)
	m["exp"] = testNow.Unix() - 1000
	m["sub"] = "agent:acme.imposter"
	delete(m, "jti")
	other := seededEd25519(9) // signs under the issuer's kid
	tok := rawToken(t, other, map[string]any{"kid": testKid, "typ": "JWT"}, m)
	opts := goodOptions()
	opts.RequiredScope = []string{"notes.write", "notes.delete", "notes.admin"}
	_, errs := validate(t, tok, opts)
	want := []error{ErrBadSignature, ErrMissingClaim, ErrExpired, ErrSubject, ErrInsufficientScope}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if !errors.Is(errs[i], w) {
			t.Errorf("error %d = %v, want %v", i, errs[i], w)
		}
	}
	if got := errs[4].Error(); !strings.HasSuffix(got, "missing=['notes.delete', 'notes.admin']") {
		t.Errorf("scope message %q", got)
	}
	if e := ArsiaError(errs...); e.Code != arsia.CodeUnauthorized || e.Details != nil {
		t.Errorf("ArsiaError = %+v, want unauthorized without details", e)
	}
}

func TestAlgorithmAttacks(t *testing.T) {
	claims := `{"iss":"https://as.example.com","sub":"agent:acme.echo-client","aud":"agent:contoso.crm",` +
		`"exp":1775998800,"iat":1775995200,"jti":"` + testJTI + `","scope":"notes.read"}`
	pub := issuerKey.Public().(ed25519.PublicKey)
	jwkJSON := `{"kty":"OKP","crv":"Ed25519","x":"` + b64.EncodeToString(pub) + `"}`
	es := seededP256(t, 3)
	esTok := mustIssue(t, es, "es-1", goodClaims())

	keys := keysFor(map[string]crypto.Signer{testKid: issuerKey, "es-1": es})
	run := func(tok string, opts TokenOptions) []error {
		_, errs := ValidateAccessToken(context.Background(), tok, keys, opts)
		return errs
	}
	t.Run("none unsigned", func(t *testing.T) {
		tok := unsignedParts(`{"alg":"none","typ":"JWT"}`, claims) + "."
		expectOnly(t, run(tok, goodOptions()), ErrMalformed, "unsigned")
	})
	t.Run("none with signature", func(t *testing.T) {
		tok := unsignedParts(`{"alg":"none","typ":"JWT","kid":"`+testKid+`"}`, claims) + ".AAAA"
		expectOnly(t, run(tok, goodOptions()), ErrAlgorithmNotAllowed, "'none'")
	})
	t.Run("HS256 with the public key as secret", func(t *testing.T) {
		for _, secret := range [][]byte{pub, []byte(jwkJSON)} {
			tok := hs256(`{"alg":"HS256","typ":"JWT","kid":"`+testKid+`"}`, claims, secret)
			expectOnly(t, run(tok, goodOptions()), ErrAlgorithmNotAllowed, "HS256")
		}
	})
	t.Run("HS256 in the allow-list is a configuration error", func(t *testing.T) {
		opts := goodOptions()
		opts.Algorithms = []string{EdDSA, "HS256"}
		expectOnly(t, run(mustIssue(t, issuerKey, testKid, goodClaims()), opts), ErrInvalidOptions, "HS256")
		opts.Algorithms = []string{"none"}
		expectOnly(t, run(mustIssue(t, issuerKey, testKid, goodClaims()), opts), ErrInvalidOptions, "none")
	})
	t.Run("ES256 not allowed by default", func(t *testing.T) {
		expectOnly(t, run(esTok, goodOptions()), ErrAlgorithmNotAllowed, "ES256")
	})
	t.Run("ES256 allowed", func(t *testing.T) {
		opts := goodOptions()
		opts.Algorithms = []string{EdDSA, ES256}
		if errs := run(esTok, opts); len(errs) > 0 {
			t.Fatal(errs)
		}
	})
	t.Run("alg names a key of another type", func(t *testing.T) {
		// EdDSA header, kid of the EC key.
		tok := rawToken(t, issuerKey, map[string]any{"kid": "es-1", "typ": "JWT"}, claimsMap(t))
		expectOnly(t, run(tok, goodOptions()), ErrKeyMismatch, "")
	})
	t.Run("wrong key", func(t *testing.T) {
		tok := mustIssue(t, seededEd25519(7), testKid, goodClaims())
		expectOnly(t, run(tok, goodOptions()), ErrBadSignature, "signature")
	})
	t.Run("unknown kid", func(t *testing.T) {
		expectOnly(t, run(mustIssue(t, issuerKey, "nope", goodClaims()), goodOptions()), ErrUnknownKey, "nope")
	})
	t.Run("no kid", func(t *testing.T) {
		tok := rawToken(t, issuerKey, map[string]any{"typ": "JWT"}, claimsMap(t))
		expectOnly(t, run(tok, goodOptions()), ErrUnknownKey, "kid")
	})
	t.Run("embedded jwk is ignored", func(t *testing.T) {
		attacker := seededEd25519(8)
		jwk, _ := PublicJWK(attacker.Public())
		tok := rawToken(t, attacker, map[string]any{"kid": testKid, "typ": "JWT", "jwk": jwk}, claimsMap(t))
		expectOnly(t, run(tok, goodOptions()), ErrBadSignature, "")
	})
	t.Run("key published for another alg", func(t *testing.T) {
		k := NewStaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: issuerKey.Public(), KeyID: testKid, Algorithm: "ES256"},
		}})
		_, errs := ValidateAccessToken(context.Background(), mustIssue(t, issuerKey, testKid, goodClaims()), k, goodOptions())
		expectOnly(t, errs, ErrKeyMismatch, "")
	})
	t.Run("signature tampered", func(t *testing.T) {
		tok := mustIssue(t, issuerKey, testKid, goodClaims())
		last := tok[len(tok)-2]
		repl := byte('A')
		if last == 'A' {
			repl = 'B'
		}
		tok = tok[:len(tok)-2] + string(repl) + tok[len(tok)-1:]
		errs := run(tok, goodOptions())
		if len(errs) != 1 || !(errors.Is(errs[0], ErrBadSignature) || errors.Is(errs[0], ErrMalformed)) {
			t.Fatalf("tampered signature: %v", errs)
		}
	})
	t.Run("payload tampered", func(t *testing.T) {
		tok := mustIssue(t, issuerKey, testKid, goodClaims())
		parts := strings.Split(tok, ".")
		m := claimsMap(t)
		m["scope"] = "notes.read notes.write notes.admin"
		forged := rawToken(t, seededEd25519(5), map[string]any{}, m)
		tok = parts[0] + "." + strings.Split(forged, ".")[1] + "." + parts[2]
		expectOnly(t, run(tok, goodOptions()), ErrBadSignature, "")
	})
}

func TestHeaderAndFormat(t *testing.T) {
	good := mustIssue(t, issuerKey, testKid, goodClaims())
	parts := strings.Split(good, ".")
	for _, tc := range []struct {
		name string
		tok  string
		want error
		text string
	}{
		{"empty", "", ErrMalformed, "empty"},
		{"two parts", parts[0] + "." + parts[1], ErrMalformed, "2 dot-separated parts"},
		{"JWE shape", "a.b.c.d.e", ErrMalformed, "5 dot-separated parts"},
		{"padding", parts[0] + "=." + parts[1] + "." + parts[2], ErrMalformed, "base64url"},
		{"line break", parts[0] + "\n." + parts[1] + "." + parts[2], ErrMalformed, "base64url"},
		{"standard base64", parts[0] + "." + parts[1] + ".+" + parts[2][1:], ErrMalformed, "base64url"},
		{"huge", strings.Repeat("a", MaxJWTBytes+1), ErrMalformed, "bytes"},
		{"header array", unsignedParts(`[]`, `{}`) + ".AAAA", ErrMalformed, "header"},
		{"payload string", unsignedParts(`{"alg":"EdDSA"}`, `"x"`) + ".AAAA", ErrMalformed, "payload"},
		{"duplicate claim", rawDup(t), ErrMalformed, "payload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := validate(t, tc.tok, goodOptions())
			if len(errs) != 1 {
				t.Fatalf("errors %v, want one", errs)
			}
			expectErr(t, errs[0], tc.want, tc.text)
		})
	}
	t.Run("typ", func(t *testing.T) {
		for typ, ok := range map[any]bool{"JWT": true, "jwt": true, "at+jwt": true, "dpop+jwt": false, "JOSE": false, 1: false} {
			tok := rawToken(t, issuerKey, map[string]any{"kid": testKid, "typ": typ}, claimsMap(t))
			_, errs := validate(t, tok, goodOptions())
			if ok != (len(errs) == 0) {
				t.Errorf("typ %v: %v", typ, errs)
			}
			if !ok {
				expectOnly(t, errs, ErrTokenType, "typ")
			}
		}
		tok := rawToken(t, issuerKey, map[string]any{"kid": testKid}, claimsMap(t))
		_, errs := validate(t, tok, goodOptions())
		expectOnly(t, errs, ErrTokenType, "no 'typ'")
	})
	t.Run("crit", func(t *testing.T) {
		tok := rawToken(t, issuerKey, map[string]any{"kid": testKid, "typ": "JWT", "crit": []string{"exp"}, "exp": 1}, claimsMap(t))
		_, errs := validate(t, tok, goodOptions())
		expectOnly(t, errs, ErrMalformed, "crit")
	})
}

// rawDup is a correctly signed token whose payload names sub twice: two
// JSON parsers could read two different subjects from it.
func rawDup(t *testing.T) string {
	hdr := `{"alg":"EdDSA","kid":"` + testKid + `","typ":"JWT"}`
	payload := `{"iss":"https://as.example.com","sub":"agent:acme.echo-client","sub":"agent:acme.admin","aud":"agent:contoso.crm",` +
		`"exp":1775998800,"iat":1775995200,"jti":"` + testJTI + `","scope":"notes.read"}`
	input := unsignedParts(hdr, payload)
	sig := ed25519.Sign(issuerKey, []byte(input))
	return input + "." + b64.EncodeToString(sig)
}

func TestTokenOptions(t *testing.T) {
	tok := mustIssue(t, issuerKey, testKid, goodClaims())
	for name, edit := range map[string]func(o *TokenOptions){
		"no Now":           func(o *TokenOptions) { o.Now = time.Time{} },
		"negative skew":    func(o *TokenOptions) { o.Skew = -time.Second },
		"no subject":       func(o *TokenOptions) { o.ExpectedSubject = "" },
		"no audience":      func(o *TokenOptions) { o.ExpectedAudience = "" },
		"unknown alg":      func(o *TokenOptions) { o.Algorithms = []string{"EdDSA", "PS256"} },
		"HS512 allow-list": func(o *TokenOptions) { o.Algorithms = []string{"HS512"} },
	} {
		opts := goodOptions()
		edit(&opts)
		_, errs := validate(t, tok, opts)
		if len(errs) != 1 || !errors.Is(errs[0], ErrInvalidOptions) {
			t.Errorf("%s: %v", name, errs)
			continue
		}
		if e := ArsiaError(errs...); e.Code != arsia.CodeInternalError {
			t.Errorf("%s: ArsiaError code %s", name, e.Code)
		}
	}
	_, errs := ValidateAccessToken(context.Background(), tok, nil, goodOptions())
	expectOnly(t, errs, ErrInvalidOptions, "TokenKeys")
}

func TestCheckScopeCoverage(t *testing.T) {
	for _, tc := range []struct {
		scope    string
		required []string
		covered  bool
		missing  []string
	}{
		{"notes.read notes.write notes.delete", []string{"notes.read", "notes.write"}, true, nil},
		{"notes.read", []string{"notes.read", "notes.write", "notes.delete"}, false, []string{"notes.write", "notes.delete"}},
		{"notes.*", []string{"notes.read"}, false, []string{"notes.read"}},
		{"notes.read", nil, true, nil},
		{"", []string{"notes.read"}, false, []string{"notes.read"}},
		{"  notes.read   notes.write ", []string{"notes.write"}, true, nil},
		{"notes.read\tnotes.write", []string{"notes.write"}, false, []string{"notes.write"}},
		{"notes.read", []string{"notes.write", "notes.write", "notes.read"}, false, []string{"notes.write"}},
		{"Notes.Read", []string{"notes.read"}, false, []string{"notes.read"}},
		{"notes.read.extra", []string{"notes.read"}, false, []string{"notes.read"}},
		{"arsiaprotocol.*", []string{"arsiaprotocol.state.purge"}, false, []string{"arsiaprotocol.state.purge"}},
	} {
		covered, missing := CheckScopeCoverage(tc.scope, tc.required)
		if covered != tc.covered || !slices.Equal(missing, tc.missing) {
			t.Errorf("CheckScopeCoverage(%q, %q) = %v, %q; want %v, %q", tc.scope, tc.required, covered, missing, tc.covered, tc.missing)
		}
	}
}

func TestArsiaErrorScope(t *testing.T) {
	tok := mustIssue(t, issuerKey, testKid, goodClaims())
	opts := goodOptions()
	opts.RequiredScope = []string{"notes.read", "notes.delete"}
	_, errs := validate(t, tok, opts)
	e := ArsiaError(errs...)
	if e.Code != arsia.CodeForbidden || e.HTTPStatus() != 403 {
		t.Fatalf("code %s", e.Code)
	}
	if err := arsia.CheckErrorDetails(e.Code, e.Details); err != nil {
		t.Fatal(err)
	}
	obj := e.Object()
	details := obj["details"].(map[string]any)
	if !slices.Equal(details["required_capabilities"].([]any), []any{"notes.read", "notes.delete"}) ||
		!slices.Equal(details["provided_capabilities"].([]any), []any{"notes.read", "notes.write"}) {
		t.Errorf("details %v", details)
	}
	if !errors.Is(e, ErrInsufficientScope) {
		t.Error("the *arsia.Error does not wrap ErrInsufficientScope")
	}
	var se *ScopeError
	if !errors.As(errs[0], &se) || !slices.Equal(se.Missing, []string{"notes.delete"}) {
		t.Errorf("ScopeError %+v", se)
	}
	if ArsiaError() != nil || ArsiaError(nil, nil) != nil {
		t.Error("ArsiaError without errors is not nil")
	}
	// The unauthorized description never carries the reason.
	u := ArsiaError(fail(ErrExpired, "token expired: secret detail"))
	if obj := u.Object(); strings.Contains(obj["description"].(string), "secret") || obj["details"] != nil {
		t.Errorf("unauthorized object leaks: %v", obj)
	}
}

func TestIssueAccessToken(t *testing.T) {
	for name, edit := range map[string]func(c *Claims){
		"no iss":          func(c *Claims) { c.Issuer = "" },
		"no aud":          func(c *Claims) { c.Audience = nil },
		"empty aud":       func(c *Claims) { c.Audience = Audience{""} },
		"jti not v4":      func(c *Claims) { c.ID = "11111111-1111-1111-1111-111111111111" },
		"no scope":        func(c *Claims) { c.Scope = "" },
		"exp before iat":  func(c *Claims) { c.ExpiresAt = c.IssuedAt },
		"cnf not b64":     func(c *Claims) { c.Confirmation = &Confirmation{JKT: "a b"} },
		"scope with tabs": func(c *Claims) { c.Scope = "a.b\tc.d" },
	} {
		c := goodClaims()
		edit(&c)
		if _, err := IssueAccessToken(issuerKey, testKid, c); !errors.Is(err, ErrIssue) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := IssueAccessToken(issuerKey, "", goodClaims()); !errors.Is(err, ErrIssue) {
		t.Errorf("no kid: %v", err)
	}
	if _, err := IssueAccessToken(nil, testKid, goodClaims()); !errors.Is(err, ErrIssue) {
		t.Errorf("nil signer: %v", err)
	}

	// Every supported key type round-trips, and go-jose verifies the result.
	for name, signer := range map[string]crypto.Signer{"EdDSA": issuerKey, "ES256": seededP256(t, 4), "RS256": testRSA(t)} {
		t.Run(name, func(t *testing.T) {
			c := goodClaims()
			c.Audience = Audience{testTo, "agent:other.one"}
			c.NotBefore = c.IssuedAt
			c.Confirmation = &Confirmation{JKT: "EokVh4xzjb5Ynb7coQLVYCvcbkPySMsVzyAsBEE8DMM"}
			tok := mustIssue(t, signer, "k", c)
			keys := keysFor(map[string]crypto.Signer{"k": signer})
			opts := goodOptions()
			opts.Algorithms = []string{name}
			got, errs := ValidateAccessToken(context.Background(), tok, keys, opts)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if !got.SenderConstrained() || got.NotBefore != c.NotBefore || !slices.Equal(got.Audience, c.Audience) {
				t.Errorf("claims %+v", got)
			}
			expectErr(t, CheckBearer(got), ErrDPoPRequired, "cnf.jkt")

			parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(name)})
			if err != nil {
				t.Fatal(err)
			}
			var std jwt.Claims
			if err := parsed.Claims(signer.Public(), &std); err != nil {
				t.Fatalf("go-jose does not verify: %v", err)
			}
			if std.Subject != testFrom || std.ID != testJTI {
				t.Errorf("go-jose read %+v", std)
			}
			if typ := parsed.Headers[0].ExtraHeaders["typ"]; typ != "JWT" {
				t.Errorf("typ %v", typ)
			}
		})
	}
}

// TestGoJoseTokensValidate: a token from an independent JOSE
// implementation is accepted.
func TestGoJoseTokensValidate(t *testing.T) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: issuerKey},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", testKid))
	if err != nil {
		t.Fatal(err)
	}
	c := goodClaims()
	tok, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": c.Issuer, "sub": c.Subject, "aud": c.Audience[0], "exp": c.ExpiresAt,
		"iat": c.IssuedAt, "jti": c.ID, "scope": c.Scope,
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := validate(t, tok, goodOptions()); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestStaticKeys(t *testing.T) {
	ctx := context.Background()
	pubJWK, _ := PublicJWK(issuerKey.Public())
	doc := `{"keys":[
		{"kty":"OKP","crv":"Ed25519","x":"` + pubJWK.X + `","kid":"a","use":"sig"},
		{"kty":"OKP","crv":"Ed25519","x":"` + pubJWK.X + `","kid":"dup"},
		{"kty":"OKP","crv":"Ed25519","x":"` + pubJWK.X + `","kid":"dup"},
		{"kty":"OKP","crv":"Ed25519","x":"` + pubJWK.X + `","kid":"enc","use":"enc"},
		{"kty":"OKP","crv":"X25519","x":"` + pubJWK.X + `","kid":"x"},
		{"kty":"OKP","crv":"Ed25519","x":"` + pubJWK.X + `"}
	]}`
	keys, err := ParseStaticKeys([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if k, err := keys.Key(ctx, "a"); err != nil || !k.IsPublic() {
		t.Fatalf("a: %v", err)
	}
	for _, kid := range []string{"dup", "enc", "x", "", "missing"} {
		if _, err := keys.Key(ctx, kid); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("kid %q: %v", kid, err)
		}
	}
	for _, bad := range []string{
		`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + pubJWK.X + `","d":"AAAA","kid":"p"}]}`,
		`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}`,
		`{"keys":{}}`, `[]`, `{"keys":[1]}`, `{"keys":[],"keys":[]}`,
	} {
		if _, err := ParseStaticKeys([]byte(bad)); !errors.Is(err, ErrInvalidJWK) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := keys.Key(cctx, "a"); err == nil {
		t.Error("cancelled context accepted")
	}
	// Private keys handed to NewStaticKeys are reduced to public ones.
	s := NewStaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: issuerKey, KeyID: "p"}}})
	if k, err := s.Key(ctx, "p"); err != nil || !k.IsPublic() {
		t.Fatalf("private key not reduced: %v", err)
	}
}
