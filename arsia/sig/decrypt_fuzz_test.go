package sig

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/jcs"
)

// fuzzEncKey is a fixed receiver key, so that the committed seed corpus
// holds JWEs this key decrypts. Tests only: it protects nothing.
const fuzzEncKey = `{"use":"enc","kty":"EC","kid":"agent:acme.gateway#enc-fuzz","crv":"P-256",` +
	`"x":"-Crkb_8NNnL-JVANrewGYPr-MjwPWarAHB3pFXoILBM","y":"7I6nX2X6bqVW-sUidI5-d8uxUXY3YinswNJVlv9cIS8",` +
	`"d":"qM_6NC40IyAfyj8EmOCHczqRAJOIjtT3NdyAQ1ihWjE"}`

func fuzzKey(tb testing.TB) *jose.JSONWebKey {
	tb.Helper()
	var k jose.JSONWebKey
	if err := json.Unmarshal([]byte(fuzzEncKey), &k); err != nil {
		tb.Fatal(err)
	}
	return &k
}

// fuzzJWE encrypts plaintext to key.
func fuzzJWE(tb testing.TB, key *jose.JSONWebKey, alg string, plaintext []byte) string {
	tb.Helper()
	enc, err := jose.NewEncrypter(jose.A256GCM, jose.Recipient{Algorithm: jose.KeyAlgorithm(alg), Key: key.Public().Key, KeyID: key.KeyID}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	obj, err := enc.Encrypt(plaintext)
	if err != nil {
		tb.Fatal(err)
	}
	compact, err := obj.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return compact
}

// decryptErr checks that err is one of Decrypt's documented refusals.
func decryptErr(tb testing.TB, err error) {
	tb.Helper()
	if !errors.Is(err, ErrUnauthorized) ||
		!(errors.Is(err, ErrDecrypt) || errors.Is(err, ErrPlaintextNotJSON) || errors.Is(err, ErrPlaintextNotObject)) {
		tb.Fatalf("Decrypt refused with %v, not ErrDecrypt, ErrPlaintextNotJSON or ErrPlaintextNotObject", err)
	}
}

// FuzzDecrypt drives Decrypt two ways. First with an arbitrary compact JWE
// as the payload of a verified envelope: a refusal is one of the package's
// decryption errors, and an accepted JWE has a protected header naming the
// allowed algorithm, A256GCM, the receiver's kid (or none) and no
// compression, and a JSON object as plaintext. Then with arbitrary
// plaintext encrypted to the receiver: Decrypt accepts it exactly when it
// is one strict JSON object (jcs.Decode), and returns that object.
func FuzzDecrypt(f *testing.F) {
	key := fuzzKey(f)
	for _, alg := range []string{ECDHES, ECDHESA256KW} {
		for _, pt := range []string{`{"capability":"ledger/post","args":{"amount":"10.00"}}`, `[1]`, `{"a":1,"a":2}`, "\xff"} {
			f.Add(fuzzJWE(f, key, alg, []byte(pt)), []byte(pt), alg == ECDHESA256KW)
		}
	}
	f.Add("e30.e30.e30.e30.e30", []byte(`{}`), false)
	f.Add("", []byte(`{"x":1e400}`), true)
	f.Fuzz(func(t *testing.T, jwe string, plaintext []byte, kw bool) {
		alg := ECDHES
		if kw {
			alg = ECDHESA256KW
		}
		opts := DecryptOptions{Key: key, Algorithms: []string{alg}}
		v := &Verified{Envelope: map[string]any{"payload": jwe}, Encrypted: true, EncAlg: alg, EncMethod: A256GCM}
		got, err := Decrypt(v, opts)
		if err != nil {
			decryptErr(t, err)
			if got != nil {
				t.Fatalf("refused with %v but returned %v", err, got)
			}
		} else {
			parts := strings.Split(jwe, ".")
			if len(parts) != 5 || got == nil {
				t.Fatalf("accepted %q (%d parts) as %v", jwe, len(parts), got)
			}
			raw, err := base64.RawURLEncoding.DecodeString(parts[0])
			if err != nil {
				t.Fatalf("accepted a JWE whose protected header is not base64url: %v", err)
			}
			var hdr map[string]any
			if err := json.Unmarshal(raw, &hdr); err != nil {
				t.Fatalf("accepted a JWE whose protected header is not JSON: %v", err)
			}
			if _, zip := hdr["zip"]; zip || hdr["alg"] != alg || hdr["enc"] != A256GCM {
				t.Fatalf("accepted a JWE with header %s under enc_alg %s", raw, alg)
			}
			if kid, ok := hdr["kid"]; ok && kid != key.KeyID {
				t.Fatalf("accepted a JWE for kid %v", kid)
			}
		}

		// Arbitrary plaintext, correctly encrypted.
		compact := fuzzJWE(t, key, alg, plaintext)
		v = &Verified{Envelope: map[string]any{"payload": compact}, Encrypted: true, EncAlg: alg, EncMethod: A256GCM}
		got, err = Decrypt(v, opts)
		doc, derr := jcs.Decode(plaintext)
		want, isObject := doc.(map[string]any)
		switch {
		case derr != nil:
			if !errors.Is(err, ErrPlaintextNotJSON) {
				t.Fatalf("plaintext %q is not JSON (%v), Decrypt says %v", plaintext, derr, err)
			}
		case !isObject:
			if !errors.Is(err, ErrPlaintextNotObject) {
				t.Fatalf("plaintext %q is not an object, Decrypt says %v", plaintext, err)
			}
		case err != nil:
			t.Fatalf("plaintext %q is an object, Decrypt says %v", plaintext, err)
		default:
			a, err1 := jcs.CanonicalizeValue(got)
			b, err2 := jcs.CanonicalizeValue(want)
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Fatalf("decrypted %s, want %s (%v, %v)", a, b, err1, err2)
			}
		}
		// The other algorithm, or another content encryption, is refused
		// before any decryption.
		other := map[string]string{ECDHES: ECDHESA256KW, ECDHESA256KW: ECDHES}[alg]
		for _, bad := range []*Verified{
			{Envelope: v.Envelope, Encrypted: true, EncAlg: other, EncMethod: A256GCM},
			{Envelope: v.Envelope, Encrypted: true, EncAlg: alg, EncMethod: "A128GCM"},
			{Envelope: v.Envelope, Encrypted: false, EncAlg: alg, EncMethod: A256GCM},
		} {
			if _, err := Decrypt(bad, opts); !errors.Is(err, ErrDecrypt) {
				t.Fatalf("Decrypt(%+v) = %v, want ErrDecrypt", bad, err)
			}
		}
	})
}
