package gateway

import (
	"context"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/gateway/exchange"
)

// otherLabel is the label value of everything a metric does not name on
// its own: a sender the configuration does not know, an outcome the
// gateway has no word for. Label values never come unbounded from a
// request.
const otherLabel = "other"

// The pipeline stages timed by custos_stage_duration_seconds.
const (
	stageVerify    = "verify"    // the signature, by the sender's key
	stageDecrypt   = "decrypt"   // an encrypted payload, by the gateway's key
	stageValidate  = "validate"  // freshness, version, L1/L2, compliance
	stageAuthorize = "authorize" // recipient, trust, token, grants, handler, action
	stageOversight = "oversight_wait"
	stageHandler   = "handler" // the handler's call
	stageCommit    = "commit"  // a unit of work: the writes of one step
)

var stageNames = []string{stageVerify, stageDecrypt, stageValidate, stageAuthorize, stageOversight, stageHandler, stageCommit}

// counterHelp lists the gateway's counters, their one label and the label
// values each can take: any other value counts as "other".
var counterHelp = []struct {
	name, label, help string
	values            []string
}{
	{"custos_requests_total", "result", "ARSIA requests received, by how the gateway answered them.",
		[]string{"ok", "pending_approval", "refused", "rate_limited", "error"}},
	{"custos_unauthenticated_total", "reason", "Requests refused before their signature verified (nothing stored), by reason.",
		[]string{"malformed", "signature", "revoked"}},
	{"custos_executions_total", "outcome", "Calls the handlers ran, by outcome.", []string{"succeeded", "failed"}},
	{"custos_approvals_total", "outcome", "Approval requests resolved for the gateway, by outcome.",
		[]string{string(aais.OutcomeApproved), string(aais.OutcomeDenied), string(aais.OutcomeCancelled),
			string(aais.OutcomeExpired), string(aais.OutcomeStale)}},
	{"custos_oversight_timeouts_total", "mode", "Post-execution reviews that became overdue (oversight_timeout), by oversight mode.",
		[]string{string(compliance.OversightRequiredPostExecution), string(compliance.OversightRequiredWithin24h)}},
	{"custos_callbacks_total", "result", "Callback delivery attempts, by result.", []string{"delivered", "failed", "given_up"}},
	{"custos_relays_total", "result", "Relay attempts as a Compliance Broker that were recorded, by forwarding_result.",
		[]string{string(arsia.ForwardingSuccess), string(arsia.ForwardingFailure), string(arsia.ForwardingTimeout)}},
}

// latencyBuckets (seconds) span a cached call (well under a millisecond)
// to a slow upstream (half a minute).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// decisionBuckets (seconds) span a rule's instant approval to a reviewer
// who answers within the day.
var decisionBuckets = []float64{.1, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600}

// metrics is what the gateway counts and times, registered on one
// Prometheus registry.
type metrics struct {
	reg *prometheus.Registry
	// counters by name; each child by label value, made at New so that
	// counting takes no lock and every value is exported from zero on.
	counters map[string]map[string]prometheus.Counter
	// latency is the end-to-end time of Receive, by result and sender.
	latency *prometheus.HistogramVec
	// stages by stage name.
	stages map[string]prometheus.Observer
	// decision is created -> decided of the approvals the gateway waits
	// for, by outcome.
	decision *prometheus.HistogramVec
	// senders are the agent ids the configuration names (grants and
	// callbacks): the sender label's values besides "other".
	senders map[string]bool
}

// newMetrics registers the gateway's metrics on reg (a registry of its own,
// with the Go runtime and process collectors, when nil).
func newMetrics(g *Gateway, reg *prometheus.Registry) (metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
		if err := reg.Register(collectors.NewGoCollector()); err != nil {
			return metrics{}, err
		}
		if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return metrics{}, err
		}
	}
	m := metrics{reg: reg, counters: map[string]map[string]prometheus.Counter{}, stages: map[string]prometheus.Observer{},
		senders: map[string]bool{}}
	var cs []prometheus.Collector
	for _, c := range counterHelp {
		vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: c.name, Help: c.help}, []string{c.label})
		byValue := map[string]prometheus.Counter{}
		for _, v := range append(c.values, otherLabel) {
			byValue[v] = vec.WithLabelValues(v)
		}
		m.counters[c.name] = byValue
		cs = append(cs, vec)
	}
	for s := range g.o.Grants {
		m.senders[s] = true
	}
	for s := range g.o.Callbacks {
		m.senders[s] = true
	}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "custos_request_duration_seconds",
		Help:    "Time from receiving an ARSIA request to its reply, by result and sender (a sender the configuration does not name, or one not authenticated, is \"other\").",
		Buckets: latencyBuckets}, []string{"result", "sender"})
	stages := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "custos_stage_duration_seconds",
		Help:    "Time spent in each pipeline stage (verify, validate, authorize, oversight_wait, handler, commit).",
		Buckets: latencyBuckets}, []string{"stage"})
	for _, s := range stageNames {
		m.stages[s] = stages.WithLabelValues(s)
	}
	m.decision = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "custos_approval_decision_seconds",
		Help:    "Time from an approval request's creation to its resolution, for the requests the gateway waits for, by outcome.",
		Buckets: decisionBuckets}, []string{"outcome"})
	cs = append(cs, m.latency, stages, m.decision, &storeGauges{g: g})
	if c, ok := g.o.Units.(commitCounter); ok {
		cs = append(cs,
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "custos_state_commits_total",
				Help: "Write transactions the SQLite state file committed (group commit: one carries several writes)."},
				func() float64 { n, _ := c.Commits(); return float64(n) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "custos_state_writes_total",
				Help: "Writes the state file's transactions carried; divided by custos_state_commits_total, the mean batch."},
				func() float64 { _, n := c.Commits(); return float64(n) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return metrics{}, err
		}
	}
	return m, nil
}

// commitCounter is a unit of work that counts its commits (store.State).
type commitCounter interface {
	Commits() (commits, writes uint64)
}

// inc adds one to a counter; a label value it does not list counts as
// "other".
func (m *metrics) inc(name, label string) {
	byValue := m.counters[name]
	c, ok := byValue[label]
	if !ok {
		c = byValue[otherLabel]
	}
	c.Inc()
}

// sender is the sender label of a request: its agent id when the signature
// verified and the configuration names it, "other" otherwise.
func (m *metrics) sender(who *requestInfo) string {
	if who.verified && m.senders[who.agent] {
		return who.agent
	}
	return otherLabel
}

// observe records d on o, with the trace (and span) id of ctx as exemplar
// when there is one.
func observe(ctx context.Context, o prometheus.Observer, d time.Duration) {
	traceID, spanID := exemplarOf(ctx)
	if traceID != "" {
		if e, ok := o.(prometheus.ExemplarObserver); ok {
			l := prometheus.Labels{"trace_id": traceID}
			if spanID != "" {
				l["span_id"] = spanID
			}
			e.ObserveWithExemplar(d.Seconds(), l)
			return
		}
	}
	o.Observe(d.Seconds())
}

// decided records an approval's time from creation to resolution.
func (m *metrics) decided(ctx context.Context, req *aais.Request, res *aais.Resolution) {
	if req == nil || res == nil || req.CreatedAt.IsZero() || res.ResolvedAt.IsZero() {
		return
	}
	d := res.ResolvedAt.Time().Sub(req.CreatedAt.Time())
	if d < 0 {
		d = 0
	}
	outcome := string(res.Outcome)
	if _, ok := m.counters["custos_approvals_total"][outcome]; !ok || outcome == otherLabel {
		outcome = otherLabel
	}
	observe(ctx, m.decision.WithLabelValues(outcome), d)
}

// storeGauges reads the gauges that count what the stores hold (requests
// waiting for a decision, reviews open) at each scrape. A store that does
// not answer fails the scrape.
type storeGauges struct{ g *Gateway }

var (
	descWaiting = prometheus.NewDesc("custos_approvals_waiting", "Requests waiting for a human decision.", nil, nil)
	descOverdue = prometheus.NewDesc("custos_approvals_overdue", "Waiting requests past their deadline, not yet swept.", nil, nil)
	descOpen    = prometheus.NewDesc("custos_reviews_open", "Post-execution reviews waiting for a reviewer.", nil, nil)
	descLate    = prometheus.NewDesc("custos_reviews_overdue", "Open reviews past their deadline.", nil, nil)
)

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 10 * time.Second

func (s *storeGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descWaiting, descOverdue, descOpen, descLate} {
		ch <- d
	}
}

func (s *storeGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	g := s.g
	waiting, err := g.o.Exchanges.Waiting(ctx, exchange.PendingApproval)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descWaiting, err)
		return
	}
	overdue := 0
	now := g.o.Now()
	for _, x := range waiting {
		if !x.Deadline.IsZero() && !now.Before(x.Deadline) {
			overdue++
		}
	}
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(len(waiting)))
	ch <- prometheus.MustNewConstMetric(descOverdue, prometheus.GaugeValue, float64(overdue))
	open, late, err := g.o.Exchanges.ReviewCounts(ctx, now)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descOpen, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(descLate, prometheus.GaugeValue, float64(late))
}

// Metrics is the registry the gateway's metrics are on (Options.Metrics,
// or one of its own with the Go runtime and process collectors): serve it
// with httpapi.NewInbox, or register more collectors on it.
func (g *Gateway) Metrics() *prometheus.Registry { return g.metrics.reg }

// WriteMetrics writes the gateway's metrics in the Prometheus text
// exposition format; it fails when a store does not answer.
func (g *Gateway) WriteMetrics(ctx context.Context, w io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	mfs, err := g.metrics.reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}
