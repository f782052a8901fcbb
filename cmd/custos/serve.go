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
	"sort"
	"sync/atomic"
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
	"github.com/custos-runtime/custos/gateway/ca"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/handler"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/internal/flock"
	"github.com/custos-runtime/custos/internal/telemetry"
	"github.com/custos-runtime/custos/notify"
	"github.com/custos-runtime/custos/store"
	"github.com/custos-runtime/custos/store/pgratelimit"
)

func newServeCommand() *cobra.Command {
	var configFile string
	var checkConfig bool
	flags := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the governance gateway",
		Long: `Run the gateway: it receives signed ARSIA requests at /v1/arsia/inbox, verifies,
validates and authorizes them, asks a human when the compliance profile says
so, runs the call through the configured handler, audits every step and
answers with a signed reply.

Settings come from --config FILE (YAML; see custos.example.yaml), then the
CUSTOS_* environment variables (every setting has one: CUSTOS_ and its keys
in upper case, nested keys joined by __, as CUSTOS_TOKENS__MODE), then the
flags. --check-config checks them, prints the configuration as it takes
effect with secrets redacted, and exits. SIGHUP, or an edit of the
--config file, reloads trust, senders, handlers, reviewers and roles
without dropping connections or pending approvals (docs/configuration.md). On first run the data directory is
created with the gateway's own Ed25519 key; later runs reuse it.

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
			if configFile == "" {
				configFile = os.Getenv("CUSTOS_CONFIG")
			}
			set := map[string]string{}
			for key, v := range flags {
				if cmd.Flags().Changed(key) {
					set[key] = *v
				}
			}
			load := func() (config.Config, error) { return loadServeConfig(configFile, os.Environ(), set) }
			cfg, err := load()
			if err != nil {
				return err
			}
			if checkConfig {
				return printCheckedConfig(cfg, cmd.OutOrStdout())
			}
			return serveReloading(cmd.Context(), cfg, load, configFile, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&checkConfig, "check-config", false, "check the configuration, print it as it takes effect (secrets redacted) and exit: 0 when valid")
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

// loadServeConfig reads the configuration: the file (when not ""), then
// the CUSTOS_* variables of environ, then the flags set, and checks it.
func loadServeConfig(file string, environ []string, flags map[string]string) (config.Config, error) {
	cfg := config.Default()
	if file != "" {
		if err := cfg.LoadFile(file); err != nil {
			return cfg, err
		}
	}
	if err := cfg.ApplyEnviron(environ); err != nil {
		return cfg, err
	}
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if err := cfg.Set(key, flags[key]); err != nil {
			return cfg, usageError{err}
		}
	}
	if err := cfg.Check(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// printCheckedConfig checks what Check cannot without starting anything
// (the listen address, the store locations, the handlers, the transport
// limits, the notification channels' secrets) and prints cfg as it takes
// effect, secrets redacted.
func printCheckedConfig(cfg config.Config, out io.Writer) error {
	var errs []error
	if _, err := net.ResolveTCPAddr("tcp", cfg.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen: %w", err))
	}
	if _, err := store.Parse(cfg.Store); err != nil {
		errs = append(errs, fmt.Errorf("store: %w", err))
	}
	if cfg.AuditLog != "" {
		if _, err := store.Parse(cfg.AuditLog); err != nil {
			errs = append(errs, fmt.Errorf("audit_log: %w", err))
		}
	}
	names := make([]string, 0, len(cfg.Handlers))
	for name := range cfg.Handlers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		h, err := newHandler(cfg.Handlers[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("handlers.%s: %w", name, err))
			continue
		}
		if c, ok := h.(io.Closer); ok {
			_ = c.Close()
		}
	}
	if _, err := newTransportLimits(cfg, slog.New(slog.DiscardHandler)); err != nil {
		errs = append(errs, err)
	}
	if err := checkNotificationSecrets(cfg.Notifications); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", config.ErrConfig, errors.Join(errs...))
	}
	eff, err := cfg.Effective()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# custos serve: the configuration is valid; as it takes effect (secrets redacted):\n%s", eff)
	return nil
}

// server is one custos serve process: Open builds everything the
// configuration describes (the listener, the data directory's lock and
// key, the state, the gateway and its HTTP surfaces), Run serves until its
// context ends, and Close releases what Open took, in the reverse order.
type server struct {
	cfg    config.Config
	out    io.Writer
	logger *slog.Logger
	// logHandler also receives the HTTP server's own errors.
	logHandler slog.Handler

	ln net.Listener
	// derivedURL: the public URL was derived from the listen address
	// (with the port the listener chose).
	derivedURL bool
	key        gatewayKeyFile
	loc        store.Location
	state      *store.State
	auth       *aais.Authority
	gw         *gateway.Gateway
	handlers   map[string]handler.Handler
	// discovery is the document at /.well-known/arsia, rebuilt on reload.
	discovery atomic.Pointer[json.RawMessage]
	// headers are the handlers' headers as resolved when they were built
	// (a file: secret may have been rotated since).
	headers  map[string]http.Header
	reviewer *reviewerSurfaces
	// token is the per-process administrator's API and login token.
	token    string
	notifier *notify.Notifier
	// escalator reminds, escalates and ends approvals nobody decided (nil
	// without escalation policies).
	escalator *notify.Escalator
	auditLog  *audit.Log
	srv       *http.Server
	// reload serialises configuration reloads and counts them.
	reload *reloadState
	// encKey is the gateway's encryption key (serve_encryption.go).
	encKey *jose.JSONWebKey
	// ca is the issuing CA (nil unless certificate_authority is enabled).
	ca *ca.CA
	// stateHandler serves ARSIA-State when it is enabled (serve_state.go).
	stateHandler *handler.State
	// base is the configuration as loaded, before the onboarded agents
	// are merged into it (serve_onboarding.go); onboarded are those (nil
	// unless onboarding is enabled).
	base      config.Config
	onboarded *onboarded

	// closers release what Open took; Close runs them last first.
	closers []func()
}

// openServer builds the server cfg (checked) describes. On error it has
// released whatever it took.
func openServer(ctx context.Context, cfg config.Config, out, errOut io.Writer) (_ *server, err error) {
	s := &server{cfg: cfg, out: out}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.open(ctx, errOut); err != nil {
		return nil, err
	}
	return s, nil
}

// release adds f to what Close runs.
func (s *server) release(f func()) { s.closers = append(s.closers, f) }

func (s *server) open(ctx context.Context, errOut io.Writer) error {
	cfg := s.cfg
	s.logHandler = slog.NewTextHandler(errOut, nil)
	if cfg.LogFormat == "json" {
		s.logHandler = slog.NewJSONHandler(errOut, nil)
	}
	logger := slog.New(s.logHandler)
	s.logger = logger
	// The address first: a port in use fails here, before the data
	// directory, the key and the state are created.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("%w (is another process on it? choose another address with --listen or $CUSTOS_LISTEN)", err)
	}
	s.ln = ln
	s.release(func() { _ = ln.Close() })
	if s.cfg.PublicURL == "http://"+s.cfg.Listen {
		// Derived from the listen address, which may have named port 0:
		// senders and the discovery document need the port chosen.
		s.cfg.PublicURL, s.derivedURL = "http://"+ln.Addr().String(), true
		cfg = s.cfg
	}
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
	s.release(func() { _ = lock.Close() })
	if s.key, err = gatewayKey(cfg.Data, cfg.Agent); err != nil {
		return err
	}
	if s.encKey, err = gatewayEncryptionKey(cfg.Data, cfg.Agent); err != nil {
		return err
	}

	if s.loc, err = store.Parse(cfg.Store); err != nil {
		return err
	}
	so := &store.StateOptions{DataDir: cfg.Data, Logger: logger, StateStore: stateStoreOptions(cfg),
		RateLimit: pgratelimit.Rate{PerSecond: cfg.RateLimit.PerSecond, Burst: cfg.RateLimit.Burst}}
	if s.loc.Kind == store.KindPostgres {
		// Replicas recognise their own claims by name; a gateway alone on
		// its state recovers every interrupted claim.
		so.Instance = cfg.Instance
	}
	if cfg.AuditLog != "" {
		if so.Audit, err = store.Parse(cfg.AuditLog); err != nil {
			return fmt.Errorf("audit_log: %w", err)
		}
	}
	state, err := store.Open(ctx, s.loc, so)
	if err != nil {
		return err
	}
	s.state = state
	s.release(func() { _ = state.Close() })
	st := state.Approvals
	remember, err := cfg.Oversight.RememberPolicy(gateway.RequestProfile)
	if err != nil {
		return err
	}
	aopts := &aais.AuthorityOptions{Stream: cfg.Agent}
	if remember != nil {
		aopts.Remember = remember
	}
	if s.auth, err = aais.NewAuthority(st, aopts); err != nil {
		return err
	}
	head, err := openAuditHead(ctx, cfg.Data, state.Audit, logger) // audit_proof.go
	if err != nil {
		return err
	}
	auditLog := audit.New(state.Audit, &audit.Options{Retention: audit.ProfileRetention(nil, 0),
		CheckpointEvery: checkpointEvery, OnCheckpoint: head.Write})
	s.release(func() { _ = auditLog.Close() })
	s.auditLog = auditLog
	instance, lease := "", time.Duration(0)
	if state.Shared {
		instance, lease = state.Instance, gateway.DefaultClaimLease
	}

	if err := s.openCA(); err != nil { // serve_ca.go
		return err
	}
	if err := s.openOnboarding(); err != nil { // serve_onboarding.go
		return err
	}
	s.base = cfg
	cfg = s.withOnboarded(cfg)
	s.cfg = cfg
	keys, trust, err := newTrust(cfg.Trust, s.caAnchors())
	if err != nil {
		return err
	}
	authorizer, err := newAuthorizer(cfg, state.Replay, logger, s.ownTokenIssuer())
	if err != nil {
		return err
	}
	s.handlers = map[string]handler.Handler{}
	s.release(func() {
		// MCP handlers keep a server process or session open.
		for _, h := range s.handlers {
			if c, ok := h.(io.Closer); ok {
				_ = c.Close()
			}
		}
	})
	s.headers = map[string]http.Header{}
	for name, h := range cfg.Handlers {
		if s.handlers[name], err = newHandler(h); err != nil {
			return fmt.Errorf("handlers.%s: %w", name, err)
		}
		s.headers[name], _ = h.HeaderValues() // newHandler resolved them
	}
	if err := s.openState(); err != nil {
		return err
	}
	grants, callbacks, oversight := senderGrants(cfg.Senders)
	// Traces: off unless the configuration or the OTEL_* variables ask.
	tc := cfg.Tracing.Telemetry()
	tc.Version, _, _ = buildVersion()
	tracing, err := telemetry.Setup(ctx, tc, os.Getenv)
	if err != nil {
		return err
	}
	s.release(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(sctx); err != nil {
			logger.Warn("flushing traces", "err", err)
		}
	})
	var tracer trace.TracerProvider
	if tracing.Provider != nil {
		tracer = tracing.Provider
		logger.Info("tracing", "exporter", "otlp", "protocol", tracing.Protocol, "endpoint", tracing.Endpoint)
	}
	relayer, err := newRelayer(cfg) // serve_relay.go
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Options{Tracer: tracer, Quorums: quorumRules(cfg), Relay: relayer,
		Agent: cfg.Agent, Signer: s.key.signer, KID: s.key.kid, Keys: keys, Decryption: s.encKey, Algorithms: nilIfEmpty(cfg.Trust.Algorithms), Trust: trust, Authorizer: authorizer, Grants: grants, Oversight: oversight, Handlers: s.handlers,
		Authority: s.auth, Exchanges: state.Exchanges, Audit: auditLog, ApprovalTTL: cfg.Oversight.TTL,
		AllowSession: cfg.Oversight.AllowSession, Remember: remember, ReviewWithin: cfg.Oversight.ReviewWithin, Callbacks: callbacks, Logger: logger,
		RateLimit: gateway.RateLimit{PerSecond: cfg.RateLimit.PerSecond, Burst: cfg.RateLimit.Burst}, Limiter: state.Limiter, Units: state,
		ClaimLease: lease, CheckpointEvery: checkpointEvery,
		StatusURL: func(id string) string { return cfg.PublicURL + "/v1/arsia/exchanges/" + id },
	})
	if err != nil {
		return err
	}
	s.gw = gw
	if s.reload, err = newReloadState(gw.Metrics()); err != nil {
		return err
	}
	s.release(func() { closeHandlers(s.reload.retired) })

	// What the previous process recorded is vouched for before anything
	// new (after a crash, its last records have no checkpoint yet).
	cps := gateway.CheckpointSigner{Signer: s.key.signer, KID: s.key.kid}
	if _, _, err := auditLog.CheckpointEvent(ctx, cps, audit.EventStart); err != nil {
		return fmt.Errorf("signing an audit checkpoint: %w", err)
	}
	// Whatever this gateway (or, on a shared store, this replica) left
	// running when it stopped has an unknown outcome and is not run again.
	if n, err := gw.Recover(ctx, instance); err != nil {
		return err
	} else if n > 0 {
		logger.Warn("ended interrupted exchanges with an unknown result", "count", n)
	}
	return s.openHTTP(ctx)
}

// setDiscovery builds the discovery document from the configuration and
// the handlers in place now, their capabilities in a stable order; openHTTP
// and every reload call it, so senders see what the gateway serves.
func (s *server) setDiscovery() error {
	ver, _, _ := buildVersion()
	md, err := arsia.NewAgentMetadata(arsia.AgentMetadata{AgentID: s.cfg.Agent, Name: "Custos gateway", Version: ver,
		Inbox: s.cfg.PublicURL + "/v1/arsia/inbox", JWKS: s.cfg.PublicURL + "/.well-known/arsia/jwks.json",
		CapabilitiesSupported: s.capabilitiesSupported(), MaxMessageBytes: s.cfg.MaxBody})
	if err != nil {
		return fmt.Errorf("discovery document: %w", err)
	}
	b, err := json.Marshal(md)
	if err != nil {
		return err
	}
	doc := json.RawMessage(b)
	s.discovery.Store(&doc)
	return nil
}

// openHTTP builds the HTTP surfaces: the inbox and discovery, the
// reviewers' endpoints, the notification channels, and the server with
// the transport limits in front of them all.
func (s *server) openHTTP(ctx context.Context) error {
	cfg, logger, auth, gw := s.cfg, s.logger, s.auth, s.gw
	st := s.state.Approvals
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{s.key.public, s.encKey.Public()}})
	if err != nil {
		return err
	}
	if err := s.setDiscovery(); err != nil {
		return err
	}
	limits, err := newTransportLimits(cfg, logger)
	if err != nil {
		return err
	}
	inbox, err := httpapi.NewInbox(httpapi.InboxOptions{Gateway: gw, Logger: logger, MaxBody: cfg.MaxBody, Discovery: func() json.RawMessage { return *s.discovery.Load() }, JWKS: jwks, PublicURL: cfg.PublicURL,
		Ready: func(ctx context.Context) error { _, err := st.EventsAfter(ctx, aais.MaxSequence, 1); return err }, Limits: limits,
		Brokers: s.brokers()}) // serve_relay.go
	if err != nil {
		return err
	}
	reviewerUI, token, err := newReviewerSurfaces(cfg, auth, st, logger, gw.Metrics())
	if err != nil {
		return err
	}
	s.reviewer, s.token = reviewerUI, token
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
	if s.notifier, err = newNotifications(cfg, auth, reviewerUI, mux, logger); err != nil {
		return err
	}
	if s.escalator, err = newEscalator(cfg, auth, s.state, s.auditLog, s.notifier, logger); err != nil {
		return err
	}
	if err := s.mountCA(mux, reviewerUI.auth); err != nil { // serve_ca.go
		return err
	}
	as, err := s.mountAuthServer(mux) // serve_authserver.go
	if err != nil {
		return err
	}
	if err := s.mountOnboarding(mux, as); err != nil { // serve_onboarding.go
		return err
	}
	mux.Handle("/", inbox)

	// The transport limits come first: a refused caller costs no body
	// read, no signature check and no durable write.
	s.ln = limits.Listener(s.ln)
	s.srv = &http.Server{Handler: limits.Handler(mux), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: cfg.Limits.HeaderBytes, ErrorLog: slog.NewLogLogger(s.logHandler, slog.LevelWarn)}
	return nil
}

// senderGrants returns the capability patterns each configured sender
// may call, the callback URLs of those that have one, and the patterns
// whose every call waits for a human (oversight).
func senderGrants(senders []config.Sender) (grants map[string][]string, callbacks map[string]string, oversight map[string][]string) {
	grants, callbacks, oversight = map[string][]string{}, map[string]string{}, map[string][]string{}
	for _, s := range senders {
		grants[s.Agent] = append(grants[s.Agent], s.Capabilities...)
		if len(s.Oversight) > 0 {
			oversight[s.Agent] = append(oversight[s.Agent], s.Oversight...)
		}
		if s.CallbackURL != "" {
			callbacks[s.Agent] = s.CallbackURL
		}
	}
	return grants, callbacks, oversight
}

// nilIfEmpty is nil for an empty list: the gateway's default.
func nilIfEmpty(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	return l
}

// URL is the base URL the server listens on.
func (s *server) URL() string { return "http://" + s.ln.Addr().String() }

// printBanner tells the operator where agents and reviewers go.
func (s *server) printBanner() {
	cfg, out, addr, token := s.cfg, s.out, s.URL(), s.token
	keyNote := "reused"
	if s.key.created {
		keyNote = "created"
	}
	self, installed := selfCommand()
	where := "--store " + s.loc.String()
	if s.loc.Kind == store.KindSQLite && s.loc.Path == filepath.Join(cfg.Data, store.StateFile) {
		where = "--data " + cfg.Data
	}
	fmt.Fprintf(out, "custos serve: listening on %s\n", addr)
	fmt.Fprintf(out, "  agent           %s (key %s, %s)\n", cfg.Agent, s.key.kid, keyNote)
	fmt.Fprintf(out, "  data            %s\n", cfg.Data)
	fmt.Fprintf(out, "  agents send to  %s/v1/arsia/inbox (signed ARSIA requests, POST; not a web page)\n", addr)
	fmt.Fprintf(out, "  reviewers open  %s/ in a browser (the web inbox) and sign in with the login token %s (valid until this process stops)\n", addr, token)
	fmt.Fprintf(out, "                  API: \"Authorization: Bearer %s\" on %s/approvals/ and %s/v1/reviews\n", token, addr, addr)
	fmt.Fprintf(out, "                  CLI: %s approvals %s list\n", self, where)
	if !installed {
		fmt.Fprintf(out, "                  (go install ./cmd/custos puts custos on your PATH)\n")
	}
}

// Run serves until ctx ends (or the HTTP server fails), then stops the
// server gracefully, waits for the gateway's, the notifier's and the escalator's loops and
// signs a last audit checkpoint. Close releases the rest.
func (s *server) Run(ctx context.Context) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- s.gw.Run(runCtx) }()
	srvDone := make(chan error, 1)
	go func() { srvDone <- s.srv.Serve(s.ln) }()
	notifyDone := make(chan struct{})
	go func() {
		defer close(notifyDone)
		if s.notifier != nil {
			_ = s.notifier.Run(runCtx) // it logs and retries its failures itself
		}
	}()
	escalateDone := make(chan struct{})
	go func() {
		defer close(escalateDone)
		if s.escalator != nil {
			_ = s.escalator.Run(runCtx, escalationEvery) // it logs its failures and tries again
		}
	}()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-srvDone:
	}
	stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(shutdownCtx)
	<-runDone
	<-notifyDone
	<-escalateDone
	// The last records are vouched for too, and the stop was clean
	// (custos audit verify).
	cps := gateway.CheckpointSigner{Signer: s.key.signer, KID: s.key.kid}
	if _, _, err := s.auditLog.CheckpointEvent(shutdownCtx, cps, audit.EventStop); err != nil {
		s.logger.Error("signing the audit checkpoint at shutdown", "err", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// Close releases what Open took, last first. Call it after Run returns
// (or instead of Run).
func (s *server) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
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

// gatewayKeyFile is the gateway's signing key (DATA/gateway.key.jwk.json).
type gatewayKeyFile struct {
	signer sig.Signer
	// public is its public JWK, published in the gateway's JWKS.
	public jose.JSONWebKey
	kid    string
	// created says this run made the key.
	created bool
}

// gatewayKey loads the gateway's signing key from DATA/gateway.key.jwk.json,
// creating an Ed25519 key (mode 0600) on first run. A key file readable by
// others is refused.
func gatewayKey(dir, agent string) (gatewayKeyFile, error) {
	path := filepath.Join(dir, "gateway.key.jwk.json")
	kid := agent + "#gateway-1"
	data, err := os.ReadFile(path)
	created := false
	switch {
	case errors.Is(err, os.ErrNotExist):
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return gatewayKeyFile{}, err
		}
		if err := writePrivateJWK(path, jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: "EdDSA", Use: "sig"}, false); err != nil {
			return gatewayKeyFile{}, err
		}
		if data, err = os.ReadFile(path); err != nil {
			return gatewayKeyFile{}, err
		}
		created = true
	case err != nil:
		return gatewayKeyFile{}, err
	default:
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			return gatewayKeyFile{}, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
		}
	}
	var priv jose.JSONWebKey
	if err := json.Unmarshal(data, &priv); err != nil || priv.IsPublic() {
		return gatewayKeyFile{}, fmt.Errorf("%s: not a private JWK", path)
	}
	if priv.KeyID != kid {
		return gatewayKeyFile{}, fmt.Errorf("%s is the key of %s, not of %s", path, priv.KeyID, kid)
	}
	signer, err := sig.NewSignerFromJWK(&priv)
	if err != nil {
		return gatewayKeyFile{}, err
	}
	return gatewayKeyFile{signer: signer, public: priv.Public(), kid: kid, created: created}, nil
}

func newHandler(h config.Handler) (handler.Handler, error) {
	headers, err := h.HeaderValues()
	if err != nil {
		return nil, err
	}
	switch h.Type {
	case "echo":
		return handler.NewEcho(), nil
	case "http":
		return handler.NewHTTP(handler.HTTPConfig{URL: h.URL, Timeout: h.Timeout, Headers: headers, MaxResponseBytes: h.MaxResponseBytes})
	case "exec":
		return handler.NewExec(handler.ExecConfig{Command: h.Command, Dir: h.Dir, Env: h.Env, Timeout: h.Timeout, MaxOutputBytes: h.MaxResponseBytes})
	case "mcp":
		// A stdio server is started on the first call, not here.
		m, err := handler.NewMCP(handler.MCPConfig{Command: h.Command, Dir: h.Dir, Env: h.Env, URL: h.URL, Headers: headers,
			Tools: h.Tools, Timeout: h.Timeout})
		if err != nil {
			return nil, err
		}
		return m, nil
	case "a2a":
		a, err := handler.NewA2A(handler.A2AConfig{URL: h.URL, Timeout: h.Timeout, Headers: headers, Poll: h.Poll, MaxResponseBytes: h.MaxResponseBytes})
		if err != nil {
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown handler type %q", h.Type)
}
