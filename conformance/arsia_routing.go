package conformance

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

// execRouting runs the routing suite (ARSIA-Routing): topology, broker
// entries and selection, EU/EEA membership, the delivery lifecycle, relay
// preconditions and audit records, rate-limit headers, priority and the
// routing retry delay.
func execRouting(_ *arsiaEnv, c *arsiaCase) error {
	switch op := c.operation(""); op {
	case "select_topology":
		return routingTopology(c)
	case "validate_broker_entry":
		return expectValidity(c, idemErrorTexts(arsia.ValidateBrokerEntry(c.Input["entry"])))
	case "is_eu_eea_member":
		code, ok := c.Input["country_code"].(string)
		if !ok {
			return fmt.Errorf("%w: input.country_code is not a string", errUnsupported)
		}
		return expectEqual(c, "is_member", arsia.IsEUEEAMember(code))
	case "select_broker_by_priority":
		zone, _ := c.Input["zone"].(string)
		b, ok := arsia.SelectBrokerByPriority(zone, routingBrokers(c.Input["brokers"]))
		var got any
		if ok {
			got = b.AgentID
		}
		return expectEqual(c, "selected_agent_id", got)
	case "select_broker_random":
		return routingRandom(c)
	case "lifecycle_transition":
		from, _ := c.Input["from_state"].(string)
		to, _ := c.Input["to_state"].(string)
		var errs []string
		if !arsia.IsValidDeliveryTransition(arsia.DeliveryState(from), arsia.DeliveryState(to)) {
			errs = append(errs, fmt.Sprintf("transition %s -> %s is not allowed", from, to))
		}
		return expectValidity(c, errs)
	case "validate_relay_preconditions":
		env, err := caseEnvelope(c)
		if err != nil {
			return err
		}
		now, err := idemCaseNow(c)
		if err != nil {
			return err
		}
		broker, err := arsia.ParseBrokerEntry(c.Input["broker"])
		if err == nil {
			err = arsia.CheckRelayPreconditions(env, broker, now)
		}
		return expectValidity(c, idemErrorTexts(err))
	case "parse_rate_limit_headers":
		return routingRateLimit(c)
	case "resolve_priority":
		env, err := caseEnvelope(c)
		if err != nil {
			return err
		}
		var override *int
		if v, present := c.Input["override"]; present && v != nil {
			n, ok := v.(int)
			if !ok {
				return fmt.Errorf("%w: input.override is not an integer", errUnsupported)
			}
			override = &n
		}
		p, err := arsia.ResolvePriority(env, override)
		if done, res := expectRaises(c, err); done {
			return res
		}
		return expectEqual(c, "priority", p)
	case "compute_retry_delay":
		attempt, ok := c.Input["attempt"].(int)
		if !ok {
			return fmt.Errorf("%w: input.attempt is not an integer", errUnsupported)
		}
		d, err := arsia.RoutingRetryDelay(attempt)
		if res := expectValidity(c, idemErrorTexts(err)); res != nil || err != nil {
			return res
		}
		if want, ok := c.Expected["delay_seconds"]; ok {
			w, isNum := arsiaNumber(want)
			if !isNum {
				return errors.New("expected.delay_seconds is not a number")
			}
			if got := d.Seconds(); math.Abs(got-w) > 1e-9 {
				return fmt.Errorf("delay_seconds: got %v, want %v", got, w)
			}
		}
		return nil
	case "build_relay_audit_record":
		return routingRelayAudit(c)
	default:
		return fmt.Errorf("%w: routing operation %q", errUnsupported, op)
	}
}

// routingBrokers converts input brokers; an entry that is not a valid
// broker entry is left out, as the selection functions would skip it.
func routingBrokers(v any) []arsia.BrokerEntry {
	list, _ := v.([]any)
	var out []arsia.BrokerEntry
	for _, e := range list {
		if b, err := arsia.ParseBrokerEntry(e); err == nil {
			out = append(out, b)
		}
	}
	return out
}

func routingTopology(c *arsiaCase) error {
	env, err := caseEnvelope(c)
	if err != nil {
		return err
	}
	zone, err := arsia.DataResidencyOf(env)
	if err != nil {
		return err
	}
	route, err := arsia.SelectTopology(zone, routingBrokers(c.Input["brokers"]))
	topology := string(route.Topology)
	var gotErr map[string]any
	if err != nil {
		var ae *arsia.Error
		if !errors.As(err, &ae) {
			return fmt.Errorf("topology error is not an *arsia.Error: %v", err)
		}
		topology = "error"
		gotErr = map[string]any{"code": ae.WireCode()}
		for _, k := range []string{"required_zone", "available_zones"} {
			if v, ok := ae.Details[k]; ok {
				gotErr[k] = v
			}
		}
	}
	var residency, selected any
	if route.DataResidency != "" {
		residency = route.DataResidency
	}
	if route.Broker != nil {
		selected = route.Broker.AgentID
	}
	res := firstErr(expectEqual(c, "topology", topology), expectEqual(c, "data_residency", residency),
		expectEqual(c, "selected_agent_id", selected))
	if res != nil {
		return res
	}
	if _, want := c.Expected["error"]; want {
		if gotErr == nil {
			return errors.New("expected a topology error, got none")
		}
		return expectSubset(c, "error", gotErr)
	}
	return nil
}

func routingRandom(c *arsiaCase) error {
	zone, _ := c.Input["zone"].(string)
	n, ok := c.Input["iterations"].(int)
	if !ok || n < 1 || n > 10_000 {
		return fmt.Errorf("%w: input.iterations is not an integer in 1..10000", errUnsupported)
	}
	brokers := routingBrokers(c.Input["brokers"])
	first, hasFirst := arsia.SelectBrokerByPriority(zone, brokers)
	anySelected, notAlwaysFirst := false, false
	for range n {
		b, ok, err := arsia.SelectBrokerRandom(zone, brokers, nil)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		anySelected = true
		if !hasFirst || b.AgentID != first.AgentID {
			notAlwaysFirst = true
		}
	}
	return firstErr(expectEqual(c, "any_selected", anySelected), expectEqual(c, "not_always_first", notAlwaysFirst))
}

func routingRateLimit(c *arsiaCase) error {
	in, ok := c.Input["headers"].(map[string]any)
	if !ok {
		return fmt.Errorf("%w: input.headers is not an object", errUnsupported)
	}
	// Keys kept as written, not canonicalized, to exercise the
	// case-insensitive lookup.
	h := http.Header{}
	for k, v := range in {
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		h[k] = []string{s}
	}
	rl := arsia.ParseRateLimitHeaders(h)
	val := func(p *int64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	return firstErr(expectEqual(c, "limit", val(rl.Limit)), expectEqual(c, "remaining", val(rl.Remaining)),
		expectEqual(c, "reset_at", val(rl.ResetAt)), expectEqual(c, "retry_after_seconds", val(rl.RetryAfterSeconds)))
}

func routingRelayAudit(c *arsiaCase) error {
	env, err := caseEnvelope(c)
	if err != nil {
		return err
	}
	// The record's relayed_at comes from input.now when given, else from
	// the envelope ts: executors never read the clock.
	nowText, _ := c.Input["now"].(string)
	if nowText == "" {
		nowText, _ = env["ts"].(string)
	}
	now, err := arsia.ParseTimestamp(nowText)
	if err != nil {
		return fmt.Errorf("relay time: %w", err)
	}
	latency, _ := c.Input["relay_latency_ms"].(int)
	broker, _ := c.Input["broker_agent_id"].(string)
	hash, _ := c.Input["payload_hash"].(string)
	result, _ := c.Input["forwarding_result"].(string)
	rec, err := arsia.NewRelayAuditRecord(env, arsia.RelayAuditInput{
		BrokerAgentID:    broker,
		PayloadHash:      hash,
		RelayedAt:        now,
		RelayLatency:     time.Duration(latency) * time.Millisecond,
		ForwardingResult: arsia.ForwardingResult(result),
	})
	if res := expectValidity(c, idemErrorTexts(err)); res != nil || err != nil {
		return res
	}
	m := rec.Map()
	if len(m) != 11 {
		return fmt.Errorf("relay audit record has %d members, want 11", len(m))
	}
	if err := expectSubset(c, "fields", m); err != nil {
		return err
	}
	present, _ := c.Expected["fields_present"].([]any)
	for _, k := range present {
		if _, ok := m[fmt.Sprint(k)]; !ok {
			return fmt.Errorf("field %v is absent", k)
		}
	}
	absent, _ := c.Expected["fields_absent"].([]any)
	for _, k := range absent {
		if _, ok := m[fmt.Sprint(k)]; ok {
			return fmt.Errorf("field %v is present", k)
		}
	}
	return nil
}
