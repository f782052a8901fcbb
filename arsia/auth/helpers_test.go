package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Test fixtures: keys made from fixed seeds, so failures are reproducible.
const (
	testIssuer = "https://as.example.com"
	testFrom   = "agent:acme.echo-client"
	testTo     = "agent:contoso.crm"
	testKid    = "https://as.example.com#ed-1"
	testURL    = "https://contoso.crm/arsia/inbox"
	testJTI    = "5f0c6c3e-8a1b-4c2d-9e3f-0a1b2c3d4e5f"
)

var testNow = time.Unix(1775995200, 0)

func seededEd25519(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func seededP256(t testing.TB, b byte) *ecdsa.PrivateKey {
	t.Helper()
	scalar := make([]byte, 32)
	for i := range scalar {
		scalar[i] = b + byte(i)
	}
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

func testRSA(t testing.TB) *rsa.PrivateKey {
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

var issuerKey = seededEd25519(1)

// keysFor is a StaticKeys holding the public halves of signers under kids.
func keysFor(pairs map[string]crypto.Signer) *StaticKeys {
	var set jose.JSONWebKeySet
	for kid, s := range pairs {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: s.Public(), KeyID: kid, Use: "sig"})
	}
	return NewStaticKeys(set)
}

func testKeys() *StaticKeys { return keysFor(map[string]crypto.Signer{testKid: issuerKey}) }

func goodClaims() Claims {
	return Claims{
		Issuer:    testIssuer,
		Subject:   testFrom,
		Audience:  Audience{testTo},
		ExpiresAt: testNow.Unix() + 3600,
		IssuedAt:  testNow.Unix(),
		ID:        testJTI,
		Scope:     "notes.read notes.write",
	}
}

func goodOptions() TokenOptions {
	return TokenOptions{
		Now:              testNow,
		Issuer:           testIssuer,
		ExpectedSubject:  testFrom,
		ExpectedAudience: testTo,
		RequiredScope:    []string{"notes.read"},
	}
}

func mustIssue(t testing.TB, signer crypto.Signer, kid string, c Claims) string {
	t.Helper()
	tok, err := IssueAccessToken(signer, kid, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// rawToken signs arbitrary header and claims (alg is filled in from the
// key), for tokens IssueAccessToken refuses to make.
func rawToken(t testing.TB, signer crypto.Signer, header map[string]any, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := signCompact(signer, header, payload, tokenAlgorithms)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// claimsMap is goodClaims as a generic map.
func claimsMap(t testing.TB) map[string]any {
	t.Helper()
	b, err := json.Marshal(goodClaims())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// unsignedParts builds header.payload with the given JSON texts.
func unsignedParts(header, payload string) string {
	return b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(payload))
}

// hs256 makes an HMAC-signed token with secret as key: the classic
// algorithm-confusion attack uses the issuer's public key as the secret.
func hs256(header, payload string, secret []byte) string {
	input := unsignedParts(header, payload)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + b64.EncodeToString(mac.Sum(nil))
}

func validate(t testing.TB, tok string, opts TokenOptions) (*Claims, []error) {
	t.Helper()
	return ValidateAccessToken(context.Background(), tok, testKeys(), opts)
}

// expectOnly asserts errs is exactly one error wrapping want whose text
// contains text.
func expectOnly(t testing.TB, errs []error, want error, text string) {
	t.Helper()
	if len(errs) != 1 {
		t.Fatalf("got %d errors %v, want one %v", len(errs), errs, want)
	}
	expectErr(t, errs[0], want, text)
}

func expectErr(t testing.TB, err, want error, text string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v does not wrap %v", err, want)
	}
	if text != "" && !containsFold(err.Error(), text) {
		t.Fatalf("error %q does not contain %q", err, text)
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// allSentinels lists every sentinel, to check that errors stay inside the
// taxonomy.
var allSentinels = []error{
	ErrMalformed, ErrTokenType, ErrAlgorithmNotAllowed, ErrUnknownKey, ErrKeyMismatch,
	ErrBadSignature, ErrMissingClaim, ErrInvalidClaim, ErrExpired, ErrNotYetValid,
	ErrIssuer, ErrSubject, ErrAudience, ErrInsufficientScope, ErrInvalidJWK,
	ErrDPoPMethod, ErrDPoPURL, ErrDPoPTime, ErrDPoPTokenHash, ErrReplay, ErrDPoPBinding,
	ErrDPoPRequired, ErrReplayCache, ErrReplayCacheFull, ErrInvalidOptions, ErrIssue,
}

func inTaxonomy(err error) bool {
	for _, s := range allSentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
