package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// rfc7638Key is the RSA key of RFC 7638 §3.1, whose thumbprint the RFC
// gives.
var rfc7638Key = JWK{
	KeyType: "RSA",
	N: "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMs" +
		"tn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5" +
		"hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
	E:         "AQAB",
	Algorithm: "RS256",
	KeyID:     "2011-04-29",
}

func TestThumbprintRFC7638(t *testing.T) {
	got, err := Thumbprint(rfc7638Key)
	if err != nil {
		t.Fatal(err)
	}
	if want := "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"; got != want {
		t.Fatalf("thumbprint %s, want %s", got, want)
	}
	if _, err := rfc7638Key.PublicKey(); err != nil {
		t.Fatalf("RFC 7638 key: %v", err)
	}
}

// TestThumbprintMatchesGoJose compares with an independent implementation
// for each key type.
func TestThumbprintMatchesGoJose(t *testing.T) {
	for name, signer := range map[string]crypto.Signer{
		"OKP": issuerKey, "EC": seededP256(t, 2), "RSA": testRSA(t),
	} {
		jwk, err := PublicJWK(signer.Public())
		if err != nil {
			t.Fatal(err)
		}
		if jwk.KeyType != name {
			t.Errorf("kty %s, want %s", jwk.KeyType, name)
		}
		got, err := Thumbprint(jwk)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := (&jose.JSONWebKey{Key: signer.Public()}).Thumbprint(crypto.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		if want := b64.EncodeToString(raw); got != want {
			t.Errorf("%s: thumbprint %s, go-jose %s", name, got, want)
		}
		// Optional members do not change it.
		jwk.KeyID, jwk.Use, jwk.Algorithm = "kid-1", "sig", "EdDSA"
		if again, _ := Thumbprint(jwk); again != got {
			t.Errorf("%s: optional members changed the thumbprint", name)
		}
		// The JWK converts back to the same key.
		pub, err := jwk.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		if !pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(signer.Public()) {
			t.Errorf("%s: PublicKey round trip differs", name)
		}
	}
}

func TestThumbprintRefuses(t *testing.T) {
	x := "2yBga3e_Y0iNdj9COkyqEcksOlTLhF7ySNaR3IxyIL0"
	for name, k := range map[string]JWK{
		"no kty":       {Curve: "Ed25519", X: x},
		"oct":          {KeyType: "oct"},
		"OKP no x":     {KeyType: "OKP", Curve: "Ed25519"},
		"OKP no crv":   {KeyType: "OKP", X: x},
		"EC no y":      {KeyType: "EC", Curve: "P-256", X: x},
		"RSA no e":     {KeyType: "RSA", N: "AQAB"},
		"quote in x":   {KeyType: "OKP", Curve: "Ed25519", X: `a","d":"b`},
		"quote in crv": {KeyType: "OKP", Curve: `Ed25519"`, X: x},
		"padding":      {KeyType: "OKP", Curve: "Ed25519", X: x + "="},
	} {
		if _, err := Thumbprint(k); !errors.Is(err, ErrInvalidJWK) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseJWK(t *testing.T) {
	k, err := ParseJWK([]byte(`{"kty":"OKP","crv":"Ed25519","x":"2yBga3e_Y0iNdj9COkyqEcksOlTLhF7ySNaR3IxyIL0","kid":"a#1","use":"sig","key_ops":["verify"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if k.KeyID != "a#1" || k.Use != "sig" || k.X == "" {
		t.Errorf("parsed %+v", k)
	}
	for _, bad := range []string{
		`{"kty":"OKP","crv":"Ed25519","x":"2yBga3e_Y0iNdj9COkyqEcksOlTLhF7ySNaR3IxyIL0","d":"AAAA"}`,
		`{"kty":"oct","k":"c2VjcmV0"}`,
		`{"kty":"RSA","n":"AQAB","e":"AQAB","p":"AQAB"}`,
		`{"kty":1}`,
		`{"crv":"Ed25519"}`,
		`{"kty":"OKP","kty":"EC"}`,
		`[]`,
		``,
	} {
		if _, err := ParseJWK([]byte(bad)); !errors.Is(err, ErrInvalidJWK) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestJWKPublicKeyRefuses(t *testing.T) {
	ec, _ := PublicJWK(seededP256(t, 2).Public())
	offCurve := ec
	offCurve.Y = ec.X // almost surely not on the curve
	shortRSA, _ := PublicJWK(&rsa.PublicKey{N: testRSA(t).N, E: 65537})
	shortRSA.N = shortRSA.N[:200]
	for name, k := range map[string]JWK{
		"Ed448":         {KeyType: "OKP", Curve: "Ed448", X: "AAAA"},
		"short x":       {KeyType: "OKP", Curve: "Ed25519", X: "AAAA"},
		"P-384":         {KeyType: "EC", Curve: "P-384", X: ec.X, Y: ec.Y},
		"off curve":     offCurve,
		"RSA 1200 bits": shortRSA,
		"RSA e=1":       {KeyType: "RSA", N: rfc7638Key.N, E: "AQ"},
		"RSA empty n":   {KeyType: "RSA", N: "", E: "AQAB"},
		"RSA zero lead": {KeyType: "RSA", N: "AA" + rfc7638Key.N[2:], E: "AQAB"},
		"unknown kty":   {KeyType: "oct"},
	} {
		if _, err := k.PublicKey(); !errors.Is(err, ErrInvalidJWK) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := PublicJWK(ed25519.PublicKey{1, 2}); !errors.Is(err, ErrInvalidJWK) {
		t.Errorf("short Ed25519 key: %v", err)
	}
	if _, err := PublicJWK((*ecdsa.PublicKey)(nil)); !errors.Is(err, ErrInvalidJWK) {
		t.Errorf("nil EC key: %v", err)
	}
}
