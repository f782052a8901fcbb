package main

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
)

// scrape gets /metrics with the given Accept header and decodes it with
// the Prometheus parsers (the text parser for the text format, the
// decoder of the format the response names otherwise, of the families
// whose name starts with only when it is set).
func (g *gatewayUnderTest) scrape(t *testing.T, accept, only string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	ct := resp.Header.Get("Content-Type")
	format := expfmt.ResponseFormat(resp.Header)
	if format.FormatType() == expfmt.TypeTextPlain {
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("the text parser refuses /metrics: %v", err)
		}
		return mfs, ct
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if only != "" {
		// The families of one name, and the end: the OpenMetrics parser
		// refuses the Go collector's go_memstats_alloc_bytes gauge next
		// to its go_memstats_alloc_bytes_total counter (one family name
		// in OpenMetrics), which Prometheus itself scrapes.
		var kept []string
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, only) || strings.HasPrefix(l, "# HELP "+only) || strings.HasPrefix(l, "# TYPE "+only) ||
				strings.HasPrefix(l, "# UNIT "+only) || l == "# EOF" {
				kept = append(kept, l)
			}
		}
		body = []byte(strings.Join(kept, "\n") + "\n")
	}
	dec := expfmt.NewDecoder(strings.NewReader(string(body)), format)
	mfs := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding /metrics (%s): %v", ct, err)
		}
		mfs[mf.GetName()] = mf
	}
	return mfs, ct
}

// labelsOf is the sorted label names of a metric.
func labelsOf(m *dto.Metric) string {
	var names []string
	for _, l := range m.GetLabel() {
		names = append(names, l.GetName())
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// sample finds the metric of a family whose labels are exactly want.
func sample(mf *dto.MetricFamily, want map[string]string) *dto.Metric {
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		ok := true
		for _, l := range m.GetLabel() {
			if want[l.GetName()] != l.GetValue() {
				ok = false
			}
		}
		if ok {
			return m
		}
	}
	return nil
}

// /metrics, scraped from a running custos serve after a call that runs, one
// that waits for and gets an approval, a forged one and an open event
// stream, parses as Prometheus text: every family has the type and the
// labels documented, the histograms counted what happened, label values
// stay bounded (a sender the configuration does not name is "other"), and,
// with tracing on, an OpenMetrics scrape carries the request's trace and
// span ids as an exemplar.
func TestServeMetricsScrape(t *testing.T) {
	_, endpoint := otlpHTTPReceiver(t)
	g := startGateway(t, filepath.Join(t.TempDir(), "data"), nil, "tracing:\n  exporter: otlp\n  endpoint: "+endpoint+"\n")
	defer g.stop()
	const trace = "0af7651916cd43dd8448eb211c80319c"
	if code, _, _ := g.sendBuilt(t, "demo.echo", map[string]any{"text": "hi"},
		arsia.BuildOptions{Context: &arsia.Context{TraceID: trace}, Compliance: map[string]any{"profile": "GDPR-STANDARD"}}, nil); code != 200 {
		t.Fatalf("echo: %d", code)
	}
	code, _, hdr := g.send(t, "billing.invoice.create", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "1.00"}, nil)
	if code != 202 {
		t.Fatalf("high-risk request: %d", code)
	}
	g.decide(t, aais.Approve)
	if code, _ := g.awaitFinal(t, hdr.Get("Custos-Exchange")); code != 200 {
		t.Fatalf("after approval: %d", code)
	}
	// A request whose signature does not verify, claiming a sender the
	// configuration does not name.
	if code, _, _ := g.send(t, "demo.echo", "", map[string]any{}, func(m map[string]any) { m["from"] = "agent:stranger.example" }); code != 401 {
		t.Fatalf("forged sender: %d, want 401", code)
	}
	// One event stream open while scraping.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.url+"/approvals/events", nil)
	req.Header.Set("Authorization", "Bearer "+g.token)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("event stream: %v %v", stream, err)
	}
	defer stream.Body.Close()
	// The stream's first bytes arrive once the handler counted it.
	if _, err := bufio.NewReader(stream.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	mfs, ct := g.scrape(t, "", "")
	if !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	families := []struct {
		name   string
		typ    dto.MetricType
		labels string
	}{
		{"custos_requests_total", dto.MetricType_COUNTER, "result"},
		{"custos_unauthenticated_total", dto.MetricType_COUNTER, "reason"},
		{"custos_executions_total", dto.MetricType_COUNTER, "outcome"},
		{"custos_approvals_total", dto.MetricType_COUNTER, "outcome"},
		{"custos_oversight_timeouts_total", dto.MetricType_COUNTER, "mode"},
		{"custos_callbacks_total", dto.MetricType_COUNTER, "result"},
		{"custos_approvals_waiting", dto.MetricType_GAUGE, ""},
		{"custos_approvals_overdue", dto.MetricType_GAUGE, ""},
		{"custos_reviews_open", dto.MetricType_GAUGE, ""},
		{"custos_reviews_overdue", dto.MetricType_GAUGE, ""},
		{"custos_request_duration_seconds", dto.MetricType_HISTOGRAM, "result,sender"},
		{"custos_stage_duration_seconds", dto.MetricType_HISTOGRAM, "stage"},
		{"custos_approval_decision_seconds", dto.MetricType_HISTOGRAM, "outcome"},
		{"custos_approval_subscribers", dto.MetricType_GAUGE, "transport"},
		{"custos_state_commits_total", dto.MetricType_COUNTER, ""},
		{"custos_state_writes_total", dto.MetricType_COUNTER, ""},
		{"custos_transport_refused_total", dto.MetricType_COUNTER, "reason"},
		{"custos_transport_accept_waits_total", dto.MetricType_COUNTER, ""},
		{"custos_transport_connections", dto.MetricType_GAUGE, ""},
		{"custos_transport_body_bytes_in_flight", dto.MetricType_GAUGE, ""},
		{"custos_transport_addresses_tracked", dto.MetricType_GAUGE, ""},
		{"go_goroutines", dto.MetricType_GAUGE, ""},
		{"go_memstats_heap_alloc_bytes", dto.MetricType_GAUGE, ""},
		{"process_resident_memory_bytes", dto.MetricType_GAUGE, ""},
		{"process_cpu_seconds_total", dto.MetricType_COUNTER, ""},
	}
	for _, f := range families {
		mf := mfs[f.name]
		if mf == nil {
			t.Errorf("no %s", f.name)
			continue
		}
		if mf.GetType() != f.typ {
			t.Errorf("%s is a %v, want %v", f.name, mf.GetType(), f.typ)
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s has no help", f.name)
		}
		for _, m := range mf.GetMetric() {
			if got := labelsOf(m); got != f.labels {
				t.Errorf("%s has labels %q, want %q", f.name, got, f.labels)
			}
		}
	}
	counter := func(name string, labels map[string]string) float64 {
		t.Helper()
		m := sample(mfs[name], labels)
		if m == nil {
			t.Fatalf("no %s%v", name, labels)
		}
		return m.GetCounter().GetValue()
	}
	histCount := func(name string, labels map[string]string) uint64 {
		t.Helper()
		m := sample(mfs[name], labels)
		if m == nil {
			t.Fatalf("no %s%v", name, labels)
		}
		return m.GetHistogram().GetSampleCount()
	}
	if n := counter("custos_requests_total", map[string]string{"result": "ok"}); n != 1 {
		t.Errorf("requests ok %v, want 1", n)
	}
	if n := counter("custos_requests_total", map[string]string{"result": "pending_approval"}); n != 1 {
		t.Errorf("requests pending_approval %v, want 1", n)
	}
	if n := counter("custos_unauthenticated_total", map[string]string{"reason": "signature"}); n != 1 {
		t.Errorf("unauthenticated %v, want 1", n)
	}
	if n := counter("custos_approvals_total", map[string]string{"outcome": "approved"}); n != 1 {
		t.Errorf("approvals approved %v, want 1", n)
	}
	if n := counter("custos_executions_total", map[string]string{"outcome": "succeeded"}); n != 2 {
		t.Errorf("executions succeeded %v, want 2", n)
	}
	if n := histCount("custos_request_duration_seconds", map[string]string{"result": "ok", "sender": sender}); n != 1 {
		t.Errorf("request latency of the configured sender: %d observations, want 1", n)
	}
	if n := histCount("custos_request_duration_seconds", map[string]string{"result": "refused", "sender": "other"}); n != 1 {
		t.Errorf("request latency of the forged sender as other: %d observations, want 1", n)
	}
	for _, m := range mfs["custos_request_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "sender" && l.GetValue() != sender && l.GetValue() != "other" {
				t.Errorf("sender label %q: not configured", l.GetValue())
			}
		}
	}
	// verify: three requests; validate and authorize: the two
	// authenticated; handler: both calls; commit: at least one per
	// request and one per call; oversight_wait: the approved one.
	for stage, want := range map[string]uint64{"verify": 3, "validate": 2, "authorize": 2, "handler": 2, "oversight_wait": 1} {
		if n := histCount("custos_stage_duration_seconds", map[string]string{"stage": stage}); n != want {
			t.Errorf("stage %s: %d observations, want %d", stage, n, want)
		}
	}
	if n := histCount("custos_stage_duration_seconds", map[string]string{"stage": "commit"}); n < 4 {
		t.Errorf("stage commit: %d observations, want at least 4", n)
	}
	if n := histCount("custos_approval_decision_seconds", map[string]string{"outcome": "approved"}); n != 1 {
		t.Errorf("decision latency: %d observations, want 1", n)
	}
	if m := sample(mfs["custos_approval_subscribers"], map[string]string{"transport": "sse"}); m == nil || m.GetGauge().GetValue() != 1 {
		t.Errorf("sse subscribers: %v, want 1", m)
	}
	if n := counter("custos_state_commits_total", nil); n < 1 || counter("custos_state_writes_total", nil) < n {
		t.Errorf("state commits %v, writes %v", n, counter("custos_state_writes_total", nil))
	}

	// OpenMetrics: the trace id of the request rides on its latency.
	mfs, ct = g.scrape(t, "application/openmetrics-text; version=1.0.0", "custos_request_duration_seconds")
	if !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("content type %q", ct)
	}
	found := false
	for _, b := range sample(mfs["custos_request_duration_seconds"], map[string]string{"result": "ok", "sender": sender}).GetHistogram().GetBucket() {
		var traceID, spanID string
		for _, l := range b.GetExemplar().GetLabel() {
			switch l.GetName() {
			case "trace_id":
				traceID = l.GetValue()
			case "span_id":
				spanID = l.GetValue()
			}
		}
		if traceID == trace && len(spanID) == 16 {
			found = true
		}
	}
	if !found {
		t.Errorf("no exemplar with trace_id %s and a span_id on the request latency", trace)
	}
}
