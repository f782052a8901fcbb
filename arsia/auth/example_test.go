package auth_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/go-jose/go-jose/v4"
)

// The receiver of an ARSIA request checks the access token against the
// envelope: sender, recipient, capabilities.
func ExampleValidateAccessToken() {
	now := time.Unix(1775995200, 0)
	// The authorization server's key; receivers know its public half.
	asKey := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // use a real secret
	token, err := auth.IssueAccessToken(asKey, "as#key-1", auth.Claims{
		Issuer:    "https://as.example.com",
		Subject:   "agent:acme.echo-client",
		Audience:  auth.Audience{"agent:contoso.crm"},
		ExpiresAt: now.Add(time.Hour).Unix(),
		IssuedAt:  now.Unix(),
		ID:        "5f0c6c3e-8a1b-4c2d-9e3f-0a1b2c3d4e5f",
		Scope:     "notes.read",
	})
	if err != nil {
		panic(err)
	}
	keys := auth.NewStaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: asKey.Public(), KeyID: "as#key-1", Use: "sig"},
	}})

	opts := auth.TokenOptions{
		Now:              now,
		Issuer:           "https://as.example.com",
		ExpectedSubject:  "agent:acme.echo-client", // envelope "from"
		ExpectedAudience: "agent:contoso.crm",      // envelope "to"
		RequiredScope:    []string{"notes.read"},   // envelope "capabilities"
	}
	claims, errs := auth.ValidateAccessToken(context.Background(), token, keys, opts)
	fmt.Println(claims.Subject, len(errs))

	opts.RequiredScope = []string{"notes.read", "notes.write"}
	_, errs = auth.ValidateAccessToken(context.Background(), token, keys, opts)
	fmt.Println(errs[0])
	answer := auth.ArsiaError(errs...)
	fmt.Println(answer.WireCode(), answer.Details["required_capabilities"])
	// Output:
	// agent:acme.echo-client 0
	// auth: token scope does not cover required capabilities: missing=['notes.write']
	// forbidden [notes.read notes.write]
}

// A DPoP proof shows the request comes from the holder of the key the
// token is bound to; its jti is recorded so that it cannot be used twice.
func ExampleValidateDPoP() {
	now := time.Unix(1775995200, 0)
	clientKey := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // use a real secret
	jwk, _ := auth.PublicJWK(clientKey.Public())
	jkt, _ := auth.Thumbprint(jwk)
	claims := &auth.Claims{Confirmation: &auth.Confirmation{JKT: jkt}} // from ValidateAccessToken
	const token = "the access token"

	proof, err := auth.NewDPoPProof(clientKey, auth.DPoPClaims{
		Method:          "POST",
		URL:             "https://contoso.crm/arsia/inbox",
		IssuedAt:        now.Unix(),
		AccessTokenHash: auth.AccessTokenHash(token),
	})
	if err != nil {
		panic(err)
	}

	// The cache expires entries on the same clock as the validation.
	cache := auth.NewMemoryReplayCache(&auth.MemoryReplayOptions{Now: func() time.Time { return now }})
	opts := auth.DPoPOptions{
		Method:      "POST",
		URL:         "https://contoso.crm/arsia/inbox",
		AccessToken: token,
		Now:         now,
		Replay:      cache,
	}
	p, errs := auth.ValidateDPoP(context.Background(), proof, opts)
	fmt.Println(len(errs), auth.VerifyDPoPBinding(claims, p))

	_, errs = auth.ValidateDPoP(context.Background(), proof, opts)
	fmt.Println(errors.Is(errs[0], auth.ErrReplay))
	// Output:
	// 0 <nil>
	// true
}

func ExampleCheckScopeCoverage() {
	fmt.Println(auth.CheckScopeCoverage("notes.read notes.*", []string{"notes.read", "notes.write"}))
	// Output: false [notes.write]
}

// The example of RFC 7638 §3.1.
func ExampleThumbprint() {
	tp, err := auth.Thumbprint(auth.JWK{
		KeyType: "RSA",
		E:       "AQAB",
		N: "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMs" +
			"tn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5" +
			"hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
	})
	fmt.Println(tp, err)
	// Output: NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs <nil>
}
