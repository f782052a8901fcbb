package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/custos-runtime/custos/arsia/auth"
	"github.com/custos-runtime/custos/arsia/onboarding"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway/authserver"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/onboard"
	"github.com/custos-runtime/custos/internal/limits"
	"github.com/custos-runtime/custos/internal/routes"
)

// onboardedFile holds the agents onboarded over HTTP, in the data
// directory: they are trusted again after a restart.
const onboardedFile = "onboarded.json"

// onboarded are the agents onboarding approved, as kept in onboardedFile
// and merged into the configuration in force (withOnboarded).
type onboarded struct {
	mu     sync.Mutex
	path   string
	agents map[string]onboard.Agent
}

type onboardedDoc struct {
	Agents []onboard.Agent `json:"agents"`
}

// loadOnboarded reads the onboarded agents of the data directory (none
// when the file does not exist).
func loadOnboarded(dataDir string) (*onboarded, error) {
	o := &onboarded{path: filepath.Join(dataDir, onboardedFile), agents: map[string]onboard.Agent{}}
	b, err := readFileMax(o.path, limits.FileBytes, "the onboarded agents file")
	if os.IsNotExist(err) {
		return o, nil
	}
	if err != nil {
		return nil, err
	}
	var doc onboardedDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", o.path, err)
	}
	for _, a := range doc.Agents {
		o.agents[a.ID] = a
	}
	return o, nil
}

// onboardingTrigger is the reload trigger of an onboarding's activation.
const onboardingTrigger = "onboarding"

// reread replaces the agents with the file's (an operator may have
// removed one); nothing changes when the file does not read.
func (o *onboarded) reread() error {
	if o == nil {
		return nil
	}
	fresh, err := loadOnboarded(filepath.Dir(o.path))
	if err != nil {
		return fmt.Errorf("onboarding: %w", err)
	}
	o.mu.Lock()
	o.agents = fresh.agents
	o.mu.Unlock()
	return nil
}

// save writes agents (sorted by id) over the file, atomically.
func (o *onboarded) save(agents map[string]onboard.Agent) error {
	doc := onboardedDoc{Agents: []onboard.Agent{}}
	for _, id := range slices.Sorted(maps.Keys(agents)) {
		doc.Agents = append(doc.Agents, agents[id])
	}
	return writeFileAtomic(o.path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	})
}

// configured reports whether cfg names agent as a sender or a trust peer.
func configured(cfg config.Config, agent string) bool {
	return slices.ContainsFunc(cfg.Senders, func(s config.Sender) bool { return s.Agent == agent }) ||
		slices.ContainsFunc(cfg.Trust.Peers, func(p config.TrustPeer) bool { return p.Agent == agent })
}

// withOnboarded returns cfg with the onboarded agents it does not
// configure itself added: each a trust peer discovered at its URL and a
// sender granted what onboarding granted, its oversight_required
// capabilities waiting for a human each call. What cfg configures wins.
func (s *server) withOnboarded(cfg config.Config) config.Config {
	if s.onboarded == nil {
		return cfg
	}
	s.onboarded.mu.Lock()
	defer s.onboarded.mu.Unlock()
	cfg.Senders, cfg.Trust.Peers = slices.Clone(cfg.Senders), slices.Clone(cfg.Trust.Peers)
	for _, id := range slices.Sorted(maps.Keys(s.onboarded.agents)) {
		if configured(cfg, id) {
			continue
		}
		a := s.onboarded.agents[id]
		cfg.Trust.Peers = append(cfg.Trust.Peers, config.TrustPeer{Agent: a.ID, URL: a.URL})
		cfg.Senders = append(cfg.Senders, config.Sender{Agent: a.ID,
			Capabilities: append(slices.Clone(a.FreelyAllowed), a.OversightRequired...), Oversight: slices.Clone(a.OversightRequired)})
	}
	return cfg
}

// openOnboarding reads the onboarded agents when onboarding is enabled
// (before the trust store is built: they are trusted from the start).
func (s *server) openOnboarding() error {
	if !s.cfg.Onboarding.Enabled {
		return nil
	}
	o, err := loadOnboarded(s.cfg.Data)
	if err != nil {
		return fmt.Errorf("onboarding: %w", err)
	}
	s.onboarded = o
	return nil
}

// mountOnboarding serves onboard.Path when onboarding is enabled. An
// approval is recorded in onboardedFile and put in force as a reload
// would (the running gateway trusts the agent at once), then its token is
// issued by the authorization server.
func (s *server) mountOnboarding(mux *routes.Mux, as *authserver.Server) error {
	c := s.cfg.Onboarding
	if !c.Enabled {
		return nil
	}
	if as == nil {
		return fmt.Errorf("onboarding needs the authorization server")
	}
	b, err := readFileMax(c.PolicyFile, limits.FileBytes, "the capability policy file")
	if err != nil {
		return fmt.Errorf("onboarding.policy_file: %w", err)
	}
	policy, err := onboarding.ParsePolicy(b)
	if err != nil {
		return fmt.Errorf("onboarding.policy_file: %w", err)
	}
	for _, w := range policy.Warnings() {
		s.logger.Warn("onboarding capability policy", "warning", w)
	}
	var undo sync.Map // agent id → how to undo its last activation
	change := func(ctx context.Context, f func(map[string]onboard.Agent)) error {
		// The file first: an agent is in force only once it is kept.
		s.onboarded.mu.Lock()
		next := maps.Clone(s.onboarded.agents)
		f(next)
		err := s.onboarded.save(next)
		if err == nil {
			s.onboarded.agents = next
		}
		s.onboarded.mu.Unlock()
		if err != nil {
			return err
		}
		return s.reapply(onboardingTrigger)
	}
	// Settings a reload does not change, read once (a reload replaces s.cfg).
	dpopURL, skew, gatewayAgent := s.cfg.PublicURL+onboard.Path, s.cfg.Tokens.ClockSkew, s.cfg.Agent
	svc, err := onboard.New(onboard.Options{Agent: s.cfg.Agent, Signer: s.key.signer, KID: s.key.kid, Policy: policy,
		DiscoveryURLs: c.DiscoveryURLs, Profile: c.Profile, FetchTimeout: c.FetchTimeout, MaxInFlight: c.MaxInFlight,
		MaxBody: s.cfg.MaxBody, Algorithms: nilIfEmpty(s.cfg.Trust.Algorithms), Logger: s.logger,
		Configured: s.baseConfigured,
		RiskLevels: s.handlerRiskLevels,
		Seen:       s.state.Replay.Seen,
		Record: func(ctx context.Context, o onboard.Outcome) error {
			return s.recordOnboarding(ctx, o, gatewayAgent, c.Profile)
		},
		// An agent onboarded before and approved again is replaced; when
		// the new approval is withdrawn, the earlier one is restored.
		Activate: func(ctx context.Context, a onboard.Agent) error {
			return change(ctx, func(m map[string]onboard.Agent) {
				prev, had := m[a.ID]
				undo.Store(a.ID, func(m map[string]onboard.Agent) {
					if had {
						m[a.ID] = prev
					} else {
						delete(m, a.ID)
					}
				})
				m[a.ID] = a
			})
		},
		Deactivate: func(ctx context.Context, agent string) error {
			f, ok := undo.LoadAndDelete(agent)
			if !ok {
				return nil // never activated: nothing to undo
			}
			return change(ctx, f.(func(map[string]onboard.Agent)))
		},
		Issue: func(ctx context.Context, agent string, scope []string, jkt string, lifetime time.Duration) (onboard.Token, error) {
			t, err := as.Issue(ctx, agent, scope, jkt, lifetime)
			return onboard.Token{Value: t.AccessToken, ID: t.ID, ExpiresAt: t.ExpiresAt}, err
		},
		// RFC 9449 §5, as at the token endpoint: the proof is for this
		// request (htm POST, htu the onboarding URL), fresh, used once.
		DPoP: func(ctx context.Context, proof string, now time.Time) (string, error) {
			p, errs := auth.ValidateDPoP(ctx, proof, auth.DPoPOptions{Method: http.MethodPost, URL: dpopURL,
				Now: now, Skew: skew, Replay: s.state.Replay, Algorithms: []string{auth.EdDSA, auth.ES256}, TokenRequest: true})
			if len(errs) > 0 {
				return "", errors.Join(errs...)
			}
			return auth.Thumbprint(p.JWK)
		}})
	if err != nil {
		return err
	}
	mux.Handle("POST "+onboard.Path, svc)
	return nil
}

// recordOnboarding audits a decision (event approval_decision,
// ARSIA-Identity §7.6): its result without the token, the phases and
// steps completed, the onboarding events it stands for; or the
// withdrawal of an approval that could not be completed.
func (s *server) recordOnboarding(ctx context.Context, o onboard.Outcome, gatewayAgent, profile string) error {
	phases := make([]any, len(o.Phases))
	for i, p := range o.Phases {
		phases[i] = string(p)
	}
	steps := make([]any, len(o.Steps))
	for i, st := range o.Steps {
		steps[i] = string(st)
	}
	events := []any{}
	for _, e := range o.Decision.AuditEvents() {
		events = append(events, e)
	}
	details := map[string]any{"event_type": "approval_decision", "phases": phases, "phase1_steps": steps,
		"events": events, "ai_system_classification": o.Classification, "result": o.Result}
	outcome := o.Decision.Decision
	if o.Withdrawn != "" {
		outcome, details["reason"], details["events"] = "withdrawn", o.Withdrawn, []any{"capability_revoked"}
	}
	rec := audit.Record{Kind: audit.KindOnboarding, MessageID: o.MessageID, Sender: o.Agent, Recipient: gatewayAgent,
		Profile: profile, Outcome: outcome, Details: details,
		Actor: audit.Actor{ID: gatewayAgent, Type: audit.ActorPolicy, AuthenticatedBy: "onboarding"}}
	_, err := s.auditLog.Append(ctx, rec)
	return err
}
