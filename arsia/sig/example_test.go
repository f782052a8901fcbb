package sig_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/jcs"
	"github.com/go-jose/go-jose/v4"
)

func Example() {
	// The sender signs with its Ed25519 key, published as kid "#key-1".
	seed := make([]byte, ed25519.SeedSize) // use a real secret
	signer, err := sig.NewEd25519Signer(seed)
	if err != nil {
		panic(err)
	}
	env, err := sig.DecodeEnvelope([]byte(`{
		"v": "1.0", "id": "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
		"ts": "2026-03-24T10:00:00.000Z", "expires_at": "2026-03-24T10:00:30.000Z",
		"from": "agent:acme.billing", "to": "agent:acme.ledger", "intent": "request",
		"capabilities": ["ledger.post"],
		"payload": {"type": "com.acme.ledger/post", "args": {"amount": 12.5}}
	}`))
	if err != nil {
		panic(err)
	}
	signed, err := sig.Sign(env, signer, "agent:acme.billing#key-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(signed["security"].(map[string]any)["alg"])

	// The receiver knows the sender's public keys and accepts EdDSA only.
	keys := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: signer.Public(), KeyID: "agent:acme.billing#key-1", Use: "sig"},
	}})
	v, err := sig.Verify(context.Background(), signed, keys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.From, v.KeyID)

	// Any change to the signed members breaks the signature.
	signed["to"] = "agent:evil.sink"
	_, err = sig.Verify(context.Background(), signed, keys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}})
	fmt.Println(errors.Is(err, sig.ErrBadSignature), errors.Is(err, sig.ErrUnauthorized))
	// Output:
	// EdDSA
	// agent:acme.billing agent:acme.billing#key-1
	// true true
}

func ExampleVerify_allowList() {
	signer, _ := sig.NewEd25519Signer(make([]byte, ed25519.SeedSize))
	env := map[string]any{"from": "agent:acme.billing", "payload": map[string]any{"type": "x"}}
	signed, _ := sig.Sign(env, signer, "agent:acme.billing#key-1")
	keys := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: signer.Public(), KeyID: "agent:acme.billing#key-1"},
	}})
	// An empty allow-list accepts nothing.
	_, err := sig.Verify(context.Background(), signed, keys, sig.VerifyOptions{})
	fmt.Println(errors.Is(err, sig.ErrAlgorithmNotAllowed))
	// Output: true
}

func ExampleNewHTTPJWKS() {
	// Keys of a peer agent, cached per Cache-Control, refreshed on unknown
	// kids at most every 30 s, with removed kids treated as revoked.
	keys, err := sig.NewHTTPJWKS("https://billing.acme.example/.well-known/arsia/jwks.json", nil)
	if err != nil {
		panic(err)
	}
	_ = keys // pass to sig.Verify
	fmt.Println("ok")
	// Output: ok
}

func ExampleDecodeAndVerify() {
	signer, _ := sig.NewEd25519Signer(make([]byte, ed25519.SeedSize))
	env := map[string]any{"from": "agent:acme.billing", "payload": map[string]any{"type": "x", "args": map[string]any{"n": 1}}}
	signed, _ := sig.Sign(env, signer, "agent:acme.billing#key-1")
	wire, _ := jcs.CanonicalizeValue(signed) // what a sender puts on the wire
	keys := sig.NewStaticJWKS(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: signer.Public(), KeyID: "agent:acme.billing#key-1"},
	}})
	v, err := sig.DecodeAndVerify(context.Background(), wire, keys, sig.VerifyOptions{Algorithms: []string{sig.EdDSA}})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.From, v.Payload["type"])
	// Output: agent:acme.billing x
}
