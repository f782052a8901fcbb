package assets

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/custos-runtime/custos/arsia"
)

func TestValidateTransferRequest(t *testing.T) {
	base := validRequest()
	escrow := map[string]any{"release_condition": "Goods delivered", "release_trigger": "com.example.delivery/confirmed",
		"release_agent": "agent:acme.release", "timeout_at": "2026-04-14T10:00:00.000Z"}
	tests := []struct {
		name     string
		args     map[string]any
		ok       bool
		keyword  string
		sentinel error
	}{
		{"valid currency", base, true, "", nil},
		{"0.07 EUR is exact (the schema's float multipleOf is not used)", with(base, "amount", 0.07), true, "", nil},
		{"json.Number amount", with(base, "amount", json.Number("100.10")), true, "", nil},
		{"integer amount", with(base, "amount", 100), true, "", nil},
		{"three decimals", with(base, "amount", 150.123), false, "precision", ErrPrecision},
		{"0.1+0.2 float artefact", with(base, "amount", tenth+2*tenth), false, "precision", ErrPrecision},
		{"zero", with(base, "amount", 0), false, "greater than zero", ErrInvalidAmount},
		{"negative", with(base, "amount", -5.5), false, "greater than zero", ErrInvalidAmount},
		{"huge currency amount", with(base, "amount", json.Number("123456789012345678901234567890.12")), true, "", nil},
		{"beyond float64", with(base, "amount", json.Number("1e400")), false, "integer digits", ErrInvalidAmount},
		{"string amount", with(base, "amount", "100.00"), false, "number", ErrSchema},
		{"lowercase currency", with(base, "currency_or_unit", "eur"), false, "ISO 4217", ErrCurrencyCode},
		{"unknown currency", with(base, "currency_or_unit", "ABC"), false, "ISO 4217", ErrCurrencyCode},
		{"token 1e-8", with(base, "asset_type", "token", "currency_or_unit", "api-credits", "amount", 1e-8), true, "", nil},
		{"token 1e-9", with(base, "asset_type", "token", "currency_or_unit", "api-credits", "amount", 1e-9), false, "precision", ErrPrecision},
		{"token with currency code", with(base, "asset_type", "token", "currency_or_unit", "EUR"), false, "currency_or_unit", ErrCurrencyCode},
		{"service_unit 4 places", with(base, "asset_type", "service_unit", "currency_or_unit", "gpu-hours", "amount", 0.0001), true, "", nil},
		{"service_unit 5 places", with(base, "asset_type", "service_unit", "currency_or_unit", "gpu-hours", "amount", 0.00001), false, "precision", ErrPrecision},
		{"entitlement 0.5", with(base, "asset_type", "entitlement", "currency_or_unit", "premium-seats", "amount", 0.5), true, "", nil},
		{"unknown asset type", with(base, "asset_type", "crypto"), false, "asset_type", ErrSchema},
		{"missing idempotency_key", with(base, "idempotency_key", deleteMember), false, "idempotency_key", ErrSchema},
		{"extra member", with(base, "iban", "DE89370400440532013000"), false, "iban", ErrSchema},
		{"IBAN in metadata", with(base, "metadata", map[string]any{"acct": "DE89370400440532013000"}), false, "metadata", ErrSchema},
		{"bad agent", with(base, "to_agent", "beta"), false, "to_agent", ErrSchema},
		{"escrow ok", with(base, "escrow_conditions", escrow), true, "", nil},
		{"escrow without release_agent", with(base, "escrow_conditions", with(escrow, "release_agent", deleteMember)), false, "release_agent", ErrSchema},
		{"nil args", nil, false, "object", ErrSchema},
	}
	for _, tt := range tests {
		wantProblems(t, tt.name, ValidateTransferRequest(tt.args), tt.ok, tt.keyword, tt.sentinel)
	}
	// Every problem has the invalid_request code.
	for _, e := range ValidateTransferRequest(with(base, "amount", -1, "currency_or_unit", "eur")) {
		if e.Code != arsia.CodeInvalidRequest {
			t.Errorf("%v: code %s", e, e.Code)
		}
	}
}

func TestValidateTransferRequestMessage(t *testing.T) {
	env := func(args map[string]any, caps []any, key string) map[string]any {
		return map[string]any{
			"ts":           "2026-04-13T10:00:00.000Z",
			"capabilities": caps,
			"idempotency":  map[string]any{"key": key},
			"payload":      map[string]any{"type": PayloadTransferRequest, "args": args},
		}
	}
	initiate := []any{arsia.CapAssetsTransferInitiate}
	escrowCaps := []any{arsia.CapAssetsTransferInitiate, arsia.CapAssetsEscrowCreate}
	escrow := map[string]any{"release_condition": "x", "release_trigger": "com.example.delivery/confirmed",
		"release_agent": "agent:acme.release", "timeout_at": "2026-04-13T09:59:59.000Z"}
	later := with(escrow, "timeout_at", "2026-04-13T11:00:00.000Z")
	tests := []struct {
		name    string
		env     map[string]any
		ok      bool
		keyword string
	}{
		{"valid", env(validRequest(), initiate, "idem-001"), true, ""},
		{"escrow valid", env(with(validRequest(), "escrow_conditions", later), escrowCaps, "idem-001"), true, ""},
		{"escrow timeout before ts", env(with(validRequest(), "escrow_conditions", escrow), escrowCaps, "idem-001"), false, "later than envelope.ts"},
		{"escrow without escrow.create", env(with(validRequest(), "escrow_conditions", later), initiate, "idem-001"), false, "escrow.create"},
		{"no initiate capability", env(validRequest(), []any{"com.example.x"}, "idem-001"), false, "transfer.initiate"},
		{"idempotency mismatch", env(validRequest(), initiate, "other"), false, "idempotency"},
		{"no envelope idempotency", env(validRequest(), initiate, ""), false, "idempotency.key is required"},
		{"wrong payload type", with(env(validRequest(), initiate, "idem-001"), "payload", map[string]any{"type": "x.y/z", "args": validRequest()}), false, "payload.type"},
		{"args invalid", env(with(validRequest(), "amount", 1.001), initiate, "idem-001"), false, "/payload/args/amount"},
		{"empty envelope", map[string]any{}, false, "payload"},
	}
	for _, tt := range tests {
		wantProblems(t, tt.name, ValidateTransferRequestMessage(tt.env), tt.ok, tt.keyword, nil)
	}
}

func validReceipt() map[string]any {
	return map[string]any{
		"status": "completed", "payment_reference": "pay-001", "audit_id": "11111111-1111-4111-8111-111111111111",
		"amount": 100.50, "currency_or_unit": "EUR",
		"initiated_at": "2026-04-13T10:00:00.000Z", "settled_at": "2026-04-13T10:00:05.000Z",
	}
}

func TestValidateTransferReceipt(t *testing.T) {
	base := validReceipt()
	tests := []struct {
		name    string
		r       map[string]any
		ok      bool
		keyword string
	}{
		{"completed", base, true, ""},
		{"0.07 EUR", with(base, "amount", 0.07), true, ""},
		{"failed with reason", with(base, "status", "failed", "settled_at", deleteMember, "failure_reason", "Insufficient funds"), true, ""},
		{"failed without reason", with(base, "status", "failed", "settled_at", deleteMember), false, "failure_reason"},
		{"escrowed with settled_at", with(base, "status", "escrowed"), false, "settled_at"},
		{"completed with failure_reason", with(base, "failure_reason", "x"), false, "failure_reason"},
		{"currency precision", with(base, "amount", 1.001), false, "precision"},
		{"token precision ok", with(base, "currency_or_unit", "api-credits", "amount", 1e-8), true, ""},
		{"any precision exceeded", with(base, "currency_or_unit", "api-credits", "amount", 1e-9), false, "precision"},
		{"zero", with(base, "amount", 0), false, "greater than zero"},
		{"settled before initiated", with(base, "settled_at", "2026-04-13T09:00:00.000Z"), false, "earlier"},
		{"bad status", with(base, "status", "done"), false, "status"},
		{"bad audit_id", with(base, "audit_id", "nope"), false, "audit_id"},
		{"nil", nil, false, "object"},
	}
	for _, tt := range tests {
		wantProblems(t, tt.name, ValidateTransferReceipt(tt.r), tt.ok, tt.keyword, nil)
	}
}

func TestValidateReceiptMatch(t *testing.T) {
	req, rec := validRequest(), validReceipt()
	tests := []struct {
		name     string
		req, rec map[string]any
		ok       bool
		keyword  string
	}{
		{"match", req, rec, true, ""},
		{"same amount other notation", with(req, "amount", json.Number("100.500")), rec, true, ""},
		{"partial execution", req, with(rec, "amount", 50), true, ""},
		{"reference differs", req, with(rec, "payment_reference", "pay-002"), false, "payment_reference"},
		{"currency differs", req, with(rec, "currency_or_unit", "USD"), false, "currency_or_unit"},
		{"amount exceeds", req, with(rec, "amount", 100.51), false, "exceeds"},
		{"escrowed without escrow", req, with(rec, "status", "escrowed", "settled_at", deleteMember), false, "escrow"},
		{"invalid receipt", req, with(rec, "audit_id", deleteMember), false, "audit_id"},
		{"nil request", nil, rec, false, "request"},
	}
	for _, tt := range tests {
		wantProblems(t, tt.name, ValidateReceiptMatch(tt.req, tt.rec), tt.ok, tt.keyword, nil)
	}
}

func TestValidateTransferReversal(t *testing.T) {
	base := map[string]any{"original_payment_reference": "pay-001", "reversal_reason": "Duplicate", "requested_by": "agent:acme.alpha"}
	wantProblems(t, "valid", ValidateTransferReversal(base), true, "", nil)
	wantProblems(t, "partial", ValidateTransferReversal(with(base, "reversal_amount", 10.25)), true, "", nil)
	wantProblems(t, "zero", ValidateTransferReversal(with(base, "reversal_amount", 0)), false, "greater than zero", ErrInvalidAmount)
	wantProblems(t, "too precise", ValidateTransferReversal(with(base, "reversal_amount", 1e-9)), false, "precision", ErrPrecision)
	wantProblems(t, "missing reason", ValidateTransferReversal(with(base, "reversal_reason", deleteMember)), false, "reversal_reason", ErrSchema)
	wantProblems(t, "nil", ValidateTransferReversal(nil), false, "object", ErrSchema)
}

func TestCheckReversalPrecondition(t *testing.T) {
	args := map[string]any{"original_payment_reference": "pay-001", "reversal_reason": "Duplicate", "requested_by": "agent:acme.alpha"}
	partial := with(args, "reversal_amount", 60.00)
	settled := ts("2026-04-13T10:00:00Z")
	tests := []struct {
		name     string
		args     map[string]any
		ctx      ReversalContext
		ok       bool
		keyword  string
		sentinel error
		code     string
	}{
		{"full of completed", args, ReversalContext{OriginalStatus: "completed"}, true, "", nil, ""},
		{"pending original", args, ReversalContext{OriginalStatus: "pending"}, false, "reversal requires", ErrReversal, arsia.CodeConflict},
		{"failed original", args, ReversalContext{OriginalStatus: "failed"}, false, "completed", ErrReversal, arsia.CodeConflict},
		{"partial within", partial, ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("100")}, true, "", nil, ""},
		{"partial exact remainder", partial, ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("100"), AlreadyReversed: MustParseAmount("40")}, true, "", nil, ""},
		{"cumulative exceeded", partial, ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("100"), AlreadyReversed: MustParseAmount("50")}, false, "cumulative", ErrReversal, arsia.CodeInvalidRequest},
		{"cumulative exceeded by a cent", with(args, "reversal_amount", 0.1), ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("0.3"), AlreadyReversed: MustParseAmount("0.21")}, false, "cumulative", ErrReversal, ""},
		{"float-exact 0.1+0.2", with(args, "reversal_amount", 0.2), ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("0.3"), AlreadyReversed: MustParseAmount("0.1")}, true, "", nil, ""},
		{"exceeds original", with(args, "reversal_amount", 150), ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("100")}, false, "exceeds original", ErrReversal, ""},
		{"full after partial", args, ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("100"), AlreadyReversed: MustParseAmount("10")}, false, "cumulative", ErrReversal, ""},
		{"partial of unknown original", partial, ReversalContext{OriginalStatus: "completed"}, false, "unknown", ErrReversal, ""},
		{"negative already reversed", args, ReversalContext{OriginalStatus: "completed", AlreadyReversed: MustParseAmount("-1")}, false, "negative", ErrReversal, ""},
		{"precision of asset type", with(args, "reversal_amount", 0.125), ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("1"), AssetType: Currency}, false, "precision", ErrPrecision, ""},
		{"full within T+1", args, ReversalContext{OriginalStatus: "completed", SettledAt: settled, Now: settled.Add(23 * time.Hour)}, true, "", nil, ""},
		{"full at exactly T+1", args, ReversalContext{OriginalStatus: "completed", SettledAt: settled, Now: settled.Add(24 * time.Hour)}, true, "", nil, ""},
		{"full after T+1", args, ReversalContext{OriginalStatus: "completed", SettledAt: settled, Now: settled.Add(25 * time.Hour)}, false, "window", ErrReversalWindow, arsia.CodeConflict},
		{"partial after T+1 within T+30", partial, ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("100"), SettledAt: settled, Now: settled.Add(29 * 24 * time.Hour)}, true, "", nil, ""},
		{"partial after T+30", partial, ReversalContext{OriginalStatus: "completed", OriginalAmount: amt("100"), SettledAt: settled, Now: settled.Add(31 * 24 * time.Hour)}, false, "window", ErrReversalWindow, arsia.CodeConflict},
		{"provider window", args, ReversalContext{OriginalStatus: "completed", SettledAt: settled, Now: settled.Add(2 * time.Hour), FullWindow: time.Hour}, false, "window", ErrReversalWindow, ""},
		{"window without now", args, ReversalContext{OriginalStatus: "completed", SettledAt: settled}, false, "current time", ErrNoClock, ""},
		{"garbage reversal_amount", with(args, "reversal_amount", "lots"), ReversalContext{OriginalStatus: "completed"}, false, "not a valid number", ErrInvalidAmount, ""},
	}
	for _, tt := range tests {
		errs := CheckReversalPrecondition(tt.args, tt.ctx)
		wantProblems(t, tt.name, errs, tt.ok, tt.keyword, tt.sentinel)
		if tt.code != "" && !HasCode(errs, tt.code) {
			t.Errorf("%s: no problem with code %s: %v", tt.name, tt.code, Join(errs))
		}
	}
	errs := CheckReversalPrecondition(args, ReversalContext{OriginalStatus: "completed", SettledAt: settled, Now: settled.Add(48 * time.Hour)})
	if len(errs) != 1 || errs[0].Details["window_days"] != 1 || errs[0].Details["window_expired_at"] != "2026-04-14T10:00:00.000Z" {
		t.Errorf("window details: %+v", errs)
	}
}
