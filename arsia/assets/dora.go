package assets

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/custos-runtime/custos/arsia"
)

// IncidentType classifies an ICT incident (§6.2.1).
type IncidentType string

// The incident types of the DORA incident event.
const (
	ProviderUnavailable IncidentType = "provider_unavailable"
	NetworkFailure      IncidentType = "network_failure"
	DatabaseFailure     IncidentType = "database_failure"
	BrokerFailure       IncidentType = "broker_failure"
	TLSFailure          IncidentType = "tls_failure"
	UnknownIncident     IncidentType = "unknown"
)

// IncidentTypes returns the six incident types.
func IncidentTypes() []IncidentType {
	return []IncidentType{ProviderUnavailable, NetworkFailure, DatabaseFailure, BrokerFailure, TLSFailure, UnknownIncident}
}

// Valid reports whether t is one of the six incident types.
func (t IncidentType) Valid() bool { return slices.Contains(IncidentTypes(), t) }

// incidentKeywords drives ClassifyDORAIncident. Rules are tried in order
// and the first type with a matching phrase wins, so the more specific
// causes (TLS, broker, database) come before the generic ones (a "TLS
// handshake timeout" is a TLS failure, not a provider outage). A phrase is
// a sequence of whole words, compared case-insensitively.
var incidentKeywords = []struct {
	t       IncidentType
	phrases []string
}{
	{TLSFailure, []string{"tls", "ssl", "handshake", "certificate", "x509", "x.509"}},
	{BrokerFailure, []string{"broker", "relay"}},
	{DatabaseFailure, []string{"database", "db", "sql", "postgres", "postgresql", "mysql", "sqlite"}},
	{NetworkFailure, []string{"network", "connection refused", "connection reset", "connection aborted",
		"connection closed", "dns", "socket", "tcp", "econnrefused", "econnreset", "no route to host", "host unreachable"}},
	{ProviderUnavailable, []string{"timeout", "timed out", "unavailable", "unreachable",
		"service unavailable", "gateway timeout", "503", "504"}},
}

// ClassifyDORAIncident maps a failure reason to the DORA incident type of
// its infrastructure cause by keyword (§6.2.1): "TLS handshake failed at
// upstream provider" is tls_failure. ok is false when no keyword matches:
// the failure is then not recognised as an infrastructure failure, and a
// caller that still reports it must use UnknownIncident. Business-logic
// failures ("insufficient funds") match nothing.
func ClassifyDORAIncident(failureReason string) (t IncidentType, ok bool) {
	words := splitWords(failureReason)
	for _, rule := range incidentKeywords {
		for _, phrase := range rule.phrases {
			if containsPhrase(words, strings.Fields(phrase)) {
				return rule.t, true
			}
		}
	}
	return "", false
}

// splitWords lower-cases s and splits it into words of letters, digits and
// dots (so "x.509" stays whole); trailing dots are dropped.
func splitWords(s string) []string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, " ")
	}
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.'
	})
	out := f[:0]
	for _, w := range f {
		if w = strings.Trim(w, "."); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func containsPhrase(words, phrase []string) bool {
	if len(phrase) == 0 {
		return false
	}
	for i := 0; i+len(phrase) <= len(words); i++ {
		if slices.Equal(words[i:i+len(phrase)], phrase) {
			return true
		}
	}
	return false
}

// Severity is the protocol-level severity hint of a DORA incident.
type Severity string

// The four severities (§6.2.2).
const (
	SeverityLow      Severity = "low"
	SeverityMedium   Severity = "medium"
	SeverityHigh     Severity = "high"
	SeverityCritical Severity = "critical"
)

// Valid reports whether s is low, medium, high or critical.
func (s Severity) Valid() bool {
	return s == SeverityLow || s == SeverityMedium || s == SeverityHigh || s == SeverityCritical
}

// DORAIncident is the data of a DORA incident event (§6.2.2). ResolvedAt
// is nil while the incident is ongoing and is then written as null.
type DORAIncident struct {
	IncidentType             IncidentType `json:"incident_type"`
	AffectedService          string       `json:"affected_service"`
	StartedAt                string       `json:"started_at"`
	ResolvedAt               *string      `json:"resolved_at"`
	EstimatedImpact          string       `json:"estimated_impact"`
	Severity                 Severity     `json:"severity"`
	OriginalPaymentReference string       `json:"original_payment_reference"`
}

// BuildDORAIncident checks the fields of a DORA incident event and
// returns them ready to send: incident_type and severity from their enums,
// affected_service an agent identifier, started_at (and resolved_at, when
// set, not earlier) wire timestamps, estimated_impact 1-512 characters,
// original_payment_reference 1-128. Every problem is reported, joined, each
// wrapping ErrDORAIncident.
func BuildDORAIncident(in DORAIncident) (*DORAIncident, error) {
	var p problems
	bad := func(field, format string, args ...any) {
		p.invalid("/"+field, ErrDORAIncident, fmt.Sprintf(format, args...))
	}
	if !in.IncidentType.Valid() {
		bad("incident_type", "incident_type %q is not one of provider_unavailable, network_failure, database_failure, broker_failure, tls_failure, unknown", string(in.IncidentType))
	}
	if !in.Severity.Valid() {
		bad("severity", "severity %q is not one of low, medium, high, critical", string(in.Severity))
	}
	if !arsia.ValidAgentID(in.AffectedService) {
		bad("affected_service", "affected_service %q is not a valid agent identifier", in.AffectedService)
	}
	started, err := arsia.ParseTimestamp(in.StartedAt)
	if err != nil {
		bad("started_at", "started_at is not a wire timestamp: %v", err)
	}
	if in.ResolvedAt != nil {
		resolved, rerr := arsia.ParseTimestamp(*in.ResolvedAt)
		switch {
		case rerr != nil:
			bad("resolved_at", "resolved_at is not a wire timestamp: %v", rerr)
		case err == nil && resolved.Before(started):
			bad("resolved_at", "resolved_at must not be earlier than started_at")
		}
	}
	if n := utf8.RuneCountInString(in.EstimatedImpact); n < 1 || n > 512 {
		bad("estimated_impact", "estimated_impact must be 1-512 characters")
	}
	if n := utf8.RuneCountInString(in.OriginalPaymentReference); n < 1 || n > 128 {
		bad("original_payment_reference", "original_payment_reference must be 1-128 characters")
	}
	if len(p) > 0 {
		return nil, Join(p)
	}
	out := in
	if in.ResolvedAt != nil {
		r := *in.ResolvedAt
		out.ResolvedAt = &r
	}
	return &out, nil
}

// Payload returns the event's payload object {type, version, data}
// (arsia-dora-incident.schema.json), to send with intent "event" to the
// operator's DORA reporting agent.
func (d *DORAIncident) Payload() map[string]any {
	var resolved any
	if d.ResolvedAt != nil {
		resolved = *d.ResolvedAt
	}
	return map[string]any{
		"type":    PayloadDORAIncident,
		"version": "1.0",
		"data": map[string]any{
			"incident_type":              string(d.IncidentType),
			"affected_service":           d.AffectedService,
			"started_at":                 d.StartedAt,
			"resolved_at":                resolved,
			"estimated_impact":           d.EstimatedImpact,
			"severity":                   string(d.Severity),
			"original_payment_reference": d.OriginalPaymentReference,
		},
	}
}

// Resolve returns a copy of the incident marked resolved at t, the
// follow-up event §6.2.2 asks for.
func (d *DORAIncident) Resolve(t time.Time) (*DORAIncident, error) {
	r := arsia.FormatTimestamp(t)
	next := *d
	next.ResolvedAt = &r
	return BuildDORAIncident(next)
}
