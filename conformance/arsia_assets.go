package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/assets"
)

// execAssets runs the assets category (ARSIA-Assets): transfer request,
// receipt and reversal validation, the escrow lifecycle, two-party
// approval and separation of duties, PSD2 SCA, DORA incidents, the MiFID II
// retention floor and the audit builders, all through package
// arsia/assets. Vector cases (INV-09, INV-12, INV-13) take the document
// from the vector: an envelope's payload.args, or a schema vector's data.
func execAssets(env *arsiaEnv, c *arsiaCase) error {
	in := c.Input
	switch op := c.operation(""); op {
	case "validate_transfer_request":
		if _, ok := in["vector_id"]; ok {
			msg, data, err := assetsVectorDoc(env, c)
			if err != nil {
				return err
			}
			if msg != nil {
				return expectAssets(c, assets.ValidateTransferRequestMessage(msg))
			}
			return expectAssets(c, assets.ValidateTransferRequest(data))
		}
		return expectAssets(c, assets.ValidateTransferRequest(assetsMap(in, "args")))
	case "validate_transfer_receipt":
		return expectAssets(c, assets.ValidateTransferReceipt(assetsMap(in, "result")))
	case "validate_transfer_reversal":
		args := assetsMap(in, "args")
		if _, ok := in["vector_id"]; ok {
			msg, data, err := assetsVectorDoc(env, c)
			if err != nil {
				return err
			}
			args = data
			if msg != nil {
				payload, _ := msg["payload"].(map[string]any)
				args, _ = payload["args"].(map[string]any)
			}
		}
		errs := assets.ValidateTransferReversal(args)
		if pre, ok := in["precondition"].(map[string]any); ok {
			rc, err := assetsReversalContext(pre)
			if err != nil {
				return err
			}
			errs = append(errs, assets.CheckReversalPrecondition(args, rc)...)
		}
		return expectAssets(c, errs)
	case "validate_reversal_precondition":
		args := assetsMap(in, "reversal_args")
		rc, err := assetsReversalContext(in)
		if err != nil {
			return err
		}
		errs := append(assets.ValidateTransferReversal(args), assets.CheckReversalPrecondition(args, rc)...)
		return expectAssets(c, errs)
	case "validate_escrow_conditions":
		ts, _ := in["envelope_ts"].(string)
		return expectAssets(c, assets.ValidateEscrowConditions(assetsMap(in, "conditions"), ts))
	case "escrow_transition":
		from, _ := in["from_state"].(string)
		to, _ := in["to_state"].(string)
		var errs []*assets.Error
		if err := assets.EscrowTransition(assets.EscrowState(from), assets.EscrowState(to)); err != nil {
			var e *assets.Error
			if !errors.As(err, &e) {
				return fmt.Errorf("EscrowTransition returned %T, not *assets.Error", err)
			}
			errs = append(errs, e)
		}
		return expectAssets(c, errs)
	case "two_party_auth":
		initiator, _ := in["initiator_agent_id"].(string)
		approver, _ := in["approver_agent_id"].(string)
		return expectAssets(c, assets.CheckTwoPartyApproval(initiator, approver, assetsStrings(in, "approver_capabilities")))
	case "requires_psd2_sca":
		risk, ok := in["risk_level"].(int)
		if !ok {
			return fmt.Errorf("%w: input.risk_level is not an integer", errUnsupported)
		}
		required, err := assets.RequiresSCA(risk)
		if done, res := expectRaises(c, err); done {
			return res
		}
		return expectEqual(c, "required", required)
	case "classify_dora_incident":
		reason, _ := in["failure_reason"].(string)
		var got any
		if t, ok := assets.ClassifyDORAIncident(reason); ok {
			got = string(t)
		}
		return expectEqual(c, "incident_type", got)
	case "build_dora_incident":
		var fields assets.DORAIncident
		inc, err := (*assets.DORAIncident)(nil), assetsDecode(in["fields"], &fields)
		if err == nil {
			inc, err = assets.BuildDORAIncident(fields)
		}
		if err := expectValidity(c, assetsErrTexts(err)); err != nil || inc == nil {
			return err
		}
		data, _ := inc.Payload()["data"].(map[string]any)
		return firstErr(expectEqual(c, "incident_type", data["incident_type"]),
			expectEqual(c, "severity", data["severity"]), assetsExpectKeys(c, data))
	case "validate_psd2_sca_factors":
		f := assets.SCAFactors{}
		f.Knowledge, _ = in["knowledge_factor_present"].(bool)
		f.Possession, _ = in["possession_factor_present"].(bool)
		if cnf, ok := in["cnf_claim"]; ok {
			m, isMap := cnf.(map[string]any)
			if !isMap {
				m = map[string]any{"invalid": cnf}
			}
			f.CNF = m
		}
		return expectAssets(c, assets.ValidateSCAFactors(f))
	case "enforce_mifid_retention":
		return expectValidity(c, assetsErrTexts(assets.EnforceMiFIDRetention(assetsMap(in, "envelope"), nil)))
	case "build_escrow_audit":
		kind, _ := in["sub_type"].(string)
		var fields assets.EscrowAuditFields
		var rec map[string]any
		err := assetsDecode(in["fields"], &fields)
		if err == nil {
			rec, err = assets.BuildEscrowAudit(assets.EscrowAuditKind(kind), fields, assetsNow(in))
		}
		return checkAssetsRecord(c, rec, err)
	case "build_reversal_audit":
		var fields assets.ReversalAuditFields
		var rec map[string]any
		err := assetsDecode(in["fields"], &fields)
		if err == nil {
			rec, err = assets.BuildReversalAudit(fields, assetsNow(in))
		}
		return checkAssetsRecord(c, rec, err)
	case "validate_escrow_dispute":
		args := assetsMap(in, "args")
		errs := assets.ValidateEscrowDispute(args)
		if sender, ok := in["sender_agent_id"].(string); ok {
			if e := assets.AuthorizeEscrowDispute(args, sender, assetsStrings(in, "escrow_parties")); e != nil {
				errs = append(errs, e)
			}
		}
		return expectAssets(c, errs)
	case "validate_escrow_cancel":
		errs := assets.ValidateEscrowCancel(assetsMap(in, "args"))
		if sender, ok := in["sender_agent_id"].(string); ok {
			from, _ := in["from_agent"].(string)
			if e := assets.AuthorizeEscrowCancel(sender, from); e != nil {
				errs = append(errs, e)
			}
		}
		return expectAssets(c, errs)
	case "validate_receipt_match":
		return expectAssets(c, assets.ValidateReceiptMatch(assetsMap(in, "request_args"), assetsMap(in, "receipt_result")))
	case "capability_risk_levels":
		return expectEqual(c, "levels", assets.CapabilityRiskLevels())
	case "is_sca_exempt":
		amount, err := assets.AmountFromJSON(in["amount"])
		if err != nil {
			return fmt.Errorf("input.amount: %v", err)
		}
		currency, _ := in["currency"].(string)
		recurring, _ := in["recurring"].(bool)
		exempt, reason := assets.IsSCAExempt(assets.SCAExemption{Amount: amount, Currency: currency, Recurring: recurring})
		var r any
		if reason != "" {
			r = reason
		}
		return firstErr(expectEqual(c, "exempt", exempt), expectEqual(c, "reason", r))
	case "validate_token_scope":
		var errs []*assets.Error
		if e := assets.ValidateTokenScope(assetsStrings(in, "scope")); e != nil {
			errs = append(errs, e)
		}
		return expectAssets(c, errs)
	default:
		return fmt.Errorf("%w: assets operation %q", errUnsupported, op)
	}
}

// expectAssets applies expectValidity to the errors' texts and, when
// expected.error_code is set, requires an error with that wire code.
func expectAssets(c *arsiaCase, errs []*assets.Error) error {
	texts := make([]string, len(errs))
	for i, e := range errs {
		texts[i] = e.Error()
	}
	if err := expectValidity(c, texts); err != nil {
		return err
	}
	if code, ok := c.Expected["error_code"].(string); ok && !assets.HasCode(errs, code) {
		codes := make([]string, len(errs))
		for i, e := range errs {
			codes[i] = e.Code
		}
		return fmt.Errorf("error_code: want %q, got codes %v", code, codes)
	}
	return nil
}

// checkAssetsRecord applies validity, event_type, sub_type, required_keys
// and values to a built audit record.
func checkAssetsRecord(c *arsiaCase, rec map[string]any, err error) error {
	if err := expectValidity(c, assetsErrTexts(err)); err != nil || rec == nil {
		return err
	}
	if err := firstErr(expectEqual(c, "event_type", rec["event_type"]),
		expectEqual(c, "sub_type", rec["sub_type"]), assetsExpectKeys(c, rec)); err != nil {
		return err
	}
	want, _ := c.Expected["values"].(map[string]any)
	for k, w := range want {
		if !sameJSON(rec[k], w) {
			return fmt.Errorf("values.%s: got %s, want %s", k, compactJSON(rec[k]), compactJSON(w))
		}
	}
	return nil
}

// assetsExpectKeys checks expected.required_keys against the members of got.
func assetsExpectKeys(c *arsiaCase, got map[string]any) error {
	keys, _ := c.Expected["required_keys"].([]any)
	var missing []string
	for _, k := range keys {
		if s, _ := k.(string); s != "" {
			if _, ok := got[s]; !ok {
				missing = append(missing, s)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("required_keys missing: %s", strings.Join(missing, ", "))
	}
	return nil
}

// assetsVectorDoc returns the vector's envelope (Format A) or, for a
// schema vector, its data.
func assetsVectorDoc(env *arsiaEnv, c *arsiaCase) (msg, data map[string]any, err error) {
	v, err := env.vector(c)
	if err != nil {
		return nil, nil, err
	}
	if m, ok := v["message"].(map[string]any); ok {
		return m, nil, nil
	}
	if d, ok := v["data"].(map[string]any); ok {
		return nil, d, nil
	}
	return nil, nil, fmt.Errorf("vector %v has neither message nor data", v["id"])
}

// assetsReversalContext reads original_status, original_amount,
// already_reversed_total, settled_at and now from a case input.
func assetsReversalContext(in map[string]any) (assets.ReversalContext, error) {
	rc := assets.ReversalContext{Now: assetsNow(in)}
	rc.OriginalStatus, _ = in["original_status"].(string)
	if v, ok := in["original_amount"]; ok {
		a, err := assets.AmountFromJSON(v)
		if err != nil {
			return rc, fmt.Errorf("input.original_amount: %v", err)
		}
		rc.OriginalAmount = &a
	}
	if v, ok := in["already_reversed_total"]; ok {
		a, err := assets.AmountFromJSON(v)
		if err != nil {
			return rc, fmt.Errorf("input.already_reversed_total: %v", err)
		}
		rc.AlreadyReversed = a
	}
	if s, ok := in["settled_at"].(string); ok {
		t, err := arsia.ParseTimestamp(s)
		if err != nil {
			return rc, fmt.Errorf("input.settled_at: %v", err)
		}
		rc.SettledAt = t
	}
	return rc, nil
}

// assetsNow returns input.now (a wire timestamp) or the zero time.
func assetsNow(in map[string]any) time.Time {
	s, _ := in["now"].(string)
	t, _ := arsia.ParseTimestamp(s)
	return t
}

func assetsMap(in map[string]any, key string) map[string]any {
	m, _ := in[key].(map[string]any)
	return m
}

func assetsStrings(in map[string]any, key string) []string {
	list, _ := in[key].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// assetsDecode decodes a generic value into a struct through JSON,
// refusing unknown members.
func assetsDecode(v, into any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// assetsErrTexts returns err's text as a one-element list, or nil.
func assetsErrTexts(err error) []string {
	if err == nil {
		return nil
	}
	return []string{err.Error()}
}
