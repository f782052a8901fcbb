package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/agui"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/internal/flock"
	"github.com/custos-runtime/custos/internal/telemetry"
	"github.com/custos-runtime/custos/store"
	"github.com/custos-runtime/custos/store/pgratelimit"
)

func newServeCommand() *cobra.Command {
	var configFile string
	flags := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the governance gateway",
		Long: `Run the gateway: it receives signed ARSIA requests at /v1/arsia/inbox, verifies,
validates and authorizes them, asks a human when the compliance profile says
so, runs the call through the configured handler, audits every step and
answers with a signed reply.

Settings come from --config FILE (YAML; see custos.example.yaml), then the
CUSTOS_* environment variables, then the flags. On first run the data
directory is created with the gateway's own Ed25519 key; later runs reuse it.

The data directory is --data DIR, else $CUSTOS_DATA, else data: in the
configuration, else ./custos-data; custos approvals and custos audit find
it by the same rule (--data, $CUSTOS_DATA, ./custos-data).`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A flag's value is checked on its own first: a wrong one is
			// the command line's mistake (exit 2), whatever the
			// configuration file says.
			for key, v := range flags {
				if !cmd.Flags().Changed(key) {
					continue
				}
				one := config.Default()
				if err := one.Set(key, *v); err != nil {
					return usageError{err}
				}
				if err := one.Check(); err != nil {
					return usageError{fmt.Errorf("--%s: %w", key, err)}
				}
				if key == "listen" {
					if _, err := net.ResolveTCPAddr("tcp", *v); err != nil {
						return usageError{fmt.Errorf("--listen: %w", err)}
					}
				}
				if key == "store" {
					if _, err := store.Parse(*v); err != nil {
						return usageError{fmt.Errorf("--store: %w", err)}
					}
				}
			}
			cfg := config.Default()
			if configFile == "" {
				configFile = os.Getenv("CUSTOS_CONFIG")
			}
			if configFile != "" {
				if err := cfg.LoadFile(configFile); err != nil {
					return err
				}
			}
			if err := cfg.ApplyEnv(os.LookupEnv); err != nil {
				return err
			}
			for key, v := range flags {
				if cmd.Flags().Changed(key) {
					if err := cfg.Set(key, *v); err != nil {
						return usageError{err}
					}
				}
			}
			if err := cfg.Check(); err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "the YAML configuration file (default $CUSTOS_CONFIG)")
	cmd.AddCommand(&cobra.Command{
		Use:   "token",
		Short: "Print a new reviewer API token and the token_sha256 line for the configuration",
		Long: `Print a new random API token (give it to the reviewer; it is shown once) and
the SHA-256 to put in the reviewers section of the configuration, which is
all the gateway keeps.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := randomToken()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token:         %s\ntoken_sha256:  %s\n", t, httpapi.TokenHash(t))
			return nil
		},
	})
	cmd.AddCommand(newServePasswordCommand())
	for _, f := range []struct{ name, usage string }{
		{"listen", "the address to listen on (default 127.0.0.1:8080)"},
		{"data", "the data directory (default $CUSTOS_DATA, else data: in --config, else ./custos-data)"},
		{"store", "where the state is kept (default DATA/custos.db, one SQLite file); postgres://… keeps all of it there, shared by several replicas"},
	} {
		flags[f.name] = cmd.Flags().String(f.name, "", f.usage)
	}
	return cmd
}

// serve runs the gateway described by cfg until ctx ends.
func serve(ctx context.Context, cfg config.Config, out, errOut io.Writer) error {
	var level slog.Handler = slog.NewTextHandler(errOut, nil)
	if cfg.LogFormat == "json" {
		level = slog.NewJSONHandler(errOut, nil)
	}
	logger := slog.New(level)
	// The address first: a port in use fails here, before the data
	// directory, the key and the state are created.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("%w (is another process on it? choose another address with --listen or $CUSTOS_LISTEN)", err)
	}
	defer ln.Close()
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return err
	}
	// One gateway per data directory: its exchanges, claims and recovery
	// assume no other process runs them.
	lock, err := flock.Hold(filepath.Join(cfg.Data, "gateway.lock"))
	if errors.Is(err, flock.ErrLocked) {
		return fmt.Errorf("another custos serve is running on %s (it holds gateway.lock); stop it or use another --data", cfg.Data)
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	signer, pub, kid, created, err := gatewayKey(cfg.Data, cfg.Agent)
	if err != nil {
		return err
	}

	loc, err := store.Parse(cfg.Store)
	if err != nil {
		return err
	}
	so := &store.StateOptions{DataDir: cfg.Data,
		RateLimit: pgratelimit.Rate{PerSecond: cfg.RateLimit.PerSecond, Burst: cfg.RateLimit.Burst}}
	if loc.Kind == store.KindPostgres {
		// Replicas recognise their own claims by name; a gateway alone on
		// its state recovers every interrupted claim.
		so.Instance = cfg.Instance
	}
	if cfg.AuditLog != "" {
		if so.Audit, err = store.Parse(cfg.AuditLog); err != nil {
			return fmt.Errorf("audit_log: %w", err)
		}
	}
	state, err := store.Open(ctx, loc, so)
	if err != nil {
		return err
	}
	defer state.Close()
	st := state.Approvals
	auth, err := aais.NewAuthority(st, &aais.AuthorityOptions{Stream: cfg.Agent})
	if err != nil {
		return err
	}
	auditLog := audit.New(state.Audit, &audit.Options{Retention: audit.ProfileRetention(nil, 0)})
	defer auditLog.Close()
	xs := state.Exchanges
	instance, lease := "", time.Duration(0)
	if state.Shared {
		instance, lease = state.Instance, gateway.DefaultClaimLease
	}

	keys, trust, err := newTrust(cfg.Trust)
	if err != nil {
		return err
	}
	authorizer, err := newAuthorizer(cfg, state.Replay, logger)
	if err != nil {
		return err
	}
	handlers := map[string]handler.Handler{}
	defer func() {
		// MCP handlers keep a server process or session open.
		for _, h := range handlers {
			if c, ok := h.(io.Closer); ok {
				_ = c.Close()
			}
		}
	}()
	for name, h := range cfg.Handlers {
		if handlers[name], err = newHandler(h); err != nil {
			return fmt.Errorf("handlers.%s: %w", name, err)
		}
	}
	grants, callbacks := map[string][]string{}, map[string]string{}
	for _, s := range cfg.Senders {
		grants[s.Agent] = append(grants[s.Agent], s.Capabilities...)
		if s.CallbackURL != "" {
			callbacks[s.Agent] = s.CallbackURL
		}
	}
	// Traces: off unless the configuration or the OTEL_* variables ask.
	tc := cfg.Tracing.Telemetry()
	tc.Version, _, _ = buildVersion()
	tracing, err := telemetry.Setup(ctx, tc, os.Getenv)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(sctx); err != nil {
			logger.Warn("flushing traces", "err", err)
		}
	}()
	var tracer trace.TracerProvider
	if tracing.Provider != nil {
		tracer = tracing.Provider
		logger.Info("tracing", "exporter", "otlp", "protocol", tracing.Protocol, "endpoint", tracing.Endpoint)
	}
	gw, err := gateway.New(gateway.Options{Tracer: tracer,
		Agent: cfg.Agent, Signer: signer, KID: kid, Keys: keys, Trust: trust, Authorizer: authorizer, Grants: grants, Handlers: handlers,
		Authority: auth, Exchanges: xs, Audit: auditLog, ApprovalTTL: cfg.Oversight.TTL,
		AllowSession: cfg.Oversight.AllowSession, ReviewWithin: cfg.Oversight.ReviewWithin, Callbacks: callbacks, Logger: logger,
		RateLimit: gateway.RateLimit{PerSecond: cfg.RateLimit.PerSecond, Burst: cfg.RateLimit.Burst}, Limiter: state.Limiter, Units: state,
		ClaimLease: lease, CheckpointEvery: checkpointEvery,
		StatusURL: func(id string) string { return cfg.PublicURL + "/v1/arsia/exchanges/" + id },
	})
	if err != nil {
		return err
	}

	// What the previous process recorded is vouched for before anything
	// new (after a crash, its last records have no checkpoint yet).
	if err := gw.Checkpoint(ctx); err != nil {
		return fmt.Errorf("signing an audit checkpoint: %w", err)
	}
	// Whatever this gateway (or, on a shared store, this replica) left
	// running when it stopped has an unknown outcome and is not run again.
	if n, err := gw.Recover(ctx, instance); err != nil {
		return err
	} else if n > 0 {
		logger.Warn("ended interrupted exchanges with an unknown result", "count", n)
	}

	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
	if err != nil {
		return err
	}
	var caps []string
	for name := range handlers {
		caps = append(caps, name)
	}
	ver, _, _ := buildVersion()
	md, err := arsia.NewAgentMetadata(arsia.AgentMetadata{AgentID: cfg.Agent, Name: "Custos gateway", Version: ver,
		Inbox: cfg.PublicURL + "/v1/arsia/inbox", JWKS: cfg.PublicURL + "/.well-known/arsia/jwks.json",
		CapabilitiesSupported: caps, MaxMessageBytes: cfg.MaxBody})
	if err != nil {
		return fmt.Errorf("discovery document: %w", err)
	}
	mdJSON, err := json.Marshal(md)
	if err != nil {
		return err
	}
	limits, err := newTransportLimits(cfg, logger)
	if err != nil {
		return err
	}
	inbox, err := httpapi.NewInbox(httpapi.InboxOptions{Gateway: gw, MaxBody: cfg.MaxBody, Metadata: mdJSON, JWKS: jwks, PublicURL: cfg.PublicURL,
		Ready: func(ctx context.Context) error { _, err := st.EventsAfter(ctx, aais.MaxSequence, 1); return err }, Limits: limits})
	if err != nil {
		return err
	}
	reviewerUI, token, err := newReviewerSurfaces(cfg, auth, st, logger, gw.Metrics())
	if err != nil {
		return err
	}
	mux := newServeMux(ctx)
	reviewerUI.mount(mux)
	// Harnesses outside the gateway (custos mcp-proxy with a remote
	// authority) submit approval requests here and wait for the outcome.
	submit, err := httpapi.NewSubmit(httpapi.SubmitOptions{Authority: auth, Auth: reviewerUI.auth, Policy: reviewerUI.policy, Logger: logger})
	if err != nil {
		return err
	}
	mux.Handle("/approvals/requests", submit)
	mux.Handle("/approvals/requests/", submit)
	reviews, err := httpapi.NewReviews(httpapi.ReviewsOptions{Gateway: gw, Auth: reviewerUI.auth, Policy: reviewerUI.policy})
	if err != nil {
		return err
	}
	mux.Handle("/v1/reviews", reviews)
	mux.Handle("/v1/reviews/", reviews)
	// AG-UI front ends resume an interrupted run with a decision; the same
	// reviewers, credentials and policy as the approvals API.
	resume, err := agui.NewHandler(agui.HandlerOptions{Authority: auth, Auth: reviewerUI.auth, Logger: logger,
		Authorize: func(_ context.Context, a aais.Actor, r *aais.Request, d *aais.Decision) error {
			return reviewerUI.policy.Check(a, r, d)
		}})
	if err != nil {
		return err
	}
	mux.Handle(agui.ResumePath, resume)
	// Notification channels: announcements out, signed decisions back.
	notifier, err := newNotifications(cfg, auth, reviewerUI, mux, logger)
	if err != nil {
		return err
	}
	mux.Handle("/", inbox)

	// The transport limits come first: a refused caller costs no body
	// read, no signature check and no durable write.
	ln = limits.Listener(ln)
	srv := &http.Server{Handler: limits.Handler(mux), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: cfg.Limits.HeaderBytes, ErrorLog: slog.NewLogLogger(level, slog.LevelWarn)}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- gw.Run(runCtx) }()
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ln) }()
	notifyDone := make(chan struct{})
	go func() {
		defer close(notifyDone)
		if notifier != nil {
			_ = notifier.Run(runCtx) // it logs and retries its failures itself
		}
	}()

	addr := "http://" + ln.Addr().String()
	keyNote := "reused"
	if created {
		keyNote = "created"
	}
	self, installed := selfCommand()
	where := "--store " + loc.String()
	if loc.Kind == store.KindSQLite && loc.Path == filepath.Join(cfg.Data, store.StateFile) {
		where = "--data " + cfg.Data
	}
	fmt.Fprintf(out, "custos serve: listening on %s\n", addr)
	fmt.Fprintf(out, "  agent           %s (key %s, %s)\n", cfg.Agent, kid, keyNote)
	fmt.Fprintf(out, "  data            %s\n", cfg.Data)
	fmt.Fprintf(out, "  agents send to  %s/v1/arsia/inbox (signed ARSIA requests, POST; not a web page)\n", addr)
	fmt.Fprintf(out, "  reviewers open  %s/ in a browser (the web inbox) and sign in with the login token %s (valid until this process stops)\n", addr, token)
	fmt.Fprintf(out, "                  API: \"Authorization: Bearer %s\" on %s/approvals/ and %s/v1/reviews\n", token, addr, addr)
	fmt.Fprintf(out, "                  CLI: %s approvals %s list\n", self, where)
	if !installed {
		fmt.Fprintf(out, "                  (go install ./cmd/custos puts custos on your PATH)\n")
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-srvDone:
	}
	stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	<-runDone
	<-notifyDone
	// The last records are vouched for too (custos audit verify).
	if err := gw.Checkpoint(shutdownCtx); err != nil {
		logger.Error("signing the audit checkpoint at shutdown", "err", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// checkpointEvery is how often custos serve signs a checkpoint of the
// audit chain (and once more when it stops).
const checkpointEvery = 10 * time.Minute

// newTransportLimits builds the limits of cfg.Limits. A body of unknown
// length reserves the most any endpoint reads: max_body, or the 1 MiB a
// submitted approval request may be, within the caps on bytes in flight.
func newTransportLimits(cfg config.Config, logger *slog.Logger) (*httpapi.Limits, error) {
	l := cfg.Limits
	exempt, err := l.PerAddress.ExemptPrefixes()
	if err != nil {
		return nil, fmt.Errorf("limits.per_address.exempt: %w", err)
	}
	unknown := max(cfg.MaxBody, 1<<20)
	for _, c := range []int64{l.BodyBytesInFlight, l.PerAddress.BodyBytesInFlight} {
		if c > 0 {
			unknown = min(unknown, c)
		}
	}
	return httpapi.NewLimits(httpapi.LimitsOptions{PerSecond: l.PerAddress.PerSecond, Burst: l.PerAddress.Burst,
		Tracked: l.PerAddress.Tracked, Exempt: exempt, Connections: l.Connections, ConnectionsPerAddress: l.PerAddress.Connections,
		BodyBytes: l.BodyBytesInFlight, BodyBytesPerAddress: l.PerAddress.BodyBytesInFlight, BodyWait: l.BodyWait, MaxBody: unknown, BodyTimeout: l.BodyTimeout, Logger: logger})
}

// gatewayKey loads the gateway's signing key from DATA/gateway.key.jwk.json,
// creating an Ed25519 key (mode 0600) on first run. A key file readable by
// others is refused.
func gatewayKey(dir, agent string) (sig.Signer, jose.JSONWebKey, string, bool, error) {
	path := filepath.Join(dir, "gateway.key.jwk.json")
	kid := agent + "#gateway-1"
	data, err := os.ReadFile(path)
	created := false
	switch {
	case errors.Is(err, os.ErrNotExist):
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, jose.JSONWebKey{}, "", false, err
		}
		if err := writePrivateJWK(path, jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: "EdDSA", Use: "sig"}, false); err != nil {
			return nil, jose.JSONWebKey{}, "", false, err
		}
		if data, err = os.ReadFile(path); err != nil {
			return nil, jose.JSONWebKey{}, "", false, err
		}
		created = true
	case err != nil:
		return nil, jose.JSONWebKey{}, "", false, err
	default:
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			return nil, jose.JSONWebKey{}, "", false, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
		}
	}
	var priv jose.JSONWebKey
	if err := json.Unmarshal(data, &priv); err != nil || priv.IsPublic() {
		return nil, jose.JSONWebKey{}, "", false, fmt.Errorf("%s: not a private JWK", path)
	}
	if priv.KeyID != kid {
		return nil, jose.JSONWebKey{}, "", false, fmt.Errorf("%s is the key of %s, not of %s", path, priv.KeyID, kid)
	}
	signer, err := sig.NewSignerFromJWK(&priv)
	if err != nil {
		return nil, jose.JSONWebKey{}, "", false, err
	}
	return signer, priv.Public(), kid, created, nil
}

func newHandler(h config.Handler) (handler.Handler, error) {
	switch h.Type {
	case "echo":
		return handler.NewEcho(), nil
	case "http":
		return handler.NewHTTP(handler.HTTPConfig{URL: h.URL, Timeout: h.Timeout})
	case "exec":
		return handler.NewExec(handler.ExecConfig{Command: h.Command, Dir: h.Dir, Env: h.Env, Timeout: h.Timeout})
	case "mcp":
		// A stdio server is started on the first call, not here.
		m, err := handler.NewMCP(handler.MCPConfig{Command: h.Command, Dir: h.Dir, Env: h.Env, URL: h.URL,
			Tools: h.Tools, Timeout: h.Timeout})
		if err != nil {
			return nil, err
		}
		return m, nil
	case "a2a":
		a, err := handler.NewA2A(handler.A2AConfig{URL: h.URL, Timeout: h.Timeout})
		if err != nil {
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown handler type %q", h.Type)
}
