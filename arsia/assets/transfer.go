package assets

import (
	"fmt"
	"slices"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/schema"
)

// Payload types of the Assets primitive.
const (
	PayloadTransferRequest  = "arsiaprotocol.assets/transfer-request"
	PayloadTransferReceipt  = "arsiaprotocol.assets/transfer-receipt"
	PayloadTransferReversal = "arsiaprotocol.assets/transfer-reversal"
	PayloadEscrowDispute    = "arsiaprotocol.assets/escrow-dispute"
	PayloadEscrowCancel     = "arsiaprotocol.assets/escrow-cancel"
	PayloadDORAIncident     = "arsiaprotocol.dora/incident"
)

// Schema files of the documents this package validates.
const (
	schemaRequest  = "arsia-asset-transfer-request.schema.json"
	schemaReceipt  = "arsia-asset-transfer-receipt.schema.json"
	schemaReversal = "arsia-asset-transfer-reversal.schema.json"
	schemaEscrow   = "arsia-escrow-conditions.schema.json"
	schemaDORA     = "arsia-dora-incident.schema.json"
	schemaMiFID    = "arsia-mifid-audit-record.schema.json"
)

// Receipt statuses (§3.2.1).
const (
	StatusPending   = "pending"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusEscrowed  = "escrowed"
)

// schemaProblems validates doc against a schema file and returns the
// failures as *Errors, leaving out those that skip says this package checks
// itself, exactly (the schemas check amounts with float arithmetic: 0.07
// is "not a multiple of 0.01" there). A validator failure is reported as a
// problem: the document is then not known to be valid.
func schemaProblems(doc any, file string, skip func(pointer, keyword string) bool) problems {
	var p problems
	errs, err := schema.Validate(doc, file)
	if err != nil {
		p.invalid("", ErrSchema, fmt.Sprintf("cannot validate against %s: %v", file, err))
		return p
	}
	for _, e := range errs {
		if skip != nil && skip(e.Pointer, e.Keyword) {
			continue
		}
		p.invalid(e.Pointer, ErrSchema, e.Message)
	}
	return p
}

// isNumberValue reports whether v decoded from a JSON number.
func isNumberValue(v any) bool {
	switch v.(type) {
	case nil, bool, string, []any, map[string]any:
		return false
	}
	return true
}

// amountMember parses obj[key] when it is a number; it records a problem
// and returns ok=false when the number cannot be represented. A missing or
// non-number member returns ok=false silently (the schema reports it).
func (p *problems) amountMember(obj map[string]any, key string) (Amount, bool) {
	v, present := obj[key]
	if !present || !isNumberValue(v) {
		return Amount{}, false
	}
	a, err := AmountFromJSON(v)
	if err != nil {
		p.invalid("/"+key, ErrInvalidAmount, err.Error())
		return Amount{}, false
	}
	return a, true
}

// checkPositive records a problem when a is not strictly positive.
func (p *problems) checkPositive(field string, a Amount) bool {
	if a.Sign() <= 0 {
		p.invalid(field, ErrInvalidAmount, field[1:]+" must be greater than zero")
		return false
	}
	return true
}

// ValidateTransferRequest checks the payload.args of an
// AssetTransferRequest (§3.1): the JSON Schema, then the rules the schema
// cannot express exactly. Amounts are compared as exact decimals: amount >
// 0 with at most the asset type's decimals (currency 2, token 8,
// entitlement 2, service_unit 4); currency_or_unit is an uppercase ISO
// 4217 code for currency and a lowercase application unit otherwise (see
// CheckCurrencyOrUnit). escrow_conditions, when present, must satisfy its
// schema; its timeout can only be checked against the envelope, by
// ValidateTransferRequestMessage or ValidateEscrowConditions.
//
// The result lists every problem (nil means valid); all carry the code
// invalid_request.
func ValidateTransferRequest(args map[string]any) []*Error {
	if args == nil {
		return []*Error{{Code: arsia.CodeInvalidRequest, Message: "transfer request args must be a JSON object", Err: ErrSchema}}
	}
	t, typeOK := args["asset_type"].(string)
	knownType := typeOK && AssetType(t).Valid()
	p := schemaProblems(args, schemaRequest, func(ptr, kw string) bool {
		switch ptr {
		case "/amount":
			return kw == "multipleOf" || kw == "exclusiveMinimum"
		case "/currency_or_unit":
			return knownType && (kw == "pattern" || kw == "enum" || kw == "not")
		}
		return false
	})
	if a, ok := p.amountMember(args, "amount"); ok && p.checkPositive("/amount", a) && knownType {
		if places, _ := AssetType(t).Precision(); !a.FitsPrecision(places) {
			p.invalid("/amount", ErrPrecision, precisionMessage(AssetType(t), a, places))
		}
	}
	if cu, ok := args["currency_or_unit"].(string); ok && knownType {
		if err := CheckCurrencyOrUnit(AssetType(t), cu); err != nil {
			p.invalid("/currency_or_unit", ErrCurrencyCode, trimSentinel(err, ErrCurrencyCode))
		}
	}
	return p
}

// ValidateTransferRequestMessage checks a whole AssetTransferRequest
// envelope beyond L1/L2 (which belong to package arsia): payload.type,
// the args (ValidateTransferRequest), escrow_conditions.timeout_at later
// than envelope.ts, idempotency.key present and equal to
// args.idempotency_key (§3.1.1), and capabilities declaring
// arsiaprotocol.assets.transfer.initiate, plus
// arsiaprotocol.assets.escrow.create for an escrow (§5.1.4).
func ValidateTransferRequestMessage(env map[string]any) []*Error {
	var p problems
	payload, _ := env["payload"].(map[string]any)
	if pt, _ := payload["type"].(string); pt != PayloadTransferRequest {
		p.invalid("/payload/type", ErrSchema, fmt.Sprintf("payload.type must be %q", PayloadTransferRequest))
	}
	args, _ := payload["args"].(map[string]any)
	for _, e := range ValidateTransferRequest(args) {
		e.Field = "/payload/args" + e.Field
		p = append(p, e)
	}
	if args == nil {
		return p
	}
	ts, _ := env["ts"].(string)
	if cond, ok := args["escrow_conditions"].(map[string]any); ok {
		if e := checkEscrowTimeout(cond, ts); e != nil {
			e.Field = "/payload/args/escrow_conditions" + e.Field
			p = append(p, e)
		}
	}
	idem, _ := env["idempotency"].(map[string]any)
	key, _ := idem["key"].(string)
	switch argKey, _ := args["idempotency_key"].(string); {
	case key == "":
		p.invalid("/idempotency/key", ErrSchema, "idempotency.key is required for asset transfer requests")
	case argKey != "" && key != argKey:
		p.invalid("/idempotency/key", ErrSchema, "idempotency.key must equal payload.args.idempotency_key")
	}
	caps := stringList(env["capabilities"])
	need := []string{arsia.CapAssetsTransferInitiate}
	if _, escrow := args["escrow_conditions"]; escrow {
		need = append(need, arsia.CapAssetsEscrowCreate)
	}
	for _, c := range need {
		if !slices.Contains(caps, c) {
			p.invalid("/capabilities", ErrSchema, fmt.Sprintf("capabilities must include %s", c))
		}
	}
	return p
}

// ValidateTransferReceipt checks the payload.result of an
// AssetTransferReceipt (§3.2): the JSON Schema (status-dependent
// settled_at / failure_reason), amount > 0 with at most 2 decimals when
// currency_or_unit is a three-letter currency code and at most
// MaxPrecision otherwise, and settled_at not before initiated_at.
func ValidateTransferReceipt(result map[string]any) []*Error {
	if result == nil {
		return []*Error{{Code: arsia.CodeInvalidRequest, Message: "transfer receipt result must be a JSON object", Err: ErrSchema}}
	}
	p := schemaProblems(result, schemaReceipt, func(ptr, kw string) bool {
		return ptr == "/amount" && (kw == "multipleOf" || kw == "exclusiveMinimum")
	})
	if a, ok := p.amountMember(result, "amount"); ok && p.checkPositive("/amount", a) {
		places, kind := MaxPrecision, "any asset type"
		if cu, _ := result["currency_or_unit"].(string); currencyRE.MatchString(cu) {
			places, kind = 2, "currency "+cu
		}
		if !a.FitsPrecision(places) {
			p.invalid("/amount", ErrPrecision, fmt.Sprintf("amount precision exceeds maximum for %s: %s has %d decimal places, at most %d allowed", kind, a, a.Scale(), places))
		}
	}
	ini, iniOK := timeMember(result, "initiated_at")
	set, setOK := timeMember(result, "settled_at")
	if iniOK && setOK && set.Before(ini) {
		p.invalid("/settled_at", ErrSchema, "settled_at must not be earlier than initiated_at")
	}
	return p
}

// ValidateReceiptMatch checks that a receipt (payload.result) answers a
// transfer request (payload.args) (§3.2.1): the receipt is valid
// (ValidateTransferReceipt), payment_reference and currency_or_unit are
// byte-for-byte equal, the processed amount does not exceed the requested
// amount (it may be smaller: partial execution), and status "escrowed"
// only answers a request with escrow_conditions. The request itself is
// the caller's and is assumed validated.
func ValidateReceiptMatch(request, receipt map[string]any) []*Error {
	p := problems(ValidateTransferReceipt(receipt))
	if request == nil || receipt == nil {
		if request == nil {
			p.add(arsia.CodeInvalidRequest, "", ErrReceiptMismatch, "transfer request args must be a JSON object")
		}
		return p
	}
	for _, k := range []string{"payment_reference", "currency_or_unit"} {
		want, wok := request[k].(string)
		got, gok := receipt[k].(string)
		if !wok || !gok || want != got {
			p.add(arsia.CodeInvalidRequest, "/"+k, ErrReceiptMismatch,
				fmt.Sprintf("receipt %s %q does not match the request's %q", k, got, want))
		}
	}
	var scratch problems
	ra, rok := scratch.amountMember(request, "amount")
	ga, gok := scratch.amountMember(receipt, "amount")
	switch {
	case !rok:
		p.add(arsia.CodeInvalidRequest, "/amount", ErrReceiptMismatch, "the request has no valid amount to compare with")
	case gok && ga.Cmp(ra) > 0:
		p.add(arsia.CodeInvalidRequest, "/amount", ErrReceiptMismatch,
			fmt.Sprintf("receipt amount %s exceeds the requested amount %s", ga, ra))
	}
	if st, _ := receipt["status"].(string); st == StatusEscrowed {
		if _, escrow := request["escrow_conditions"]; !escrow {
			p.add(arsia.CodeInvalidRequest, "/status", ErrReceiptMismatch, "status escrowed answers a request without escrow_conditions")
		}
	}
	return p
}

// ValidateTransferReversal checks the payload.args of an
// AssetTransferReversal (§3.3.1): the JSON Schema, and reversal_amount,
// when present, an exact decimal greater than zero with at most
// MaxPrecision decimals. Whether the reversal may proceed depends on the
// original transfer: see CheckReversalPrecondition.
func ValidateTransferReversal(args map[string]any) []*Error {
	if args == nil {
		return []*Error{{Code: arsia.CodeInvalidRequest, Message: "transfer reversal args must be a JSON object", Err: ErrSchema}}
	}
	p := schemaProblems(args, schemaReversal, func(ptr, kw string) bool {
		return ptr == "/reversal_amount" && kw == "exclusiveMinimum"
	})
	if a, ok := p.amountMember(args, "reversal_amount"); ok && p.checkPositive("/reversal_amount", a) && !a.FitsPrecision(MaxPrecision) {
		p.invalid("/reversal_amount", ErrPrecision, fmt.Sprintf("reversal_amount precision exceeds maximum: %s has %d decimal places, at most %d allowed", a, a.Scale(), MaxPrecision))
	}
	return p
}

// Default reversal windows (§3.3.2), counted from the original settled_at.
const (
	FullReversalWindow    = 24 * time.Hour      // T+1
	PartialReversalWindow = 30 * 24 * time.Hour // T+30
)

// ReversalContext is what the receiver knows about the original transfer
// when it checks a reversal.
type ReversalContext struct {
	// OriginalStatus is the original receipt's status; only "completed"
	// may be reversed.
	OriginalStatus string
	// OriginalAmount is the original transfer's amount. It is required to
	// check a partial reversal; nil means unknown.
	OriginalAmount *Amount
	// AlreadyReversed is the total of the reversals already processed for
	// the original payment_reference.
	AlreadyReversed Amount
	// AssetType, when set, bounds reversal_amount's precision by the
	// original's asset type.
	AssetType AssetType
	// SettledAt is the original receipt's settled_at. When set, the
	// reversal windows are enforced and Now is required.
	SettledAt time.Time
	// Now is the time of the check.
	Now time.Time
	// FullWindow and PartialWindow override FullReversalWindow (T+1) and
	// PartialReversalWindow (T+30) when positive (providers may define
	// their own).
	FullWindow, PartialWindow time.Duration
}

// CheckReversalPrecondition decides whether a reversal (payload.args, see
// ValidateTransferReversal) may proceed against its original transfer
// (§3.3.2):
//
//   - the original must be completed (otherwise conflict);
//   - a reversal without reversal_amount, or with the original amount, is a
//     full reversal, refused once any partial reversal was processed;
//   - reversal_amount must not exceed the original, and the cumulative
//     reversed total must not exceed it either (invalid_request);
//   - with SettledAt known, a full reversal must come within the full
//     window (T+1) and a partial one within the partial window (T+30),
//     otherwise conflict with details {reversal_window_exceeded,
//     window_days, settled_at, window_expired_at}.
//
// It fails closed: a partial reversal of an original of unknown amount is
// refused, as is a window check without Now.
func CheckReversalPrecondition(args map[string]any, ctx ReversalContext) []*Error {
	var p problems
	if ctx.OriginalStatus != StatusCompleted {
		p.add(arsia.CodeConflict, "", ErrReversal,
			fmt.Sprintf("reversal requires original transfer status 'completed', got %q", ctx.OriginalStatus))
	}
	if ctx.AlreadyReversed.Sign() < 0 {
		p.invalid("", ErrReversal, "already reversed total must not be negative")
	}
	var scratch problems
	amount, hasAmount := scratch.amountMember(args, "reversal_amount")
	if _, present := args["reversal_amount"]; present && !hasAmount {
		p.invalid("/reversal_amount", ErrInvalidAmount, "reversal_amount is not a valid number")
	}
	full := !hasAmount
	switch {
	case hasAmount && amount.Sign() <= 0:
		p.invalid("/reversal_amount", ErrInvalidAmount, "reversal_amount must be greater than zero")
	case hasAmount && ctx.OriginalAmount == nil:
		p.invalid("/reversal_amount", ErrReversal, "original transfer amount unknown: cannot check the cumulative reversed amount")
	case hasAmount:
		orig := *ctx.OriginalAmount
		total := ctx.AlreadyReversed.Add(amount)
		switch {
		case amount.Cmp(orig) > 0:
			p.invalid("/reversal_amount", ErrReversal, fmt.Sprintf("reversal_amount exceeds original transfer amount (%s > %s)", amount, orig))
		case total.Cmp(orig) > 0:
			p.invalid("/reversal_amount", ErrReversal, fmt.Sprintf("cumulative reversed amount %s (already %s + %s) would exceed the original transfer amount %s",
				total, ctx.AlreadyReversed, amount, orig))
		}
		full = amount.Equal(orig)
	}
	if full && ctx.AlreadyReversed.Sign() > 0 {
		p.invalid("", ErrReversal, fmt.Sprintf("full reversal refused: cumulative partial reversals of %s were already processed; reverse at most the remainder", ctx.AlreadyReversed))
	}
	if hasAmount && ctx.AssetType != "" {
		places, ok := ctx.AssetType.Precision()
		if !ok {
			p.invalid("", ErrReversal, fmt.Sprintf("unknown asset_type %q", string(ctx.AssetType)))
		} else if !amount.FitsPrecision(places) {
			p.invalid("/reversal_amount", ErrPrecision, fmt.Sprintf("reversal_amount precision exceeds maximum for asset type %s: %d decimal places, at most %d allowed", ctx.AssetType, amount.Scale(), places))
		}
	}
	if !ctx.SettledAt.IsZero() {
		p.checkWindow(ctx, full, args)
	}
	return p
}

func (p *problems) checkWindow(ctx ReversalContext, full bool, args map[string]any) {
	if ctx.Now.IsZero() {
		p.invalid("", ErrNoClock, "the reversal window cannot be checked without the current time")
		return
	}
	window := ctx.PartialWindow
	if window <= 0 {
		window = PartialReversalWindow
	}
	if full {
		window = ctx.FullWindow
		if window <= 0 {
			window = FullReversalWindow
		}
	}
	expires := ctx.SettledAt.Add(window)
	if !ctx.Now.After(expires) {
		return
	}
	ref, _ := args["original_payment_reference"].(string)
	e := p.add(arsia.CodeConflict, "", ErrReversalWindow, "Reversal window has expired for payment reference: "+ref)
	e.Details = map[string]any{
		"reversal_window_exceeded": true,
		"window_days":              int(window / (24 * time.Hour)),
		"settled_at":               arsia.FormatTimestamp(ctx.SettledAt),
		"window_expired_at":        arsia.FormatTimestamp(expires),
	}
}

// timeMember parses obj[key] as a wire timestamp.
func timeMember(obj map[string]any, key string) (time.Time, bool) {
	s, ok := obj[key].(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := arsia.ParseTimestamp(s)
	return t, err == nil
}

// stringList returns the strings of a decoded JSON array ([]any or
// []string); other elements are skipped.
func stringList(v any) []string {
	switch x := v.(type) {
	case []string:
		return slices.Clone(x)
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// trimSentinel returns err's text without the "<sentinel>: " prefix, for
// an *Error whose Err is already that sentinel.
func trimSentinel(err, sentinel error) string {
	s, prefix := err.Error(), sentinel.Error()+": "
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}
