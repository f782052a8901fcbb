package gateway

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Label values are bounded: a value a counter does not list, and a sender
// the configuration does not name or that is not authenticated, count as
// "other".
func TestMetricsLabelsBounded(t *testing.T) {
	r := newPipeRig(t)
	m := &r.g.metrics
	cases := []struct {
		name, label, counted string
	}{
		{"custos_requests_total", "ok", "ok"},
		{"custos_requests_total", "agent:whoever", otherLabel},
		{"custos_approvals_total", "approved", "approved"},
		{"custos_approvals_total", "conflict", otherLabel},
		{"custos_oversight_timeouts_total", "required_post_execution", "required_post_execution"},
		{"custos_oversight_timeouts_total", "something_else", otherLabel},
		{"custos_callbacks_total", "given_up", "given_up"},
	}
	for _, c := range cases {
		before := value(t, m.counters[c.name][c.counted])
		m.inc(c.name, c.label)
		if after := value(t, m.counters[c.name][c.counted]); after != before+1 {
			t.Errorf("%s %q: %s went %v -> %v", c.name, c.label, c.counted, before, after)
		}
	}
	for _, c := range []struct {
		who  requestInfo
		want string
	}{
		{requestInfo{verified: true, agent: pipeSender}, pipeSender},
		{requestInfo{verified: false, agent: pipeSender}, otherLabel},
		{requestInfo{verified: true, agent: "agent:not.configured"}, otherLabel},
		{requestInfo{}, otherLabel},
	} {
		if got := m.sender(&c.who); got != c.want {
			t.Errorf("sender of %+v: %q, want %q", c.who, got, c.want)
		}
	}
}
