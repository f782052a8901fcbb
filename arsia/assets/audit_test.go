package assets

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestBuildEscrowAudit(t *testing.T) {
	now := ts("2026-04-13T10:00:00Z")
	id, orig := "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	tests := []struct {
		name   string
		kind   EscrowAuditKind
		f      EscrowAuditFields
		keys   []string // "" kind means error expected when nil
		reject bool
	}{
		{"created", EscrowCreated, EscrowAuditFields{AuditID: id, PaymentReference: "p", Amount: amt("100.00"), CurrencyOrUnit: "EUR",
			FromAgent: "agent:a.alpha", ToAgent: "agent:a.beta", ReleaseAgent: "agent:a.release", TimeoutAt: "2026-04-14T10:00:00.000Z"},
			[]string{"amount", "audit_id", "currency_or_unit", "event_type", "from_agent", "payment_reference", "release_agent", "sub_type", "timeout_at", "timestamp", "to_agent"}, false},
		{"released", EscrowReleased, EscrowAuditFields{AuditID: id, Timestamp: "2026-04-13T10:05:00.000Z", PaymentReference: "p",
			ReleasedBy: "agent:a.release", ReleaseTrigger: "com.example.delivery/confirmed", OriginalAuditID: orig},
			[]string{"audit_id", "event_type", "original_audit_id", "payment_reference", "release_trigger", "released_by", "sub_type", "timestamp"}, false},
		{"returned by cancel", EscrowReturned, EscrowAuditFields{AuditID: id, PaymentReference: "p", TimeoutAt: "2026-04-14T10:00:00.000Z",
			ActualTimeout: "2026-04-13T10:00:00.000Z", OriginalAuditID: orig, CancellationReason: "unwind"},
			[]string{"actual_timeout", "audit_id", "cancellation_reason", "event_type", "original_audit_id", "payment_reference", "sub_type", "timeout_at", "timestamp"}, false},
		{"disputed", EscrowDisputed, EscrowAuditFields{AuditID: id, PaymentReference: "p", DisputedBy: "agent:a.alpha", DisputeReason: "late",
			ArbitrationAgent: "agent:a.arbiter", OriginalAuditID: orig},
			[]string{"arbitration_agent", "audit_id", "dispute_reason", "disputed_by", "event_type", "original_audit_id", "payment_reference", "sub_type", "timestamp"}, false},
		{"unknown kind", "escrow_exploded", EscrowAuditFields{AuditID: id}, nil, true},
		{"missing member", EscrowReleased, EscrowAuditFields{AuditID: id, PaymentReference: "p", ReleasedBy: "agent:a.release", OriginalAuditID: orig}, nil, true},
		{"foreign member", EscrowReleased, EscrowAuditFields{AuditID: id, PaymentReference: "p", ReleasedBy: "agent:a.release",
			ReleaseTrigger: "com.example.delivery/confirmed", OriginalAuditID: orig, DisputeReason: "x"}, nil, true},
		{"bad audit id", EscrowReleased, EscrowAuditFields{AuditID: "X", PaymentReference: "p", ReleasedBy: "agent:a.release",
			ReleaseTrigger: "com.example.delivery/confirmed", OriginalAuditID: orig}, nil, true},
		{"bad agent", EscrowDisputed, EscrowAuditFields{AuditID: id, PaymentReference: "p", DisputedBy: "alpha", DisputeReason: "late",
			ArbitrationAgent: "agent:a.arbiter", OriginalAuditID: orig}, nil, true},
		{"zero amount", EscrowCreated, EscrowAuditFields{AuditID: id, PaymentReference: "p", Amount: amt("0"), CurrencyOrUnit: "EUR",
			FromAgent: "agent:a.alpha", ToAgent: "agent:a.beta", ReleaseAgent: "agent:a.release", TimeoutAt: "2026-04-14T10:00:00.000Z"}, nil, true},
		{"bad timestamp", EscrowReleased, EscrowAuditFields{AuditID: id, Timestamp: "now", PaymentReference: "p", ReleasedBy: "agent:a.release",
			ReleaseTrigger: "com.example.delivery/confirmed", OriginalAuditID: orig}, nil, true},
	}
	for _, tt := range tests {
		rec, err := BuildEscrowAudit(tt.kind, tt.f, now)
		if tt.reject {
			if err == nil || !(errors.Is(err, ErrAudit) || errors.Is(err, ErrNoClock)) {
				t.Errorf("%s: %v, %v", tt.name, rec, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var keys []string
		for k := range rec {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, tt.keys) || rec["event_type"] != "asset_transfer" || rec["sub_type"] != string(tt.kind) {
			t.Errorf("%s: record %v", tt.name, rec)
		}
	}
	rec, _ := BuildEscrowAudit(EscrowCreated, tests[0].f, now)
	if rec["timestamp"] != "2026-04-13T10:00:00.000Z" {
		t.Errorf("timestamp %v, want now", rec["timestamp"])
	}
	if out, _ := json.Marshal(rec["amount"]); string(out) != "100" {
		t.Errorf("amount marshals as %s", out)
	}
	if _, err := BuildEscrowAudit(EscrowReleased, tests[1].f, ts("0001-01-01T00:00:00Z")); err != nil {
		t.Errorf("explicit timestamp needs no clock: %v", err)
	}
	f := tests[0].f
	if _, err := BuildEscrowAudit(EscrowCreated, f, ts("0001-01-01T00:00:00Z")); !errors.Is(err, ErrNoClock) {
		t.Errorf("no timestamp, no clock: %v", err)
	}
}

func TestBuildReversalAudit(t *testing.T) {
	base := ReversalAuditFields{AuditID: "55555555-5555-4555-8555-555555555555", CreatedAt: "2026-04-13T12:00:00.000Z",
		OriginalAuditID: "11111111-1111-4111-8111-111111111111", OriginalPaymentReference: "pay-001",
		ReversalPaymentReference: "pay-001-REV-1", ReversalReason: "Duplicate charge", RequestedBy: "agent:acme.alpha"}
	tests := []struct {
		name        string
		mutate      func(*ReversalAuditFields)
		full        bool
		amount      any
		wantFailure bool
	}{
		{"full, amount unknown", func(*ReversalAuditFields) {}, true, nil, false},
		{"full, original known", func(f *ReversalAuditFields) { f.OriginalAmount = amt("100") }, true, "100", false},
		{"explicit full", func(f *ReversalAuditFields) { f.OriginalAmount, f.ReversalAmount = amt("100"), amt("100.00") }, true, "100", false},
		{"partial", func(f *ReversalAuditFields) { f.OriginalAmount, f.ReversalAmount = amt("100"), amt("40.5") }, false, "40.5", false},
		{"partial, original unknown", func(f *ReversalAuditFields) { f.ReversalAmount = amt("40") }, false, nil, true},
		{"exceeds", func(f *ReversalAuditFields) { f.OriginalAmount, f.ReversalAmount = amt("100"), amt("100.01") }, false, nil, true},
		{"same reference", func(f *ReversalAuditFields) { f.ReversalPaymentReference = "pay-001" }, false, nil, true},
		{"bad original audit id", func(f *ReversalAuditFields) { f.OriginalAuditID = "" }, false, nil, true},
		{"bad requester", func(f *ReversalAuditFields) { f.RequestedBy = "alpha" }, false, nil, true},
		{"negative", func(f *ReversalAuditFields) { f.OriginalAmount = amt("-1") }, false, nil, true},
	}
	for _, tt := range tests {
		f := base
		tt.mutate(&f)
		rec, err := BuildReversalAudit(f, ts("2026-04-13T12:00:00Z"))
		if tt.wantFailure {
			if err == nil || !errors.Is(err, ErrAudit) {
				t.Errorf("%s: %v, %v", tt.name, rec, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var amount any
		if a, ok := rec["reversal_amount"].(Amount); ok {
			amount = a.String()
		}
		if rec["is_full_reversal"] != tt.full || amount != tt.amount || len(rec) != 9 {
			t.Errorf("%s: %v", tt.name, rec)
		}
	}
}
