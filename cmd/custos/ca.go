package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/internal/limits"
)

// custos ca is the certificate authority's operator tool: it talks to a
// running custos serve with certificate_authority enabled, over its API,
// as the reviewer its token names (never opening the gateway's files).

type caClientConfig struct{ server, token string }

func (c *caClientConfig) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.server, "server", "", "the custos serve URL (default $CUSTOS_SERVER)")
	cmd.Flags().StringVar(&c.token, "token", "", "an operator's API token (default $CUSTOS_TOKEN)")
}

// call sends one request and prints the JSON answer; a problem answer is
// an error naming its status and detail.
func (c *caClientConfig) call(ctx context.Context, out io.Writer, method, path string, body any, auth bool) error {
	if c.server == "" {
		c.server = os.Getenv("CUSTOS_SERVER")
	}
	if c.token == "" {
		c.token = os.Getenv("CUSTOS_TOKEN")
	}
	if c.server == "" {
		return usageError{errors.New("ca: name the server with --server or $CUSTOS_SERVER")}
	}
	u, err := url.Parse(strings.TrimRight(c.server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Errorf("ca: --server %q is not an http:// or https:// URL", c.server)}
	}
	if auth && c.token == "" {
		return usageError{errors.New("ca: give an operator's API token with --token or $CUSTOS_TOKEN")}
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String()+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limits.FileBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var p struct {
			Detail string `json:"detail"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(b, &p)
		if p.Reason != "" {
			return fmt.Errorf("ca: %d %s (%s)", resp.StatusCode, p.Detail, p.Reason)
		}
		return fmt.Errorf("ca: %d %s", resp.StatusCode, p.Detail)
	}
	_, err = out.Write(b)
	return err
}

func newCACommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Operate the certificate authority of a running custos serve (L2 agent certificates)",
		Long: `Issue, list and revoke L2 agent certificates with the issuing CA of a
running custos serve (certificate_authority enabled; docs/certificate-authority.md),
as the operator its API token names (--token or $CUSTOS_TOKEN; the
administrator token custos serve prints by default). The server is --server
or $CUSTOS_SERVER. Answers are printed as JSON; a refusal exits 1 with the
server's reason. L3 (qualified) certificates are never issued.`,
	}
	cmd.AddCommand(newCAIssueCommand(), newCAListCommand(), newCARevokeCommand(), newCARootCommand())
	return cmd
}

func newCAIssueCommand() *cobra.Command {
	var c caClientConfig
	var agent, jwksFile, kid string
	var validity time.Duration
	cmd := &cobra.Command{
		Use:   "issue --agent ID --jwks FILE [--kid KID]",
		Short: "Certify an agent's signing key; prints the certificate and its chain",
		Long: `Ask the gateway's CA to certify the agent's Ed25519 signing key, taken from
a JWKS file (the jwks.json custos keygen writes; --kid picks the key when
there are several). The answer's certificate_chain goes in the agent's
identity record (/.well-known/arsia/identity).`,
		Example: `  custos ca issue --agent agent:acme.advisor --jwks keys/jwks.json --server http://127.0.0.1:8080`,
		Args:    argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !arsia.ValidAgentID(agent) {
				return usageError{fmt.Errorf("ca issue: --agent %q is not an ARSIA agent id", agent)}
			}
			if jwksFile == "" {
				return usageError{errors.New("ca issue: --jwks is required")}
			}
			key, err := pickSigningKey(jwksFile, agent, kid)
			if err != nil {
				return err
			}
			if validity < 0 || validity%time.Second != 0 {
				return usageError{errors.New("ca issue: --validity must be a positive whole number of seconds")}
			}
			return c.call(cmd.Context(), cmd.OutOrStdout(), "POST", httpapi.CACertificatesPath,
				httpapi.IssueRequest{AgentID: agent, PublicKey: key, ValiditySeconds: int64(validity / time.Second)}, true)
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVar(&agent, "agent", "", "the agent id the certificate names")
	cmd.Flags().StringVar(&jwksFile, "jwks", "", "the agent's public JWKS file")
	cmd.Flags().StringVar(&kid, "kid", "", "the key to certify (default: the JWKS's only signing key)")
	cmd.Flags().DurationVar(&validity, "validity", 0, "certificate lifetime (default: the CA's validity)")
	return cmd
}

// pickSigningKey reads the agent's Ed25519 signing key from a JWKS file:
// the one with kid, or the only signing key of the agent.
func pickSigningKey(path, agent, kid string) (arsia.JWK, error) {
	b, err := readCapped(path, limits.FileBytes)
	if err != nil {
		return arsia.JWK{}, err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return arsia.JWK{}, fmt.Errorf("ca issue: %s is not a JWKS: %w", path, err)
	}
	var found []jose.JSONWebKey
	for _, k := range set.Keys {
		if (kid == "" && strings.HasPrefix(k.KeyID, agent+"#") && k.Use != "enc") || (kid != "" && k.KeyID == kid) {
			found = append(found, k)
		}
	}
	switch {
	case len(found) == 0:
		return arsia.JWK{}, fmt.Errorf("ca issue: %s holds no signing key of %s%s", path, agent, map[bool]string{true: " with kid " + kid}[kid != ""])
	case len(found) > 1:
		return arsia.JWK{}, usageError{fmt.Errorf("ca issue: %s holds %d signing keys of %s: pick one with --kid", path, len(found), agent)}
	}
	k := found[0]
	if !k.IsPublic() {
		k = k.Public() // a private JWKS entry: certify its public half
	}
	return arsia.NewSigningJWK(k.KeyID, k.Key)
}

func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, err
}

func newCAListCommand() *cobra.Command {
	var c caClientConfig
	var agent, before string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--agent ID] [--limit N] [--before SERIAL]",
		Short: "List the issued certificates, newest first",
		Args:  argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if agent != "" {
				q.Set("agent_id", agent)
			}
			if before != "" {
				q.Set("before", before)
			}
			if limit != 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			path := httpapi.CACertificatesPath
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			return c.call(cmd.Context(), cmd.OutOrStdout(), "GET", path, nil, true)
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's certificates")
	cmd.Flags().StringVar(&before, "before", "", "the page after this serial (the previous answer's next)")
	cmd.Flags().IntVar(&limit, "limit", 0, "certificates per page (1..500; default 50)")
	return cmd
}

func newCARevokeCommand() *cobra.Command {
	var c caClientConfig
	var reason string
	cmd := &cobra.Command{
		Use:     "revoke SERIAL --reason TEXT",
		Short:   "Revoke an issued certificate; the gateway refuses the agent's next envelope under it",
		Example: `  custos ca revoke 5f0c2a… --reason "key compromise"`,
		Args:    argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageError{errors.New("ca revoke: --reason is required")}
			}
			return c.call(cmd.Context(), cmd.OutOrStdout(), "POST", httpapi.CACertificatesPath+"/"+url.PathEscape(args[0])+"/revoke",
				map[string]string{"reason": reason}, true)
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded and audited)")
	return cmd
}

func newCARootCommand() *cobra.Command {
	var c caClientConfig
	cmd := &cobra.Command{
		Use:   "root",
		Short: "Print the CA's root certificate (PEM), for other receivers to anchor",
		Args:  argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.call(cmd.Context(), cmd.OutOrStdout(), "GET", httpapi.CARootPath, nil, false)
		},
	}
	c.flags(cmd)
	return cmd
}
