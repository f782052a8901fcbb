package sig

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

func encKeyPair(t *testing.T, kid string) *jose.JSONWebKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jose.JSONWebKey{Key: k, KeyID: kid, Use: "enc"}
}

func jweOf(t *testing.T, recipient *jose.JSONWebKey, alg jose.KeyAlgorithm, plaintext string) string {
	t.Helper()
	enc, err := jose.NewEncrypter(jose.A256GCM, jose.Recipient{Algorithm: alg, Key: recipient.Public().Key, KeyID: recipient.KeyID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := enc.Encrypt([]byte(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEncryptThenSign(t *testing.T) {
	ed, _ := edKey(t, 1)
	kid := testFrom + "#key-1"
	keys := static(pubJWK(ed, kid))
	recipient := encKeyPair(t, "agent:acme.ledger#enc-1")
	ctx := context.Background()
	vopts := VerifyOptions{Algorithms: []string{EdDSA}}
	for _, alg := range []string{ECDHES, ECDHESA256KW} {
		t.Run(alg, func(t *testing.T) {
			enc, err := EncryptPayload(testEnvelope(), recipient, alg)
			if err != nil {
				t.Fatal(err)
			}
			jwe, ok := enc["payload"].(string)
			if !ok || strings.Count(jwe, ".") != 4 || strings.Contains(jwe, "ledger/post") {
				t.Fatalf("payload %v", enc["payload"])
			}
			signed := mustSign(t, enc, ed, kid)
			sec := secOf(signed)
			if sec["encrypted"] != true || sec["enc_alg"] != alg || sec["enc_method"] != A256GCM {
				t.Fatalf("security %v", sec)
			}
			v, err := VerifyAndDecrypt(ctx, signed, keys, vopts, DecryptOptions{Key: recipient, Algorithms: []string{alg}})
			if err != nil {
				t.Fatal(err)
			}
			want := testEnvelope()["payload"]
			if !v.Encrypted || !equalJSON(v.Payload, want) || v.Envelope["payload"] != jwe {
				t.Fatalf("verified %+v", v)
			}
			// enc_alg is outside the signature: changing it only makes
			// decryption refuse the JWE.
			other := map[string]string{ECDHES: ECDHESA256KW, ECDHESA256KW: ECDHES}[alg]
			forged := mustSign(t, enc, ed, kid)
			secOf(forged)["enc_alg"] = other
			_, err = VerifyAndDecrypt(ctx, forged, keys, vopts, DecryptOptions{Key: recipient, Algorithms: []string{ECDHES, ECDHESA256KW}})
			wantErr(t, err, ErrDecrypt)
		})
	}
}

func TestVerifyAndDecryptRejects(t *testing.T) {
	ed, _ := edKey(t, 1)
	wrong, _ := edKey(t, 2)
	kid := testFrom + "#key-1"
	keys := static(pubJWK(ed, kid))
	recipient := encKeyPair(t, "agent:acme.ledger#enc-1")
	ctx := context.Background()
	vopts := VerifyOptions{Algorithms: []string{EdDSA}}
	dopts := DecryptOptions{Key: recipient, Algorithms: []string{ECDHES}}
	encrypted, err := EncryptPayload(testEnvelope(), recipient, ECDHES)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("bad signature", func(t *testing.T) {
		_, err := VerifyAndDecrypt(ctx, mustSign(t, encrypted, wrong, kid), keys, vopts, dopts)
		wantErr(t, err, ErrBadSignature)
		if !strings.Contains(err.Error(), "signature verification failed on encrypted envelope") {
			t.Fatal(err)
		}
	})
	t.Run("bad signature and broken JWE: signature first", func(t *testing.T) {
		env := mustSign(t, encrypted, wrong, kid)
		env["payload"], _, _ = strings.Cut(env["payload"].(string), ".")
		_, err := VerifyAndDecrypt(ctx, env, keys, vopts, dopts)
		wantErr(t, err, ErrBadSignature)
		if errors.Is(err, ErrDecrypt) {
			t.Fatal("decryption attempted before the signature was checked")
		}
	})
	t.Run("broken JWE", func(t *testing.T) {
		env := cloneEnv(encrypted)
		env["payload"], _, _ = strings.Cut(env["payload"].(string), ".")
		_, err := VerifyAndDecrypt(ctx, mustSign(t, env, ed, kid), keys, vopts, dopts)
		wantErr(t, err, ErrDecrypt)
		if !strings.Contains(err.Error(), "JWE decryption failed") {
			t.Fatal(err)
		}
	})
	t.Run("wrong recipient key", func(t *testing.T) {
		_, err := VerifyAndDecrypt(ctx, mustSign(t, encrypted, ed, kid), keys, vopts,
			DecryptOptions{Key: encKeyPair(t, ""), Algorithms: []string{ECDHES}})
		wantErr(t, err, ErrDecrypt)
	})
	t.Run("JWE for another kid", func(t *testing.T) {
		k := *recipient
		k.KeyID = "agent:acme.ledger#enc-2"
		_, err := VerifyAndDecrypt(ctx, mustSign(t, encrypted, ed, kid), keys, vopts, DecryptOptions{Key: &k, Algorithms: []string{ECDHES}})
		wantErr(t, err, ErrDecrypt)
	})
	t.Run("enc_alg not allowed", func(t *testing.T) {
		_, err := VerifyAndDecrypt(ctx, mustSign(t, encrypted, ed, kid), keys, vopts, DecryptOptions{Key: recipient})
		wantErr(t, err, ErrDecrypt)
	})
	t.Run("enc_method other than A256GCM", func(t *testing.T) {
		env := mustSign(t, encrypted, ed, kid)
		secOf(env)["enc_method"] = "A128CBC-HS256"
		_, err := VerifyAndDecrypt(ctx, env, keys, vopts, dopts)
		wantErr(t, err, ErrDecrypt)
	})
	for name, tc := range map[string]struct {
		plaintext string
		want      error
		text      string
	}{
		"array":     {"[1, 2, 3]", ErrPlaintextNotObject, "not a JSON object (got array or primitive)"},
		"string":    {`"x"`, ErrPlaintextNotObject, "not a JSON object"},
		"not JSON":  {"{nope", ErrPlaintextNotJSON, "not valid JSON"},
		"duplicate": {`{"a":1,"a":2}`, ErrPlaintextNotJSON, "not valid JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			env := cloneEnv(encrypted)
			env["payload"] = jweOf(t, recipient, jose.ECDH_ES, tc.plaintext)
			_, err := VerifyAndDecrypt(ctx, mustSign(t, env, ed, kid), keys, vopts, dopts)
			wantErr(t, err, tc.want)
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatal(err)
			}
		})
	}
	t.Run("not encrypted", func(t *testing.T) {
		_, err := VerifyAndDecrypt(ctx, mustSign(t, testEnvelope(), ed, kid), keys, vopts, dopts)
		wantErr(t, err, ErrDecrypt)
	})
}

func TestEncryptPayloadRefuses(t *testing.T) {
	good := encKeyPair(t, "r#1")
	sigUse := *good
	sigUse.Use = "sig"
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, tc := range map[string]struct {
		env map[string]any
		key *jose.JSONWebKey
		alg string
	}{
		"alg RSA1_5":     {testEnvelope(), good, "RSA1_5"},
		"alg dir":        {testEnvelope(), good, "dir"},
		"nil key":        {testEnvelope(), nil, ECDHES},
		"signing key":    {testEnvelope(), &sigUse, ECDHES},
		"P-384":          {testEnvelope(), &jose.JSONWebKey{Key: p384, Use: "enc"}, ECDHES},
		"string payload": {map[string]any{"payload": "x"}, good, ECDHES},
		"nil envelope":   {nil, good, ECDHES},
		"already":        {map[string]any{"payload": map[string]any{}, "security": map[string]any{"encrypted": true}}, good, ECDHES},
	} {
		if _, err := EncryptPayload(tc.env, tc.key, tc.alg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func cloneEnv(m map[string]any) map[string]any {
	c, _ := deepCopy(m)
	return c.(map[string]any)
}

func equalJSON(a, b any) bool {
	ca, err1 := SigningInput(map[string]any{"x": a})
	cb, err2 := SigningInput(map[string]any{"x": b})
	return err1 == nil && err2 == nil && string(ca) == string(cb)
}
