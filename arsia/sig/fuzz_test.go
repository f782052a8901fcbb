package sig

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// FuzzVerify feeds arbitrary bytes through DecodeEnvelope and Verify with
// a fixed key set whose private keys the corpus never saw: nothing may
// panic and nothing may verify. The seeds are well-formed envelopes signed
// by look-alike keys under the set's kids, so the fuzzer starts next to the
// interesting paths.
func FuzzVerify(f *testing.F) {
	edIn, _ := edKey(f, 1)
	ecIn, _ := ecKey(f)
	rsIn, err := NewSigner(testRSAKey(f))
	if err != nil {
		f.Fatal(err)
	}
	kids := map[string]Signer{testFrom + "#ed": edIn, testFrom + "#ec": ecIn, testFrom + "#rs": rsIn}
	var set []jose.JSONWebKey
	for kid, s := range kids {
		set = append(set, pubJWK(s, kid))
	}
	keys := static(set...)

	edOut, _ := edKey(f, 2)
	ecOut, _ := ecKey(f)
	for kid, s := range map[string]Signer{testFrom + "#ed": edOut, testFrom + "#ec": ecOut, testFrom + "#rs": edOut} {
		b, err := json.Marshal(mustSign(f, testEnvelope(), s, kid))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	recipient := &jose.JSONWebKey{Key: ecOut.Public(), Use: "enc"}
	enc, err := EncryptPayload(testEnvelope(), recipient, ECDHES)
	if err != nil {
		f.Fatal(err)
	}
	b, _ := json.Marshal(mustSign(f, enc, edOut, testFrom+"#ed"))
	f.Add(b)
	f.Add([]byte(`{"from":"agent:acme.billing","security":{"alg":"none","kid":"agent:acme.billing#ed","sig":""}}`))
	f.Add([]byte(`{"from":"agent:acme.billing","security":{"alg":"HS256","kid":"agent:acme.billing#ed","sig":"AAAA"}}`))
	f.Add([]byte(`[]`))

	ctx := context.Background()
	opts := VerifyOptions{Algorithms: allAlgs}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := DecodeEnvelope(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode error outside the taxonomy: %v", err)
			}
			return
		}
		v, err := Verify(ctx, env, keys, opts)
		if err == nil {
			t.Fatalf("verified an envelope no key holder signed: %+v", v)
		}
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("error outside the taxonomy: %v", err)
		}
		if _, err := VerifyAndDecrypt(ctx, env, keys, opts, DecryptOptions{Algorithms: []string{ECDHES}}); err == nil {
			t.Fatal("VerifyAndDecrypt accepted")
		}
	})
}

// FuzzParseStaticJWKS checks that no JWKS document panics the parser and
// that whatever it keeps is a public key usable for some algorithm.
func FuzzParseStaticJWKS(f *testing.F) {
	ed, _ := edKey(f, 1)
	ec, _ := ecKey(f)
	f.Add(jwksJSON(f, pubJWK(ed, testFrom+"#a"), pubJWK(ec, testFrom+"#b")))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"X25519","x":"AA","kid":"k"},{"kty":"oct","k":"AA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","kid":"r"}]}`))
	enc := fuzzKey(f).Public()
	f.Add(jwksJSON(f, pubJWK(ed, testFrom+"#a"), enc))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"X25519","x":"AA","kid":"agent:acme.gateway#x","use":"enc"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseStaticJWKS(data)
		if err != nil {
			return
		}
		for _, k := range s.set.enc {
			if !k.IsPublic() || !isP256(k) || k.KeyID == "" {
				t.Fatalf("kept encryption key %+v", k)
			}
			agent, _, _ := strings.Cut(k.KeyID, "#")
			if got, err := s.EncryptionKey(t.Context(), agent); err == nil && !strings.HasPrefix(got.KeyID, agent+"#") {
				t.Fatalf("EncryptionKey(%q) = %s", agent, got.KeyID)
			}
		}
		for kid, k := range s.set.keys {
			if !k.IsPublic() || k.KeyID != kid {
				t.Fatalf("kept %+v under %q", k, kid)
			}
			if _, err := algorithmFor(k.Key); err != nil {
				t.Fatalf("kept unusable key: %v", err)
			}
		}
	})
}
