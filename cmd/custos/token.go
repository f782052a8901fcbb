package main

import (
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/gateway/authz"
)

// custos token: access tokens and DPoP proofs for trying a gateway whose
// tokens.mode is not off, without an authorization server.

func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Issue ARSIA access tokens and DPoP proofs (for tests and demos)",
		Long: `Make the access tokens and DPoP proofs that custos serve checks when
tokens.mode is bearer, dpop or any (see docs/tokens.md), without an
authorization server:

  custos token issue   sign an access token with an issuer's private key
  custos token dpop    sign a DPoP proof for one request with the agent's key
  custos token assertion  sign a client assertion for a token endpoint
                          (custos serve's authorization_server, docs/authorization-server.md)

The issuer's key is any private JWK, for example one made by
"custos keygen --agent agent:local.issuer --out issuer"; the gateway trusts it
through tokens.issuers[].jwks_file (issuer/jwks.json).`,
		Args: argsExactly(0),
	}
	cmd.AddCommand(newTokenIssueCommand(), newTokenDPoPCommand(), newTokenAssertionCommand())
	return cmd
}

func newTokenIssueCommand() *cobra.Command {
	var keyFile, kid, iss, sub, aud, scope, jkt, dpopKey string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "issue --key FILE --iss ISSUER --sub AGENT --aud GATEWAY --scope \"CAP ...\"",
		Short: "Sign an ARSIA access token (a JWT) and print it",
		Long: `Sign an access token with the issuer's private JWK in --key and print it in
compact form. The token says that --sub (the agent that sends the requests)
may call the capabilities in --scope (space-separated, exact names: a scope
entry "demo.*" grants nothing) at --aud (the gateway's agent id), for --ttl.

With --dpop-key (the agent's key file, private or public) or --dpop-jkt (its
RFC 7638 thumbprint) the token is bound to that key (cnf.jkt): it is then
only accepted as "Authorization: DPoP <token>" with a DPoP proof signed by
that key (custos token dpop).`,
		Example: `  custos token issue --key issuer/key-1.private.jwk.json --iss https://as.example.com \
      --sub agent:acme.advisor --aud agent:local.custos --scope "demo.echo" --ttl 5m \
      --dpop-key keys/key-1.private.jwk.json`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case keyFile == "":
				return usageError{errors.New("--key is required (the issuer's private JWK)")}
			case iss == "":
				return usageError{errors.New("--iss is required (the issuer, as the gateway's tokens.issuers[].issuer)")}
			case !arsia.ValidAgentID(sub):
				return usageError{fmt.Errorf("--sub %q is not an ARSIA agent identifier (the sending agent)", sub)}
			case !arsia.ValidAgentID(aud):
				return usageError{fmt.Errorf("--aud %q is not an ARSIA agent identifier (the gateway's agent)", aud)}
			case ttl <= 0:
				return usageError{fmt.Errorf("--ttl %s: want a positive duration", ttl)}
			case jkt != "" && dpopKey != "":
				return usageError{errors.New("--dpop-jkt and --dpop-key are alternatives")}
			}
			caps := strings.Fields(scope)
			if len(caps) == 0 {
				return usageError{errors.New(`--scope is required: the capabilities granted, e.g. "demo.echo billing.invoice.create"`)}
			}
			for _, c := range caps {
				if strings.HasSuffix(c, "*") {
					return usageError{fmt.Errorf("--scope %q: token scopes are exact capability names; a wildcard grants nothing", c)}
				}
				if err := arsia.ValidateCapability(c); err != nil {
					return usageError{fmt.Errorf("--scope: %w", err)}
				}
			}
			signer, keyID, err := readSigningJWK(keyFile)
			if err != nil {
				return err
			}
			if kid != "" {
				keyID = kid
			}
			if keyID == "" {
				return usageError{fmt.Errorf("%s has no kid; give --kid (as in the issuer's JWKS)", keyFile)}
			}
			if dpopKey != "" {
				if jkt, err = jwkFileThumbprint(dpopKey); err != nil {
					return err
				}
			}
			tok, err := authz.IssueToken(signer, keyID, authz.TokenRequest{Issuer: iss, Subject: sub, Audience: aud,
				Scope: caps, TTL: ttl, JKT: jkt})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "key", "", "the issuer's private key as a JWK file")
	f.StringVar(&kid, "kid", "", "the key id to put in the token header (default: the key file's kid)")
	f.StringVar(&iss, "iss", "", "the issuer (iss), as listed in the gateway's tokens.issuers")
	f.StringVar(&sub, "sub", "", "the agent the token is issued to (sub): the envelopes' from")
	f.StringVar(&aud, "aud", "", "the gateway's agent id (aud): the envelopes' to")
	f.StringVar(&scope, "scope", "", "the capabilities granted, space-separated exact names")
	f.DurationVar(&ttl, "ttl", 5*time.Minute, "how long the token is valid")
	f.StringVar(&jkt, "dpop-jkt", "", "bind the token to the DPoP key with this RFC 7638 thumbprint")
	f.StringVar(&dpopKey, "dpop-key", "", "bind the token to this DPoP key (a JWK file, private or public)")
	return cmd
}

func newTokenDPoPCommand() *cobra.Command {
	var keyFile, method, rawURL, token string
	var tokenRequest bool
	cmd := &cobra.Command{
		Use:   "dpop --key FILE --url URL --token JWT",
		Short: "Sign a DPoP proof for one request and print it",
		Long: `Sign a DPoP proof (RFC 9449) with the agent's private JWK in --key, for one
request: --method and --url are the request's (the URL exactly as the gateway
is addressed, e.g. http://127.0.0.1:8080/v1/arsia/inbox; query and fragment
are left out), --token the access token sent with it ("-" reads it from
standard input). Send it as the "DPoP" header. Every proof has a new jti and
is accepted once, within 300 seconds of its creation: make one per request.

With --token-request instead of --token, the proof is for a token request
(RFC 9449 §5): --url is the token endpoint, and the token issued is bound
to the key.`,
		Example: `  custos token dpop --key keys/key-1.private.jwk.json --url http://127.0.0.1:8080/v1/arsia/inbox --token "$TOKEN"`,
		Args:    argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case keyFile == "":
				return usageError{errors.New("--key is required (the agent's private JWK)")}
			case rawURL == "":
				return usageError{errors.New("--url is required (the inbox URL the request is sent to)")}
			case token == "" && !tokenRequest:
				return usageError{errors.New(`--token is required (the access token, or "-" for standard input), or --token-request`)}
			case token != "" && tokenRequest:
				return usageError{errors.New("--token and --token-request are alternatives")}
			case method == "":
				return usageError{errors.New("--method is empty")}
			}
			if u, err := url.Parse(rawURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageError{fmt.Errorf("--url %q: want the absolute http:// or https:// URL of the request", rawURL)}
			}
			if token == "-" {
				data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), auth.MaxJWTBytes+2))
				if err != nil {
					return err
				}
				token = strings.TrimSpace(string(data))
			}
			signer, _, err := readSigningJWK(keyFile)
			if err != nil {
				return err
			}
			var proof string
			if tokenRequest {
				proof, err = auth.NewTokenRequestProof(signer, method, rawURL, time.Now())
			} else {
				proof, err = authz.NewProof(signer, method, rawURL, token, time.Now())
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), proof)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "key", "", "the agent's private key as a JWK file (Ed25519 or P-256)")
	f.StringVar(&method, "method", "POST", "the request's HTTP method")
	f.StringVar(&rawURL, "url", "", "the request's absolute URL")
	f.StringVar(&token, "token", "", `the access token sent with the proof ("-": standard input)`)
	f.BoolVar(&tokenRequest, "token-request", false, "a proof for a token request to --url (no access token yet)")
	return cmd
}

func newTokenAssertionCommand() *cobra.Command {
	var keyFile, aud, clientID, kid string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "assertion --key FILE --aud URL",
		Short: "Sign an RFC 7523 client assertion (private_key_jwt) and print it",
		Long: `Sign a client assertion with the agent's private JWK in --key: iss and sub
the agent (--client-id, by default the part of the key's kid before "#"), aud
--aud (the token endpoint URL, e.g. http://127.0.0.1:8080/oauth/token), a
fresh jti, valid for --ttl. Send it as client_assertion with
client_assertion_type urn:ietf:params:oauth:client-assertion-type:jwt-bearer.
Each assertion is accepted once: make one per request.`,
		Example: `  custos token assertion --key keys/key-1.private.jwk.json --aud http://127.0.0.1:8080/oauth/token`,
		Args:    argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case keyFile == "":
				return usageError{errors.New("--key is required (the agent's private JWK)")}
			case aud == "":
				return usageError{errors.New("--aud is required (the token endpoint URL)")}
			case ttl <= 0 || ttl > auth.DefaultAssertionMaxLifetime:
				return usageError{fmt.Errorf("--ttl %s: want a positive duration of at most %s", ttl, auth.DefaultAssertionMaxLifetime)}
			}
			if u, err := url.Parse(aud); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageError{fmt.Errorf("--aud %q: want the absolute http:// or https:// URL of the token endpoint", aud)}
			}
			signer, keyID, err := readSigningJWK(keyFile)
			if err != nil {
				return err
			}
			if kid != "" {
				keyID = kid
			}
			if keyID == "" {
				return usageError{fmt.Errorf("%s has no kid; give --kid (<agent id>#<label>, as in the agent's JWKS)", keyFile)}
			}
			if clientID == "" {
				clientID, _, _ = strings.Cut(keyID, "#")
			}
			if !arsia.ValidAgentID(clientID) {
				return usageError{fmt.Errorf("client id %q is not an ARSIA agent identifier; give --client-id", clientID)}
			}
			a, err := auth.NewClientAssertion(signer, keyID, auth.ClientAssertionOptions{ClientID: clientID, Audience: aud, Now: time.Now(), Lifetime: ttl})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), a)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "key", "", "the agent's private key as a JWK file (Ed25519 or P-256)")
	f.StringVar(&aud, "aud", "", "the token endpoint URL (aud)")
	f.StringVar(&clientID, "client-id", "", "the agent id (iss and sub; default: the kid before '#')")
	f.StringVar(&kid, "kid", "", "the key id in the header (default: the key file's kid)")
	f.DurationVar(&ttl, "ttl", auth.DefaultAssertionLifetime, "how long the assertion is valid (at most 5m)")
	return cmd
}

// readJWKFile reads one JWK from a file.
func readJWKFile(path string) (jose.JSONWebKey, error) {
	var jwk jose.JSONWebKey
	data, err := os.ReadFile(path)
	if err != nil {
		return jwk, err
	}
	if err := json.Unmarshal(data, &jwk); err != nil {
		return jwk, fmt.Errorf("%s: not a JWK: %w", path, err)
	}
	return jwk, nil
}

// readSigningJWK reads a private JWK and returns its signer and kid.
func readSigningJWK(path string) (crypto.Signer, string, error) {
	jwk, err := readJWKFile(path)
	if err != nil {
		return nil, "", err
	}
	if jwk.IsPublic() {
		return nil, "", fmt.Errorf("%s: holds a public key; signing needs the private key", path)
	}
	signer, ok := jwk.Key.(crypto.Signer)
	if !ok {
		return nil, "", fmt.Errorf("%s: not a signing key", path)
	}
	return signer, jwk.KeyID, nil
}

// jwkFileThumbprint is the RFC 7638 thumbprint of the public half of the
// JWK in path.
func jwkFileThumbprint(path string) (string, error) {
	jwk, err := readJWKFile(path)
	if err != nil {
		return "", err
	}
	t, err := authz.KeyThumbprint(jwk.Public().Key)
	if err != nil {
		return "", fmt.Errorf("%s: %w (DPoP keys are Ed25519 or P-256)", path, err)
	}
	return t, nil
}
