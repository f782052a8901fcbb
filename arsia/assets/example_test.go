package assets_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia/assets"
)

func ExampleParseAmount() {
	a, _ := assets.ParseAmount("100.50")
	fmt.Println(a, a.Scale(), assets.CheckAmount(assets.Currency, a) == nil)

	tiny, _ := assets.ParseAmount("1e-9")
	fmt.Println(assets.CheckAmount(assets.Token, tiny))

	sum := assets.MustParseAmount("0.1").Add(assets.MustParseAmount("0.2"))
	fmt.Println(sum)
	// Output:
	// 100.5 1 true
	// assets: amount precision exceeds the asset type maximum: asset type token allows at most 8 decimal places, 0.000000001 has 9
	// 0.3
}

func ExampleValidateTransferRequest() {
	var args map[string]any
	dec := json.NewDecoder(strings.NewReader(`{
		"amount": 150.123, "currency_or_unit": "eur", "asset_type": "currency",
		"from_agent": "agent:acme.alpha", "to_agent": "agent:acme.beta",
		"payment_reference": "acme-2026-00042", "description": "Invoice 42",
		"idempotency_key": "acme-2026-00042"}`))
	dec.UseNumber() // keep the amount's exact text
	if err := dec.Decode(&args); err != nil {
		panic(err)
	}
	for _, e := range assets.ValidateTransferRequest(args) {
		fmt.Println(e.Code, e)
	}
	// Output:
	// invalid_request assets: /amount: amount precision exceeds maximum for asset type currency: 150.123 has 3 decimal places, at most 2 allowed
	// invalid_request assets: /currency_or_unit: currency_or_unit "eur" is not an uppercase ISO 4217 alphabetic currency code (e.g. "EUR")
}

func ExampleCheckReversalPrecondition() {
	args := map[string]any{
		"original_payment_reference": "pay-001", "reversal_reason": "Second partial",
		"requested_by": "agent:acme.alpha", "reversal_amount": json.Number("60.00"),
	}
	original := assets.MustParseAmount("100.00")
	for _, e := range assets.CheckReversalPrecondition(args, assets.ReversalContext{
		OriginalStatus:  assets.StatusCompleted,
		OriginalAmount:  &original,
		AlreadyReversed: assets.MustParseAmount("50"),
	}) {
		fmt.Println(e)
	}
	// Output:
	// assets: /reversal_amount: cumulative reversed amount 110 (already 50 + 60) would exceed the original transfer amount 100
}

func ExampleCanEscrowTransition() {
	fmt.Println(assets.CanEscrowTransition(assets.Escrowed, assets.Released))
	fmt.Println(assets.CanEscrowTransition(assets.Released, assets.Returned))
	fmt.Println(assets.EscrowTransition(assets.Returned, assets.Disputed))
	// Output:
	// true
	// false
	// assets: escrow transition RETURNED -> DISPUTED refused: RETURNED is terminal
}

func ExampleAuthorizeEscrowCancel() {
	if e := assets.AuthorizeEscrowCancel("agent:other.agent", "agent:acme.alpha"); e != nil {
		fmt.Println(e.Code, e.ARSIA().Object()["code"])
	}
	// Output:
	// forbidden forbidden
}

func ExampleIsSCAExempt() {
	need, _ := assets.RequiresSCA(7)
	exempt, reason := assets.IsSCAExempt(assets.SCAExemption{Amount: assets.MustParseAmount("25.00"), Currency: "EUR"})
	fmt.Println(need, exempt, reason)
	// Output:
	// true true low_value
}

func ExampleValidateTokenScope() {
	err := assets.ValidateTokenScope(strings.Fields("arsiaprotocol.assets.transfer.initiate arsiaprotocol.assets.transfer.approve"))
	fmt.Println(err)
	// Output:
	// assets: /scope: token scope violates separation of duties: it grants both arsiaprotocol.assets.transfer.initiate and arsiaprotocol.assets.transfer.approve (via arsiaprotocol.assets.transfer.approve, arsiaprotocol.assets.transfer.initiate)
}

func ExampleClassifyDORAIncident() {
	reason := "TLS handshake failed at upstream provider"
	t, ok := assets.ClassifyDORAIncident(reason)
	if !ok {
		t = assets.UnknownIncident
	}
	inc, err := assets.BuildDORAIncident(assets.DORAIncident{
		IncidentType: t, AffectedService: "agent:europa.payments.sepa",
		StartedAt: "2026-03-24T14:30:05.123Z", EstimatedImpact: "1 transfer delayed",
		Severity: assets.SeverityMedium, OriginalPaymentReference: "acme-2026-00042",
	})
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(inc)
	fmt.Println(string(out))
	// Output:
	// {"incident_type":"tls_failure","affected_service":"agent:europa.payments.sepa","started_at":"2026-03-24T14:30:05.123Z","resolved_at":null,"estimated_impact":"1 transfer delayed","severity":"medium","original_payment_reference":"acme-2026-00042"}
}

func ExampleBuildEscrowAudit() {
	amount := assets.MustParseAmount("100.00")
	rec, err := assets.BuildEscrowAudit(assets.EscrowCreated, assets.EscrowAuditFields{
		AuditID: "11111111-1111-4111-8111-111111111111", PaymentReference: "pay-escrow-01",
		Amount: &amount, CurrencyOrUnit: "EUR",
		FromAgent: "agent:acme.alpha", ToAgent: "agent:acme.beta", ReleaseAgent: "agent:acme.release",
		TimeoutAt: "2026-04-14T10:00:00.000Z",
	}, time.Date(2026, 4, 13, 10, 0, 0, 0, time.UTC))
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(rec)
	fmt.Println(string(out))
	// Output:
	// {"amount":100,"audit_id":"11111111-1111-4111-8111-111111111111","currency_or_unit":"EUR","event_type":"asset_transfer","from_agent":"agent:acme.alpha","payment_reference":"pay-escrow-01","release_agent":"agent:acme.release","sub_type":"escrow_created","timeout_at":"2026-04-14T10:00:00.000Z","timestamp":"2026-04-13T10:00:00.000Z","to_agent":"agent:acme.beta"}
}

func ExampleEnforceMiFIDRetention() {
	env := map[string]any{"compliance": map[string]any{"retention_days": 365}}
	fmt.Println(assets.EnforceMiFIDRetention(env, nil))
	// Output:
	// assets: MiFID II retention floor not met: MiFID II requires a retention period of at least 1825 days; effective retention is 365
}
