package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia/compliance"
)

// complianceAuditRecordID is the record id given to audit_from_envelope
// records: the suite fixes no id and the record must be reproducible.
const complianceAuditRecordID = "00000000-0000-4000-8000-000000000000"

// execCompliance runs the compliance category: profile registry look-ups,
// receiver rules (validate_compliance), sender inheritance (apply_profile)
// and audit records (audit_from_envelope).
func execCompliance(_ *arsiaEnv, c *arsiaCase) error {
	reg := compliance.Default()
	strict, _ := c.Input["strict"].(bool)
	switch op := c.operation(""); op {
	case "get_profile":
		name, _ := c.Input["profile_name"].(string)
		_, ok := reg.Get(name)
		return expectEqual(c, "exists", ok)

	case "get_profile_names":
		want, ok := c.Expected["names"].([]any)
		if !ok {
			return errors.New("expected.names is missing")
		}
		var wantNames []string
		for _, n := range want {
			s, _ := n.(string)
			wantNames = append(wantNames, s)
		}
		slices.Sort(wantNames)
		if got := reg.Names(); !slices.Equal(got, wantNames) {
			return fmt.Errorf("names: got %v, want %v", got, wantNames)
		}
		return nil

	case "validate_compliance":
		env, err := caseEnvelope(c)
		if err != nil {
			return err
		}
		identity, _ := c.Input["identity_classification"].(string)
		var errs []string
		for _, v := range compliance.Validate(env, reg, compliance.Options{Strict: strict, IdentityClassification: identity}) {
			errs = append(errs, v.Code+": "+v.Message)
		}
		return expectValidity(c, errs)

	case "apply_profile":
		env, err := caseEnvelope(c)
		if err != nil {
			return err
		}
		out, warnings, err := compliance.Apply(env, reg, strict)
		if done, res := expectRaises(c, err); done {
			return res
		}
		return firstErr(
			expectSubset(c, "compliance_after", out["compliance"]),
			expectWarnings(c, warnings),
		)

	case "audit_from_envelope":
		env, err := caseEnvelope(c)
		if err != nil {
			return err
		}
		in := compliance.AuditInput{RecordID: complianceAuditRecordID}
		in.EventType, _ = c.Input["event_type"].(string)
		in.OperatorID, _ = c.Input["operator_id"].(string)
		if n, ok := c.Input["effective_retention_days"].(int); ok {
			in.RetentionDays = n
		}
		// The record's processing time is the envelope's ts unless the case
		// fixes one, so that the record does not depend on the clock.
		at, _ := c.Input["processed_at"].(string)
		if at == "" {
			at, _ = env["ts"].(string)
		}
		if in.ProcessedAt, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return fmt.Errorf("processed_at: %v", err)
		}
		rec, err := compliance.NewAuditRecord(env, reg, in)
		if done, res := expectRaises(c, err); done {
			return res
		}
		return expectSubset(c, "audit", rec)
	}
	return fmt.Errorf("%w: compliance operation %q", errUnsupported, c.operation(""))
}

// caseEnvelope returns input.envelope.
func caseEnvelope(c *arsiaCase) (map[string]any, error) {
	env, ok := c.Input["envelope"].(map[string]any)
	if !ok {
		return nil, errors.New("input.envelope is missing or not an object")
	}
	return env, nil
}

// expectSubset checks that every member of expected[key] (an object) equals
// the same member of got, compared as JSON.
func expectSubset(c *arsiaCase, key string, got any) error {
	want, ok := c.Expected[key].(map[string]any)
	if !ok {
		return nil
	}
	gotObj, ok := normalize(got).(map[string]any)
	if !ok {
		return fmt.Errorf("%s: got %s, not an object", key, compactJSON(got))
	}
	for k, w := range want {
		g, present := gotObj[k]
		if !present || !sameJSON(g, w) {
			return fmt.Errorf("%s.%s: got %s, want %s", key, k, compactJSON(g), compactJSON(w))
		}
	}
	return nil
}

// expectWarnings applies expected.warning_contains (case-insensitive
// substring of some warning) and expected.warning_count.
func expectWarnings(c *arsiaCase, warnings []string) error {
	if err := expectEqual(c, "warning_count", len(warnings)); err != nil {
		return err
	}
	kw, ok := c.Expected["warning_contains"].(string)
	if !ok {
		return nil
	}
	for _, w := range warnings {
		if strings.Contains(strings.ToLower(w), strings.ToLower(kw)) {
			return nil
		}
	}
	data, _ := json.Marshal(warnings)
	return fmt.Errorf("no warning contains %q: %s", kw, data)
}
