package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/internal/routes"
)

// reviewerSurfaces are the HTTP endpoints reviewers use: the approvals API
// (bearer tokens and browser sessions) and the web inbox with its sign-in.
type reviewerSurfaces struct {
	approvals http.Handler
	ui        http.Handler
	// auth authenticates reviewers for other endpoints (the review
	// queue): their API tokens, the login token, and browser sessions
	// with the same CSRF and Origin checks.
	auth httpapi.Authenticator
	// policy is the roles and separation-of-duties check of every
	// decision, for bindings outside the approvals API (AG-UI).
	policy *httpapi.Policy
	// decider is the approvals API's decision path (policy, authority,
	// the decision log) for the notification channels.
	decider *httpapi.Decider
	// tokens, passwords, sessions and policy change on a configuration
	// reload (server.reload); adminToken stays for the process's life.
	tokens     *httpapi.Tokens
	passwords  *httpapi.Passwords
	sessions   *httpapi.Sessions
	adminToken string
}

// mount registers the reviewer endpoints on exact paths, so that they take
// precedence over the gateway's handler mounted at "/".
func (r *reviewerSurfaces) mount(mux *routes.Mux) {
	mux.Handle("/approvals/", r.approvals)
	mux.Handle("GET /{$}", r.ui)
	mux.Handle("/ui/", r.ui)
	mux.Handle("/login", r.ui)
	mux.Handle("/logout", r.ui)
}

// adminRole is the role of the per-process administrator when the
// configuration defines roles.
const adminRole = "custos.admin"

// newReviewerSurfaces builds the reviewer endpoints and returns the
// per-process admin token it printed for the first reviewer: an API token
// and the login token of the web inbox, valid until the process stops.
func newReviewerSurfaces(cfg config.Config, auth *aais.Authority, st aais.Store, logger *slog.Logger, metrics prometheus.Registerer) (*reviewerSurfaces, string, error) {
	token, err := randomToken()
	if err != nil {
		return nil, "", err
	}
	tokens, pws, policy, err := reviewerCredentials(cfg, token)
	if err != nil {
		return nil, "", err
	}
	// The browser origins allowed to change anything: the public URL's and
	// the configured ones. The Host header alone is trusted only for
	// loopback addresses (httpapi's origin check).
	var origins []string
	secure := false
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Host != "" {
		origins = append(origins, u.Scheme+"://"+u.Host)
		secure = u.Scheme == "https"
	}
	origins = append(origins, cfg.AllowedOrigins...)
	// custos approvals on this store must not decide around the policy.
	if err := writeGatewayMarker(context.Background(), cfg); err != nil {
		return nil, "", err
	}
	sessions := httpapi.NewSessions(httpapi.SessionOptions{Secure: secure})
	ao := httpapi.ApprovalsOptions{Authority: auth, Store: st, Auth: tokens,
		Sessions: sessions, Policy: policy, AllowedOrigins: origins, Logger: logger, Metrics: metrics,
		OnDecision: func(ctx context.Context, d httpapi.DecisionRecord) {
			outcome := "partial" // a vote towards a quorum; the request is pending
			if r := d.Receipt.Resolution; r != nil {
				outcome = string(r.Outcome)
			}
			logger.InfoContext(ctx, "approval decided", "request", d.Decision.RequestID, "decision", d.Decision.Decision,
				"scope", d.Decision.Scope, "outcome", outcome, "actor", d.Actor.ID,
				"authenticated_by", d.Actor.AuthenticatedBy, "profile", d.Profile, "justification", d.Justification, "response", d.Response)
		}}
	approvals, err := httpapi.NewApprovals(ao)
	if err != nil {
		return nil, "", err
	}
	decider, err := httpapi.NewDecider(ao)
	if err != nil {
		return nil, "", err
	}
	ui, err := httpapi.NewReviewerUI(httpapi.UIOptions{Sessions: sessions, Tokens: tokens, Passwords: pws, Policy: policy,
		AllowedOrigins: origins, Logger: logger})
	if err != nil {
		return nil, "", err
	}
	reviewerAuth := httpapi.SessionAuth{Bearer: tokens, Sessions: sessions, AllowedOrigins: origins}
	return &reviewerSurfaces{approvals: approvals, ui: ui, auth: reviewerAuth, policy: policy, decider: decider,
		tokens: tokens, passwords: pws, sessions: sessions, adminToken: token}, token, nil
}

// reviewerCredentials builds the reviewers' API tokens (with the
// administrator's token), their passwords and the roles policy cfg
// describes.
func reviewerCredentials(cfg config.Config, token string) (*httpapi.Tokens, *httpapi.Passwords, *httpapi.Policy, error) {
	admin := aais.Actor{ID: config.AdminReviewer, Type: aais.ActorHuman, DisplayName: "Gateway administrator"}
	reviewers := map[string]aais.Actor{httpapi.TokenHash(token): admin}
	var passwords []httpapi.PasswordEntry
	policy := &httpapi.Policy{Roles: map[string]httpapi.Role{}, Grants: map[string][]string{},
		SeparationOfDuties: cfg.SeparationOfDuties, JustificationRequired: cfg.JustificationRequired}
	for name, r := range cfg.Roles {
		policy.Roles[name] = httpapi.Role{All: r.All, Capabilities: r.Capabilities, Profiles: r.Profiles}
	}
	if len(policy.Roles) > 0 {
		policy.Roles[adminRole] = httpapi.Role{All: true}
		policy.Grants[admin.ID] = []string{adminRole}
	}
	for _, r := range cfg.Reviewers {
		a := aais.Actor{ID: r.ID, Type: aais.ActorHuman, DisplayName: r.DisplayName}
		if r.TokenSHA256 != "" {
			reviewers[r.TokenSHA256] = a
		}
		if r.PasswordHash != "" {
			passwords = append(passwords, httpapi.PasswordEntry{Actor: a, Hash: r.PasswordHash})
		}
		policy.Grants[r.ID] = r.Roles
	}
	tokens, err := httpapi.NewTokens(reviewers)
	if err != nil {
		return nil, nil, nil, err
	}
	pws, err := httpapi.NewPasswords(passwords)
	if err != nil {
		return nil, nil, nil, err
	}
	return tokens, pws, policy, nil
}

func randomToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// newServePasswordCommand is "custos serve password": it prints the
// password_hash of a reviewer's password for the configuration.
func newServePasswordCommand() *cobra.Command {
	var generate bool
	cmd := &cobra.Command{
		Use:   "password",
		Short: "Print the password_hash of a reviewer's password for the configuration",
		Long: `Read a password from the first line of standard input (or, with --generate,
make a random one and print it) and print its argon2id hash, the
password_hash to put in the reviewers section of the configuration. The
gateway keeps only the hash; reviewers sign in to the web inbox with their
id and the password.

  read -rs PW && printf '%s\n' "$PW" | custos serve password`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var pw string
			if generate {
				var b [15]byte
				if _, err := rand.Read(b[:]); err != nil {
					return err
				}
				pw = hex.EncodeToString(b[:])
			} else {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && line == "" {
					return usageError{errors.New("no password on standard input (or use --generate)")}
				}
				pw = strings.TrimRight(line, "\r\n")
				if len(pw) < 8 {
					return usageError{errors.New("the password is shorter than 8 characters")}
				}
			}
			h, err := httpapi.HashPassword(pw)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if generate {
				fmt.Fprintf(out, "password:       %s\n", pw)
			}
			fmt.Fprintf(out, "password_hash:  %q\n", h)
			return nil
		},
	}
	cmd.Flags().BoolVar(&generate, "generate", false, "generate a random password and print it with its hash")
	return cmd
}
