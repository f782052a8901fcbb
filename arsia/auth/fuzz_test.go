package auth

import (
	"context"
	"crypto"
	"testing"
	"time"
)

// FuzzValidateAccessToken feeds arbitrary text to ValidateAccessToken with
// a key set whose private keys the corpus never saw. Nothing may panic,
// nothing may validate, and every error must be in the taxonomy. The seeds
// are well-formed tokens signed by look-alike keys under the set's kids,
// so the fuzzer starts next to the interesting paths.
func FuzzValidateAccessToken(f *testing.F) {
	keys := keysFor(map[string]crypto.Signer{"ed": seededEd25519(101), "ec": seededP256(f, 102), "rs": testRSA(f)})
	for kid, s := range map[string]crypto.Signer{"ed": seededEd25519(201), "ec": seededP256(f, 202), "rs": seededEd25519(203)} {
		c := goodClaims()
		c.Confirmation = &Confirmation{JKT: "EokVh4xzjb5Ynb7coQLVYCvcbkPySMsVzyAsBEE8DMM"}
		f.Add(mustIssue(f, s, kid, c))
	}
	f.Add(unsignedParts(`{"alg":"none","typ":"JWT"}`, `{"sub":"x"}`) + ".")
	f.Add(hs256(`{"alg":"HS256","typ":"JWT","kid":"ed"}`, `{"sub":"x"}`, []byte("k")))
	f.Add("a.b.c")
	f.Add("")

	opts := goodOptions()
	opts.Algorithms = []string{EdDSA, ES256, RS256}
	opts.AcceptAnyJTI = true
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, token string) {
		c, errs := ValidateAccessToken(ctx, token, keys, opts)
		if len(errs) == 0 || c != nil {
			t.Fatalf("random input validated: %q", token)
		}
		for _, err := range errs {
			if !inTaxonomy(err) {
				t.Fatalf("error outside the taxonomy: %v", err)
			}
		}
		_ = ArsiaError(errs...)
	})
}

// FuzzValidateDPoP does the same for proofs. A proof carries its own key,
// so the seeds are valid proofs bound (ath) to another access token: no
// mutation can fix the hash without breaking the signature.
func FuzzValidateDPoP(f *testing.F) {
	for _, s := range []crypto.Signer{seededEd25519(131), seededP256(f, 132)} {
		c := goodProofClaims()
		c.AccessTokenHash = AccessTokenHash("another token")
		f.Add(mustProof(f, s, c))
	}
	f.Add(unsignedParts(`{"alg":"EdDSA","typ":"dpop+jwt","jwk":{"kty":"OKP","crv":"Ed25519","x":"AAAA"}}`, `{}`) + ".AAAA")
	f.Add(unsignedParts(`{"alg":"ES256","typ":"dpop+jwt","jwk":{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}}`, `{}`) + ".AAAA")
	f.Add("a.b.c")

	ctx := context.Background()
	f.Fuzz(func(t *testing.T, proof string) {
		cache := NewMemoryReplayCache(&MemoryReplayOptions{Capacity: 4, Now: func() time.Time { return testNow }})
		opts := dpopOptions(cache)
		opts.Algorithms = []string{EdDSA, ES256}
		p, errs := ValidateDPoP(ctx, proof, opts)
		if len(errs) == 0 || p != nil {
			t.Fatalf("random input validated: %q", proof)
		}
		for _, err := range errs {
			if !inTaxonomy(err) {
				t.Fatalf("error outside the taxonomy: %v", err)
			}
		}
		if cache.Len() != 0 {
			t.Fatal("an invalid proof was recorded")
		}
	})
}

// FuzzJWK: parsing, key conversion and thumbprints never panic, and a
// thumbprint, when there is one, is 43 base64url characters.
func FuzzJWK(f *testing.F) {
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"2yBga3e_Y0iNdj9COkyqEcksOlTLhF7ySNaR3IxyIL0"}`))
	f.Add([]byte(`{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}`))
	f.Add([]byte(`{"kty":"RSA","n":"` + rfc7638Key.N + `","e":"AQAB"}`))
	f.Add([]byte(`{"kty":"RSA","n":"","e":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseJWK(data)
		if err != nil {
			return
		}
		_, _ = k.PublicKey()
		if tp, err := Thumbprint(k); err == nil && (len(tp) != 43 || !isB64URL(tp)) {
			t.Fatalf("thumbprint %q", tp)
		}
	})
}
