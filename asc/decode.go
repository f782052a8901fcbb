package asc

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/custos-runtime/custos/jcs"
)

// Parse decodes an envelope the way a Core consumer must: leniently. Unknown
// members are accepted and kept, null optional members are treated as absent,
// unknown codes, scopes and enumeration values are accepted (Validate judges
// them).
//
// Parse is strict where leniency would be unsafe: the input must be I-JSON
// (no duplicate member names, valid UTF-8; see package jcs) within
// MaxDocumentSize and MaxNesting, known members must have their JSON types,
// the cause tree must stay within MaxCauseDepth and MaxCauseNodes, and the
// status object with its terminal flag must be present, because a consumer
// must act on the explicit flag and may not infer it. Failures are a
// *ValidationError wrapping ErrMalformed.
func Parse(data []byte) (*Envelope, error) {
	env, iss := decodeEnvelope(data)
	if err := iss.err(); err != nil {
		return nil, err
	}
	return env, nil
}

// decodeEnvelope returns a best-effort envelope (nil when the document is
// not a JSON object) and the decoding issues.
func decodeEnvelope(data []byte) (*Envelope, *issues) {
	o, iss := decodeObject(data)
	if o == nil {
		return nil, iss
	}
	return o.d.envelope(o.m, "", false), iss
}

// decodeObject strictly decodes a document that must be a JSON object and
// returns a reader for its members (nil on failure) and the issues so far.
func decodeObject(data []byte) (*obj, *issues) {
	var iss issues
	v, ok := decodeJSON(data, &iss)
	if !ok {
		return nil, &iss
	}
	d := &decoder{iss: &iss}
	m, ok := d.object(v, "")
	if !ok {
		return nil, &iss
	}
	return d.reader(m, ""), &iss
}

// decodeJSON is the single strict-decoding entry point of the package.
func decodeJSON(data []byte, iss *issues) (any, bool) {
	v, err := (&jcs.Options{MaxDepth: MaxNesting, MaxSize: MaxDocumentSize}).Decode(data)
	if err != nil {
		path := ""
		var je *jcs.Error
		if errors.As(err, &je) {
			path = je.Path
		}
		iss.add(LevelError, path, RuleJSON, ErrMalformed, "%v", err)
		return nil, false
	}
	return v, true
}

// decoder converts the generic tree produced by jcs into typed values,
// recording every type problem instead of stopping at the first.
type decoder struct {
	iss  *issues
	walk treeWalk
}

// obj reads the members of one JSON object, remembering which are known.
type obj struct {
	d     *decoder
	m     map[string]any
	path  string
	known []string
}

func (d *decoder) object(v any, path string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		d.iss.add(LevelError, path, RuleType, ErrMalformed, "must be an object, not %s", jsonType(v))
	}
	return m, ok
}

func (d *decoder) reader(m map[string]any, path string) *obj {
	return &obj{d: d, m: m, path: path}
}

// get returns a known member; null counts as absent.
func (o *obj) get(name string) (any, bool) {
	o.known = append(o.known, name)
	v, ok := o.m[name]
	return v, ok && v != nil
}

func (o *obj) at(name string) string { return o.path + "/" + pointerEscape(name) }

func (o *obj) mismatch(name, want string, v any) {
	o.d.iss.add(LevelError, o.at(name), RuleType, ErrMalformed, "must be %s, not %s", want, jsonType(v))
}

func (o *obj) str(name string) string {
	v, ok := o.get(name)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		o.mismatch(name, "a string", v)
	}
	return s
}

func (o *obj) boolean(name string) (value, present bool) {
	v, ok := o.get(name)
	if !ok {
		return false, false
	}
	b, isBool := v.(bool)
	if !isBool {
		o.mismatch(name, "a boolean", v)
	}
	return b, true
}

// maxExactInt is the largest integer a double carries exactly (I-JSON).
const maxExactInt = 1<<53 - 1

func (o *obj) integer(name string) int64 {
	v, ok := o.get(name)
	if !ok {
		return 0
	}
	if n, isNum := v.(json.Number); isNum {
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil && i >= -maxExactInt && i <= maxExactInt {
			return i
		}
		if f, err := n.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) <= maxExactInt {
			return int64(f)
		}
	}
	o.mismatch(name, "an integer", v)
	return 0
}

func (o *obj) number(name string) (float64, bool) {
	v, ok := o.get(name)
	if !ok {
		return 0, false
	}
	if n, isNum := v.(json.Number); isNum {
		if f, err := n.Float64(); err == nil {
			return f, true
		}
	}
	o.mismatch(name, "a number", v)
	return 0, false
}

func (o *obj) child(name string) *obj {
	v, ok := o.get(name)
	if !ok {
		return nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		o.mismatch(name, "an object", v)
		return nil
	}
	return o.d.reader(m, o.at(name))
}

// array returns the elements of an array member; present arrays are never
// nil, so an empty array survives a round trip.
func (o *obj) array(name string) ([]any, bool) {
	v, ok := o.get(name)
	if !ok {
		return nil, false
	}
	a, isArr := v.([]any)
	if !isArr {
		o.mismatch(name, "an array", v)
		return nil, false
	}
	return a, true
}

// any returns a known member whose shape is open.
func (o *obj) any(name string) any {
	v, _ := o.get(name)
	return v
}

// rest returns the unknown members, or nil when there are none.
func (o *obj) rest() map[string]any {
	var out map[string]any
	for k, v := range o.m {
		if isKnown(o.known, k) {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[k] = v
	}
	return out
}

func isKnown(known []string, k string) bool {
	for _, n := range known {
		if n == k {
			return true
		}
	}
	return false
}

func (d *decoder) envelope(m map[string]any, path string, nested bool) *Envelope {
	o := d.reader(m, path)
	e := &Envelope{
		SpecVersion: o.str("spec_version"),
		OccurredAt:  o.str("occurred_at"),
		Issuer:      o.str("issuer"),
		ObservedBy:  o.str("observed_by"),
		Authority:   o.str("authority"),
	}
	if s := o.child("status"); s != nil {
		e.Status = d.status(s, !nested)
	} else if m["status"] == nil {
		d.iss.add(LevelError, o.at("status"), RuleRequired, ErrMalformed, "status is required")
	}
	if c := o.child("message"); c != nil {
		e.Message = &Message{User: c.str("user"), Developer: c.str("developer"), Locale: c.str("locale")}
		e.Message.Extra = c.rest()
	}
	if c := o.child("retry"); c != nil {
		e.Retry = d.retry(c)
	}
	if items, ok := o.array("remediation"); ok {
		e.Remediation = make([]Remediation, 0, len(items))
		for i, item := range items {
			p := o.at("remediation") + "/" + strconv.Itoa(i)
			if im, ok := d.object(item, p); ok {
				r := d.reader(im, p)
				e.Remediation = append(e.Remediation, Remediation{Action: r.str("action"), Params: r.rest()})
			}
		}
	}
	if c := o.child("provenance"); c != nil {
		e.Provenance = &Provenance{
			RunID: c.str("run_id"), StepID: c.str("step_id"), AgentID: c.str("agent_id"),
			ToolCallID: c.str("tool_call_id"), ProviderCode: c.str("provider_code"),
			PolicyID: c.str("policy_id"), EvaluatorID: c.str("evaluator_id"),
			TraceID: c.str("trace_id"), SpanID: c.str("span_id"),
		}
		e.Provenance.Extra = c.rest()
	}
	if v, ok := o.get("confidence"); ok {
		e.Confidence = d.confidence(v, o.at("confidence"))
	}
	if items, ok := o.array("causes"); ok {
		e.Causes = make([]Cause, 0, len(items))
		for i, item := range items {
			if c, ok := d.cause(item, o.at("causes")+"/"+strconv.Itoa(i)); ok {
				e.Causes = append(e.Causes, c)
			}
		}
	}
	if items, ok := o.array("conditions"); ok {
		e.Conditions = make([]Condition, 0, len(items))
		for i, item := range items {
			if c, ok := d.condition(item, o.at("conditions")+"/"+strconv.Itoa(i)); ok {
				e.Conditions = append(e.Conditions, c)
			}
		}
	}
	if items, ok := o.array("events"); ok {
		e.Events = make([]Event, 0, len(items))
		for i, item := range items {
			p := o.at("events") + "/" + strconv.Itoa(i)
			if im, ok := d.object(item, p); ok {
				e.Events = append(e.Events, d.event(d.reader(im, p)))
			}
		}
	}
	if c := o.child("details"); c != nil {
		e.Details = c.m
	}
	if c := o.child("integrity"); c != nil {
		verified, _ := c.boolean("verified")
		e.Integrity = &Integrity{Method: c.str("method"), KeyID: c.str("key_id"), Verified: verified}
		e.Integrity.Extra = c.rest()
	}
	e.Extra = o.rest()
	return e
}

// status decodes a status object. The terminal flag is required of a primary
// status only; elsewhere an absent flag reads as false.
func (d *decoder) status(o *obj, primary bool) Status {
	s := Status{
		Code:     Code(o.integer("code")),
		Name:     o.str("name"),
		Kind:     Kind(o.str("kind")),
		Scope:    Scope(o.str("scope")),
		Class:    Class(o.str("class")),
		Phase:    Phase(o.str("phase")),
		Severity: Severity(o.str("severity")),
	}
	terminal, present := o.boolean("terminal")
	if !present && primary {
		d.iss.add(LevelError, o.at("terminal"), RuleRequired, ErrMalformed, "terminal is required: consumers may not infer it")
	}
	s.Terminal = terminal
	s.Extra = o.rest()
	return s
}

func (d *decoder) retry(o *obj) *Retry {
	r := &Retry{
		AfterMS:              o.integer("after_ms"),
		Strategy:             o.str("strategy"),
		Attempt:              o.integer("attempt"),
		MaxAttempts:          o.integer("max_attempts"),
		Deadline:             o.str("deadline"),
		IdempotencyKey:       o.str("idempotency_key"),
		SideEffectState:      SideEffectState(o.str("side_effect_state")),
		ReconciliationAction: o.any("reconciliation_action"),
	}
	r.Retryable, _ = o.boolean("retryable")
	r.Safe, _ = o.boolean("safe")
	r.Extra = o.rest()
	return r
}

func (d *decoder) confidence(v any, path string) *Confidence {
	m, ok := v.(map[string]any)
	if !ok {
		if _, isNum := v.(json.Number); isNum {
			d.iss.add(LevelError, path, RuleConfidenceObject, ErrMalformed,
				"a bare number is not interoperable: name the metric, value and method")
		} else {
			d.iss.add(LevelError, path, RuleType, ErrMalformed, "must be an object, not %s", jsonType(v))
		}
		return nil
	}
	o := d.reader(m, path)
	c := &Confidence{
		Metric:           o.str("metric"),
		Method:           o.str("method"),
		EvaluatorVersion: o.str("evaluator_version"),
		EvidenceSetID:    o.str("evidence_set_id"),
	}
	value, ok := o.number("value")
	if !ok && m["value"] == nil {
		d.iss.add(LevelError, o.at("value"), RuleConfidence, ErrMalformed, "value is required")
	}
	c.Value = value
	if t, ok := o.number("threshold"); ok {
		c.Threshold = &t
	}
	if b, ok := o.boolean("calibrated"); ok {
		c.Calibrated = &b
	}
	if r := o.child("range"); r != nil {
		lo, _ := r.number("minimum")
		hi, _ := r.number("maximum")
		c.Range = &ConfidenceRange{Minimum: lo, Maximum: hi}
		c.Range.Extra = r.rest()
	}
	c.Extra = o.rest()
	return c
}

// nested decodes an envelope below the root under the tree limits.
func (d *decoder) nested(m map[string]any, path string) (*Envelope, bool) {
	if !d.enter(path) {
		return nil, false
	}
	defer d.walk.leave(nil)
	return d.envelope(m, path, true), true
}

func (d *decoder) enter(path string) bool {
	if err := d.walk.enter(nil); err != nil {
		var le *treeLimitError
		errors.As(err, &le)
		d.iss.add(LevelError, path, le.rule, ErrCauseTree, "%s", le.msg)
		return false
	}
	return true
}

func (d *decoder) cause(v any, path string) (Cause, bool) {
	m, ok := d.object(v, path)
	if !ok {
		return Cause{}, false
	}
	if _, isEnvelope := m["status"]; isEnvelope {
		env, ok := d.nested(m, path)
		return Cause{Envelope: env}, ok
	}
	if !d.enter(path) {
		return Cause{}, false
	}
	d.walk.leave(nil)
	o := d.reader(m, path)
	r := &CauseRef{Ref: o.str("ref"), Code: Code(o.integer("code")), Name: o.str("name"), Scope: Scope(o.str("scope"))}
	r.Extra = o.rest()
	return Cause{Ref: r}, true
}

func (d *decoder) condition(v any, path string) (Condition, bool) {
	m, ok := d.object(v, path)
	if !ok {
		return Condition{}, false
	}
	if _, isEnvelope := m["status"]; isEnvelope {
		env, ok := d.nested(m, path)
		return Condition{Envelope: env}, ok
	}
	s := d.status(d.reader(m, path), false)
	return Condition{Status: &s}, true
}

func (d *decoder) event(o *obj) Event {
	ev := Event{
		Code:       Code(o.integer("code")),
		Name:       o.str("name"),
		OccurredAt: o.str("occurred_at"),
		Kind:       Kind(o.str("kind")),
		Scope:      Scope(o.str("scope")),
	}
	ev.Extra = o.rest()
	return ev
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "an unsupported value"
}

// pointerEscape escapes one RFC 6901 reference token.
func pointerEscape(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
