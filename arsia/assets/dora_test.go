package assets

import (
	"errors"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/arsia/schema"
)

func TestClassifyDORAIncident(t *testing.T) {
	tests := []struct {
		reason string
		want   IncidentType // "" means not classified
	}{
		{"TLS handshake failed at upstream provider", TLSFailure},
		{"Certificate expired for provider endpoint", TLSFailure},
		{"x509: certificate signed by unknown authority", TLSFailure},
		{"Compliance broker relay failed", BrokerFailure},
		{"Local audit database unavailable", DatabaseFailure},
		{"connection refused by 10.0.0.1:443", NetworkFailure},
		{"DNS lookup failed", NetworkFailure},
		{"Provider timeout — SEPA Credit Transfer endpoint unreachable after 30s", ProviderUnavailable},
		{"upstream returned HTTP 503", ProviderUnavailable},
		{"request timed out", ProviderUnavailable},
		{"something weird happened", ""},
		{"Insufficient funds in payer account", ""},
		{"Invalid payee agent — agent:contoso.treasury not found in provider registry", ""},
		{"Compliance rejection — data residency constraint violated", ""},
		{"", ""},
		{"settlsomething", ""},            // no whole-word match inside another word
		{"\xff\xfe TLS \xff", TLSFailure}, // invalid UTF-8 does not hide keywords
	}
	for _, tt := range tests {
		got, ok := ClassifyDORAIncident(tt.reason)
		if ok != (tt.want != "") || got != tt.want {
			t.Errorf("ClassifyDORAIncident(%q) = %q, %v; want %q", tt.reason, got, ok, tt.want)
		}
	}
}

func TestBuildDORAIncident(t *testing.T) {
	resolved := "2026-04-13T11:00:00.000Z"
	early := "2026-04-13T09:00:00.000Z"
	base := DORAIncident{IncidentType: NetworkFailure, AffectedService: "agent:acme.payments", StartedAt: "2026-04-13T10:00:00.000Z",
		EstimatedImpact: "2 transfers delayed", Severity: SeverityMedium, OriginalPaymentReference: "pay-ref-abc"}
	tests := []struct {
		name    string
		mutate  func(*DORAIncident)
		keyword string // "" means valid
	}{
		{"valid ongoing", func(*DORAIncident) {}, ""},
		{"valid resolved", func(d *DORAIncident) { d.ResolvedAt = &resolved }, ""},
		{"catastrophic", func(d *DORAIncident) { d.Severity = "catastrophic" }, "severity"},
		{"unknown type", func(d *DORAIncident) { d.IncidentType = "alien_attack" }, "incident_type"},
		{"bad service", func(d *DORAIncident) { d.AffectedService = "payments" }, "affected_service"},
		{"bad start", func(d *DORAIncident) { d.StartedAt = "2026-04-13" }, "started_at"},
		{"resolved before start", func(d *DORAIncident) { d.ResolvedAt = &early }, "resolved_at"},
		{"empty impact", func(d *DORAIncident) { d.EstimatedImpact = "" }, "estimated_impact"},
		{"long reference", func(d *DORAIncident) { d.OriginalPaymentReference = strings.Repeat("r", 129) }, "original_payment_reference"},
	}
	for _, tt := range tests {
		in := base
		tt.mutate(&in)
		got, err := BuildDORAIncident(in)
		if tt.keyword == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
				continue
			}
			errs, verr := schema.Validate(got.Payload(), schemaDORA)
			if verr != nil || len(errs) > 0 {
				t.Errorf("%s: payload fails its schema: %v %v", tt.name, verr, errs)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrDORAIncident) || !strings.Contains(err.Error(), tt.keyword) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.keyword)
		}
	}
	inc, _ := BuildDORAIncident(base)
	if data := inc.Payload()["data"].(map[string]any); data["resolved_at"] != nil || len(data) != 7 {
		t.Errorf("ongoing incident data %v", data)
	}
	done, err := inc.Resolve(ts("2026-04-13T12:00:00Z"))
	if err != nil || *done.ResolvedAt != "2026-04-13T12:00:00.000Z" || inc.ResolvedAt != nil {
		t.Errorf("Resolve: %v %v", done, err)
	}
}
