package gateway

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/custos-runtime/custos/gateway/exchange"
)

// metrics counts what the gateway did, by name and label value.
type metrics struct {
	mu     sync.Mutex
	counts map[string]map[string]uint64
}

func (m *metrics) inc(name, label string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]map[string]uint64{}
	}
	if m.counts[name] == nil {
		m.counts[name] = map[string]uint64{}
	}
	m.counts[name][label]++
}

// The counters and their label.
var metricHelp = []struct{ name, label, help string }{
	{"custos_requests_total", "result", "ARSIA requests received, by how the gateway answered them."},
	{"custos_unauthenticated_total", "reason", "Requests refused before their signature verified (nothing stored), by reason."},
	{"custos_executions_total", "outcome", "Calls the handlers ran, by outcome."},
	{"custos_approvals_total", "outcome", "Approval requests resolved for the gateway, by outcome."},
	{"custos_oversight_timeouts_total", "mode", "Post-execution reviews that became overdue (oversight_timeout), by oversight mode."},
	{"custos_callbacks_total", "result", "Callback delivery attempts, by result."},
}

// WriteMetrics writes the gateway's counters, and the number of exchanges
// waiting for a decision, in the Prometheus text exposition format.
func (g *Gateway) WriteMetrics(ctx context.Context, w io.Writer) error {
	g.metrics.mu.Lock()
	snapshot := map[string]map[string]uint64{}
	for n, byLabel := range g.metrics.counts {
		snapshot[n] = map[string]uint64{}
		for l, v := range byLabel {
			snapshot[n][l] = v
		}
	}
	g.metrics.mu.Unlock()
	for _, m := range metricHelp {
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", m.name, m.help, m.name); err != nil {
			return err
		}
		labels := make([]string, 0, len(snapshot[m.name]))
		for l := range snapshot[m.name] {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		for _, l := range labels {
			if _, err := fmt.Fprintf(w, "%s{%s=%q} %d\n", m.name, m.label, l, snapshot[m.name][l]); err != nil {
				return err
			}
		}
	}
	waiting, err := g.o.Exchanges.Waiting(ctx, exchange.PendingApproval)
	if err != nil {
		return err
	}
	overdue := 0
	now := g.o.Now()
	for _, x := range waiting {
		if !x.Deadline.IsZero() && !now.Before(x.Deadline) {
			overdue++
		}
	}
	_, err = fmt.Fprintf(w, "# HELP custos_approvals_waiting Requests waiting for a human decision.\n# TYPE custos_approvals_waiting gauge\n"+
		"custos_approvals_waiting %d\n# HELP custos_approvals_overdue Waiting requests past their deadline, not yet swept.\n"+
		"# TYPE custos_approvals_overdue gauge\ncustos_approvals_overdue %d\n", len(waiting), overdue)
	if err != nil {
		return err
	}
	openReviews, late, err := g.o.Exchanges.ReviewCounts(ctx, now)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "# HELP custos_reviews_open Post-execution reviews waiting for a reviewer.\n# TYPE custos_reviews_open gauge\n"+
		"custos_reviews_open %d\n# HELP custos_reviews_overdue Open reviews past their deadline.\n"+
		"# TYPE custos_reviews_overdue gauge\ncustos_reviews_overdue %d\n", openReviews, late)
	return err
}
