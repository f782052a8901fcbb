package main

import (
	"context"
	"crypto/sha256"

	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/handler"
)

// reloadable are the top-level settings a running custos serve takes from
// a new configuration (SIGHUP): whose keys it trusts, who may call what,
// how each capability runs, the reviewers and their roles. Every other
// setting (listen, data, store, tokens, limits, notifications, ...) needs a
// restart: a reload that changes one reports it and leaves it as it is.
var reloadable = []string{"trust", "senders", "handlers", "reviewers", "roles",
	"separation_of_duties", "justification_required"}

// reloadState is what reloads share: one at a time, counted.
type reloadState struct {
	mu sync.Mutex
	// retired are the handlers a reload replaced; calls may still run
	// on them, so they are closed with the server.
	retired  []handler.Handler
	total    *prometheus.CounterVec
	lastGood prometheus.Gauge
}

func newReloadState(reg prometheus.Registerer) (*reloadState, error) {
	r := &reloadState{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "custos_config_reloads_total",
			Help: "Configuration reloads (SIGHUP), by result: ok, or error when the new configuration was refused and the old one kept."},
			[]string{"result"}),
		lastGood: prometheus.NewGauge(prometheus.GaugeOpts{Name: "custos_config_last_reload_success_timestamp_seconds",
			Help: "When the configuration in force was loaded (Unix seconds): the start, or the last reload that succeeded."}),
	}
	r.total.WithLabelValues("ok")
	r.total.WithLabelValues("error")
	r.lastGood.SetToCurrentTime()
	if err := reg.Register(r.total); err != nil {
		return nil, err
	}
	if err := reg.Register(r.lastGood); err != nil {
		return nil, err
	}
	return r, nil
}

// needsRestart lists the top-level settings other than the reloadable
// ones that differ between old and new.
func needsRestart(old, new config.Config) []string {
	var out []string
	t := reflect.TypeFor[config.Config]()
	ov, nv := reflect.ValueOf(old), reflect.ValueOf(new)
	for i := 0; i < t.NumField(); i++ {
		key := t.Field(i).Tag.Get("yaml")
		if key == "" || key == "-" || slices.Contains(reloadable, key) {
			continue
		}
		if !reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			out = append(out, key)
		}
	}
	return out
}

// setReloadable sets the reloadable settings of dst to those of src.
func setReloadable(dst *config.Config, src config.Config) {
	dv, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src)
	for i := 0; i < dv.NumField(); i++ {
		if slices.Contains(reloadable, dv.Type().Field(i).Tag.Get("yaml")) {
			dv.Field(i).Set(sv.Field(i))
		}
	}
}

// Reload applies the reloadable settings of cfg (checked), all or none:
// the new trust store, grants, handlers and reviewer credentials are
// built first, and only when every one builds are they put in force.
// Connections, event streams and pending approvals are untouched. It
// returns the settings that differ but need a restart (left unchanged).
func (s *server) Reload(cfg config.Config, trigger string) (restart []string, err error) {
	s.reload.mu.Lock()
	defer s.reload.mu.Unlock()
	return s.reloadLocked(cfg, trigger)
}

// reapply puts the configuration as loaded last in force again, with the
// onboarded agents as they are now (an onboarding's activation).
func (s *server) reapply(trigger string) error {
	s.reload.mu.Lock()
	defer s.reload.mu.Unlock()
	_, err := s.reloadLocked(s.base, trigger)
	return err
}

// handlerRiskLevels are the risk levels the handlers in force declare.
func (s *server) handlerRiskLevels() map[string]int {
	s.reload.mu.Lock()
	defer s.reload.mu.Unlock()
	return config.RiskLevels(s.cfg.Handlers)
}

// baseConfigured reports whether the configuration as loaded last names
// agent as a sender or trust peer.
func (s *server) baseConfigured(agent string) bool {
	s.reload.mu.Lock()
	defer s.reload.mu.Unlock()
	return configured(s.base, agent)
}

// reloadLocked is Reload, with s.reload.mu held.
func (s *server) reloadLocked(cfg config.Config, trigger string) (restart []string, err error) {
	defer func() {
		if err != nil {
			s.reload.total.WithLabelValues("error").Inc()
			s.logger.Error("configuration reload refused; the configuration in force is kept", "trigger", trigger, "err", err)
			return
		}
		s.reload.total.WithLabelValues("ok").Inc()
		s.reload.lastGood.SetToCurrentTime()
		s.logger.Info("configuration reloaded", "trigger", trigger, "needs_restart", restart)
	}()
	if s.derivedURL && cfg.Listen == s.cfg.Listen && cfg.PublicURL == "http://"+cfg.Listen {
		cfg.PublicURL = s.cfg.PublicURL // derived again, as at start
	}
	base := cfg
	if trigger != onboardingTrigger {
		// An operator's reload takes onboarded.json as it is now: an agent
		// removed from it is trusted no more.
		if err := s.onboarded.reread(); err != nil {
			return restart, err
		}
	}
	cfg = s.withOnboarded(cfg)
	restart = needsRestart(s.cfg, cfg)

	keys, trust, err := newTrust(cfg.Trust, s.caAnchors())
	if err != nil {
		return restart, err
	}
	handlers, headers := map[string]handler.Handler{}, map[string]http.Header{}
	var created, replaced []handler.Handler
	fail := func(err error) ([]string, error) {
		closeHandlers(created)
		return restart, err
	}
	for name, h := range cfg.Handlers {
		hdr, err := h.HeaderValues()
		if err != nil {
			return fail(fmt.Errorf("handlers.%s: %w", name, err))
		}
		headers[name] = hdr
		// Unchanged, its secrets included (a file: secret may have been
		// rotated): the same process or session.
		if old, ok := s.cfg.Handlers[name]; ok && reflect.DeepEqual(old, h) && reflect.DeepEqual(s.headers[name], hdr) {
			handlers[name] = s.handlers[name]
			continue
		}
		nh, err := newHandler(h)
		if err != nil {
			return fail(fmt.Errorf("handlers.%s: %w", name, err))
		}
		handlers[name] = nh
		created = append(created, nh)
	}
	if err := s.addStateHandlers(handlers); err != nil {
		return fail(err)
	}
	for name, h := range s.handlers {
		if handlers[name] != h {
			replaced = append(replaced, h)
		}
	}
	tokens, pws, policy, err := reviewerCredentials(cfg, s.reviewer.adminToken)
	if err != nil {
		return fail(err)
	}
	grants, callbacks, oversight := senderGrants(cfg.Senders)
	// The callbacks are a sender's setting too.
	if err := s.gw.SetPolicy(gateway.Policy{Keys: keys, Trust: trust, Grants: grants, Handlers: handlers, Callbacks: callbacks, Oversight: oversight}); err != nil {
		return fail(err)
	}
	s.reviewer.tokens.Replace(tokens)
	s.reviewer.passwords.Replace(pws)
	s.reviewer.policy.Replace(policy)
	ids := map[string]bool{config.AdminReviewer: true}
	for _, r := range cfg.Reviewers {
		ids[r.ID] = true
	}
	if n := s.reviewer.sessions.EndSessionsExcept(func(id string) bool { return ids[id] }); n > 0 {
		s.logger.Info("signed out the sessions of reviewers no longer configured", "count", n)
	}
	s.handlers, s.headers = handlers, headers
	s.reload.retired = append(s.reload.retired, replaced...)

	next := s.cfg
	setReloadable(&next, cfg)
	s.cfg = next
	setReloadable(&s.base, base)
	if err := s.setDiscovery(); err != nil {
		s.logger.Warn("rebuilding the discovery document; it keeps its old content", "err", err)
	}
	// custos approvals must know whether a reviewer policy applies now.
	if err := writeGatewayMarker(context.Background(), next); err != nil {
		s.logger.Warn("recording the reviewer policy for custos approvals", "err", err)
	}
	if len(restart) > 0 {
		s.logger.Warn("settings changed that need a restart; they keep their old values until then", "settings", restart)
	}
	return restart, nil
}

// ReloadFrom loads a configuration with load and reloads it; a
// configuration that does not load is refused like one that does not
// build, and counted. trigger says why, for the log.
func (s *server) ReloadFrom(load func() (config.Config, error), trigger string) ([]string, error) {
	cfg, err := load()
	if err != nil {
		s.reload.mu.Lock()
		s.reload.total.WithLabelValues("error").Inc()
		s.reload.mu.Unlock()
		s.logger.Error("configuration reload refused; the configuration in force is kept", "trigger", trigger, "err", err)
		return nil, err
	}
	return s.Reload(cfg, trigger)
}

func closeHandlers(hs []handler.Handler) {
	for _, h := range hs {
		if c, ok := h.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// serveReloading runs the gateway of cfg until ctx ends, reloading the
// configuration load returns on every SIGHUP and, when file is not "",
// whenever that file's content changes.
func serveReloading(ctx context.Context, cfg config.Config, load func() (config.Config, error), file string, out, errOut io.Writer) error {
	s, err := openServer(ctx, cfg, out, errOut)
	if err != nil {
		return err
	}
	defer s.Close()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	changed := make(chan struct{}, 1)
	var watching sync.WaitGroup
	if file != "" {
		if err := watchFile(runCtx, file, changed, &watching); err != nil {
			// The signal still works; say so rather than fail.
			s.logger.Warn("not watching the configuration file; send SIGHUP after editing it", "file", file, "err", err)
		}
	}
	reloads := make(chan struct{})
	go func() {
		defer close(reloads)
		for {
			select {
			case <-runCtx.Done():
				return
			case <-hup:
				_, _ = s.ReloadFrom(load, "SIGHUP") // logged and counted
			case <-changed:
				_, _ = s.ReloadFrom(load, "file")
			}
		}
	}()
	s.printBanner()
	err = s.Run(runCtx)
	stop()
	<-reloads
	watching.Wait()
	return err
}

// watchQuiet is how long the configuration file must stay unchanged after
// an event before it is read: editors write a file in several steps.
const watchQuiet = 200 * time.Millisecond

// watchFile watches the directory of file (editors and Kubernetes
// ConfigMaps replace a file rather than write it) and signals changed
// once its content differs from the last seen, after watchQuiet without
// events.
func watchFile(ctx context.Context, file string, changed chan<- struct{}, wg *sync.WaitGroup) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(filepath.Dir(file)); err != nil {
		_ = w.Close()
		return err
	}
	digest := func() [sha256.Size]byte {
		b, _ := os.ReadFile(file)
		return sha256.Sum256(b)
	}
	last := digest()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer w.Close()
		var quiet <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				quiet = time.After(watchQuiet)
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
			case <-quiet:
				quiet = nil
				if d := digest(); d != last {
					last = d
					select {
					case changed <- struct{}{}:
					default: // a reload is already due
					}
				}
			}
		}
	}()
	return nil
}
