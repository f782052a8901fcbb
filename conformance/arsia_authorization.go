package conformance

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/go-jose/go-jose/v4"
)

// execAuthorization runs the authorization suite (ARSIA-Core §6,
// ARSIA-Identity §3): access-token validation, scope coverage, JWK
// thumbprints, DPoP proofs and DPoP binding. Tokens and proofs are made at
// run time with the Ed25519 keypair of input.signer_agent_id and checked at
// the fixed input.now_unix.
func execAuthorization(env *arsiaEnv, c *arsiaCase) error {
	switch op := c.operation(""); op {
	case "validate_token":
		return execValidateToken(env, c)
	case "check_scope_coverage":
		scope, err := scopeInput(c.Input["scope"])
		if err != nil {
			return err
		}
		required, err := stringList(c.Input["required"])
		if err != nil {
			return fmt.Errorf("%w: input.required: %v", errUnsupported, err)
		}
		covered, missing := auth.CheckScopeCoverage(scope, required)
		if missing == nil {
			missing = []string{}
		}
		return firstErr(expectEqual(c, "covered", covered), expectEqual(c, "missing", missing))
	case "compute_jwk_thumbprint":
		jwk, err := jwkInput(c.Input["jwk"])
		if err != nil {
			return err
		}
		tp, err := auth.Thumbprint(jwk)
		if err != nil {
			return fmt.Errorf("thumbprint: %v", err)
		}
		return expectEqual(c, "thumbprint", tp)
	case "validate_dpop":
		return execValidateDPoP(env, c)
	case "verify_dpop_binding":
		jwk, err := jwkInput(c.Input["dpop_jwk"])
		if err != nil {
			return err
		}
		jkt, _ := c.Input["token_cnf_jkt"].(string)
		claims := &auth.Claims{Confirmation: &auth.Confirmation{JKT: jkt}}
		err = auth.VerifyDPoPBinding(claims, &auth.DPoPProof{JWK: jwk})
		return expectEqual(c, "bound", err == nil)
	default:
		// live_token_request, live_as_metadata, live_token_introspection
		// need an authorization server; the suite gates them.
		return fmt.Errorf("%w: authorization operation %q", errUnsupported, op)
	}
}

// execValidateToken signs input.claims verbatim as a JWT and validates it.
// The token is made with go-jose rather than auth.IssueAccessToken: a case
// may leave out a claim, which the issuer refuses to do, and a second JOSE
// implementation on the signing side keeps the validator honest.
func execValidateToken(env *arsiaEnv, c *arsiaCase) error {
	priv, kid, err := authKeypair(env, c)
	if err != nil {
		return err
	}
	now, err := nowInput(c)
	if err != nil {
		return err
	}
	claims, ok := c.Input["claims"].(map[string]any)
	if !ok {
		return fmt.Errorf("%w: input.claims is not an object", errUnsupported)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return err
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return err
	}
	token, err := obj.CompactSerialize()
	if err != nil {
		return err
	}
	keys := auth.NewStaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: priv.Public(), KeyID: kid, Use: "sig"},
	}})

	opts := auth.TokenOptions{
		Now: now,
		// The suite's jtis are UUID-shaped but not version 4.
		AcceptAnyJTI: true,
	}
	opts.ExpectedSubject, _ = c.Input["expected_sub"].(string)
	opts.SkipSubjectCheckInsecure = opts.ExpectedSubject == ""
	opts.ExpectedAudience, _ = c.Input["expected_aud"].(string)
	opts.SkipAudienceCheckInsecure = opts.ExpectedAudience == ""
	if v, present := c.Input["required_capabilities"]; present {
		if opts.RequiredScope, err = stringList(v); err != nil {
			return fmt.Errorf("%w: input.required_capabilities: %v", errUnsupported, err)
		}
	}
	_, errs := auth.ValidateAccessToken(context.Background(), token, keys, opts)
	return expectValidity(c, errorTexts(errs))
}

// execValidateDPoP builds a proof from input.proof, bound (ath) to
// input.bind_token or else input.access_token, and validates it against
// input.access_token with a replay cache that already holds input.seen_jti.
func execValidateDPoP(env *arsiaEnv, c *arsiaCase) error {
	priv, _, err := authKeypair(env, c)
	if err != nil {
		return err
	}
	now, err := nowInput(c)
	if err != nil {
		return err
	}
	p, ok := c.Input["proof"].(map[string]any)
	if !ok {
		return fmt.Errorf("%w: input.proof is not an object", errUnsupported)
	}
	token, _ := c.Input["access_token"].(string)
	bind := token
	if b, ok := c.Input["bind_token"].(string); ok {
		bind = b
	}
	claims := auth.DPoPClaims{AccessTokenHash: auth.AccessTokenHash(bind)}
	claims.ID, _ = p["jti"].(string)
	claims.Method, _ = p["htm"].(string)
	claims.URL, _ = p["htu"].(string)
	iat, ok := intInput(p["iat"])
	if !ok {
		return fmt.Errorf("%w: input.proof.iat is not an integer", errUnsupported)
	}
	claims.IssuedAt = iat
	proof, err := auth.NewDPoPProof(priv, claims)
	if err != nil {
		return fmt.Errorf("make proof: %v", err)
	}

	ctx := context.Background()
	cache := auth.NewMemoryReplayCache(&auth.MemoryReplayOptions{Now: func() time.Time { return now }})
	if v, present := c.Input["seen_jti"]; present {
		seen, err := stringList(v)
		if err != nil {
			return fmt.Errorf("%w: input.seen_jti: %v", errUnsupported, err)
		}
		for _, jti := range seen {
			if _, err := cache.Seen(ctx, jti, now.Add(auth.DefaultSkew)); err != nil {
				return err
			}
		}
	}
	method, _ := c.Input["expected_htm"].(string)
	if method == "" {
		method = "POST" // the ARSIA inbox accepts POST only
	}
	url, _ := c.Input["expected_htu"].(string)
	_, errs := auth.ValidateDPoP(ctx, proof, auth.DPoPOptions{
		Method: method, URL: url, AccessToken: token, Now: now, Replay: cache,
	})
	return expectValidity(c, errorTexts(errs))
}

// authKeypair returns the Ed25519 key and kid of input.signer_agent_id.
func authKeypair(env *arsiaEnv, c *arsiaCase) (ed25519.PrivateKey, string, error) {
	id, _ := c.Input["signer_agent_id"].(string)
	kp, ok := env.keypairs[id]
	if !ok {
		return nil, "", fmt.Errorf("no keypair for %q: %v", id, env.loadErr)
	}
	seed, err := hexField(kp, "private_key_hex")
	if err != nil {
		return nil, "", err
	}
	pub, err := hexField(kp, "public_key_hex")
	if err != nil {
		return nil, "", err
	}
	if len(seed) != ed25519.SeedSize || len(pub) != ed25519.PublicKeySize {
		return nil, "", fmt.Errorf("%w: %s is not an Ed25519 keypair", errUnsupported, id)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if !priv.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(pub)) {
		return nil, "", fmt.Errorf("keypair %s: private key does not match public_key_hex", id)
	}
	kid, _ := kp["kid"].(string)
	if kid == "" {
		kid = id + "#key1"
	}
	return priv, kid, nil
}

func nowInput(c *arsiaCase) (time.Time, error) {
	n, ok := intInput(c.Input["now_unix"])
	if !ok {
		return time.Time{}, fmt.Errorf("%w: input.now_unix is not an integer", errUnsupported)
	}
	return time.Unix(n, 0), nil
}

func intInput(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

// scopeInput accepts a scope as a list of entries or a space-separated
// string.
func scopeInput(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	list, err := stringList(v)
	if err != nil {
		return "", fmt.Errorf("%w: input.scope: %v", errUnsupported, err)
	}
	return strings.Join(list, " "), nil
}

func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("not a list")
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("item %d is not a string", i)
		}
		out[i] = s
	}
	return out, nil
}

func jwkInput(v any) (auth.JWK, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return auth.JWK{}, fmt.Errorf("%w: JWK input is not an object", errUnsupported)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return auth.JWK{}, err
	}
	return auth.ParseJWK(data)
}

func errorTexts(errs []error) []string {
	out := make([]string, len(errs))
	for i, err := range errs {
		out[i] = err.Error()
	}
	return out
}
