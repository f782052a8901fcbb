// # Routing
//
// ARSIA-Routing decides how a message travels. DataResidencyOf reads
// compliance.data_residency; SelectTopology sends a message without one
// directly, and one with a residency zone through a Compliance Broker that
// serves the zone, or refuses it with service_unavailable and the
// residency details when none does. BrokerEntry is one entry of a broker
// discovery response (ValidateBrokerEntry, ParseBrokerEntry: schema, EU/EEA
// jurisdiction for the EU zone, matching jurisdiction for a country zone);
// SelectBrokerByPriority and SelectBrokerRandom pick among the eligible
// brokers, healthy before degraded. CheckRelayPreconditions is a broker's
// check before it relays (Rule 2 zone and jurisdiction, Rule 9 remaining
// lifetime), NewRelayAuditRecord the audit record of a relay.
// IsValidDeliveryTransition encodes the delivery lifecycle,
// ParseRateLimitHeaders the X-RateLimit-* and Retry-After headers and
// ResolvePriority the routing priority. Every time-dependent function takes
// now; none reads the clock.
//
// The ARSIA conformance run uses the routing functions, and custos serve
// as a Compliance Broker (package gateway/relay, docs/relay.md) checks
// CheckRelayPreconditions and writes NewRelayAuditRecord's record for
// every relay.
package arsia

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/schema"
)

// Sentinel errors of routing.
var (
	ErrZoneNotServed      = errors.New("arsia: no broker serves the data residency zone")
	ErrInvalidBrokerEntry = errors.New("arsia: invalid broker entry")
	ErrRelayRefused       = errors.New("arsia: relay preconditions not met")
	ErrInvalidRelayAudit  = errors.New("arsia: invalid relay audit record")
	ErrInvalidPriority    = errors.New("arsia: invalid routing priority")
)

// Schema files of the routing objects (package schema).
const (
	BrokerEntrySchema      = "arsia-broker-entry.schema.json"
	BrokerRelayAuditSchema = "arsia-broker-relay-audit.schema.json"
)

// Topology is how a message travels (ARSIA-Routing §1).
type Topology string

// Topologies. Federated is reserved by the specification and never
// selected.
const (
	TopologyDirect    Topology = "direct"
	TopologyBrokered  Topology = "brokered"
	TopologyFederated Topology = "federated"
)

// ZoneEU is the supranational residency zone of the European Union and
// the EEA.
const ZoneEU = "EU"

// euEEA holds the 27 EU member states (ISO 3166-1 alpha-2: Greece is GR)
// and the three EEA states Iceland, Liechtenstein and Norway. Switzerland
// is in neither.
var euEEA = []string{
	"AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE",
	"IT", "LV", "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE",
	"IS", "LI", "NO",
}

// IsEUEEAMember reports whether code is the ISO 3166-1 alpha-2 code of an
// EU or EEA member state. The comparison is exact: "pt" is not a member.
func IsEUEEAMember(code string) bool { return slices.Contains(euEEA, code) }

// BrokerHealth is a broker's health as its last check reported it.
type BrokerHealth string

// Health values. Degraded brokers are used only when no healthy one is
// eligible; unhealthy brokers never.
const (
	BrokerHealthy   BrokerHealth = "healthy"
	BrokerDegraded  BrokerHealth = "degraded"
	BrokerUnhealthy BrokerHealth = "unhealthy"
)

// BrokerCapacity is the optional capacity of a broker entry; nil members
// are absent.
type BrokerCapacity struct {
	RequestsPerMinute *int `json:"requests_per_minute,omitempty"`
	CurrentLoadPct    *int `json:"current_load_pct,omitempty"`
}

// BrokerEntry is one Compliance Broker of a discovery response
// (ARSIA-Routing §7.2, arsia-broker-entry.schema.json).
type BrokerEntry struct {
	AgentID         string          `json:"agent_id"`
	Inbox           string          `json:"inbox"`
	Jurisdiction    string          `json:"jurisdiction"`
	ResidencyZones  []string        `json:"residency_zones"`
	Health          BrokerHealth    `json:"health"`
	LastHealthCheck string          `json:"last_health_check"`
	Capacity        *BrokerCapacity `json:"capacity,omitempty"`
}

// Map returns the generic JSON form of e.
func (e BrokerEntry) Map() map[string]any {
	m := map[string]any{
		"agent_id":          e.AgentID,
		"inbox":             e.Inbox,
		"jurisdiction":      e.Jurisdiction,
		"residency_zones":   anyStrings(e.ResidencyZones),
		"health":            string(e.Health),
		"last_health_check": e.LastHealthCheck,
	}
	if c := e.Capacity; c != nil {
		cm := map[string]any{}
		if c.RequestsPerMinute != nil {
			cm["requests_per_minute"] = *c.RequestsPerMinute
		}
		if c.CurrentLoadPct != nil {
			cm["current_load_pct"] = *c.CurrentLoadPct
		}
		m["capacity"] = cm
	}
	return m
}

// Validate checks e as ValidateBrokerEntry checks its generic form.
func (e BrokerEntry) Validate() error { return ValidateBrokerEntry(e.Map()) }

// Serves reports whether e lists zone among its residency zones (exact
// match: a broker for "EU" does not serve "PT", nor the reverse).
func (e BrokerEntry) Serves(zone string) bool {
	return zone != "" && slices.Contains(e.ResidencyZones, zone)
}

func brokerError(code, format string, args ...any) error {
	return newError(code, ErrInvalidBrokerEntry, format, args...)
}

// ValidateBrokerEntry checks a broker entry in generic JSON form: first
// the JSON Schema (every schema message, "<pointer>: <message>", joined
// with "; "), then the rules the schema cannot express:
//
//   - agent_id is a valid agent identifier (invalid_broker_agent_id);
//   - inbox is an absolute http or https URL with a host and neither
//     credentials nor fragment;
//   - a broker serving zone EU is located in an EU/EEA member state
//     (eu_zone_non_eea_jurisdiction; Rule 2), and one serving a country
//     zone is located in that country (zone_jurisdiction_mismatch);
//   - residency_zones has no duplicates.
//
// The error is an *Error wrapping ErrInvalidBrokerEntry.
func ValidateBrokerEntry(v any) error {
	errs, err := schema.Validate(v, BrokerEntrySchema)
	if err != nil {
		return &Error{Code: CodeInternalError, Description: "The broker entry could not be validated.",
			Err: fmt.Errorf("%w: %w", ErrInvalidBrokerEntry, err)}
	}
	if len(errs) > 0 {
		return brokerError("invalid_broker_entry", "broker entry does not match the schema: %s", schema.Join(errs))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return brokerError("invalid_broker_entry", "broker entry must be a JSON object, got %s", pyRepr(truncateAny(v)))
	}
	id, _ := m["agent_id"].(string)
	if _, err := ParseAgentID(id); err != nil {
		return brokerError("invalid_broker_agent_id", "broker agent_id is invalid: %v", err)
	}
	inbox, _ := m["inbox"].(string)
	if p := inboxProblem(inbox); p != "" {
		return brokerError("invalid_broker_inbox", "broker inbox %s %s", pyRepr(truncateForMessage(inbox)), p)
	}
	jurisdiction, _ := m["jurisdiction"].(string)
	zones, _ := stringsOf(m["residency_zones"])
	for i, z := range zones {
		switch {
		case slices.Contains(zones[:i], z):
			return brokerError("invalid_broker_entry", "broker residency_zones lists %s twice", pyRepr(z))
		case z == ZoneEU && !IsEUEEAMember(jurisdiction):
			return brokerError("eu_zone_non_eea_jurisdiction",
				"broker %s serves zone 'EU' but its jurisdiction %s is not an EU/EEA member state (Rule 2)", pyRepr(id), pyRepr(jurisdiction))
		case z != ZoneEU && z != jurisdiction:
			return brokerError("zone_jurisdiction_mismatch",
				"broker %s serves zone %s but its jurisdiction is %s", pyRepr(id), pyRepr(z), pyRepr(jurisdiction))
		}
	}
	return nil
}

func inboxProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "is not a URL"
	case u.Scheme != "https" && u.Scheme != "http":
		return "must be an absolute http or https URL"
	case u.Host == "":
		return "has no host"
	case u.User != nil:
		return "must not carry credentials"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "must not have a fragment"
	}
	return ""
}

// ParseBrokerEntry validates v (ValidateBrokerEntry) and converts it.
func ParseBrokerEntry(v any) (BrokerEntry, error) {
	if err := ValidateBrokerEntry(v); err != nil {
		return BrokerEntry{}, err
	}
	m, _ := v.(map[string]any) // ValidateBrokerEntry accepted only an object
	e := BrokerEntry{}
	e.AgentID, _ = m["agent_id"].(string)
	e.Inbox, _ = m["inbox"].(string)
	e.Jurisdiction, _ = m["jurisdiction"].(string)
	e.ResidencyZones, _ = stringsOf(m["residency_zones"])
	h, _ := m["health"].(string)
	e.Health = BrokerHealth(h)
	e.LastHealthCheck, _ = m["last_health_check"].(string)
	if c, ok := objectOf(m["capacity"]); ok {
		e.Capacity = &BrokerCapacity{}
		if n, ok := integerOf(c["requests_per_minute"]); ok {
			e.Capacity.RequestsPerMinute = &n
		}
		if n, ok := integerOf(c["current_load_pct"]); ok {
			e.Capacity.CurrentLoadPct = &n
		}
	}
	return e, nil
}

// eligibleBrokers returns the valid brokers that serve zone, healthy ones
// first then degraded ones, each group in input order. Invalid entries
// (an EU broker outside the EU/EEA, ...) are never eligible.
func eligibleBrokers(zone string, brokers []BrokerEntry) (healthy, degraded []BrokerEntry) {
	for _, b := range brokers {
		if !b.Serves(zone) || b.Validate() != nil {
			continue
		}
		switch b.Health {
		case BrokerHealthy:
			healthy = append(healthy, b)
		case BrokerDegraded:
			degraded = append(degraded, b)
		}
	}
	return healthy, degraded
}

// SelectBrokerByPriority returns the first eligible broker for zone: valid
// (ValidateBrokerEntry), serving the zone, healthy, in input order; when
// none is healthy, the first degraded one. ok is false when no broker is
// eligible.
func SelectBrokerByPriority(zone string, brokers []BrokerEntry) (BrokerEntry, bool) {
	healthy, degraded := eligibleBrokers(zone, brokers)
	for _, pool := range [][]BrokerEntry{healthy, degraded} {
		if len(pool) > 0 {
			return pool[0], true
		}
	}
	return BrokerEntry{}, false
}

// SelectBrokerRandom returns an eligible broker for zone chosen uniformly
// at random among the healthy ones, or among the degraded ones when none
// is healthy (ARSIA-Routing §1.4 criterion 4), using r (crypto/rand when
// nil). ok is false when no broker is eligible; err reports a failing r.
func SelectBrokerRandom(zone string, brokers []BrokerEntry, r io.Reader) (b BrokerEntry, ok bool, err error) {
	if r == nil {
		r = rand.Reader
	}
	healthy, degraded := eligibleBrokers(zone, brokers)
	pool := healthy
	if len(pool) == 0 {
		pool = degraded
	}
	if len(pool) == 0 {
		return BrokerEntry{}, false, nil
	}
	i, err := rand.Int(r, big.NewInt(int64(len(pool))))
	if err != nil {
		return BrokerEntry{}, false, fmt.Errorf("arsia: random broker selection: %w", err)
	}
	return pool[i.Int64()], true, nil
}

// DataResidencyOf returns env's compliance.data_residency, "" when it is
// absent or empty (an empty zone is the same as none). A compliance or
// data_residency of the wrong JSON type is an error (invalid_data_residency):
// a zone that cannot be read must not be mistaken for no zone.
//
// It reads the envelope as written. To route on a residency that a
// compliance profile supplies by default, pass the envelope that
// compliance.Apply returns.
func DataResidencyOf(env map[string]any) (string, error) {
	c, present := env["compliance"]
	if !present || c == nil {
		return "", nil
	}
	comp, ok := objectOf(c)
	if !ok {
		return "", newError("invalid_data_residency", ErrInvalidEnvelope, "compliance must be an object, got %s", pyRepr(truncateAny(c)))
	}
	z, present := comp["data_residency"]
	if !present || z == nil {
		return "", nil
	}
	zone, ok := z.(string)
	if !ok {
		return "", newError("invalid_data_residency", ErrInvalidEnvelope,
			"compliance.data_residency must be a string, got %s", pyRepr(truncateAny(z)))
	}
	return zone, nil
}

// Route is the outcome of SelectTopology.
type Route struct {
	Topology Topology
	// DataResidency is the zone the route must satisfy; "" for direct.
	DataResidency string
	// Broker is the selected broker of a brokered route.
	Broker *BrokerEntry
}

// SelectTopology routes a message whose residency zone is zone (see
// DataResidencyOf) given the discovered brokers (ARSIA-Routing §1.3): no
// zone means direct; any zone requires a broker, the first one
// SelectBrokerByPriority picks. When there is none the message must not
// travel: the error is an *Error with code zone_not_served (wire
// service_unavailable), wrapping ErrZoneNotServed, whose details are
// {data_residency_violation: true, required_zone, available_zones}, the
// zones the usable brokers serve, in first-seen order. The returned Route
// then carries only DataResidency.
func SelectTopology(zone string, brokers []BrokerEntry) (Route, error) {
	if zone == "" {
		return Route{Topology: TopologyDirect}, nil
	}
	if b, ok := SelectBrokerByPriority(zone, brokers); ok {
		return Route{Topology: TopologyBrokered, DataResidency: zone, Broker: &b}, nil
	}
	available := []any{}
	for _, b := range brokers {
		if b.Health == BrokerUnhealthy || b.Validate() != nil {
			continue
		}
		for _, z := range b.ResidencyZones {
			if !slices.Contains(available, any(z)) {
				available = append(available, z)
			}
		}
	}
	return Route{DataResidency: zone}, &Error{
		Code:        "zone_not_served",
		Description: "No broker is available for the required data residency zone.",
		Details: map[string]any{
			"data_residency_violation": true,
			"required_zone":            zone,
			"available_zones":          available,
		},
		Err: ErrZoneNotServed,
	}
}

// Relay limits (ARSIA-Routing §7.3).
const (
	// RelayExpiryMargin is the least lifetime a message must have left
	// for a broker to relay it (Rule 9).
	RelayExpiryMargin = 5 * time.Second
	// RelayForwardTimeout bounds one forwarding attempt of a broker.
	RelayForwardTimeout = 10 * time.Second
)

// CheckRelayPreconditions is a broker's check before it relays env
// (ARSIA-Routing §7.3):
//
//   - Rule 2: env has a residency zone, broker is a valid entry that
//     lists it, and for zone EU is located in an EU/EEA member state.
//     A refusal is code zone_not_served (wire service_unavailable) with
//     details {data_residency_violation, required_zone,
//     broker_jurisdiction};
//   - Rule 9: when env has expires_at, at least RelayExpiryMargin of its
//     lifetime is left at now (expiry_too_soon); an unreadable expires_at
//     is invalid_expires_at.
//
// Messages name the rule ("Rule 2", "Rule 9"). Errors wrap ErrRelayRefused.
func CheckRelayPreconditions(env map[string]any, broker BrokerEntry, now time.Time) error {
	if now.IsZero() {
		return fmt.Errorf("%w: %w: now is required", ErrRelayRefused, ErrNoClock)
	}
	zone, err := DataResidencyOf(env)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRelayRefused, err)
	}
	rule2 := func(format string, args ...any) error {
		details := map[string]any{"data_residency_violation": true, "required_zone": zone}
		if broker.Jurisdiction != "" {
			details["broker_jurisdiction"] = broker.Jurisdiction
		}
		return &Error{Code: "zone_not_served", Description: "Rule 2: " + fmt.Sprintf(format, args...),
			Details: details, Err: ErrRelayRefused}
	}
	switch {
	case zone == "":
		return newError("invalid_data_residency", ErrRelayRefused,
			"Rule 2: the message has no compliance.data_residency; a broker relays only for a residency zone")
	case !broker.Serves(zone):
		return rule2("broker %s does not serve residency zone %s (it serves %s)",
			pyRepr(broker.AgentID), pyRepr(zone), pyRepr(anyStrings(broker.ResidencyZones)))
	case zone == ZoneEU && !IsEUEEAMember(broker.Jurisdiction):
		return rule2("broker %s jurisdiction %s is not an EU/EEA member state, as zone 'EU' requires",
			pyRepr(broker.AgentID), pyRepr(broker.Jurisdiction))
	}
	if err := broker.Validate(); err != nil {
		return rule2("broker entry is invalid: %v", err)
	}
	raw, present := env["expires_at"]
	if !present {
		return nil
	}
	s, _ := raw.(string)
	exp, err := ParseTimestamp(s)
	if err != nil {
		return newError("invalid_expires_at", ErrRelayRefused, "Rule 9: expires_at %s is not a valid timestamp", pyRepr(truncateAny(raw)))
	}
	if left := exp.Sub(now); left < RelayExpiryMargin {
		return newError("expiry_too_soon", ErrRelayRefused,
			"Rule 9: the message expires at %s, %s after now; relaying needs at least %s", s, left, RelayExpiryMargin)
	}
	return nil
}

// ForwardingResult is the outcome of a relay.
type ForwardingResult string

// Forwarding results. Timeout also records a relay refused under Rule 9.
const (
	ForwardingSuccess ForwardingResult = "success"
	ForwardingFailure ForwardingResult = "failure"
	ForwardingTimeout ForwardingResult = "timeout"
)

// RelayAuditRecord is the audit record a broker writes for every relay
// (ARSIA-Routing §7.4, arsia-broker-relay-audit.schema.json): exactly
// these 11 members and never the payload.
type RelayAuditRecord struct {
	AuditType        string           `json:"audit_type"`
	RelayID          string           `json:"relay_id"`
	MessageID        string           `json:"message_id"`
	FromAgent        string           `json:"from_agent"`
	ToAgent          string           `json:"to_agent"`
	BrokerAgentID    string           `json:"broker_agent_id"`
	ResidencyZone    string           `json:"residency_zone"`
	RelayedAt        string           `json:"relayed_at"`
	PayloadHash      string           `json:"payload_hash"`
	RelayLatencyMS   int64            `json:"relay_latency_ms"`
	ForwardingResult ForwardingResult `json:"forwarding_result"`
}

// RelayAuditTypeBrokerRelay is the fixed audit_type of a relay record.
const RelayAuditTypeBrokerRelay = "broker_relay"

// Map returns the generic JSON form of r (11 members).
func (r *RelayAuditRecord) Map() map[string]any {
	return map[string]any{
		"audit_type":        r.AuditType,
		"relay_id":          r.RelayID,
		"message_id":        r.MessageID,
		"from_agent":        r.FromAgent,
		"to_agent":          r.ToAgent,
		"broker_agent_id":   r.BrokerAgentID,
		"residency_zone":    r.ResidencyZone,
		"relayed_at":        r.RelayedAt,
		"payload_hash":      r.PayloadHash,
		"relay_latency_ms":  r.RelayLatencyMS,
		"forwarding_result": string(r.ForwardingResult),
	}
}

// Validate checks r against the relay audit schema.
func (r *RelayAuditRecord) Validate() error {
	errs, err := schema.Validate(r.Map(), BrokerRelayAuditSchema)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRelayAudit, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidRelayAudit, schema.Join(errs))
	}
	return nil
}

// RelayAuditInput is what NewRelayAuditRecord needs beyond the envelope.
type RelayAuditInput struct {
	// BrokerAgentID is the relaying broker's own agent identifier.
	BrokerAgentID string
	// ResidencyZone is the zone the relay satisfies; "" means the
	// envelope's compliance.data_residency.
	ResidencyZone string
	// PayloadHash is the lower-case hex SHA-256 of the payload; "" means
	// compute it (compliance.PayloadHash: JCS of the payload object, or
	// the JWE string when encrypted).
	PayloadHash string
	// RelayedAt is when the relay happened; required.
	RelayedAt time.Time
	// RelayLatency is the time from receipt to forward initiation; it is
	// recorded in whole milliseconds and must not be negative.
	RelayLatency time.Duration
	// ForwardingResult is success, failure or timeout.
	ForwardingResult ForwardingResult
	// Rand is the source of relay_id; nil means crypto/rand.
	Rand io.Reader
}

// NewRelayAuditRecord builds the audit record of relaying env and checks
// it against the schema, so that no record with a missing or malformed
// member is ever written. Errors wrap ErrInvalidRelayAudit.
func NewRelayAuditRecord(env map[string]any, in RelayAuditInput) (*RelayAuditRecord, error) {
	if in.RelayedAt.IsZero() {
		return nil, fmt.Errorf("%w: %w: RelayedAt is required", ErrInvalidRelayAudit, ErrNoClock)
	}
	if in.RelayLatency < 0 {
		return nil, fmt.Errorf("%w: relay latency %s is negative", ErrInvalidRelayAudit, in.RelayLatency)
	}
	zone := in.ResidencyZone
	if zone == "" {
		z, err := DataResidencyOf(env)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRelayAudit, err)
		}
		zone = z
	}
	hash := in.PayloadHash
	if hash == "" {
		h, err := compliance.PayloadHash(env)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRelayAudit, err)
		}
		hash = h
	}
	relayID, err := newIDFromOrRand(in.Rand)
	if err != nil {
		return nil, fmt.Errorf("%w: relay_id: %w", ErrInvalidRelayAudit, err)
	}
	str := func(k string) string { s, _ := env[k].(string); return s }
	r := &RelayAuditRecord{
		AuditType:        RelayAuditTypeBrokerRelay,
		RelayID:          relayID,
		MessageID:        str("id"),
		FromAgent:        str("from"),
		ToAgent:          str("to"),
		BrokerAgentID:    in.BrokerAgentID,
		ResidencyZone:    zone,
		RelayedAt:        FormatTimestamp(in.RelayedAt),
		PayloadHash:      hash,
		RelayLatencyMS:   in.RelayLatency.Milliseconds(),
		ForwardingResult: in.ForwardingResult,
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

func newIDFromOrRand(r io.Reader) (string, error) {
	if r == nil {
		return NewID(), nil
	}
	return newIDFrom(r)
}

// DeliveryState is a state of the delivery lifecycle (ARSIA-Routing §4).
type DeliveryState string

// The nine delivery states.
const (
	DeliveryCreated        DeliveryState = "created"
	DeliverySigned         DeliveryState = "signed"
	DeliveryDispatched     DeliveryState = "dispatched"
	DeliveryBrokerRelayed  DeliveryState = "broker_relayed"
	DeliveryDelivered      DeliveryState = "delivered"
	DeliveryDispatchFailed DeliveryState = "dispatch_failed"
	DeliveryFailed         DeliveryState = "delivery_failed"
	DeliveryResponded      DeliveryState = "responded"
	DeliveryExpired        DeliveryState = "expired"
)

// deliveryTransitions lists the allowed successors of each state. Only a
// message in flight (dispatched, broker_relayed) can expire; a failed
// dispatch or delivery is retried by dispatching again; once relayed by a
// broker, a failure is the broker's dispatch failure, never a delivery
// failure of the sender; responded and expired are terminal.
var deliveryTransitions = map[DeliveryState][]DeliveryState{
	DeliveryCreated:        {DeliverySigned},
	DeliverySigned:         {DeliveryDispatched},
	DeliveryDispatched:     {DeliveryDelivered, DeliveryBrokerRelayed, DeliveryDispatchFailed, DeliveryFailed, DeliveryExpired},
	DeliveryBrokerRelayed:  {DeliveryDelivered, DeliveryDispatchFailed, DeliveryExpired},
	DeliveryDelivered:      {DeliveryResponded},
	DeliveryDispatchFailed: {DeliveryDispatched},
	DeliveryFailed:         {DeliveryDispatched},
	DeliveryResponded:      nil,
	DeliveryExpired:        nil,
}

// DeliveryStates returns the nine delivery states in lifecycle order.
func DeliveryStates() []DeliveryState {
	return []DeliveryState{DeliveryCreated, DeliverySigned, DeliveryDispatched, DeliveryBrokerRelayed,
		DeliveryDelivered, DeliveryDispatchFailed, DeliveryFailed, DeliveryResponded, DeliveryExpired}
}

// Valid reports whether s is one of the nine delivery states.
func (s DeliveryState) Valid() bool {
	_, ok := deliveryTransitions[s]
	return ok
}

// IsValidDeliveryTransition reports whether a message may move from one
// delivery state to another. Unknown states allow nothing.
func IsValidDeliveryTransition(from, to DeliveryState) bool {
	return slices.Contains(deliveryTransitions[from], to)
}

// IsTerminalDeliveryState reports whether s has no successor (responded,
// expired).
func IsTerminalDeliveryState(s DeliveryState) bool {
	next, ok := deliveryTransitions[s]
	return ok && len(next) == 0
}

// Rate-limit headers (ARSIA-Routing §6.2).
const (
	HeaderRateLimitLimit     = "X-RateLimit-Limit"
	HeaderRateLimitRemaining = "X-RateLimit-Remaining"
	HeaderRateLimitReset     = "X-RateLimit-Reset"
	HeaderRetryAfter         = "Retry-After"
)

// RateLimit is what a peer's rate-limit headers say; nil members were
// absent or unreadable.
type RateLimit struct {
	Limit     *int64
	Remaining *int64
	// ResetAt is when the window resets, in Unix seconds.
	ResetAt *int64
	// RetryAfterSeconds is Retry-After in seconds.
	RetryAfterSeconds *int64
}

// ParseRateLimitHeaders reads X-RateLimit-Limit, X-RateLimit-Remaining,
// X-RateLimit-Reset (Unix seconds) and Retry-After from h, an http.Header
// or any header map. Names match case-insensitively, even when h was built
// without canonical keys; the first value counts. Values must be
// non-negative decimal integers (surrounding blanks allowed); anything
// else, including the HTTP-date form of Retry-After, which would need a
// clock, leaves the member nil.
func ParseRateLimitHeaders(h map[string][]string) RateLimit {
	return RateLimit{
		Limit:             headerInt(h, HeaderRateLimitLimit),
		Remaining:         headerInt(h, HeaderRateLimitRemaining),
		ResetAt:           headerInt(h, HeaderRateLimitReset),
		RetryAfterSeconds: headerInt(h, HeaderRetryAfter),
	}
}

func headerInt(h map[string][]string, name string) *int64 {
	vals, ok := h[textproto.CanonicalMIMEHeaderKey(name)]
	if !ok {
		// Non-canonical keys: take the smallest matching one, so that the
		// result does not depend on map order.
		var match string
		for k := range h {
			if strings.EqualFold(k, name) && (!ok || k < match) {
				match, ok = k, true
			}
		}
		vals = h[match]
	}
	if !ok || len(vals) == 0 {
		return nil
	}
	s := strings.TrimSpace(vals[0])
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

// Routing priorities (ARSIA-Routing §5).
const (
	MinPriority     = 0
	MaxPriority     = 10
	DefaultPriority = 5
)

// ResolvePriority returns the routing priority of env: override when not
// nil, else context.priority, else DefaultPriority. A priority outside
// MinPriority..MaxPriority, or a context.priority that is not an integer,
// is an error (ErrInvalidPriority) rather than silently defaulted.
func ResolvePriority(env map[string]any, override *int) (int, error) {
	check := func(p int, what string) (int, error) {
		if p < MinPriority || p > MaxPriority {
			return 0, fmt.Errorf("%w: %s %d is not in %d..%d", ErrInvalidPriority, what, p, MinPriority, MaxPriority)
		}
		return p, nil
	}
	if override != nil {
		return check(*override, "override")
	}
	cv, present := env["context"]
	if !present || cv == nil {
		return DefaultPriority, nil
	}
	c, ok := objectOf(cv)
	if !ok {
		return 0, fmt.Errorf("%w: context must be an object, got %s", ErrInvalidPriority, pyRepr(truncateAny(cv)))
	}
	v, present := c["priority"]
	if !present || v == nil {
		return DefaultPriority, nil
	}
	p, ok := integerOf(v)
	if !ok {
		return 0, fmt.Errorf("%w: context.priority must be an integer, got %s", ErrInvalidPriority, pyRepr(truncateAny(v)))
	}
	return check(p, "context.priority")
}
