package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/gateway/exchange"
	"github.com/custos-runtime/custos/notify"
	"github.com/custos-runtime/custos/store"
)

// escalationEvery is how often serve looks for due reminders, escalations
// and deadlines: a step is taken at most this late.
const escalationEvery = 5 * time.Second

// overdueReviews lists the open, overdue reviews for the escalator, with
// the approval request of their exchange.
type overdueReviews struct{ xs exchange.Backend }

func (o overdueReviews) OverdueReviews(ctx context.Context, now time.Time) ([]notify.OverdueReview, error) {
	rs, err := o.xs.Reviews(ctx, exchange.ReviewFilter{Overdue: now, Limit: 500})
	if err != nil {
		return nil, err
	}
	out := make([]notify.OverdueReview, 0, len(rs))
	for _, r := range rs {
		v := notify.OverdueReview{ExchangeID: r.ExchangeID, Mode: r.Mode, Profile: r.Profile, Capability: r.Capability,
			Sender: r.Sender, CreatedAt: r.CreatedAt, DueAt: r.DueAt}
		if x, err := o.xs.Get(ctx, r.ExchangeID); err == nil {
			v.MessageID, v.RequestID = x.MessageID, x.ApprovalID
		}
		out = append(out, v)
	}
	return out, nil
}

func (o overdueReviews) ReviewOpen(ctx context.Context, exchangeID string) (bool, error) {
	r, err := o.xs.GetReview(ctx, exchangeID)
	if err != nil {
		return false, err
	}
	return r.ReviewedAt.IsZero(), nil
}

// newEscalator builds the escalator of cfg.Notifications' escalations on
// the notifier's channels; nil when none is configured.
func newEscalator(cfg config.Config, auth *aais.Authority, state *store.State, rec notify.Recorder, n *notify.Notifier, logger *slog.Logger) (*notify.Escalator, error) {
	nc := cfg.Notifications
	if len(nc.Escalations)+len(nc.ReviewEscalations) == 0 {
		return nil, nil
	}
	route := func(r config.NotifyRoute) notify.Route {
		return notify.Route{Profiles: r.Profiles, Capabilities: r.Capabilities, MinRisk: aais.RiskLevel(r.MinRisk)}
	}
	o := notify.EscalatorOptions{Approvals: auth, Steps: state.Exchanges, Audit: rec, Inbox: cfg.PublicURL,
		Agent: cfg.Agent, Logger: logger, Reviews: overdueReviews{state.Exchanges}}
	if n != nil {
		o.Channels, o.Redaction = n.Channels(), n.Redaction()
	}
	for _, e := range nc.Escalations {
		at := map[string]aais.Outcome{"expire": aais.OutcomeExpired, "deny": aais.OutcomeDenied}[e.AtDeadline]
		o.Escalations = append(o.Escalations, notify.Escalation{Name: e.Name, Route: route(e.Route), RemindAfter: e.RemindAfter,
			EscalateAfter: e.EscalateAfter, EscalateTo: e.EscalateTo, Deadline: e.Deadline, AtDeadline: at, DenyReason: e.DenyReason})
	}
	for _, e := range nc.ReviewEscalations {
		o.ReviewEscalations = append(o.ReviewEscalations, notify.ReviewEscalation{Name: e.Name, Route: route(e.Route),
			RemindAfter: e.RemindAfter, EscalateAfter: e.EscalateAfter, EscalateTo: e.EscalateTo})
	}
	return notify.NewEscalator(o)
}
