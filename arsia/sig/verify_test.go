package sig

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/custos-runtime/custos/jcs"
	"github.com/go-jose/go-jose/v4"
)

func TestSignVerifyRoundTrip(t *testing.T) {
	ed, _ := edKey(t, 1)
	ec, ecPriv := ecKey(t)
	rs, err := NewSigner(testRSAKey(t))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ecPriv.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	scalar, err := NewES256Signer(raw)
	if err != nil {
		t.Fatal(err)
	}
	edJWK, err := NewSignerFromJWK(&jose.JSONWebKey{Key: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32)), Use: "sig", Algorithm: EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		signer Signer
		alg    string
		sigLen int
	}{
		{"EdDSA", ed, EdDSA, 64},
		{"ES256", ec, ES256, 64},
		{"ES256 from scalar", scalar, ES256, 64},
		{"RS256", rs, RS256, 256},
		{"EdDSA from JWK", edJWK, EdDSA, 64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kid := testFrom + "#" + strings.ReplaceAll(tc.name, " ", "-")
			env := testEnvelope()
			before, _ := jcs.CanonicalizeValue(env)
			signed := mustSign(t, env, tc.signer, kid)
			if after, _ := jcs.CanonicalizeValue(env); !bytes.Equal(before, after) {
				t.Fatal("Sign modified its input")
			}
			sec := secOf(signed)
			if sec["alg"] != tc.alg || sec["kid"] != kid || len(sec) != 3 {
				t.Fatalf("security %v", sec)
			}
			raw, err := base64.RawURLEncoding.DecodeString(sec["sig"].(string))
			if err != nil || len(raw) != tc.sigLen {
				t.Fatalf("sig %q: %d bytes, %v", sec["sig"], len(raw), err)
			}
			if tc.alg == ES256 && raw[0] == 0x30 && int(raw[1])+2 == len(raw) {
				t.Fatal("ES256 signature looks like DER")
			}
			keys := static(pubJWK(tc.signer, kid))
			clock := newClock()
			v, err := Verify(context.Background(), signed, keys, VerifyOptions{Algorithms: []string{tc.alg}, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			if v.From != testFrom || v.KeyID != kid || v.Algorithm != tc.alg || !v.At.Equal(clock.Now()) || v.Payload["type"] != "com.acme.ledger/post" {
				t.Fatalf("verified %+v", v)
			}
			// The verified copy is the caller's no longer.
			signed["payload"].(map[string]any)["type"] = "changed"
			if v.Envelope["payload"].(map[string]any)["type"] != "com.acme.ledger/post" {
				t.Fatal("Verified.Envelope shares memory with the input")
			}
			// Wire round trip: the JSON a peer receives verifies too.
			wire, err := json.Marshal(mustSign(t, testEnvelope(), tc.signer, kid))
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := DecodeEnvelope(wire)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(context.Background(), decoded, keys, VerifyOptions{Algorithms: allAlgs}); err != nil {
				t.Fatalf("after wire round trip: %v", err)
			}
		})
	}
}

func TestSignKeepsEncryptionMembers(t *testing.T) {
	ed, _ := edKey(t, 1)
	env := testEnvelope()
	env["security"] = map[string]any{"encrypted": true, "enc_alg": ECDHES, "enc_method": A256GCM, "sig": "old", "extra": 1}
	sec := secOf(mustSign(t, env, ed, testFrom+"#k"))
	if len(sec) != 6 || sec["encrypted"] != true || sec["enc_alg"] != ECDHES || sec["enc_method"] != A256GCM || sec["sig"] == "old" {
		t.Fatalf("security %v", sec)
	}
}

func TestSignRefusesBadKid(t *testing.T) {
	ed, _ := edKey(t, 1)
	for _, kid := range []string{"", "key1", testFrom, testFrom + "#", "agent:acme.other#k1", "agent:acme.billing2#k1", "#" + testFrom} {
		if _, err := Sign(testEnvelope(), ed, kid); !errors.Is(err, ErrKidPrefix) {
			t.Errorf("kid %q: error %v", kid, err)
		}
	}
	noFrom := testEnvelope()
	delete(noFrom, "from")
	if _, err := Sign(noFrom, ed, testFrom+"#k"); !errors.Is(err, ErrKidPrefix) {
		t.Errorf("no from: %v", err)
	}
	if _, err := Sign(testEnvelope(), nil, testFrom+"#k"); err == nil {
		t.Error("nil signer accepted")
	}
}

func TestSignerConstructorsRefuse(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := NewSigner(small); err == nil {
		t.Error("1024-bit RSA accepted")
	}
	if _, err := NewSigner(p384); err == nil {
		t.Error("P-384 accepted for ES256")
	}
	if _, err := NewEd25519Signer(make([]byte, 31)); err == nil {
		t.Error("short seed accepted")
	}
	if _, err := NewES256Signer(make([]byte, 32)); err == nil {
		t.Error("zero scalar accepted")
	}
	ed := ed25519.NewKeyFromSeed(make([]byte, 32))
	for _, k := range []*jose.JSONWebKey{
		nil,
		{Key: ed.Public()},
		{Key: ed, Use: "enc"},
		{Key: ed, Algorithm: ES256},
		{Key: []byte("symmetric")},
	} {
		if _, err := NewSignerFromJWK(k); err == nil {
			t.Errorf("JWK %+v accepted", k)
		}
	}
}

// signedBy returns the test envelope signed by s under kid, and a key
// source that knows s under kid.
func signedBy(t *testing.T, s Signer, kid string) (map[string]any, KeySource) {
	t.Helper()
	return mustSign(t, testEnvelope(), s, kid), static(pubJWK(s, kid))
}

func verifyErr(t *testing.T, env map[string]any, keys KeySource, algs []string, want error) {
	t.Helper()
	v, err := Verify(context.Background(), env, keys, VerifyOptions{Algorithms: algs})
	if v != nil {
		t.Fatalf("verified: %+v", v)
	}
	wantErr(t, err, want)
}

func TestVerifyRejects(t *testing.T) {
	ed, _ := edKey(t, 1)
	other, _ := edKey(t, 2)
	ec, _ := ecKey(t)
	kid := testFrom + "#key-1"

	t.Run("forged signature", func(t *testing.T) {
		env, keys := signedBy(t, ed, kid)
		forged := make([]byte, 64)
		_, _ = rand.Read(forged)
		secOf(env)["sig"] = base64.RawURLEncoding.EncodeToString(forged)
		verifyErr(t, env, keys, allAlgs, ErrBadSignature)
	})
	t.Run("kid swap", func(t *testing.T) {
		// The sender publishes two keys; a signature made with key-2 is
		// presented under key-1.
		kid2 := testFrom + "#key-2"
		keys := static(pubJWK(ed, kid), pubJWK(other, kid2))
		env := mustSign(t, testEnvelope(), other, kid2)
		if _, err := Verify(context.Background(), env, keys, VerifyOptions{Algorithms: allAlgs}); err != nil {
			t.Fatal(err)
		}
		secOf(env)["kid"] = kid
		verifyErr(t, env, keys, allAlgs, ErrBadSignature)
	})
	t.Run("unknown kid", func(t *testing.T) {
		env, _ := signedBy(t, ed, kid)
		verifyErr(t, env, static(pubJWK(ed, testFrom+"#key-9")), allAlgs, ErrUnknownKid)
	})
	t.Run("kid of another agent", func(t *testing.T) {
		// A valid signature by agent:acme.other, claimed for acme.billing.
		kidOther := "agent:acme.other#key-1"
		env := testEnvelope()
		env["from"] = "agent:acme.other"
		env = mustSign(t, env, other, kidOther)
		env["from"] = testFrom
		verifyErr(t, env, static(pubJWK(other, kidOther)), allAlgs, ErrKidPrefix)
	})
	t.Run("alg none", func(t *testing.T) {
		env, keys := signedBy(t, ed, kid)
		secOf(env)["alg"] = "none"
		secOf(env)["sig"] = "AA"
		verifyErr(t, env, keys, append(allAlgs, "none"), ErrAlgorithmNotAllowed)
	})
	t.Run("HS256 with the public key as secret", func(t *testing.T) {
		env, keys := signedBy(t, ed, kid)
		input, err := SigningInput(env)
		if err != nil {
			t.Fatal(err)
		}
		mac := hmac.New(sha256.New, ed.Public().(ed25519.PublicKey))
		mac.Write(input)
		secOf(env)["alg"] = "HS256"
		secOf(env)["sig"] = base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
		verifyErr(t, env, keys, append(allAlgs, "HS256"), ErrAlgorithmNotAllowed)
	})
	t.Run("alg not in allow-list", func(t *testing.T) {
		env, keys := signedBy(t, ec, kid)
		verifyErr(t, env, keys, []string{EdDSA}, ErrAlgorithmNotAllowed)
		verifyErr(t, env, keys, nil, ErrAlgorithmNotAllowed)
		verifyErr(t, env, keys, []string{"es256"}, ErrAlgorithmNotAllowed)
	})
	t.Run("missing alg", func(t *testing.T) {
		env, keys := signedBy(t, ed, kid)
		delete(secOf(env), "alg")
		verifyErr(t, env, keys, allAlgs, ErrMalformed)
	})
	t.Run("tampered payload", func(t *testing.T) {
		env, keys := signedBy(t, ed, kid)
		env["payload"].(map[string]any)["args"].(map[string]any)["amount"] = json.Number("85420")
		verifyErr(t, env, keys, allAlgs, ErrBadSignature)
	})
	t.Run("tampered unsigned member is still refused when it matters", func(t *testing.T) {
		// Changing to re-targets the message: the signature covers it.
		env, keys := signedBy(t, ed, kid)
		env["to"] = "agent:evil.sink"
		verifyErr(t, env, keys, allAlgs, ErrBadSignature)
	})
	t.Run("added member", func(t *testing.T) {
		env, keys := signedBy(t, ed, kid)
		env["compliance"] = map[string]any{}
		verifyErr(t, env, keys, allAlgs, ErrBadSignature)
	})
	for name, mutate := range map[string]func(string) string{
		"padded sig":         func(s string) string { return s + "==" },
		"standard base64":    func(s string) string { return strings.NewReplacer("-", "+", "_", "/").Replace(s) + "+/" },
		"line break":         func(s string) string { return s[:40] + "\n" + s[40:] },
		"space":              func(s string) string { return s[:40] + " " + s[40:] },
		"non-zero tail bits": func(s string) string { return s[:len(s)-1] + "x" },
		"63 bytes":           func(s string) string { return s[:84] },
		"65 bytes":           func(s string) string { return s + "AAA" },
		"empty":              func(string) string { return "" },
		"huge":               func(s string) string { return strings.Repeat(s, 20) },
	} {
		t.Run(name, func(t *testing.T) {
			env, keys := signedBy(t, ed, kid)
			secOf(env)["sig"] = mutate(secOf(env)["sig"].(string))
			verifyErr(t, env, keys, allAlgs, ErrMalformed)
		})
	}
	t.Run("RS256 signature of the wrong length", func(t *testing.T) {
		rs, _ := NewSigner(testRSAKey(t))
		env, keys := signedBy(t, rs, kid)
		secOf(env)["sig"] = secOf(env)["sig"].(string)[:300]
		verifyErr(t, env, keys, allAlgs, ErrMalformed)
	})
	t.Run("EC key for EdDSA", func(t *testing.T) {
		env, _ := signedBy(t, ed, kid)
		verifyErr(t, env, static(pubJWK(ec, kid)), allAlgs, ErrKeyMismatch)
	})
	t.Run("Ed25519 key for ES256", func(t *testing.T) {
		env, _ := signedBy(t, ec, kid)
		verifyErr(t, env, static(pubJWK(ed, kid)), allAlgs, ErrKeyMismatch)
	})
	t.Run("RSA key for ES256", func(t *testing.T) {
		env, _ := signedBy(t, ec, kid)
		verifyErr(t, env, static(jose.JSONWebKey{Key: &testRSAKey(t).PublicKey, KeyID: kid}), allAlgs, ErrKeyMismatch)
	})
	t.Run("P-384 key for ES256", func(t *testing.T) {
		env, _ := signedBy(t, ec, kid)
		p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		keys := KeySourceFunc(func(context.Context, string) (*jose.JSONWebKey, error) {
			return &jose.JSONWebKey{Key: &p384.PublicKey}, nil
		})
		verifyErr(t, env, keys, allAlgs, ErrKeyMismatch)
	})
	t.Run("1024-bit RSA key", func(t *testing.T) {
		small, _ := rsa.GenerateKey(rand.Reader, 1024)
		env := testEnvelope()
		input, _ := SigningInput(env)
		digest := sha256.Sum256(input)
		raw, _ := rsa.SignPKCS1v15(nil, small, crypto.SHA256, digest[:])
		env["security"] = map[string]any{"alg": RS256, "kid": kid, "sig": base64.RawURLEncoding.EncodeToString(raw)}
		keys := KeySourceFunc(func(context.Context, string) (*jose.JSONWebKey, error) {
			return &jose.JSONWebKey{Key: &small.PublicKey}, nil
		})
		verifyErr(t, env, keys, allAlgs, ErrKeyMismatch)
	})
	t.Run("JWK metadata", func(t *testing.T) {
		env, _ := signedBy(t, ed, kid)
		for _, k := range []jose.JSONWebKey{
			{Key: ed.Public(), KeyID: kid, Use: "enc"},
			{Key: ed.Public(), KeyID: kid, Algorithm: ES256},
			{Key: ed.Public(), KeyID: testFrom + "#other"},
		} {
			keys := KeySourceFunc(func(context.Context, string) (*jose.JSONWebKey, error) { return &k, nil })
			verifyErr(t, env, keys, allAlgs, ErrKeyMismatch)
		}
	})
	t.Run("key source errors", func(t *testing.T) {
		env, _ := signedBy(t, ed, kid)
		verifyErr(t, env, nil, allAlgs, ErrKeySource)
		plain := KeySourceFunc(func(context.Context, string) (*jose.JSONWebKey, error) { return nil, errors.New("boom") })
		verifyErr(t, env, plain, allAlgs, ErrKeySource)
		nothing := KeySourceFunc(func(context.Context, string) (*jose.JSONWebKey, error) { return nil, nil })
		verifyErr(t, env, nothing, allAlgs, ErrUnknownKid)
	})
	t.Run("malformed security", func(t *testing.T) {
		for name, sec := range map[string]any{
			"absent":                 nil,
			"string":                 "EdDSA",
			"array":                  []any{},
			"kid not string":         map[string]any{"alg": EdDSA, "kid": json.Number("1"), "sig": "AA"},
			"unknown member":         map[string]any{"alg": EdDSA, "kid": kid, "sig": "AA", "x5u": "https://evil"},
			"encrypted not bool":     map[string]any{"alg": EdDSA, "kid": kid, "sig": "AA", "encrypted": "true"},
			"encrypted without algs": map[string]any{"alg": EdDSA, "kid": kid, "sig": "AA", "encrypted": true},
		} {
			env, keys := signedBy(t, ed, kid)
			if sec == nil {
				delete(env, "security")
			} else {
				env["security"] = sec
			}
			t.Run(name, func(t *testing.T) { verifyErr(t, env, keys, allAlgs, ErrMalformed) })
		}
		verifyErr(t, nil, static(), allAlgs, ErrMalformed)
	})
	t.Run("not canonicalizable", func(t *testing.T) {
		env, keys := signedBy(t, ed, kid)
		env["payload"] = struct{ A int }{1}
		verifyErr(t, env, keys, allAlgs, ErrMalformed)
		cyclic := maps.Clone(env)
		inner := map[string]any{}
		inner["self"] = inner
		cyclic["payload"] = inner
		verifyErr(t, cyclic, keys, allAlgs, ErrMalformed)
	})
}

func TestVerifyDoesNotFetchForJunk(t *testing.T) {
	calls := 0
	keys := KeySourceFunc(func(context.Context, string) (*jose.JSONWebKey, error) {
		calls++
		return nil, ErrUnknownKid
	})
	ed, _ := edKey(t, 1)
	env, _ := signedBy(t, ed, testFrom+"#k")
	secOf(env)["sig"] = "not base64!"
	_, _ = Verify(context.Background(), env, keys, VerifyOptions{Algorithms: allAlgs})
	secOf(env)["alg"] = "HS256"
	_, _ = Verify(context.Background(), env, keys, VerifyOptions{Algorithms: allAlgs})
	if calls != 0 {
		t.Fatalf("key source consulted %d times for envelopes that could never verify", calls)
	}
}

func TestDecodeEnvelope(t *testing.T) {
	for name, in := range map[string]string{
		"duplicate member": `{"from":"a","from":"b"}`,
		"array":            `[]`,
		"trailing":         `{} {}`,
		"big integer":      `{"n":12345678901234567890}`,
		"too large":        `{"x":"` + strings.Repeat("a", MaxEnvelopeBytes) + `"}`,
	} {
		if _, err := DecodeEnvelope([]byte(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestSigningInputExcludesSecurityOnly(t *testing.T) {
	env := testEnvelope()
	a, err := SigningInput(env)
	if err != nil {
		t.Fatal(err)
	}
	env["security"] = map[string]any{"alg": "x"}
	b, _ := SigningInput(env)
	if !bytes.Equal(a, b) {
		t.Fatal("security changed the signing input")
	}
	if !bytes.Contains(a, []byte(`"amount":8542,`)) || !bytes.Contains(a, []byte(`"<&>"`)) {
		t.Fatalf("not canonical: %s", a)
	}
	if _, err := SigningInput(nil); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
}

func TestVerifiedAtDefaultsToNow(t *testing.T) {
	ed, _ := edKey(t, 1)
	env, keys := signedBy(t, ed, testFrom+"#k")
	v, err := Verify(context.Background(), env, keys, VerifyOptions{Algorithms: allAlgs})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(v.At) > time.Minute {
		t.Fatal(v.At)
	}
}
