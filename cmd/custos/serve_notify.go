package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/httpapi"
	"github.com/custos-runtime/custos/internal/routes"
	"github.com/custos-runtime/custos/notify"
)

// notifyDecider adapts the approvals API's decision path to package
// notify: a refusal's status and reason, which a reviewer may be told.
type notifyDecider struct{ d *httpapi.Decider }

func (n notifyDecider) Decide(ctx context.Context, d *aais.Decision, actor aais.Actor) (*aais.Message, error) {
	m, err := n.d.Decide(ctx, d, actor)
	var de *httpapi.DecisionError
	if errors.As(err, &de) {
		return nil, &notify.Refusal{Status: de.Status, Detail: de.Detail}
	}
	return m, err
}

// newNotifications builds the notifier of cfg.Notifications and mounts the
// channels' inbound decision endpoints on mux; nil when no channel is
// configured.
func newNotifications(cfg config.Config, auth *aais.Authority, rs *reviewerSurfaces, mux *routes.Mux, logger *slog.Logger) (*notify.Notifier, error) {
	nc := cfg.Notifications
	if !nc.Enabled() {
		return nil, nil
	}
	reviewers := map[string]aais.Actor{}
	for _, r := range cfg.Reviewers {
		reviewers[r.ID] = aais.Actor{DisplayName: r.DisplayName}
	}
	decisions := &notify.Decisions{Decider: notifyDecider{rs.decider}, Requests: auth, Reviewers: reviewers, Logger: logger,
		JustificationRequired: func(a aais.Actor, r *aais.Request) bool { return rs.policy.Permission(a, r).JustificationRequired }}
	route := func(r config.NotifyRoute) notify.Route {
		return notify.Route{Profiles: r.Profiles, Capabilities: r.Capabilities, MinRisk: aais.RiskLevel(r.MinRisk)}
	}
	var channels []notify.Routed
	for _, w := range nc.Webhooks {
		secret, err := webhookSecret(w.Secret)
		if err != nil {
			return nil, fmt.Errorf("notifications.webhooks %s.secret: %w", w.Name, err)
		}
		ch, err := notify.NewWebhook(notify.WebhookOptions{Name: w.Name, URL: w.URL, Secret: secret})
		if err != nil {
			return nil, err
		}
		channels = append(channels, notify.Routed{Channel: ch, Route: route(w.Route)})
		if w.CallbackSecret == "" {
			continue
		}
		cb, err := webhookSecret(w.CallbackSecret)
		if err != nil {
			return nil, fmt.Errorf("notifications.webhooks %s.callback_secret: %w", w.Name, err)
		}
		h, err := ch.CallbackHandler(decisions, notify.CallbackOptions{Secrets: []notify.WebhookSecret{cb}, Reviewers: w.Reviewers})
		if err != nil {
			return nil, err
		}
		mux.Handle("POST /notify/webhook/"+w.Name+"/decisions", h)
	}
	for _, s := range nc.Slack {
		token, err := config.Secret(s.Token)
		if err != nil {
			return nil, fmt.Errorf("notifications.slack %s.token: %w", s.Name, err)
		}
		signing, err := config.Secret(s.SigningSecret)
		if err != nil {
			return nil, fmt.Errorf("notifications.slack %s.signing_secret: %w", s.Name, err)
		}
		ch, err := notify.NewSlack(notify.SlackOptions{Name: s.Name, API: s.API, Token: token, Channel: s.Channel,
			SigningSecret: signing, TeamID: s.TeamID, Users: s.Users})
		if err != nil {
			return nil, err
		}
		channels = append(channels, notify.Routed{Channel: ch, Route: route(s.Route)})
		mux.Handle("POST /notify/slack/"+s.Name+"/interactions", ch.Handler(decisions))
	}
	for _, e := range nc.Email {
		password := ""
		if e.Password != "" {
			var err error
			if password, err = config.Secret(e.Password); err != nil {
				return nil, fmt.Errorf("notifications.email %s.password: %w", e.Name, err)
			}
		}
		ch, err := notify.NewEmail(notify.EmailOptions{Name: e.Name, Addr: e.SMTP, From: e.From, To: e.To,
			Username: e.Username, Password: password, RequireTLS: e.RequireTLS})
		if err != nil {
			return nil, err
		}
		channels = append(channels, notify.Routed{Channel: ch, Route: route(e.Route)})
	}
	profiles := compliance.Default()
	return notify.New(notify.Options{Events: auth, Channels: channels, Inbox: cfg.PublicURL, Logger: logger,
		StatePath: filepath.Join(cfg.Data, "notify-state.json"),
		Redaction: notify.Redaction{Profiles: nc.RedactProfiles, PII: func(name string) (bool, bool) {
			p, ok := profiles.Get(name)
			if !ok {
				return false, false
			}
			return p.Defaults.PIIInvolved, true
		}}})
}

func webhookSecret(v string) (notify.WebhookSecret, error) {
	s, err := config.Secret(v)
	if err != nil {
		return nil, err
	}
	return notify.ParseWebhookSecret(s)
}

// checkNotificationSecrets resolves every secret of the notification
// channels as newNotifications will, for custos serve --check-config.
func checkNotificationSecrets(nc config.Notifications) error {
	var errs []error
	for _, w := range nc.Webhooks {
		if _, err := webhookSecret(w.Secret); err != nil {
			errs = append(errs, fmt.Errorf("notifications.webhooks %s.secret: %w", w.Name, err))
		}
		if w.CallbackSecret != "" {
			if _, err := webhookSecret(w.CallbackSecret); err != nil {
				errs = append(errs, fmt.Errorf("notifications.webhooks %s.callback_secret: %w", w.Name, err))
			}
		}
	}
	for _, s := range nc.Slack {
		if _, err := config.Secret(s.Token); err != nil {
			errs = append(errs, fmt.Errorf("notifications.slack %s.token: %w", s.Name, err))
		}
		if _, err := config.Secret(s.SigningSecret); err != nil {
			errs = append(errs, fmt.Errorf("notifications.slack %s.signing_secret: %w", s.Name, err))
		}
	}
	for _, e := range nc.Email {
		if e.Password != "" {
			if _, err := config.Secret(e.Password); err != nil {
				errs = append(errs, fmt.Errorf("notifications.email %s.password: %w", e.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
