package assets

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzParseAmount checks that amount parsing never panics and that every
// accepted amount prints in a form that parses back to itself.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"0", "100.50", "-3", "1e-8", "1E+2", "0.30000000000000004", "1e309", "1e-401",
		"01", "+1", ".5", "NaN", "1e99999999999999999999", "-0.0e-0", "123456789012345678901234567890.123456789"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAmount(s)
		if err != nil {
			return
		}
		if a.Scale() < 0 || a.Scale() > MaxAmountScale {
			t.Fatalf("%q: scale %d", s, a.Scale())
		}
		back, err := ParseAmount(a.String())
		if err != nil || !back.Equal(a) || back.String() != a.String() {
			t.Fatalf("%q: String() %q does not round-trip: %v", s, a.String(), err)
		}
		if fixed, err := a.StringFixed(a.Scale()); err != nil || !MustParseAmount(fixed).Equal(a) {
			t.Fatalf("%q: StringFixed: %q %v", s, fixed, err)
		}
		for _, typ := range AssetTypes() {
			_ = CheckAmount(typ, a)
		}
		if a.Sub(a).Sign() != 0 || a.Add(a).Cmp(a) != a.Sign() {
			t.Fatalf("%q: arithmetic inconsistent", s)
		}
	})
}

// FuzzValidators feeds arbitrary JSON objects to every validator: none may
// panic.
func FuzzValidators(f *testing.F) {
	f.Add([]byte(`{"amount":100.5,"currency_or_unit":"EUR","asset_type":"currency","from_agent":"agent:a.b","to_agent":"agent:a.c","payment_reference":"p","description":"d","idempotency_key":"k"}`))
	f.Add([]byte(`{"amount":"1e999","asset_type":"token","escrow_conditions":{"timeout_at":5}}`))
	f.Add([]byte(`{"original_payment_reference":"p","reversal_reason":"r","requested_by":"agent:a.b","reversal_amount":-1e-400}`))
	f.Add([]byte(`{"status":"completed","amount":1.005,"currency_or_unit":"EUR","settled_at":"x"}`))
	now := time.Date(2026, 4, 13, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var m map[string]any
		if dec.Decode(&m) != nil {
			return
		}
		ValidateTransferRequest(m)
		ValidateTransferRequestMessage(map[string]any{"ts": "2026-04-13T10:00:00.000Z", "payload": map[string]any{"type": PayloadTransferRequest, "args": m}})
		ValidateTransferReceipt(m)
		ValidateReceiptMatch(m, m)
		ValidateTransferReversal(m)
		CheckReversalPrecondition(m, ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("100"), SettledAt: now, Now: now})
		ValidateEscrowConditions(m, "2026-04-13T10:00:00.000Z")
		ValidateEscrowDispute(m)
		AuthorizeEscrowDispute(m, "agent:a.b", []string{"agent:a.b"})
		ValidateEscrowCancel(m)
		AuthorizeEscrowRelease(m, EscrowRelease{Sender: "agent:a.b", State: Escrowed, Now: now})
		_ = EnforceMiFIDRetention(map[string]any{"compliance": m}, nil)
		if v, ok := m["amount"]; ok {
			_, _ = AmountFromJSON(v)
		}
		if r, ok := m["failure_reason"].(string); ok {
			ClassifyDORAIncident(r)
		}
	})
}
